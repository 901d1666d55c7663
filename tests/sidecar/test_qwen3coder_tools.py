"""Qwen3-Coder's XML tool calls (`<tool_call><function=NAME><parameter=K>V</parameter></function>
</tool_call>`, Qwen3-Coder-30B-A3B and -480B; Qwen3.5 writes the same): recognised from the
family's real template (tests/sidecar/qwen3_coder.jinja), parsed as the reference parsers read
them (vLLM's qwen3coder_tool_parser: one newline trimmed around a value, values typed by the
parameter's schema; llama.cpp: a value runs to its </parameter>), rendered back through that
template, opened for a forced call, and refused or returned as text when malformed or cut off.

End to end: the default model (Gemma 3 270M, which repeats what its user writes) served with the
Qwen3-Coder template generates calls token by token; a tiny qwen3moe fixture (random weights)
carrying the template serves a forced call, whose reply starts inside the opened call.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from colibri.chat.builtin_templates import CHATML
from colibri.chat.messages import Message
from colibri.chat.prompt import ChatFormat
from colibri.chat.stops import StopFilter
from colibri.chat.template import ChatTemplate
from colibri.chat.tools import GLM45, HERMES, MISTRAL, QWEN3_CODER, strict_problems, tool_format, xml_value
from colibri.errors import InvalidRequest, ModelOutputRefused
from colibri.serve_config import ServeConfig
from colibri.serving.generation import Outcome, Session, ToolSetup
from colibri.serving.requests import ToolChoice, Tools
from colibri.serving.tool_plan import open_forced_call, plan_tools
from tests.sidecar.family_templates import GLM45 as GLM45_TEMPLATE
from tests.sidecar.family_templates import MISTRAL as MISTRAL_TEMPLATE
from tests.sidecar.family_templates import QWEN3 as QWEN3_TEMPLATE
from tests.sidecar.family_templates import with_chat_template
from tests.sidecar.serve_support import close_served, open_served, run_app

# Qwen/Qwen3-Coder-30B-A3B-Instruct's chat template as published (the same text as vLLM's
# examples/tool_chat_template_qwen3coder.jinja and llama.cpp's models/templates/Qwen3-Coder.jinja)
TEMPLATE = (Path(__file__).parent / "qwen3_coder.jinja").read_text()
# the first published version wrote every non-string value with `| string` (a dict as {'a': 1})
NEW_VALUE = ("args_value | tojson | safe if args_value is mapping or (args_value is sequence and args_value is "
             "not string) else args_value | string")
FIRST_TEMPLATE = TEMPLATE.replace(NEW_VALUE, "args_value if args_value is string else args_value | string")

EDIT = {"type": "function", "function": {
    "name": "write_file", "description": "Write a file",
    "parameters": {"type": "object", "properties": {
        "path": {"type": "string"}, "content": {"type": "string"}, "mode": {"type": "integer"},
        "ratio": {"type": "number"}, "overwrite": {"type": "boolean"}, "meta": {"type": "object"},
        "tags": {"type": "array", "items": {"type": "string"}}, "note": {"type": ["string", "null"]},
        "limit": {"type": ["integer", "null"]}, "level": {"anyOf": [{"type": "integer"}, {"type": "boolean"}]},
        "pick": {"enum": [1, 2, 3]}},
        "required": ["path", "content"], "additionalProperties": False}}}
WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "The weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
                   "required": ["city"], "additionalProperties": False}}}
SCHEMAS = {t["function"]["name"]: t["function"]["parameters"] for t in (EDIT, WEATHER)}


def parse(text: str):
    """text as the model wrote it from its <tool_call> (the section is what follows the opener)."""
    assert text.startswith(QWEN3_CODER.opener)
    return QWEN3_CODER.parse(text[len(QWEN3_CODER.opener):], SCHEMAS)


def facts(section):
    return [(c.name, c.arguments, c.complete, c.problem) for c in section.calls]


# ---- which format a template speaks --------------------------------------------------------

def test_the_qwen3_coder_template_speaks_its_xml_and_qwen3_still_speaks_hermes():
    assert tool_format(TEMPLATE) is QWEN3_CODER and tool_format(FIRST_TEMPLATE) is QWEN3_CODER
    assert ChatFormat(ChatTemplate(TEMPLATE)).tool_format is QWEN3_CODER
    assert not ChatTemplate(TEMPLATE).has_reasoning  # Qwen3-Coder has no <think> block
    # both write <tool_call>: the XML one needs <function= and <parameter= too (llama.cpp's test)
    assert tool_format(QWEN3_TEMPLATE) is HERMES and "<tool_call>" in QWEN3_TEMPLATE
    assert tool_format(GLM45_TEMPLATE) is GLM45 and tool_format(MISTRAL_TEMPLATE) is MISTRAL
    assert tool_format(CHATML) is None
    assert QWEN3_CODER.openers == ("<tool_call>", "<function=") and HERMES.openers[0] == "<tool_call>"


# ---- parsing (pure) ----------------------------------------------------------------------------

def test_several_calls_and_parameters_with_multiline_and_markup_values():
    s = parse("<tool_call>\n<function=write_file>\n<parameter=path>\nsrc/a.html\n</parameter>\n"
              "<parameter=content>\n<div class=\"x\">\n  <p>1 < 2 && a > b</p>\n</div>\n</function>\n\n"
              "</parameter>\n</function>\n</tool_call>\n"
              "<tool_call>\n<function=get_weather>\n<parameter=city>\nSão Paulo\n</parameter>\n"
              "<parameter=days>\n3\n</parameter>\n</function>\n</tool_call>")
    assert facts(s) == [
        ("write_file", {"path": "src/a.html",
                        "content": '<div class="x">\n  <p>1 < 2 && a > b</p>\n</div>\n</function>\n'}, True, None),
        ("get_weather", {"city": "São Paulo", "days": 3}, True, None)]
    assert not s.stray.strip()
    assert json.loads(s.calls[0].arguments_json())["content"].endswith("</function>\n")


def test_one_newline_is_trimmed_at_each_end_and_nothing_else():
    # vLLM: exactly one leading and one trailing "\n" go (the ones the template writes)
    s = parse("<tool_call>\n<function=write_file>\n<parameter=path>\n\n  a b  \n\n</parameter>\n"
              "<parameter=content>x</parameter><parameter=note>\t\n</parameter></function></tool_call>")
    assert s.calls[0].arguments == {"path": "\n  a b  \n", "content": "x", "note": "\t"}
    assert xml_value("\n\n", {"type": "string"}) == "" and xml_value("\r\nx\r\n", {"type": "string"}) == "\r\nx\r"


@pytest.mark.parametrize("raw, schema, value", [
    ("42", {"type": "string"}, "42"),  # strings stay text
    ("null", {"type": "string"}, "null"),
    ("null", {"type": ["string", "null"]}, None),
    ("null", {}, None),  # vLLM: null for an untyped parameter
    ("[1, 2]", {}, "[1, 2]"),  # vLLM: an untyped parameter is text
    (" 7 ", {"type": "integer"}, 7),
    ("7.0", {"type": "integer"}, 7),
    ("7.5", {"type": "integer"}, 7.5),  # for the schema check to refuse
    ("seven", {"type": "integer"}, "seven"),
    ("2.50", {"type": "number"}, 2.5),
    ("2.0", {"type": "number"}, 2),  # vLLM: an integral number is an integer
    ("1e999", {"type": "number"}, "1e999"),  # no Infinity in JSON
    ("NaN", {"type": "number"}, "NaN"),
    ("True", {"type": "boolean"}, True),  # the template writes Python's True
    ("false", {"type": "boolean"}, False),
    ("yes", {"type": "boolean"}, "yes"),  # vLLM would say false: left for the schema check
    ('{"a": [1, {"b": null}]}', {"type": "object"}, {"a": [1, {"b": None}]}),
    ("{'a': 1, 'b': [True, None]}", {"type": "object"}, {"a": 1, "b": [True, None]}),  # the first template
    ("[1, 2]", {"type": "object"}, "[1, 2]"),
    ('["x", "y"]', {"type": "array"}, ["x", "y"]),
    ("['x']", {"type": "array"}, ["x"]),
    ("[NaN]", {"type": "array"}, "[NaN]"),
    ("{1, 2}", {"type": "array"}, "{1, 2}"),  # a Python set is no JSON
    ("None", {"type": ["integer", "null"]}, None),  # the template writes None for null
    ("3", {"anyOf": [{"type": "integer"}, {"type": "boolean"}]}, 3),
    ("true", {"anyOf": [{"type": "integer"}, {"type": "boolean"}]}, True),
    ("2", {"enum": [1, 2, 3]}, 2),
    ("b", {"enum": ["a", "b"]}, "b"),
])
def test_values_are_typed_by_the_parameters_schema(raw, schema, value):
    got = xml_value("\n" + raw + "\n", schema)
    assert got == value and type(got) is type(value)


def test_parameters_are_typed_in_a_call_and_undeclared_ones_stay_text():
    s = parse("<tool_call>\n<function=write_file>\n<parameter=path>\n1\n</parameter>\n<parameter=mode>\n644\n"
              "</parameter>\n<parameter=overwrite>\ntrue\n</parameter>\n<parameter=extra>\n5\n</parameter>\n"
              "</function>\n</tool_call>")
    assert s.calls[0].arguments == {"path": "1", "mode": 644, "overwrite": True, "extra": "5"}
    other = QWEN3_CODER.parse("\n<function=undeclared>\n<parameter=n>\n5\n</parameter>\n</function>\n</tool_call>",
                              SCHEMAS)
    assert facts(other) == [("undeclared", {"n": "5"}, True, None)]


def test_a_call_without_its_tool_call_opener_is_a_call():
    # Qwen3-Coder often drops the <tool_call> and still closes it: the section starts at <function=
    # (generation passes that opener along) and the orphan </tool_call> is no stray text
    s = QWEN3_CODER.parse("<function=get_weather>\n<parameter=city>\nOslo\n</parameter>\n</function>\n</tool_call>\n"
                          "<function=get_weather>\n<parameter=city>\nRome\n</parameter>\n</function>", SCHEMAS)
    assert facts(s) == [("get_weather", {"city": "Oslo"}, True, None), ("get_weather", {"city": "Rome"}, True, None)]
    assert not s.stray.strip()
    after = parse("<tool_call>\n<function=get_weather>\n<parameter=city>\nA\n</parameter>\n</function>\n</tool_call>"
                  "\n<function=get_weather>\n<parameter=city>\nB\n</parameter>\n</function>\n</tool_call>")
    assert [c.arguments["city"] for c in after.calls] == ["A", "B"]


@pytest.mark.parametrize("text, want", [
    # cut off: no call (its section comes back as text), the problem says where
    ("<tool_call>\n<function=get_wea", ("", None, False, "the call is cut off in its function name")),
    ("<tool_call>\n<function=get_weather>\n<parameter=ci",
     ("", {}, False, "the call to 'get_weather' is cut off before </function>")),
    ("<tool_call>\n<function=get_weather>\n<parameter=city>\nPar",
     ("", {"city": "Par"}, False, "the call to 'get_weather' is cut off before </function>")),
    ("<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n",
     ("", {"city": "Paris"}, False, "the call to 'get_weather' is cut off before </function>")),
    # malformed but closed: the call, with what is wrong with it
    ("<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</tool_call>",
     ("get_weather", {"city": "Paris"}, False, "the call is not closed by </function>")),
    ("<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n<parameter=days>\n2\n</function>\n</tool_call>",
     ("get_weather", {"city": "Paris", "days": 2}, True, "the value of 'city' is not closed by </parameter>")),
    ("<tool_call>\n<function=get_weather>\nin Paris please\n<parameter=city>\nParis\n</parameter>\n</function>",
     ("get_weather", {"city": "Paris"}, True, "the call holds text outside <parameter=...> blocks")),
    ("<tool_call>\n<function=get weather>\n</function>\n</tool_call>", ("", {}, True, "the call has no function name")),
    ("<tool_call>\n<function=>\n</function>", ("", {}, True, "the call has no function name")),
    # not this format at all
    ('<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>',
     ("", None, True, "the <tool_call> block holds no <function=NAME>")),
    ("<tool_call>\n%%% garbage <<>> </parameter>", ("", None, False, "the <tool_call> block holds no <function=NAME>")),
])
def test_malformed_and_cut_off_calls_parse_without_raising(text, want):
    (call,) = parse(text).calls
    assert (call.name, call.arguments, call.complete, call.problem) == want


def test_a_second_function_ends_an_unclosed_first():
    s = parse("<tool_call>\n<function=get_weather>\n<parameter=city>\nA\n</parameter>\n"
              "<function=get_weather>\n<parameter=city>\nB\n</parameter>\n</function>\n</tool_call>")
    assert facts(s) == [("get_weather", {"city": "A"}, False, "the call is not closed by </function>"),
                        ("get_weather", {"city": "B"}, True, None)]


# ---- strict checks on the typed values (pure) --------------------------------------------------

def call_text(name: str, **params: str) -> str:
    body = "".join(f"<parameter={k}>\n{v}\n</parameter>\n" for k, v in params.items())
    return f"<tool_call>\n<function={name}>\n{body}</function>\n</tool_call>"


@pytest.mark.parametrize("text, cut_off, words", [
    (call_text("get_weather", city="Paris", days="two"), False, "arguments.days: expected integer, got str"),
    (call_text("get_weather", city="Paris", days="2.5"), False, "expected integer, got float"),
    (call_text("get_weather", days="2"), False, "missing required 'city'"),
    (call_text("get_weather", city="Paris", town="x"), False, "unknown property 'town'"),
    (call_text("get_time"), False, "names a function that was not declared"),
    (call_text("write_file", path="a", content="b", overwrite="maybe"), False, "expected boolean"),
    (call_text("write_file", path="a", content="b", tags='"x"'), False, "expected array"),
    (call_text("write_file", path="a", content="b", tags="[1]"), False, "arguments.tags[0]: expected string"),
    (call_text("write_file", path="a", content="b", pick="4"), False, "is not one of"),
    (call_text("get_weather", city="A") + "\n" + call_text("get_weather", city="A"), False, "duplicates"),
    ("<tool_call>\n<function=get_weather>\n<parameter=city>\nPar", True, "cut off by the generation limit"),
    ("<tool_call>\n<function=get_weather>\n<parameter=city>\nPar", False, "cut off before </function>"),
    ("<tool_call>\n<function=get_weather>\n<parameter=city>\nA\n</parameter>\n</tool_call>", False,
     "not closed by </function>"),
    ('<tool_call>\n{"name": "get_weather", "arguments": {}}\n</tool_call>', False, "holds no <function=NAME>"),
])
def test_strict_refuses_what_cannot_be_executed(text, cut_off, words):
    found = strict_problems(parse(text), SCHEMAS, cut_off)
    assert any(words in p for p in found), found


def test_strict_accepts_valid_typed_calls():
    ok = parse(call_text("write_file", path="a.py", content="x = 1\n", mode="420", ratio="0.5", overwrite="False",
                         meta='{"k": "v"}', tags='["a", "b"]', note="null", limit="None", level="true", pick="3")
               + "\n" + call_text("get_weather", city="Oslo"))
    assert strict_problems(ok, SCHEMAS, cut_off=False) == []
    assert strict_problems(ok, SCHEMAS, cut_off=True) == []  # the limit came after whole calls
    assert ok.calls[0].arguments == {"path": "a.py", "content": "x = 1\n", "mode": 420, "ratio": 0.5,
                                     "overwrite": False, "meta": {"k": "v"}, "tags": ["a", "b"], "note": None,
                                     "limit": None, "level": True, "pick": 3}


# ---- rendering through the real template, and back (pure) ------------------------------------

ARGS = {"path": "src/app.py", "content": "def f():\n    return '<tag>' if a < b else \"</parameter\"\n",
        "mode": 420, "ratio": 0.25, "overwrite": True, "meta": {"owner": "me", "n": [1, 2]}, "tags": ["x", "y"]}


def history(arguments) -> list[Message]:
    call = {"id": "call_0123456789", "type": "function", "function": {"name": "write_file", "arguments": arguments}}
    return [Message("user", "Write it."), Message("assistant", "Writing the file.", tool_calls=[call]),
            Message("tool", "written", tool_call_id="call_0123456789"),
            Message("tool", "checked", tool_call_id="call_0123456789"), Message("user", "Thanks.")]


def assistant_turn(text: str) -> str:
    start = text.index("<|im_start|>assistant") + len("<|im_start|>assistant")
    return text[start:text.index("<|im_end|>", start)]


@pytest.mark.parametrize("template", [TEMPLATE, FIRST_TEMPLATE], ids=["published", "first"])
def test_a_rendered_call_parses_back_to_its_arguments(template):
    fmt = ChatFormat(ChatTemplate(template))
    text = fmt.render(history(ARGS), tools=[EDIT]).text
    turn = assistant_turn(text)
    assert turn.startswith("\nWriting the file.\n\n<tool_call>\n<function=write_file>\n<parameter=path>\nsrc/app.py\n"
                           "</parameter>\n")
    assert turn.endswith("</parameter>\n</function>\n</tool_call>")
    assert "<parameter=overwrite>\nTrue\n</parameter>" in turn  # the template's `| string`
    content, _, section = turn.partition(QWEN3_CODER.opener)
    (call,) = QWEN3_CODER.parse(section, SCHEMAS).calls
    assert (call.name, call.arguments, call.complete, call.problem) == ("write_file", ARGS, True, None)
    assert strict_problems(QWEN3_CODER.parse(section, SCHEMAS), SCHEMAS, cut_off=False) == []


def test_tools_and_results_render_as_the_template_writes_them():
    text = ChatFormat(ChatTemplate(TEMPLATE)).render(history(ARGS), tools=[EDIT, WEATHER]).text
    assert text.startswith("<|im_start|>system\nYou are Qwen, a helpful AI assistant")
    assert ("<tools>\n<function>\n<name>write_file</name>\n<description>Write a file</description>\n<parameters>\n"
            "<parameter>\n<name>path</name>\n<type>string</type>\n</parameter>") in text
    assert "<name>get_weather</name>" in text and '<required>["path", "content"]</required>' in text
    # consecutive tool results share one user turn
    assert ("<|im_start|>user\n<tool_response>\nwritten\n</tool_response>\n<tool_response>\nchecked\n"
            "</tool_response>\n<|im_end|>\n<|im_start|>user\nThanks.<|im_end|>\n<|im_start|>assistant\n") in text


def test_arguments_sent_as_a_json_string_render_as_the_mapping():
    # OpenAI sends arguments as a JSON string; the template iterates `arguments|items`
    for template in (TEMPLATE, QWEN3_TEMPLATE):  # and Hermes templates read either form the same
        fmt = ChatFormat(ChatTemplate(template))
        as_text = fmt.render(history(json.dumps(ARGS)), tools=[EDIT]).text
        assert as_text == fmt.render(history(ARGS), tools=[EDIT]).text
    with pytest.raises(InvalidRequest) as err:  # not an object: the template cannot write its parameters
        ChatFormat(ChatTemplate(TEMPLATE)).render(history("not json"), tools=[EDIT])
    assert err.value.code == "invalid_value" and err.value.param == "messages"


def test_a_forced_call_opens_as_the_template_writes_a_call():
    opening = QWEN3_CODER.call_opening("get_weather")
    assert opening == "<tool_call>\n<function=get_weather>\n"
    fmt = ChatFormat(ChatTemplate(TEMPLATE))
    past = [Message("user", "hi"), Message("assistant", "", tool_calls=[
        {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Oslo"}}}])]
    assert "<|im_start|>assistant\n" + opening + "<parameter=city>" in fmt.render(past + [
        Message("tool", "sunny", tool_call_id="call_1")], tools=[WEATHER]).text
    offered, msgs, setup = plan_tools(fmt, Tools([WEATHER, EDIT], ToolChoice("function", "get_weather")),
                                      [Message("user", "Weather in Oslo?")])
    prompt, setup = open_forced_call(fmt.render(msgs, tools=offered), setup)
    assert offered == [WEATHER] and setup.format is QWEN3_CODER and setup.opened == opening
    assert prompt.text.endswith("<|im_start|>assistant\n" + opening)
    rest = "<parameter=city>\nOslo\n</parameter>\n</function>\n</tool_call>"  # what the model writes
    (call,) = QWEN3_CODER.parse(opening[len(QWEN3_CODER.opener):] + rest, SCHEMAS).calls
    assert (call.name, call.arguments, call.complete, call.problem) == ("get_weather", {"city": "Oslo"}, True, None)


# ---- the stream stage: serving's tool section over the reply text (no engine) ---------------

def through_section(reply: str, step: int, strict: bool = False, opened: str = "", finish: str = "stop"):
    """The reply fed in `step`-character pieces through the section filter generation.py uses,
    then its calls as Session reads them: (streamed text, OpenAI calls or None, outcome)."""
    setup = ToolSetup(QWEN3_CODER, SCHEMAS, strict, opened=opened)
    section = StopFilter(list(QWEN3_CODER.openers))
    if opened:
        section.assume_matched(QWEN3_CODER.opener, opened[len(QWEN3_CODER.opener):])
    shown = "".join(section.feed(reply[i:i + step]) for i in range(0, len(reply), step)) + section.flush()
    outcome = Outcome(finish_reason=finish)
    calls = Session._tool_calls(setup, section, outcome) if section.matched is not None else None
    return shown, calls, outcome


@pytest.mark.parametrize("step", [1, 2, 3, 5, 7, 1000])
def test_the_section_splits_the_same_however_the_text_arrives(step):
    reply = "I'll check.\n\n" + call_text("get_weather", city="Oslo", days="2")
    shown, calls, outcome = through_section(reply, step)
    assert shown == "I'll check.\n\n" and outcome.finish_reason == "tool_calls"
    assert [c["function"] for c in calls] == [{"name": "get_weather", "arguments": '{"city": "Oslo", "days": 2}'}]
    bare = "Checking.\n<function=get_weather>\n<parameter=city>\nOslo\n</parameter>\n</function>\n</tool_call>"
    shown, calls, _ = through_section(bare, step)
    assert shown == "Checking.\n" and calls[0]["function"]["arguments"] == '{"city": "Oslo"}'


def test_a_cut_off_or_garbled_section_is_text_or_a_named_refusal():
    for reply in ("<tool_call>\n<function=get_weather>\n<parameter=city>\nOs", "<tool_call>\nnonsense",
                  "<function=get_weather", "a <function= b"):
        shown, calls, outcome = through_section(reply, 3, finish="length")
        assert calls is None and outcome.finish_reason == "length" and outcome.tool_calls == []  # the caller
        with pytest.raises(ModelOutputRefused) as err:  # returns the section as text; strict refuses
            through_section(reply, 3, strict=True, finish="length")
        assert err.value.code == "invalid_model_tool_call" and "cut off" in str(err.value)
    opening = QWEN3_CODER.call_opening("get_weather")
    shown, calls, _ = through_section("<parameter=city>\nOs", 4, opened=opening, finish="length")
    assert shown == "" and calls is None
    shown, calls, _ = through_section("<parameter=city>\nOslo\n</parameter>\n</function>\n</tool_call>", 4,
                                      opened=opening, strict=True)
    assert [c["function"]["arguments"] for c in calls] == ['{"city": "Oslo"}']


# ---- end to end on the real engine ---------------------------------------------------------

MODEL = "gemma-qwen3-coder-template"
CFG = ServeConfig(model_id=MODEL, kv_slots=1, ctx=1024, threads=2, kv_persist=False)
SAID = call_text("get_weather", city="Paris", days="3")
BARE = "<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>\n</tool_call>"


@pytest.fixture(scope="module")
def served(default_model):
    s = open_served(CFG, with_chat_template(default_model, TEMPLATE, "qwen3-coder-template"))
    yield s
    close_served(s)


def chat(served, cfg, requests: list[dict]) -> list:
    async def body(c, served):
        out = []
        for extra in requests:
            r = await c.post("/v1/chat/completions", json={"model": cfg.model_id, "temperature": 0, "max_tokens": 48,
                                                           **extra})
            out.append((r.status, await r.json() if r.content_type == "application/json" else await r.text()))
        return out

    return run_app(served, body, cfg)


def said(user: str, **kw) -> dict:
    return {"messages": [{"role": "user", "content": user}], "tools": [WEATHER], **kw}


def test_generated_calls_come_back_as_tool_calls(served):
    (s1, whole), (s2, bare), (s3, before) = chat(served, CFG, [said(SAID), said(BARE), said("Sure.\n" + SAID)])
    assert (s1, s2, s3) == (200, 200, 200)
    for body, args in ((whole, {"city": "Paris", "days": 3}), (bare, {"city": "Paris"}), (before, None)):
        choice = body["choices"][0]
        assert choice["finish_reason"] == "tool_calls", body
        (call,) = choice["message"]["tool_calls"]
        assert call["type"] == "function" and call["function"]["name"] == "get_weather"
        assert json.loads(call["function"]["arguments"]) == (args or {"city": "Paris", "days": 3})
    assert whole["choices"][0]["message"]["content"] is None and bare["choices"][0]["message"]["content"] is None
    assert before["choices"][0]["message"]["content"] == "Sure.\n"  # the text before the call


def test_streamed_calls_come_after_all_text(served):
    ((status, raw),) = chat(served, CFG, [said("Sure.\n" + SAID, stream=True)])
    events = [json.loads(b[6:]) if b[6:] != "[DONE]" else "[DONE]" for b in raw.split("\n\n")[:-1]]
    assert status == 200 and events[-1] == "[DONE]"
    deltas = [e["choices"][0]["delta"] for e in events[:-1]]
    calls_at = [i for i, d in enumerate(deltas) if "tool_calls" in d]
    assert len(calls_at) == 1 and all("content" not in d for d in deltas[calls_at[0]:])
    assert "".join(d.get("content", "") for d in deltas) == "Sure.\n"  # no XML in the text
    assert json.loads(deltas[calls_at[0]]["tool_calls"][0]["function"]["arguments"]) == {"city": "Paris", "days": 3}
    assert events[-2]["choices"][0]["finish_reason"] == "tool_calls"


def test_strict_checks_the_schema_typed_values(served):
    (ok, body), (bad, refused), (cut, short) = chat(served, CFG, [
        said(SAID, strict_tool_calls=True), said(SAID.replace("\n3\n", "\nthree\n"), strict_tool_calls=True),
        said(SAID, strict_tool_calls=True, max_tokens=8)])
    assert ok == 200 and json.loads(body["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"]) == {
        "city": "Paris", "days": 3}
    assert bad == 502 and refused["error"]["code"] == "invalid_model_tool_call"
    assert "arguments.days: expected integer, got str" in refused["error"]["message"]
    assert cut == 502 and "cut off" in short["error"]["message"]


def test_a_cut_off_call_comes_back_as_text(served):
    ((status, body),) = chat(served, CFG, [said(SAID, max_tokens=18)])
    choice = body["choices"][0]
    assert status == 200 and choice["finish_reason"] == "length" and "tool_calls" not in choice["message"]
    assert choice["message"]["content"].startswith(QWEN3_CODER.call_opening("get_weather") + "<param"), choice


def test_the_call_and_its_result_go_back_through_the_template(served):
    ((_, first),) = chat(served, CFG, [said(SAID)])
    message = first["choices"][0]["message"]
    call = message["tool_calls"][0]
    follow = {"messages": [{"role": "user", "content": SAID}, {k: v for k, v in message.items() if v is not None},
                           {"role": "tool", "tool_call_id": call["id"], "content": "sunny, 21 C"}],
              "tools": [WEATHER], "max_tokens": 4}
    ((status, body),) = chat(served, CFG, [follow])
    assert status == 200, body
    assert body["usage"]["prompt_tokens"] > first["usage"]["prompt_tokens"] + 20  # the call and result rendered


def test_tiny_qwen3moe_serves_a_forced_call():
    """A qwen3moe fixture (random weights) with the Qwen3-Coder template: a named tool_choice
    renders the tools and opens the call in the prompt; what the model writes there is no
    closed call, so it comes back as text (the opening included), or strict refuses it."""
    from tests.fixtures.moe_models import tiny

    cfg = ServeConfig(model_id="coder", kv_slots=1, ctx=4096, threads=2, kv_persist=False)
    s = open_served(cfg, with_chat_template(tiny("qwen3moe", "Q8_0"), TEMPLATE, "qwen3-coder"))
    force = {"tool_choice": {"type": "function", "function": {"name": "get_weather"}}, "max_tokens": 12}
    try:
        assert s.arch == "qwen3moe" and s.chat_format.tool_format is QWEN3_CODER
        (_, plain), (_, forced), (_, streamed), (strict, refused) = chat(s, cfg, [
            said("hi", tool_choice="none", max_tokens=4), said("hi", **force), said("hi", stream=True, **force),
            said("hi", strict_tool_calls=True, **force)])
    finally:
        close_served(s)
    assert forced["usage"]["prompt_tokens"] > plain["usage"]["prompt_tokens"] + 100  # the tools were rendered
    choice = forced["choices"][0]
    assert choice["finish_reason"] in ("length", "stop") and "tool_calls" not in choice["message"]
    assert choice["message"]["content"].startswith(QWEN3_CODER.call_opening("get_weather"))
    events = [json.loads(b[6:]) for b in streamed.split("\n\n")[:-1] if b[6:] != "[DONE]"]
    assert streamed.endswith("data: [DONE]\n\n") and events[-1]["choices"][0]["finish_reason"] in ("length", "stop")
    assert "".join(e["choices"][0]["delta"].get("content") or "" for e in events) == choice["message"]["content"]
    assert strict == 502 and refused["error"]["code"] == "invalid_model_tool_call"
