"""engine/src/quant_ternary.c: TQ1_0 and TQ2_0 against gguf-py and llama.cpp's own ggml.

Dequantization of random blocks (every byte value, so TQ1_0's five-trit bytes
past 242 and TQ2_0's unused value 3 too) equals gguf-py's numpy reference and
ggml's dequantize_row_tq*; the scalar dot products give ggml's
ggml_vec_dot_tq*_q8_K_generic bits; and our matmul gives ggml_mul_mat's bits
(ggml runs every row through its AVX2 vec_dot, which the AVX-512 build runs
too) for every batch size and each SIMD kernel set, on weights quantized by
llama.cpp's quantizer."""
from __future__ import annotations

import ctypes
from pathlib import Path

import numpy as np
import pytest

from tests.engine.ggml_ref import ffi, ggml, lib, ours  # noqa: F401 (ggml: the fixture)
from tests.reference import llama_cpp

gguf = pytest.importorskip("gguf")
from gguf import GGMLQuantizationType as T  # noqa: E402
from gguf.constants import GGML_QUANT_SIZES  # noqa: E402

TYPES = ["TQ1_0", "TQ2_0"]
D_OFFSET = {"TQ1_0": 52, "TQ2_0": 64}  # the fp16 scale, last in the block
Q8_K = 15
BATCHES = [1, 2, 3, 4, 5, 7, 8, 9, 16, 33]


def random_blocks(rng, name, n_blocks):
    blk, size = GGML_QUANT_SIZES[T[name]]
    raw = rng.integers(0, 256, (n_blocks, size), dtype=np.uint8)
    off = D_OFFSET[name]
    raw[:, off:off + 2] = rng.uniform(0.001, 0.02, n_blocks).astype(np.float16).view(np.uint8).reshape(-1, 2)
    return raw


def dequantize(name, raw, n):
    out = np.empty(n, np.float32)
    rc = lib.colibri_kernel_dequantize(int(T[name]), ffi.from_buffer(raw), raw.nbytes,
                                       ffi.cast("float *", ffi.from_buffer(out)), n)
    assert rc == 0
    return out


def ggml_libs():
    mod = llama_cpp()
    libdir = Path(mod.__file__).parent / "lib"
    mode = getattr(ctypes, "RTLD_GLOBAL", 0)
    base = ctypes.CDLL(str(libdir / "libggml-base.so"), mode=mode)
    cpu = ctypes.CDLL(str(libdir / "libggml-cpu.so"), mode=mode)
    cpu.ggml_cpu_init()  # ggml's fp16 -> fp32 table, which the dot products read
    return base, cpu


@pytest.mark.parametrize("name", TYPES)
def test_dequantize_matches_gguf_and_ggml(name):
    rng = np.random.default_rng(19)
    raw = random_blocks(rng, name, 40)
    n = 40 * 256
    mine = dequantize(name, raw, n)
    assert np.array_equal(mine, gguf.quants.dequantize(raw, T[name]).ravel())
    base, _ = ggml_libs()
    f = getattr(base, f"dequantize_row_{name.lower()}")
    f.restype, f.argtypes = None, [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]
    theirs = np.empty(n, np.float32)
    f(raw.ctypes.data, theirs.ctypes.data, n)
    assert np.array_equal(mine, theirs)


@pytest.mark.parametrize("name", TYPES)
def test_scalar_dot_is_ggml_generic(name):
    """The scalar kernel set (non-x86 machines) gives ggml_vec_dot_*_generic's bits."""
    from tests.fixtures.ggml_quant import quantize

    _, cpu = ggml_libs()
    f = getattr(cpu, f"ggml_vec_dot_{name.lower()}_q8_K_generic")
    f.restype = None
    f.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p, ctypes.c_size_t,
                  ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    assert lib.colibri_kernel_set_isa(b"scalar") == 0
    try:
        for n in (256, 768, 2048, 5120):
            rng = np.random.default_rng(n)
            w = np.ascontiguousarray(quantize((rng.standard_normal((8, n)) * 0.05).astype(np.float32), name))
            for r in range(8):
                x = (rng.standard_normal(n) * rng.choice([0.1, 1.0, 30.0], n, p=[.5, .45, .05])).astype(np.float32)
                xq = np.zeros(n // 256 * 292, np.uint8)
                assert lib.colibri_kernel_quantize_act(Q8_K, ffi.cast("float *", ffi.from_buffer(x)), n,
                                                       ffi.from_buffer(xq), xq.nbytes) == 0
                theirs = ctypes.c_float()
                f(n, ctypes.byref(theirs), 0, w[r].ctypes.data, 0, xq.ctypes.data, 0, 1)
                mine = ffi.new("float *")
                assert lib.colibri_kernel_vec_dot(int(T[name]), n, ffi.from_buffer(w[r]), w[r].nbytes,
                                                  ffi.cast("float *", ffi.from_buffer(x)), mine) == 0
                assert mine[0] == theirs.value, f"{name} n {n} row {r}: {mine[0]!r} vs ggml {theirs.value!r}"
    finally:
        lib.colibri_kernel_set_isa(b"auto")


@pytest.mark.parametrize("n_in,n_out", [(2048, 64), (768, 37), (4864, 16), (256, 8)])
@pytest.mark.parametrize("isa", ["avx512", "avx2", "avxvnni"])
@pytest.mark.parametrize("name", TYPES)
def test_matmul_bits_equal_ggml(ggml, name, isa, n_in, n_out):
    """Weights quantized by llama.cpp, activations with outliers: ggml_mul_mat's
    bits for every batch size, with each SIMD kernel set this CPU runs."""
    from tests.fixtures.ggml_quant import quantize

    if lib.colibri_kernel_set_isa(isa.encode()) != 0:
        pytest.skip(f"this CPU has no {isa}")
    try:
        wtype = int(T[name])
        rng = np.random.default_rng(n_in * 7 + n_out)
        w = np.ascontiguousarray(quantize((rng.standard_normal((n_out, n_in)) * 0.05).astype(np.float32), name))
        for n_rows in BATCHES:
            x = (rng.standard_normal((n_rows, n_in)) * rng.choice([0.1, 1.0, 30.0], (n_rows, n_in), p=[.5, .45, .05]))
            x = np.ascontiguousarray(x.astype(np.float32))
            theirs = ggml.mul_mat(wtype, w, n_in, n_out, x)
            mine = ours(wtype, w, n_in, n_out, x)
            bad = np.argwhere(mine != theirs)
            assert bad.size == 0, (f"{name} {isa} n_rows {n_rows}: {len(bad)} of {mine.size} differ, first at "
                                   f"{tuple(bad[0])}: {mine[tuple(bad[0])]!r} vs ggml {theirs[tuple(bad[0])]!r}")
    finally:
        lib.colibri_kernel_set_isa(b"auto")


@pytest.mark.parametrize("name", TYPES)
def test_random_bytes_bits_equal_ggml(ggml, name):
    """Blocks of random bytes (TQ2_0's value 3, which no quantizer writes,
    included): still ggml's bits, one row and a batch."""
    n_in, n_out = 1024, 24
    rng = np.random.default_rng(5)
    w = np.ascontiguousarray(random_blocks(rng, name, n_in // 256 * n_out).reshape(n_out, -1))
    for n_rows in (1, 5):
        x = np.ascontiguousarray((rng.standard_normal((n_rows, n_in)) * 3).astype(np.float32))
        assert np.array_equal(ours(int(T[name]), w, n_in, n_out, x), ggml.mul_mat(int(T[name]), w, n_in, n_out, x))
