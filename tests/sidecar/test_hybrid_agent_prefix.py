"""A coding agent's turns on a Gated DeltaNet hybrid (a tiny qwen35moe, its recurrent state beside the KV):
the second turn sends the history back (the reply as the agent re-renders it) plus a new message. The
scheduler grants the slot holding the longest prefix, the engine restores its newest recurrent-state
checkpoint at or before the branch (engine/src/slots.c) and the usage says how much came from the cache:
all but the tail, where the engine alone (no checkpoints) would have run the whole prompt again. After a
restart the slot file brings the checkpoints back (KV file version 3) and the third turn is reused alike."""
from __future__ import annotations

import aiohttp
import pytest

from colibri.serve_config import ServeConfig
from tests.sidecar.serve_support import close_served, open_served, run_app

pytest.importorskip("gguf")

CFG = ServeConfig(model_id="tiny-hybrid", kv_slots=2, ctx=2048, threads=2, kv_persist=True)
INSTRUCTIONS = "You are a coding agent. " + " ".join(f"Rule {i}: keep the tests green." for i in range(60))


def _turns(checkpoints: str, monkeypatch, state_dir) -> list[dict]:
    """Two turns, a restart (the slots saved and restored), a third turn: their usages."""
    from tests.fixtures.moe_models import tiny

    monkeypatch.setenv("COLI_RS_CHECKPOINTS", checkpoints)
    monkeypatch.setenv("COLI_RS_CHECKPOINT_EVERY", "128")
    monkeypatch.setenv("COLI_STATE_DIR", str(state_dir))
    messages = [{"role": "system", "content": INSTRUCTIONS},
                {"role": "user", "content": "What does the serving core do?"}]
    usages = []
    for asks in (("Now read core.py.", "And engine_thread.py."), ("Summarise it in one line.",)):
        served = open_served(CFG, tiny("qwen35moe", "Q8_0"))
        try:
            run_app(served, lambda c, _: _ask(c, messages, asks, usages), CFG)
        finally:
            close_served(served)
    return usages


async def _ask(c, messages: list[dict], asks: tuple[str, ...], usages: list[dict]) -> None:
    for ask in asks:
        r = await c.post("/v1/chat/completions",
                         json={"model": CFG.model_id, "messages": messages, "max_tokens": 12, "temperature": 0},
                         timeout=aiohttp.ClientTimeout(total=None))
        assert r.status == 200, await r.text()
        reply = await r.json()
        usages.append(reply["usage"])
        messages += [{"role": "assistant", "content": reply["choices"][0]["message"]["content"] or ""},
                     {"role": "user", "content": ask}]


def test_an_agent_turn_on_a_hybrid_model_prefills_only_the_tail(monkeypatch, tmp_path):
    with_ck = _turns("8", monkeypatch, tmp_path / "a")
    without = _turns("0", monkeypatch, tmp_path / "b")
    cached = [u["prompt_tokens_details"]["cached_tokens"] for u in with_ck]
    first = with_ck[0]["prompt_tokens"]
    print(f"\nhybrid agent turns: prompts {[u['prompt_tokens'] for u in with_ck]}, cached {cached} "
          f"(no checkpoints: {[u['prompt_tokens_details']['cached_tokens'] for u in without]})")
    assert first > 600 and cached[0] == 0
    # the second turn reuses at least up to the last interval checkpoint before the reply (128-token spacing)
    for k in (1, 2):  # the third turn after the restart
        before = with_ck[k - 1]["prompt_tokens"]
        assert cached[k] >= before - 128 - 16, cached
        assert with_ck[k]["prompt_tokens"] - cached[k] <= 0.3 * before
    assert [u["prompt_tokens"] for u in without] == [u["prompt_tokens"] for u in with_ck]
