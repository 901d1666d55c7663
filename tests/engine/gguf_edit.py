"""Rewrite a GGUF file's metadata and keep its tensors: drop keys, set raw values.

For the conformance tests: a family's fixture with one key left out is the same
file byte for byte past the header, so whatever changes is the key's doing.
"""
from __future__ import annotations

import struct
from pathlib import Path

_SCALAR = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}  # bytes per GGUF value type
STR, ARR = 8, 9


def _skip_value(buf: bytes, pos: int, vtype: int) -> int:
    if vtype == STR:
        (n,) = struct.unpack_from("<Q", buf, pos)
        return pos + 8 + n
    if vtype == ARR:
        etype, count = struct.unpack_from("<IQ", buf, pos)
        pos += 12
        if etype in _SCALAR:
            return pos + count * _SCALAR[etype]
        for _ in range(count):
            pos = _skip_value(buf, pos, etype)
        return pos
    return pos + _SCALAR[vtype]


def _string(buf: bytes, pos: int) -> tuple[str, int]:
    (n,) = struct.unpack_from("<Q", buf, pos)
    return buf[pos + 8:pos + 8 + n].decode("utf-8", "replace"), pos + 8 + n


class GGUFLayout:
    """Where each part of a GGUF file lies: its key/value records (raw), tensor infos, data."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        buf = self.path.read_bytes()
        self.buf = buf
        magic, self.version, self.n_tensors, n_kv = struct.unpack_from("<4sIQQ", buf, 0)
        assert magic == b"GGUF", path
        pos = 24
        self.kvs: dict[str, bytes] = {}  # key -> the whole record (key, type, value)
        self.types: dict[str, int] = {}
        self.alignment = 32
        for _ in range(n_kv):
            start = pos
            key, pos = _string(buf, pos)
            (vtype,) = struct.unpack_from("<I", buf, pos)
            end = _skip_value(buf, pos + 4, vtype)
            if key == "general.alignment":
                (self.alignment,) = struct.unpack_from("<I", buf, pos + 4)
            self.kvs[key] = buf[start:end]
            self.types[key] = vtype
            pos = end
        self.tensors: dict[str, bytes] = {}  # name -> its info record up to (without) its data offset
        self.offsets: dict[str, int] = {}
        for _ in range(self.n_tensors):
            start = pos
            name, pos = _string(buf, pos)
            (n_dims,) = struct.unpack_from("<I", buf, pos)
            pos += 4 + 8 * n_dims + 4
            self.tensors[name] = buf[start:pos]
            (self.offsets[name],) = struct.unpack_from("<Q", buf, pos)
            pos += 8
        self.data = buf[pos + (-pos) % self.alignment:]
        ends = sorted(self.offsets.values()) + [len(self.data)]
        # each tensor's bytes with the padding after it: up to the next tensor's
        self.spans = {n: (o, next(e for e in ends if e > o)) for n, o in self.offsets.items()}

    def write(self, path: str | Path, drop: tuple[str, ...] = (), records: dict[str, bytes] | None = None,
              drop_tensors: tuple[str, ...] = ()) -> Path:
        """The file without the keys in `drop` and the tensors in `drop_tensors` (their bytes stay, unnamed),
        with `records` (key -> whole raw record) put in or replaced."""
        kvs = {k: v for k, v in self.kvs.items() if k not in drop}
        kvs.update(records or {})
        infos, chunks, at = [], [], 0  # the data stays contiguous, as llama.cpp's reader checks
        for name in sorted((n for n in self.tensors if n not in drop_tensors), key=self.offsets.get):
            lo, hi = self.spans[name]
            infos.append(self.tensors[name] + struct.pack("<Q", at))
            chunks.append(self.data[lo:hi])
            at += hi - lo
        head = struct.pack("<4sIQQ", b"GGUF", self.version, len(infos), len(kvs))
        body = head + b"".join(kvs.values()) + b"".join(infos)
        path = Path(path)
        path.write_bytes(body + b"\0" * ((-len(body)) % self.alignment) + b"".join(chunks))
        return path


def scalar_u32(layout: GGUFLayout, key: str) -> int | None:
    """The value of a uint32/int32 key, or None."""
    rec = layout.kvs.get(key)
    if rec is None or layout.types[key] not in (4, 5):
        return None
    (v,) = struct.unpack_from("<I", rec, len(rec) - 4)
    return v


def array_record(key: str, values: list[int]) -> bytes:
    """A whole key/value record: `key` as an array of uint32."""
    k = key.encode()
    return struct.pack("<Q", len(k)) + k + struct.pack("<IIQ", ARR, 4, len(values)) + struct.pack(
        f"<{len(values)}I", *values)
