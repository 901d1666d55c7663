"""The routed FFN against llama.cpp on tiny random-weight MoE files (qwen3moe,
olmoe, Mixtral): the same logits at every position, teacher-forced, with F32
and quantized experts; routing recorded and not degenerate."""
from __future__ import annotations

import numpy as np
import pytest

from colibri.engine import Engine
from tests.engine.tiny_models import MOE_FAMILIES, write_tiny
from tests.reference import load_reference, log_softmax

pytest.importorskip("gguf")

Q8_0, Q4_0 = 8, 2


@pytest.mark.parametrize("quant", [None, Q8_0, Q4_0], ids=["f32", "q8_0", "q4_0"])
@pytest.mark.parametrize("family", MOE_FAMILIES)
def test_moe_family_matches_llama_cpp(tmp_path, family, quant):
    path = write_tiny(tmp_path / f"{family}.gguf", family=family, quant=quant, tied=False, seed=11)
    rng = np.random.default_rng(5)
    with Engine(path, n_ctx=64, n_threads=2, n_batch=16) as e:
        tokens = [e.bos] + [int(t) for t in rng.integers(0, 256, 47)]
        ours = np.frombuffer(e.eval(tokens, 0, logits="all"), np.float32).reshape(len(tokens), -1)
    ref = load_reference(path, n_ctx=64)
    ref.eval(tokens)
    theirs = np.asarray(ref.scores[: len(tokens)])
    lt, lo = log_softmax(theirs), log_softmax(ours)
    kl = (np.exp(lt) * (lt - lo)).sum(-1)
    top1 = float((ours.argmax(-1) == theirs.argmax(-1)).mean())
    print(f"{family} {quant}: mean KL {kl.mean():.2e}, max {kl.max():.2e}, top-1 {top1:.3f}, "
          f"max |dlogit| {np.abs(ours - theirs).max():.2e}")
    assert kl.mean() < 1e-5 and kl.max() < 1e-4
    assert top1 == 1.0
