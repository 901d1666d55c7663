"""Drafts from the model's own multi-token-prediction block (engine/src/mtp.h) never change the tokens, and
are right about as often as the block agrees with the trunk.

The fixtures: glm4moe, deepseek2 (MLA) and deepseek32 / glm-dsa (MLA with sparse attention in the trunk, dense
in the block) files with one nextn block, random (its drafts are mostly wrong),
or built with mtp_agree (tests/fixtures/moe_models.py): a trunk that is nearly a bigram model and a block
whose guess of the token after next agrees with it for a set share of the tokens."""
from __future__ import annotations

import pytest

from colibri.engine import Engine
from tests.engine.test_draft import run
from tests.fixtures import moe_models

pytest.importorskip("gguf")

PROMPTS = [[5, 80, 200, 33, 41, 19], [7, 300, 12]]
MTP_ARCHS = ("glm4moe", "deepseek2", "deepseek32", "glm-dsa")  # deepseek32 / glm-dsa: a sparse trunk, a dense block


def agreeing(arch: str, share: float = 0.75):
    return moe_models.tiny(arch, "Q8_0", nextn_layers=1, mtp_agree=share)


def mtp_equals_plain(path, label: str, max_tokens: int = 48, **req) -> list[dict]:
    """Plain decoding's tokens and log-probs, then the same with k = 1, 3, 8 drafted and every draft verified;
    the stats of each drafting run."""
    with Engine(path, n_slots=2, n_ctx=256, n_threads=2, draft_tokens=-1) as e:
        assert e.drafter == ""
        want = run(e, PROMPTS, max_tokens, **req)
        plain = e.stats()
    out = []
    for k in (1, 3, 8):
        with Engine(path, n_slots=2, n_ctx=256, n_threads=2, draft_tokens=k, draft_always=True) as e:
            assert e.drafter == "mtp" and e.draft_tokens == k
            got = run(e, PROMPTS, max_tokens, **req)
            st = e.stats()
        assert got == want, f"{label} draft_tokens={k}"
        assert st["tokens_generated"] == plain["tokens_generated"]  # rejected rows are taken back out
        assert 0 <= st["draft_accepted"] <= st["draft_tokens"]
        out.append(st)
    return out


@pytest.mark.parametrize("arch", MTP_ARCHS)
def test_random_block_drafts_keep_the_tokens(arch):
    """A random block: its drafts are wrong (nearly) every time, and cost nothing but time."""
    stats = mtp_equals_plain(moe_models.tiny(arch, "Q8_0", nextn_layers=1), arch, ignore_eos=True)
    assert all(st["draft_tokens"] > 40 for st in stats), stats  # a draft nearly every step


@pytest.mark.parametrize("arch", MTP_ARCHS)
def test_agreeing_block_drafts_keep_the_tokens(arch):
    """Drafts right, partly right and wrong (chains of 3 and 8 break at the first wrong token)."""
    stats = mtp_equals_plain(agreeing(arch), arch, ignore_eos=True)
    one = stats[0]
    rate = one["draft_accepted"] / one["draft_tokens"]
    assert 0.6 <= rate <= 0.9, one  # the block agrees for 75% of the tokens
    assert stats[1]["draft_accepted"] > one["draft_accepted"] * 1.1, stats  # chains keep more tokens per step


def test_sampled_drafts_keep_the_tokens():
    """Seeded sampling: a draft is kept exactly when the draw picks it."""
    mtp_equals_plain(agreeing("glm4moe"), "glm4moe sampled", ignore_eos=True, temperature=0.9, top_p=0.95,
                     top_k=40, seed=3, n_logprobs=2)


def test_agreement_follows_the_block():
    """The share of drafts kept follows the share of tokens the block agrees on."""
    rates = []
    for share in (0.5, 1.0):
        with Engine(agreeing("glm4moe", share), n_slots=1, n_ctx=256, n_threads=2, draft_tokens=1,
                    draft_always=True) as e:
            run(e, PROMPTS[:1], 80, ignore_eos=True)
            st = e.stats()
        rates.append(st["draft_accepted"] / st["draft_tokens"])
    assert 0.3 <= rates[0] <= 0.7 and rates[1] >= 0.95, rates


def test_block_cache_follows_the_conversation():
    """A second turn continuing the first (its prefix cached) drafts from the block's cache of the whole text,
    as does a prompt that is cached whole (its first token from the prompt's kept logits)."""
    with Engine(agreeing("glm4moe", 1.0), n_slots=1, n_ctx=256, n_threads=2, draft_tokens=3,
                draft_always=True) as e:
        first = [t for t, _ in run(e, PROMPTS[:1], 20, ignore_eos=True)[0]]
        before = e.stats()
        second = PROMPTS[0] + first + [44, 45]
        got = [t for t, _ in run(e, [second], 30, ignore_eos=True)[0]]
        after = e.stats()
        again = [t for t, _ in run(e, [second], 30, ignore_eos=True)[0]]
    assert again == got
    drafted = after["draft_tokens"] - before["draft_tokens"]
    kept = after["draft_accepted"] - before["draft_accepted"]
    assert drafted > 0 and kept >= 0.9 * drafted, (drafted, kept)
    with Engine(agreeing("glm4moe", 1.0), n_slots=1, n_ctx=256, n_threads=2, draft_tokens=-1) as e:
        assert [t for t, _ in run(e, [second], 30, ignore_eos=True)[0]] == got


def test_no_block_drafts_by_lookup():
    """A file without an MTP block (or with drafting off) says so."""
    with Engine(moe_models.tiny("glm4moe", "Q8_0"), n_ctx=256, n_threads=2) as e:
        assert e.drafter == "lookup"
    with Engine(agreeing("glm4moe"), n_ctx=256, n_threads=2, draft_tokens=-1) as e:
        assert e.drafter == "" and e.draft_tokens == 0
    with Engine(agreeing("glm4moe"), n_ctx=256, n_threads=2) as e:
        assert e.drafter == "mtp" and e.draft_tokens == 4


def test_a_block_that_cannot_load_costs_only_the_drafts(tmp_path, monkeypatch):
    """llama.cpp skips the MTP block unless it drafts with it, so a file whose block is misshapen must still
    load (drafting by prompt lookup instead) and decode as one without a block."""
    import dataclasses

    cfg = moe_models.tiny_config("glm4moe", "Q8_0", nextn_layers=1)
    planned = moe_models.plan

    def misshapen(c, n_vocab):
        return [dataclasses.replace(t, shape=(t.shape[0] // 2,)) if t.name.endswith("nextn.hnorm.weight") else t
                for t in planned(c, n_vocab)]

    monkeypatch.setattr(moe_models, "plan", misshapen)
    broken = moe_models.write_config(tmp_path / "broken-mtp.gguf", cfg)
    monkeypatch.undo()
    with Engine(broken, n_ctx=256, n_threads=2) as e:
        assert e.drafter == "lookup"
        got = run(e, PROMPTS[:1], 12, ignore_eos=True)
    with Engine(moe_models.tiny("glm4moe", "Q8_0", nextn_layers=1), n_ctx=256, n_threads=2, draft_tokens=-1) as e:
        assert run(e, PROMPTS[:1], 12, ignore_eos=True) == got


@pytest.mark.parametrize("arch", ("glm4moe", "deepseek32", "glm-dsa"))
def test_a_trunk_only_file_drafts_by_lookup(arch, tmp_path, monkeypatch):
    """A conversion that declares its MTP block (nextn_predict_layers) but leaves the block's tensors out
    (llama.cpp's trunk_only: they become optional) loads, drafts by prompt lookup, and decodes as the file with
    the block does."""
    cfg = moe_models.tiny_config(arch, "Q8_0", nextn_layers=1)
    planned = moe_models.plan

    def trunk_only(c, n_vocab):
        return [t for t in planned(c, n_vocab) if not t.name.startswith(f"blk.{c.n_layer}.")]

    monkeypatch.setattr(moe_models, "plan", trunk_only)
    path = moe_models.write_config(tmp_path / f"{arch}-trunk-only.gguf", cfg)
    monkeypatch.undo()
    with Engine(path, n_ctx=256, n_threads=2) as e:
        assert e.drafter == "lookup"
        got = run(e, PROMPTS[:1], 12, ignore_eos=True)
    with Engine(moe_models.tiny(arch, "Q8_0", nextn_layers=1), n_ctx=256, n_threads=2, draft_tokens=-1) as e:
        assert run(e, PROMPTS[:1], 12, ignore_eos=True) == got


@pytest.mark.parametrize("share", (0.0, 0.5))
def test_paused_block_keeps_the_tokens_and_its_cache(share):
    """As the plan decides (no draft_always; on these tiny files it declines nearly every guess): the block
    pauses, longer each time, holding its rows unrun, and runs them in one batch when it guesses again, or
    when a new request continues the text. The tokens of two turns (the second continuing the first) are
    plain decoding's."""
    path = agreeing("glm4moe", share) if share else moe_models.tiny("glm4moe", "Q8_0", nextn_layers=1)

    def turns(**kw):
        with Engine(path, n_slots=1, n_ctx=512, n_threads=2, **kw) as e:
            first = [t for t, _ in run(e, PROMPTS[:1], 120, ignore_eos=True)[0]]
            second = [t for t, _ in run(e, [PROMPTS[0] + first + [44, 45]], 120, ignore_eos=True)[0]]
            return first, second, e.stats()

    *plain, _ = turns(draft_tokens=-1)
    *got, st = turns(draft_tokens=4)
    assert got == plain
    assert st["draft_accepted"] <= st["draft_tokens"], st
