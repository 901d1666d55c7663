"""KV slots: conversations decoded together get exactly the tokens they get
alone (every architecture, slots joining and leaving mid-flight, one
cancelled, one cut by max_tokens), prefix reuse, finish reasons, the
log-prob read-out, and refusals before any work."""
from __future__ import annotations

import math
import os

import numpy as np
import pytest

from colibri._engine import ffi, lib
from colibri.engine import Engine
from colibri.errors import EngineError
from tests.engine.test_lowbit_models import fixture as lowbit_fixture
from tests.engine.test_lowbit_models import require_kernels
from tests.engine.tiny_models import FAMILIES, write_tiny
from tests.fixtures import moe_models

pytest.importorskip("gguf")

MOE_ARCHS = ("qwen3moe", "olmoe", "llama", "glm4moe", "deepseek2", "deepseek32", "glm-dsa")  # llama with experts: Mixtral's layout


def model_path(kind: str, tmp_path, default_model):
    if kind == "default":
        return default_model
    family, _, quant = kind.partition(":")
    if family in ("exp", "mix"):  # low-bit experts (test_lowbit_models), once their kernels are merged
        path = lowbit_fixture(kind)
        require_kernels(path)
        return path
    if family in MOE_ARCHS:
        return moe_models.tiny(family, quant or "Q8_0")
    return write_tiny(tmp_path / f"{family}.gguf", family=family, quant=8, seed=3)


def conversations(e: Engine, n: int, seed: int) -> list[list[int]]:
    """n prompts of different lengths (some longer than a prefill chunk)."""
    rng = np.random.default_rng(seed)
    vocab = min(e.n_vocab, 256)
    lengths = [5, 23, 11, 40, 3, 17][:n]
    return [[e.bos] + [int(t) for t in rng.integers(2, vocab, k)] for k in lengths]


def run_alone(e: Engine, slot: int, prompt: list[int], max_tokens: int) -> tuple[list[int], str]:
    e.submit(slot, prompt, max_tokens=max_tokens, ignore_eos=True)
    tokens, finish = [], None
    while finish is None:
        for ev in e.step():
            assert ev.slot == slot
            if ev.done:
                finish = ev.finish
            else:
                tokens.append(ev.token)
    return tokens, finish


KINDS = (["default"] + [f for f in FAMILIES] + [f"{a}:Q8_0" for a in MOE_ARCHS] + ["qwen3moe:Q4_0", "llama:Q4_0"]
         + ["exp:IQ2_XXS", "mix:ud"])  # low-bit experts: batched arithmetic (tiled IQ matmul) per slot as alone


@pytest.mark.parametrize("kind", KINDS)
def test_batched_decode_equals_alone(tmp_path, default_model, kind):
    path = model_path(kind, tmp_path, default_model)
    max_new = [24, 20, 6, 18]  # the third ends early on max_tokens
    with Engine(path, n_slots=4, n_ctx=128, n_batch=16, n_threads=2) as e:
        prompts = conversations(e, 4, seed=len(kind))
        alone = [run_alone(e, i, p, m) for i, (p, m) in enumerate(zip(prompts, max_new))]
    assert [f for _, f in alone] == ["length"] * 4
    # together: slot 0 starts, 1 and 2 join mid-flight, 3 joins later and is cancelled
    with Engine(path, n_slots=4, n_ctx=128, n_batch=16, n_threads=2) as e:
        got: dict[int, list[int]] = {i: [] for i in range(4)}
        finish: dict[int, str] = {}
        joins = {0: [0], 2: [1, 2], 5: [3]}
        cancel_at = 12
        for step in range(200):
            for i in joins.get(step, []):
                e.submit(i, prompts[i], max_tokens=max_new[i], ignore_eos=True)
            if step == cancel_at:
                assert e.cancel(3)
            for ev in e.step():
                if ev.done:
                    finish[ev.slot] = ev.finish
                else:
                    got[ev.slot].append(ev.token)
            if len(finish) == 4:
                break
    assert finish == {0: "length", 1: "length", 2: "length", 3: "cancelled"}
    for i in range(3):
        assert got[i] == alone[i][0], f"slot {i} decoded differently in a batch"
    assert 0 < len(got[3]) < max_new[3] and got[3] == alone[3][0][: len(got[3])]


def test_prefix_reuse_and_refusals(default_model):
    with Engine(default_model, n_slots=2, n_ctx=96, n_batch=32, n_threads=2) as e:
        prompt = e.tokenize("The quick brown fox jumps over the lazy dog. " * 3)
        assert e.submit(0, prompt, max_tokens=4, ignore_eos=True) == 0
        with pytest.raises(EngineError) as busy:
            e.submit(0, prompt, max_tokens=1)
        assert busy.value.code == "bad_state"
        out, _ = drain(e)
        history = e.slot_tokens(0)
        assert history == prompt + out[0][:3]  # the last sampled token is not evaluated yet
        follow = history + [out[0][3]] + e.tokenize(" And then", add_bos=False)
        assert e.submit(0, follow, max_tokens=2, ignore_eos=True) == len(history)
        drain(e)
        # the same prompt again: all of it is reused, with the logits it left
        assert e.submit(0, follow, max_tokens=1) == len(follow)
        drain(e)
        # a different conversation on the other slot does not disturb slot 0's history
        e.submit(1, prompt[:5], max_tokens=1)
        drain(e)
        assert e.slot_tokens(0)[: len(follow)] == follow
        with pytest.raises(EngineError) as long:
            e.submit(1, [e.bos] * 97, max_tokens=1)
        assert long.value.code == "too_long" and "97" in long.value.message and "96" in long.value.message
        for bad in (dict(slot=2), dict(slot=-1)):
            with pytest.raises(EngineError) as err:
                e.submit(bad["slot"], prompt, max_tokens=1)
            assert err.value.code == "invalid_argument"
        with pytest.raises(EngineError):
            e.submit(1, [e.n_vocab], max_tokens=1)
        with pytest.raises(EngineError):
            e.submit(1, prompt, max_tokens=1, n_logprobs=33)
        assert e.step() == []  # nothing runs


def drain(e: Engine) -> tuple[dict[int, list[int]], dict[int, str]]:
    out: dict[int, list[int]] = {}
    fin: dict[int, str] = {}
    for _ in range(1000):
        evs = e.step()
        for ev in evs:
            if ev.done:
                fin[ev.slot] = ev.finish
            else:
                out.setdefault(ev.slot, []).append(ev.token)
        if not evs and all(e.slot_status(s)["state"] == "idle" for s in range(e.n_slots)):
            break
    return out, fin


def test_finish_reasons(default_model):
    with Engine(default_model, n_slots=1, n_ctx=64, n_batch=64, n_threads=2) as e:
        # context full: a prompt of 60 leaves room to evaluate 4 more tokens, so 5 come out
        e.submit(0, [e.bos] + e.tokenize("one two three four five six seven eight nine ten " * 6,
                                         add_bos=False)[:59], max_tokens=100, ignore_eos=True)
        out, fin = drain(e)
        assert fin == {0: "context"} and len(out[0]) == 5
        # max_tokens = 0: prefill only
        e.submit(0, e.tokenize("Hello"), max_tokens=0)
        out, fin = drain(e)
        assert fin == {0: "length"} and not out


def test_step_wake_writes_each_pipe_then_steps(default_model):
    """colibri_step_wake: one byte to each wake pipe from inside the call, then the same step as
    colibri_step (the same events); the bytes go out even when the step itself fails."""
    pipes = [os.pipe(), os.pipe()]
    try:
        for r, _ in pipes:
            os.set_blocking(r, False)
        with Engine(default_model, n_slots=1, n_ctx=64, n_threads=2) as e:
            prompt = e.tokenize("The sea is")
            runs = []
            for fds in ((), [w for _, w in pipes]):
                e.submit(0, prompt, max_tokens=4, ignore_eos=True)
                runs.append([(ev.token, ev.done) for ev in e.step(fds)])  # the prefill's step: its first token
                if fds:
                    assert [os.read(r, 16) for r, _ in pipes] == [b"\1", b"\1"]
                while not runs[-1][-1][1]:
                    runs[-1] += [(ev.token, ev.done) for ev in e.step()]
            assert runs[0] == runs[1] and len(runs[0]) == 5
            assert e.step([pipes[0][1]]) == [] and os.read(pipes[0][0], 16) == b"\1"  # nothing runs: still written
            ev = ffi.new("colibri_event[]", 2)
            fds = ffi.new("int[]", [pipes[1][1]])
            assert lib.colibri_step_wake(ffi.NULL, ev, 2, fds, 1) < 0  # no engine: an error, the byte still out
            assert os.read(pipes[1][0], 16) == b"\1"
        with pytest.raises(EngineError):
            e.step([pipes[0][1]])  # closed
        assert os.read(pipes[0][0], 16) == b"\1"
    finally:
        for r, w in pipes:
            os.close(r)
            os.close(w)


def test_end_of_generation_token_stops(tmp_path):
    """A token the model declares end-of-turn ends the request; it comes only in the DONE event."""
    plain = write_tiny(tmp_path / "a.gguf", family="qwen3", seed=4)
    with Engine(plain, n_ctx=64, n_threads=2) as e:
        prompt = [e.bos, 5, 6, 7]
        free, fin = run_alone(e, 0, prompt, 12)
    eot = free[3]
    first = free.index(eot)
    marked = write_tiny(tmp_path / "b.gguf", family="qwen3", seed=4, extra_kv={"tokenizer.ggml.eot_token_id": eot})
    with Engine(marked, n_ctx=64, n_threads=2) as e:
        assert e.is_eog(eot)
        e.submit(0, prompt, max_tokens=12, n_logprobs=3)
        events = []
        while not (events and events[-1].done):
            events += e.step()
    assert [ev.token for ev in events[:-1]] == free[:first]
    last = events[-1]
    assert last.finish == "stop" and last.token == eot and last.logprob <= 0 and len(last.top) == 3


def test_logprob_readout_matches_the_distribution(default_model):
    with Engine(default_model, n_slots=1, n_ctx=128, n_batch=16, n_threads=2) as e:
        prompt = e.tokenize("Paris is the capital of France, and Berlin is the capital of Germany.")
        logits = np.frombuffer(e.eval(prompt, 0, logits="all"), np.float32).reshape(len(prompt), -1).astype(np.float64)
        lsm = logits - logits.max(1, keepdims=True)
        lsm -= np.log(np.exp(lsm).sum(1, keepdims=True))
        e.submit(0, prompt, max_tokens=3, n_logprobs=5, echo=True)
        out, fin = [], None
        while fin is None:
            for ev in e.step():
                out.append(ev)
                fin = ev.finish if ev.done else None
        rows = e.slot_readout(0, 5)
        assert len(rows) == len(prompt) and rows[0] == (None, [])
        for p in range(1, len(prompt)):
            lp, top = rows[p]
            assert lp == pytest.approx(lsm[p - 1, prompt[p]], abs=2e-3)
            ids = [t for t, _ in top]
            assert len(set(ids)) == 5
            assert set(ids) == set(np.argsort(-lsm[p - 1])[:5].tolist())
            for t, v in top:
                assert v == pytest.approx(lsm[p - 1, t], abs=2e-3)
        first = out[0]
        assert first.token == int(np.argmax(lsm[-1]))
        assert first.logprob == pytest.approx(lsm[-1, first.token], abs=2e-3)
        assert first.token in [t for t, _ in first.top] and len(first.top) == 5


def test_no_logprob_skips_the_readout_and_changes_no_token(default_model):
    """logprob=False (what serving asks when no request wants log-probs): the same tokens, NaN for
    the sampled token's log-prob; with a top-k table asked for, the log-prob comes anyway (it is free then)."""
    def run(e, **kw):
        e.submit(0, prompt, max_tokens=6, ignore_eos=True, **kw)
        out = []
        while not (out and out[-1].done):
            out += e.step()
        return out

    with Engine(default_model, n_slots=1, n_ctx=128, n_threads=2) as e:
        prompt = e.tokenize("The capital of France is")
        e.submit(0, [e.bos], max_tokens=0)  # an unrelated prompt first: no reuse between the runs below
        while not any(ev.done for ev in e.step()):
            pass
        full = run(e)
        e.submit(0, [e.bos], max_tokens=0)
        while not any(ev.done for ev in e.step()):
            pass
        bare = run(e, logprob=False)
        topk = run(e, logprob=False, n_logprobs=2)
    assert [ev.token for ev in bare] == [ev.token for ev in full] == [ev.token for ev in topk]
    assert all(math.isnan(ev.logprob) for ev in bare[:-1]) and all(ev.logprob <= 0 for ev in full[:-1])
    assert [ev.logprob for ev in topk[:-1]] == [ev.logprob for ev in full[:-1]]


def test_the_same_prompt_again_gives_the_same_tokens(default_model):
    """A fully cached prompt samples from the logits it left, not from its last token re-run alone."""
    with Engine(default_model, n_slots=1, n_ctx=128, n_batch=64, n_threads=2) as e:
        prompt = e.tokenize("<start_of_turn>user\nName three colours.<end_of_turn>\n<start_of_turn>model\n",
                            special=True)
        first = run_alone(e, 0, prompt, 8)
        assert e.submit(0, prompt, max_tokens=8, ignore_eos=True) == len(prompt)
        again = []
        while True:
            evs = e.step()
            again += [ev.token for ev in evs if not ev.done]
            if any(ev.done for ev in evs):
                break
    assert again == first[0]


def test_echo_from_keeps_the_cached_prefix(default_model):
    """A read-out from position p reuses the cache up to p - 1 and describes the rest."""
    with Engine(default_model, n_slots=1, n_ctx=128, n_batch=16, n_threads=2) as e:
        doc = e.tokenize("The report covers the quarter's sales, costs and outlook in detail.")
        tail = e.tokenize(" Question: is it about sales? Answer: yes", add_bos=False)
        e.submit(0, doc + tail, max_tokens=0, n_logprobs=3, echo=True)
        drain(e)
        full = e.slot_readout(0, 3)
        e.submit(0, doc, max_tokens=0)
        drain(e)
        reused = e.submit(0, doc + tail, max_tokens=0, n_logprobs=3, echo=True, echo_from=len(doc))
        drain(e)
        part = e.slot_readout(0, 3)
    assert reused == len(doc) - 1
    assert all(row == (None, []) for row in part[:reused + 1])
    # prompt rows get the batch arithmetic however they are chunked, so the
    # read-out over a cached prefix is the whole prefill's, bit for bit
    assert part[len(doc):] == full[len(doc):]


def test_a_prompt_over_a_cached_prefix_equals_it_prefilled_whole(default_model):
    with Engine(default_model, n_slots=2, n_ctx=256, n_batch=16, n_threads=2) as e:
        system = e.tokenize("You are a terse assistant. Answer in one line. " * 3)
        for question in (" What is the capital of France?", " Name a prime number above 20."):
            prompt = system + e.tokenize(question, add_bos=False)
            e.submit(0, system, max_tokens=0)  # slot 0 holds the shared prefix
            drain(e)
            assert e.submit(0, prompt, max_tokens=12, ignore_eos=True) == len(system)
            warm, _ = drain(e)
            e.submit(1, [e.bos], max_tokens=0)  # forget slot 1's history
            drain(e)
            e.submit(1, prompt, max_tokens=12, ignore_eos=True)
            cold, _ = drain(e)
            assert warm[0] == cold[1]


def test_every_slot_up_to_coli_max_slots_decodes_and_one_more_is_refused(default_model):
    """COLI_MAX_SLOTS (colibri.h) bounds n_slots: that many decode in one step, one more fails to open."""
    limit = lib.COLI_MAX_SLOTS
    with Engine(default_model, n_slots=limit, n_ctx=32, n_threads=2) as e:
        assert e.n_slots == limit
        for slot in range(limit):
            e.submit(slot, [e.bos], max_tokens=20, ignore_eos=True)  # long enough for all to decode at once
        done = []
        for _ in range(4 * limit):  # one slot prefills per step
            done += [ev.slot for ev in e.step() if ev.done]
    assert sorted(done) == list(range(limit))
    with pytest.raises(EngineError, match=f"1 to {limit} slots"):
        Engine(default_model, n_slots=limit + 1, n_ctx=32, n_threads=2)
