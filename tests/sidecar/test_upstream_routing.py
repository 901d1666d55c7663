"""`coli serve --upstream`'s leftovers of issue #24: the scheduler's per-request slot restriction (routing by
model, the retry's slot elsewhere), vLLM's prompt_logprobs read for System One, the named 501 when an
upstream gives System One no prompt log-probs at all, the model a reply names behind an alias in all three
APIs, and a request retried elsewhere counted once."""
from __future__ import annotations

import asyncio
import json
import threading

from aiohttp import web

from colibri.serving.scheduler import Scheduler
from colibri.serving.upstream import split_alias
from colibri.serving.upstream_logprobs import echoed_logprobs, prompt_logprobs
from tests.sidecar.serve_support import ServerProcess
from tests.sidecar.upstream_support import FakeUpstream, free_port, get, post


def test_upstream_alias_syntax():
    assert split_alias("http://gpu-a:8000#qwen") == ("http://gpu-a:8000", "qwen")
    assert split_alias("http://gpu-a:8000/v1") == ("http://gpu-a:8000/v1", None)


def test_a_restricted_waiter_holds_back_only_its_own_slots():
    """Slots 0-1 serve model A, 2-3 model B: a waiter for A that cannot start does not block one for B."""
    async def main():
        s = Scheduler(4, max_queue=4, queue_timeout=5)
        a, b = frozenset({0, 1}), frozenset({2, 3})
        held = [await s.acquire(None, [], a), await s.acquire(None, [], a)]
        assert {h.slot for h in held} == a
        waiting = asyncio.ensure_future(s.acquire(None, [], a))
        await asyncio.sleep(0.05)
        other = await asyncio.wait_for(s.acquire(None, [], b), 1)  # younger, other model: not blocked
        assert other.slot in b and not waiting.done()
        s.release(held[0], "completed")
        assert (await asyncio.wait_for(waiting, 1)).slot == held[0].slot
    asyncio.run(main())


# The shape of a vLLM /v1/completions reply with `prompt_logprobs: 0` (vllm.entrypoints.openai.protocol:
# CompletionResponseChoice.prompt_logprobs, a list of None | {token_id: Logprob(logprob, rank, decoded_token)},
# the first entry None). Built from vLLM's documented types, not captured from a running vLLM (none runs here).
VLLM_REPLY = {
    "id": "cmpl-5f0c", "object": "text_completion", "created": 1764700000, "model": "Qwen/Qwen2.5-0.5B-Instruct",
    "choices": [{"index": 0, "text": ".", "logprobs": None, "finish_reason": "length", "stop_reason": None,
                 "prompt_logprobs": [None,
                                     {"12095": {"logprob": -7.25, "rank": 311, "decoded_token": " sky"}},
                                     {"374": {"logprob": -0.5, "rank": 1, "decoded_token": " is"}},
                                     {"6303": {"logprob": -1.75, "rank": 2, "decoded_token": " blue"},
                                      "2518": {"logprob": -1.5, "rank": 1, "decoded_token": " red"}}]}],
    "usage": {"prompt_tokens": 4, "total_tokens": 5, "completion_tokens": 1}}


def test_vllm_prompt_logprobs_are_read_with_offsets():
    rows = prompt_logprobs(VLLM_REPLY, "The sky is blue")
    assert rows == [(0, None), (3, -7.25), (7, -0.5), (10, -1.75)]  # the prompt's own token, not the top one
    question = "The sky is"
    assert [v for off, v in rows if off >= len(question)] == [-1.75]
    assert prompt_logprobs(VLLM_REPLY, "The sea is green") is None  # not this prompt's tokens
    assert prompt_logprobs({"choices": [{"text": "x", "logprobs": None}]}, "x") is None
    assert echoed_logprobs(VLLM_REPLY, "The sky is blue") is None


class Refuser:
    """A real HTTP upstream speaking OpenAI's API that refuses echo and prompt_logprobs with a 400, as hosted
    APIs do. ONLY for the refusal path: no engine here refuses echo (llama.cpp's, colibri's take it)."""

    def __init__(self):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.seen: list[dict] = []
        self.loop = asyncio.new_event_loop()
        self.ready = threading.Event()
        threading.Thread(target=self.loop.run_forever, daemon=True).start()
        asyncio.run_coroutine_threadsafe(self.start(), self.loop).result(10)

    async def start(self):
        app = web.Application()
        async def models(_):
            return web.json_response({"object": "list", "data": [{"id": "refuser"}]})

        app.router.add_get("/v1/models", models)
        app.router.add_post("/v1/completions", self.completions)
        self.runner = web.AppRunner(app)
        await self.runner.setup()
        await web.TCPSite(self.runner, "127.0.0.1", self.port).start()

    async def completions(self, request):
        body = await request.json()
        self.seen.append(body)
        bad = "echo" if body.get("echo") else "prompt_logprobs" if "prompt_logprobs" in body else None
        if bad:
            return web.json_response({"error": {"message": f"'{bad}' is not supported", "type": "invalid_request_error",
                                                "code": "unsupported_parameter"}}, status=400)
        return web.json_response({"choices": [{"text": "ok", "finish_reason": "stop"}]})

    def close(self):
        asyncio.run_coroutine_threadsafe(self.runner.cleanup(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)


def test_system_one_against_an_upstream_without_prompt_logprobs_is_501():
    refuser = Refuser()
    try:
        with ServerProcess(["--upstream", refuser.url]) as gw:
            body = {"state": "The sky is blue.", "questions": {"q": {"type": "choice", "text": "What colour?",
                                                                     "criteria": {"blue": None, "red": None}}}}
            status, _, raw = post(gw.base, "/v1/systemone", body)
            err = json.loads(raw)["error"]
            assert status == 501 and err["code"] == "upstream_cannot_score", raw
            assert "echo" in err["message"] and "prompt_logprobs" in err["message"]
            assert [("echo" in b, "prompt_logprobs" in b) for b in refuser.seen] == [(True, False), (False, True)]
    finally:
        refuser.close()


def test_an_uncounted_slot_counts_nothing():
    """The retry's second slot (acquire counted=False, release None): the request is counted by its own admission."""
    async def main():
        s = Scheduler(2, max_queue=4, queue_timeout=5)
        async with s.admit(None, [], frozenset({0})):
            extra = await s.acquire(None, [], frozenset({1}), counted=False)
            assert s.snapshot()["active"] == 2
            s.release(extra, None)
        snap = s.snapshot()
        assert (snap["active"], snap["admitted"], snap["completed"], snap["failed"]) == (0, 1, 1, 0)
    asyncio.run(main())


def test_replies_name_the_model_asked_for_and_a_retry_counts_once():
    """Behind URL#ALIAS, Anthropic's and the Responses API's replies (JSON and streamed) name the alias the request
    named, as OpenAI chat's do, not the gateway's default model; a request that failed before its first byte
    and was retried on the other upstream (a 503: that one cannot serve now) is one admitted, one completed
    request."""
    from tests.sidecar.serve_support import named_events

    # stand-in upstreams ONLY for what a real engine will not do on demand: refuse to serve now (a 503),
    # before its first byte, while its health probe says it is up; `plan` is shared: the next request fails
    plan: list[str] = []
    ups = [FakeUpstream(name, plan).start() for name in ("engine-one", "engine-two", "engine-three")]
    try:
        with ServerProcess(["--upstream", ups[0].url + "#alpha", "--upstream", ups[1].url + "#alpha",
                            "--upstream", ups[2].url + "#beta", "--upstream-slots", "1"],
                           env={"COLI_UPSTREAM_PROBE_S": "60"}) as gw:
            hello = [{"role": "user", "content": "hello"}]
            anthropic = {"anthropic-version": "2023-06-01"}
            for name in ("alpha", "beta"):
                status, _, raw = post(gw.base, "/v1/messages", {"model": name, "max_tokens": 8, "messages": hello},
                                      anthropic)
                assert status == 200 and json.loads(raw)["model"] == name, raw
                status, _, raw = post(gw.base, "/v1/messages", {"model": name, "max_tokens": 8, "messages": hello,
                                                                "stream": True}, anthropic)
                start = [p for n, p in named_events(raw.decode()) if n == "message_start"]
                assert status == 200 and start[0]["message"]["model"] == name, raw
                status, _, raw = post(gw.base, "/v1/responses", {"model": name, "input": "hello"})
                assert status == 200 and json.loads(raw)["model"] == name, raw
                status, _, raw = post(gw.base, "/v1/responses", {"model": name, "input": "hello", "stream": True})
                models = {p["response"]["model"] for _, p in named_events(raw.decode()) if "response" in p}
                assert status == 200 and models == {name}, raw
                status, _, raw = post(gw.base, "/v1/chat/completions", {"model": name, "messages": hello})
                assert status == 200 and json.loads(raw)["model"] == name, raw
            before = json.loads(get(gw.base, "/health")[1])["scheduler"]
            plan.append("503")
            status, _, raw = post(gw.base, "/v1/chat/completions", {"model": "alpha", "messages": hello})
            assert status == 200 and json.loads(raw)["choices"][0]["message"]["content"] == "Hi there", raw
            assert not plan  # the 503 was answered: the reply came from the retry
            after = json.loads(get(gw.base, "/health")[1])["scheduler"]
            counts = {k: after[k] - before[k] for k in ("admitted", "completed", "failed", "rejected", "timed_out")}
            assert counts == {"admitted": 1, "completed": 1, "failed": 0, "rejected": 0, "timed_out": 0}, after
            assert after["active"] == 0
    finally:
        for up in ups:
            up.__exit__()
