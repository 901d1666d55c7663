"""Joining a split GGUF (llama.cpp's gguf-split: NAME-00001-of-00003.gguf, ...) into one file.

    merge_split([part1, part2, part3], target)

Each part is a GGUF of its own: the first holds the metadata, every part some
tensors and their data, and split.no / split.count / split.tensors.count say
how they belong together. The join is what `llama-gguf-split --merge` writes:
the first part's metadata without the split.* keys, every part's tensor
infos in order with offsets into one data section, then the data, each
tensor aligned. The engine's reader checks the result before it gets its
name (a part that is missing, repeated or from another model is a named
error).
"""
from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Callable

from colibri.errors import ColiError

MAGIC = b"GGUF"
# GGUF value types: fixed sizes (8: string, 9: array are read apart)
FIXED = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
STRING, ARRAY = 8, 9
COPY_CHUNK = 8 << 20


@dataclass
class Tensor:
    name: bytes
    info_tail: bytes  # n_dims, dims, type: copied as they are
    offset: int  # in its part's data section
    nbytes: int


@dataclass
class Header:
    version: int
    kv: list[tuple[str, bytes]]  # key, the whole entry's bytes
    tensors: list[Tensor]
    data_offset: int
    alignment: int


def _u64(f: BinaryIO) -> int:
    return struct.unpack("<Q", _read(f, 8))[0]


def _u32(f: BinaryIO) -> int:
    return struct.unpack("<I", _read(f, 4))[0]


def _read(f: BinaryIO, n: int) -> bytes:
    data = f.read(n)
    if len(data) != n:
        raise ColiError(f"truncated: {getattr(f, 'name', 'a part')} ends inside its header")
    return data


def _skip_value(f: BinaryIO, kind: int) -> None:
    if kind in FIXED:
        _read(f, FIXED[kind])
    elif kind == STRING:
        _read(f, _u64(f))
    elif kind == ARRAY:
        inner, n = _u32(f), _u64(f)
        if inner in FIXED:
            _read(f, FIXED[inner] * n)
        else:
            for _ in range(n):
                _skip_value(f, inner)
    else:
        raise ColiError(f"corrupt: GGUF value type {kind} in {getattr(f, 'name', 'a part')}")


def read_header(path: Path) -> Header:
    """The metadata entries (as bytes), the tensor infos and where the data starts."""
    from colibri.engine import GGUFFile

    with GGUFFile(path) as g:  # the engine's bounds-checked reader first: sizes and alignment
        sizes = {t.name: t.nbytes for t in g.tensors()}
        data_offset, alignment = g.data_offset, g.alignment
    with open(path, "rb") as f:
        if _read(f, 4) != MAGIC:
            raise ColiError(f"not_gguf: {path}")
        version = _u32(f)
        n_tensors, n_kv = _u64(f), _u64(f)
        kv = []
        for _ in range(n_kv):
            start = f.tell()
            key = _read(f, _u64(f)).decode("utf-8", "replace")
            _skip_value(f, _u32(f))
            end = f.tell()
            f.seek(start)
            kv.append((key, f.read(end - start)))
        tensors = []
        for _ in range(n_tensors):
            name = _read(f, _u64(f))
            start = f.tell()
            n_dims = _u32(f)
            _read(f, 8 * n_dims + 4)
            end = f.tell()
            f.seek(start)
            tail = f.read(end - start)
            offset = _u64(f)
            tensors.append(Tensor(name, tail, offset, sizes[name.decode("utf-8", "replace")]))
    return Header(version, kv, tensors, data_offset, alignment)


def _pad(n: int, alignment: int) -> int:
    return (alignment - n % alignment) % alignment


def merge_split(parts: list[Path], target: Path, progress: Callable[[int, int], None] | None = None) -> Path:
    """Join the parts (in order) into target, written under a temporary name and checked by the
    engine's reader before it is renamed into place."""
    from colibri.engine import GGUFFile

    headers = [read_header(p) for p in parts]
    first = headers[0]
    count = next((struct.unpack("<H", v[-2:])[0] for k, v in first.kv if k == "split.count"), None)
    if count is not None and count != len(parts):
        raise ColiError(f"incomplete_split: {parts[0].name} says {count} parts, {len(parts)} given")
    alignment = first.alignment
    kv = [entry for key, entry in first.kv if not key.startswith("split.")]
    tensors = [(h, t, p) for h, p in zip(headers, parts) for t in h.tensors]
    names = [t.name for _, t, _ in tensors]
    if len(set(names)) != len(names):
        raise ColiError("corrupt: a tensor appears in two parts (parts of two different models?)")
    out_offsets, at = [], 0
    for _, t, _ in tensors:
        out_offsets.append(at)
        at += t.nbytes + _pad(t.nbytes, alignment)
    total = at
    tmp = target.with_name(target.name + ".joining")
    try:
        with open(tmp, "wb") as out:
            out.write(MAGIC + struct.pack("<IQQ", first.version, len(tensors), len(kv)))
            for entry in kv:
                out.write(entry)
            for (_, t, _), off in zip(tensors, out_offsets):
                out.write(struct.pack("<Q", len(t.name)) + t.name + t.info_tail + struct.pack("<Q", off))
            out.write(b"\0" * _pad(out.tell(), alignment))
            done = 0
            for h, t, p in tensors:
                with open(p, "rb") as src:
                    src.seek(h.data_offset + t.offset)
                    left = t.nbytes
                    while left:
                        block = src.read(min(left, COPY_CHUNK))
                        if not block:
                            raise ColiError(f"truncated: {p.name} ends inside tensor {t.name.decode()}")
                        out.write(block)
                        left -= len(block)
                out.write(b"\0" * _pad(t.nbytes, alignment))
                done += t.nbytes
                if progress:
                    progress(done, total)
        with GGUFFile(tmp) as g:  # the reader accepts it, with every tensor
            if g.n_tensors != len(tensors):
                raise ColiError(f"corrupt: the joined file has {g.n_tensors} tensors, expected {len(tensors)}")
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
    return target
