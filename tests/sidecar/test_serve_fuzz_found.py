"""What the schema-driven fuzzing (tests/sidecar/test_fuzz_api.py) found, each kept as a
regression test, on the real engine (the default model, in process):

- a `top_k` past the engine's int (2**40) raised OverflowError in the engine thread, which
  died: that request and every later generation hung forever while /health said "ok";
- a `top_p` below the smallest single-precision float (1e-300) passed the (0, 1] check and
  reached the engine as 0: a 500 (`engine_error`)."""
from __future__ import annotations

import asyncio

import pytest

from colibri.api.fields import FLOAT32_TRUE_MIN, INT32_MAX, sampling, top_k_of
from colibri.engine import Engine
from colibri.serve_config import ServeConfig
from colibri.serving.engine_thread import EngineThread, Finish, GenRequest
from tests.sidecar.serve_support import close_served, open_served, run_app

MODEL = "gemma-3-270m"
CFG = ServeConfig(model_id=MODEL, kv_slots=2, ctx=256, threads=2, kv_persist=False)
HELLO = [{"role": "user", "content": "Hello"}]


@pytest.fixture(scope="module")
def served(default_model):
    s = open_served(CFG, default_model)
    yield s
    close_served(s)


def post_all(served, requests: list[tuple[str, dict]], timeout: float = 60) -> list[tuple[int, dict]]:
    async def body(c, served):
        out = []
        for path, payload in requests:
            r = await asyncio.wait_for(c.post(path, json=payload), timeout)
            out.append((r.status, await r.json()))
        return out

    return run_app(served, body, CFG)


def text_of(reply: dict) -> str:
    if "choices" in reply:
        c = reply["choices"][0]
        return c["message"]["content"] if "message" in c else c["text"]
    return "".join(b.get("text", "") for b in reply["content"])


def test_top_k_past_the_engines_int_is_off_and_the_server_goes_on(served):
    huge = 2**40
    replies = post_all(served, [
        ("/v1/chat/completions", {"model": MODEL, "messages": HELLO, "max_tokens": 3, "top_k": huge}),
        ("/v1/messages", {"model": MODEL, "messages": HELLO, "max_tokens": 3, "top_k": huge}),
        ("/v1/completions", {"model": MODEL, "prompt": "Hello", "max_tokens": 3, "top_k": float(huge)}),
        ("/v1/chat/completions", {"model": MODEL, "messages": HELLO, "max_tokens": 3}),  # answered after them
    ])
    assert [s for s, _ in replies] == [200, 200, 200, 200], replies
    assert top_k_of({"top_k": huge}) == INT32_MAX and top_k_of({}) == 0 and top_k_of({"top_k": -5}) == 0


def test_top_p_below_the_smallest_float_is_the_most_likely_token(served):
    greedy = {"temperature": 0}
    tiny = {"temperature": 1.0, "top_p": 1e-300}
    replies = post_all(served, [
        ("/v1/chat/completions", {"model": MODEL, "messages": HELLO, "max_tokens": 6, **greedy}),
        ("/v1/chat/completions", {"model": MODEL, "messages": HELLO, "max_tokens": 6, **tiny}),
        ("/v1/messages", {"model": MODEL, "messages": HELLO, "max_tokens": 6, **greedy}),
        ("/v1/messages", {"model": MODEL, "messages": HELLO, "max_tokens": 6, "temperature": 1.0, "top_p": 5e-324}),
    ])
    assert [s for s, _ in replies] == [200] * 4, replies
    assert text_of(replies[1][1]) == text_of(replies[0][1])  # only the most likely token survives top_p
    assert text_of(replies[3][1]) == text_of(replies[2][1])
    assert sampling({"top_p": 1e-300}, 0.7, 0.9, 2.0) == (0.7, FLOAT32_TRUE_MIN)
    assert sampling({}, 0.7, 0.9, 2.0) == (0.7, 0.9)


def test_engine_thread_fails_a_request_its_engine_cannot_take_and_serves_on(default_model):
    async def main():
        with Engine(default_model, n_slots=1, n_ctx=128, n_threads=2) as e:
            et = EngineThread(e)
            et.start()
            prompt = e.tokenize("Hello")
            with pytest.raises(OverflowError):
                async for _ in et.generate(GenRequest(slot=0, prompt=prompt, max_tokens=2, top_k=2**40)):
                    pass
            events = [ev async for ev in et.generate(GenRequest(slot=0, prompt=prompt, max_tokens=2))]
            await et.close()
            return events

    events = asyncio.run(asyncio.wait_for(main(), 60))
    assert isinstance(events[-1], Finish) and events[-1].n_generated == 2
