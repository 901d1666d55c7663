"""`coli serve --upstream`: colibri's gateway in front of real engines started here:
llama-cpp-python's OpenAI server (`python -m llama_cpp.server`) on the tests' default
model, and a second `coli serve` on Qwen2.5-Coder 0.5B Instruct (tools, Anthropic).
Streaming, log-probs, tools, Anthropic, System One, 429s, an upstream killed mid-stream
and one that comes back, measured against hitting the upstream directly."""
from __future__ import annotations

import concurrent.futures
import http.client
import json
import subprocess
import sys
import time

import pytest

from tests.conftest import real_model_path
from tests.sidecar.serve_support import ServerProcess, named_events, sse_events, wait_for
from tests.sidecar.upstream_support import connection, free_port, get, post

pytest.importorskip("llama_cpp.server.app", reason="llama-cpp-python[server] is not installed (scripts/test.sh "
                                                   "installs it)")

PROMPT = "The capital of France is"


class LlamaServer:
    """llama-cpp-python's OpenAI-compatible server in a child process, on a fixed port (it can come back)."""

    def __init__(self, model: str):
        self.model = model
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen | None = None

    def start(self) -> "LlamaServer":
        # --interrupt_requests False: else every other request (a health probe) ends a running stream early
        self.proc = subprocess.Popen([sys.executable, "-m", "llama_cpp.server", "--model", self.model, "--port",
                                      str(self.port), "--n_ctx", "2048", "--interrupt_requests", "False",
                                      "--verbose", "False"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        assert wait_for(self.ready, timeout=60), "llama_cpp.server did not start"
        return self

    def ready(self) -> bool:
        try:
            return get(self.url, "/v1/models")[0] == 200
        except OSError:
            return False

    def kill(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture(scope="module")
def llama(default_model):
    server = LlamaServer(str(default_model)).start()
    yield server
    server.kill()


@pytest.fixture(scope="module")
def gateway(llama):
    with ServerProcess(["--upstream", llama.url, "--upstream-slots", "1", "--max-queue", "1"]) as srv:
        yield srv


def completion(model: str, **extra) -> dict:
    return {"model": model, "prompt": PROMPT, "max_tokens": 12, "temperature": 0, **extra}


def test_models_and_health_name_the_upstream(gateway, llama):
    status, raw = get(gateway.base, "/v1/models")
    cards = json.loads(raw)["data"]
    assert status == 200 and cards[0]["id"] == llama.model and cards[0]["meta"]["upstreams"] == [llama.url]
    health = json.loads(get(gateway.base, "/health")[1])
    assert health["status"] == "ok" and health["backend"] == "upstream"
    assert health["upstreams"][0]["url"] == llama.url and health["upstreams"][0]["state"] == "up"
    assert health["scheduler"]["capacity"] == 1


def test_completion_streams_chunk_by_chunk_as_upstream(gateway, llama):
    status, headers, raw = post(gateway.base, "/v1/completions", completion(llama.model, stream=True))
    assert status == 200 and headers["content-type"].startswith("text/event-stream")
    events = sse_events(raw)
    assert events[-1] == "[DONE]"
    texts = [e["choices"][0]["text"] for e in events[:-1] if e["choices"]]
    direct = json.loads(post(llama.url, "/v1/completions", completion(llama.model))[2])
    assert "".join(texts) == direct["choices"][0]["text"]  # the same greedy reply, in pieces
    assert len([t for t in texts if t]) > 3
    assert [e["choices"][0]["finish_reason"] for e in events[:-1] if e["choices"]][-1] == "length"


def test_logprobs_and_usage_carried_over(gateway, llama):
    body = completion(llama.model, logprobs=2, max_tokens=4)  # llama-cpp-python sorts 262k log-probs a token
    status, _, raw = post(gateway.base, "/v1/completions", body)
    mine, direct = json.loads(raw), json.loads(post(llama.url, "/v1/completions", body)[2])
    assert status == 200
    assert mine["choices"][0]["logprobs"]["tokens"] == direct["choices"][0]["logprobs"]["tokens"]
    assert mine["choices"][0]["logprobs"]["token_logprobs"] == pytest.approx(
        direct["choices"][0]["logprobs"]["token_logprobs"], abs=1e-3)
    assert mine["usage"]["completion_tokens"] == direct["usage"]["completion_tokens"] == 4
    assert mine["usage"]["prompt_tokens"] == direct["usage"]["prompt_tokens"]


def test_chat_stream_is_openai_shaped(gateway, llama):
    body = {"model": llama.model, "messages": [{"role": "user", "content": "Name a colour."}], "max_tokens": 8,
            "temperature": 0, "stream": True, "stream_options": {"include_usage": True}}
    status, _, raw = post(gateway.base, "/v1/chat/completions", body)
    events = sse_events(raw)
    assert status == 200 and events[-1] == "[DONE]"
    assert events[0]["object"] == "chat.completion.chunk" and events[0]["choices"][0]["delta"]["role"] == "assistant"
    assert events[-2]["choices"] == [] and "prompt_tokens" in events[-2]["usage"]  # llama-cpp-python's are 0


@pytest.fixture(scope="module")
def qwen_llama():
    """llama_cpp.server on Qwen2.5-Coder 0.5B Instruct: it chats (gemma-3-270m's chat ends at once here)."""
    server = LlamaServer(str(real_model_path("qwen2.5-coder-0.5b-instruct"))).start()
    yield server
    server.kill()


def streamed_logprobs(raw: bytes, key: str) -> list:
    return [x for e in sse_events(raw)[:-1] if e["choices"] and e["choices"][0].get("logprobs")
            for x in e["choices"][0]["logprobs"][key]]


def test_streams_carry_the_upstreams_logprobs(gateway, llama, qwen_llama):
    """logprobs + stream (refused by the local engine) is passed on: each chunk with the upstream's own,
    legacy arrays on completions, `content` entries on chat (OpenAI's chunk schema)."""
    body = completion(llama.model, logprobs=2, max_tokens=3, stream=True)
    status, _, raw = post(gateway.base, "/v1/completions", body)
    assert status == 200, raw
    direct = post(llama.url, "/v1/completions", body)[2]
    tokens = streamed_logprobs(raw, "tokens")
    assert tokens == streamed_logprobs(direct, "tokens") and len(tokens) == 3
    assert streamed_logprobs(raw, "token_logprobs") == pytest.approx(streamed_logprobs(direct, "token_logprobs"),
                                                                     abs=1e-3)
    with ServerProcess(["--upstream", qwen_llama.url]) as gw:
        body = {"model": qwen_llama.model, "messages": [{"role": "user", "content": "Name a colour."}],
                "max_tokens": 2, "temperature": 0, "stream": True, "logprobs": True, "top_logprobs": 2}
        status, _, raw = post(gw.base, "/v1/chat/completions", body)
        assert status == 200, raw
        mine = streamed_logprobs(raw, "content")
        direct = streamed_logprobs(post(qwen_llama.url, "/v1/chat/completions", body)[2], "content")
        assert len(mine) == 2 and [c["token"] for c in mine] == [c["token"] for c in direct]
        # the second request's prompt comes from llama.cpp's prompt cache: its logits differ in the 2nd decimal
        assert [c["logprob"] for c in mine] == pytest.approx([c["logprob"] for c in direct], abs=0.05)
        assert all(len(c["top_logprobs"]) == 2 for c in mine)
        text = "".join(e["choices"][0]["delta"].get("content") or "" for e in sse_events(raw)[:-1] if e["choices"])
        assert text == "".join(c["token"] for c in mine)


def test_routing_by_model_across_upstreams_serving_different_models(llama, qwen_llama):
    """/v1/models lists the union (an alias, an upstream's own id); a request goes only to the upstreams serving
    the model it names; an unknown one is a 404 model_not_found."""
    with ServerProcess(["--upstream", llama.url + "#gemma", "--upstream", qwen_llama.url,
                        "--upstream-slots", "1"]) as gw:
        cards = {c["id"]: c["meta"]["upstreams"] for c in json.loads(get(gw.base, "/v1/models")[1])["data"]}
        assert cards == {"gemma": [llama.url], qwen_llama.model: [qwen_llama.url]}
        for name, url in (("gemma", llama.url), (qwen_llama.model, qwen_llama.url), ("gemma", llama.url)):
            before = upstream_requests(gw)
            status, _, raw = post(gw.base, "/v1/completions", {**completion(name), "max_tokens": 2})
            assert status == 200 and json.loads(raw)["model"] == name, raw
            after = upstream_requests(gw)
            assert {u: after[u] - before[u] for u in after} == {url: 1, **{u: 0 for u in after if u != url}}
        status, _, raw = post(gw.base, "/v1/chat/completions", {"model": llama.model, "max_tokens": 2,
                                                                "messages": [{"role": "user", "content": "hi"}]})
        assert status == 404 and json.loads(raw)["error"]["code"] == "model_not_found"  # the alias replaces its id
        status, _, raw = post(gw.base, "/v1/messages", {"model": "claude-x", "max_tokens": 2,
                                                        "messages": [{"role": "user", "content": "hi"}]},
                              {"anthropic-version": "2023-06-01"})
        assert status == 404 and b"model_not_found" in raw


def test_count_tokens_is_a_named_refusal(gateway, llama):
    status, _, raw = post(gateway.base, "/v1/messages/count_tokens",
                          {"model": llama.model, "messages": [{"role": "user", "content": "hi"}]},
                          {"anthropic-version": "2023-06-01"})
    assert status == 501 and json.loads(raw)["error"]["type"] and b"upstream_cannot_count" in raw


def test_busy_upstream_queues_then_429s(gateway, llama):
    """One slot, one waiter: of three requests at once, one is refused before any header."""
    body = completion(llama.model, max_tokens=48)
    with concurrent.futures.ThreadPoolExecutor(3) as pool:
        futures = []
        for _ in range(3):
            futures.append(pool.submit(post, gateway.base, "/v1/completions", body))
            time.sleep(0.3)
        statuses = sorted(f.result()[0] for f in futures)
    assert statuses == [200, 200, 429]


def test_upstream_killed_mid_stream_then_back(default_model):
    """The client's stream ends with an error event (no [DONE], no hang); /health says down once its breaker
    opens; a restarted engine is probed back in (half-open, then closed)."""
    llama = LlamaServer(str(default_model)).start()
    try:
        with ServerProcess(["--upstream", llama.url]) as gw:
            conn = connection(gw.base, timeout=30)
            conn.request("POST", "/v1/completions", json.dumps(completion(llama.model, max_tokens=400, stream=True)),
                         {"Content-Type": "application/json"})
            resp = conn.getresponse()
            assert resp.status == 200
            assert resp.read(6) == b"data: "  # the first chunk is through
            llama.kill()
            t0 = time.monotonic()
            rest = b""
            try:
                rest = resp.read()
            except http.client.IncompleteRead as exc:  # the socket closed mid-chunk
                rest = exc.partial
            conn.close()
            assert b"[DONE]" not in rest and b'"upstream_stream_broken"' in rest and time.monotonic() - t0 < 10
            assert wait_for(lambda: json.loads(get(gw.base, "/health")[1])["status"] == "down", timeout=10)
            status, _, raw = post(gw.base, "/v1/completions", completion(llama.model))
            assert status == 503 and b"upstream_unavailable" in raw  # at once, not after a queue timeout
            llama.start()  # an open breaker's probes back off up to 15 s apart: then one passes, and the next
            assert wait_for(lambda: json.loads(get(gw.base, "/health")[1])["status"] == "ok", timeout=30)
            assert post(gw.base, "/v1/completions", completion(llama.model))[0] == 200
            metrics = get(gw.base, "/metrics")[1].decode()
            assert f'colibri_upstream_errors_total{{kind="stream",upstream="{llama.url}"}}' in metrics
            assert f'colibri_upstream_up{{upstream="{llama.url}"}} 1.0' in metrics
    finally:
        llama.kill()


def upstream_requests(gw) -> dict[str, int]:
    return {u["url"]: u["requests"] for u in json.loads(get(gw.base, "/health")[1])["upstreams"]}


def test_several_upstreams_affinity_and_retry_before_first_byte(llama, default_model):
    """A conversation stays on its upstream; that upstream killed, its next turn is retried on the other one
    before any byte went out (the probe is slowed so that the request, not the probe, finds it gone)."""
    other = LlamaServer(str(default_model)).start()
    try:
        with ServerProcess(["--upstream", llama.url, "--upstream", other.url, "--upstream-slots", "1"],
                           env={"COLI_UPSTREAM_PROBE_S": "60"}) as gw:
            chat = [{"role": "system", "content": "You are a travel guide. " * 12},
                    {"role": "user", "content": "Tell me about Paris."}]
            body = {"model": llama.model, "messages": chat, "max_tokens": 4, "temperature": 0}
            assert post(gw.base, "/v1/chat/completions", body)[0] == 200
            before = upstream_requests(gw)
            home = max(before, key=before.get)
            turn2 = {**body, "messages": chat + [{"role": "assistant", "content": "It is in France."},
                                                 {"role": "user", "content": "And Lyon?"}]}
            assert post(gw.base, "/v1/chat/completions", turn2)[0] == 200
            after = upstream_requests(gw)
            assert after[home] == before[home] + 1 and sum(after.values()) == sum(before.values()) + 1
            (llama if home == llama.url else other).kill()
            status, _, raw = post(gw.base, "/v1/chat/completions", turn2)
            assert status == 200, raw  # retried on the other upstream
            health = json.loads(get(gw.base, "/health")[1])
            breakers = {u["url"]: u["breaker"] for u in health["upstreams"]}
            # one refused connection is counted; COLI_UPSTREAM_FAILURES (3) in a row would open its breaker
            assert breakers[home]["failed_requests"] == 1 and breakers[home]["state"] == "closed"
            # the retry took a slot on the other upstream through the scheduler, and gave it back; it is the same
            # request, counted once
            assert health["scheduler"]["active"] == 0 and health["scheduler"]["admitted"] == 3
            assert (health["scheduler"]["completed"], health["scheduler"]["failed"]) == (3, 0)
            profile = json.loads(get(gw.base, "/profile")[1])
            assert profile["source"] == "gateway" and profile["turns"][-1]["upstream"] != home
            assert json.loads(get(gw.base, "/experts")[1])["routing_visible"] is False
    finally:
        other.kill()
        if not llama.ready():
            llama.start()


KEY = "upstream-secret"  # the second colibri wants a key: --upstream-key must reach it


@pytest.fixture(scope="module")
def colibri_upstream():
    with ServerProcess(["--model", str(real_model_path("qwen2.5-coder-0.5b-instruct")), "--kv-slots", "2",
                        "--ctx", "4096", "--api-key", KEY]) as srv:
        yield srv


def test_tools_and_anthropic_through_another_colibri(colibri_upstream, llama):
    """Tool calls and Anthropic's Messages API, translated onto the upstream's chat API (--model-id: an alias)."""
    with ServerProcess(["--upstream", colibri_upstream.base, "--model-id", "qwen", "--upstream-key", KEY,
                        "--upstream-slots", "2"]) as gw:
        tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {
            "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]
        body = {"model": "qwen", "messages": [{"role": "user", "content": "What is the weather in Paris?"}],
                "max_tokens": 64, "temperature": 0, "tools": tools,
                "tool_choice": {"type": "function", "function": {"name": "get_weather"}}}
        status, _, raw = post(gw.base, "/v1/chat/completions", body)
        reply = json.loads(raw)
        assert status == 200, raw
        call = reply["choices"][0]["message"]["tool_calls"][0]
        assert reply["choices"][0]["finish_reason"] == "tool_calls" and call["function"]["name"] == "get_weather"
        assert "city" in json.loads(call["function"]["arguments"])
        thinking = {"model": "qwen", "messages": [{"role": "user", "content": "hi"}], "enable_thinking": True}
        direct = post(colibri_upstream.base, "/v1/chat/completions", {**thinking, "model": colibri_upstream.model_id},
                      {"Authorization": f"Bearer {KEY}"})
        status, _, raw = post(gw.base, "/v1/chat/completions", thinking)  # forwarded: the upstream's own answer
        assert status == direct[0] and json.loads(raw)["error"]["code"] == json.loads(direct[2])["error"]["code"]
        status, _, raw = post(gw.base, "/v1/chat/completions", {**body, "stream": True})
        events = sse_events(raw)
        calls = [c for e in events[:-1] for c in e["choices"][0]["delta"].get("tool_calls", []) if e["choices"]]
        assert calls and calls[0]["function"]["name"] == "get_weather"
        anthropic = {"model": "qwen", "max_tokens": 24, "temperature": 0, "stream": True,
                     "messages": [{"role": "user", "content": "Say hello."}]}
        status, _, raw = post(gw.base, "/v1/messages", anthropic, {"anthropic-version": "2023-06-01"})
        names = [name for name, _ in named_events(raw.decode())]
        assert status == 200 and names[0] == "message_start" and names[-1] == "message_stop"
        text = "".join(p["delta"].get("text", "") for n, p in named_events(raw.decode()) if n == "content_block_delta")
        assert text.strip()
        final = [p for n, p in named_events(raw.decode()) if n == "message_delta"][0]
        assert final["usage"]["output_tokens"] > 0
        status, _, raw = post(gw.base, "/v1/responses", {"model": "qwen", "input": "Say hello.", "max_output_tokens": 16})
        reply = json.loads(raw)
        assert status == 200 and reply["status"] in ("completed", "incomplete") and reply["output"], raw
        assert json.loads(get(gw.base, "/health")[1])["routing_visible"] is True  # another colibri: relayed
        assert json.loads(get(gw.base, "/experts")[1])["relayed_from"] == colibri_upstream.base
        conn = connection(gw.base, timeout=30)
        conn.request("GET", "/events")
        resp = conn.getresponse()
        assert resp.status == 200 and resp.getheader("Content-Type").startswith("text/event-stream")
        conn.close()


def test_system_one_scores_through_echo_logprobs(colibri_upstream):
    """(Through another colibri: llama-cpp-python's echoed log-probs take seconds a token on a 262k vocabulary.)"""
    with ServerProcess(["--upstream", colibri_upstream.base, "--upstream-key", KEY]) as gw:
        _system_one(gw, colibri_upstream)


def _system_one(gateway, upstream):
    body = {"state": "The sky is blue.", "questions": {"q": {"type": "choice", "text": "What colour is the sky?",
                                                             "criteria": {"blue": None, "red": None}}}}
    status, headers, raw = post(gateway.base, "/v1/systemone", body)
    assert status == 200, raw
    q = json.loads(raw)["answers"]["q"]
    assert set(q["probabilities"]) == {"blue", "red"} and sum(q["probabilities"].values()) == pytest.approx(1, 1e-5)
    assert headers["x-colibri-engine-calls"] == "2"
    local = json.loads(post(upstream.base, "/v1/systemone", body, {"Authorization": f"Bearer {KEY}"})[2])
    local = local["answers"]["q"]  # the upstream's own answer
    assert q["probabilities"] == pytest.approx(local["probabilities"], abs=2e-3)


def test_coli_web_keeps_the_upstream_key_out_of_argv():
    """`coli web --upstream-key` starts `coli serve` with the key in its environment, as the API key."""
    import argparse

    from colibri import desktop
    from colibri.commands import web

    root = argparse.ArgumentParser()
    web.register(root.add_subparsers())
    args = root.parse_args(["web", "--upstream", "http://gpu:8000", "--upstream-key", "sekrit", "--upstream-slots", "2"])
    argv = desktop.serve_argv(args, args.serve_parser)
    assert argv == ["--upstream", "http://gpu:8000", "--upstream-slots", "2"]


def test_openai_and_anthropic_sdks_stream_tools_through_the_gateway(colibri_upstream):
    """The real clients: openai's and anthropic's SDKs stream a forced tool call through --upstream."""
    openai = pytest.importorskip("openai")
    anthropic = pytest.importorskip("anthropic")
    with ServerProcess(["--upstream", colibri_upstream.base + "#qwen", "--upstream-key", KEY,
                        "--upstream-slots", "2"]) as gw:
        weather = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
        client = openai.OpenAI(base_url=gw.base + "/v1", api_key="unused", max_retries=0, timeout=120)
        stream = client.chat.completions.create(
            model="qwen", messages=[{"role": "user", "content": "What is the weather in Paris?"}], max_tokens=64,
            temperature=0, stream=True, stream_options={"include_usage": True},
            tools=[{"type": "function", "function": {"name": "get_weather", "parameters": weather}}],
            tool_choice={"type": "function", "function": {"name": "get_weather"}})
        name, arguments, finish, usage = "", "", None, None
        for chunk in stream:
            usage = chunk.usage or usage
            for choice in chunk.choices:
                for call in choice.delta.tool_calls or []:
                    name += call.function.name or ""
                    arguments += call.function.arguments or ""
                finish = choice.finish_reason or finish
        assert name == "get_weather" and "city" in json.loads(arguments) and finish == "tool_calls"
        assert usage is not None and usage.completion_tokens > 0
        claude = anthropic.Anthropic(base_url=gw.base, api_key="unused", max_retries=0, timeout=120)
        with claude.messages.stream(model="qwen", max_tokens=64,
                                    messages=[{"role": "user", "content": "What is the weather in Paris?"}],
                                    tools=[{"name": "get_weather", "input_schema": weather}],
                                    tool_choice={"type": "tool", "name": "get_weather"},
                                    extra_body={"temperature": 0}) as events:  # stream() takes no temperature
            message = events.get_final_message()
        uses = [b for b in message.content if b.type == "tool_use"]
        assert message.stop_reason == "tool_use" and uses and uses[0].name == "get_weather"
        assert "city" in uses[0].input
