"""A byte-level GGUF builder for hostile files: every field settable, nothing checked.

gguf.GGUFWriter refuses to write broken files; these tests need exactly those.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass, field

U8, I8, U16, I16, U32, I32, F32, BOOL, STR, ARR, U64, I64, F64 = range(13)
FMT = {U8: "<B", I8: "<b", U16: "<H", I16: "<h", U32: "<I", I32: "<i", F32: "<f", BOOL: "<?", U64: "<Q",
       I64: "<q", F64: "<d"}


def gstr(s: str | bytes, length: int | None = None) -> bytes:
    b = s.encode() if isinstance(s, str) else s
    return struct.pack("<Q", len(b) if length is None else length) + b


def value(vtype: int, v) -> bytes:
    """Encode a value of vtype (without the type tag); arrays are (elem_type, [items])."""
    if vtype == STR:
        return gstr(v)
    if vtype == ARR:
        et, items = v
        return struct.pack("<IQ", et, len(items)) + b"".join(value(et, i) for i in items)
    return struct.pack(FMT[vtype], v)


def kv(key: str, vtype: int, v) -> bytes:
    return gstr(key) + struct.pack("<I", vtype) + value(vtype, v)


def tensor_info(name: str, shape: list[int], ttype: int, offset: int) -> bytes:
    return gstr(name) + struct.pack("<I", len(shape)) + b"".join(struct.pack("<Q", d) for d in shape) + struct.pack(
        "<IQ", ttype, offset
    )


@dataclass
class RawGGUF:
    version: int = 3
    kvs: list[bytes] = field(default_factory=list)
    tensors: list[bytes] = field(default_factory=list)
    data: bytes = b""
    alignment: int = 32
    n_kv: int | None = None  # override the declared counts
    n_tensors: int | None = None
    magic: bytes = b"GGUF"

    def build(self) -> bytes:
        head = self.magic + struct.pack(
            "<IQQ",
            self.version,
            len(self.tensors) if self.n_tensors is None else self.n_tensors,
            len(self.kvs) if self.n_kv is None else self.n_kv,
        )
        body = head + b"".join(self.kvs) + b"".join(self.tensors)
        pad = (-len(body)) % self.alignment
        return body + b"\0" * pad + self.data
