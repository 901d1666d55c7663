"""The routed FFN against llama.cpp on tiny random-weight MoE files (qwen3moe,
olmoe, Mixtral): the same logits at every position, teacher-forced, with F32
and quantized experts; routing recorded and not degenerate."""
from __future__ import annotations

import numpy as np
import pytest

from colibri.engine import Engine
from colibri.generate import generate
from tests.engine.tiny_models import MOE_FAMILIES, write_tiny
from tests.reference import assert_same_greedy, compare_logits, greedy_with_margins, load_reference

pytest.importorskip("gguf")

Q8_0, Q4_0 = 8, 2
POSITIONS = 512


@pytest.mark.parametrize("quant", [None, Q8_0, Q4_0], ids=["f32", "q8_0", "q4_0"])
@pytest.mark.parametrize("family", MOE_FAMILIES)
@pytest.mark.isa_bits
def test_moe_family_matches_llama_cpp(tmp_path, family, quant):
    path = write_tiny(tmp_path / f"{family}.gguf", family=family, quant=quant, tied=False, seed=11)
    rng = np.random.default_rng(5)
    with Engine(path, n_ctx=POSITIONS, n_threads=2, n_batch=64) as e:
        tokens = [e.bos] + [int(t) for t in rng.integers(0, 256, POSITIONS - 1)]
        ours = np.frombuffer(e.eval(tokens, 0, logits="all"), np.float32).reshape(len(tokens), -1)
        prompt = tokens[:8]
        greedy = generate(e, prompt, 32, stop_at_eog=False).tokens
    ref = load_reference(path, n_ctx=POSITIONS)
    ref.eval(tokens)
    theirs = np.asarray(ref.scores[: len(tokens)]).copy()
    ref_greedy, margins = greedy_with_margins(ref, prompt, 32)
    kl, top1 = compare_logits(ours, theirs, f"{family} {quant}")
    assert kl.mean() < 1e-5 and kl.max() < 1e-4
    assert top1 >= 0.99
    assert_same_greedy(greedy, ref_greedy, margins)


@pytest.mark.parametrize("family", MOE_FAMILIES)
def test_moe_batch_equals_alone_and_routing_recorded(tmp_path, family):
    """Batch-union over experts must not change a row's result: prefill == one token at a time."""
    path = write_tiny(tmp_path / f"{family}.gguf", family=family, quant=Q8_0, seed=2)
    rng = np.random.default_rng(9)
    tokens = [int(t) for t in rng.integers(0, 256, 24)]
    with Engine(path, n_ctx=64, n_threads=2, n_batch=8) as e:
        batch = np.frombuffer(e.eval(tokens, 0, logits="all"), np.float32).reshape(len(tokens), -1)
        routes = [e.last_routing(r) for r in range(8)]  # the last chunk of 8 tokens
        one = np.stack([np.frombuffer(e.eval([t], i, logits="last"), np.float32) for i, t in enumerate(tokens)])
        alone = e.last_routing(0)
    assert np.array_equal(batch, one)
    # the last token chose the same experts alone as in its batch, with the same weights
    # (to the last bits only where the F32 router's kernel tiles rows differently)
    assert [[e for e, _ in layer] for layer in alone] == [[e for e, _ in layer] for layer in routes[-1]]
    for la, lb in zip(alone, routes[-1]):
        assert [w for _, w in la] == pytest.approx([w for _, w in lb], rel=1e-5)
    moe_layers = [layer for layer in alone if layer]
    assert moe_layers and all(len(layer) == 2 for layer in moe_layers)
    chosen = {tuple(e for e, _ in r[-1]) for r in routes}
    assert len(chosen) > 1, "every token picked the same experts: the router is degenerate"
    if family != "olmoe" and family != "glm4moe":  # those two do not renormalise (glm: scaled by 2.5)
        for layer in moe_layers:
            assert sum(w for _, w in layer) == pytest.approx(1.0, abs=1e-5)


@pytest.mark.parametrize("kwargs,code,fragment", [
    ({"declare_experts": 6}, "corrupt", "declares 6 experts"),
    ({"declare_used": 9}, "corrupt", "9 experts used per token out of 8"),
    ({"reshape": {"blk.1.ffn_gate_inp.weight": (6, 64)}}, "corrupt", "ffn_gate_inp"),
    ({"drop": "blk.0.ffn_down_exps.weight"}, "missing", "ffn_down_exps"),
])
def test_bad_moe_file_is_a_named_error(tmp_path, kwargs, code, fragment):
    from colibri.errors import EngineError

    path = write_tiny(tmp_path / "bad.gguf", family="qwen3moe", **kwargs)
    with pytest.raises(EngineError) as err:
        Engine(path, n_ctx=32)
    assert err.value.code == code, str(err.value)
    assert fragment in str(err.value)
