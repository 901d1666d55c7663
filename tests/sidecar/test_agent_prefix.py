"""A coding agent's session reuses its prefix: a system prompt of 8k tokens with tools, then
turns that add an assistant reply (the model's own, as the agent sends it back), a tool result
and a user message. Each later turn prefills only what is new, on the same server and after a
restart (the slot's KV cache was saved and restored). On the real Qwen2.5-Coder-0.5B-Instruct
and its own template: the tokenizer and template decide whether a re-rendered history still
starts with the tokens the slot caches.
"""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import aiohttp

from colibri.serve_config import ServeConfig
from tests.conftest import ROOT, real_model_path
from tests.sidecar.serve_support import close_served, open_served, run_app

MODEL = "qwen2.5-coder-0.5b-instruct"
CFG = ServeConfig(model_id=MODEL, kv_slots=2, ctx=12288, threads=2, kv_persist=True)
# an agent's instructions: Claude Code's are ~12k tokens (test_claude_code.py prefills them, end to end); 8k here
# crosses every batch and cache-file boundary alike at a third of the prefill's time (its attention grows as the
# square of the length: 15k took 3.5 minutes on 2 cores)
SYSTEM_TOKENS = 8000
TOOLS = [{"type": "function", "function": {
    "name": name, "description": description,
    "parameters": {"type": "object", "properties": {arg: {"type": "string"}}, "required": [arg]}}}
    for name, description, arg in (("read_file", "Read a file of the repository", "path"),
                                   ("run_shell", "Run a shell command in the repository", "command"),
                                   ("search", "Search the repository for a string", "query"))]


def agent_instructions(served, n_tokens: int) -> str:
    """Real prose (the repository's own docs) as long as an agent's system prompt."""
    text = ""
    for page in sorted((ROOT / "docs").glob("*.md")) + [ROOT / "README.md", ROOT / "sidecar" / "README.md"]:
        text += Path(page).read_text() + "\n"
        if len(served.engine.tokenize(text)) >= n_tokens:
            break
    tokens = served.engine.tokenize(text)[:n_tokens]
    return "You are a coding agent working in this repository.\n\n" + served.engine.detokenize(tokens).decode(
        "utf-8", "ignore")


def turn(served, cfg, messages: list[dict]) -> tuple[dict, dict]:
    """One chat completion: (the assistant message as an agent sends it back, usage)."""
    async def body(c, served):
        r = await c.post("/v1/chat/completions", json={"model": MODEL, "messages": messages, "tools": TOOLS,
                                                        "max_tokens": 12, "temperature": 0},
                         timeout=aiohttp.ClientTimeout(total=None))  # a first turn's prefill takes minutes
        assert r.status == 200, await r.text()
        return await r.json()

    reply = run_app(served, body, cfg, timeout=3600)
    message = reply["choices"][0]["message"]
    back = {"role": "assistant", "content": message["content"] or ""}
    if message.get("tool_calls"):
        back["tool_calls"] = message["tool_calls"]
    return back, reply["usage"]


def prefilled(usage: dict) -> int:
    return usage["prompt_tokens"] - usage["prompt_tokens_details"]["cached_tokens"]


def test_agent_turns_prefill_only_what_is_new_across_a_restart(tmp_path, monkeypatch):
    monkeypatch.setenv("COLI_STATE_DIR", str(tmp_path / "state"))  # the saved slots of this session only
    path = real_model_path(MODEL)
    served = open_served(CFG, path)
    try:
        messages = [{"role": "system", "content": agent_instructions(served, SYSTEM_TOKENS)},
                    {"role": "user", "content": "What does the serving core do? Look at the code."}]
        said, first = turn(served, CFG, messages)
        assert first["prompt_tokens"] > SYSTEM_TOKENS and prefilled(first) == first["prompt_tokens"]
        messages += [said, {"role": "user", "content": "Now read sidecar/colibri/serving/core.py."}]
        said, second = turn(served, CFG, messages)
    finally:
        close_served(served)
    served = open_served(CFG, path)  # a restart: the slot comes back from its saved KV cache
    try:
        assert served.engine_thread.restored
        messages += [said, {"role": "user", "content": "Summarise it in one line."}]
        _, third = turn(served, replace(CFG), messages)
    finally:
        close_served(served)
    print(f"\nagent session on {MODEL}: turn 1 prefilled {prefilled(first)} of {first['prompt_tokens']} tokens, "
          f"turn 2 {prefilled(second)} of {second['prompt_tokens']}, "
          f"turn 3 after a restart {prefilled(third)} of {third['prompt_tokens']}")
    assert prefilled(second) <= 0.05 * prefilled(first)
    assert prefilled(third) <= 0.05 * prefilled(first)
    assert second["prompt_tokens"] > first["prompt_tokens"] and third["prompt_tokens"] > second["prompt_tokens"]
