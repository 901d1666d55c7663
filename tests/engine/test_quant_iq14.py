"""engine/src/quant_iq14*.c: IQ1_S, IQ1_M, IQ4_NL, IQ4_XS and MXFP4 against
llama.cpp's own ggml (the reference build) and gguf-py.

- dequantization: ggml's dequantize_row_<t> (libggml-base) bit for bit, and
  gguf.quants.dequantize;
- the scalar kernel set: ggml's exported ggml_vec_dot_<t>_<partner>_generic
  bit for bit, on the same quantized activation;
- matmul: ggml_mul_mat bit for bit (weights in CPU_REPACK exactly when
  llama.cpp repacks them: IQ4_NL and MXFP4 with n_out % 8 == 0) for every
  batch size whose arithmetic differs (one row; tinyBLAS from 2 rows; the
  repacked gemv/gemm; the tiled matmul from 8 rows), with each kernel set
  this CPU has, on random blocks and on rows quantized by llama.cpp.
"""
from __future__ import annotations

import ctypes
from pathlib import Path

import numpy as np
import pytest

from tests.engine.ggml_ref import check_real_rows, ffi, ggml, lib, ours  # noqa: F401 (ggml: the fixture)

gguf = pytest.importorskip("gguf")
from gguf import GGMLQuantizationType as T  # noqa: E402
from gguf.constants import GGML_QUANT_SIZES  # noqa: E402


TYPES = {"IQ1_S": T.IQ1_S, "IQ1_M": T.IQ1_M, "IQ4_NL": T.IQ4_NL, "IQ4_XS": T.IQ4_XS, "MXFP4": T.MXFP4}
PARTNER = {T.IQ1_S: T.Q8_K, T.IQ1_M: T.Q8_K, T.IQ4_XS: T.Q8_K, T.IQ4_NL: T.Q8_0, T.MXFP4: T.Q8_0}
GENERIC = {T.IQ1_S: "iq1_s_q8_K", T.IQ1_M: "iq1_m_q8_K", T.IQ4_NL: "iq4_nl_q8_0", T.IQ4_XS: "iq4_xs_q8_K",
           T.MXFP4: "mxfp4_q8_0"}
BATCHES = [1, 2, 3, 4, 5, 7, 8, 9, 16, 33]
SIMD_ISAS = ["avx2", "avxvnni", "avx512"]


def random_blocks(rng, qtype, n_blocks):
    """Random block bytes with sane scales (no inf / NaN / huge values)."""
    blk, size = GGML_QUANT_SIZES[qtype]
    raw = rng.integers(0, 256, (n_blocks, size), dtype=np.uint8)
    d = rng.uniform(0.001, 0.02, n_blocks).astype(np.float16).view(np.uint16)
    if qtype == T.MXFP4:
        raw[:, 0] = rng.integers(112, 128, n_blocks)  # E8M0: 2^-16 .. 2^-1
    elif qtype == T.IQ1_M:
        # the fp16 scale lives in the top nibble of the four u16 scale words (bytes 48..55)
        words = raw[:, 48:56].copy().view(np.uint16) & 0x0fff
        for k in range(4):
            words[:, k] |= ((d >> (4 * k)) & 0xf) << 12
        raw[:, 48:56] = words.view(np.uint8)
    else:
        raw[:, 0:2] = d.view(np.uint8).reshape(-1, 2)
    return raw


def set_isa(isa):
    if lib.colibri_kernel_set_isa(isa.encode()) != 0:
        pytest.skip(f"this CPU has no {isa}")


@pytest.fixture(autouse=True)
def restore_isa():
    yield
    lib.colibri_kernel_set_isa(b"auto")


def _libdir() -> Path:
    import llama_cpp
    return Path(llama_cpp.__file__).parent / "lib"


@pytest.fixture(scope="module")
def base():
    so = ctypes.CDLL(str(_libdir() / "libggml-base.so"), mode=getattr(ctypes, "RTLD_GLOBAL", 0))
    return so


@pytest.fixture(scope="module")
def cpu(base):
    so = ctypes.CDLL(str(_libdir() / "libggml-cpu.so"), mode=getattr(ctypes, "RTLD_GLOBAL", 0))
    so.ggml_cpu_init.restype = None
    so.ggml_cpu_init()  # its E8M0 table
    return so


def ours_dequant(qtype, raw, n):
    out = np.empty(n, np.float32)
    rc = lib.colibri_kernel_dequantize(int(qtype), ffi.from_buffer(raw), raw.nbytes,
                                       ffi.cast("float *", ffi.from_buffer(out)), n)
    assert rc == 0
    return out


def ggml_dequant(base, qtype, raw, n):
    f = getattr(base, f"dequantize_row_{qtype.name.lower()}")
    f.restype, f.argtypes = None, [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]
    out = np.empty(n, np.float32)
    f(raw.ctypes.data, out.ctypes.data, n)
    return out


@pytest.mark.parametrize("name", list(TYPES))
def test_dequantize_equals_ggml_and_gguf(base, name):
    from tests.fixtures.ggml_quant import quantize

    qtype = TYPES[name]
    rng = np.random.default_rng(int(qtype))
    blk = GGML_QUANT_SIZES[qtype][0]
    n = 64 * 256
    random = np.ascontiguousarray(random_blocks(rng, qtype, n // blk).ravel())
    real = np.ascontiguousarray(quantize((rng.standard_normal((4, n // 4)) * 0.05).astype(np.float32), name).ravel())
    for raw in (random, real):
        mine = ours_dequant(qtype, raw, n)
        assert np.array_equal(mine.view(np.uint32), ggml_dequant(base, qtype, raw, n).view(np.uint32)), name
        ref = gguf.quants.dequantize(raw, qtype).astype(np.float32).ravel()
        np.testing.assert_allclose(mine, ref, rtol=1e-6, atol=0)


@pytest.mark.parametrize("name", list(TYPES))
def test_scalar_dot_equals_ggml_generic(cpu, name):
    """The scalar set's vec_dot: ggml_vec_dot_<t>_generic's bits on the same activation bytes."""
    qtype = TYPES[name]
    partner = PARTNER[qtype]
    f = getattr(cpu, f"ggml_vec_dot_{GENERIC[qtype]}_generic")
    vp, sz = ctypes.c_void_p, ctypes.c_size_t
    f.restype, f.argtypes = None, [ctypes.c_int, vp, sz, vp, sz, vp, sz, ctypes.c_int]
    rng = np.random.default_rng(7 + int(qtype))
    set_isa("scalar")
    for n in (256, 2048, 7168):
        w = np.ascontiguousarray(random_blocks(rng, qtype, n // GGML_QUANT_SIZES[qtype][0]).ravel())
        x = (rng.standard_normal(n) * rng.choice([0.1, 1.0, 30.0], n, p=[.5, .45, .05])).astype(np.float32)
        a = np.empty(n // GGML_QUANT_SIZES[partner][0] * GGML_QUANT_SIZES[partner][1], np.uint8)
        assert lib.colibri_kernel_quantize_act(int(partner), ffi.cast("float *", ffi.from_buffer(x)), n,
                                               ffi.from_buffer(a), a.nbytes) == 0
        theirs = ctypes.c_float()
        f(n, ctypes.addressof(theirs), 0, w.ctypes.data, 0, a.ctypes.data, 0, 1)
        mine = ffi.new("float *")
        assert lib.colibri_kernel_vec_dot(int(qtype), n, ffi.from_buffer(w), w.nbytes,
                                          ffi.cast("float *", ffi.from_buffer(x)), mine) == 0
        assert np.float32(mine[0]).view(np.uint32) == np.float32(theirs.value).view(np.uint32), (name, n)


def assert_bits_equal(ggml, rng, qtype, w, n_in, n_out, batches=BATCHES):
    for n_rows in batches:
        x = (rng.standard_normal((n_rows, n_in)) * rng.choice([0.1, 1.0, 30.0], (n_rows, n_in), p=[.5, .45, .05]))
        x = np.ascontiguousarray(x.astype(np.float32))
        theirs = ggml.mul_mat(int(qtype), w, n_in, n_out, x)
        mine = ours(int(qtype), w, n_in, n_out, x)
        bad = np.argwhere(mine.view(np.uint32) != theirs.view(np.uint32))
        assert bad.size == 0, (f"{qtype.name} {n_in}x{n_out} n_rows {n_rows}: {len(bad)} of {mine.size} differ, first "
                               f"{tuple(bad[0])}: {mine[tuple(bad[0])]!r} vs ggml {theirs[tuple(bad[0])]!r}")


# row lengths of real models: gpt-oss 2880 (90 blocks of 32), 2048, 4096, 7168;
# n_out a multiple of 8 (IQ4_NL / MXFP4 repacked) and not; 7168 = 224 blocks: the
# repacked one-row kernels take the activation in chunks of 128 blocks
CASES = [("IQ4_NL", 2880, 40), ("IQ4_NL", 2880, 37), ("IQ4_NL", 4096, 24), ("IQ4_NL", 96, 18), ("IQ4_NL", 7168, 16),
         ("MXFP4", 2880, 40), ("MXFP4", 2880, 37), ("MXFP4", 2048, 24), ("MXFP4", 96, 18), ("MXFP4", 7168, 16),
         ("IQ4_XS", 2048, 40), ("IQ4_XS", 7168, 21), ("IQ1_S", 2048, 40), ("IQ1_S", 7168, 21),
         ("IQ1_M", 2048, 40), ("IQ1_M", 4096, 21)]


@pytest.mark.parametrize("isa", SIMD_ISAS)
@pytest.mark.parametrize("name,n_in,n_out", CASES)
def test_matmul_random_blocks_bits_equal_ggml(ggml, isa, name, n_in, n_out):
    """Every kernel set ggml's x86 arithmetic serves (its AVX-512 build runs the
    AVX2 kernels of these types, and the tiled microkernel of its VNNI and AVX2
    builds give the same floats): the reference's bits."""
    set_isa(isa)
    qtype = TYPES[name]
    rng = np.random.default_rng(n_in * 31 + n_out + int(qtype))
    w = np.ascontiguousarray(random_blocks(rng, qtype, n_out * n_in // GGML_QUANT_SIZES[qtype][0]).reshape(n_out, -1))
    assert_bits_equal(ggml, rng, qtype, w, n_in, n_out)


@pytest.mark.parametrize("isa", SIMD_ISAS)
@pytest.mark.parametrize("name", TYPES)
def test_long_batch_bits_equal_ggml(ggml, isa, name):
    """300 activation rows: past the 16-row kernels' passes over their decoded weights (64 rows,
    256 for the tiled ones), the accumulators started again at each."""
    set_isa(isa)
    qtype = TYPES[name]
    n_in, n_out = 1024, 16
    rng = np.random.default_rng(int(qtype) + 300)
    w = np.ascontiguousarray(random_blocks(rng, qtype, n_out * n_in // GGML_QUANT_SIZES[qtype][0]).reshape(n_out, -1))
    assert_bits_equal(ggml, rng, qtype, w, n_in, n_out, batches=(300,))


@pytest.mark.parametrize("name,n_in,n_out", [("MXFP4", 2880, 64), ("MXFP4", 2880, 36), ("IQ4_NL", 2048, 48),
                                             ("IQ4_NL", 2048, 36), ("IQ4_XS", 4096, 32), ("IQ1_S", 4096, 32),
                                             ("IQ1_M", 7168, 16)])
def test_matmul_llama_quantized_rows_bits_equal_ggml(ggml, name, n_in, n_out):
    """Rows quantized by llama.cpp's own quantizer (what a real file holds)."""
    check_real_rows(ggml, name, n_in, n_out, mirrored=True, batches=BATCHES)


@pytest.mark.parametrize("name,n_in,n_out", [("MXFP4", 2880, 40), ("IQ4_NL", 2048, 37), ("IQ4_XS", 2048, 24),
                                             ("IQ1_S", 2048, 24), ("IQ1_M", 2048, 24)])
def test_scalar_matmul_within_rounding(ggml, name, n_in, n_out):
    """The scalar set (other CPUs) adds up as ggml's generic code: within float rounding of the x86 reference."""
    set_isa("scalar")
    qtype = TYPES[name]
    rng = np.random.default_rng(5)
    w = np.ascontiguousarray(random_blocks(rng, qtype, n_out * n_in // GGML_QUANT_SIZES[qtype][0]).reshape(n_out, -1))
    for n_rows in (1, 4, 9):
        x = rng.standard_normal((n_rows, n_in)).astype(np.float32)
        theirs = ggml.mul_mat(int(qtype), w, n_in, n_out, x)
        mine = ours(int(qtype), w, n_in, n_out, x)
        rel = np.abs(mine - theirs).max() / np.abs(theirs).max()
        assert rel < 2e-6, (name, n_rows, rel)
