"""Kernels (engine/src/quant*.c, matmul.c) against gguf-py's numpy reference.

Dequantization of random blocks must equal gguf.quants.dequantize bit for
bit; the reference quantizers must produce gguf.quants.quantize's bytes; dot
products and matmuls must match a float64 dot of the dequantized operands,
with the activation quantized to the weight type's partner the way ggml does.
"""
import numpy as np
import pytest

gguf = pytest.importorskip("gguf")
engine = pytest.importorskip("colibri._engine")
ffi, lib = engine.ffi, engine.lib

from gguf import GGMLQuantizationType as T  # noqa: E402
from gguf.constants import GGML_QUANT_SIZES  # noqa: E402

# offsets of the fp16 scale fields inside one block (random bits elsewhere)
HALF_FIELDS = {
    T.Q4_0: [0], T.Q5_0: [0], T.Q8_0: [0],
    T.Q4_1: [0, 2], T.Q5_1: [0, 2], T.Q4_K: [0, 2], T.Q5_K: [0, 2],
    T.Q2_K: [80, 82], T.Q3_K: [108], T.Q6_K: [208],
}
QUANT_TYPES = list(HALF_FIELDS)
WEIGHT_TYPES = [T.F32, T.F16, T.BF16] + QUANT_TYPES
# |kernel - float64 reference| <= tol * sum |w_i a_i|
MAX_DOT_PRODUCT_ERROR = 1e-5
# Q8_1's s = fp16(d * sum q): ggml adds m * s with s rounded to half
MAX_DOT_PRODUCT_ERROR_Q8_1 = 2e-3


def isas():
    out = []
    for isa in ("scalar", "avx2", "avxvnni", "avx512"):
        if lib.colibri_kernel_set_isa(isa.encode()) == 0:
            out.append(isa)
    lib.colibri_kernel_set_isa(b"auto")
    return out


@pytest.fixture
def rng():
    return np.random.default_rng(1234)


def random_blocks(rng, qtype, n):
    if qtype == T.F32:
        return rng.uniform(-1, 1, n).astype(np.float32).view(np.uint8)
    if qtype == T.F16:
        return rng.uniform(-1, 1, n).astype(np.float16).view(np.uint8)
    if qtype == T.BF16:
        return gguf.quants.quantize(rng.uniform(-1, 1, n).astype(np.float32), T.BF16).view(np.uint8).ravel()
    blk, size = GGML_QUANT_SIZES[qtype]
    raw = rng.integers(0, 256, (n // blk, size), dtype=np.uint8)
    for off in HALF_FIELDS[qtype]:
        d = rng.uniform(0.001, 0.02, n // blk).astype(np.float16)
        raw[:, off:off + 2] = d.view(np.uint8).reshape(-1, 2)
    return raw.ravel()


def row_bytes(qtype, n):
    blk, size = GGML_QUANT_SIZES[qtype]
    return n // blk * size


def c_dequantize(qtype, data, n):
    out = np.empty(n, np.float32)
    rc = lib.colibri_kernel_dequantize(int(qtype), ffi.from_buffer(data), data.nbytes,
                                       ffi.from_buffer("float[]", out), n)
    assert rc == 0, ffi.string(lib.colibri_last_error())
    return out


def c_quantize(qtype, x, act=False):
    x = np.ascontiguousarray(x, np.float32)
    out = np.zeros(row_bytes(qtype, x.size), np.uint8)
    fn = lib.colibri_kernel_quantize_act if act else lib.colibri_kernel_quantize
    rc = fn(int(qtype), ffi.from_buffer("float[]", x), x.size, ffi.from_buffer(out), out.nbytes)
    assert rc == 0, ffi.string(lib.colibri_last_error())
    return out


def partner(qtype):
    p = lib.colibri_kernel_partner_type(int(qtype))
    assert p >= 0
    return T(p)


@pytest.mark.parametrize("qtype", QUANT_TYPES + [T.F16, T.BF16], ids=lambda t: t.name)
def test_dequantize_matches_gguf(rng, qtype):
    n = 4096
    data = random_blocks(rng, qtype, n)
    ref = gguf.quants.dequantize(data, qtype).astype(np.float32).ravel()
    np.testing.assert_array_equal(c_dequantize(qtype, data, n), ref)


@pytest.mark.parametrize("qtype", [T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1, T.Q8_0, T.BF16], ids=lambda t: t.name)
def test_reference_quantizer_matches_gguf(rng, qtype):
    x = rng.normal(0, 1, 4096).astype(np.float32)
    x[:32] = 0.0  # an all-zero block
    ref = gguf.quants.quantize(x, qtype).view(np.uint8).ravel()
    np.testing.assert_array_equal(c_quantize(qtype, x), ref)


def reference_dot(wtype, w, xq, atype, n):
    fw = c_dequantize(wtype, w, n).astype(np.float64)
    fa = c_dequantize(atype, xq, n).astype(np.float64)
    ref = float(np.dot(fw, fa))
    scale = float(np.sum(np.abs(fw * fa))) + 1e-30
    return ref, scale


@pytest.mark.parametrize("qtype", WEIGHT_TYPES, ids=lambda t: t.name)
def test_vec_dot_every_isa(rng, qtype):
    n = 2048
    w = random_blocks(rng, qtype, n)
    x = rng.normal(0, 1, n).astype(np.float32)
    at = partner(qtype)
    xq = x.view(np.uint8) if at == T.F32 else c_quantize(at, x, act=True)
    ref, scale = reference_dot(qtype, w, xq, at, n)
    tol = MAX_DOT_PRODUCT_ERROR_Q8_1 if at == T.Q8_1 else MAX_DOT_PRODUCT_ERROR
    out = ffi.new("float *")
    try:
        for isa in isas():
            assert lib.colibri_kernel_set_isa(isa.encode()) == 0
            rc = lib.colibri_kernel_vec_dot(int(qtype), n, ffi.from_buffer(w), w.nbytes,
                                            ffi.from_buffer("float[]", x), out)
            assert rc == 0, ffi.string(lib.colibri_last_error())
            assert abs(out[0] - ref) <= tol * scale, (isa, out[0], ref, scale)
    finally:
        lib.colibri_kernel_set_isa(b"auto")


@pytest.mark.parametrize("qtype", [T.F32, T.F16, T.Q8_0, T.Q4_0, T.Q5_0, T.Q4_1, T.Q4_K, T.Q6_K],
                         ids=lambda t: t.name)
def test_matmul_vs_numpy(rng, qtype):
    n_in, n_out, n_rows = 512, 48, 5
    w = np.concatenate([random_blocks(rng, qtype, n_in) for _ in range(n_out)])
    x = rng.normal(0, 1, (n_rows, n_in)).astype(np.float32)
    y = np.empty((n_rows, n_out), np.float32)
    rc = lib.colibri_kernel_matmul(int(qtype), ffi.from_buffer(w), w.nbytes, n_in, n_out,
                                   ffi.from_buffer("float[]", x), n_rows, ffi.from_buffer("float[]", y), 2)
    assert rc == 0, ffi.string(lib.colibri_last_error())
    fw = c_dequantize(qtype, w, n_in * n_out).reshape(n_out, n_in).astype(np.float64)
    at = partner(qtype)
    if at == T.F32:
        fx = x.astype(np.float64)
    else:
        fx = np.stack([c_dequantize(at, c_quantize(at, r, act=True), n_in) for r in x]).astype(np.float64)
    ref = fx @ fw.T
    scale = np.abs(fx) @ np.abs(fw).T
    tol = MAX_DOT_PRODUCT_ERROR_Q8_1 if at == T.Q8_1 else MAX_DOT_PRODUCT_ERROR
    assert np.all(np.abs(y - ref) <= tol * scale + 1e-30)
    # and close to the unquantized product (activation quantization error only)
    full = x.astype(np.float64) @ fw.T
    assert np.max(np.abs(y - full)) <= 0.05 * np.max(np.abs(full)) + 1e-6


def test_errors_are_codes_not_crashes():
    buf = np.zeros(512, np.uint8)
    f = np.zeros(256, np.float32)
    assert lib.colibri_kernel_dequantize(99, ffi.from_buffer(buf), buf.nbytes, ffi.from_buffer("float[]", f), 32) < 0
    assert lib.colibri_kernel_dequantize(int(T.Q4_0), ffi.from_buffer(buf), 17,
                                         ffi.from_buffer("float[]", f), 32) < 0
    assert lib.colibri_kernel_dequantize(int(T.Q4_K), ffi.from_buffer(buf), buf.nbytes,
                                         ffi.from_buffer("float[]", f), 100) < 0
    assert lib.colibri_kernel_set_isa(b"neon") < 0
    assert b"neon" in ffi.string(lib.colibri_last_error())
    assert ffi.string(lib.colibri_kernel_isa()) in (b"scalar", b"avx2", b"avxvnni", b"avx512")
