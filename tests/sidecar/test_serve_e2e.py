"""`coli serve` end to end: the real server in a child process on the real engine, with the
default model (Gemma 3 270M) and a tiny MoE fixture, through raw HTTP and the official
`openai` SDK."""
from __future__ import annotations

import json
import signal
import socket
import threading

import pytest

from tests.sidecar.serve_support import ServerProcess, sse_events, wait_for

GEMMA_ID = "gemma-3-270m"
CTX = 512
QUESTION = [{"role": "user", "content": "Hello!"}]


@pytest.fixture(scope="module")
def gemma(default_model):
    """The default model on two KV slots; no --model: the embedded default and its id."""
    with ServerProcess(["--kv-slots", "2", "--ctx", str(CTX), "--max-tokens", "16"]) as srv:
        yield srv


def chat(srv, messages=QUESTION, **kw):
    return srv.post("/v1/chat/completions", {"model": srv.model_id, "messages": messages, "temperature": 0, **kw})


def complete(srv, prompt, **kw):
    return srv.post("/v1/completions", {"model": srv.model_id, "prompt": prompt, "temperature": 0, **kw})


def stream_text(srv, path, payload) -> tuple[str, list]:
    status, headers, raw = srv.request("POST", path, json.dumps(payload).encode(),
                                       {"Content-Type": "application/json"})
    assert status == 200 and headers["content-type"].startswith("text/event-stream"), raw
    events = sse_events(raw)
    assert events[-1] == "[DONE]"
    chunks = events[:-1]
    key = "delta" if path.endswith("chat/completions") else None
    text = "".join((c["choices"][0]["delta"].get("content") or "") if key else c["choices"][0]["text"]
                   for c in chunks if c["choices"])
    return text, chunks


def test_ready_when_announced_and_models(gemma):
    assert gemma.model_id == GEMMA_ID  # the default model's id when no --model is given
    status, _, raw = gemma.get("/health")
    health = json.loads(raw)
    assert status == 200 and health["status"] == "ok" and health["arch"] == "gemma3"
    assert health["kv_slots"] == 2 and health["n_ctx"] == CTX
    status, _, raw = gemma.get("/v1/models")
    assert json.loads(raw)["data"][0]["id"] == GEMMA_ID


def test_chat_greedy_is_deterministic_and_stream_matches(gemma):
    s1, h1, a = chat(gemma)
    s2, _, b = chat(gemma)
    assert s1 == s2 == 200, a
    text = a["choices"][0]["message"]["content"]
    assert text and text == b["choices"][0]["message"]["content"]
    assert a["choices"][0]["finish_reason"] in ("stop", "length")
    u = a["usage"]
    assert u["total_tokens"] == u["prompt_tokens"] + u["completion_tokens"] and 0 < u["completion_tokens"] <= 16
    assert "x-colibri-queue-wait-ms" in h1 and h1["x-request-id"].startswith("req_")
    streamed, chunks = stream_text(gemma, "/v1/chat/completions",
                                   {"model": GEMMA_ID, "messages": QUESTION, "temperature": 0, "stream": True,
                                    "stream_options": {"include_usage": True}})
    assert streamed == text
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert chunks[-2]["choices"][0]["finish_reason"] == a["choices"][0]["finish_reason"]
    counts = ("prompt_tokens", "completion_tokens", "total_tokens")
    assert [chunks[-1]["usage"][k] for k in counts] == [u[k] for k in counts]
    assert chunks[-1]["usage"]["prompt_tokens_details"]["cached_tokens"] == u["prompt_tokens"]  # the same prompt again


def test_completion_equals_the_engine_alone(gemma, default_model):
    """Greedy through the server = greedy through the engine directly (same tokens, same text)."""
    from colibri.engine import Engine
    from colibri.generate import generate

    prompt = "The capital of France is"
    status, _, body = complete(gemma, prompt, max_tokens=12)
    assert status == 200, body
    with Engine(default_model, n_ctx=CTX) as engine:
        gen = generate(engine, engine.tokenize(prompt), 12)
        want = engine.detokenize(gen.tokens).decode("utf-8", "replace")
    assert body["choices"][0]["text"] == want
    assert body["usage"]["completion_tokens"] == len(gen.tokens)
    assert body["choices"][0]["finish_reason"] == gen.finish_reason


def test_stop_sequences_cut_and_end_in_both_modes(gemma):
    status, _, base = complete(gemma, "1, 2, 3, 4,", max_tokens=16)
    text = base["choices"][0]["text"]
    assert len(text) >= 6, text
    stop = text[3:6]  # three characters from the middle: usually spans a token boundary
    want = text[:text.index(stop)]
    status, _, cut = complete(gemma, "1, 2, 3, 4,", max_tokens=16, stop=[stop, "never-seen"])
    assert cut["choices"][0]["text"] == want and cut["choices"][0]["finish_reason"] == "stop"
    streamed, chunks = stream_text(gemma, "/v1/completions",
                                   {"model": GEMMA_ID, "prompt": "1, 2, 3, 4,", "temperature": 0, "max_tokens": 16,
                                    "stream": True, "stop": stop})
    assert streamed == want and chunks[-1]["choices"][0]["finish_reason"] == "stop"


def test_length_budget_and_context_limit(gemma):
    status, _, body = complete(gemma, "Once upon a time", max_tokens=3)
    assert body["choices"][0]["finish_reason"] == "length" and body["usage"]["completion_tokens"] == 3
    status, _, body = complete(gemma, "Once upon a time", max_completion_tokens=2, max_tokens=9)
    assert body["usage"]["completion_tokens"] == 2
    status, _, body = complete(gemma, "word " * (CTX + 10), max_tokens=4)
    assert status == 400 and body["error"]["code"] == "context_length_exceeded"
    assert body["error"]["param"] == "prompt" and f"{CTX} tokens" in body["error"]["message"]


def test_continuation_of_a_trailing_assistant_turn(gemma):
    convo = [{"role": "user", "content": "Count from one to ten."}, {"role": "assistant", "content": "one, two,"}]
    status, _, body = chat(gemma, convo, max_tokens=6)
    assert status == 200, body
    assert body["choices"][0]["message"]["content"].strip()  # the model goes on from "one, two,"
    status, _, body = chat(gemma, [convo[0], {"role": "assistant", "content": "one, two, "}])
    assert status == 400 and body["error"]["param"] == "messages.1.content"


def test_concurrent_slots_return_what_they_return_alone(gemma):
    prompts = ["The sky is", "My favourite food is"]
    alone = [complete(gemma, p, max_tokens=10)[2]["choices"][0]["text"] for p in prompts]
    together: list = [None, None]

    def worker(i: int) -> None:
        together[i] = complete(gemma, prompts[i], max_tokens=10)[2]["choices"][0]["text"]

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert together == alone


def test_disconnect_mid_stream_frees_the_slot(gemma):
    def snapshot():
        return json.loads(gemma.get("/health")[2])["scheduler"]

    before = snapshot()
    body = json.dumps({"model": GEMMA_ID, "prompt": "Write a long story about a dragon.", "max_tokens": 400,
                       "stream": True}).encode()
    sock = socket.create_connection((gemma.host, gemma.port), timeout=60)
    sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                 b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
    got = b""
    while got.count(b"data: ") < 2:
        got += sock.recv(4096)
    sock.close()  # hang up mid-stream
    assert wait_for(lambda: snapshot()["active"] == 0, timeout=30)
    after = snapshot()
    assert after["cancelled"] == before["cancelled"] + 1 and after["failed"] == before["failed"]
    status, _, ok = complete(gemma, "Hello", max_tokens=2)  # the slot serves again
    assert status == 200 and ok["usage"]["completion_tokens"] >= 1


def test_metrics_count_what_happened(gemma):
    status, headers, raw = gemma.get("/metrics")
    text = raw.decode()
    assert status == 200 and headers["content-type"].startswith("text/plain; version=0.0.4")
    admitted = float(next(l.split()[1] for l in text.splitlines() if l.startswith("colibri_scheduler_admitted_total")))
    assert admitted >= 1
    assert "colibri_scheduler_capacity 2.0" in text
    assert 'colibri_scheduler_first_output_seconds_count' in text


def test_openai_sdk(gemma):
    openai = pytest.importorskip("openai")
    client = openai.OpenAI(base_url=gemma.base + "/v1", api_key="local", max_retries=0)
    assert [m.id for m in client.models.list()] == [GEMMA_ID]
    r = client.chat.completions.create(model=GEMMA_ID, messages=QUESTION, temperature=0, max_tokens=8)
    assert r.choices[0].message.role == "assistant" and r.choices[0].message.content
    assert r.usage.completion_tokens <= 8
    parts = []
    usage = None
    for chunk in client.chat.completions.create(model=GEMMA_ID, messages=QUESTION, temperature=0, max_tokens=8,
                                                stream=True, stream_options={"include_usage": True}):
        if chunk.choices and chunk.choices[0].delta.content:
            parts.append(chunk.choices[0].delta.content)
        usage = chunk.usage or usage
    assert "".join(parts) == r.choices[0].message.content and usage.completion_tokens == r.usage.completion_tokens
    c = client.completions.create(model=GEMMA_ID, prompt="The capital of France is", max_tokens=4, temperature=0)
    assert c.choices[0].text and c.object == "text_completion"
    with pytest.raises(openai.NotFoundError) as err:
        client.chat.completions.create(model="gpt-4o", messages=QUESTION)
    assert err.value.code == "model_not_found"
    with pytest.raises(openai.BadRequestError) as err:
        client.chat.completions.create(model=GEMMA_ID, messages=QUESTION, n=2)
    assert err.value.code == "unsupported_value" and err.value.param == "n"


# ---- servers of their own -------------------------------------------------------------

def test_queue_full_and_sigterm_drains(default_model):
    with ServerProcess(["--model", str(default_model), "--model-id", "g", "--kv-slots", "1", "--max-queue", "0",
                        "--ctx", "256", "--api-key", "k"]) as srv:
        auth = {"Authorization": "Bearer k"}
        assert srv.post("/v1/completions", {"model": "g", "prompt": "x"})[0] == 401
        result: dict = {}

        def long_request() -> None:
            result["r"] = srv.post("/v1/completions", {"model": "g", "prompt": "Tell me a story.", "max_tokens": 48,
                                                       "temperature": 0}, auth)

        t = threading.Thread(target=long_request)
        t.start()
        assert wait_for(lambda: json.loads(srv.get("/health", auth)[2])["scheduler"]["active"] == 1, timeout=30)
        status, headers, body = srv.post("/v1/chat/completions",
                                         {"model": "g", "messages": QUESTION, "stream": True}, auth)
        assert status == 429 and headers["retry-after"] == "1" and headers["content-type"].startswith("application/json")
        assert body["error"]["code"] == "queue_full"
        srv.proc.send_signal(signal.SIGTERM)  # drain: the admitted request still completes
        t.join(120)
        status, _, body = result["r"]
        assert status == 200 and body["usage"]["completion_tokens"] >= 1
        assert srv.proc.wait(60) == 0


def test_tiny_moe_with_its_own_chat_template():
    from tests.fixtures.moe_models import tiny

    path = tiny("qwen3moe")
    with ServerProcess(["--model", str(path), "--ctx", "128", "--max-tokens", "8"]) as srv:
        assert srv.model_id == path.stem
        status, _, body = chat(srv, [{"role": "system", "content": "s"}, {"role": "user", "content": "hello"}])
        assert status == 200, body
        assert body["usage"]["prompt_tokens"] > 5 and body["usage"]["completion_tokens"] <= 8
        text, chunks = stream_text(srv, "/v1/chat/completions",
                                   {"model": srv.model_id, "messages": QUESTION, "temperature": 0, "stream": True})
        assert chunks[-1]["choices"][0]["finish_reason"] in ("stop", "length")
        health = json.loads(srv.get("/health")[2])
        assert health["arch"] == "qwen3moe"

