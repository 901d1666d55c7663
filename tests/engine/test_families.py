"""Each dense family the engine runs, against llama.cpp on the same tiny
random-weight file: the same logits at every position (teacher-forced), with
F32 and quantized weights. A wrong RoPE layout, norm or scale shows up as a
KL far above the rounding floor."""
from __future__ import annotations

import numpy as np
import pytest

from colibri.engine import Engine
from tests.engine.tiny_models import FAMILIES, write_tiny
from tests.reference import compare_logits, load_reference

pytest.importorskip("gguf")

F32, Q8_0, Q4_0 = 0, 8, 2


@pytest.mark.parametrize("quant", [None, Q8_0, Q4_0], ids=["f32", "q8_0", "q4_0"])
@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.isa_bits
def test_family_matches_llama_cpp(tmp_path, family, quant):
    path = write_tiny(tmp_path / f"{family}.gguf", family=family, quant=quant, tied=family != "llama", seed=3)
    rng = np.random.default_rng(5)
    with Engine(path, n_ctx=64, n_threads=2) as e:
        tokens = [e.bos] + [int(t) for t in rng.integers(0, 256, 47)]
        ours = np.frombuffer(e.eval(tokens, 0, logits="all"), np.float32).reshape(len(tokens), -1)
    ref = load_reference(path, n_ctx=64)
    ref.eval(tokens)
    theirs = np.asarray(ref.scores[: len(tokens)])
    kl, top1 = compare_logits(ours, theirs, f"{family} {quant}")
    assert kl.mean() < 1e-5 and kl.max() < 1e-4
    assert top1 == 1.0
