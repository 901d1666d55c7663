"""Speculative decoding by prompt lookup (engine/src/draft.h) never changes the tokens: each verify row's
logits are the bits plain decoding computes (rows alone), and the next token is picked from them as plain
decoding picks it, with the same generator, so greedy and seeded sampled output, log-probs included, are
those of plain decoding, whether a draft is right, wrong or right in part. The counters say which."""
from __future__ import annotations

import pytest

from colibri.engine import Engine
from tests.fixtures import moe_models

pytest.importorskip("gguf")

ARCHS = ("qwen3moe", "deepseek2", "glm4moe", "llama")


def run(e: Engine, prompts: list[list[int]], max_tokens: int, **req) -> dict[int, list[tuple[int, float]]]:
    """Every prompt on its own slot, all together: (token, logprob) per slot, DONE's stop token included."""
    for slot, p in enumerate(prompts):
        e.submit(slot, p, max_tokens=max_tokens, **req)
    out: dict[int, list[tuple[int, float]]] = {s: [] for s in range(len(prompts))}
    done = 0
    while done < len(prompts):
        for ev in e.step():
            if ev.token >= 0:
                out[ev.slot].append((ev.token, round(ev.logprob, 6)))
            done += ev.done
    return out


def repetitive(e: Engine) -> list[list[int]]:
    """A prompt that says the same thing twice (lookup finds its continuation) and one that does not."""
    if e.n_vocab > 1000:  # a real model: text it will copy
        line = "def add(a, b):\n    return a + b\n\nprint(add(2, 3))\n"
        return [e.tokenize(line + line + "def add", add_bos=True), e.tokenize("Once upon a time", add_bos=True)]
    text = list(range(7, 31))
    return [[e.bos] + text + text[:5], [e.bos] + list(range(40, 52))]


def draft_equals_plain(path, label: str, **req) -> dict:
    with Engine(path, n_slots=2, n_ctx=256, n_threads=2, draft_tokens=-1) as e:
        assert e.draft_tokens == 0
        want = run(e, repetitive(e), 40, **req)
        plain = e.stats()
    assert plain["draft_tokens"] == 0
    totals = {"draft_tokens": 0, "draft_accepted": 0}
    for k in (1, 3, 8):  # every draft verified: the plan's choice depends on timings
        with Engine(path, n_slots=2, n_ctx=256, n_threads=2, draft_tokens=k, draft_always=True) as e:
            assert e.draft_tokens == k
            got = run(e, repetitive(e), 40, **req)
            st = e.stats()
            turns = e.turns()
        assert got == want, f"{label} draft_tokens={k}"
        assert st["tokens_generated"] == plain["tokens_generated"]  # rows kept; rejected ones taken back out
        assert st["draft_accepted"] <= st["draft_tokens"] and st["draft_steps"] <= st["draft_tokens"]
        assert sum(t["draft_tokens"] for t in turns) == st["draft_tokens"]
        assert sum(t["draft_accepted"] for t in turns) == st["draft_accepted"]
        totals["draft_tokens"] += st["draft_tokens"]
        totals["draft_accepted"] += st["draft_accepted"]
    return totals


@pytest.mark.parametrize("arch", ARCHS)
def test_greedy_drafts_keep_the_tokens(arch):
    """A random model rarely copies: mostly wrong drafts, now and then a right one."""
    totals = draft_equals_plain(moe_models.tiny(arch, "Q8_0"), arch, ignore_eos=True)
    assert totals["draft_tokens"] > 0, totals


@pytest.mark.parametrize("arch", ("qwen3moe", "llama"))
def test_sampled_drafts_keep_the_tokens(arch):
    """Seeded sampling: a draft is kept exactly when the draw picks it, the draw every plain step makes."""
    draft_equals_plain(moe_models.tiny(arch, "Q8_0"), arch, ignore_eos=True, temperature=0.7, top_p=0.95,
                       top_k=40, seed=11, n_logprobs=3)


def test_default_model_drafts_keep_the_tokens(default_model):
    """A real file (Gemma 3 270M: sliding-window layers, whose cache moves on under rejected rows) copies
    text it has read: drafts right, partly right and wrong, greedy and sampled."""
    for req in ({}, {"temperature": 0.8, "seed": 5}):
        totals = draft_equals_plain(default_model, "gemma3", ignore_eos=True, **req)
        assert 0 < totals["draft_accepted"] < totals["draft_tokens"], (req, totals)


@pytest.mark.parametrize("n_ctx,max_tokens", [(256, 1), (256, 2), (256, 5), (40, 100)])
def test_drafts_stop_where_plain_decoding_stops(n_ctx, max_tokens):
    """max_tokens, and a context that fills while a draft is under way (n_ctx 40)."""
    path = moe_models.tiny("qwen3moe", "Q8_0")
    got = {}
    for k in (-1, 8):
        with Engine(path, n_ctx=n_ctx, n_threads=2, draft_tokens=k, draft_always=True) as e:
            prompt = repetitive(e)[0]
            got[k] = run(e, [prompt], max_tokens, ignore_eos=True)[0]
            got[k, "status"] = e.slot_status(0)
    assert got[8] == got[-1] and len(got[8]) == min(max_tokens, n_ctx - len(prompt) + 1)
    assert got[8, "status"]["finish"] == got[-1, "status"]["finish"]
    assert got[8, "status"]["n_past"] == got[-1, "status"]["n_past"]


@pytest.mark.parametrize("arch", ("qwen35moe", "qwen3next"))
def test_hybrid_drafts_take_back_the_state(arch):
    """A Gated DeltaNet layer's recurrent state cannot rewind: a verify keeps a copy of it after each row but the
    last, and one that rejects a draft gets back the copy after its last kept row. The tokens are plain
    decoding's, and a conversation continued afterwards (its prefix reused from the state where generation left
    it) equals one never drafted."""
    draft_equals_plain(moe_models.tiny(arch, "Q8_0"), arch, ignore_eos=True)  # prompt lookup: a few drafts
    path = moe_models.tiny(arch, "Q8_0", nextn_layers=1, mtp_agree=0.75)  # its MTP block: right 3 times in 4
    totals = draft_equals_plain(path, arch + " mtp", ignore_eos=True)
    assert totals["draft_accepted"] > 0 and totals["draft_tokens"] > totals["draft_accepted"], totals

    def conversation(**kw):
        with Engine(path, n_slots=1, n_ctx=256, n_threads=2, **kw) as e:
            prompt = repetitive(e)[0]
            first = [t for t, _ in run(e, [prompt], 30, ignore_eos=True)[0]]
            return first, run(e, [prompt + first + prompt[1:6]], 30, ignore_eos=True)[0]

    assert conversation(draft_tokens=4, draft_always=True) == conversation(draft_tokens=-1)


def test_the_plan_drafts_what_pays():
    """Without draft_always, the step costs measured so far and each slot's acceptance decide: the tokens are
    the same either way, and on text the model copies the plan keeps drafting."""
    from tests.conftest import real_model_path
    path = real_model_path("qwen2.5-coder-0.5b-instruct")
    got = {}
    for k in (-1, 4):
        with Engine(path, n_ctx=512, n_threads=2, draft_tokens=k) as e:
            prompt = repetitive(e)[:1]
            got[k] = run(e, prompt, 48, ignore_eos=True)[0]
            got[k, "stats"] = e.stats()
    assert got[4] == got[-1]
    st = got[4, "stats"]
    assert st["draft_steps"] > 0 and st["draft_accepted"] > st["draft_tokens"] / 2, st


def test_rejected_rows_leave_no_heat():
    """The Brain's routing counts are the kept rows' (those of the text), as the tokens are: rows of rejected
    drafts routed too, but count nowhere."""
    path = moe_models.tiny("qwen3moe", "Q8_0")
    with Engine(path, n_slots=2, n_ctx=256, n_threads=2, draft_tokens=8, draft_always=True) as e:
        run(e, repetitive(e), 40, ignore_eos=True)
        st = e.stats(arrays=("counts",))
    assert st["draft_tokens"] > st["draft_accepted"]  # some rows were rejected
    K = 2  # the tiny qwen3moe's experts per token; every layer is MoE
    assert sum(st["counts"]) == (st["tokens_prompt"] + st["tokens_generated"]) * st["n_layer"] * K
