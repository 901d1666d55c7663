"""engine/src/matmul.c (with quant*.c) against llama.cpp's own ggml, bit for bit.

The reference's libggml-cpu (llama-cpp-python's build) runs ggml_mul_mat on
the same weights and activations, with weights that llama.cpp repacks at load
(Q4_0, Q4_K) in its CPU_REPACK buffer, as a model load does. For every batch
size its arithmetic depends on (one row: ggml_vec_dot; batches: tinyBLAS, the
tiled K-quant matmul from 8 rows, the repacked gemm on whole groups of 4 rows),
our coli_matmul must give identical floats."""
from __future__ import annotations

import ctypes
from pathlib import Path

import numpy as np
import pytest

from tests.reference import llama_cpp

engine = pytest.importorskip("colibri._engine")
ffi, lib = engine.ffi, engine.lib

F32, F16, Q4_0, Q5_0, Q8_0, Q4_K, Q6_K = 0, 1, 2, 6, 8, 12, 14
BLOCK = {F32: (1, 4), F16: (1, 2), Q4_0: (32, 18), Q5_0: (32, 22), Q8_0: (32, 34), Q4_K: (256, 144), Q6_K: (256, 210)}
SCALE_OFFSETS = {Q4_0: [0], Q5_0: [0], Q8_0: [0], Q4_K: [0, 2], Q6_K: [208]}
BATCHES = [1, 2, 3, 4, 5, 7, 8, 9, 16, 33]


class InitParams(ctypes.Structure):
    _fields_ = [("mem_size", ctypes.c_size_t), ("mem_buffer", ctypes.c_void_p), ("no_alloc", ctypes.c_bool)]


class Ggml:
    """The few ggml calls a mul_mat needs, from the reference's shared libraries."""

    def __init__(self, libdir: Path):
        mode = getattr(ctypes, "RTLD_GLOBAL", 0)
        self.base = ctypes.CDLL(str(libdir / "libggml-base.so"), mode=mode)
        self.cpu = ctypes.CDLL(str(libdir / "libggml-cpu.so"), mode=mode)
        vp, i64, sz = ctypes.c_void_p, ctypes.c_int64, ctypes.c_size_t
        sigs = {
            (self.base, "ggml_init"): (vp, [InitParams]),
            (self.base, "ggml_free"): (None, [vp]),
            (self.base, "ggml_new_tensor_2d"): (vp, [vp, ctypes.c_int, i64, i64]),
            (self.base, "ggml_mul_mat"): (vp, [vp, vp, vp]),
            (self.base, "ggml_new_graph"): (vp, [vp]),
            (self.base, "ggml_build_forward_expand"): (None, [vp, vp]),
            (self.base, "ggml_backend_alloc_ctx_tensors_from_buft"): (vp, [vp, vp]),
            (self.base, "ggml_backend_buffer_free"): (None, [vp]),
            (self.base, "ggml_backend_tensor_set"): (None, [vp, vp, sz, sz]),
            (self.base, "ggml_backend_tensor_get"): (None, [vp, vp, sz, sz]),
            (self.base, "ggml_backend_graph_compute"): (ctypes.c_int, [vp, vp]),
            (self.base, "ggml_backend_free"): (None, [vp]),
            (self.base, "ggml_gallocr_new"): (vp, [vp]),
            (self.base, "ggml_gallocr_alloc_graph"): (ctypes.c_bool, [vp, vp]),
            (self.base, "ggml_gallocr_free"): (None, [vp]),
            (self.cpu, "ggml_backend_cpu_init"): (vp, []),
            (self.cpu, "ggml_backend_cpu_set_n_threads"): (None, [vp, ctypes.c_int]),
            (self.cpu, "ggml_backend_cpu_buffer_type"): (vp, []),
            (self.cpu, "ggml_cpu_has_avx512"): (ctypes.c_int, []),
            (self.cpu, "ggml_cpu_has_avx512_vnni"): (ctypes.c_int, []),
            # C++: ggml_backend_cpu_repack_buffer_type()
            (self.cpu, "_Z35ggml_backend_cpu_repack_buffer_typev"): (vp, []),
        }
        for (so, name), (res, args) in sigs.items():
            f = getattr(so, name)
            f.restype, f.argtypes = res, args
            setattr(self, name.lstrip("_"), f)
        self.repack_buft = self.Z35ggml_backend_cpu_repack_buffer_typev()
        self.backend = self.ggml_backend_cpu_init()
        self.ggml_backend_cpu_set_n_threads(self.backend, 2)

    def mul_mat(self, wtype: int, w: np.ndarray, n_in: int, n_out: int, x: np.ndarray) -> np.ndarray:
        n_rows = x.shape[0]
        # llama.cpp puts a weight in CPU_REPACK when it has a repacked layout (x86: Q4_0/Q4_K with n_out % 8 == 0)
        repack = wtype in (Q4_0, Q4_K) and n_out % 8 == 0
        cw = self.ggml_init(InitParams(1 << 20, None, True))
        cx = self.ggml_init(InitParams(1 << 22, None, True))
        wt = self.ggml_new_tensor_2d(cw, wtype, n_in, n_out)
        buft = self.repack_buft if repack else self.ggml_backend_cpu_buffer_type()
        wbuf = self.ggml_backend_alloc_ctx_tensors_from_buft(cw, buft)
        self.ggml_backend_tensor_set(wt, w.ctypes.data, 0, w.nbytes)
        xt = self.ggml_new_tensor_2d(cx, F32, n_in, n_rows)
        yt = self.ggml_mul_mat(cx, wt, xt)
        gf = self.ggml_new_graph(cx)
        self.ggml_build_forward_expand(gf, yt)
        galloc = self.ggml_gallocr_new(self.ggml_backend_cpu_buffer_type())
        assert self.ggml_gallocr_alloc_graph(galloc, gf)
        self.ggml_backend_tensor_set(xt, x.ctypes.data, 0, x.nbytes)
        assert self.ggml_backend_graph_compute(self.backend, gf) == 0
        y = np.empty((n_rows, n_out), np.float32)
        self.ggml_backend_tensor_get(yt, y.ctypes.data, 0, y.nbytes)
        self.ggml_gallocr_free(galloc)
        self.ggml_backend_buffer_free(wbuf)
        self.ggml_free(cx)
        self.ggml_free(cw)
        return y


@pytest.fixture(scope="module")
def ggml():
    mod = llama_cpp()
    g = Ggml(Path(mod.__file__).parent / "lib")
    if not (g.ggml_cpu_has_avx512() and g.ggml_cpu_has_avx512_vnni()):
        pytest.skip("the reference is not an AVX-512 VNNI build: its arithmetic is not the one mirrored")
    if lib.colibri_kernel_set_isa(b"avx512") != 0:
        pytest.skip("this CPU has no AVX-512")
    lib.colibri_kernel_set_isa(b"auto")
    yield g
    g.ggml_backend_free(g.backend)


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


def ours(wtype, w, n_in, n_out, x):
    y = np.empty((x.shape[0], n_out), np.float32)
    rc = lib.colibri_kernel_matmul(wtype, ffi.from_buffer(w), w.nbytes, n_in, n_out,
                                   ffi.cast("float *", ffi.from_buffer(x)), x.shape[0],
                                   ffi.cast("float *", ffi.from_buffer(y)), 2)
    assert rc == 0
    return y


@pytest.mark.parametrize("wtype,n_in,n_out", [
    (F32, 512, 64), (F32, 320, 67), (F32, 96, 37), (F32, 44, 37),  # one-row leftovers 16+16; 16+16+8+4 (no tinyBLAS)
    (F16, 512, 64), (F16, 336, 66),
    (Q8_0, 640, 64), (Q5_0, 640, 64), (Q4_0, 640, 64), (Q4_0, 640, 66),  # Q4_0: repacked / not (n_out % 8)
    (Q8_0, 1024, 80), (Q5_0, 2048, 48), (Q8_0, 96, 37),  # whole and partial 16-block scale runs, 16-row tiles
    (Q4_0, 4608, 18), (Q8_0, 32768, 16), (Q5_0, 33792, 16),  # rows past the decoded-weights, scale-slab, 16-row limits
    (Q4_K, 1024, 64), (Q6_K, 1024, 64), (Q6_K, 512, 37),
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
    (Q4_K, 1024, 64), (Q4_K, 512, 40), (Q6_K, 1024, 64), (Q6_K, 512, 37),
    (Q5_0, 16416, 16),  # past the AVX2 batch kernel's 512 blocks
])
@pytest.mark.parametrize("isa", ["avx2", "avxvnni"])
def test_avx2_kernels_give_the_same_bits(ggml, isa, wtype, n_in, n_out):
    """ggml's AVX2, AVX-VNNI and AVX-512 builds add up these types the same
    way (8-lane blocks; the repacked Q4_0 and Q4_K per block and per 64
    elements; Q6_K's lanes, tiled per super-block), so our AVX2 kernels (with and without AVX-VNNI) must match the
    reference too: the bits an AVX2-only machine gets."""
    if lib.colibri_kernel_set_isa(isa.encode()) != 0:
        pytest.skip(f"this CPU has no {isa}")
    try:
        assert_bits_equal(ggml, np.random.default_rng(wtype * 7 + n_out), wtype, n_in, n_out)
    finally:
        lib.colibri_kernel_set_isa(b"auto")


# The types whose every kernel adds up as ggml's does; the others agree to float
# rounding only (~1e-7 relative), checked as such: BF16, Q3_K, and Q2_K (which
# the reference's AVX-512 build repacks, q2_K_8x8, and tiles from 8 rows).
MIRRORED = {"F16", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q4_K", "Q5_K", "Q6_K"}
ALL_TYPES = ["F16", "BF16", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K"]
# real models' row lengths: Qwen2.5 0.5B / 1.5B widths and FFNs, odd counts of blocks and super-blocks
REAL_ROWS = [896, 1536, 4864, 8960]
REAL_CASES = [(t, n) for t in ALL_TYPES for n in REAL_ROWS if n % (256 if t.endswith("_K") else 32) == 0]


@pytest.mark.parametrize("n_out", [48, 37])  # 37: not a multiple of 8, so llama.cpp repacks nothing
@pytest.mark.parametrize("isa", ["auto", "avx2", "avxvnni"])
@pytest.mark.parametrize("name,n_in", REAL_CASES)
def test_real_row_lengths_with_ggml_quantized_weights(ggml, name, n_in, isa, n_out):
    """Weights quantized by llama.cpp's own quantizer (the bytes a real file has,
    scales used to their full range) on the row lengths of real models, with
    each kernel set this CPU has, for every batch size whose arithmetic differs
    (one row, groups of 4, the tiled K-quant matmul from 8 rows)."""
    if lib.colibri_kernel_set_isa(isa.encode()) != 0:
        pytest.skip(f"this CPU has no {isa}")
    try:
        # F16 adds up in 8 lanes on AVX2 and 16 on AVX-512, in ggml as here: this reference is AVX-512
        check_real_rows(ggml, name, n_in, n_out, mirrored=name in MIRRORED and (isa == "auto" or name != "F16"))
    finally:
        lib.colibri_kernel_set_isa(b"auto")


def check_real_rows(ggml, name, n_in, n_out, mirrored):
    import gguf

    from tests.fixtures.ggml_quant import quantize

    wtype = int(gguf.GGMLQuantizationType[name])
    rng = np.random.default_rng(n_in + wtype + n_out)
    wf = (rng.standard_normal((n_out, n_in)) * 0.05).astype(np.float32)
    w = np.ascontiguousarray(wf.astype(np.float16).view(np.uint8) if name == "F16" else quantize(wf, name))
    for n_rows in (1, 3, 4, 8, 9, 17):
        x = (rng.standard_normal((n_rows, n_in)) * rng.choice([0.1, 1.0, 30.0], (n_rows, n_in), p=[.5, .45, .05]))
        x = np.ascontiguousarray(x.astype(np.float32))
        theirs = ggml.mul_mat(wtype, w, n_in, n_out, x)
        mine = ours(wtype, w, n_in, n_out, x)
        if mirrored:
            assert np.array_equal(mine, theirs), f"{name} n_rows {n_rows}: not the bits of ggml"
        else:
            rel = np.abs(mine - theirs).max() / np.abs(theirs).max()
            assert rel < 2e-6, f"{name} n_rows {n_rows}: relative difference {rel:.2e}"
