"""engine/src/matmul.c (with quant*.c) against llama.cpp's own ggml, bit for bit.

The reference's libggml-cpu (llama-cpp-python's build) runs ggml_mul_mat on
the same weights and activations, with weights that llama.cpp repacks at load
(Q4_0, Q4_K) in its CPU_REPACK buffer, as a model load does. For every batch
size its arithmetic depends on (one row: ggml_vec_dot; batches: tinyBLAS, the
tiled K-quant matmul from 8 rows, the repacked gemm on whole groups of 4 rows),
our coli_matmul must give identical floats. Q2_K, which the reference's
AVX-512 build repacks (q2_K_8x8: its gemv per row, its gemm on groups of 4),
is checked on the AVX2 kernel sets against the same build with the weights
left as stored: what an AVX2-only llama.cpp computes (its AVX2 vec_dot, and
the tiled matmul, whose AVX2 microkernel has the VNNI one's float steps)."""
from __future__ import annotations

import numpy as np
import pytest

from tests.engine.ggml_ref import check_real_rows, ffi, ggml, lib, ours, same_f32_lanes  # noqa: F401 (ggml: the fixture)

F32, F16, Q4_0, Q5_0, Q8_0, Q2_K, Q3_K, Q4_K, Q6_K = 0, 1, 2, 6, 8, 10, 11, 12, 14
BLOCK = {F32: (1, 4), F16: (1, 2), Q4_0: (32, 18), Q5_0: (32, 22), Q8_0: (32, 34), Q2_K: (256, 84), Q3_K: (256, 110),
         Q4_K: (256, 144), Q6_K: (256, 210)}
SCALE_OFFSETS = {Q4_0: [0], Q5_0: [0], Q8_0: [0], Q2_K: [80, 82], Q3_K: [108], Q4_K: [0, 2], Q6_K: [208]}
BATCHES = [1, 2, 3, 4, 5, 7, 8, 9, 16, 33]


def random_weights(rng, wtype, n_in, n_out):
    if wtype == F32:
        return rng.uniform(-1, 1, (n_out, n_in)).astype(np.float32).view(np.uint8)
    if wtype == F16:
        return rng.uniform(-1, 1, (n_out, n_in)).astype(np.float16).view(np.uint8)
    blk, size = BLOCK[wtype]
    raw = rng.integers(0, 256, (n_out * n_in // blk, size), dtype=np.uint8)
    for off in SCALE_OFFSETS[wtype]:
        raw[:, off:off + 2] = rng.uniform(0.001, 0.02, raw.shape[0]).astype(np.float16).view(np.uint8).reshape(-1, 2)
    return raw.reshape(n_out, -1)


@pytest.mark.parametrize("wtype,n_in,n_out", [
    (F32, 512, 64), (F32, 320, 67), (F32, 96, 37), (F32, 44, 37),  # one-row leftovers 16+16; 16+16+8+4 (no tinyBLAS)
    (F16, 512, 64), (F16, 336, 66),
    (Q8_0, 640, 64), (Q5_0, 640, 64), (Q4_0, 640, 64), (Q4_0, 640, 66),  # Q4_0: repacked / not (n_out % 8)
    (Q8_0, 1024, 80), (Q5_0, 2048, 48), (Q8_0, 96, 37),  # whole and partial 16-block scale runs, 16-row tiles
    (Q4_0, 4608, 18), (Q8_0, 32768, 16), (Q5_0, 33792, 16),  # rows past the decoded-weights, scale-slab, 16-row limits
    (Q4_K, 1024, 64), (Q4_K, 1024, 44), (Q6_K, 1024, 64), (Q6_K, 512, 37),  # Q4_K: repacked / tiled (n_out % 8)
    (Q2_K, 1024, 64), (Q2_K, 2048, 40), (Q2_K, 512, 37), (Q2_K, 768, 12),  # repacked (n_out % 8 == 0) or not
    (Q3_K, 1024, 64), (Q3_K, 512, 37),
])
def test_matmul_bits_equal_ggml(ggml, wtype, n_in, n_out):
    assert_bits_equal(ggml, np.random.default_rng(wtype * 1000 + n_out), wtype, n_in, n_out)


def assert_bits_equal(ggml, rng, wtype, n_in, n_out):
    """Our matmul against ggml_mul_mat on random weights, for every batch size."""
    w = np.ascontiguousarray(random_weights(rng, wtype, n_in, n_out))
    for n_rows in BATCHES:
        # activations like a transformer's: mostly small, a few large outliers
        x = (rng.standard_normal((n_rows, n_in)) * rng.choice([0.1, 1.0, 30.0], (n_rows, n_in), p=[.5, .45, .05]))
        x = np.ascontiguousarray(x.astype(np.float32))
        theirs = ggml.mul_mat(wtype, w, n_in, n_out, x)
        mine = ours(wtype, w, n_in, n_out, x)
        bad = np.argwhere(mine != theirs)
        assert bad.size == 0, (f"type {wtype} n_rows {n_rows}: {len(bad)} of {mine.size} outputs differ, first at "
                               f"{tuple(bad[0])}: {mine[tuple(bad[0])]!r} vs ggml {theirs[tuple(bad[0])]!r}")


@pytest.mark.parametrize("wtype,n_in,n_out", [
    (Q8_0, 640, 64), (Q5_0, 640, 64), (Q4_0, 640, 64), (Q4_0, 640, 66), (Q8_0, 96, 37), (Q4_0, 1024, 40),
    (Q4_K, 1024, 64), (Q4_K, 512, 40), (Q4_K, 512, 36), (Q6_K, 1024, 64), (Q6_K, 512, 37),
    (Q5_0, 16416, 16),  # past the AVX2 batch kernel's 512 blocks
    (Q2_K, 1024, 64), (Q2_K, 512, 37), (Q3_K, 1024, 64), (Q3_K, 512, 37),
])
@pytest.mark.parametrize("isa", ["avx2", "avxvnni"])
def test_avx2_kernels_give_the_same_bits(ggml, monkeypatch, isa, wtype, n_in, n_out):
    """ggml's AVX2, AVX-VNNI and AVX-512 builds add up these types the same
    way (8-lane blocks; the repacked Q4_0 and Q4_K per block and per 64
    elements; Q6_K's lanes, tiled per super-block), so our AVX2 kernels (with and without AVX-VNNI) must match the
    reference too: the bits an AVX2-only machine gets."""
    if lib.colibri_kernel_set_isa(isa.encode()) != 0:
        pytest.skip(f"this CPU has no {isa}")
    avx2_only_reference(ggml, monkeypatch)
    try:
        assert_bits_equal(ggml, np.random.default_rng(wtype * 7 + n_out), wtype, n_in, n_out)
    finally:
        lib.colibri_kernel_set_isa(b"auto")


def avx2_only_reference(ggml, monkeypatch):
    """The reference as an AVX2-only llama.cpp runs it: Q2_K not repacked."""
    repacks = ggml.repacks
    monkeypatch.setattr(ggml, "repacks", lambda wtype, n_out: wtype != Q2_K and repacks(wtype, n_out))


# The types whose every kernel adds up as ggml's does; the others agree to float
# rounding only (~1e-7 relative), checked as such: BF16.
MIRRORED = {"F16", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K"}
ALL_TYPES = ["F16", "BF16", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K"]
# real models' row lengths: Qwen2.5 0.5B / 1.5B widths and FFNs, odd counts of blocks and super-blocks
REAL_ROWS = [896, 1536, 4864, 8960]
REAL_CASES = [(t, n) for t in ALL_TYPES for n in REAL_ROWS if n % (256 if t.endswith("_K") else 32) == 0]


@pytest.mark.parametrize("n_out", [48, 37])  # 37: not a multiple of 8, so llama.cpp repacks nothing
@pytest.mark.parametrize("isa", ["auto", "avx2", "avxvnni"])
@pytest.mark.parametrize("name,n_in", REAL_CASES)
def test_real_row_lengths_with_ggml_quantized_weights(ggml, monkeypatch, name, n_in, isa, n_out):
    """Weights quantized by llama.cpp's own quantizer (the bytes a real file has,
    scales used to their full range) on the row lengths of real models, with
    each kernel set this CPU has, for every batch size whose arithmetic differs
    (one row, groups of 4, the tiled K-quant matmul from 8 rows)."""
    if lib.colibri_kernel_set_isa(isa.encode()) != 0:
        pytest.skip(f"this CPU has no {isa}")
    if isa != "auto":
        avx2_only_reference(ggml, monkeypatch)
    try:
        # F16 adds up in 8 lanes on AVX2 and 16 on AVX-512, in ggml as here
        check_real_rows(ggml, name, n_in, n_out, mirrored=name in MIRRORED and (name != "F16" or same_f32_lanes(ggml, isa)))
    finally:
        lib.colibri_kernel_set_isa(b"auto")


@pytest.mark.parametrize("wtype,n_in,n_out", [(Q4_0, 640, 64), (Q8_0, 1024, 400), (Q4_K, 1024, 272), (F32, 96, 37)])
def test_matmul_same_for_any_thread_count(wtype, n_in, n_out):
    """Chunks go out in a lane per thread (threadpool.h coli_lanes): every
    thread count, more threads than lanes included, computes each output
    once and alike."""
    rng = np.random.default_rng(n_out)
    w = np.ascontiguousarray(random_weights(rng, wtype, n_in, n_out))
    for n_rows in (1, 5):
        x = np.ascontiguousarray(rng.standard_normal((n_rows, n_in)).astype(np.float32))
        outs = []
        for threads in (1, 2, 3, 5, 9):
            y = np.full((n_rows, n_out), np.nan, np.float32)
            assert lib.colibri_kernel_matmul(wtype, ffi.from_buffer(w), w.nbytes, n_in, n_out,
                                             ffi.cast("float *", ffi.from_buffer(x)), n_rows,
                                             ffi.cast("float *", ffi.from_buffer(y)), threads) == 0
            outs.append(y)
        assert not np.isnan(outs[0]).any()
        for y in outs[1:]:
            assert np.array_equal(y.view(np.uint32), outs[0].view(np.uint32))
