"""Greedy sampling's argmax (kernel table entry): the AVX2 and AVX-512 kernels give the scalar
twin's index — the first of tied maxima, NaNs never winning unless at [0] — at every length
(tails included), and numpy's answer where no NaN is involved."""
from __future__ import annotations

import numpy as np
import pytest

from tests.engine.ggml_ref import ffi, lib

ISAS = ["scalar", "avx2", "avx512"]


def _argmax(x: np.ndarray, isa: str) -> int:
    if lib.colibri_kernel_set_isa(isa.encode()) != 0:
        pytest.skip(f"{isa} not supported here")
    try:
        return int(lib.colibri_kernel_argmax(ffi.cast("float *", ffi.from_buffer(x)), len(x)))
    finally:
        lib.colibri_kernel_set_isa(b"auto")


def _twin(x: np.ndarray) -> int:  # coli_argmax_generic, in Python
    best = 0
    for i in range(1, len(x)):
        if x[i] > x[best]:
            best = i
    return best


def _cases() -> list[np.ndarray]:
    rng = np.random.default_rng(7)
    out = []
    for n in (1, 2, 15, 16, 17, 31, 63, 64, 65, 100, 127, 128, 129, 1000, 4099):
        x = rng.standard_normal(n).astype(np.float32)
        out.append(x)
        t = x.copy(); t[n // 3] = t[n - 1] = 9.0; out.append(t)                 # tie: first wins
        t = x.copy(); t[n // 2] = np.nan; out.append(t)                         # NaN ignored
        t = x.copy(); t[0] = np.nan; out.append(t)                              # NaN at [0] wins
        t = np.full(n, np.nan, np.float32); t[n - 1] = 1.0; t[0] = -np.inf; out.append(t)
        t = np.full(n, -np.inf, np.float32); out.append(t)                      # all -inf: 0
        t = np.zeros(n, np.float32); t[::2] = -0.0; out.append(t)             # +-0 ties: first
        t = x.copy(); t[-1] = np.inf; t[n // 2] = np.nan; out.append(t)         # +inf at the tail
        t = np.full(n, 3.0, np.float32); out.append(t)
    v = rng.standard_normal(262144).astype(np.float32) * 4                      # Gemma's vocabulary
    out.append(v)
    t = v.copy(); t[200000] = t[250000] = 99.0; t[1::7] = np.nan; out.append(t)
    return out


@pytest.mark.parametrize("isa", ISAS)
def test_argmax_is_the_scalar_twin(isa):
    for x in _cases():
        twin = _twin(x) if len(x) < 10000 else (int(np.nanargmax(x)) if not np.isnan(x[0]) else 0)
        assert _argmax(x, isa) == twin, (isa, len(x), x[:8])
        if not np.isnan(x).any():
            assert twin == int(np.argmax(x))
