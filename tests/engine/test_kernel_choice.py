"""The run-time choice between kernel sets (kernels.c coli_kernels_select_type,
the sidecar's kernel_choice.py): a weight type may take another SIMD set's
kernels only where every set gives it the same bits, so a choice made by timing
on one CPU changes speed, never a logit. Runs where the CPU has two SIMD sets
(any AVX-512 machine: AVX2 and AVX-512)."""
from __future__ import annotations

import threading

import numpy as np
import pytest

from colibri import engine
from colibri.engine import Engine
from tests.engine.ggml_ref import ffi, lib, ours
from tests.engine.tiny_models import write_tiny

SIMD = [isa for isa in ("avx2", "avxvnni", "avx512") if engine.kernel_set_runnable(isa)]
pytestmark = pytest.mark.skipif(len(SIMD) < 2, reason="this CPU runs one SIMD kernel set: nothing to choose")

SAME_BITS = ["Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q3_K", "Q4_K", "Q5_K", "Q6_K", "IQ2_XXS", "IQ2_XS",
             "IQ2_S", "IQ3_XXS", "IQ3_S", "IQ1_S", "IQ1_M", "IQ4_NL", "IQ4_XS", "MXFP4", "TQ1_0", "TQ2_0"]
OTHER_BITS = ["F32", "F16", "BF16", "Q2_K"]
BATCHES = [1, 2, 4, 8, 9, 16, 33]


@pytest.fixture(autouse=True)
def restore():
    yield
    engine.set_kernel_isa("auto")


def weights(rng, type_name, n_in, n_out):
    from tests.fixtures.ggml_quant import quantize

    return np.ascontiguousarray(quantize((rng.standard_normal((n_out, n_in)) * 0.05).astype(np.float32), type_name))


def test_the_same_bits_list_is_the_engines():
    assert [t for t in SAME_BITS + OTHER_BITS if engine.kernel_same_bits(t)] == SAME_BITS


@pytest.mark.parametrize("type_name", SAME_BITS)
def test_every_set_gives_the_same_bits(type_name):
    """The premise of the choice: each SIMD set's products equal the others' for every batch size,
    on weights llama.cpp would repack (n_out % 8 == 0) and on weights it keeps as stored."""
    gguf = pytest.importorskip("gguf")
    wtype = int(gguf.GGMLQuantizationType[type_name])
    rng = np.random.default_rng(wtype)
    for n_in, n_out in ((2048, 64), (1024, 20)):
        w = weights(rng, type_name, n_in, n_out)
        for n_rows in BATCHES:
            x = np.ascontiguousarray(rng.standard_normal((n_rows, n_in)).astype(np.float32))
            results = {}
            for isa in SIMD:
                engine.set_kernel_isa(isa)
                results[isa] = ours(wtype, w, n_in, n_out, x)
            for isa in SIMD[1:]:
                assert np.array_equal(results[isa], results[SIMD[0]]), f"{type_name} {n_in}x{n_out} rows {n_rows}: {isa}"


def test_a_type_takes_another_sets_kernels_and_set_isa_undoes_it():
    default = engine.kernel_isa()
    other = next(isa for isa in SIMD if isa != default)
    engine.set_kernel_type_isa("Q4_0", other)
    engine.set_kernel_type_isa("Q8_0", other)
    assert engine.kernel_isa() == f"{default} (Q4_0: {other}, Q8_0: {other})"
    assert engine.kernel_type_isa("Q4_0") == other and engine.kernel_type_isa("Q4_K") == default
    assert engine.kernel_default_isa() == default
    engine.set_kernel_type_isa("Q4_0", "auto")
    assert engine.kernel_isa() == f"{default} (Q8_0: {other})"
    engine.set_kernel_type_isa("Q8_0", default)  # the default's own: no longer a mix
    assert engine.kernel_isa() == default
    engine.set_kernel_type_isa("Q8_0", other)
    engine.set_kernel_isa("auto")
    assert engine.kernel_isa() == default


def test_a_types_decode_calls_take_another_set_and_its_batches_keep_its_own():
    default = engine.kernel_isa()
    other = next(isa for isa in SIMD if isa != default)
    engine.set_kernel_type_decode_isa("Q4_K", other)
    assert engine.kernel_isa() == f"{default} (Q4_K: decode {other})"
    assert engine.kernel_type_isa("Q4_K") == default and engine.kernel_type_decode_isa("Q4_K") == other
    assert engine.kernel_type_decode_isa("Q8_0") == default
    engine.set_kernel_type_isa("Q4_K", other)  # the whole type on the other set: no split left
    assert engine.kernel_isa() == f"{default} (Q4_K: {other})"
    engine.set_kernel_type_decode_isa("Q4_K", default)
    assert engine.kernel_isa() == f"{default} (Q4_K: {other} decode {default})"
    engine.set_kernel_type_decode_isa("Q4_K", "auto")
    assert engine.kernel_type_decode_isa("Q4_K") == other
    engine.set_kernel_type_decode_isa("Q8_0", other)
    engine.set_kernel_isa("auto")
    assert engine.kernel_isa() == default and engine.kernel_type_decode_isa("Q8_0") == default
    with pytest.raises(engine.EngineError, match="other bits"):
        engine.set_kernel_type_decode_isa("Q2_K", other)


@pytest.mark.parametrize("type_name,isa,error", [
    ("F32", "avx2", "other bits"), ("Q2_K", "avx2", "other bits"), ("Q4_0", "scalar", "scalar set"),
    ("Q4_0", "neon", "not one this CPU runs"),
])
def test_a_choice_that_would_change_bits_is_refused(type_name, isa, error):
    with pytest.raises(engine.EngineError, match=error):
        engine.set_kernel_type_isa(type_name, isa)


def test_timing_a_set_leaves_other_threads_on_the_set_in_force():
    """time_decode runs another set's kernels on its own thread only; the set in force stays."""
    rng = np.random.default_rng(0)
    w = weights(rng, "Q4_0", 2048, 256)
    default = engine.kernel_isa()
    other = next(isa for isa in SIMD if isa != default)
    seen, out = [], ffi.new("double *")

    def watch():
        for _ in range(200):
            seen.append(engine.kernel_isa())

    t = threading.Thread(target=watch)
    t.start()
    for _ in range(20):
        assert lib.colibri_kernel_time_decode(other.encode(), 2, ffi.from_buffer(w), w.nbytes, 2048, 256, 5, out) == 0
        assert 0 < out[0] < 1
    t.join()
    assert set(seen) == {default} and engine.kernel_isa() == default
    assert lib.colibri_kernel_time_decode(b"avx2", 2, ffi.from_buffer(w), 100, 2048, 256, 1, out) != 0  # short buffer


def test_a_model_gives_the_same_logits_whichever_set_runs_its_types(tmp_path):
    """A Q4_0 MoE (experts, attention, head) prefilled and decoded with its types on each set."""
    path = write_tiny(tmp_path / "moe.gguf", family="qwen3moe", quant=2, tied=False, seed=3)
    tokens = [int(t) for t in np.random.default_rng(1).integers(0, 256, 40)]
    runs = []
    # each set for the whole type, then each other set for its decode calls alone (a prefill's
    # experts with few rows among them: both sets within one forward pass)
    choices = [(isa, "auto") for isa in SIMD] + [("auto", isa) for isa in SIMD[1:]]
    for isa, decode_isa in choices:
        engine.set_kernel_isa("auto")
        engine.set_kernel_type_isa("Q4_0", isa)
        engine.set_kernel_type_decode_isa("Q4_0", decode_isa)
        with Engine(path, n_ctx=64, n_threads=2, n_batch=16) as e:
            prefill = np.frombuffer(e.eval(tokens[:32], 0, logits="all"), np.float32).copy()
            decode = [np.frombuffer(e.eval([t], 32 + i, logits="last"), np.float32).copy()
                      for i, t in enumerate(tokens[32:])]
        runs.append((f"{isa}/{decode_isa}", prefill, np.stack(decode)))
    for isa, prefill, decode in runs[1:]:
        assert np.array_equal(prefill, runs[0][1]), isa
        assert np.array_equal(decode, runs[0][2]), isa
