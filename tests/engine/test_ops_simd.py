"""The element-wise steps' SIMD kernels (kernel table entries) against ggml's CPU ops and
against the one-lane-at-a-time twins they replace: the same bits, tails and the exp's
wide-range paths (|x| beyond 126 / 192 of its exponent) included."""
from __future__ import annotations

import numpy as np
import pytest

from tests.engine.ggml_ref import ffi, ggml, lib  # noqa: F401  (ggml: a fixture)


def _inputs(n_rows: int, n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n_rows, n)) * rng.choice([0.5, 4.0, 60.0, 150.0], (n_rows, n), p=[.4, .4, .15, .05])
    special = [0.0, -0.0, 88.5, -88.5, 104.0, -104.0, 200.0, -200.0]
    x[0, :min(n, 8)] = special[:min(n, 8)]
    g = rng.standard_normal((n_rows, n)) * 3.0
    return np.ascontiguousarray(x.astype(np.float32)), np.ascontiguousarray(g.astype(np.float32))


def _swiglu(x: np.ndarray, g: np.ndarray, lanes: int) -> np.ndarray:
    y = x.copy()
    for r in range(x.shape[0]):
        rc = lib.colibri_kernel_swiglu(ffi.cast("float *", ffi.from_buffer(y[r])), ffi.cast("float *", ffi.from_buffer(g[r])),
                                       x.shape[1], lanes)
        assert rc == 0
    return y


@pytest.mark.parametrize("n", [1000, 64, 7])
def test_swiglu_is_ggml_bit_for_bit(ggml, n):  # noqa: F811
    x, g = _inputs(6, n, n)
    assert lib.colibri_kernel_set_isa(ggml.isa.encode()) == 0  # the set whose lanes the reference has
    try:
        ours = _swiglu(x, g, 0)
    finally:
        lib.colibri_kernel_set_isa(b"auto")
    theirs = ggml.swiglu(x, g)
    assert np.array_equal(ours.view(np.uint32), theirs.view(np.uint32))


@pytest.mark.parametrize("isa,lanes", [("avx2", 8), ("avxvnni", 8), ("avx512", 16)])
def test_swiglu_kernel_is_its_lanes(isa, lanes):
    if lib.colibri_kernel_set_isa(isa.encode()) != 0:
        pytest.skip(f"this CPU cannot run the {isa} kernels")
    try:
        x, g = _inputs(4, 1003, lanes)
        assert np.array_equal(_swiglu(x, g, 0).view(np.uint32), _swiglu(x, g, lanes).view(np.uint32))
    finally:
        lib.colibri_kernel_set_isa(b"auto")


def test_swiglu_refuses_bad_lanes():
    x = np.zeros(4, np.float32)
    p = ffi.cast("float *", ffi.from_buffer(x))
    assert lib.colibri_kernel_swiglu(p, p, 4, 4) != 0
    assert b"lanes" in ffi.string(lib.colibri_last_error())
