"""The binding to the C engine: the ONLY module that imports the cffi module.

Everything above it sees plain Python objects (dicts, lists, bytes) and
`EngineError`s carrying the engine's stable error name.
"""
from __future__ import annotations

import json
import os
import threading
from array import array
from dataclasses import dataclass
from enum import IntEnum
from typing import Any, Iterator, Sequence

from colibri._engine import ffi, lib
from colibri.errors import EngineError

# Type names by ggml id, for tensor infos (ids are part of the GGUF format).
GGML_TYPE_NAMES = {
    0: "F32", 1: "F16", 2: "Q4_0", 3: "Q4_1", 6: "Q5_0", 7: "Q5_1", 8: "Q8_0", 9: "Q8_1",
    10: "Q2_K", 11: "Q3_K", 12: "Q4_K", 13: "Q5_K", 14: "Q6_K", 15: "Q8_K", 16: "IQ2_XXS",
    17: "IQ2_XS", 18: "IQ3_XXS", 19: "IQ1_S", 20: "IQ4_NL", 21: "IQ3_S", 22: "IQ2_S",
    23: "IQ4_XS", 24: "I8", 25: "I16", 26: "I32", 27: "I64", 28: "F64", 29: "IQ1_M",
    30: "BF16", 34: "TQ1_0", 35: "TQ2_0", 39: "MXFP4", 40: "NVFP4", 41: "Q1_0", 42: "Q2_0",
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

    def check(self) -> EngineError | None:
        """None when this engine can run the file (vocabulary, family and every tensor bound as an
        open binds them, nothing loaded), else the error opening it would raise."""
        return last_error() if lib.colibri_gguf_check(self._g) != 0 else None

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

    def time_stream(self, name: str, n_out: int, variants: list[tuple[str, str]], rounds: int) -> list[float]:
        """Seconds per decode-step product of tensor `name`'s first n_out rows streamed from memory
        (copied end to end past the caches), for each (kernel set, prefetch level) variant,
        alternating, the fastest of `rounds` each (kernel_choice's measure)."""
        i = lib.colibri_gguf_find_tensor(self._g, name.encode())
        if i < 0:
            raise KeyError(name)
        info = ffi.new("colibri_tensor_info *")
        lib.colibri_gguf_tensor(self._g, i, info)
        keep = [ffi.new("char[]", s.encode()) for pair in variants for s in pair]
        isas = ffi.new("const char *[]", keep[0::2])
        levels = ffi.new("const char *[]", keep[1::2])
        out = ffi.new("double[]", len(variants))
        if lib.colibri_kernel_time_stream(info.type, lib.colibri_gguf_tensor_data(self._g, i), info.nbytes,
                                          info.ne[0], n_out, 0, isas, levels, len(variants), rounds, out) != 0:
            raise last_error()
        return list(out)


GGML_TYPE_IDS = {name: i for i, name in GGML_TYPE_NAMES.items()}


def kernel_isa() -> str:
    """The kernel set in force, with any per-type choice: "avx512", "avx512 (Q4_0: avx2)"."""
    return ffi.string(lib.colibri_kernel_isa()).decode()


def kernel_default_isa() -> str:
    """The set every type without a choice of its own runs with ("avx512")."""
    return kernel_type_isa("F32") or kernel_isa()


def kernel_prefetch() -> str:
    """Where the kernels prefetch weights: "l1" (the default) or "l2"."""
    return ffi.string(lib.colibri_kernel_prefetch()).decode()


def set_kernel_prefetch(level: str) -> None:
    if lib.colibri_kernel_set_prefetch(level.encode()) != 0:
        raise last_error()


def kernel_lookup() -> str:
    """How the grid i-quant kernels (AVX-512; AVX2's IQ2_S, IQ3_XXS, IQ3_S) look up grid points: "gather" or "loads"."""
    return ffi.string(lib.colibri_kernel_lookup()).decode()


def set_kernel_lookup(way: str) -> None:
    """"gather", "loads", or "auto" (measure both now and keep the faster): the same results."""
    if lib.colibri_kernel_set_lookup(way.encode()) != 0:
        raise last_error()


def kernel_lookup_ns() -> tuple[float, float]:
    """The last measurement of the two ways, ns per super-block: (loads, gathers); (0, 0) if none."""
    loads, gather = ffi.new("double *"), ffi.new("double *")
    lib.colibri_kernel_lookup_ns(loads, gather)
    return loads[0], gather[0]


def kernel_set_runnable(isa: str) -> bool:
    return bool(lib.colibri_kernel_has_isa(isa.encode()))


def set_kernel_isa(isa: str) -> None:
    """One kernel set for everything ("auto", "scalar", "avx2", "avxvnni", "avx512"); undoes per-type choices."""
    if lib.colibri_kernel_set_isa(isa.encode()) != 0:
        raise last_error()


def kernel_same_bits(type_name: str) -> bool:
    """Whether every SIMD kernel set gives this weight type the same bits."""
    return type_name in GGML_TYPE_IDS and bool(lib.colibri_kernel_same_bits(GGML_TYPE_IDS[type_name]))


def kernel_type_isa(type_name: str) -> str | None:
    p = lib.colibri_kernel_type_isa(GGML_TYPE_IDS.get(type_name, 1 << 30))
    return None if p == ffi.NULL else ffi.string(p).decode()


def set_kernel_type_isa(type_name: str, isa: str) -> None:
    """Weights of this type take `isa`'s kernels from now on (same-bits types only; "auto" undoes)."""
    if lib.colibri_kernel_set_type_isa(GGML_TYPE_IDS[type_name], isa.encode()) != 0:
        raise last_error()


def kernel_type_decode_isa(type_name: str) -> str | None:
    p = lib.colibri_kernel_type_decode_isa(GGML_TYPE_IDS.get(type_name, 1 << 30))
    return None if p == ffi.NULL else ffi.string(p).decode()


def set_kernel_type_decode_isa(type_name: str, isa: str) -> None:
    """This type's decode calls (4 rows or fewer) take `isa`'s kernels; its batches keep its set."""
    if lib.colibri_kernel_set_type_decode_isa(GGML_TYPE_IDS[type_name], isa.encode()) != 0:
        raise last_error()


def write_wake(fd: int) -> None:
    """One byte to a wake pipe (see Engine.step); a full pipe has a wake pending already."""
    try:
        os.write(fd, b"\1")
    except BlockingIOError:
        pass


class Engine:
    """One model opened by the engine. vocab_only=True loads metadata and tokenizer only."""

    def __init__(self, path: str | os.PathLike[str], *, vocab_only: bool = False, n_threads: int = 0,
                 n_ctx: int = 0, n_slots: int = 0, n_batch: int = 0, expert_cache_bytes: int = 0,
                 expert_pin_bytes: int = 0, io_threads: int = 0, direct_io: bool = False, prefetch: bool = True,
                 expert_policy: str = "", draft_tokens: int = 0, draft_always: bool = False,
                 draft_model: str | os.PathLike[str] | None = None):
        """expert_cache_bytes 0 keeps every routed expert resident (the file mapping);
        > 0 streams them from disk into a RAM cache of that size (plus expert_pin_bytes
        for experts pinned by learned heat). expert_policy: which cached expert makes room,
        "lrfu" or "lru" ("": the engine's default, lrfu). draft_tokens: speculative decoding's
        tokens drafted per step (0: the engine's default, < 0: none; never changes the tokens); draft_always
        verifies every draft found instead of those the measured step costs say pay (tests, benchmarks);
        draft_model: a smaller GGUF model with the same vocabulary that drafts instead."""
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
        cfg.expert_cache_bytes = expert_cache_bytes
        cfg.expert_pin_bytes = expert_pin_bytes
        cfg.io_threads = io_threads
        cfg.direct_io = int(direct_io)
        cfg.no_prefetch = int(not prefetch)
        policies = {"": lib.COLI_POLICY_DEFAULT, "lru": lib.COLI_POLICY_LRU, "lrfu": lib.COLI_POLICY_LRFU}
        if expert_policy not in policies:
            raise ValueError(f"expert_policy {expert_policy!r}: expected lrfu or lru")
        cfg.expert_policy = policies[expert_policy]
        cfg.draft_tokens = draft_tokens
        cfg.draft_always = int(draft_always)
        draft_c = ffi.new("char[]", os.fspath(draft_model).encode()) if draft_model else ffi.NULL
        cfg.draft_model_path = draft_c
        handle = lib.colibri_open(cfg)
        if handle == ffi.NULL:
            raise last_error()
        self._e = ffi.gc(handle, lib.colibri_close)
        self._stepping = threading.Lock()  # close() waits for a step running on the engine thread
        self.draft_tokens = lib.colibri_draft_tokens(self._e)  # as resolved: 0 when off
        self.drafter = ffi.string(lib.colibri_drafter(self._e)).decode()  # "mtp", "lookup", "model" or "" (none)
        self._events_cap = (2 + self.draft_tokens) * max(lib.colibri_n_slots(self._e), 1)
        self._events = ffi.new("colibri_event[]", self._events_cap)  # colibri_step's output, reused
        self._wake_fds = ffi.new("int[]", self._events_cap)  # colibri_step_wake's pipes, reused
        self._n_cells: int | None = None  # n_layer * n_expert, read once

    def close(self) -> None:
        with self._stepping:
            if self._e is not None:
                ffi.release(self._e)
                self._e = None

    def __enter__(self) -> "Engine":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def model_info(self) -> dict[str, Any]:
        return _read_json(lambda buf, cap: lib.colibri_model_info(self._e, buf, cap))

    def file_state(self) -> str:
        """What became of the model file since it was opened: "intact", "changed"
        (it shrank or a page of it faulted: every generation now fails with
        model_file_changed) or "replaced" (another file at its path; this one still serves)."""
        if self._e is None:
            raise EngineError("bad_state", "the engine is closed")
        rc = lib.colibri_file_state(self._e)
        if rc < 0:
            raise last_error()
        return {lib.COLI_FILE_INTACT: "intact", lib.COLI_FILE_CHANGED: "changed",
                lib.COLI_FILE_REPLACED: "replaced"}[rc]

    # ---- tokenizer ---------------------------------------------------------

    @property
    def bos(self) -> int:
        return lib.colibri_token_bos(self._e)

    @property
    def eos(self) -> int:
        return lib.colibri_token_eos(self._e)

    def is_eog(self, tok: int) -> bool:
        """True when generating `tok` ends the generation (EOS, end of turn, ...)."""
        return bool(lib.colibri_token_is_eog(self._e, tok))

    def tokenize(self, text: str | bytes, add_bos: bool | None = None, special: bool = False) -> list[int]:
        """Token ids of text; add_bos None follows the model; special=True matches control tokens."""
        data = text.encode("utf-8") if isinstance(text, str) else bytes(text)
        flag = -1 if add_bos is None else int(add_bos)
        cap = len(data) + 8
        while True:
            out = ffi.new("int32_t[]", cap)
            n = lib.colibri_tokenize(self._e, data, len(data), flag, int(special), out, cap)
            if n < 0:
                raise last_error()
            if n <= cap:
                return list(ffi.unpack(out, n))
            cap = n

    def token_bytes(self, tok: int, special: bool = False) -> bytes:
        """The bytes a token stands for (control tokens: none unless special)."""
        buf = ffi.new("char[]", 64)
        n = lib.colibri_token_bytes(self._e, tok, int(special), buf, 64)
        if n < 0:
            raise last_error()
        if n > 64:
            buf = ffi.new("char[]", n)
            lib.colibri_token_bytes(self._e, tok, int(special), buf, n)
        return ffi.buffer(buf, n)[:]

    def detokenize(self, tokens: list[int], special: bool = False) -> bytes:
        return b"".join(self.token_bytes(t, special) for t in tokens)

    # ---- evaluation and sampling -------------------------------------------

    @property
    def n_vocab(self) -> int:
        return lib.colibri_n_vocab(self._e)

    @property
    def n_ctx(self) -> int:
        return lib.colibri_n_ctx(self._e)

    @property
    def n_batch(self) -> int:
        return lib.colibri_n_batch(self._e)

    def eval(self, tokens: list[int], pos: int, logits: str | None = None) -> "array | None":
        """Evaluate tokens at positions pos.. (the cache keeps positions < pos).

        logits: None, "last" (n_vocab floats) or "all" (len(tokens) x n_vocab floats,
        row-major), returned as an array('f') that numpy can wrap without a copy.
        """
        n = len(tokens)
        toks = ffi.new("int32_t[]", tokens)
        out = None
        out_ptr = ffi.NULL
        if logits is not None:
            rows = n if logits == "all" else 1
            out = array("f", bytes(4 * rows * self.n_vocab))
            out_ptr = ffi.from_buffer("float[]", out)
        if lib.colibri_eval(self._e, toks, n, pos, out_ptr, int(logits == "all")) != 0:
            raise last_error()
        return out

    def sample(self, temperature: float = 0.0, top_p: float = 1.0, logprob: bool = False,
               top_k: int = 0) -> tuple[int, float | None]:
        """The next token from the last evaluated logits, and its log-probability when asked
        (a log-softmax over the whole vocabulary: not free, so only on request). top_k: only
        the k most likely tokens (0: off), before top_p as llama.cpp's chain."""
        params = ffi.new("colibri_sampling *", {"temperature": temperature, "top_p": top_p, "top_k": top_k})
        lp = ffi.new("float *") if logprob else ffi.NULL
        tok = lib.colibri_sample(self._e, params, lp)
        if tok < 0:
            raise last_error()
        return tok, (lp[0] if logprob else None)

    def score(self, tokens: list[int], first: int) -> tuple[list[float], list[int]]:
        """Teacher-forced: for positions first..len-2, the NLL of the next token and the argmax."""
        n = len(tokens)
        k = max(n - 1 - first, 0)
        nll = ffi.new("float[]", k)
        am = ffi.new("int32_t[]", k)
        if lib.colibri_score(self._e, ffi.new("int32_t[]", tokens), n, first, nll, am) != 0:
            raise last_error()
        return list(ffi.unpack(nll, k)), list(ffi.unpack(am, k))

    def mtp_logits(self, tokens: list[int]):
        """The MTP block teacher-forced (colibri_mtp_eval): a (len - 1) x n_vocab numpy array, row i its guess at
        tokens[i + 2] from the trunk's state at i and tokens[i + 1]."""
        import numpy as np

        n = len(tokens) - 1
        out = np.empty((n, self.n_vocab), dtype=np.float32)
        if lib.colibri_mtp_eval(self._e, ffi.new("int32_t[]", tokens), n, ffi.cast("float *", out.ctypes.data)) != 0:
            raise last_error()
        return out

    def last_routing(self, row: int) -> list[list[tuple[int, float]]]:
        """Per layer, the (expert, weight) pairs row `row` of the last batch was routed to ([] for dense layers)."""
        info = self.model_info()
        n_layer, k = info["n_layer"], info.get("n_expert_used") or 0
        if not k:
            return []
        ids = ffi.new("int32_t[]", n_layer * k)
        w = ffi.new("float[]", n_layer * k)
        if lib.colibri_last_routing(self._e, row, ids, w) < 0:
            raise last_error()
        return [[(ids[l * k + j], w[l * k + j]) for j in range(k) if ids[l * k + j] >= 0] for l in range(n_layer)]

    def seed(self, seed: int) -> None:
        lib.colibri_seed(self._e, seed & 0xFFFFFFFFFFFFFFFF)

    # ---- KV slots ------------------------------------------------------------

    @property
    def n_slots(self) -> int:
        return lib.colibri_n_slots(self._e)

    @property
    def model_id(self) -> str:
        """Identity of the model file (keys persisted KV caches)."""
        return ffi.string(lib.colibri_model_id(self._e)).decode()

    @property
    def slot_bytes(self) -> int:
        """Bytes one slot's KV cache can grow to."""
        return lib.colibri_slot_bytes(self._e)

    def submit(self, slot: int, prompt: list[int], *, max_tokens: int, temperature: float = 0.0, top_p: float = 1.0,
               seed: int = 0, n_logprobs: int = 0, echo: bool = False, echo_from: int = 0,
               ignore_eos: bool = False, top_k: int = 0, logprob: bool = True) -> int:
        """Start a request on an idle slot; returns how many prompt tokens came from its cache.
        With echo, positions from echo_from on are read out (the prefix before may be reused).
        logprob=False: events carry NaN for the sampled token's log-probability unless n_logprobs > 0
        (the log-softmax over the vocabulary, a few percent of a small model's step, is skipped)."""
        req = ffi.new("colibri_request *", {
            "sampling": {"temperature": temperature, "top_p": top_p, "top_k": top_k},
            "seed": seed & 0xFFFFFFFFFFFFFFFF, "max_tokens": max_tokens, "n_logprobs": n_logprobs, "echo": int(echo),
            "echo_from": echo_from, "ignore_eos": int(ignore_eos), "no_logprob": int(not logprob)})
        reused = lib.colibri_submit(self._e, slot, ffi.new("int32_t[]", prompt), len(prompt), req)
        if reused < 0:
            raise last_error()
        return reused

    def cancel(self, slot: int) -> bool:
        rc = lib.colibri_cancel(self._e, slot)
        if rc < 0:
            raise last_error()
        return bool(rc)

    def step(self, wake_fds: Sequence[int] = ()) -> list["SlotEvent"]:
        """One batched step of every running slot; its events in order. wake_fds: pipes to
        write one byte to once the step has begun (colibri_step_wake), even when it fails."""
        with self._stepping:
            if self._e is None:
                for fd in wake_fds:
                    write_wake(fd)
                raise EngineError("bad_state", "the engine is closed")
            if wake_fds:
                fds = self._wake_fds if len(wake_fds) <= self._events_cap else ffi.new("int[]", len(wake_fds))
                fds[0:len(wake_fds)] = wake_fds
                n = lib.colibri_step_wake(self._e, self._events, self._events_cap, fds, len(wake_fds))
            else:
                n = lib.colibri_step(self._e, self._events, self._events_cap)
            if n < 0:
                raise last_error()
        out = []
        for i in range(n):
            ev = self._events[i]
            top = [(ev.top_ids[j], ev.top_logprobs[j]) for j in range(ev.n_top)] if ev.token >= 0 else []
            out.append(SlotEvent(slot=ev.slot, done=ev.type == lib.COLI_EVENT_DONE, token=ev.token,
                                 finish=FINISH_NAMES.get(ev.finish), logprob=ev.logprob, top=top))
        return out

    def slot_status(self, slot: int) -> dict[str, Any]:
        st = ffi.new("colibri_slot_status *")
        if lib.colibri_slot_info(self._e, slot, st) != 0:
            raise last_error()
        return {"state": SLOT_STATES[st.state], "n_past": st.n_past, "n_prompt": st.n_prompt,
                "n_reused": st.n_reused, "n_generated": st.n_generated, "finish": FINISH_NAMES.get(st.finish),
                "prefill_s": st.prefill_s, "decode_s": st.decode_s}

    def slot_tokens(self, slot: int) -> list[int]:
        """The slot's history: the tokens its KV cache holds."""
        n = lib.colibri_slot_tokens(self._e, slot, ffi.NULL, 0)
        if n < 0:
            raise last_error()
        out = ffi.new("int32_t[]", max(n, 1))
        lib.colibri_slot_tokens(self._e, slot, out, n)
        return list(ffi.unpack(out, n))

    def slot_readout(self, slot: int, n_logprobs: int) -> list[tuple[float | None, list[tuple[int, float]]]]:
        """Echo read-out of the slot's last prompt: per position (log-prob of its token, top-k);
        position 0 and positions taken from the cache have none (None, [])."""
        status = self.slot_status(slot)
        n, reused = status["n_prompt"], status["n_reused"]
        k = n_logprobs
        lp = ffi.new("float[]", max(n, 1))
        ids = ffi.new("int32_t[]", max(n * k, 1))
        top = ffi.new("float[]", max(n * k, 1))
        if lib.colibri_slot_readout(self._e, slot, 0, n, lp, ids, top) < 0:
            raise last_error()
        return [(None, []) if p <= reused else (lp[p], [(ids[p * k + j], top[p * k + j]) for j in range(k)])
                for p in range(n)]

    def slot_save(self, slot: int, path: str | os.PathLike[str]) -> None:
        if lib.colibri_slot_save(self._e, slot, os.fsencode(path)) != 0:
            raise last_error()

    def slot_load(self, slot: int, path: str | os.PathLike[str]) -> int:
        """Restore a saved slot; a bad file raises EngineError and leaves the slot empty."""
        n = lib.colibri_slot_load(self._e, slot, os.fsencode(path))
        if n < 0:
            raise last_error()
        return n


    # ---- observability ----------------------------------------------------------

    def stats(self, arrays: bool | tuple[str, ...] = False) -> dict[str, Any]:
        """Engine counters (see colibri_stats_t); with arrays (True, or some of the names),
        per expert (layer-major n_layer * n_expert): tiers (bytes of Tier codes),
        counts (array 'I'), heat (array 'f'), last_hits (bytes of 0/1). Safe from any thread."""
        st = ffi.new("colibri_stats_t *")
        want = STATS_ARRAYS if arrays is True else tuple(arrays or ())
        bufs: dict[str, Any] = {}
        ptrs = [ffi.NULL] * 4
        if want:
            n = max(self._cells(), 1)
            for i, name in enumerate(STATS_ARRAYS):
                if name not in want:
                    continue
                kind, ctype = {"tiers": ("B", "uint8_t[]"), "counts": ("I", "uint32_t[]"), "heat": ("f", "float[]"),
                               "last_hits": ("B", "uint8_t[]")}[name]
                bufs[name] = array(kind, bytes(array(kind).itemsize * n))
                ptrs[i] = ffi.from_buffer(ctype, bufs[name])
        if lib.colibri_stats(self._e, st, *ptrs) != 0:
            raise last_error()
        out = {name: getattr(st, name) for name in STATS_FIELDS}
        for name, buf in bufs.items():
            out[name] = buf.tobytes() if buf.typecode == "B" else buf
        return out

    def _cells(self) -> int:
        """n_layer * n_expert: the length of the per-expert arrays (fixed for the engine's life)."""
        if self._n_cells is None:
            st = ffi.new("colibri_stats_t *")
            lib.colibri_stats(self._e, st, ffi.NULL, ffi.NULL, ffi.NULL, ffi.NULL)
            self._n_cells = st.n_layer * st.n_expert
        return self._n_cells

    def turns(self) -> list[dict[str, Any]]:
        """The last finished requests' records, oldest first (at most 120)."""
        out = ffi.new("colibri_turn[]", lib.COLI_MAX_TURNS)
        n = lib.colibri_turns(self._e, out, lib.COLI_MAX_TURNS)
        if n < 0:
            raise last_error()
        return [{name: (FINISH_NAMES.get(t.finish) if name == "finish" else getattr(t, name)) for name in TURN_FIELDS}
                for t in (out[i] for i in range(n))]

    def coroute(self, k: int) -> tuple[int, "array", "array"]:
        """(tokens observed, partner cells, weights): k strongest co-routing partners per expert
        (n_layer * n_expert * k each, strongest first, 0xFFFFFFFF / 0 padding); tokens 0: not measured."""
        n = max(self._cells(), 1) * k
        nbr, w = array("I", bytes(4 * n)), array("I", bytes(4 * n))
        tokens = lib.colibri_coroute(self._e, k, ffi.from_buffer("uint32_t[]", nbr), ffi.from_buffer("uint32_t[]", w))
        if tokens < 0:
            raise last_error()
        return tokens, nbr, w

    def pin_experts(self, counts) -> int:
        """Load and pin the hottest experts of `counts` (n_layer * n_expert ints) within the pin budget."""
        buf = array("I", counts)
        n = lib.colibri_pin_experts(self._e, ffi.from_buffer("uint32_t[]", buf))
        if n < 0:
            raise last_error()
        return n


STATS_FIELDS = ("n_layer", "n_expert", "streaming", "seq", "turns", "tokens_prompt", "tokens_generated", "forward_s",
                "attention_s", "matmul_s", "lm_head_s", "io_wait_s", "disk_s", "bytes_read", "loads", "hits", "misses",
                "prefetch_issued", "prefetch_used", "predicted", "predicted_right", "cache_bytes", "pinned_bytes",
                "n_cached", "n_pinned", "linear_attention_s", "draft_steps", "draft_tokens", "draft_accepted")
TURN_FIELDS = ("id", "slot", "finish", "prompt_tokens", "reused_tokens", "completion_tokens", "wall_s", "prefill_s",
               "end_time", "attention_s",
               "matmul_s", "lm_head_s", "io_wait_s", "disk_s", "other_s", "bytes_read", "forwards", "cache_hit_rate",
               "prefetch_hit_rate", "linear_attention_s", "draft_tokens", "draft_accepted")
STATS_ARRAYS = ("tiers", "counts", "heat", "last_hits")
MAX_LOGPROBS = lib.COLI_MAX_LOGPROBS  # entries of the top-k table per token
MAX_SLOTS = lib.COLI_MAX_SLOTS  # KV slots one engine can serve


class Tier(IntEnum):
    """Where a routed expert's weights are now (the bytes of stats()["tiers"])."""

    DISK = lib.COLI_TIER_DISK
    RAM = lib.COLI_TIER_RAM  # in the cache
    PINNED = lib.COLI_TIER_PINNED  # held in RAM by learned heat
    LOADING = lib.COLI_TIER_LOADING  # being read into the cache


TIER_NAMES = {t.value: t.name.lower() for t in Tier}
FINISH_NAMES = {lib.COLI_FINISH_STOP: "stop", lib.COLI_FINISH_LENGTH: "length", lib.COLI_FINISH_CONTEXT: "context",
                lib.COLI_FINISH_CANCELLED: "cancelled", lib.COLI_FINISH_ERROR: "error"}
SLOT_STATES = {lib.COLI_SLOT_IDLE: "idle", lib.COLI_SLOT_PREFILL: "prefill", lib.COLI_SLOT_DECODE: "decode"}


@dataclass(frozen=True)
class SlotEvent:
    """One event of colibri_step: a generated token, or the end of a slot's request
    (done=True; token is the stop token for finish "stop", else -1)."""
    slot: int
    done: bool
    token: int
    finish: str | None
    logprob: float
    top: list[tuple[int, float]]
