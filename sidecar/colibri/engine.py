"""The binding to the C engine: the ONLY module that imports the cffi module.

Everything above it sees plain Python objects (dicts, lists, bytes) and
`EngineError`s carrying the engine's stable error name.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any, Iterator

from colibri._engine import ffi, lib
from colibri.errors import EngineError

# Type names by ggml id, for tensor infos (ids are part of the GGUF format).
GGML_TYPE_NAMES = {
    0: "F32", 1: "F16", 2: "Q4_0", 3: "Q4_1", 6: "Q5_0", 7: "Q5_1", 8: "Q8_0", 9: "Q8_1",
    10: "Q2_K", 11: "Q3_K", 12: "Q4_K", 13: "Q5_K", 14: "Q6_K", 15: "Q8_K", 16: "IQ2_XXS",
    17: "IQ2_XS", 18: "IQ3_XXS", 19: "IQ1_S", 20: "IQ4_NL", 21: "IQ3_S", 22: "IQ2_S",
    23: "IQ4_XS", 24: "I8", 25: "I16", 26: "I32", 27: "I64", 28: "F64", 29: "IQ1_M",
    30: "BF16", 34: "TQ1_0", 35: "TQ2_0", 39: "MXFP4",
}


def version() -> str:
    return ffi.string(lib.colibri_version()).decode()


def build_info() -> str:
    return ffi.string(lib.colibri_build_info()).decode()


def cpu_features() -> str:
    return ffi.string(lib.colibri_cpu_features()).decode()


def last_error() -> EngineError:
    """The calling thread's last engine failure as an exception."""
    code = lib.colibri_last_error_code()
    name = ffi.string(lib.colibri_error_name(code)).decode()
    message = ffi.string(lib.colibri_last_error()).decode("utf-8", "replace")
    return EngineError(name, message or name)


def _read_json(fill) -> Any:
    """Call a C function with the (out, cap) -> needed-length convention, growing the buffer."""
    cap = 4096
    while True:
        buf = ffi.new("char[]", cap)
        n = fill(buf, cap)
        if n < 0:
            raise last_error()
        if n < cap:
            return json.loads(ffi.buffer(buf, n)[:].decode("utf-8"))
        cap = n + 1


@dataclass(frozen=True)
class TensorInfo:
    name: str
    type: str
    shape: tuple[int, ...]  # ne[0] first, as GGUF stores it
    offset: int  # from the start of the data section
    nbytes: int

    @property
    def n_elements(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n


class GGUFFile:
    """A GGUF file opened by the engine's bounds-checked reader (metadata only)."""

    def __init__(self, path: str | os.PathLike[str]):
        self.path = os.fspath(path)
        handle = lib.colibri_gguf_open(self.path.encode())
        if handle == ffi.NULL:
            raise last_error()
        self._g = ffi.gc(handle, lib.colibri_gguf_close)

    def close(self) -> None:
        if self._g is not None:
            ffi.release(self._g)
            self._g = None

    def __enter__(self) -> "GGUFFile":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def version(self) -> int:
        return lib.colibri_gguf_version(self._g)

    @property
    def n_tensors(self) -> int:
        return lib.colibri_gguf_n_tensors(self._g)

    @property
    def alignment(self) -> int:
        return lib.colibri_gguf_alignment(self._g)

    @property
    def data_offset(self) -> int:
        return lib.colibri_gguf_data_offset(self._g)

    def describe(self) -> dict[str, Any]:
        return _read_json(lambda buf, cap: lib.colibri_gguf_describe(self._g, buf, cap))

    def kv(self, index: int, max_array: int = -1) -> dict[str, Any]:
        """Metadata entry `index`: {"key", "type", "value"} (+ "n", "truncated" for arrays)."""
        return _read_json(lambda buf, cap: lib.colibri_gguf_kv_json(self._g, index, max_array, buf, cap))

    def metadata(self, max_array: int = -1) -> dict[str, Any]:
        """All metadata as {key: value}; arrays cut to max_array elements when >= 0."""
        return {e["key"]: e["value"] for e in (self.kv(i, max_array) for i in range(lib.colibri_gguf_n_kv(self._g)))}

    def get(self, key: str, default: Any = None) -> Any:
        i = lib.colibri_gguf_find_key(self._g, key.encode())
        return default if i < 0 else self.kv(i)["value"]

    def tensors(self) -> Iterator[TensorInfo]:
        info = ffi.new("colibri_tensor_info *")
        for i in range(self.n_tensors):
            if lib.colibri_gguf_tensor(self._g, i, info) != 0:
                raise last_error()
            yield TensorInfo(
                name=ffi.string(info.name).decode("utf-8", "replace"),
                type=GGML_TYPE_NAMES.get(info.type, str(info.type)),
                shape=tuple(info.ne[d] for d in range(info.n_dims)),
                offset=info.offset,
                nbytes=info.nbytes,
            )

    def tensor_bytes(self, name: str) -> bytes:
        """A copy of one tensor's raw bytes (tests; the engine reads in place)."""
        i = lib.colibri_gguf_find_tensor(self._g, name.encode())
        if i < 0:
            raise KeyError(name)
        info = ffi.new("colibri_tensor_info *")
        lib.colibri_gguf_tensor(self._g, i, info)
        return ffi.buffer(lib.colibri_gguf_tensor_data(self._g, i), info.nbytes)[:]


class Engine:
    """One model opened by the engine. vocab_only=True loads metadata and tokenizer only."""

    def __init__(self, path: str | os.PathLike[str], *, vocab_only: bool = False, n_threads: int = 0,
                 n_ctx: int = 0, n_slots: int = 0, n_batch: int = 0):
        self.path = os.fspath(path)
        cfg = ffi.new("colibri_config *")
        lib.colibri_config_default(cfg)
        path_c = ffi.new("char[]", self.path.encode())
        cfg.model_path = path_c
        cfg.vocab_only = int(vocab_only)
        cfg.n_threads = n_threads
        cfg.n_ctx = n_ctx
        cfg.n_slots = n_slots
        cfg.n_batch = n_batch
        handle = lib.colibri_open(cfg)
        if handle == ffi.NULL:
            raise last_error()
        self._e = ffi.gc(handle, lib.colibri_close)

    def close(self) -> None:
        if self._e is not None:
            ffi.release(self._e)
            self._e = None

    def __enter__(self) -> "Engine":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def model_info(self) -> dict[str, Any]:
        return _read_json(lambda buf, cap: lib.colibri_model_info(self._e, buf, cap))
