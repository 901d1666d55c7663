"""`coli serve --upstream` in front of llama.cpp's own server, llama-server: llama.cpp 0c1e57098, the one
llama-cpp-python 0.3.36 vendors, built by scripts/build-llama-server.sh (COLI_LLAMA_SERVER; without it these
tests skip, saying why). Gemma 3 270M (the tests' default model) for chat, streams, log-probs and the legacy
completions, Qwen2.5-Coder 0.5B Instruct for a tool round trip; each feature asked of the gateway and straight
of llama-server: it passes through the gateway exactly when it passes straight, with the same reply; what
llama-server refuses comes back by name (its status, its error's message) and the upstream stays in (the next
request passes, its breaker closed)."""
from __future__ import annotations

import json

import pytest

from tests.conftest import real_model_path
from tests.sidecar.llama_server_support import LlamaCppServer, llama_server_binary, llama_server_version
from tests.sidecar.serve_support import ServerProcess, named_events, sse_events
from tests.sidecar.upstream_support import get, post

LLAMA_CPP_COMMIT = "0c1e57098"  # what llama-cpp-python 0.3.36's changelog says it vendors
ANTHROPIC = {"anthropic-version": "2023-06-01"}
WEATHER = {"type": "function", "function": {"name": "get_weather", "description": "The weather in a city now.",
                                            "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                                                           "required": ["city"]}}}


@pytest.fixture(scope="module")
def binary():
    return llama_server_binary()


@pytest.fixture(scope="module")
def gemma(binary, default_model):
    with LlamaCppServer(binary, default_model) as server:
        yield server


@pytest.fixture(scope="module")
def gateway(gemma):
    with ServerProcess(["--upstream", gemma.url, "--upstream-slots", "1"]) as gw:
        yield gw


def chat(model: str, text: str = "Name a colour.", **extra) -> dict:
    return {"model": model, "messages": [{"role": "user", "content": text}], "max_tokens": 8, "temperature": 0,
            **extra}


def both(server: LlamaCppServer, gw: ServerProcess, path: str, body: dict, headers: dict | None = None):
    """(status, body) straight from llama-server, then through the gateway."""
    direct = post(server.url, path, body, headers)
    mine = post(gw.base, path, body, headers)
    return (direct[0], direct[2]), (mine[0], mine[2])


def streamed_text(raw: bytes) -> str:
    events = sse_events(raw)
    assert events[-1] == "[DONE]", raw[-300:]
    return "".join((c.get("delta") or {}).get("content") or c.get("text") or ""
                   for e in events[:-1] for c in e.get("choices") or [])


def assert_up(gw: ServerProcess) -> None:
    """The upstream is still in: its breaker closed, no failure counted against it."""
    up = json.loads(get(gw.base, "/health")[1])["upstreams"][0]
    assert up["state"] == "up" and up["breaker"]["state"] == "closed", up
    assert up["breaker"]["failed_requests"] == 0, up


def test_the_llama_cpp_tested_is_the_one_vendored(binary):
    """The docs name this commit as the one tested: a new llama-cpp-python moves it, and them."""
    assert LLAMA_CPP_COMMIT in llama_server_version(binary)


def test_chat_as_straight(gemma, gateway):
    (ds, direct), (ms, mine) = both(gemma, gateway, "/v1/chat/completions", chat(gemma.model_id))
    assert ds == ms == 200, mine
    direct, mine = json.loads(direct), json.loads(mine)
    assert mine["choices"][0]["message"]["content"] == direct["choices"][0]["message"]["content"]
    assert mine["choices"][0]["finish_reason"] == direct["choices"][0]["finish_reason"]
    assert mine["usage"]["prompt_tokens"] == direct["usage"]["prompt_tokens"] > 0
    assert mine["usage"]["completion_tokens"] == direct["usage"]["completion_tokens"]


def test_streamed_chat_as_straight(gemma, gateway):
    body = chat(gemma.model_id, stream=True, stream_options={"include_usage": True})
    (ds, direct), (ms, mine) = both(gemma, gateway, "/v1/chat/completions", body)
    assert ds == ms == 200
    assert streamed_text(mine) == streamed_text(direct) != ""
    usage = [e["usage"] for e in sse_events(mine)[:-1] if e.get("usage")]
    assert usage and usage[-1]["prompt_tokens"] == [e["usage"] for e in sse_events(direct)[:-1]
                                                    if e.get("usage")][-1]["prompt_tokens"]


def test_legacy_completions_as_straight(gemma, gateway):
    body = {"model": gemma.model_id, "prompt": "The capital of France is", "max_tokens": 8, "temperature": 0}
    (ds, direct), (ms, mine) = both(gemma, gateway, "/v1/completions", body)
    assert ds == ms == 200
    assert json.loads(mine)["choices"][0]["text"] == json.loads(direct)["choices"][0]["text"] != ""
    (ds, direct), (ms, mine) = both(gemma, gateway, "/v1/completions", {**body, "stream": True})
    assert ds == ms == 200
    assert streamed_text(mine) == streamed_text(direct) != ""


def logprob_rows(reply: dict) -> list:
    return reply["choices"][0]["logprobs"]["content"]


def test_logprobs_as_straight(gemma, gateway):
    """Chat's `content` entries, whole and per chunk; the legacy completions' as llama-server gives them."""
    body = chat(gemma.model_id, max_tokens=4, logprobs=True, top_logprobs=2)
    (ds, direct), (ms, mine) = both(gemma, gateway, "/v1/chat/completions", body)
    assert ds == ms == 200
    direct, mine = logprob_rows(json.loads(direct)), logprob_rows(json.loads(mine))
    assert [r["token"] for r in mine] == [r["token"] for r in direct] and len(mine) == 4
    assert [r["logprob"] for r in mine] == pytest.approx([r["logprob"] for r in direct], abs=0.05)
    assert all(len(r["top_logprobs"]) == 2 for r in mine)
    (ds, direct), (ms, mine) = both(gemma, gateway, "/v1/chat/completions", {**body, "stream": True})
    assert ds == ms == 200

    def rows(raw):
        return [r for e in sse_events(raw)[:-1] for c in e.get("choices") or []
                for r in (c.get("logprobs") or {}).get("content") or []]
    assert [r["token"] for r in rows(mine)] == [r["token"] for r in rows(direct)] and len(rows(mine)) == 4
    body = {"model": gemma.model_id, "prompt": "The capital of France is", "max_tokens": 3, "temperature": 0,
            "logprobs": 2}
    (ds, direct), (ms, mine) = both(gemma, gateway, "/v1/completions", body)
    assert ds == ms == 200  # llama-server gives chat's `content` entries here too, not the legacy arrays
    direct, mine = logprob_rows(json.loads(direct)), logprob_rows(json.loads(mine))
    assert [r["token"] for r in mine] == [r["token"] for r in direct] and len(mine) == 3
    assert [r["logprob"] for r in mine] == pytest.approx([r["logprob"] for r in direct], abs=0.05)
    (ds, direct), (ms, mine) = both(gemma, gateway, "/v1/completions", {**body, "stream": True})
    assert ds == ms == 200
    assert [r["token"] for r in rows(mine)] == [r["token"] for r in rows(direct)] and len(rows(mine)) == 3


def test_anthropic_messages_as_llama_servers_own(gemma, gateway):
    """Anthropic's Messages API: colibri's translation onto llama-server's chat answers as llama-server's own
    /v1/messages does (the same text), whole and streamed."""
    body = {"model": gemma.model_id, "max_tokens": 8, "temperature": 0,
            "messages": [{"role": "user", "content": "Name a colour."}]}
    (ds, direct), (ms, mine) = both(gemma, gateway, "/v1/messages", body, ANTHROPIC)
    assert ds == ms == 200, (direct, mine)

    def text(reply):
        return "".join(b.get("text", "") for b in json.loads(reply)["content"])
    assert text(mine) == text(direct) != ""
    assert json.loads(mine)["stop_reason"] == json.loads(direct)["stop_reason"]
    (ds, direct), (ms, mine) = both(gemma, gateway, "/v1/messages", {**body, "stream": True}, ANTHROPIC)
    assert ds == ms == 200

    def streamed(raw):
        return "".join(p["delta"].get("text", "") for n, p in named_events(raw.decode()) if n == "content_block_delta")
    assert streamed(mine) == streamed(direct) != ""


def test_system_one_is_a_named_501_as_llama_server_gives_no_prompt_logprobs(gemma, gateway):
    """llama-server answers `echo` and `prompt_logprobs` with the completion alone (no prompt log-probs, no
    refusal either): System One, which scores by them, is refused by name, and the upstream stays in."""
    body = {"state": "The sky is blue.", "questions": {"q": {"type": "choice", "text": "What colour is the sky?",
                                                             "criteria": {"blue": None, "red": None}}}}
    status, _, raw = post(gateway.base, "/v1/systemone", body)
    err = json.loads(raw)["error"]
    assert status == 501 and err["code"] == "upstream_cannot_score", raw
    assert "echo: it returned no prompt log-probs" in err["message"] and "prompt_logprobs:" in err["message"]
    assert_up(gateway)


LONG = "Tell me everything about the history of Paris. " * 300  # about 3000 tokens: past the 2048 of context


@pytest.mark.parametrize("path, body, headers", [
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": LONG}], "max_tokens": 4}, None),
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": LONG}], "max_tokens": 4, "stream": True},
     None),
    ("/v1/completions", {"prompt": LONG, "max_tokens": 4}, None),
    ("/v1/completions", {"prompt": LONG, "max_tokens": 4, "stream": True}, None),
    ("/v1/messages", {"messages": [{"role": "user", "content": LONG}], "max_tokens": 4}, ANTHROPIC),
], ids=["chat", "chat-stream", "completions", "completions-stream", "anthropic"])
def test_a_refusal_comes_back_by_name_and_the_upstream_stays(gemma, gateway, path, body, headers):
    """llama-server refuses a prompt longer than its context (before any stream starts): the gateway answers
    with its status and its message, and the next request passes."""
    body = {"model": gemma.model_id, **body}
    (ds, direct), (ms, mine) = both(gemma, gateway, path, body, headers)
    assert 400 <= ds < 500, direct
    refused = json.loads(direct)["error"]
    name = refused["type"]  # llama-server's name for it (its `code` is the status: 400)
    assert name == "exceed_context_size_error"
    assert ms == ds, mine
    mine = json.loads(mine)["error"]
    assert refused["message"] in mine["message"]
    if headers is ANTHROPIC:  # Anthropic's envelope: its type by the status, the code in the message
        assert mine["type"] == "invalid_request_error" and mine["message"].endswith(f"[{name}]"), mine
    else:
        assert mine["code"] == name, mine
    assert post(gateway.base, "/v1/chat/completions", chat(gemma.model_id, max_tokens=2))[0] == 200
    assert_up(gateway)


@pytest.fixture(scope="module")
def qwen(binary):
    with LlamaCppServer(binary, real_model_path("qwen2.5-coder-0.5b-instruct"), ctx=4096) as server:
        yield server


def test_tool_round_trip_as_straight(qwen):
    """Tools declared, the model's call, its result sent back, the answer: the same through the gateway as
    straight, whole and streamed. llama-server 0c1e57098 answers this model's call as text (Qwen2.5-Coder writes
    it as bare JSON, and llama-server's Qwen parser wants <tool_call> tags; `tool_choice: "required"` is not
    enforced for it either), so the call is read from that text, as a client would; the gateway's reading of an
    upstream's tool_calls is tested through another colibri (test_upstream.py)."""
    with ServerProcess(["--upstream", qwen.url, "--upstream-slots", "1"]) as gw:
        asked = [{"role": "user", "content": "What is the weather in Paris?"}]
        body = {"model": qwen.model_id, "messages": asked, "tools": [WEATHER], "max_tokens": 48, "temperature": 0}
        (ds, direct), (ms, mine) = both(qwen, gw, "/v1/chat/completions", body)
        assert ds == ms == 200, mine
        direct, mine = json.loads(direct)["choices"][0], json.loads(mine)["choices"][0]
        assert mine["finish_reason"] == direct["finish_reason"]
        assert mine["message"].get("tool_calls") == direct["message"].get("tool_calls")
        assert mine["message"]["content"] == direct["message"]["content"]
        said = json.loads(mine["message"]["content"])
        assert said["name"] == "get_weather" and said["arguments"]["city"] == "Paris"
        call = {"id": "call_0", "type": "function",
                "function": {"name": said["name"], "arguments": json.dumps(said["arguments"])}}
        answered = asked + [{"role": "assistant", "content": None, "tool_calls": [call]},
                            {"role": "tool", "tool_call_id": call["id"], "content": '{"celsius": 21, "sky": "clear"}'}]
        (ds, direct), (ms, mine) = both(qwen, gw, "/v1/chat/completions", {**body, "messages": answered})
        assert ds == ms == 200, mine
        text = json.loads(mine)["choices"][0]["message"]["content"]
        assert text == json.loads(direct)["choices"][0]["message"]["content"] and "21" in text
        (ds, direct), (ms, mine) = both(qwen, gw, "/v1/chat/completions", {**body, "messages": answered,
                                                                           "stream": True})
        assert ds == ms == 200
        assert streamed_text(mine) == streamed_text(direct) == text
        assert_up(gw)
