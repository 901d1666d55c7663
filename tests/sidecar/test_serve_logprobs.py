"""Log-probabilities and echo, to the letter of docs/openai-api.md#logprobs, on the real engine (the
default model): the legacy object of /v1/completions (tokens, token_logprobs, top_logprobs,
text_offset) with and without echo, chat's logprobs.content, entries cut by a stop sequence
(text and bytes), the zero/null gates; and the alignment and engine-fault rules as pure
functions over crafted engine records."""
from __future__ import annotations

import asyncio
import math

import pytest

from colibri.api.errors import ApiError
from colibri.api.logprobs import TokenRecord, check_top, chat_logprobs, described_tokens, number, prompt_rows
from colibri.chat.spans import Spans
from colibri.serving.engine_thread import GenRequest, PromptPosition, TokenEvent
from colibri.serve_config import ServeConfig
from tests.sidecar.serve_support import close_served, open_served, run_app

MODEL = "gemma-3-270m"
CFG = ServeConfig(model_id=MODEL, kv_slots=1, ctx=256, threads=2, kv_persist=False)
COUNTING = "1, 2, 3, 4,"
NAME = "Hello, my name is"  # Gemma: " ", "<strong>", "K", "ait", "lyn", ... (multi-character tokens)


@pytest.fixture(scope="module")
def served(default_model):
    s = open_served(CFG, default_model)
    yield s
    close_served(s)


def post(served, path, payload):
    async def body(c, served):
        r = await c.post(path, json={"model": MODEL, "temperature": 0, **payload})
        return r.status, await r.json()

    return run_app(served, body, CFG)


def engine_tokens(served, prompt: str, n: int, k: int) -> list[TokenEvent]:
    async def main():
        req = GenRequest(slot=0, prompt=served.engine.tokenize(prompt, special=True), max_tokens=n, top_logprobs=k)
        return [ev async for ev in served.engine_thread.generate(req) if isinstance(ev, TokenEvent)]

    return asyncio.run(main())


def test_legacy_logprobs_describe_the_text(served):
    status, body = post(served, "/v1/completions", {"prompt": COUNTING, "max_tokens": 6, "logprobs": 2})
    assert status == 200, body
    choice = body["choices"][0]
    lp = choice["logprobs"]
    assert set(lp) == {"tokens", "token_logprobs", "top_logprobs", "text_offset"}
    assert "".join(lp["tokens"]) == choice["text"] and len(lp["tokens"]) == body["usage"]["completion_tokens"]
    assert lp["text_offset"] == [sum(len(t) for t in lp["tokens"][:i]) for i in range(len(lp["tokens"]))]
    truth = engine_tokens(served, COUNTING, 6, 2)
    assert lp["token_logprobs"] == [round(ev.logprob, 6) for ev in truth]
    for table, ev in zip(lp["top_logprobs"], truth):
        assert 1 <= len(table) <= 2
        assert max(table.values()) == round(ev.logprob, 6)  # greedy: the chosen token is the likeliest


def test_echo_returns_the_prompt_with_its_read_out(served):
    status, body = post(served, "/v1/completions", {"prompt": COUNTING, "max_tokens": 2, "logprobs": 1,
                                                    "echo": True})
    assert status == 200, body
    choice, usage = body["choices"][0], body["usage"]
    lp = choice["logprobs"]
    assert choice["text"].startswith(COUNTING) and "".join(lp["tokens"]) == choice["text"]
    assert len(lp["tokens"]) == usage["prompt_tokens"] + usage["completion_tokens"]
    assert lp["tokens"][0] == "" and lp["token_logprobs"][0] is None and lp["top_logprobs"][0] is None  # <bos>
    assert all(isinstance(x, float) and x <= 0 for x in lp["token_logprobs"][1:])
    assert lp["text_offset"][:3] == [0, 0, len(lp["tokens"][1])]
    assert usage["prompt_tokens_details"]["cached_tokens"] == 0  # an echo forfeits prefix reuse


def test_a_stop_inside_a_token_truncates_its_entry(served):
    pieces = [served.token_text(ev.token) for ev in engine_tokens(served, NAME, 8, 0)]
    i = next(i for i, p in enumerate(pieces) if len(p) >= 3 and i + 1 < len(pieces) and pieces[i + 1])
    stop = pieces[i][-2:] + pieces[i + 1][:1]  # begins inside token i
    assert "".join(pieces).find(stop) == len("".join(pieces[:i + 1])) - 2
    status, body = post(served, "/v1/completions", {"prompt": NAME, "max_tokens": 8, "logprobs": 1, "stop": stop})
    lp = body["choices"][0]["logprobs"]
    assert lp["tokens"][-1] == pieces[i][:-2] and "".join(lp["tokens"]) == body["choices"][0]["text"]
    status, chat = post(served, "/v1/chat/completions", {
        "messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": NAME}],
        "max_tokens": 8, "logprobs": True, "top_logprobs": 2})
    cpieces = [e["token"] for e in chat["choices"][0]["logprobs"]["content"]]
    j = next(j for j, p in enumerate(cpieces) if len(p) >= 3 and j + 1 < len(cpieces) and cpieces[j + 1])
    cstop = cpieces[j][-2:] + cpieces[j + 1][:1]
    status, cut = post(served, "/v1/chat/completions", {
        "messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": NAME}],
        "max_tokens": 8, "logprobs": True, "top_logprobs": 2, "stop": cstop})
    last = cut["choices"][0]["logprobs"]["content"][-1]
    assert last["token"] == cpieces[j][:-2] and last["bytes"] == list(cpieces[j][:-2].encode())
    own = [t for t in last["top_logprobs"] if t["logprob"] == last["logprob"]]
    assert own and own[0]["token"] == last["token"] and own[0]["bytes"] == last["bytes"]  # cut with it


def test_chat_logprobs_content_joins_to_the_message(served):
    status, body = post(served, "/v1/chat/completions", {"messages": [{"role": "user", "content": "Hello!"}],
                                                         "max_tokens": 6, "logprobs": True, "top_logprobs": 3})
    assert status == 200, body
    choice = body["choices"][0]
    content = choice["logprobs"]["content"]
    assert choice["logprobs"]["refusal"] is None
    assert "".join(e["token"] for e in content) == choice["message"]["content"]
    for e in content:
        assert set(e) == {"token", "logprob", "bytes", "top_logprobs"} and len(e["top_logprobs"]) == 3
        assert bytes(e["bytes"]).decode() == e["token"]
        assert all(set(t) == {"token", "logprob", "bytes"} for t in e["top_logprobs"])
    status, plain = post(served, "/v1/chat/completions", {"messages": [{"role": "user", "content": "Hello!"}],
                                                          "max_tokens": 6, "logprobs": True})
    assert all(e["top_logprobs"] == [] for e in plain["choices"][0]["logprobs"]["content"])
    assert plain["usage"]["prompt_tokens_details"]["cached_tokens"] > 0  # chat log-probs keep prefix reuse


@pytest.mark.parametrize("path, payload", [
    ("/v1/completions", {"prompt": COUNTING, "logprobs": 0}),
    ("/v1/completions", {"prompt": COUNTING, "logprobs": False}),
    ("/v1/completions", {"prompt": COUNTING, "logprobs": None, "echo": None}),
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": "Hi"}], "logprobs": False, "top_logprobs": 4}),
])
def test_zero_false_and_null_mean_no_logprobs(served, path, payload):
    status, body = post(served, path, {**payload, "max_tokens": 2})
    assert status == 200 and body["choices"][0]["logprobs"] is None


# ---- the alignment and fault rules, as pure functions over engine records ---------------------

def record(token, start, end, data, top=None):
    return TokenRecord(token, -0.5, top or [], data, start, end)


def test_a_partial_character_token_reports_empty_text_with_its_own_bytes():
    raw = "é!"  # token 1 carries b"\xc3", token 2 b"\xa9" completes "é", token 3 "!"
    recs = [record(1, 0, 0, b"\xc3"), record(2, 0, 1, b"\xa9"), record(3, 1, 2, b"!")]
    entries = described_tokens(recs, raw, Spans([(0, 2)]), 0, 10)
    assert [(e.text, e.data) for e in entries] == [("", b"\xc3"), ("é", b"\xa9"), ("!", b"!")]
    cut = described_tokens(recs, raw, Spans([(0, 1)]), 0, 10)  # a stop cut the "!"
    assert [e.text for e in cut] == ["", "é"]


def test_text_outside_the_reply_is_not_described():
    raw = "<think>hm</think>Yes"
    recs = [record(1, 0, 7, b"<think>"), record(2, 7, 9, b"hm"), record(3, 9, 17, b"</think>"),
            record(4, 17, 20, b"Yes"), record(5, 20, 20, b"")]  # 5: a turn marker, no text
    entries = described_tokens(recs, raw, Spans([(17, 20)]), 0, 10)
    assert [(e.token, e.text) for e in entries] == [(4, "Yes")]


def test_engine_faults_are_named():
    with pytest.raises(ApiError) as err:
        check_top([(1, -1.0), (1, -2.0)], 2, 10, "token 0")
    assert (err.value.status, err.value.code) == (500, "engine_duplicate_logprob_candidate")
    with pytest.raises(ApiError) as err:
        check_top([(1, -1.0)], 2, 10, "token 0")
    assert err.value.code == "engine_logprob_tail_malformed"
    with pytest.raises(ApiError) as err:
        described_tokens([record(1, 0, 1, b"a")], "ab", Spans([(0, 2)]), 0, 10)
    assert err.value.code == "engine_logprob_records_incomplete"
    with pytest.raises(ApiError) as err:
        prompt_rows(None, 3, 1, 10, ["", "a", "b"])
    assert err.value.code == "engine_logprob_records_incomplete"
    short = [PromptPosition(1, None, []), PromptPosition(2, -1.0, [(2, -1.0)])]
    with pytest.raises(ApiError) as err:
        prompt_rows(short, 3, 1, 10, ["", "a", "b"])
    assert err.value.code == "engine_echo_position_malformed"


def test_non_finite_values_are_null_and_tables_stay_unsorted():
    assert number(-math.inf) is None and number(math.nan) is None and number(-0.12345678) == -0.123457
    entries = described_tokens([record(7, 0, 1, b"a", top=[(3, -2.0), (7, -0.1), (5, -math.inf)])], "a",
                               Spans([(0, 1)]), 3, 10)
    out = chat_logprobs(entries, lambda t: f"<{t}>", lambda t: f"<{t}>".encode())
    assert [t["logprob"] for t in out["content"][0]["top_logprobs"]] == [-2.0, -0.1, None]  # engine order


def test_openai_sdk_reads_both_shapes(served):
    openai = pytest.importorskip("openai")
    from tests.sidecar.serve_support import AppThread

    with AppThread(CFG, served) as base:
        client = openai.OpenAI(base_url=base + "/v1", api_key="local", max_retries=0)
        c = client.completions.create(model=MODEL, prompt=COUNTING, max_tokens=3, temperature=0, logprobs=2, echo=True)
        assert "".join(c.choices[0].logprobs.tokens) == c.choices[0].text and c.choices[0].text.startswith(COUNTING)
        r = client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "Hello!"}], max_tokens=3,
                                           temperature=0, logprobs=True, top_logprobs=2)
        content = r.choices[0].logprobs.content
        assert "".join(t.token for t in content) == r.choices[0].message.content
        assert all(len(t.top_logprobs) == 2 for t in content)


def test_replies_carry_what_the_vendor_schema_requires(served):
    from tests.fixtures.vendor.extract import load

    schemas = load()["openai"]

    def required(name):
        return set(schemas[name]["required"])

    _, chat = post(served, "/v1/chat/completions", {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 2,
                                                    "logprobs": True, "top_logprobs": 1})
    assert required("CreateChatCompletionResponse") <= set(chat)
    choice = chat["choices"][0]
    assert set(schemas["CreateChatCompletionResponse"]["properties"]["choices"]["items"]["required"]) <= set(choice)
    assert required("ChatCompletionResponseMessage") <= set(choice["message"])
    assert required("CompletionUsage") <= set(chat["usage"])
    for entry in choice["logprobs"]["content"]:
        assert required("ChatCompletionTokenLogprob") <= set(entry)
    _, comp = post(served, "/v1/completions", {"prompt": COUNTING, "max_tokens": 2, "logprobs": 1})
    assert required("CreateCompletionResponse") <= set(comp)
    assert set(schemas["CreateCompletionResponse"]["properties"]["choices"]["items"]["required"]) <= set(
        comp["choices"][0])


def test_echo_with_a_stop_still_has_its_read_out(served):
    pieces = [served.token_text(ev.token) for ev in engine_tokens(served, NAME, 8, 0)]
    stop = pieces[3]  # the fourth token's text ends the reply; the engine's turn runs on to its read-out
    status, body = post(served, "/v1/completions", {"prompt": NAME, "max_tokens": 8, "logprobs": 1, "echo": True,
                                                    "stop": stop})
    assert status == 200, body
    choice, usage = body["choices"][0], body["usage"]
    want = "".join(pieces)[:"".join(pieces).index(stop)]
    assert choice["text"] == NAME + want and choice["finish_reason"] == "stop"
    assert "".join(choice["logprobs"]["tokens"]) == choice["text"]
    assert len(choice["logprobs"]["tokens"]) == usage["prompt_tokens"] + usage["completion_tokens"] - 1  # cut token
