"""The sampler's top-k, as llama.cpp's top-k sampler: only the k largest logits survive, then
top_p over their renormalised mass, then the draw. On the default model's real logits:
top_k=1 is greedy (one token and a whole generation on a slot, at any temperature), no draw
ever leaves the k most likely, the draws follow the renormalised distribution, top_p cuts
inside the k, and 0 or k >= n_vocab change nothing."""
from __future__ import annotations

import numpy as np
import pytest

from colibri.engine import Engine
from colibri.errors import EngineError

PROMPT = "The three most common pets are"


@pytest.fixture(scope="module")
def engine(default_model):
    with Engine(default_model, n_slots=1, n_ctx=128, n_batch=64, n_threads=2) as e:
        yield e


@pytest.fixture(scope="module")
def logits(engine) -> np.ndarray:
    """The next-token logits after PROMPT (the engine's last evaluated row)."""
    prompt = engine.tokenize(PROMPT)
    return np.frombuffer(engine.eval(prompt, 0, logits="last"), np.float32).astype(np.float64)


def top(logits: np.ndarray, k: int) -> list[int]:
    """The k most likely ids, best first (the test's k never splits a tie)."""
    order = np.argsort(-logits, kind="stable")
    assert logits[order[k - 1]] > logits[order[k]], "a tie at the cut: pick another k"
    return [int(t) for t in order[:k]]


def draws(engine, n: int, seed: int, **sampling) -> list[int]:
    engine.seed(seed)
    return [engine.sample(**sampling)[0] for _ in range(n)]


def test_top_k_1_is_greedy(engine, logits, default_model):
    best = int(np.argmax(logits))
    assert set(draws(engine, 200, 1, temperature=5.0, top_k=1)) == {best}
    with Engine(default_model, n_slots=1, n_ctx=128, n_batch=64, n_threads=2) as e:
        prompt = e.tokenize(PROMPT)

        def generate(**sampling) -> list[int]:
            e.submit(0, prompt, max_tokens=16, ignore_eos=True, **sampling)
            out = []
            while True:
                evs = e.step()
                out += [ev.token for ev in evs if not ev.done]
                if any(ev.done for ev in evs):
                    return out

        greedy = generate(temperature=0.0)
        assert generate(temperature=2.0, top_k=1, seed=7) == greedy
        assert generate(temperature=2.0, top_p=0.5, top_k=1, seed=8) == greedy
        assert generate(temperature=2.0, seed=9) != greedy  # without top-k, that temperature wanders


@pytest.mark.parametrize("k", [2, 5, 40])
def test_no_draw_leaves_the_k_most_likely(engine, logits, k):
    allowed = set(top(logits, k))
    got = draws(engine, 400, k, temperature=4.0, top_k=k)  # hot: the tail would be reached without top-k
    assert set(got) <= allowed
    assert len(set(got)) == k if k <= 5 else len(set(got)) > 5
    assert not set(draws(engine, 400, k, temperature=4.0)) <= allowed  # the same heat without top-k leaves them


def test_draws_follow_the_renormalised_distribution(engine, logits):
    k, t, n = 4, 1.0, 4000
    ids = top(logits, k)
    p = np.exp((logits[ids] - logits[ids[0]]) / t)
    p /= p.sum()
    got = draws(engine, n, 3, temperature=t, top_k=k)
    freq = np.array([got.count(i) for i in ids]) / n
    assert np.all(np.abs(freq - p) < 4 * np.sqrt(p * (1 - p) / n) + 0.005), (freq, p)


def test_top_p_cuts_inside_the_k(engine, logits):
    k, t, top_p = 10, 2.0, 0.5
    ids = top(logits, k)
    p = np.exp((logits[ids] - logits[ids[0]]) / t)
    p /= p.sum()
    m = int(np.searchsorted(np.cumsum(p), top_p) + 1)  # the fewest, best first, whose mass reaches top_p
    assert 1 < m < k
    got = draws(engine, 400, 4, temperature=t, top_p=top_p, top_k=k)
    assert set(got) == set(ids[:m])


def test_off_values_and_refusals(engine, logits):
    plain = draws(engine, 50, 5, temperature=1.5, top_p=0.9)
    assert draws(engine, 50, 5, temperature=1.5, top_p=0.9, top_k=0) == plain
    assert draws(engine, 50, 5, temperature=1.5, top_p=0.9, top_k=engine.n_vocab) == plain
    assert draws(engine, 50, 5, temperature=0.0, top_k=3) == [int(np.argmax(logits))] * 50  # greedy is greedy
    with pytest.raises(EngineError, match="top_k"):
        engine.sample(temperature=1.0, top_k=-1)
    with pytest.raises(EngineError, match="top_k"):
        engine.submit(0, engine.tokenize(PROMPT), max_tokens=1, temperature=1.0, top_k=-1)
