"""Sliding-window layers keep a window of their positions, not the context
(coli_kv in engine/src/model.h: n_swa + a batch of cells from a multiple of 64,
moved on as the sequence grows), with the same bits as caches that keep every
position (COLI_SWA_FULL=1, llama.cpp's swa_full): on Gemma 3 270M (5 of 6
layers slide over 512) past the point where the window moves, and on the
gpt-oss fixture (every other layer over 32) in small batches and in slots.
A rewind behind the window runs the cached tokens again; slot files keep the
window only, restore and continue alike, and an older file (every position)
still loads."""
from __future__ import annotations

import numpy as np
import pytest

from colibri.engine import Engine
from colibri.errors import EngineError
from tests.fixtures import moe_models as mm
from tests.reference import real_text


def _last(e: Engine, tokens: list[int], pos: int) -> np.ndarray:
    return np.frombuffer(e.eval(tokens, pos, logits="last"), np.float32).copy()


def _run(e: Engine, prompt: list[int], steps: int, path, probes: list[tuple[int, int, bool]]):
    """The prompt's last logits, `steps` greedy tokens one at a time; the slot saved to path and
    3 tokens more; then a rewind to each (position, count, again) of probes (the sequence's own
    tokens evaluated there; again: those before it run first, in one batch, as a rewind behind
    the window does)."""
    out = [_last(e, prompt, 0)]
    toks = list(prompt)
    for _ in range(steps):
        toks.append(int(np.argmax(out[-1])))
        out.append(_last(e, toks[-1:], len(toks) - 1))
    e.slot_save(0, path)
    after = [_last(e, [prompt[i]], len(toks) + i) for i in range(3)]
    for p, n, again in probes:
        if again:
            e.eval(toks[:p], 0)
        out.append(_last(e, toks[p:p + n], p))
    return out, after, len(toks)


def test_gemma_window_same_bits_rewinds_and_slot_files(default_model, tmp_path, monkeypatch):
    # n_batch 512: the window layers keep 512 + 64 + 512 = 1088 cells; the prompt's last batch moves
    # the window to 512, the decode moves it again at position 1600 (to 1088)
    ctx, n_prompt, steps = 2048, 1560, 44
    # rewinds: inside the window (1600: its window starts at 1088, still held), behind it (1400: runs
    # again in the prompt's own batches of 512, the same bits as never leaving; 5: runs again)
    probes = [(1600, 2, False), (1400, 3, False), (5, 1, True)]
    with Engine(default_model, n_ctx=ctx, n_threads=2) as w:
        text = real_text()
        prompt = w.tokenize(text)
        while len(prompt) < n_prompt:
            prompt += w.tokenize(text, add_bos=False)
        prompt = prompt[:n_prompt]
        window_bytes = w.model_info()["kv_bytes_per_slot"]
        ours, after, n = _run(w, prompt, steps, tmp_path / "window.kv", [(p, k, False) for p, k, _ in probes])
    monkeypatch.setenv("COLI_SWA_FULL", "1")
    with Engine(default_model, n_ctx=ctx, n_threads=2) as f:
        full_bytes = f.model_info()["kv_bytes_per_slot"]
        theirs, after_full, _ = _run(f, prompt, steps, tmp_path / "full.kv", probes)  # version 1, as before
        with pytest.raises(EngineError, match="sliding-window"):
            f.slot_load(0, tmp_path / "window.kv")
    monkeypatch.delenv("COLI_SWA_FULL")
    assert window_bytes < full_bytes * 0.62, (window_bytes, full_bytes)  # 15 of 18 layers keep 1088 of 2048 cells
    for i, (a, b) in enumerate(zip(ours + after, theirs + after_full)):
        assert np.array_equal(a, b), f"logits {i} differ"
    with Engine(default_model, n_ctx=ctx, n_threads=2) as w:
        for name in ("window.kv", "full.kv"):
            assert w.slot_load(0, tmp_path / name) == n
            again = [_last(w, [prompt[i]], n + i) for i in range(3)]
            for a, b in zip(again, after):
                assert np.array_equal(a, b), name


def _tokens(e: Engine, n: int, seed: int) -> list[int]:
    rng = np.random.default_rng(seed)
    return [e.bos] + [int(t) for t in rng.integers(0, e.n_vocab, n - 1)]


def _gptoss_run(path) -> tuple[np.ndarray, list[list[int]], list[int]]:
    # batches of 64: the window layers keep 32 + 64 + 64 -> 192 cells, moved on every few batches
    with Engine(path, n_ctx=1024, n_batch=64, n_slots=2, n_threads=2) as e:
        toks = _tokens(e, 700, 5)
        logits = np.frombuffer(e.eval(toks, 0, logits="all"), np.float32).reshape(len(toks), -1).copy()
        prompts = [_tokens(e, 300, 6), _tokens(e, 250, 7)]
        for i, p in enumerate(prompts):
            e.submit(i, p, max_tokens=120, ignore_eos=True)
        out: list[list[int]] = [[], []]
        done = 0
        while done < 2:
            for ev in e.step():
                if ev.done:
                    done += 1
                else:
                    out[ev.slot].append(ev.token)
        # a prompt sharing 200 tokens with slot 0's: its window has moved on, so it runs again from 0
        reused = [e.submit(0, prompts[0][:200] + [3, 4, 5], max_tokens=1, ignore_eos=True)]
        while not any(ev.done for ev in e.step()):
            pass
        # one that continues slot 0's sequence reuses it all
        reused.append(e.submit(0, prompts[0][:200] + [3, 4, 5, 6], max_tokens=1, ignore_eos=True))
        while not any(ev.done for ev in e.step()):
            pass
    return logits, out, reused


def test_gptoss_window_same_bits_in_batches_and_slots(monkeypatch):
    path = mm.tiny("gpt-oss", "Q8_0")
    ours, ours_tokens, reused = _gptoss_run(path)
    monkeypatch.setenv("COLI_SWA_FULL", "1")
    theirs, theirs_tokens, reused_full = _gptoss_run(path)
    assert np.array_equal(ours, theirs)
    assert ours_tokens == theirs_tokens
    assert reused == [0, 203] and reused_full == [200, 203]
