"""The Anthropic Messages API on the real engine (the default model), through the official
`anthropic` SDK and on the raw stream: replies equal the chat route's, the named-event order,
ping keep-alives, usage names (cache reads apart), the error envelope, refusals by name,
hosted fields accepted and ignored, tools and tool results, count_tokens, continuation; what Claude
Code sends (system-role messages, thinking.display), stop_sequences and top_k honoured."""
from __future__ import annotations

import json
from dataclasses import replace

import pytest

from colibri.serve_config import ServeConfig
from tests.sidecar.family_templates import QWEN3, with_chat_template
from tests.sidecar.serve_support import (AppThread, close_served, named_events, open_served, run_app,
                                         stream_until_the_engine_closes)

anthropic = pytest.importorskip("anthropic")

MODEL = "gemma-3-270m"
CFG = ServeConfig(model_id=MODEL, kv_slots=2, ctx=512, threads=2, kv_persist=False)
HELLO = [{"role": "user", "content": "Hello!"}]
GREEDY = {"temperature": 0}  # this SDK has no temperature argument: sent as an extra body field
from tests.fixtures.vendor.extract import load as vendor_schemas
from tests.fixtures.vendor.validate import problems


@pytest.fixture(scope="module")
def served(default_model):
    s = open_served(CFG, default_model)
    yield s
    close_served(s)


@pytest.fixture(scope="module")
def client(served):
    with AppThread(CFG, served) as base:
        yield anthropic.Anthropic(base_url=base, api_key="local", max_retries=0)


def raw(served, payload, cfg=CFG, path="/v1/messages", headers=None):
    async def body(c, served):
        r = await c.post(path, json=payload, headers=headers or {})
        return r.status, dict(r.headers), await r.text()

    return run_app(served, body, cfg)


def test_sdk_reply_equals_the_chat_route(client, served):
    m = client.messages.create(model=MODEL, max_tokens=12, messages=HELLO, extra_body=GREEDY)
    assert m.type == "message" and m.role == "assistant" and m.id.startswith("msg_")
    assert m.stop_reason in ("end_turn", "max_tokens") and m.stop_sequence is None
    assert [b.type for b in m.content] == ["text"]

    async def chat(c, served):
        r = await c.post("/v1/chat/completions", json={"model": MODEL, "messages": HELLO, "temperature": 0,
                                                       "max_tokens": 12})
        return await r.json()

    openai_reply = run_app(served, chat, CFG)
    assert m.content[0].text == openai_reply["choices"][0]["message"]["content"]
    u = m.usage
    assert u.input_tokens + u.cache_read_input_tokens == openai_reply["usage"]["prompt_tokens"]
    assert u.output_tokens == openai_reply["usage"]["completion_tokens"] and u.cache_creation_input_tokens == 0


def test_reply_fits_the_vendor_schema(served):
    status, _, text = raw(served, {"model": MODEL, "max_tokens": 4, "messages": HELLO})
    reply = json.loads(text)
    schemas = vendor_schemas()["anthropic"]
    assert set(schemas["Message"]["required"]) <= set(reply)
    assert set(schemas["Usage"]["required"]) <= set(reply["usage"])
    assert problems("Message", reply) == []  # the whole schema: citations on text blocks, server_tool_use
    assert reply["content"][0]["citations"] is None and reply["usage"]["server_tool_use"] is None


def test_every_streamed_event_fits_the_vendor_schema(served):
    status, _, text = raw(served, {"model": MODEL, "max_tokens": 4, "messages": HELLO, "stream": True})
    events = named_events(text)
    assert status == 200 and [n for n, _ in events][-2:] == ["message_delta", "message_stop"]
    for name, payload in events:
        if name != "ping":
            assert problems("MessageStreamEvent", payload) == [], (name, payload)
    assert dict(events)["message_delta"]["usage"]["server_tool_use"] is None


def test_models_in_anthropics_shape_for_anthropics_clients(served, client):
    async def body(c, served):
        out = {}
        for path in ("/v1/models", f"/v1/models/{MODEL}", "/v1/models/claude-sonnet-4"):
            r = await c.get(path, headers={"anthropic-version": "2023-06-01"})
            out[path] = (r.status, await r.json())
        r = await c.get("/v1/models")
        out["openai"] = (r.status, await r.json())
        return out

    out = run_app(served, body, CFG)
    status, listing = out["/v1/models"]
    assert status == 200 and problems("ListResponse_ModelInfo_", listing) == []
    assert listing["has_more"] is False and listing["first_id"] == listing["last_id"] == MODEL
    status, one = out[f"/v1/models/{MODEL}"]
    assert status == 200 and problems("ModelInfo", one) == [] and one == listing["data"][0]
    assert one["type"] == "model" and one["display_name"] == MODEL and one["created_at"].endswith("Z")
    status, missing = out["/v1/models/claude-sonnet-4"]
    assert status == 404 and missing["type"] == "error" and missing["error"]["type"] == "not_found_error"
    assert out["openai"][1]["object"] == "list" and "has_more" not in out["openai"][1]  # OpenAI's stays OpenAI's
    page = client.models.list()  # the official SDK reads it
    assert [m.id for m in page.data] == [MODEL] and page.data[0].display_name == MODEL
    assert client.models.retrieve(MODEL).created_at.year >= 2024


def test_sdk_stream_and_the_raw_event_order(client, served):
    with client.messages.stream(model=MODEL, max_tokens=12, messages=HELLO, extra_body=GREEDY) as s:
        streamed = "".join(s.text_stream)
        final = s.get_final_message()
    whole = client.messages.create(model=MODEL, max_tokens=12, messages=HELLO, extra_body=GREEDY)
    assert streamed == whole.content[0].text == final.content[0].text
    assert final.usage.output_tokens == whole.usage.output_tokens
    status, headers, text = raw(served, {"model": MODEL, "max_tokens": 6, "messages": HELLO, "stream": True,
                                         "temperature": 0}, cfg=replace(CFG, keepalive_s=0.002))
    assert status == 200 and headers["Content-Type"].startswith("text/event-stream")
    names = [n for n, _ in named_events(text) if n != "ping"]
    assert names == ["message_start", "content_block_start"] + ["content_block_delta"] * (len(names) - 5) + [
        "content_block_stop", "message_delta", "message_stop"]
    assert "ping" in [n for n, _ in named_events(text)]  # keep-alives while the engine is quiet
    evs = dict(named_events(text))
    assert evs["message_start"]["message"]["content"] == [] and evs["message_start"]["message"]["stop_reason"] is None
    assert evs["content_block_start"] == {"type": "content_block_start", "index": 0,
                                          "content_block": {"type": "text", "text": "", "citations": None}}
    assert evs["message_delta"]["delta"]["stop_reason"] == "max_tokens"
    assert evs["message_delta"]["usage"]["output_tokens"] == 6
    assert "[DONE]" not in text


def test_hosted_fields_and_beta_query_are_accepted(served):
    payload = {"model": MODEL, "max_tokens": 2, "messages": [
        {"role": "user", "content": [{"type": "text", "text": "Hello!", "cache_control": {"type": "ephemeral"}}]}],
        "system": [{"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}],
        "metadata": {"user_id": "u"}, "service_tier": "auto", "thinking": {"type": "enabled", "budget_tokens": 1024}}
    status, headers, text = raw(served, payload, path="/v1/messages?beta=true",
                                headers={"anthropic-beta": "prompt-caching-2024-07-31", "anthropic-version": "2023-06-01"})
    reply = json.loads(text)
    assert status == 200, reply
    assert [b["type"] for b in reply["content"]] == ["text"]  # Gemma has no reasoning mode: no thinking block
    assert headers["request-id"].startswith("req_")


@pytest.mark.parametrize("change, status, kind, words", [
    ({"stop_sequences": [""]}, 400, "invalid_request_error", "stop_sequences.0"),
    ({"top_k": -1}, 400, "invalid_request_error", "top_k"),
    ({"output_config": {"format": {"type": "json_schema"}}}, 400, "invalid_request_error", "output_config.format"),
    ({"messages": [{"role": "developer", "content": "x"}]}, 400, "invalid_request_error", "messages.0.role"),
    ({"max_tokens": None}, 400, "invalid_request_error", "max_tokens"),
    ({"temperature": 1.5}, 400, "invalid_request_error", "temperature"),
    ({"messages": [{"role": "user", "content": [{"type": "image", "source": {}}]}]}, 400, "invalid_request_error",
     "image"),
    ({"tools": [{"type": "web_search_20250305", "name": "web_search"}]}, 400, "invalid_request_error", "server tools"),
    ({"tools": [{"name": "f", "input_schema": {"type": "object"}}]}, 400, "invalid_request_error", "tool-call format"),
    ({"model": "claude-sonnet-4-5"}, 404, "not_found_error", "claude-sonnet-4-5"),
    ({"surprise": 1}, 400, "invalid_request_error", "surprise"),
])
def test_errors_use_anthropics_envelope(served, change, status, kind, words):
    payload = {"model": MODEL, "max_tokens": 2, "messages": HELLO, **change}
    got, _, text = raw(served, {k: v for k, v in payload.items() if v is not None})
    err = json.loads(text)
    assert got == status and err["type"] == "error" and err["error"]["type"] == kind
    assert words in err["error"]["message"] and err["request_id"].startswith("req_")


def test_sdk_errors_and_api_key(served):
    with AppThread(replace(CFG, api_key="k"), served) as base:
        with pytest.raises(anthropic.AuthenticationError):
            anthropic.Anthropic(base_url=base, api_key="wrong", max_retries=0).messages.create(
                model=MODEL, max_tokens=2, messages=HELLO)
        good = anthropic.Anthropic(base_url=base, api_key="k", max_retries=0)  # sent as x-api-key
        assert good.messages.create(model=MODEL, max_tokens=2, messages=HELLO).content
        with pytest.raises(anthropic.BadRequestError) as err:
            good.messages.create(model=MODEL, max_tokens=2, messages=HELLO, extra_body={"top_k": -1})
        assert err.value.body["error"]["type"] == "invalid_request_error"
        with pytest.raises(anthropic.NotFoundError):
            good.messages.create(model="claude-3-haiku", max_tokens=2, messages=HELLO)


def test_count_tokens_and_continuation(client, served):
    counted = client.messages.count_tokens(model=MODEL, messages=HELLO, system="Be brief.")
    m = client.messages.create(model=MODEL, max_tokens=2, messages=HELLO, system="Be brief.")
    assert counted.input_tokens == m.usage.input_tokens + m.usage.cache_read_input_tokens
    convo = [{"role": "user", "content": "Count from one to ten."}, {"role": "assistant", "content": "one, two,"}]
    cont = client.messages.create(model=MODEL, max_tokens=6, messages=convo, extra_body=GREEDY)

    async def chat(c, served):
        r = await c.post("/v1/chat/completions", json={"model": MODEL, "messages": convo, "temperature": 0,
                                                       "max_tokens": 6})
        return await r.json()

    assert cont.content[0].text == run_app(served, chat, CFG)["choices"][0]["message"]["content"]  # continued


def test_system_role_messages_are_the_system_prompt(client):
    """Claude Code sends a system-role message after the first user turn: it joins the system
    prompt, in order, exactly as if it had been sent there."""
    inline = client.messages.create(model=MODEL, max_tokens=8, extra_body=GREEDY, system="Be brief.", messages=[
        *HELLO, {"role": "system", "content": [{"type": "text", "text": "Answer in French."}]}])
    folded = client.messages.create(model=MODEL, max_tokens=8, extra_body=GREEDY,
                                    system="Be brief.\n\nAnswer in French.", messages=HELLO)
    assert inline.content[0].text == folded.content[0].text
    assert inline.usage.input_tokens + inline.usage.cache_read_input_tokens == \
        folded.usage.input_tokens + folded.usage.cache_read_input_tokens


def test_stop_sequences_end_the_reply_and_are_named(client, served):
    whole = client.messages.create(model=MODEL, max_tokens=24, messages=HELLO, extra_body=GREEDY).content[0].text
    stop = whole[len(whole) // 2:len(whole) // 2 + 3]
    assert stop.strip() and len(whole) > 8, whole
    cut = whole[:whole.find(stop)]
    m = client.messages.create(model=MODEL, max_tokens=24, messages=HELLO, extra_body=GREEDY,
                               stop_sequences=["never said", stop])
    assert (m.content[0].text, m.stop_reason, m.stop_sequence) == (cut, "stop_sequence", stop)
    status, _, text = raw(served, {"model": MODEL, "max_tokens": 24, "messages": HELLO, "temperature": 0,
                                   "stream": True, "stop_sequences": [stop]})
    evs = named_events(text)
    assert "".join(p["delta"]["text"] for n, p in evs if n == "content_block_delta") == cut
    assert [p["delta"] for n, p in evs if n == "message_delta"] == [{"stop_reason": "stop_sequence",
                                                                   "stop_sequence": stop}]
    free = client.messages.create(model=MODEL, max_tokens=4, messages=HELLO, extra_body=GREEDY,
                                  stop_sequences=["never said"])
    assert free.stop_reason == "max_tokens" and free.stop_sequence is None

    async def chat(c, served):  # the chat route's `stop` cuts in the same place
        r = await c.post("/v1/chat/completions", json={"model": MODEL, "messages": HELLO, "temperature": 0,
                                                       "max_tokens": 24, "stop": [stop]})
        return await r.json()

    assert run_app(served, chat, CFG)["choices"][0]["message"]["content"] == cut


def test_top_k_1_is_greedy_on_every_route(client, served):
    greedy = client.messages.create(model=MODEL, max_tokens=12, messages=HELLO, extra_body=GREEDY).content[0].text
    hot = client.messages.create(model=MODEL, max_tokens=12, messages=HELLO,
                                 extra_body={"temperature": 1.0, "top_k": 1})  # not arguments of this SDK
    assert hot.content[0].text == greedy

    async def openai(c, served):
        out = []
        for path, field, extra in (("/v1/chat/completions", "messages", HELLO), ("/v1/completions", "prompt", "Once")):
            replies = []
            for sampling in ({"temperature": 0}, {"temperature": 2.0, "top_k": 1, "seed": 3}):
                r = await c.post(path, json={"model": MODEL, field: extra, "max_tokens": 12, **sampling})
                assert r.status == 200, await r.text()
                choice = (await r.json())["choices"][0]
                replies.append(choice["message"]["content"] if "message" in choice else choice["text"])
            out.append(replies)
        return out

    for greedy_reply, top_k_reply in run_app(served, openai, CFG):
        assert top_k_reply == greedy_reply


# ---- tools, on the real engine repeating a call in Qwen3's syntax ---------------------------------

WEATHER = {"name": "get_weather", "description": "The weather in a city",
           "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}
SAID = 'Repeat exactly: <tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'


@pytest.fixture(scope="module")
def tooled(default_model):
    cfg = replace(CFG, model_id="tooled", kv_slots=1)
    s = open_served(cfg, with_chat_template(default_model, QWEN3, "qwen3-template"))
    with AppThread(cfg, s) as base:
        yield anthropic.Anthropic(base_url=base, api_key="local", max_retries=0), s, cfg
    close_served(s)


def test_tool_use_round_trip(tooled):
    client, _, _ = tooled
    m = client.messages.create(model="tooled", max_tokens=40, extra_body=GREEDY, tools=[WEATHER],
                               messages=[{"role": "user", "content": SAID}])
    assert m.stop_reason == "tool_use" and [b.type for b in m.content] == ["text", "tool_use"]
    use = m.content[1]
    assert use.id.startswith("toolu_") and use.name == "get_weather" and use.input == {"city": "Paris"}
    follow = client.messages.create(model="tooled", max_tokens=4, extra_body=GREEDY, tools=[WEATHER], messages=[
        {"role": "user", "content": SAID}, {"role": "assistant", "content": [b.model_dump() for b in m.content]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use.id, "content": "sunny"}]}])
    assert follow.usage.input_tokens + follow.usage.cache_read_input_tokens > m.usage.input_tokens
    forced = client.messages.create(model="tooled", max_tokens=40, extra_body=GREEDY, tools=[WEATHER],
                                    tool_choice={"type": "tool", "name": "get_weather"},
                                    messages=[{"role": "user", "content": SAID}])
    assert forced.usage.input_tokens + forced.usage.cache_read_input_tokens > \
        m.usage.input_tokens + m.usage.cache_read_input_tokens  # the instruction line was rendered


def test_tool_use_stream(tooled):
    client, served, cfg = tooled
    with client.messages.stream(model="tooled", max_tokens=40, extra_body=GREEDY, tools=[WEATHER],
                                messages=[{"role": "user", "content": SAID}]) as s:
        final = s.get_final_message()
    assert final.stop_reason == "tool_use" and final.content[-1].input == {"city": "Paris"}
    status, _, text = raw(served, {"model": "tooled", "max_tokens": 40, "temperature": 0, "stream": True,
                                   "tools": [WEATHER], "messages": [{"role": "user", "content": SAID}]}, cfg=cfg)
    evs = named_events(text)
    starts = [p["content_block"]["type"] for n, p in evs if n == "content_block_start"]
    assert starts == ["text", "tool_use"]
    json_deltas = [p["delta"] for n, p in evs if n == "content_block_delta" and p["index"] == 1]
    assert json_deltas == [{"type": "input_json_delta", "partial_json": '{"city": "Paris"}'}]
    assert evs[-2][1]["delta"]["stop_reason"] == "tool_use" and evs[-1][0] == "message_stop"


# ---- thinking, on the same engine repeating a reasoning block (the Qwen3 template knows <think>) ----

THINK = "<think>I ponder.</think>Done."


def test_thinking_blocks(tooled):
    client, served, cfg = tooled
    m = client.messages.create(model="tooled", max_tokens=16, extra_body=GREEDY,
                               thinking={"type": "enabled", "budget_tokens": 1024},
                               messages=[{"role": "user", "content": THINK}])
    assert [b.type for b in m.content] == ["thinking", "text"]
    assert m.content[0].thinking == "I ponder." and m.content[0].signature == "colibri-local"
    assert m.content[1].text.startswith("Done.")
    status, _, text = raw(served, {"model": "tooled", "max_tokens": 16, "temperature": 0, "stream": True,
                                   "thinking": {"type": "enabled", "budget_tokens": 1024},
                                   "messages": [{"role": "user", "content": THINK}]}, cfg=cfg)
    evs = named_events(text)
    blocks = [(p["index"], p["content_block"]["type"]) for n, p in evs if n == "content_block_start"]
    assert blocks == [(0, "thinking"), (1, "text")]
    first = [p["delta"] for n, p in evs if n == "content_block_delta" and p["index"] == 0]
    assert "".join(d.get("thinking", "") for d in first) == "I ponder."
    assert first[-1] == {"type": "signature_delta", "signature": "colibri-local"}  # closes the thinking block
    stops = [i for i, (n, p) in enumerate(evs) if n == "content_block_stop"]
    assert [evs[i][1]["index"] for i in stops] == [0, 1]
    # a follow-up turn sends the thinking back; it reaches the template as the turn's reasoning
    again = client.messages.create(model="tooled", max_tokens=2, extra_body=GREEDY, messages=[
        {"role": "user", "content": THINK}, {"role": "assistant", "content": [b.model_dump() for b in m.content]},
        {"role": "user", "content": "Again."}])
    assert again.usage.input_tokens + again.usage.cache_read_input_tokens > m.usage.input_tokens


def test_thinking_display_omitted(tooled):
    """Claude Code asks for thinking.display "omitted": the thinking block comes back empty,
    with its signature, and the stream sends no thinking_delta."""
    _, served, cfg = tooled
    ask = {"model": "tooled", "max_tokens": 16, "temperature": 0,
           "thinking": {"type": "adaptive", "display": "omitted"}, "messages": [{"role": "user", "content": THINK}]}
    status, _, text = raw(served, ask, cfg=cfg)
    reply = json.loads(text)
    assert status == 200 and reply["content"][0] == {"type": "thinking", "thinking": "", "signature": "colibri-local"}
    assert reply["content"][1]["text"].startswith("Done.")
    status, _, text = raw(served, {**ask, "stream": True}, cfg=cfg)
    first = [p["delta"] for n, p in named_events(text) if n == "content_block_delta" and p["index"] == 0]
    assert first == [{"type": "signature_delta", "signature": "colibri-local"}]


def test_chat_reasoning_is_apart_from_content_and_its_logprobs(tooled):
    _, served, cfg = tooled

    async def body(c, served):
        r = await c.post("/v1/chat/completions", json={"model": "tooled", "max_tokens": 16, "temperature": 0,
                                                       "logprobs": True,
                                                       "messages": [{"role": "user", "content": THINK}]})
        return await r.json()

    reply = run_app(served, body, cfg)
    message = reply["choices"][0]["message"]
    assert message["reasoning_content"] == "I ponder." and message["content"].startswith("Done.")
    content = reply["choices"][0]["logprobs"]["content"]
    assert "".join(e["token"] for e in content) == message["content"]  # reasoning is not described


def test_a_failure_after_the_headers_is_an_error_event(default_model):
    status, text = stream_until_the_engine_closes(CFG, default_model, "/v1/messages", {
        "model": MODEL, "max_tokens": 200, "stream": True,
        "messages": [{"role": "user", "content": "Write a long story."}]}, b"content_block_delta")
    assert status == 200 and "event: message_start" in text
    assert "event: error" in text and '"type": "api_error"' in text and "message_stop" not in text
