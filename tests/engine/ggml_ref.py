"""llama.cpp's own ggml as the reference for our kernels, bit for bit: a
ggml_mul_mat on the same weights and activations, in the buffer a model load
puts the weight in (CPU_REPACK for the types llama.cpp repacks on this CPU),
and our coli_matmul beside it.

    from tests.engine.ggml_ref import ggml, ours   # ggml: a pytest fixture
    theirs = ggml.mul_mat(wtype, w, n_in, n_out, x)
    mine = ours(wtype, w, n_in, n_out, x)
"""
from __future__ import annotations

import ctypes
import os
from pathlib import Path

import numpy as np
import pytest

from tests.reference import MIRRORING_SETS, llama_cpp, reference_isa

engine = pytest.importorskip("colibri._engine")
ffi, lib = engine.ffi, engine.lib

F32, F16, Q4_0, Q5_0, Q8_0, Q2_K, Q4_K, Q6_K = 0, 1, 2, 6, 8, 10, 12, 14
IQ4_NL, MXFP4 = 20, 39


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
            (self.base, "ggml_swiglu_split"): (vp, [vp, vp, vp]),
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

    def repacks(self, wtype: int, n_out: int) -> bool:
        """Whether llama.cpp puts this weight in CPU_REPACK (ggml_repack_get_optimal_repack_type
        on x86: Q4_0, Q4_K, IQ4_NL, MXFP4 on AVX2, Q2_K on AVX-512; n_out % 8 == 0)."""
        types = {Q4_0, Q4_K, IQ4_NL, MXFP4} | ({Q2_K} if self.ggml_cpu_has_avx512() else set())
        return wtype in types and n_out % 8 == 0

    def mul_mat(self, wtype: int, w: np.ndarray, n_in: int, n_out: int, x: np.ndarray) -> np.ndarray:
        n_rows = x.shape[0]
        repack = self.repacks(wtype, n_out)
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

    def swiglu(self, x: np.ndarray, g: np.ndarray) -> np.ndarray:
        """ggml_swiglu_split(x, g) row by row: silu(x) * g (ggml_vec_swiglu_f32 per row)."""
        n_rows, n = x.shape
        cx = self.ggml_init(InitParams(1 << 20, None, True))
        xt, gt = self.ggml_new_tensor_2d(cx, F32, n, n_rows), self.ggml_new_tensor_2d(cx, F32, n, n_rows)
        yt = self.ggml_swiglu_split(cx, xt, gt)
        gf = self.ggml_new_graph(cx)
        self.ggml_build_forward_expand(gf, yt)
        galloc = self.ggml_gallocr_new(self.ggml_backend_cpu_buffer_type())
        assert self.ggml_gallocr_alloc_graph(galloc, gf)
        self.ggml_backend_tensor_set(xt, x.ctypes.data, 0, x.nbytes)
        self.ggml_backend_tensor_set(gt, g.ctypes.data, 0, g.nbytes)
        assert self.ggml_backend_graph_compute(self.backend, gf) == 0
        y = np.empty_like(x)
        self.ggml_backend_tensor_get(yt, y.ctypes.data, 0, y.nbytes)
        self.ggml_gallocr_free(galloc)
        self.ggml_free(cx)
        return y


@pytest.fixture(scope="module")
def ggml():
    """The reference's ggml, with .isa the set it was built for ("avx512" or "avx2"); the kernel sets whose
    arithmetic it mirrors must run here. Under COLI_REQUIRE_REFERENCE=1 (scripts/test.sh) a reference or a
    CPU that cannot be checked fails: the AVX-512 set is checked against an AVX-512 VNNI build, the AVX2
    and AVX-VNNI sets against an AVX2-only one (the main pass on an AVX2 machine, the AVX2 pass on others)."""
    mod = llama_cpp()
    g = Ggml(Path(mod.__file__).parent / "lib")
    g.isa = reference_isa()
    runnable = [s for s in MIRRORING_SETS.get(g.isa, ()) if lib.colibri_kernel_set_isa(s.encode()) == 0]
    lib.colibri_kernel_set_isa(b"auto")
    if not runnable:
        why = (f"the reference is a {g.isa} build and this CPU runs none of the kernel sets that mirror it "
               f"(cpu: {ffi.string(lib.colibri_cpu_features()).decode()})")
        if os.environ.get("COLI_REQUIRE_REFERENCE") == "1":
            pytest.fail(why)
        pytest.skip(why)
    yield g
    g.ggml_backend_free(g.backend)


def same_f32_lanes(ggml, isa: str) -> bool:
    """Whether our set `isa` ("auto": the one in force) adds F32/F16 dots in the reference's lanes (16 on
    AVX-512, 8 on AVX2): only then are those types the reference's bits."""
    ours = ffi.string(lib.colibri_kernel_isa()).split()[0].decode() if isa == "auto" else isa
    return (ours == "avx512") == (ggml.isa == "avx512")


def ours(wtype, w, n_in, n_out, x):
    y = np.empty((x.shape[0], n_out), np.float32)
    rc = lib.colibri_kernel_matmul(wtype, ffi.from_buffer(w), w.nbytes, n_in, n_out,
                                   ffi.cast("float *", ffi.from_buffer(x)), x.shape[0],
                                   ffi.cast("float *", ffi.from_buffer(y)), 2)
    assert rc == 0
    return y


def check_real_rows(ggml, name, n_in, n_out, mirrored, batches=(1, 3, 4, 8, 9, 17)):
    """Weights of type `name` quantized by llama.cpp's quantizer, activations
    with outliers: our matmul against ggml's for each batch size, the same
    bits (mirrored) or within float rounding."""
    import gguf

    from tests.fixtures.ggml_quant import quantize

    wtype = int(gguf.GGMLQuantizationType[name])
    rng = np.random.default_rng(n_in + wtype + n_out)
    wf = (rng.standard_normal((n_out, n_in)) * 0.05).astype(np.float32)
    w = np.ascontiguousarray(wf.astype(np.float16).view(np.uint8) if name == "F16" else quantize(wf, name))
    for n_rows in batches:
        x = (rng.standard_normal((n_rows, n_in)) * rng.choice([0.1, 1.0, 30.0], (n_rows, n_in), p=[.5, .45, .05]))
        x = np.ascontiguousarray(x.astype(np.float32))
        theirs = ggml.mul_mat(wtype, w, n_in, n_out, x)
        mine = ours(wtype, w, n_in, n_out, x)
        if mirrored:
            assert np.array_equal(mine, theirs), f"{name} n_rows {n_rows}: not the bits of ggml"
        else:
            rel = np.abs(mine - theirs).max() / np.abs(theirs).max()
            assert rel < 2e-6, f"{name} n_rows {n_rows}: relative difference {rel:.2e}"
