"""Hundreds of truncated and bit-flipped GGUF files through the reader built
with AddressSanitizer + UBSan (engine/build/asan/gguf_check): each is opened
and fully walked; each gives OK or a named error, none crashes or leaks."""
from __future__ import annotations

import os
import random
import re
import subprocess

import numpy as np
import pytest

gguf = pytest.importorskip("gguf")

LINE = re.compile(r"^(OK |ERR (truncated|corrupt|not_gguf|unsupported_version|out_of_memory) )")


def write_base(path):
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_name("fuzz base")
    w.add_block_count(2)
    w.add_tokenizer_model("gpt2")
    w.add_token_list([f"tok{i}" for i in range(40)] + ["<|im_start|>", "é", ""])
    w.add_token_scores([float(i) for i in range(43)])
    w.add_key_value("n.nested", [[1, 2], [3]], gguf.GGUFValueType.ARRAY)
    w.add_key_value("n.f64", 1.5, gguf.GGUFValueType.FLOAT64)
    rng = np.random.default_rng(1)
    w.add_tensor("a", rng.standard_normal((2, 32)).astype(np.float32))
    w.add_tensor("b", rng.standard_normal(64).astype(np.float16))
    q = gguf.quants.quantize(rng.standard_normal((2, 64)).astype(np.float32), gguf.GGMLQuantizationType.Q8_0)
    w.add_tensor("c", q, raw_dtype=gguf.GGMLQuantizationType.Q8_0)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def variants(base: bytes, data_offset: int, seed: int = 1234):
    rng = random.Random(seed)
    out = {}
    # truncation at every byte of the header, and a spread through the data
    for n in range(0, data_offset, max(1, data_offset // 250)):
        out[f"cut{n}"] = base[:n]
    for n in range(data_offset, len(base), max(1, (len(base) - data_offset) // 20)):
        out[f"cutdata{n}"] = base[:n]
    # single bit flips in the header
    for i in range(200):
        pos = rng.randrange(data_offset)
        b = bytearray(base)
        b[pos] ^= 1 << rng.randrange(8)
        out[f"flip{i}_{pos}"] = bytes(b)
    # 8-byte fields overwritten with large or boundary values (counts, lengths, dims, offsets)
    for i in range(100):
        pos = rng.randrange(max(1, data_offset - 8))
        b = bytearray(base)
        b[pos:pos + 8] = rng.choice([b"\xff" * 8, b"\x00" * 8, b"\xff\xff\xff\x7f\0\0\0\0",
                                     (2**63).to_bytes(8, "little"), rng.randbytes(8)])
        out[f"patch{i}_{pos}"] = bytes(b)
    # bursts of random bytes
    for i in range(50):
        pos = rng.randrange(data_offset)
        b = bytearray(base)
        k = rng.randrange(1, 32)
        b[pos:pos + k] = rng.randbytes(k)
        out[f"burst{i}_{pos}"] = bytes(b)
    return out


def test_fuzzed_files_never_crash(tmp_path, asan_gguf_check):
    base_path = tmp_path / "base.gguf"
    write_base(base_path)
    base = base_path.read_bytes()
    reader = gguf.GGUFReader(base_path)
    data_offset = reader.data_offset
    data_end = max(t.data_offset + t.n_bytes for t in reader.tensors)
    cases = variants(base, data_offset)
    assert len(cases) >= 500
    paths = []
    for name, data in cases.items():
        p = tmp_path / f"{name}.gguf"
        p.write_bytes(data)
        paths.append(p)
    env = {**os.environ, "ASAN_OPTIONS": "detect_leaks=1:abort_on_error=0:exitcode=66",
           "UBSAN_OPTIONS": "print_stacktrace=1:halt_on_error=1"}
    proc = subprocess.run([str(asan_gguf_check)], input="\n".join(map(str, [base_path, *paths])),
                          capture_output=True, text=True, errors="replace", env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert "runtime error" not in proc.stderr and "Sanitizer" not in proc.stderr, proc.stderr[-4000:]
    lines = proc.stdout.splitlines()
    assert len(lines) == len(paths) + 1, "the checker stopped early"
    assert lines[0] == f"OK {base_path}"
    by_path = {}
    for line in lines:
        assert LINE.match(line), line
        path = line.split(" ", 2)[1] if line.startswith("OK") else line.split(" ", 3)[2].rstrip(":")
        by_path[path] = line
    # every cut before the end of the last tensor's data is an error; the rest is padding
    n_err = 0
    for p in paths:
        if p.name.startswith("cut"):
            n = len(cases[p.stem])
            if n < data_end:
                assert by_path[str(p)].startswith("ERR"), by_path[str(p)]
        n_err += by_path[str(p)].startswith("ERR")
    assert n_err > len(paths) // 2
