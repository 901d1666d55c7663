"""MLA decode reads its values straight from the latent rows of K (the kernel
set's pv_rows, or its widened pv_rows_f32a: probabilities in f32, up to 8 heads
a call) instead of a transposed copy: the same bits as the one-row F16 dot over
the transposed values, on random and hostile data. And attention's
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


# up to 8 heads a call (the widened kernel's), cells past one block of 1024 and a
# partial last block, a half group of 16 dims after whole groups of 32
@pytest.mark.parametrize("len_,n_d,nr", [(64, 16, 1), (128, 512, 4), (576, 512, 3), (1024, 64, 2), (8192, 32, 4),
                                         (1088, 48, 5), (2112, 512, 8), (3072, 16, 7)])
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


def rows_and_queries(rng, rows_shape, queries_shape, data: str) -> tuple[np.ndarray, np.ndarray]:
    """f16 cache rows and query / probability rows: normal, or "wide" (magnitudes 2^-14..2^15 and
    2^-24..2^15, both signs, subnormals included: any change of order or rounding shows)."""
    if data == "wide":
        rows = rng.choice([-1, 1], rows_shape) * 2.0 ** rng.integers(-14, 15, rows_shape)
        queries = rng.choice([-1, 1], queries_shape) * 2.0 ** rng.integers(-24, 15, queries_shape)
    else:
        rows, queries = rng.standard_normal(rows_shape), rng.standard_normal(queries_shape)
    return rows.astype(np.float16), queries.astype(np.float16)


@pytest.mark.parametrize("len_,n_d,nr", [(64, 16, 1), (256, 64, 4), (4096, 16, 3)])
@pytest.mark.parametrize("data", ["normal", "wide"])
def test_widened_dot_equals_the_f16_dot(isa, len_, n_d, nr, data):
    v, p = rows_and_queries(np.random.default_rng(7 * len_ + nr), (len_, n_d), (nr, len_), data)
    ref = pv(v, p, transposed=1)
    widened = pv(v, p, transposed=2)
    assert np.array_equal(widened.view(np.uint32), ref.view(np.uint32)), np.abs(widened - ref).max()


def kq(k: np.ndarray, q: np.ndarray, rows: bool) -> np.ndarray:
    n_rows, n = k.shape
    nr = q.shape[0]
    out = np.zeros((nr, n_rows), np.float32)
    rc = lib.colibri_kernel_kq(n, n_rows, nr, ffi.from_buffer("uint16_t[]", k.view(np.uint16)),
                               ffi.from_buffer("uint16_t[]", q.view(np.uint16)), ffi.from_buffer("float[]", out),
                               int(rows))
    if rc == lib.COLI_E_UNSUPPORTED:
        pytest.skip("this kernel set has no kq_rows (decode's scores go a row at a time)")
    assert rc == 0
    return out


# MLA's 576-wide latent rows, 8 / 7 heads, row counts leaving a tail of 1 to 3 past the blocks of 3 (AVX2)
# or 4 (AVX-512); a 64-wide head; widths past the last step of 64 (AVX-512's tail, summed in double)
@pytest.mark.parametrize("n,n_rows,nr", [(576, 37, 8), (576, 128, 7), (64, 9, 1), (256, 64, 4), (32, 1, 5),
                                         (96, 7, 2), (608, 11, 6)])
@pytest.mark.parametrize("data", ["normal", "wide"])
def test_many_head_scores_equal_the_one_row_dot(isa, n, n_rows, nr, data):
    """Decode's scores, every head of a task per K row read (kq_rows): the bits of ggml_vec_dot_f16 per head."""
    k, q = rows_and_queries(np.random.default_rng(n + n_rows + nr), (n_rows, n), (nr, n), data)
    ours = kq(k, q, rows=True)
    ref = kq(k, q, rows=False)
    assert np.array_equal(ours.view(np.uint32), ref.view(np.uint32)), np.abs(ours - ref).max()
