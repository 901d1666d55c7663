"""Claude Code against colibri: the request the current `@anthropic-ai/claude-code` sends
(recorded in tests/sidecar/recorded/, ~12k tokens: 12 tools, a system-role message,
adaptive thinking shown "omitted", max_tokens 128000) replayed on the real engine, and
`claude -p` end to end against a real `coli serve`.

The replay runs the default model's weights under a template with a tool-call format
(Qwen3's: Claude Code always declares tools, and Gemma 3's own template has none), with
max_tokens cut to keep the decode short. The end-to-end test runs the coding model a
user would (Qwen2.5-Coder-0.5B-Instruct, a real file test.sh pulls): a model that ends
its turn, since Claude Code calls a reply cut by its output limit an error. Each test
has one long prefill (~12k tokens: minutes on 2 cores), both at ctx 32768.
"""
from __future__ import annotations

import json

import pytest

from colibri.serve_config import ServeConfig
from tests.conftest import real_model_path
from tests.fixtures.vendor.extract import load as vendor_schemas
from tests.sidecar.claude_code import claude_binary, latest_recording, run_claude
from tests.sidecar.family_templates import QWEN3, with_chat_template
from tests.sidecar.serve_support import ServerProcess, close_served, named_events, open_served, run_app

CTX = 32768
REPLAY_MAX_TOKENS = 8
E2E_MODEL = "qwen2.5-coder-0.5b-instruct"
E2E_ENV = {"ANTHROPIC_MODEL": E2E_MODEL,  # the served id, for every request
           "CLAUDE_CODE_MAX_OUTPUT_TOKENS": "256",  # a bound on the decode (a reply cut there fails the run)
           "CLAUDE_CODE_MAX_TURNS": "2",  # a tool call the model makes runs once, its answer is cached-prefix cheap
           "API_TIMEOUT_MS": "1800000"}  # the first turn's prefill takes minutes here


@pytest.fixture(scope="module")
def recorded() -> dict:
    path = latest_recording()
    assert path is not None, "no recorded Claude Code request in tests/sidecar/recorded/"
    return json.loads(path.read_text())


@pytest.fixture(scope="module")
def tooled_model(default_model):
    return with_chat_template(default_model, QWEN3, "qwen3-template")


def check_event_grammar(evs: list[tuple[str, dict]]) -> None:
    """message_start, then each block opened, fed and closed in index order, message_delta,
    message_stop; pings anywhere in between."""
    names = [n for n, _ in evs if n != "ping"]
    assert names[0] == "message_start" and names[-2:] == ["message_delta", "message_stop"], names
    open_index, next_index = None, 0
    for name, p in evs[1:-2]:
        if name == "content_block_start":
            assert open_index is None and p["index"] == next_index
            open_index, next_index = p["index"], next_index + 1
        elif name == "content_block_delta":
            assert p["index"] == open_index
        elif name == "content_block_stop":
            assert p["index"] == open_index
            open_index = None
        else:
            assert name == "ping", name
    assert open_index is None and next_index >= 1


@pytest.mark.slow
def test_the_recorded_request_replays_on_the_real_engine(recorded, tooled_model):
    body = recorded["body"]
    cfg = ServeConfig(model_id=body["model"], kv_slots=1, ctx=CTX, threads=2, kv_persist=False)  # --model-id
    served = open_served(cfg, tooled_model)
    replay = {**body, "max_tokens": REPLAY_MAX_TOKENS}  # all else as Claude Code sent it

    async def go(c, served):
        r = await c.post(recorded["path"], json=replay, headers=recorded["headers"])
        streamed = (r.status, r.headers.get("Content-Type", ""), await r.text())
        r = await c.post(recorded["path"], json={**replay, "stream": False}, headers=recorded["headers"])
        whole = (r.status, await r.json())
        r = await c.post("/v1/messages/count_tokens", headers=recorded["headers"], json={
            k: v for k, v in body.items() if k in ("model", "messages", "system", "tools", "thinking")})
        return streamed, whole, (r.status, await r.json())

    try:
        (status, kind, text), (status2, reply), (status3, counted) = run_app(served, go, cfg, timeout=1200)
    finally:
        close_served(served)
    assert status == 200 and kind.startswith("text/event-stream"), text[:500]
    evs = named_events(text)
    check_event_grammar(evs)
    start = evs[0][1]["message"]
    assert start["model"] == body["model"] and start["role"] == "assistant" and start["content"] == []
    delta = [p for n, p in evs if n == "message_delta"][0]
    assert delta["delta"]["stop_reason"] in ("end_turn", "max_tokens", "tool_use")
    assert 1 <= delta["usage"]["output_tokens"] <= REPLAY_MAX_TOKENS
    thinking = [p["delta"] for n, p in evs if n == "content_block_delta" and p["delta"]["type"] == "thinking_delta"]
    assert thinking == []  # display "omitted"
    prompt = delta["usage"]["input_tokens"] + delta["usage"]["cache_read_input_tokens"]
    assert status3 == 200 and counted["input_tokens"] == prompt > 10000

    assert status2 == 200, reply
    schemas = vendor_schemas()["anthropic"]
    assert set(schemas["Message"]["required"]) <= set(reply) and set(schemas["Usage"]["required"]) <= set(reply["usage"])
    assert reply["type"] == "message" and reply["content"] and reply["stop_reason"] in ("end_turn", "max_tokens",
                                                                                          "tool_use")
    u = reply["usage"]
    assert u["input_tokens"] + u["cache_read_input_tokens"] == prompt
    assert u["input_tokens"] <= 1 and u["cache_read_input_tokens"] >= prompt - 1  # the prefix came from the slot


@pytest.mark.slow
def test_claude_code_end_to_end(tmp_path):
    """`claude -p` as a user runs it, against `coli serve --ctx 32768` on a coding model."""
    binary, why = claude_binary(install=True)
    if binary is None:
        pytest.skip(f"Claude Code is not available: {why}")
    model = real_model_path(E2E_MODEL)
    args = ["--model", str(model), "--model-id", E2E_MODEL, "--ctx", str(CTX), "--kv-slots", "1", "--threads", "2",
            "--no-kv-persist", "-v"]
    with ServerProcess(args, timeout=300) as srv:
        done = run_claude(binary, srv.base, "Reply with one word: hello", tmp_path, timeout=1800, **E2E_ENV)
        log = srv.output()
    posts = [line for line in log.splitlines() if '"POST /v1/messages' in line]
    assert done.returncode == 0, f"claude -p failed:\n{done.stdout}\n{done.stderr}\n--- server ---\n{log[-3000:]}"
    assert posts and all('" 200 ' in line for line in posts), log[-3000:]
    assert "API Error" not in done.stdout + done.stderr and done.stdout.strip()
