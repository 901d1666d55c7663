"""The OpenAI Responses API (POST /v1/responses) on the real engine (the default model), through
the official `openai` SDK and on the raw stream: replies and prompts equal the chat route's,
every reply object and every streamed event fits the vendor's schema, the event grammar
(items added before their deltas, done before the terminal event, sequence numbers from 0),
keep-alives, input items and instructions as the template renders them, previous_response_id
from the store, refusals by name, tools and tool results, reasoning, a failure after the
headers. The translation rules alone (no engine) are at the end."""
from __future__ import annotations

import json
from dataclasses import replace

import pytest

from colibri.api.responses import ResponseStore
from colibri.api.responses_protocol import conversation, encrypted, parse_responses
from colibri.serve_config import ServeConfig
from colibri.serving.requests import Limits
from tests.fixtures.vendor.validate import problems
from tests.sidecar.family_templates import QWEN3, with_chat_template
from tests.sidecar.responses_support import events, grammar
from tests.sidecar.serve_support import (AppThread, close_served, open_served, run_app,
                                         stream_until_the_engine_closes)

openai = pytest.importorskip("openai")

MODEL = "gemma-3-270m"
CFG = ServeConfig(model_id=MODEL, kv_slots=2, ctx=1024, threads=2, kv_persist=False)
HELLO = [{"role": "user", "content": "Hello!"}]


def recording(s):
    """Keep every chat prompt the served model renders (s.prompts)."""
    s.prompts = []
    tokenize = s.tokenize_chat

    def record(text, messages):
        s.prompts.append(text)
        return tokenize(text, messages)

    s.tokenize_chat = record
    return s


@pytest.fixture(scope="module")
def served(default_model):
    s = recording(open_served(CFG, default_model))
    yield s
    close_served(s)


@pytest.fixture(scope="module")
def client(served):
    with AppThread(CFG, served) as base:
        yield openai.OpenAI(base_url=base + "/v1", api_key="local", max_retries=0)


def post(served, payload, cfg=CFG, path="/v1/responses", method="post"):
    async def body(c, served):
        r = await getattr(c, method)(path, json=payload) if payload is not None else await getattr(c, method)(path)
        return r.status, dict(r.headers), await r.text()

    return run_app(served, body, cfg)


def reply_of(served, payload, cfg=CFG) -> dict:
    status, _, text = post(served, payload, cfg)
    reply = json.loads(text)
    assert status == 200, reply
    assert problems("Response", reply) == []
    return reply


def chat(served, payload, cfg=CFG) -> dict:
    status, _, text = post(served, payload, cfg, path="/v1/chat/completions")
    assert status == 200, text
    return json.loads(text)


# ---- text ---------------------------------------------------------------------------

def test_sdk_create_equals_the_chat_route(client, served):
    r = client.responses.create(model=MODEL, input="Hello!", max_output_tokens=12, temperature=0)
    assert r.object == "response" and r.id.startswith("resp_") and r.model == MODEL
    assert [o.type for o in r.output] == ["message"] and r.output[0].role == "assistant"
    reference = chat(served, {"model": MODEL, "messages": HELLO, "max_tokens": 12, "temperature": 0})
    choice = reference["choices"][0]
    assert r.output_text == choice["message"]["content"]
    assert (r.status, choice["finish_reason"]) in (("completed", "stop"), ("incomplete", "length"))
    if r.status == "incomplete":
        assert r.incomplete_details.reason == "max_output_tokens" and r.output[0].status == "incomplete"
    assert r.usage.input_tokens == reference["usage"]["prompt_tokens"]
    assert r.usage.output_tokens == reference["usage"]["completion_tokens"]
    assert r.usage.total_tokens == r.usage.input_tokens + r.usage.output_tokens
    assert r.usage.output_tokens_details.reasoning_tokens == 0  # Gemma has no reasoning mode
    assert r.usage.input_tokens_details.cached_tokens <= r.usage.input_tokens


def test_the_reply_fits_the_vendor_schema_and_echoes_the_request(served):
    reply = reply_of(served, {"model": MODEL, "input": "Hello!", "max_output_tokens": 3, "temperature": 0.5,
                              "top_p": 0.8, "instructions": "Be brief.", "metadata": {"k": "v"},
                              "parallel_tool_calls": False})
    assert reply["status"] == "incomplete" and reply["incomplete_details"] == {"reason": "max_output_tokens"}
    assert (reply["instructions"], reply["metadata"], reply["temperature"], reply["top_p"]) == (
        "Be brief.", {"k": "v"}, 0.5, 0.8)
    assert reply["max_output_tokens"] == 3 and reply["parallel_tool_calls"] is False and reply["store"] is True
    assert reply["tools"] == [] and reply["tool_choice"] == "none" and reply["error"] is None
    assert reply["usage"]["output_tokens"] == 3 and reply["completed_at"] >= reply["created_at"]
    message = reply["output"][0]
    assert message["id"].startswith("msg_") and message["content"][0]["annotations"] == []
    broken = {**reply, "output": [{**message, "status": "done"}]}  # the check can fail
    assert problems("Response", broken) == ["$.output.0.status: 'done' is not one of "
                                            "['in_progress', 'completed', 'incomplete']"]


def test_sdk_stream_equals_create(client, served):
    whole = client.responses.create(model=MODEL, input="Hello!", max_output_tokens=10, temperature=0)
    with client.responses.stream(model=MODEL, input="Hello!", max_output_tokens=10, temperature=0) as s:
        seen = list(s)
    streamed = "".join(e.delta for e in seen if e.type == "response.output_text.delta")
    assert streamed == whole.output_text
    last = seen[-1]
    assert last.type == ("response.completed" if whole.status == "completed" else "response.incomplete")
    assert last.response.output[0].content[0].text == whole.output_text
    assert last.response.usage.output_tokens == whole.usage.output_tokens
    if whole.status == "completed":
        assert s.get_final_response().output_text == whole.output_text


def test_the_raw_stream_and_its_keepalives(served):
    status, headers, text = post(served, {"model": MODEL, "input": "Hello!", "max_output_tokens": 6, "stream": True,
                                          "temperature": 0}, cfg=replace(CFG, keepalive_s=0.002))
    assert status == 200 and headers["Content-Type"].startswith("text/event-stream")
    assert "[DONE]" not in text
    evs = events(text)
    final = grammar(evs)
    kinds = [e["type"] for e in evs if e["type"] != "response.in_progress"]
    n = kinds.count("response.output_text.delta")
    assert n >= 1 and kinds == ["response.created", "response.output_item.added", "response.content_part.added"] + [
        "response.output_text.delta"] * n + ["response.output_text.done", "response.content_part.done",
                                             "response.output_item.done", "response.incomplete"]
    assert sum(e["type"] == "response.in_progress" for e in evs) > 1  # the keep-alives
    assert final["status"] == "incomplete" and final["usage"]["output_tokens"] == 6
    whole = reply_of(served, {"model": MODEL, "input": "Hello!", "max_output_tokens": 6, "temperature": 0})
    assert final["output"][0]["content"][0]["text"] == whole["output"][0]["content"][0]["text"]


# ---- input, instructions, the store -------------------------------------------------

def test_items_and_instructions_render_as_the_chat_route_renders_messages(served):
    served.prompts.clear()
    reply_of(served, {"model": MODEL, "max_output_tokens": 1, "instructions": "Rule one.", "input": [
        {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "Rule two."}]},
        {"role": "system", "content": "Rule three."},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "<context>here</context>"}]},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Hello!"}]},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Hi."}]},
        {"role": "developer", "content": "Later rule."},
        {"role": "user", "content": "Again."}]})
    chat(served, {"model": MODEL, "max_tokens": 1, "messages": [
        {"role": "system", "content": "Rule one.\n\nRule two.\n\nRule three."},
        {"role": "user", "content": "<context>here</context>\n\nHello!"},
        {"role": "assistant", "content": "Hi."}, {"role": "user", "content": "Later rule.\n\nAgain."}]})
    assert len(served.prompts) == 2 and served.prompts[0] == served.prompts[1]


def test_previous_response_id_continues_a_stored_response(served):
    async def body(c, served):
        first = await (await c.post("/v1/responses", json={"model": MODEL, "input": "Hello!", "max_output_tokens": 4,
                                                           "temperature": 0, "instructions": "Be brief."})).json()
        served.prompts.clear()
        second = await c.post("/v1/responses", json={"model": MODEL, "input": "More.", "max_output_tokens": 2,
                                                     "previous_response_id": first["id"]})
        second = await second.json()
        said = first["output"][0]["content"][0]["text"]
        reference = await c.post("/v1/chat/completions", json={"model": MODEL, "max_tokens": 2, "messages": [
            {"role": "user", "content": "Hello!"}, {"role": "assistant", "content": said},
            {"role": "user", "content": "More."}]})
        assert reference.status == 200
        got = await (await c.get(f"/v1/responses/{first['id']}")).json()
        unstored = await (await c.post("/v1/responses", json={"model": MODEL, "input": "x", "max_output_tokens": 1,
                                                              "store": False})).json()
        refused = await c.post("/v1/responses", json={"model": MODEL, "input": "x", "previous_response_id":
                                                      unstored["id"]})
        deleted = await (await c.delete(f"/v1/responses/{first['id']}")).json()
        gone = await c.get(f"/v1/responses/{first['id']}")
        return first, second, got, unstored, refused.status, await refused.json(), deleted, gone.status

    first, second, got, unstored, status, error, deleted, gone = run_app(served, body, CFG)
    assert problems("Response", second) == [] and second["previous_response_id"] == first["id"]
    # the earlier input and output come first; its instructions do not carry over (as OpenAI's)
    assert served.prompts[0] == served.prompts[1]
    assert got == first
    assert unstored["store"] is False
    assert status == 400 and error["error"]["code"] == "previous_response_not_found"
    assert error["error"]["param"] == "previous_response_id" and unstored["id"] in error["error"]["message"]
    assert deleted == {"id": first["id"], "object": "response", "deleted": True} and gone == 404


def test_the_store_is_bounded_least_recently_used_out():
    store = ResponseStore(max_entries=3, max_bytes=10_000)
    for i in range(4):
        store.put(f"r{i}", [{"text": "x"}], {"id": f"r{i}"})
        if i == 1:
            assert store.get("r0") is not None  # r0 is now the most recently used
    assert sorted(store.entries) == ["r0", "r2", "r3"]
    store.put("big", [{"text": "x" * 6000}], {"id": "big"})
    assert "big" in store.entries and store.size <= 10_000 and len(store.entries) < 4
    store.put("huge", [{"text": "x" * 20_000}], {"id": "huge"})
    assert "huge" not in store.entries  # larger than the whole store: not kept
    assert store.delete("big") and not store.delete("big")


# ---- fields: honoured, ignored, refused ----------------------------------------------

def test_hosted_and_bookkeeping_fields_are_accepted(served):
    reply = reply_of(served, {
        "model": MODEL, "input": "Hello!", "max_output_tokens": 2, "store": False, "user": "u", "metadata": {},
        "safety_identifier": "s", "prompt_cache_key": "k", "service_tier": "auto", "client_metadata": {"a": "b"},
        "include": ["reasoning.encrypted_content", "web_search_call.action.sources"], "stream_options": None,
        "text": {"format": {"type": "text"}, "verbosity": "low"}, "truncation": "disabled", "background": False,
        "reasoning": {"effort": "none", "summary": "auto"}, "top_logprobs": 0, "max_tool_calls": 3,
        "prompt_cache_retention": "24h", "parallel_tool_calls": True})
    assert reply["user"] == "u" and reply["prompt_cache_key"] == "k" and reply["store"] is False
    assert reply["reasoning"] == {"effort": "none", "summary": "auto"} and reply["text"]["verbosity"] == "low"


def test_function_tools_on_a_family_without_a_tool_format(served):
    """Gemma 3's template offers no tools: with tool_choice auto (what agents send) the reply is
    text, as auto allows; a required call cannot be honoured and is refused."""
    tools = [{"type": "function", "name": "get_weather", "description": "The weather", "strict": False,
              "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}},
             {"type": "web_search", "external_web_access": False}]
    served.prompts.clear()
    reply = reply_of(served, {"model": MODEL, "input": "Hello!", "max_output_tokens": 2, "tools": tools,
                              "tool_choice": "auto"})
    assert [o["type"] for o in reply["output"]] == ["message"] and reply["tools"] == tools
    assert "get_weather" not in served.prompts[-1]
    status, _, text = post(served, {"model": MODEL, "input": "Hello!", "tools": tools, "tool_choice": "required"})
    assert status == 400 and json.loads(text)["error"]["param"] == "tools"


@pytest.mark.parametrize("change, code, param", [
    ({"text": {"format": {"type": "json_schema", "name": "x", "schema": {}}}}, "unsupported_value",
     "text.format.type"),
    ({"truncation": "auto"}, "unsupported_value", "truncation"),
    ({"background": True}, "unsupported_parameter", "background"),
    ({"conversation": "conv_1"}, "unsupported_parameter", "conversation"),
    ({"prompt": {"id": "pmpt_1"}}, "unsupported_parameter", "prompt"),
    ({"include": ["message.output_text.logprobs"]}, "unsupported_value", "include.0"),
    ({"include": ["everything"]}, "invalid_value", "include.0"),
    ({"top_logprobs": 3}, "unsupported_value", "top_logprobs"),
    ({"tools": [{"type": "code_interpreter", "container": {"type": "auto"}}]}, "unsupported_value", "tools.0.type"),
    ({"tools": [{"type": "function", "name": "bad name", "parameters": {}}]}, "invalid_value", "tools.0.name"),
    ({"tool_choice": {"type": "function", "name": "nope"}}, "invalid_value", "tool_choice.name"),
    ({"reasoning": {"effort": "high"}}, "unsupported_parameter", "reasoning.effort"),
    ({"reasoning": {"effort": "huge"}}, "invalid_value", "reasoning.effort"),
    ({"max_output_tokens": 0}, "invalid_value", "max_output_tokens"),
    ({"temperature": 3}, "invalid_value", "temperature"),
    ({"stream_options": {"include_usage": True}}, "unsupported_parameter", "stream_options.include_usage"),
    ({"seed": 1}, "unsupported_parameter", "seed"),
    ({"input": None}, "missing_required_parameter", "input"),
    ({"input": [{"role": "user", "content": [{"type": "input_image", "image_url": "data:,"}]}]},
     "unsupported_content_type", "input.0.content.0"),
    ({"input": [{"role": "critic", "content": "x"}]}, "unsupported_role", "input.0.role"),
    ({"input": [{"type": "item_reference", "id": "msg_1"}]}, "unsupported_value", "input.0.type"),
    ({"input": [{"type": "computer_call", "call_id": "c"}]}, "unsupported_value", "input.0.type"),
    ({"input": [{"type": "function_call_output", "output": "x"}]}, "missing_required_parameter", "input.0.call_id"),
    ({"input": [{"role": "user", "content": "Hi"}, {"type": "function_call", "call_id": "c", "name": "f",
                                                    "arguments": "{}"}]}, "unsupported_parameter", "input"),
    ({"previous_response_id": "resp_unknown"}, "previous_response_not_found", "previous_response_id"),
    ({"model": "gpt-5"}, "model_not_found", "model"),
])
def test_refusals_name_the_field(served, change, code, param):
    status, _, text = post(served, {"model": MODEL, "input": "Hello!", "max_output_tokens": 2, **change})
    error = json.loads(text)["error"]
    assert status == (404 if code == "model_not_found" else 400), error
    assert (error["code"], error["param"]) == (code, param) and error["type"] == "invalid_request_error"
    assert error["message"]


def test_sdk_errors(client):
    with pytest.raises(openai.BadRequestError) as err:
        client.responses.create(model=MODEL, input="Hello!", previous_response_id="resp_nope")
    assert err.value.code == "previous_response_not_found"


def test_a_prompt_over_the_context_is_a_named_400_before_any_event(served):
    status, headers, text = post(served, {"model": MODEL, "input": "word " * 2000, "stream": True})
    error = json.loads(text)["error"]
    assert status == 400 and headers["Content-Type"].startswith("application/json")
    assert (error["code"], error["param"]) == ("context_length_exceeded", "input") and "input" in error["message"]


# ---- tools and reasoning: the same engine under Qwen3's template (<tool_call>, <think>) ----------

WEATHER = {"type": "function", "name": "get_weather", "description": "The weather in a city", "strict": False,
           "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}
WEATHER_CHAT = {"type": "function", "function": {"name": "get_weather", "description": "The weather in a city",
                                                 "parameters": WEATHER["parameters"]}}
SAID = 'Repeat exactly: <tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'
TWICE = SAID + '\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Rome"}}\n</tool_call>'
THINK = "<think>I ponder.</think>Done."


@pytest.fixture(scope="module")
def tooled(default_model):
    cfg = replace(CFG, model_id="tooled", kv_slots=1)
    s = recording(open_served(cfg, with_chat_template(default_model, QWEN3, "qwen3-template")))
    with AppThread(cfg, s) as base:
        yield openai.OpenAI(base_url=base + "/v1", api_key="local", max_retries=0), s, cfg
    close_served(s)


def test_a_function_call_and_its_output(tooled):
    client, served, cfg = tooled
    r = client.responses.create(model="tooled", input=SAID, tools=[WEATHER], max_output_tokens=40, temperature=0)
    assert [o.type for o in r.output] == ["message", "function_call"] and r.status == "completed"
    call = r.output[1]
    assert call.id.startswith("fc_") and call.call_id.startswith("call_") and call.status == "completed"
    assert call.name == "get_weather" and json.loads(call.arguments) == {"city": "Paris"}
    assert r.output[0].content[0].text.startswith("Repeat exactly:")
    raw = reply_of(served, {"model": "tooled", "input": SAID, "tools": [WEATHER], "max_output_tokens": 40,
                            "temperature": 0}, cfg)
    assert raw["output"][1]["arguments"] == call.arguments
    # the call and its output go back as items; the prompt is the chat route's for the same turns
    served.prompts.clear()
    follow = reply_of(served, {"model": "tooled", "tools": [WEATHER], "max_output_tokens": 2, "input": [
        {"role": "user", "content": SAID}, *[o.model_dump(exclude_none=True) for o in r.output],
        {"type": "function_call_output", "call_id": call.call_id, "output": "sunny"}]}, cfg)
    chat(served, {"model": "tooled", "tools": [WEATHER_CHAT], "max_tokens": 2, "messages": [
        {"role": "user", "content": SAID},
        {"role": "assistant", "content": r.output[0].content[0].text, "tool_calls": [{
            "id": call.call_id, "type": "function", "function": {"name": "get_weather", "arguments": call.arguments}}]},
        {"role": "tool", "tool_call_id": call.call_id, "content": "sunny"}]}, cfg)
    assert served.prompts[0] == served.prompts[1] and "sunny" in served.prompts[0]
    assert follow["usage"]["input_tokens"] > r.usage.input_tokens


def test_a_streamed_function_call(tooled):
    client, served, cfg = tooled
    with client.responses.stream(model="tooled", input=SAID, tools=[WEATHER], max_output_tokens=40,
                                 temperature=0) as s:
        final = s.get_final_response()
    assert final.output[-1].type == "function_call" and json.loads(final.output[-1].arguments) == {"city": "Paris"}
    status, _, text = post(served, {"model": "tooled", "input": SAID, "tools": [WEATHER], "max_output_tokens": 40,
                                    "temperature": 0, "stream": True}, cfg)
    evs = events(text)
    response = grammar(evs)
    kinds = [e["type"] for e in evs]
    call_events = kinds[kinds.index("response.output_item.added", kinds.index("response.output_item.done")):]
    assert call_events == ["response.output_item.added", "response.function_call_arguments.delta",
                           "response.function_call_arguments.done", "response.output_item.done",
                           "response.completed"]
    added = next(e for e in evs if e["type"] == "response.output_item.added" and e["output_index"] == 1)
    assert added["item"]["type"] == "function_call" and added["item"]["arguments"] == ""
    assert response["output"][1]["call_id"] == added["item"]["call_id"]


def test_parallel_tool_calls_false_keeps_the_first_call(tooled):
    _, served, cfg = tooled
    payload = {"model": "tooled", "input": TWICE, "tools": [WEATHER], "max_output_tokens": 80, "temperature": 0}
    both = [o for o in reply_of(served, payload, cfg)["output"] if o["type"] == "function_call"]
    one = [o for o in reply_of(served, {**payload, "parallel_tool_calls": False}, cfg)["output"]
           if o["type"] == "function_call"]
    assert len(both) == 2 and len(one) == 1 and one[0]["arguments"] == both[0]["arguments"]


def test_strict_functions_refuse_a_call_that_cannot_be_executed(tooled):
    """`strict: true` cannot constrain sampling here; a call that does not fit its schema is a
    named 502 instead (colibri's strict_tool_calls), and mid-stream a response.failed."""
    _, served, cfg = tooled
    strict = {**WEATHER, "strict": True, "parameters": {**WEATHER["parameters"], "additionalProperties": False}}
    said = SAID.replace('"city"', '"town"')
    status, _, text = post(served, {"model": "tooled", "input": said, "tools": [strict], "max_output_tokens": 40,
                                    "temperature": 0}, cfg)
    error = json.loads(text)["error"]
    assert status == 502 and error["code"] == "invalid_model_tool_call" and "city" in error["message"]
    fine = reply_of(served, {"model": "tooled", "input": SAID, "tools": [strict], "max_output_tokens": 40,
                             "temperature": 0}, cfg)
    assert fine["output"][-1]["type"] == "function_call"
    import aiohttp

    async def body(c, served):
        r = await c.post("/v1/responses", json={"model": "tooled", "input": said, "tools": [strict], "stream": True,
                                                "max_output_tokens": 40, "temperature": 0})
        data = b""
        with pytest.raises(aiohttp.ClientPayloadError):  # after response.failed the socket closes
            while chunk := await r.content.readany():
                data += chunk
        return r.status, data.decode()

    status, text = run_app(served, body, cfg)
    evs = events(text)
    assert status == 200 and grammar(evs)["status"] == "failed"
    assert "city" in evs[-1]["response"]["error"]["message"]


def test_namespace_tools_are_offered_by_their_full_name_and_called_with_their_namespace(tooled):
    _, served, cfg = tooled
    tools = [{"type": "namespace", "name": "crm", "description": "Customer records",
              "tools": [{**WEATHER, "name": "lookup"}]}]
    flat = {"type": "function", "function": {**WEATHER_CHAT["function"], "name": "crm.lookup"}}
    said = SAID.replace("get_weather", "crm.lookup")
    served.prompts.clear()
    reply = reply_of(served, {"model": "tooled", "input": said, "tools": tools, "max_output_tokens": 40,
                              "temperature": 0}, cfg)
    chat(served, {"model": "tooled", "messages": [{"role": "user", "content": said}], "tools": [flat],
                  "max_tokens": 1}, cfg)
    assert served.prompts[0] == served.prompts[1]
    call = reply["output"][-1]
    assert (call["type"], call["namespace"], call["name"]) == ("function_call", "crm", "lookup")
    served.prompts.clear()
    reply_of(served, {"model": "tooled", "tools": tools, "max_output_tokens": 1, "input": [
        {"role": "user", "content": said}, call, {"type": "function_call_output", "call_id": call["call_id"],
                                                  "output": "found"}]}, cfg)
    chat(served, {"model": "tooled", "tools": [flat], "max_tokens": 1, "messages": [
        {"role": "user", "content": said},
        {"role": "assistant", "content": None, "tool_calls": [{"id": call["call_id"], "type": "function", "function": {
            "name": "crm.lookup", "arguments": call["arguments"]}}]},
        {"role": "tool", "tool_call_id": call["call_id"], "content": "found"}]}, cfg)
    assert served.prompts[0] == served.prompts[1] and "found" in served.prompts[0]


def test_reasoning_items(tooled):
    client, served, cfg = tooled
    r = client.responses.create(model="tooled", input=THINK, max_output_tokens=16, temperature=0,
                                reasoning={"effort": "low"}, include=["reasoning.encrypted_content"])
    assert [o.type for o in r.output] == ["reasoning", "message"]
    reasoning = r.output[0]
    assert reasoning.id.startswith("rs_") and reasoning.content[0].text == "I ponder." and reasoning.summary == []
    assert reasoning.encrypted_content == encrypted("I ponder.")
    assert r.output[1].content[0].text.startswith("Done.")
    assert 0 < r.usage.output_tokens_details.reasoning_tokens < r.usage.output_tokens
    status, _, text = post(served, {"model": "tooled", "input": THINK, "max_output_tokens": 16, "temperature": 0,
                                    "stream": True}, cfg)
    evs = events(text)
    final = grammar(evs)
    assert [o["type"] for o in final["output"]] == ["reasoning", "message"]
    kinds = [e["type"] for e in evs[2:] if e["type"] != "response.in_progress"]  # past the keep-alives
    assert kinds[:3] == ["response.output_item.added", "response.content_part.added",
                         "response.reasoning_text.delta"]
    assert "".join(e["delta"] for e in evs if e["type"] == "response.reasoning_text.delta") == "I ponder."
    assert "encrypted_content" not in final["output"][0]  # only when `include` asks
    # sent back with only its encrypted_content, the reasoning reaches the template (a tool chain keeps it)
    served.prompts.clear()
    reply_of(served, {"model": "tooled", "tools": [WEATHER], "max_output_tokens": 1, "input": [
        {"role": "user", "content": "Weather?"},
        {"type": "reasoning", "id": reasoning.id, "summary": [], "encrypted_content": reasoning.encrypted_content},
        {"type": "function_call", "call_id": "call_1", "name": "get_weather", "arguments": '{"city": "Paris"}'},
        {"type": "function_call_output", "call_id": "call_1", "output": "sunny"}]}, cfg)
    assert "<think>\nI ponder.\n</think>" in served.prompts[-1]


def test_a_failure_after_the_headers_is_response_failed(default_model):
    status, text = stream_until_the_engine_closes(CFG, default_model, "/v1/responses", {
        "model": MODEL, "max_output_tokens": 200, "stream": True, "input": "Write a long story."},
        b"response.output_text.delta")
    assert status == 200
    blocks = [b for b in text.split("\n\n") if b.startswith("event: ")]
    failed = json.loads(blocks[-1].split("\n")[1][len("data: "):])
    assert failed["type"] == "response.failed" and failed["response"]["status"] == "failed"
    assert failed["response"]["error"]["code"] == "server_error" and failed["response"]["error"]["message"]
    assert problems("ResponseFailedEvent", failed) == []
    assert "response.completed" not in text


# ---- the translation alone ------------------------------------------------------------

def messages_of(items, instructions=None, namespaces=None):
    return [(m.role, m.content, m.reasoning_content, m.tool_calls, m.tool_call_id, m.name)
            for m in conversation(items, 0, instructions, namespaces or {})]


def test_an_assistant_turn_gathers_its_reasoning_text_and_calls():
    call = {"type": "function_call", "call_id": "c1", "name": "f", "arguments": '{"a": 1}'}
    assert messages_of([
        {"role": "user", "content": "Q"},
        {"type": "reasoning", "summary": [{"type": "summary_text", "text": "short"}],
         "content": [{"type": "reasoning_text", "text": "long"}]},
        {"role": "assistant", "content": [{"type": "output_text", "text": "Let me look."}]},
        call, {**call, "call_id": "c2", "arguments": "not json"},
        {"type": "function_call_output", "call_id": "c1", "output": [{"type": "input_text", "text": "one"}]},
        {"type": "function_call_output", "call_id": "c2", "output": "two"},
        {"type": "reasoning", "summary": [{"type": "summary_text", "text": "only a summary"}]},
        {"role": "assistant", "content": "Done."}]) == [
        ("user", "Q", None, None, None, None),
        ("assistant", "Let me look.", "long", [
            {"id": "c1", "type": "function", "function": {"name": "f", "arguments": {"a": 1}}},
            {"id": "c2", "type": "function", "function": {"name": "f", "arguments": "not json"}}], None, None),
        ("tool", "one", None, None, "c1", "f"), ("tool", "two", None, None, "c2", "f"),
        ("assistant", "Done.", "only a summary", None, None, None)]


def test_reasoning_before_a_user_turn_is_dropped_and_encrypted_content_is_read_back():
    assert messages_of([{"role": "user", "content": "A"},
                        {"type": "reasoning", "summary": [], "encrypted_content": encrypted("thought")},
                        {"role": "user", "content": "B"}]) == [("user", "A\n\nB", None, None, None, None)]
    assert messages_of([{"role": "user", "content": "A"},
                        {"type": "reasoning", "summary": [], "encrypted_content": encrypted("thought é")},
                        {"role": "assistant", "content": "x"}])[1][2] == "thought é"
    assert messages_of([{"role": "user", "content": "A"},  # another server's blob is not ours to read
                        {"type": "reasoning", "summary": [], "encrypted_content": "gAAAAB..."},
                        {"role": "assistant", "content": "x"}])[1][2] is None


def test_namespaced_calls_in_the_history_use_the_offered_name():
    req = parse_responses({"model": MODEL, "input": [
        {"role": "user", "content": "Q"},
        {"type": "function_call", "call_id": "c", "namespace": "crm", "name": "lookup", "arguments": "{}"}],
        "tools": [{"type": "namespace", "name": "crm", "description": "d",
                   "tools": [{"type": "function", "name": "lookup", "parameters": {"type": "object"}}]}]},
        Limits())
    assert req.namespaces == {"crm.lookup": ("crm", "lookup")}
    assert [t["function"]["name"] for t in req.chat.tools.declared] == ["crm.lookup"]
    assert req.chat.messages[1].tool_calls[0]["function"]["name"] == "crm.lookup"


def test_allowed_tools_narrow_the_offer():
    tools = [{"type": "function", "name": n, "parameters": {"type": "object"}} for n in ("a", "b", "c")]
    req = parse_responses({"model": MODEL, "input": "Q", "tools": tools, "tool_choice": {
        "type": "allowed_tools", "mode": "required", "tools": [{"type": "function", "name": "b"}]}}, Limits())
    assert [t["function"]["name"] for t in req.chat.tools.declared] == ["b"] and req.chat.tools.choice.mode == \
        "required"
    assert req.echo["tools"] == tools  # the reply states the request as sent
