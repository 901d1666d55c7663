"""MLA decode reads its values straight from the latent rows of K (the kernel
set's pv_rows) instead of a transposed copy: the same bits as the one-row F16
dot over the transposed values, on random and hostile data. And attention's
widened dots (the probabilities in f32 once, the set's f16_f32a kernels) give
the bits of the F16 dot they stand for."""
from __future__ import annotations

import numpy as np
import pytest

from colibri._engine import ffi, lib


def pv(v: np.ndarray, p: np.ndarray, transposed: bool | int) -> np.ndarray:
    len_, n_d = v.shape
    nr = p.shape[0]
    out = np.zeros((nr, n_d), np.float32)
    rc = lib.colibri_kernel_pv(len_, n_d, nr, ffi.from_buffer("uint16_t[]", v.view(np.uint16)),
                               ffi.from_buffer("uint16_t[]", p.view(np.uint16)),
                               ffi.from_buffer("float[]", out), int(transposed))
    if rc == lib.COLI_E_UNSUPPORTED:
        pytest.skip("this kernel set has no pv_rows (decode transposes the values)" if not transposed
                    else "this kernel set has no widened F16 dots")
    assert rc == 0
    return out


@pytest.fixture(params=["avx2", "avx512"])
def isa(request):
    """Each kernel set this CPU can run (an AVX-512 machine runs the AVX2 set too)."""
    if lib.colibri_kernel_set_isa(request.param.encode()) != 0:
        pytest.skip(f"this CPU has no {request.param}")
    yield request.param
    assert lib.colibri_kernel_set_isa(b"auto") == 0


@pytest.mark.parametrize("len_,n_d,nr", [(64, 16, 1), (128, 512, 4), (576, 512, 3), (1024, 64, 2), (8192, 32, 4)])
@pytest.mark.parametrize("data", ["normal", "softmax", "wide"])
def test_rows_equal_the_transposed_dot(isa, len_, n_d, nr, data):
    rng = np.random.default_rng(len_ + n_d + nr)
    if data == "wide":  # magnitudes from 2^-14 to 2^15 and both signs: any change of order shows
        v = (rng.choice([-1, 1], (len_, n_d)) * 2.0 ** rng.integers(-14, 15, (len_, n_d))).astype(np.float16)
        p = rng.random((nr, len_)).astype(np.float16)
    else:
        v = rng.standard_normal((len_, n_d)).astype(np.float16)
        logits = rng.standard_normal((nr, len_)) * (4 if data == "softmax" else 1)
        if data == "softmax":
            logits[:, len_ // 2:] = -np.inf  # masked cells: exact zeros
            e = np.exp(logits - logits.max(axis=1, keepdims=True))
            p = (e / e.sum(axis=1, keepdims=True)).astype(np.float16)
        else:
            p = logits.astype(np.float16)
    ours = pv(v, p, transposed=False)
    ref = pv(v, p, transposed=True)
    assert np.array_equal(ours.view(np.uint32), ref.view(np.uint32)), np.abs(ours - ref).max()
    assert np.allclose(ref, p.astype(np.float64) @ v.astype(np.float64), rtol=1e-2, atol=1e-2 * np.abs(ref).max())


@pytest.mark.parametrize("len_,n_d,nr", [(64, 16, 1), (256, 64, 4), (4096, 16, 3)])
@pytest.mark.parametrize("data", ["normal", "wide"])
def test_widened_dot_equals_the_f16_dot(isa, len_, n_d, nr, data):
    rng = np.random.default_rng(7 * len_ + nr)
    if data == "wide":
        v = (rng.choice([-1, 1], (len_, n_d)) * 2.0 ** rng.integers(-14, 15, (len_, n_d))).astype(np.float16)
        p = (rng.choice([-1, 1], (nr, len_)) * 2.0 ** rng.integers(-24, 15, (nr, len_))).astype(np.float16)
    else:
        v = rng.standard_normal((len_, n_d)).astype(np.float16)
        p = rng.standard_normal((nr, len_)).astype(np.float16)
    ref = pv(v, p, transposed=1)
    widened = pv(v, p, transposed=2)
    assert np.array_equal(widened.view(np.uint32), ref.view(np.uint32)), np.abs(widened - ref).max()
