"""The forward pass against llama.cpp on the default model (Gemma 3 270M Q4_K_M):
teacher-forced top-1 agreement and KL divergence over real text, and greedy
continuations token for token."""
from __future__ import annotations

import numpy as np
import pytest

from colibri.engine import Engine
from colibri.generate import generate
from tests.reference import assert_same_greedy, greedy_with_margins, load_reference, log_softmax, real_text

WINDOW = 512
MIN_POSITIONS = 1000
TOP1_MIN = 0.99
KL_MAX = 0.01  # nats per position, mean
NEAR_TIE = 0.01  # a greedy divergence is excused only where llama.cpp's top-2 logits are this close


@pytest.fixture(scope="module")
def ours(default_model):
    with Engine(default_model, n_ctx=WINDOW, n_threads=2) as e:
        yield e


@pytest.fixture(scope="module")
def ref(default_model):
    return load_reference(default_model, n_ctx=WINDOW)


def test_teacher_forced_logits_match(ours, ref):
    tokens = ours.tokenize(real_text())
    assert tokens[: 3 * WINDOW] == ref.tokenize(real_text().encode(), add_bos=True)[: 3 * WINDOW]
    windows = [tokens[i : i + WINDOW] for i in range(0, len(tokens) - WINDOW + 1, WINDOW)][:2]
    agree = positions = 0
    kls = []
    for w in windows:
        w = [ours.bos] + w[1:]  # each window is its own sequence
        ref.reset()
        ref.eval(w)
        theirs_all = np.asarray(ref.scores[: len(w)], dtype=np.float32)
        for j in range(0, len(w), 128):
            mine = np.frombuffer(ours.eval(w[j : j + 128], j, logits="all"), dtype=np.float32)
            mine = mine.reshape(-1, ours.n_vocab)
            theirs = theirs_all[j : j + len(mine)]
            lp_ref, lp_ours = log_softmax(theirs), log_softmax(mine)
            kls.extend((np.exp(lp_ref) * (lp_ref - lp_ours)).sum(axis=-1))
            agree += int((mine.argmax(axis=-1) == theirs.argmax(axis=-1)).sum())
            positions += len(mine)
    top1, kl = agree / positions, float(np.mean(kls))
    print(f"teacher-forced: {positions} positions, top-1 agreement {top1:.4f}, mean KL {kl:.5f}, max KL {max(kls):.4f}")
    assert positions >= MIN_POSITIONS
    assert top1 >= TOP1_MIN
    assert kl <= KL_MAX


PROMPTS = [
    "The capital of France is",
    "def fibonacci(n):\n",
    "Once upon a time, in a small village by the sea,",
    "Les fleurs du printemps",
    "1, 1, 2, 3, 5, 8,",
]


@pytest.mark.parametrize("prompt", PROMPTS)
def test_greedy_continuation_matches(ours, ref, prompt):
    prompt_tokens = ours.tokenize(prompt)
    gen = generate(ours, prompt_tokens, 64, temperature=0.0, stop_at_eog=False)
    theirs, margins = greedy_with_margins(ref, prompt_tokens, 64)
    assert_same_greedy(gen.tokens, theirs, margins, NEAR_TIE)
