"""Seed files for the coverage-guided GGUF fuzzer (engine/tools/fuzz_gguf.c): small, valid
files that reach every part of the reader, for libFuzzer to mutate.

    python -m tests.engine.gguf_seeds DIR      # writes the seeds into DIR (bench/fuzz_soak.sh)

- real headers: every metadata key of the real model files found here (the default model,
  and the fidelity models when pulled), with their real types and values, arrays cut to a
  few elements, and their real tensor names and types with each tensor shrunk to one block;
- generated ones: a file with one tensor of each ggml type, nested and string arrays, every
  scalar type, a custom `general.alignment`, version 2, an empty file, the tiny test model;
- each is a whole file (header, tensor infos, padding, data), a few KB at most.
"""
from __future__ import annotations

import struct
import sys
from pathlib import Path

from tests.engine.gguf_raw import (ARR, BOOL, F32, F64, I8, I16, I32, I64, STR, U8, U16, U32, U64, gstr, kv,
                                   tensor_info)

ARRAY_CAP = 6       # elements kept of each array (the real vocabularies are 262k tokens)
TENSOR_CAP = 24     # tensor infos kept of each real file
MAX_SEED = 16384    # bytes: libFuzzer mutates inputs up to the largest seed


def block(ttype: int) -> tuple[int, int]:
    """(elements, bytes) of one block of ggml type ttype, from the gguf package's table."""
    import gguf

    size, nbytes = gguf.GGML_QUANT_SIZES[gguf.GGMLQuantizationType(ttype)]
    return size, nbytes


def build(kvs: list[bytes], tensors: list[tuple[str, list[int], int, int]], *, version: int = 3,
          alignment: int = 32) -> bytes:
    """A whole file: header, metadata, tensor infos (name, shape, type, nbytes), padding, data."""
    infos, offset, sizes = [], 0, []
    for name, shape, ttype, nbytes in tensors:
        infos.append(tensor_info(name, shape, ttype, offset))
        sizes.append(nbytes)
        offset += -(-nbytes // alignment) * alignment
    head = b"GGUF" + struct.pack("<IQQ", version, len(tensors), len(kvs)) + b"".join(kvs) + b"".join(infos)
    head += b"\0" * (-len(head) % alignment)
    data = b""
    for i, nbytes in enumerate(sizes):
        data += bytes((i * 7 + j) & 0xFF for j in range(nbytes))
        data += b"\0" * (-len(data) % alignment)
    return head + data


SCALAR = {U8: "<B", I8: "<b", U16: "<H", I16: "<h", U32: "<I", I32: "<i", F32: "<f", BOOL: "<?", U64: "<Q",
          I64: "<q", F64: "<d"}


def from_real(path: Path) -> bytes:
    """A real file's metadata (arrays cut) and its first tensors, each one block of its type.
    Read here byte by byte: the gguf package's reader takes half a minute on a 262k-token vocabulary."""
    with open(path, "rb") as fh:
        head = fh.read(64 << 20)
    pos = 0

    def take(fmt: str):
        nonlocal pos
        v = struct.unpack_from(fmt, head, pos)
        pos += struct.calcsize(fmt)
        return v[0]

    def text() -> bytes:
        nonlocal pos
        n = take("<Q")
        pos += n
        return head[pos - n:pos]

    def val(vtype: int):
        nonlocal pos
        if vtype == STR:
            return text()
        if vtype == ARR:
            etype, n = take("<I"), take("<Q")
            items = [val(etype) for _ in range(n)] if etype in (STR, ARR) else None
            if items is None:  # numbers: read the kept ones, skip the rest
                size = struct.calcsize(SCALAR[etype])
                items = [struct.unpack_from(SCALAR[etype], head, pos + i * size)[0] for i in range(min(n, ARRAY_CAP))]
                pos += size * n
            return etype, items[:ARRAY_CAP]
        return take(SCALAR[vtype])

    assert head[:4] == b"GGUF"
    pos = 4
    _version, n_tensors, n_kv = take("<I"), take("<Q"), take("<Q")
    kvs, alignment = [], 32
    for _ in range(n_kv):
        key = text().decode("utf-8", "replace")
        vtype = take("<I")
        v = val(vtype)
        if vtype == STR and len(v) > 2048:
            v = v[:2048]
        if vtype == ARR and v[0] == ARR:
            continue  # arrays of arrays: the generated seeds carry them
        if key == "general.alignment":
            alignment = v
        kvs.append(kv(key, vtype, v))
    tensors = []
    for _ in range(min(n_tensors, TENSOR_CAP)):
        name = text().decode("utf-8", "replace")
        n_dims = take("<I")
        pos += 8 * n_dims
        ttype = take("<I")
        take("<Q")
        size, nbytes = block(ttype)
        tensors.append((name, [size], ttype, nbytes))
    return build(kvs, tensors, alignment=alignment)


ENGINE_TYPES = 43  # engine/src/ggml_types.h: GGML_TYPE_COUNT; newer ones are the "names no ggml type" error (none in gguf-py 0.x today: test_model_load covers ids 43 and 99)


def every_type(newer: bool = False) -> bytes:
    """One tensor of each ggml type the gguf package knows (the engine's, or those newer than
    the engine's table), 2-D and 1-D shapes."""
    import gguf

    tensors = []
    for t in gguf.GGMLQuantizationType:
        if (int(t) >= ENGINE_TYPES) != newer:
            continue
        size, nbytes = gguf.GGML_QUANT_SIZES[t]
        tensors.append((f"t.{t.name.lower()}", [size, 2] if int(t) % 2 else [size], int(t), nbytes * (2 if int(t) % 2 else 1)))
    return build([kv("general.architecture", STR, "llama")], tensors)


def every_value() -> bytes:
    kvs = [kv("general.architecture", STR, "llama"), kv("general.name", STR, "seed"),
           kv("llama.block_count", U32, 2), kv("llama.context_length", U64, 4096),
           kv("llama.embedding_length", I32, 64), kv("llama.attention.head_count", ARR, (I32, [2, 2])),
           kv("llama.rope.freq_base", F32, 10000.0), kv("n.f64", F64, 1.5), kv("n.u8", U8, 255), kv("n.i8", I8, -1),
           kv("n.u16", U16, 65535), kv("n.i16", I16, -2), kv("n.i64", I64, -(2**62)), kv("n.bool", BOOL, True),
           kv("n.nested", ARR, (ARR, [])), kv("n.empty", ARR, (U32, [])),
           kv("tokenizer.ggml.model", STR, "gpt2"), kv("tokenizer.ggml.pre", STR, "qwen2"),
           kv("tokenizer.ggml.tokens", ARR, (STR, ["a", "b", "<|im_start|>", "é", "", '"\\\n\x01'])),
           kv("tokenizer.ggml.scores", ARR, (F32, [0.0, -1.0, float("nan"), float("inf"), -0.5, 1e30])),
           kv("tokenizer.ggml.merges", ARR, (STR, ["a b"])),
           kv("tokenizer.chat_template", STR, "{{ messages }}")]
    f32, f16 = block(0), block(1)
    return build(kvs, [("token_embd.weight", [f32[0], 4], 0, f32[1] * 4), ("output_norm.weight", [4], 1, f16[1] * 4)])


def nested_arrays() -> bytes:
    # the gguf package cannot write arrays of arrays; gguf_raw can
    inner = struct.pack("<IQ", U32, 2) + struct.pack("<II", 1, 2)
    nested = gstr("n.nested") + struct.pack("<I", ARR) + struct.pack("<IQ", ARR, 2) + inner + inner
    strs = gstr("n.strs") + struct.pack("<I", ARR) + struct.pack("<IQ", ARR, 1) + struct.pack("<IQ", STR, 2) + gstr(
        "x") + gstr("")
    return build([kv("general.architecture", STR, "qwen2"), nested, strs], [])


def seeds() -> dict[str, bytes]:
    from tests.conftest import REAL_MODELS

    out = {"empty": b"", "magic": b"GGUF", "every_type": every_type(), "newer_type": every_type(newer=True),
           "every_value": every_value(),
           "nested": nested_arrays(),
           "v2": build([kv("general.architecture", STR, "gemma3")], [("a", [32], 0, 128)], version=2),
           "align64": build([kv("general.alignment", U32, 64), kv("general.architecture", STR, "llama")],
                            [("a", [32], 0, 128), ("b", [32], 8, 34)], alignment=64),
           "no_tensors": build([kv("general.architecture", STR, "llama")], [])}
    for path in real_files(REAL_MODELS):
        out[f"real_{path.stem}"] = from_real(path)
    return {name: data for name, data in out.items() if len(data) <= MAX_SEED}


def real_files(ids) -> list[Path]:
    """The real model files already on this machine (none is fetched for the seeds)."""
    from colibri import catalog
    from colibri.models import EMBEDDED_MODEL_ID, embedded_model_path

    found = []
    for model_id in ids:
        try:
            path = embedded_model_path(progress=False) if model_id == EMBEDDED_MODEL_ID else (catalog.known_path(model_id) if catalog.is_pulled(model_id) else None)
        except Exception:  # noqa: BLE001 - absent or unreadable: fewer seeds, never a failure
            continue
        if path and Path(path).is_file():
            found.append(Path(path))
    return found


def write(directory: Path) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, data in seeds().items():
        p = directory / f"{name}.gguf"
        p.write_bytes(data)
        paths.append(p)
    return paths


if __name__ == "__main__":
    for p in write(Path(sys.argv[1])):
        print(p, p.stat().st_size)
