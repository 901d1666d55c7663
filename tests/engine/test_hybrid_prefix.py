"""Prefix reuse for the Gated DeltaNet hybrids (qwen3next, qwen35moe): recurrent-state checkpoints along a
slot's cached prompt (slots.c). A prompt that branches off inside the history restores the newest checkpoint
at or before the branch, keeps the full-attention layers' KV up to it and prefills only the rest; the
continuation has the bits of a run from position 0 (the engine's own, read out position by position and
generated greedily) and follows llama.cpp's logits on the fixtures. The ring is bounded (COLI_RS_CHECKPOINTS,
the lowest position goes first), spaced by COLI_RS_CHECKPOINT_EVERY prompt tokens, taken at the end of every
prompt, dropped past a branch and by eval's rewrite, carried by slot files (version 3)."""
from __future__ import annotations

import numpy as np
import pytest

from colibri.engine import Engine
from colibri.errors import EngineError
from tests.fixtures import moe_models as mm
from tests.reference import assert_same_greedy, greedy_with_margins, load_reference, log_softmax

pytest.importorskip("gguf")

EVERY = 16  # checkpoint spacing in these tests (the default is 512)


@pytest.fixture
def spaced(monkeypatch):
    monkeypatch.setenv("COLI_RS_CHECKPOINT_EVERY", str(EVERY))
    monkeypatch.delenv("COLI_RS_CHECKPOINTS", raising=False)


def _prompt(e: Engine, n: int, seed: int) -> list[int]:
    rng = np.random.default_rng(seed)
    return [e.bos] + [int(t) for t in rng.integers(0, e.n_vocab, n - 1)]


def _run(e: Engine, prompt: list[int], n: int, **kw) -> tuple[list[int], int]:
    reused = e.submit(0, prompt, max_tokens=n, ignore_eos=True, **kw)
    out: list[int] = []
    while True:
        evs = e.step()
        out += [ev.token for ev in evs if ev.token >= 0]
        if any(ev.done for ev in evs):
            return out, reused


def _readout(e: Engine, first: int) -> np.ndarray:
    return np.array([lp for lp, _ in e.slot_readout(0, 1)[first:]], np.float64)


@pytest.mark.parametrize("arch", mm.GDN_ARCHS)
@pytest.mark.isa_bits
def test_a_branch_restores_a_checkpoint_bit_exact(arch, spaced):
    """History of 120 prompt tokens + 8 generated; a new prompt shares 75: the checkpoint at 64 comes back and
    11 + 3 tokens are prefilled; its read-out (positions 76..) and greedy tokens equal a fresh engine's from
    position 0, bit for bit, and follow llama.cpp's logits on the same prompt."""
    path = mm.tiny(arch, "Q8_0")
    with Engine(path, n_slots=1, n_ctx=256, n_batch=32, n_threads=2) as e:
        history = _prompt(e, 120, 3)
        _run(e, history, 8)
        branch = history[:75] + [7, 8, 9]
        got, reused = _run(e, branch, 12, echo=True, echo_from=76)
        got_lp = _readout(e, 76)
    with Engine(path, n_slots=1, n_ctx=256, n_batch=32, n_threads=2) as e:
        want, fresh = _run(e, branch, 12, echo=True, echo_from=76)
        want_lp = _readout(e, 76)
    assert (reused, fresh) == (64, 0)
    assert got == want
    assert np.array_equal(got_lp, want_lp)
    ref = load_reference(path, n_ctx=256)
    ref.eval(branch)
    theirs = log_softmax(np.asarray(ref.scores[:len(branch)], np.float32))
    theirs_lp = np.array([theirs[p - 1, branch[p]] for p in range(76, len(branch))])
    d = float(np.abs(got_lp - theirs_lp).max())
    print(f"FIDELITY {arch} Q8_0 restored checkpoint: max |dlogprob| {d:.3g} against llama.cpp")
    assert d < 1e-3
    greedy, margins = greedy_with_margins(ref, branch, 12)
    assert_same_greedy(got, greedy, margins)


def test_an_agent_turn_reuses_all_but_the_tail(spaced):
    """A coding agent's next turn: the last prompt, the reply re-rendered (its end differs), a new message.
    The end-of-prompt checkpoint (or one inside the reply's prefill) spares the whole prefix."""
    path = mm.tiny("qwen35moe", "Q8_0")
    with Engine(path, n_slots=1, n_ctx=320, n_batch=64, n_threads=2) as e:
        turn1 = _prompt(e, 150, 4)
        reply, _ = _run(e, turn1, 10)
        turn2 = turn1 + reply[:6] + [11, 12, 13, 14]
        got, reused = _run(e, turn2, 10)
    with Engine(path, n_slots=1, n_ctx=320, n_batch=64, n_threads=2) as e:
        want, _ = _run(e, turn2, 10)
    assert reused == len(turn1) and got == want


def test_the_same_prompt_again_replays_its_checkpoint(spaced):
    """Asked again after generation moved the state past it, a prompt restores its end-of-prompt checkpoint
    and samples from its cached logits: nothing is prefilled, the tokens are the first run's."""
    with Engine(mm.tiny("qwen3next", "Q8_0"), n_slots=1, n_ctx=200, n_threads=2) as e:
        prompt = _prompt(e, 37, 6)
        first, _ = _run(e, prompt, 10)
        again, reused = _run(e, prompt, 10)
        assert again == first and reused == len(prompt)
        assert e.slot_status(0)["n_reused"] == len(prompt)


def test_the_ring_is_bounded_and_keeps_the_newest(monkeypatch):
    """Three checkpoints of a 120-token prompt every 16: 96, 112 and 120 stay; a branch at 100 resumes at 96,
    one at 50 finds none and runs from 0 (the same tokens either way); none at all with COLI_RS_CHECKPOINTS=0."""
    path = mm.tiny("qwen3next", "Q8_0")
    monkeypatch.setenv("COLI_RS_CHECKPOINT_EVERY", str(EVERY))
    monkeypatch.setenv("COLI_RS_CHECKPOINTS", "3")
    with Engine(path, n_slots=1, n_ctx=256, n_batch=32, n_threads=2) as e:
        history = _prompt(e, 120, 9)
        _run(e, history, 4)
        late, reused_late = _run(e, history[:100] + [5], 6)
        assert reused_late == 96
        _run(e, history, 4)  # the same history again: 100 of it restored from the checkpoint at 96
        early, reused_early = _run(e, history[:50] + [5], 6)
        assert reused_early == 0
    monkeypatch.setenv("COLI_RS_CHECKPOINTS", "0")
    with Engine(path, n_slots=1, n_ctx=256, n_batch=32, n_threads=2) as e:
        _run(e, history, 4)
        none, reused_none = _run(e, history[:100] + [5], 6)
        assert reused_none == 0
        assert _run(e, history[:50] + [5], 6)[0] == early
    assert late == none


def test_a_slot_file_keeps_them_and_eval_rewinds_through_them(spaced, tmp_path, monkeypatch):
    """A slot file (version 3) carries the checkpoints: after a load, a branch inside the history resumes at
    the newest before it, with the tokens of a fresh run; a file without them (version 1, as older engines and
    COLI_RS_CHECKPOINTS=0 write it) still loads, its branches run from 0. eval rewinds slot 0 from its newest
    checkpoint at or before the position (the cached tokens between run again) and drops those past it."""
    path = mm.tiny("qwen35moe", "Q8_0")
    with Engine(path, n_slots=1, n_ctx=256, n_batch=32, n_threads=2) as e:
        history = _prompt(e, 80, 2)
        branch = history[:70] + [3]
        _run(e, history, 0)
        e.slot_save(0, tmp_path / "slot.kv")
        want, reused = _run(e, branch, 4)
        assert reused == 64
    raw = (tmp_path / "slot.kv").read_bytes()
    assert raw[8:12] == (3).to_bytes(4, "little")
    (tmp_path / "bad.kv").write_bytes(raw[:-5] + bytes([raw[-5] ^ 1]) + raw[-4:])  # inside the oldest checkpoint
    (tmp_path / "short.kv").write_bytes(raw[:-4])
    with Engine(path, n_slots=1, n_ctx=256, n_batch=32, n_threads=2) as e:
        with pytest.raises(EngineError, match="checksum"):
            e.slot_load(0, tmp_path / "bad.kv")
        with pytest.raises(EngineError, match="has .* bytes"):
            e.slot_load(0, tmp_path / "short.kv")
        assert _run(e, branch, 4) == (want, 0)  # nothing of a refused file stays
        assert e.slot_load(0, tmp_path / "slot.kv") == len(history)
        assert _run(e, branch, 4) == (want, 64)
        _run(e, history, 0)
        e.eval([5] * 8, 50)  # from the checkpoint at 48 (48, 49 again); 64 and 80 gone
        assert _run(e, branch, 4)[1] == 48
    monkeypatch.setenv("COLI_RS_CHECKPOINTS", "0")
    with Engine(path, n_slots=1, n_ctx=256, n_batch=32, n_threads=2) as e:
        _run(e, history, 0)
        e.slot_save(0, tmp_path / "old.kv")
    assert (tmp_path / "old.kv").read_bytes()[8:12] == (1).to_bytes(4, "little")
    monkeypatch.delenv("COLI_RS_CHECKPOINTS")
    with Engine(path, n_slots=1, n_ctx=256, n_batch=32, n_threads=2) as e:
        assert e.slot_load(0, tmp_path / "old.kv") == len(history)
        assert _run(e, branch, 4) == (want, 0)
        a = np.frombuffer(e.eval(history[:50] + [5] * 8, 0, logits="all"), np.float32)
        _run(e, history, 0)
        b = np.frombuffer(e.eval([5] * 8, 50, logits="all"), np.float32)
    assert np.array_equal(a[-len(b):], b)


def test_linear_attention_is_its_own_phase():
    """The Gated DeltaNet layers' time is a phase of its own (stats, each turn's record, /profile's
    linear_attention_s), no longer inside attention_s; a model without them reports 0."""
    with Engine(mm.tiny("qwen35moe", "Q8_0"), n_slots=1, n_ctx=256, n_threads=2) as e:
        _run(e, _prompt(e, 200, 1), 4)
        st, turn = e.stats(), e.turns()[-1]
    assert st["linear_attention_s"] > 0 and st["attention_s"] > 0
    assert turn["linear_attention_s"] > 0 and turn["attention_s"] > 0
    assert turn["attention_s"] + turn["linear_attention_s"] + turn["matmul_s"] <= turn["wall_s"]
    with Engine(mm.tiny("qwen3moe", "Q8_0"), n_slots=1, n_ctx=256, n_threads=2) as e:
        _run(e, _prompt(e, 50, 1), 2)
        assert e.stats()["linear_attention_s"] == 0 and e.turns()[-1]["linear_attention_s"] == 0
