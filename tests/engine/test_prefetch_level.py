"""Where the kernels prefetch weights (engine/src/prefetch.h, colibri_kernel_set_prefetch):
into L1 by default, into L2 where calibration finds it faster (AMD Zen 4's AVX-512
tiles). The level moves when a line arrives, never a result; and the streamed
timing calibration uses (colibri_kernel_time_stream) alternates sets and levels
on the calling thread, leaving the process as it found it."""
from __future__ import annotations

import numpy as np
import pytest

from colibri import engine
from colibri.engine import Engine
from tests.engine.ggml_ref import ffi, lib, ours
from tests.engine.tiny_models import write_tiny

SIMD = [isa for isa in ("avx2", "avxvnni", "avx512") if engine.kernel_set_runnable(isa)]
TYPES = ["Q4_0", "Q8_0", "Q2_K", "Q3_K", "Q4_K", "Q6_K", "IQ2_XXS", "IQ3_S", "IQ1_M", "IQ4_NL", "MXFP4", "TQ2_0"]


@pytest.fixture(autouse=True)
def restore():
    yield
    engine.set_kernel_isa("auto")
    engine.set_kernel_prefetch("l1")


def weights(rng, type_name, n_in, n_out):
    from tests.fixtures.ggml_quant import quantize

    return np.ascontiguousarray(quantize((rng.standard_normal((n_out, n_in)) * 0.05).astype(np.float32), type_name))


@pytest.mark.skipif(not SIMD, reason="no SIMD kernel set on this CPU: nothing prefetches")
@pytest.mark.parametrize("type_name", TYPES)
def test_the_level_changes_no_bits(type_name):
    rng = np.random.default_rng(7)
    n_in, n_out = 1024, 96
    w = weights(rng, type_name, n_in, n_out)
    wtype = engine.GGML_TYPE_IDS[type_name]
    for isa in SIMD:
        engine.set_kernel_isa(isa)
        for rows in (1, 3, 8):
            x = rng.standard_normal((rows, n_in)).astype(np.float32)
            engine.set_kernel_prefetch("l1")
            l1 = ours(wtype, w, n_in, n_out, x)
            engine.set_kernel_prefetch("l2")
            assert engine.kernel_prefetch() == "l2"
            assert np.array_equal(ours(wtype, w, n_in, n_out, x), l1), (isa, rows)


def test_a_model_decodes_alike_at_either_level(tmp_path):
    path = write_tiny(tmp_path / "moe.gguf", family="qwen3moe", quant=2, tied=False, seed=5)
    tokens = [int(t) for t in np.random.default_rng(2).integers(0, 256, 24)]
    runs = []
    for level in ("l1", "l2"):
        engine.set_kernel_prefetch(level)
        with Engine(path, n_ctx=64, n_threads=2, n_batch=8) as e:
            runs.append(np.stack([np.frombuffer(e.eval([t], i, logits="last"), np.float32).copy()
                                  for i, t in enumerate(tokens)]))
    assert np.array_equal(runs[0], runs[1])


def test_an_unknown_level_is_refused():
    with pytest.raises(engine.EngineError, match="expected l1 or l2"):
        engine.set_kernel_prefetch("l3")
    assert engine.kernel_prefetch() == "l1"
    assert lib.colibri_kernel_set_prefetch(ffi.NULL) != 0


def time_stream(w, n_in, n_out, variants, stream_bytes=4 << 20, rounds=2, w_bytes=None, type_name="Q4_0"):
    keep = [ffi.new("char[]", s.encode()) for pair in variants for s in pair]
    isas, levels = ffi.new("const char *[]", keep[0::2]), ffi.new("const char *[]", keep[1::2])
    out = ffi.new("double[]", max(1, len(variants)))
    rc = lib.colibri_kernel_time_stream(engine.GGML_TYPE_IDS[type_name], ffi.from_buffer(w),
                                        w.nbytes if w_bytes is None else w_bytes, n_in, n_out, stream_bytes,
                                        isas, levels, len(variants), rounds, out)
    return rc, list(out)


@pytest.mark.skipif(not SIMD, reason="no SIMD kernel set on this CPU")
def test_time_stream_times_each_variant_and_leaves_the_process_as_it_was():
    w = weights(np.random.default_rng(0), "Q4_0", 1024, 64)
    before = engine.kernel_isa()
    variants = [(isa, level) for isa in SIMD for level in ("l1", "l2")]
    rc, seconds = time_stream(w, 1024, 64, variants)
    assert rc == 0 and all(0 < s < 0.1 for s in seconds)
    assert engine.kernel_isa() == before and engine.kernel_prefetch() == "l1"
    engine.set_kernel_prefetch("l2")
    assert time_stream(w, 1024, 64, variants[:1])[0] == 0 and engine.kernel_prefetch() == "l2"


@pytest.mark.skipif(not SIMD, reason="no SIMD kernel set on this CPU")
@pytest.mark.parametrize("type_name", ["Q4_0", "Q4_K", "IQ4_NL", "MXFP4"])
def test_time_stream_times_tiles_where_a_load_makes_them(type_name, monkeypatch):
    """The types a load rewrites into 16-row tiles are timed as tiles (whole tiles: 64 rows),
    as stored where they are not (24 rows, or COLI_REPACK=0)."""
    rng = np.random.default_rng(1)
    variants = [(isa, level) for isa in SIMD for level in ("l1", "l2")]
    for n_out in (64, 24):
        rc, seconds = time_stream(weights(rng, type_name, 1024, n_out), 1024, n_out, variants, type_name=type_name)
        assert rc == 0 and all(0 < t < 0.1 for t in seconds), n_out
    monkeypatch.setenv("COLI_REPACK", "0")
    assert time_stream(weights(rng, type_name, 1024, 64), 1024, 64, variants, type_name=type_name)[0] == 0


@pytest.mark.skipif(not SIMD, reason="no SIMD kernel set on this CPU")
def test_time_stream_names_bad_arguments():
    w = weights(np.random.default_rng(0), "Q4_0", 1024, 64)
    isa = SIMD[0]
    for variants, kw, message in [
        ([(isa, "l3")], {}, "expected l1 or l2"),
        ([("neon", "l1")], {}, "not one this CPU runs"),
        ([(isa, "l1")], {"w_bytes": 100}, "weight buffer of 100 bytes"),
        ([], {}, "0 variants"),
        ([(isa, "l1")] * 17, {}, "17 variants"),
        ([(isa, "l1")], {"rounds": 0}, "rounds = 0"),
    ]:
        rc, _ = time_stream(w, 1024, 64, variants, **kw)
        assert rc != 0 and message in ffi.string(lib.colibri_last_error()).decode(), message
