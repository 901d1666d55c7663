"""engine/src/quant_iq23*.c: the grid i-quants IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS and IQ3_S.

- dequantization against gguf-py's numpy reference (random blocks and llama.cpp-quantized rows);
- the scalar dot (our _generic) against ggml's exported ggml_vec_dot_<t>_q8_K_generic, bit for bit;
- our matmul against ggml_mul_mat bit for bit, for every batch size whose arithmetic differs (one
  row and under 8: ggml's AVX2 vec_dot; 8 and more: its tiled matmul), with every SIMD kernel set
  the CPU has (AVX-512's with both ways of looking grid points up: gathers and scalar loads), on
  real models' row lengths, n_out a multiple of 8 or not; the scalar set (ggml's
  non-x86 arithmetic: _generic for every row) within float rounding.
"""
from __future__ import annotations

import ctypes
from pathlib import Path

import numpy as np
import pytest

from tests.engine.ggml_ref import ggml, lib, ours  # noqa: F401 (ggml: the fixture)
from tests.engine.ggml_ref import ffi

gguf = pytest.importorskip("gguf")

TYPES = {"IQ2_XXS": (16, 66), "IQ2_XS": (17, 74), "IQ2_S": (22, 82), "IQ3_XXS": (18, 98), "IQ3_S": (21, 110)}
Q8_K, Q8_K_BYTES = 15, 292
BATCHES = [1, 2, 3, 4, 5, 7, 8, 9, 16, 33]
SHAPES = [(2048, 24), (4096, 20), (1536, 16), (7168, 12)]  # real row lengths; n_out % 8 == 0 and not


def isas(simd_only=False):
    out = [isa for isa in ("scalar", "avx2", "avxvnni", "avx512") if lib.colibri_kernel_set_isa(isa.encode()) == 0]
    lib.colibri_kernel_set_isa(b"auto")
    return [i for i in out if i != "scalar"] if simd_only else out


def variants(simd_only=False):
    """(isa, lookup): the SIMD sets with each way of looking grid points up (the same bits;
    of the AVX2 kernels, IQ2_S's and IQ3's read the way)."""
    return [(isa, way) for isa in isas(simd_only) for way in (("auto",) if isa == "scalar" else ("gather", "loads"))]


def use(isa, way):
    assert lib.colibri_kernel_set_isa(isa.encode()) == 0
    assert lib.colibri_kernel_set_lookup(way.encode()) == 0


def reset():
    lib.colibri_kernel_set_isa(b"auto")
    lib.colibri_kernel_set_lookup(b"auto")


def random_blocks(rng, name, nblk):
    """Random bytes (every byte pattern is a valid block of these types), a small positive d."""
    _, size = TYPES[name]
    raw = rng.integers(0, 256, (nblk, size), dtype=np.uint8)
    raw[:, 0:2] = rng.uniform(1e-4, 2e-3, nblk).astype(np.float16).view(np.uint8).reshape(-1, 2)
    return raw


def c_dequantize(tid, data, n):
    out = np.empty(n, np.float32)
    assert lib.colibri_kernel_dequantize(tid, ffi.from_buffer(data), data.nbytes,
                                         ffi.cast("float *", ffi.from_buffer(out)), n) == 0
    return out


def llama_rows(name, n_out, n_in, seed=0):
    from tests.fixtures.ggml_quant import quantize

    rng = np.random.default_rng(seed + n_in + n_out + TYPES[name][0])
    return np.ascontiguousarray(quantize((rng.standard_normal((n_out, n_in)) * 0.05).astype(np.float32), name))


def activations(rng, n_rows, n_in):
    """Like a transformer's: mostly small, a few large outliers."""
    x = rng.standard_normal((n_rows, n_in)) * rng.choice([0.1, 1.0, 30.0], (n_rows, n_in), p=[.5, .45, .05])
    return np.ascontiguousarray(x.astype(np.float32))


@pytest.mark.parametrize("name", TYPES)
def test_dequantize_matches_gguf(name):
    tid = TYPES[name][0]
    rng = np.random.default_rng(tid)
    raw = random_blocks(rng, name, 64)
    ref = gguf.quants.dequantize(raw.reshape(-1), gguf.GGMLQuantizationType[name]).reshape(-1)
    assert np.array_equal(c_dequantize(tid, raw, 64 * 256), ref)
    rows = llama_rows(name, 4, 2048)
    ref = gguf.quants.dequantize(rows.reshape(-1), gguf.GGMLQuantizationType[name]).reshape(-1)
    assert np.array_equal(c_dequantize(tid, rows, 4 * 2048), ref)


@pytest.fixture(scope="module")
def generic():
    """ggml's scalar dots, exported by the reference's libggml-cpu."""
    from tests.reference import llama_cpp

    so = ctypes.CDLL(str(Path(llama_cpp().__file__).parent / "lib" / "libggml-cpu.so"))
    so.ggml_cpu_init()  # its f16 -> f32 table, which GGML_CPU_FP16_TO_FP32 reads
    fns = {}
    for name in TYPES:
        f = getattr(so, f"ggml_vec_dot_{name.lower()}_q8_K_generic")
        vp, sz = ctypes.c_void_p, ctypes.c_size_t
        f.restype, f.argtypes = None, [ctypes.c_int, ctypes.POINTER(ctypes.c_float), sz, vp, sz, vp, sz, ctypes.c_int]
        fns[name] = f
    return fns


@pytest.mark.parametrize("name", TYPES)
def test_scalar_dot_is_ggml_generic(generic, name):
    """The scalar set's dot gives the bits of ggml's _generic (on the same Q8_K row)."""
    tid = TYPES[name][0]
    rng = np.random.default_rng(tid + 1)
    n = 4096
    assert lib.colibri_kernel_set_isa(b"scalar") == 0
    try:
        for w in (random_blocks(rng, name, n // 256), llama_rows(name, 1, n)):
            w = np.ascontiguousarray(w.reshape(-1))
            x = activations(rng, 1, n)[0]
            xq = np.empty(n // 256 * Q8_K_BYTES, np.uint8)
            assert lib.colibri_kernel_quantize_act(Q8_K, ffi.cast("float *", ffi.from_buffer(x)), n,
                                                   ffi.from_buffer(xq), xq.nbytes) == 0
            theirs = ctypes.c_float()
            generic[name](n, ctypes.byref(theirs), 0, w.ctypes.data, 0, xq.ctypes.data, 0, 1)
            mine = ffi.new("float *")
            assert lib.colibri_kernel_vec_dot(tid, n, ffi.from_buffer(w), w.nbytes,
                                              ffi.cast("float *", ffi.from_buffer(x)), mine) == 0
            assert np.float32(mine[0]).tobytes() == np.float32(theirs.value).tobytes(), (mine[0], theirs.value)
    finally:
        lib.colibri_kernel_set_isa(b"auto")


@pytest.mark.parametrize("name", TYPES)
@pytest.mark.parametrize("n_in,n_out", SHAPES)
def test_matmul_bits_equal_ggml(ggml, name, n_in, n_out):
    """Every SIMD kernel set: ggml's bits for every batch size (its AVX2 vec_dot under 8 rows, its
    tiled matmul from 8), on llama.cpp-quantized weights; the scalar set within float rounding."""
    tid = TYPES[name][0]
    w = llama_rows(name, n_out, n_in)
    rng = np.random.default_rng(n_in + n_out)
    xs = {n: activations(rng, n, n_in) for n in BATCHES}
    theirs = {n: ggml.mul_mat(tid, w, n_in, n_out, xs[n]) for n in BATCHES}
    try:
        for isa, way in variants():
            use(isa, way)
            for n in BATCHES:
                mine = ours(tid, w, n_in, n_out, xs[n])
                if isa == "scalar":
                    rel = np.abs(mine - theirs[n]).max() / np.abs(theirs[n]).max()
                    assert rel < 1e-5, f"{name} {isa} n_rows {n}: relative difference {rel:.2e}"
                    continue
                bad = np.argwhere(mine != theirs[n])
                assert bad.size == 0, (f"{name} {isa} ({way}) n_rows {n}: {len(bad)} of {mine.size} differ, first at "
                                       f"{tuple(bad[0])}: {mine[tuple(bad[0])]!r} vs ggml {theirs[n][tuple(bad[0])]!r}")
    finally:
        reset()


@pytest.mark.parametrize("name", TYPES)
def test_random_blocks_bits_equal_ggml(ggml, name):
    """Blocks of random bytes use every grid point, sign pattern and scale: still ggml's bits."""
    tid = TYPES[name][0]
    n_in, n_out = 1024, 20
    rng = np.random.default_rng(tid + 7)
    w = np.ascontiguousarray(random_blocks(rng, name, n_in // 256 * n_out).reshape(n_out, -1))
    try:
        for n in (1, 3, 5, 8, 17, 70, 300):  # 70, 300: past the 16-row kernels' 64- and 256-row passes
            x = activations(rng, n, n_in)
            theirs = ggml.mul_mat(tid, w, n_in, n_out, x)
            for isa, way in variants(simd_only=True):
                use(isa, way)
                assert np.array_equal(ours(tid, w, n_in, n_out, x), theirs), (name, isa, way, n)
    finally:
        reset()
