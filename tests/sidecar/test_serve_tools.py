"""Tool calling: the families' native formats parsed from their documented outputs (including
malformed and truncated ones), rendered through each family's real template, and end to end
on the real engine.

End to end, the default model (Gemma 3 270M) is served from a copy of its file that carries
Qwen3's chat template: Gemma repeats what its user writes, so a user turn holding a tool call
in Qwen3's syntax makes the real engine generate that call, token by token.
"""
from __future__ import annotations

import json
import re

import pytest

from colibri.api.errors import as_api_error
from colibri.errors import InvalidRequest
from colibri.chat.messages import Message
from colibri.serving.requests import ToolChoice, Tools
from colibri.serving.tool_plan import NAMED, REQUIRED, open_forced_call, plan_tools
from colibri.chat.builtin_templates import CHATML, GEMMA3
from colibri.chat.prompt import ChatFormat, Prompt
from colibri.chat.schema import problems
from colibri.chat.template import ChatTemplate
from colibri.chat.tools import GLM45, HERMES, MISTRAL, MISTRAL_V11, strict_problems, tool_format
from colibri.serve_config import ServeConfig
from tests.sidecar.family_templates import GLM45 as GLM45_TEMPLATE
from tests.sidecar.family_templates import MISTRAL as MISTRAL_TEMPLATE
from tests.sidecar.family_templates import QWEN3 as QWEN3_TEMPLATE
from tests.sidecar.family_templates import with_chat_template
from tests.sidecar.serve_support import AppThread, close_served, open_served, run_app

WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "The weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
                   "required": ["city"], "additionalProperties": False}}}
SCHEMAS = {"get_weather": WEATHER["function"]["parameters"]}


# ---- formats and parsers (pure) -------------------------------------------------------

def test_each_template_names_its_format():
    assert tool_format(QWEN3_TEMPLATE) is HERMES and tool_format(CHATML) is None
    assert tool_format(GLM45_TEMPLATE) is GLM45 and tool_format(MISTRAL_TEMPLATE) is MISTRAL
    assert tool_format(GEMMA3) is None


def test_hermes_documented_outputs():
    two = ('\n{"name": "get_weather", "arguments": {"city": "Oslo"}}\n</tool_call>\n'
           '<tool_call>\n{"name": "get_weather", "arguments": "{\\"city\\": \\"Rome\\"}"}\n</tool_call>')
    s = HERMES.parse(two, SCHEMAS)
    assert [(c.name, c.arguments, c.complete, c.problem) for c in s.calls] == [
        ("get_weather", {"city": "Oslo"}, True, None), ("get_weather", {"city": "Rome"}, True, None)]
    assert not s.stray.strip()
    cut = HERMES.parse('\n{"name": "get_weather", "arguments": {"city": "Os', SCHEMAS)  # truncated
    assert not cut.calls[0].complete and cut.calls[0].problem
    bad = HERMES.parse('\n{"name": get_weather}\n</tool_call>', SCHEMAS)
    assert bad.calls[0].name == "" and "JSON" in bad.calls[0].problem


def test_glm45_documented_outputs():
    s = GLM45.parse("get_weather\n<arg_key>city</arg_key>\n<arg_value>42</arg_value>\n"
                    "<arg_key>days</arg_key>\n<arg_value>3</arg_value>\n</tool_call>", SCHEMAS)
    call = s.calls[0]
    assert (call.name, call.arguments, call.complete) == ("get_weather", {"city": "42", "days": 3}, True)  # typed
    cut = GLM45.parse("get_weather\n<arg_key>city</arg_key>\n<arg_value>Par", SCHEMAS)
    assert not cut.calls[0].complete and cut.calls[0].arguments == {"city": "Par"}
    junk = GLM45.parse("get_weather\nplease\n</tool_call>", SCHEMAS)
    assert junk.calls[0].problem


def test_mistral_documented_outputs():
    v3 = MISTRAL.parse(' [{"name": "get_weather", "arguments": {"city": "Lyon"}}, '
                       '{"name": "get_weather", "arguments": {"city": "Nice"}}]', SCHEMAS)
    assert [c.arguments["city"] for c in v3.calls] == ["Lyon", "Nice"]
    v11 = MISTRAL.parse('get_weather[ARGS]{"city": "Lyon"}[TOOL_CALLS]get_weather[ARGS]{"city": "Nice"}', SCHEMAS)
    assert [(c.name, c.arguments) for c in v11.calls] == [("get_weather", {"city": "Lyon"}),
                                                         ("get_weather", {"city": "Nice"})]
    assert not MISTRAL.parse(' [{"name": "get_weather", "argu', SCHEMAS).calls[0].complete
    assert re.fullmatch(r"[A-Za-z0-9]{9}", MISTRAL.call_id())  # what Mistral's templates accept back
    assert re.fullmatch(r"call_[0-9a-f]{24}", HERMES.call_id())


@pytest.mark.parametrize("section, cut_off, words", [
    ('\n{"name": "get_weather", "arguments": {"city": "Os', True, "cut off"),
    ('\n{"name": "get_time", "arguments": {}}\n</tool_call>', False, "not declared"),
    ('\n{"name": "get_weather", "arguments": {"town": "Oslo"}}\n</tool_call>', False, "missing required"),
    ('\n{"name": "get_weather", "arguments": {"city": 5}}\n</tool_call>', False, "expected string"),
    ('\n{"name": "get_weather", "arguments": {"city": "A"}}\n</tool_call>\n<tool_call>\n'
     '{"name": "get_weather", "arguments": {"city": "A"}}\n</tool_call>', False, "duplicates"),
    ('\n{"name": "get_weather", "arguments": {"city": "A"}}', False, "incomplete"),
])
def test_strict_refuses_what_cannot_be_executed(section, cut_off, words):
    found = strict_problems(HERMES.parse(section, SCHEMAS), SCHEMAS, cut_off)
    assert any(words in p for p in found), found


def test_strict_accepts_a_valid_call_and_schema_keywords():
    ok = HERMES.parse('\n{"name": "get_weather", "arguments": {"city": "Oslo", "days": 2}}\n</tool_call>', SCHEMAS)
    assert strict_problems(ok, SCHEMAS, cut_off=False) == []
    assert strict_problems(ok, SCHEMAS, cut_off=True) == []  # the limit came after a whole call
    assert problems(3, {"type": "integer", "minimum": 5}) and not problems(3.0, {"type": "integer"})
    assert problems("x", {"enum": ["a", "b"]}) and not problems([1, 2], {"type": "array", "items": {"type": "number"}})
    assert problems(True, {"type": "number"})  # JSON booleans are not numbers


# ---- rendering through the families' own templates (pure) ----------------------------------

CALL = {"id": "call_0123456789", "type": "function", "function": {"name": "get_weather",
                                                                    "arguments": {"city": "Oslo"}}}
HISTORY = [Message("user", "Weather in Oslo?"), Message("assistant", "", tool_calls=[CALL]),
           Message("tool", "sunny", tool_call_id="call_0123456789"), Message("user", "Thanks. And Rome?")]


def test_qwen3_renders_tools_calls_and_results():
    text = ChatFormat(ChatTemplate(QWEN3_TEMPLATE)).render(HISTORY, tools=[WEATHER]).text
    assert '<tools>\n{"type": "function", "function": {"name": "get_weather"' in text
    assert '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo"}}\n</tool_call>' in text
    assert "<|im_start|>user\n<tool_response>\nsunny\n</tool_response><|im_end|>" in text
    assert text.endswith("<|im_start|>assistant\n")


def test_glm45_renders_arguments_as_key_value_pairs():
    text = ChatFormat(ChatTemplate(GLM45_TEMPLATE)).render(HISTORY, tools=[WEATHER]).text
    assert text.startswith("[gMASK]<sop><|system|>\n# Tools")
    assert "<tool_call>get_weather<arg_key>city</arg_key>\n<arg_value>Oslo</arg_value></tool_call>" in text
    assert "<|observation|>\n<tool_response>\nsunny\n</tool_response>" in text


def test_mistral_renders_available_tools_and_call_ids():
    text = ChatFormat(ChatTemplate(MISTRAL_TEMPLATE, bos_token="<s>", eos_token="</s>")).render(
        HISTORY, tools=[WEATHER]).text
    assert '[AVAILABLE_TOOLS] [{"type": "function", "function": {"name": "get_weather"' in text
    assert '[TOOL_CALLS] [{"name": "get_weather", "arguments": {"city": "Oslo"}, "id": "123456789"}]</s>' in text
    assert '[TOOL_RESULTS] {"content": sunny, "call_id": "123456789"}[/TOOL_RESULTS]' in text


def test_tool_choice_narrows_and_instructs_and_no_format_refuses():
    fmt = ChatFormat(ChatTemplate(QWEN3_TEMPLATE))
    other = {"type": "function", "function": {"name": "get_time"}}
    offered, msgs, setup = plan_tools(fmt, Tools([WEATHER, other], ToolChoice("function", "get_weather")),
                                      [Message("user", "hi")])
    assert offered == [WEATHER] and msgs[0] == Message("system", NAMED.format(name="get_weather"))
    assert setup.format is HERMES and set(setup.schemas) == {"get_weather", "get_time"}
    offered, msgs, _ = plan_tools(fmt, Tools([WEATHER], ToolChoice("required")),
                                  [Message("system", "Be brief."), Message("user", "hi")])
    assert msgs[0].content == "Be brief.\n\n" + REQUIRED
    assert plan_tools(fmt, Tools([WEATHER], ToolChoice("none")), [Message("user", "hi")]) == (
        None, [Message("user", "hi")], None)
    gemma = ChatFormat(ChatTemplate(GEMMA3))
    with pytest.raises(InvalidRequest) as err:
        plan_tools(gemma, Tools([WEATHER], ToolChoice("auto")), [Message("user", "hi")])
    assert (as_api_error(err.value).status, err.value.code, err.value.param) == (
        400, "unsupported_parameter", "tools")
    with pytest.raises(InvalidRequest) as err:
        plan_tools(gemma, Tools(), HISTORY)
    assert err.value.param == "messages"


@pytest.mark.parametrize("fmt, template, rest", [
    (HERMES, QWEN3_TEMPLATE, ' {"city": "Oslo"}}\n</tool_call>'),
    (GLM45, GLM45_TEMPLATE, "\n<arg_key>city</arg_key>\n<arg_value>Oslo</arg_value>\n</tool_call>"),
    (MISTRAL, MISTRAL_TEMPLATE, ' {"city": "Oslo"}}]'),
    (MISTRAL_V11, None, '{"city": "Oslo"}'),
], ids=["hermes", "glm45", "mistral", "mistral-v11"])
def test_each_format_opens_a_call_as_its_template_writes_one(fmt, template, rest):
    opening = fmt.call_opening("get_weather")
    assert opening.startswith(fmt.opener)
    if template:  # a past call, as the family's own template renders it, starts with the opening
        family = ChatFormat(ChatTemplate(template, bos_token="<s>", eos_token="</s>"))
        assert opening in family.render(HISTORY, tools=[WEATHER]).text
    (call,) = fmt.parse(opening[len(fmt.opener):] + rest, SCHEMAS).calls  # the model writes the rest
    assert (call.name, call.arguments, call.complete, call.problem) == ("get_weather", {"city": "Oslo"}, True, None)
    assert tool_format("[TOOL_CALLS]{{ name }}[ARGS]{{ args }}") is MISTRAL_V11


def test_only_a_named_choice_opens_the_call_in_the_prompt():
    fmt = ChatFormat(ChatTemplate(QWEN3_TEMPLATE))
    ask = [Message("user", "hi")]
    for choice, opened in ((ToolChoice("function", "get_weather"), True), (ToolChoice("required"), False),
                           (ToolChoice("auto"), False)):
        offered, msgs, setup = plan_tools(fmt, Tools([WEATHER], choice), ask)
        prompt, setup = open_forced_call(fmt.render(msgs, tools=offered), setup)
        opening = HERMES.call_opening("get_weather")
        assert prompt.text.endswith("<|im_start|>assistant\n" + opening) == opened, choice
        assert setup.opened == (opening if opened else "")
    _, _, setup = plan_tools(fmt, Tools([WEATHER], ToolChoice("function", "get_weather")), ask)
    inside = Prompt("<|im_start|>assistant\n<think>\n", in_reasoning=True)  # a call there would be reasoning
    assert open_forced_call(inside, setup) == (inside, setup)
    assert open_forced_call(inside, None) == (inside, None)


# ---- end to end on the real engine -----------------------------------------------------------

MODEL = "gemma-qwen3-template"
CFG = ServeConfig(model_id=MODEL, kv_slots=1, ctx=512, threads=2, kv_persist=False)
SAID = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'


@pytest.fixture(scope="module")
def served(default_model):
    s = open_served(CFG, with_chat_template(default_model, QWEN3_TEMPLATE, "qwen3-template"))
    yield s
    close_served(s)


def ask(served, user: str, **kw):
    async def body(c, served):
        r = await c.post("/v1/chat/completions", json={"model": MODEL, "messages": [{"role": "user", "content": user}],
                                                       "tools": [WEATHER], "temperature": 0, "max_tokens": 40, **kw})
        return r.status, (await r.json() if r.content_type == "application/json" else await r.text())

    return run_app(served, body, CFG)


def test_a_generated_call_comes_back_as_tool_calls(served):
    status, body = ask(served, "Repeat exactly: " + SAID)
    assert status == 200, body
    choice = body["choices"][0]
    assert choice["finish_reason"] == "tool_calls"
    assert choice["message"]["content"] == "Repeat exactly: "  # the text before the call
    (call,) = choice["message"]["tool_calls"]
    assert re.fullmatch(r"call_[0-9a-f]{24}", call["id"]) and call["type"] == "function"
    assert call["function"] == {"name": "get_weather", "arguments": '{"city": "Paris"}'}
    status, only = ask(served, SAID)
    assert only["choices"][0]["message"]["content"] is None  # with tools, empty content is null


def test_streaming_sends_the_calls_after_all_text(served):
    status, raw = ask(served, "Repeat exactly: " + SAID, stream=True)
    events = [json.loads(b[6:]) if b[6:] != "[DONE]" else "[DONE]" for b in raw.split("\n\n")[:-1]]
    deltas = [e["choices"][0]["delta"] for e in events[:-1]]
    assert deltas[0] == {"role": "assistant", "content": ""} and events[-1] == "[DONE]"
    calls_at = [i for i, d in enumerate(deltas) if "tool_calls" in d]
    assert len(calls_at) == 1 and all("content" not in d for d in deltas[calls_at[0]:])
    assert "".join(d.get("content", "") for d in deltas) == "Repeat exactly: "  # no tool syntax in the text
    call = deltas[calls_at[0]]["tool_calls"][0]
    assert call["index"] == 0 and call["function"]["name"] == "get_weather"
    assert events[-2]["choices"][0] == {"index": 0, "delta": {}, "logprobs": None, "finish_reason": "tool_calls"}


def test_logprobs_describe_the_text_not_the_tool_syntax(served):
    status, body = ask(served, "Repeat exactly: " + SAID, logprobs=True)
    content = body["choices"][0]["logprobs"]["content"]
    assert "".join(e["token"] for e in content) == body["choices"][0]["message"]["content"]
    assert not any("tool_call" in e["token"] for e in content)


@pytest.mark.parametrize("said, status, code", [
    (SAID, 200, None),
    (SAID.replace("get_weather", "get_time"), 502, "invalid_model_tool_call"),  # unknown function
    (SAID.replace('"Paris"', "5"), 502, "invalid_model_tool_call"),  # against the declared schema
])
def test_strict_tool_calls(served, said, status, code):
    got, body = ask(served, said, strict_tool_calls=True)
    assert got == status, body
    if code:
        assert body["error"]["code"] == code and body["error"]["type"] == "server_error"


def test_strict_refuses_a_call_cut_off_by_the_limit(served):
    status, body = ask(served, SAID, strict_tool_calls=True, max_tokens=8)
    assert status == 502 and "cut off" in body["error"]["message"]


def test_openai_sdk_reads_the_call_and_sends_the_result_back(served):
    openai = pytest.importorskip("openai")
    with AppThread(CFG, served) as base:
        client = openai.OpenAI(base_url=base + "/v1", api_key="local", max_retries=0)
        r = client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": SAID}], tools=[WEATHER],
                                           temperature=0, max_tokens=40)
        call = r.choices[0].message.tool_calls[0]
        assert r.choices[0].finish_reason == "tool_calls" and call.function.name == "get_weather"
        follow = client.chat.completions.create(model=MODEL, tools=[WEATHER], temperature=0, max_tokens=4, messages=[
            {"role": "user", "content": SAID}, r.choices[0].message.model_dump(exclude_none=True),
            {"role": "tool", "tool_call_id": call.id, "content": "sunny"}])
        assert follow.usage.prompt_tokens > r.usage.prompt_tokens


def test_a_family_without_tool_format_refuses_active_tools(default_model):
    gemma = open_served(ServeConfig(model_id="g", kv_slots=1, ctx=256, threads=2, kv_persist=False), default_model)

    async def body(c, served):
        out = []
        for extra in ({"tools": [WEATHER]}, {"tools": [WEATHER], "tool_choice": "none"},
                      {"messages": [{"role": "user", "content": "a"}, {"role": "assistant", "content": None,
                                                                      "tool_calls": [CALL | {"function": {
                                                                          "name": "f", "arguments": "{}"}}]},
                                    {"role": "tool", "tool_call_id": "call_0123456789", "content": "x"}]}):
            r = await c.post("/v1/chat/completions", json={"model": "g", "max_tokens": 1,
                                                           "messages": [{"role": "user", "content": "hi"}], **extra})
            out.append((r.status, await r.json()))
        return out

    try:
        (s1, b1), (s2, _), (s3, b3) = run_app(gemma, body, ServeConfig(model_id="g", kv_persist=False))
    finally:
        close_served(gemma)
    assert (s1, b1["error"]["code"], b1["error"]["param"]) == (400, "unsupported_parameter", "tools")
    assert s2 == 200  # tool_choice none: nothing is active
    assert (s3, b3["error"]["param"]) == (400, "messages")


@pytest.mark.parametrize("template", [GLM45_TEMPLATE, MISTRAL_TEMPLATE], ids=["glm45", "mistral"])
def test_tiny_moe_renders_each_family_with_tools(template):
    from tests.fixtures.moe_models import tiny

    path = with_chat_template(tiny("qwen3moe"), template, "tools")
    cfg = ServeConfig(model_id="m", kv_slots=1, ctx=4096, threads=2, kv_persist=False)
    s = open_served(cfg, path)

    async def body(c, served):
        out = []
        for extra in ({}, {"tools": [WEATHER]}):
            r = await c.post("/v1/chat/completions", json={"model": "m", "max_tokens": 4, "temperature": 0,
                                                           "messages": [{"role": "user", "content": "hi"}], **extra})
            out.append(await r.json())
        return out

    try:
        plain, with_tools = run_app(s, body, cfg)
    finally:
        close_served(s)
    assert "usage" in with_tools, with_tools
    assert with_tools["usage"]["prompt_tokens"] > plain["usage"]["prompt_tokens"] + 50  # the tool block was rendered
    assert with_tools["choices"][0]["finish_reason"] in ("stop", "length", "tool_calls")
