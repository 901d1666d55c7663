"""gpt-oss (llama.cpp's "openai-moe" graph, src/models/openai-moe.cpp) against
llama.cpp on the synthetic fixtures (tests/fixtures/moe_models.py: 4 layers
alternating a sliding window of 32 and global attention, per-head attention
sinks, q/k/v/output biases, a biased router whose top-4 of 16 experts are
weighted by a softmax over the chosen, per-expert gate/up/down biases, the
clamped SwiGLU (alpha 1.702, limit 7), YaRN RoPE on every layer) with F32, Q8_0,
Q4_0 and MXFP4 experts: 600 positions teacher-forced (top-1 on clear positions,
the same bits where our kernels mirror ggml's), greedy identical. Also: the
window matters past 32 positions, streamed experts decode as resident ones,
slots decoded together as alone, a restored slot as one never stopped, the file
described, and bad files refused by name."""
from __future__ import annotations


import numpy as np
import pytest

from colibri.engine import Engine, GGUFFile
from colibri.errors import EngineError
from tests.engine.family_checks import (all_logits, assert_batched_slots_equal_alone, assert_fidelity,
                                        assert_saved_slot_continues, patched_u32, random_tokens, renamed_tensor)
from tests.engine.test_streaming import streamed_equals_resident
from tests.fixtures import moe_models as mm
from tests.reference import arithmetic_mirrored, matches_llama_cpp

pytest.importorskip("gguf")

ARCH = "gpt-oss"
POSITIONS = 600  # teacher-forced, one sequence: far past the window of 32
# (label, quant, per-role overrides): the matrices' type, and gpt-oss's own MXFP4 experts (the rest Q8_0)
FIXTURES = {"F32": ("F32", {}), "Q8_0": ("Q8_0", {}), "Q4_0": ("Q4_0", {}), "MXFP4": ("Q8_0", {"exp_quant": "MXFP4"})}


def fixture(label: str):
    quant, options = FIXTURES[label]
    return mm.tiny(ARCH, quant, **options)


@pytest.mark.parametrize("label", list(FIXTURES))
@pytest.mark.isa_bits
def test_matches_llama_cpp(label):
    """assert_fidelity: llama.cpp's logits and greedy tokens, the same bits where the kernels mirror ggml's."""
    path = fixture(label)
    assert_fidelity(path, POSITIONS, f"{ARCH} {label}")


def test_the_window_slides(tmp_path):
    """With the window past the prompt (every layer global), the logits agree while the
    prompt fits the fixture's window of 32 and differ after it."""
    path = fixture("Q8_0")
    n_swa = mm.tiny_config(ARCH, "Q8_0").n_swa
    wide = patched_u32(path, tmp_path / "wide.gguf", f"{ARCH}.attention.sliding_window", 4096)
    with Engine(path, n_ctx=128, n_threads=2) as e:
        tokens = random_tokens(e, 100, seed=3)
        sliding = all_logits(e, tokens)
    with Engine(wide, n_ctx=128, n_threads=2) as e:
        full = all_logits(e, tokens)
    assert np.array_equal(sliding[:n_swa], full[:n_swa])
    assert (np.abs(sliding[n_swa:] - full[n_swa:]).max(-1) > 1e-3).mean() > 0.9


@pytest.mark.parametrize("pattern", [dict(swa_period=3), dict(swa_period=0), dict(swa_layers=(False, True, True, False))],
                         ids=["period-3", "period-0", "per-layer"])
@pytest.mark.isa_bits
def test_the_files_sliding_window_pattern(pattern):
    """attention.sliding_window_pattern, as a period (0: every layer slides) or one flag per
    layer, decides which layers slide as in llama.cpp (load_swa_pattern)."""
    path = mm.tiny(ARCH, "Q8_0", **pattern)
    ours, theirs = matches_llama_cpp(path, 200, f"{ARCH} {pattern}", n_greedy=8)
    if arithmetic_mirrored():
        assert np.array_equal(ours, theirs)


@pytest.mark.parametrize("label", ["Q4_0", "MXFP4"])
def test_streamed_tokens_equal_resident(label):
    streamed_equals_resident(fixture(label), f"{ARCH} {label}")


def test_batched_slots_equal_alone():
    """Four conversations past the window, decoded together (joining at different steps)
    give each the tokens it decodes alone."""
    path = fixture("MXFP4")
    assert_batched_slots_equal_alone(path)


def test_a_saved_slot_restores_and_continues_identically(tmp_path):
    path = fixture("Q8_0")
    assert_saved_slot_continues(path, tmp_path)


def test_described_and_loaded():
    path = fixture("MXFP4")
    cfg = mm.tiny_config(ARCH, "Q8_0", exp_quant="MXFP4")
    with GGUFFile(path) as g:
        info = g.describe()
    assert info["arch"] == ARCH and info["n_expert"] == cfg.n_expert and info["n_layer"] == cfg.n_layer
    assert info["tensor_types"]["MXFP4"] == 3 * cfg.n_layer and all(info["tensor_computes"].values())
    with Engine(path, n_ctx=64, n_threads=1) as e:
        assert e.model_info()["arch"] == ARCH


@pytest.mark.parametrize("name,new", [
    ("blk.1.attn_sinks.weight", "blk.1.attn_sinkz.weight"),
    ("blk.0.ffn_gate_inp.bias", "blk.0.ffn_gate_inp.biaz"),
    ("blk.2.ffn_down_exps.bias", "blk.2.ffn_down_exps.biaz"),
    ("blk.3.post_attention_norm.weight", "blk.3.post_attention_norm.weighz"),
])
def test_a_missing_tensor_is_a_named_error(name, new, tmp_path):
    bad = renamed_tensor(fixture("Q8_0"), tmp_path / "bad.gguf", name, new)
    with pytest.raises(EngineError, match=name.replace(".", r"\.")):
        Engine(bad, n_ctx=64, n_threads=1)
