"""opencode (npm opencode-ai) and aider (PyPI aider-chat) against a real `coli serve`, as Claude
Code and Codex are tested: the first chat completion each pinned release sends, recorded
(tests/sidecar/recorded/, tests/sidecar/openai_agents.py records them), replayed on the real
engine; then each client itself, reading a file and answering from it.

What they send (recorded against a stand-in, with the model name "local-model", which the
replay server accepts through --model-alias):
- opencode 1.18.33: first a title request (its own system prompt, no tools), then the agent's:
  a ~29k-character system prompt, the user's message, 10 function tools (bash, edit, glob,
  grep, read, skill, task, todowrite, webfetch, write), tool_choice "auto", stream with
  stream_options.include_usage, max_tokens 32000 (its default output limit: a model's
  `limit.output` in opencode's config lowers it), no temperature; ~7,200 tokens on Qwen2.5.
- aider 0.86.2 (its default "whole" edit format, through litellm and the openai SDK): a system
  prompt, a worked example exchange, stream, temperature 0, no tools; ~700 tokens.

The replays and aider's run use the default model (Qwen2.5-Coder 0.5B Instruct); opencode's
run uses Qwen2.5-Coder 1.5B Instruct (pulled by scripts/test.sh for the fidelity tests): the
0.5B model calls opencode's read tool, but on its result calls it again rather than answer.
opencode's run prefills its prompt once (~3.5 min on 2 cores); the rest takes about a minute.
"""
from __future__ import annotations

import json

import pytest

from tests.conftest import real_model_path
from tests.sidecar.openai_agents import (AIDER_VERSION, OPENCODE_VERSION, RECORD_MODEL, aider_binary,
                                         opencode_binary, recording, run_aider, run_opencode)
from tests.sidecar.serve_support import ServerProcess, sse_events

SMALL = "qwen2.5-coder-0.5b-instruct"
AGENT = "qwen2.5-coder-1.5b-instruct"
CTX = 32768
REPLAY_MAX_TOKENS = 16
SECRET = "The secret word is ZEBRA-42.\n"


@pytest.fixture(scope="module")
def small():
    """The default model, greedy, accepting the recorded clients' model name too."""
    args = ["--model", str(real_model_path(SMALL)), "--ctx", str(CTX), "--kv-slots", "1", "--no-kv-persist",
            "--model-alias", RECORD_MODEL, "-v"]
    with ServerProcess(args, env={"COLI_TEMP": "0"}, timeout=300) as srv:
        yield srv


def replay(srv: ServerProcess, client: str) -> tuple[dict, list]:
    """The recorded request, as sent but for a shorter max_tokens: (recorded body, stream chunks)."""
    recorded = json.loads(recording(client).read_text())
    body = {**recorded["body"], "max_tokens": REPLAY_MAX_TOKENS}
    status, headers, raw = srv.request(recorded["method"], recorded["path"], json.dumps(body).encode(),
                                       {**recorded["headers"], "Content-Type": "application/json"}, timeout=1200)
    assert status == 200 and headers["content-type"].startswith("text/event-stream"), raw[:2000]
    events = sse_events(raw)
    assert events[-1] == "[DONE]"
    return recorded["body"], events[:-1]


def test_the_recorded_opencode_request(small):
    body, chunks = replay(small, "opencode")
    assert body["model"] == RECORD_MODEL and body["stream"] is True and body["tool_choice"] == "auto"
    assert body["stream_options"] == {"include_usage": True} and body["max_tokens"] == 32000
    assert {t["function"]["name"] for t in body["tools"]} >= {"read", "edit", "bash", "glob", "grep", "write"}
    assert [m["role"] for m in body["messages"]] == ["system", "user"]
    assert {c["model"] for c in chunks} == {SMALL}  # the served id, though the request named its alias
    finish = [c["choices"][0]["finish_reason"] for c in chunks if c["choices"] and c["choices"][0]["finish_reason"]]
    assert finish in (["stop"], ["length"], ["tool_calls"])
    usage = chunks[-1]["usage"]
    assert chunks[-1]["choices"] == [] and usage["prompt_tokens"] > 5000
    assert 1 <= usage["completion_tokens"] <= REPLAY_MAX_TOKENS
    assert all(c["usage"] is None for c in chunks[:-1])


def test_the_recorded_aider_request(small):
    body, chunks = replay(small, "aider")
    assert body["model"] == RECORD_MODEL and body["stream"] is True and body["temperature"] == 0
    assert "tools" not in body and body["messages"][0]["role"] == "system"
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
    assert text.strip() and {c["model"] for c in chunks} == {SMALL}


def _posts_ok(srv: ServerProcess) -> list[str]:
    posts = [line for line in srv.output().splitlines() if '"POST /v1/chat/completions' in line]
    assert posts and all('" 200 ' in line for line in posts), srv.output()[-3000:]
    return posts


def test_aider_reads_a_file_and_answers(small, tmp_path):
    binary, why = aider_binary()
    if binary is None:
        pytest.skip(why)
    (tmp_path / "project").mkdir()
    (tmp_path / "project" / "notes.txt").write_text(SECRET)
    done = run_aider(binary, small.base + "/v1", SMALL, "What is the secret word in notes.txt? Reply with the word "
                     "only.", tmp_path, timeout=900, files=("notes.txt",), mode="ask")
    context = f"aider {AIDER_VERSION}: rc {done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    assert done.returncode == 0, context
    assert "Added notes.txt to the chat" in done.stdout and "ZEBRA-42" in done.stdout.split("Added notes.txt")[1], \
        context
    assert "litellm.APIError" not in done.stdout + done.stderr, context
    _posts_ok(small)


def test_opencode_reads_a_file_and_answers(tmp_path):
    binary, why = opencode_binary()
    if binary is None:
        pytest.skip(why)
    (tmp_path / "project").mkdir()
    (tmp_path / "project" / "notes.txt").write_text(SECRET)
    # two slots: opencode's title requests, and its agent's turns, which reuse the prefilled prompt
    args = ["--model", str(real_model_path(AGENT)), "--ctx", str(CTX), "--kv-slots", "2", "--no-kv-persist", "-v"]
    with ServerProcess(args, env={"COLI_TEMP": "0"}, timeout=300) as srv:
        done = run_opencode(binary, srv.base + "/v1", AGENT, "Read notes.txt and tell me the secret word in it. "
                            "Reply with the word only.", tmp_path, timeout=1800,
                            limit={"context": CTX, "output": 256})
        _posts_ok(srv)
    context = f"opencode {OPENCODE_VERSION}: rc {done.returncode}\n{done.stdout[-4000:]}\n{done.stderr[-3000:]}"
    assert done.returncode == 0, context
    parts = [json.loads(line)["part"] for line in done.stdout.splitlines() if line.startswith("{")]
    reads = [p for p in parts if p.get("type") == "tool" and p.get("tool") == "read"]
    assert reads and reads[0]["state"]["status"] == "completed" and "ZEBRA-42" in reads[0]["state"]["output"], context
    said = [p["text"] for p in parts if p.get("type") == "text"]
    assert said and "ZEBRA-42" in said[-1], context
