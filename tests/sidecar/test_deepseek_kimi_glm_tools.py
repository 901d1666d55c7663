"""DeepSeek (V3/R1, V3.1, V3.2), Kimi K2 and GLM-4.7/GLM-5: their real templates
(tests/sidecar/templates/, see its README), the tool-call format each one teaches, the
reasoning block each one opens, and the built-ins for model files that carry no template.

Pure functions on the real templates: detection, rendering (system, tools, calls, results,
several turns, reasoning), calls parsed whole, in small pieces, and cut off, a rendered call
parsed back to itself, forced-call openings, Kimi's call ids, the reasoning split, and the
control tokens a served model shows. End to end: a tiny qwen3moe fixture (random weights)
wearing each family's template serves a forced call through the real server.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from colibri.api.anthropic import tool_use
from colibri.chat.builtin_templates import BY_ARCH, TURN_OPENERS
from colibri.chat.messages import Message, Thinking
from colibri.chat.prompt import ChatFormat
from colibri.chat.reasoning import ReasoningSplitter
from colibri.chat.stops import StopFilter
from colibri.chat.template import ChatTemplate
from colibri.chat.tools import GLM45, strict_problems, tool_format
from colibri.chat.tools_deepseek import DEEPSEEK_DSML, DEEPSEEK_V3, DEEPSEEK_V4_DSML, DEEPSEEK_V31
from colibri.chat.tools_kimi import KIMI_K2
from colibri.errors import ModelOutputRefused
from colibri.serve_config import ServeConfig
from colibri.serving.generation import Outcome, Session, ToolSetup
from colibri.serving.model import ServedModel, chat_format_for
from colibri.serving.requests import ToolChoice, Tools
from colibri.serving.tool_plan import open_forced_call, plan_tools
from tests.sidecar.serve_support import close_served, open_served, run_app

HERE = Path(__file__).parent / "templates"
T = {p.stem: p.read_text() for p in HERE.glob("*.jinja")}
BOS = {"deepseek": "<｜begin▁of▁sentence｜>"}

WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "The weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
                   "required": ["city"], "additionalProperties": False}}}
CLOCK = {"type": "function", "function": {
    "name": "get_time", "description": "The time in a zone",
    "parameters": {"type": "object", "properties": {"zone": {"type": "string"}}, "required": ["zone"]}}}
SCHEMAS = {t["function"]["name"]: t["function"]["parameters"] for t in (WEATHER, CLOCK)}
ARGS = {"city": "Oslo <North>", "days": 2}


def fmt_of(name: str) -> ChatFormat:
    return ChatFormat(ChatTemplate(T[name], bos_token=BOS.get(name[:8], ""), eos_token=""))


def history(call_id: str = "call_0123456789", arguments=None) -> list[Message]:
    """A tool loop: system, a question, a call with reasoning, its result, the answer, a new question."""
    call = {"id": call_id, "type": "function",
            "function": {"name": "get_weather", "arguments": ARGS if arguments is None else arguments}}
    return [Message("system", "Be brief."), Message("user", "Weather in Oslo?"),
            Message("assistant", "", reasoning_content="The tool knows.", tool_calls=[call]),
            Message("tool", "sunny, 21 C", tool_call_id=call_id, name="get_weather"),
            Message("assistant", "Sunny, 21 C."), Message("user", "And tomorrow?")]


# ---- which format, which reasoning -------------------------------------------------------

@pytest.mark.parametrize("name, fmt, reasons", [
    ("deepseek_r1", DEEPSEEK_V3, True), ("deepseek_v31", DEEPSEEK_V31, True),
    ("deepseek_v31_llamacpp", DEEPSEEK_V31, True), ("deepseek_v32", DEEPSEEK_DSML, True),
    ("kimi_k2_first", KIMI_K2, False), ("kimi_k2_instruct", KIMI_K2, False),
    ("kimi_k2_instruct_0905", KIMI_K2, False), ("kimi_k2_thinking", KIMI_K2, True),
    ("glm46", GLM45, True), ("glm47_flash", GLM45, True)])
def test_each_real_template_speaks_its_familys_format(name, fmt, reasons):
    assert tool_format(T[name]) is fmt
    assert fmt_of(name).has_reasoning is reasons


def test_the_openers_and_markers_of_the_new_formats():
    assert DEEPSEEK_V31.openers == ("<｜tool▁calls▁begin｜>", "<｜tool▁call▁begin｜>") == DEEPSEEK_V3.openers
    assert DEEPSEEK_DSML.openers == ("<｜DSML｜function_calls>", "<｜DSML｜invoke")
    assert DEEPSEEK_V4_DSML.opener == "<｜DSML｜tool_calls>"
    assert KIMI_K2.openers == ("<|tool_calls_section_begin|>", "<|tool_call_begin|>")
    assert "<|tool_call_argument_begin|>" in KIMI_K2.markers and "<｜tool▁sep｜>" in DEEPSEEK_V31.markers
    assert "｜DSML｜" in DEEPSEEK_DSML.markers and "<arg_value>" in GLM45.markers
    assert fmt_of("kimi_k2_thinking").markers[-2:] == ("<think>", "</think>")


def test_built_ins_by_architecture_and_the_files_own_template_wins(tmp_path):
    import gguf

    assert BY_ARCH["deepseek2"] == T["deepseek_v31"] and BY_ARCH["deepseek32"] == T["deepseek_v32"]
    assert BY_ARCH["glm-dsa"] == T["glm47_flash"]

    def gguf_file(name: str, template: str | None) -> str:
        path = str(tmp_path / name)
        w = gguf.GGUFWriter(path, "deepseek2")
        if template:
            w.add_chat_template(template)
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
        w.close()
        return path

    bare = chat_format_for(gguf_file("bare.gguf", None), "deepseek2", FakeEngine())
    kimi = chat_format_for(gguf_file("kimi.gguf", T["kimi_k2_instruct_0905"]), "deepseek2", FakeEngine())
    assert bare.template.source == T["deepseek_v31"] and bare.tool_format is DEEPSEEK_V31
    assert kimi.template.source == T["kimi_k2_instruct_0905"] and kimi.tool_format is KIMI_K2  # Kimi's arch too


def test_the_sandbox_has_what_these_templates_use_and_stays_immutable_otherwise():
    from colibri.chat.template import TemplateRefused

    def render(source: str, **kw) -> str:
        return ChatTemplate(source).render([{"role": "user", "content": "hi"}], False, **kw)

    assert render("{% generation %}<{{ messages[0].content }}>{% endgeneration %}") == "<hi>"
    assert render("{{ ('{\"a\": [1]}' | from_json).a[0] }}") == "1"
    assert render("{% set ns = namespace(q=[]) %}{% set _ = ns.q.append(1) %}{{ ns.q.pop(0) }}{{ ns.q|length }}") \
        == "10"
    with pytest.raises(TemplateRefused):  # dicts (and other list methods) stay immutable
        render("{% set _ = messages[0].update({'content': 'x'}) %}")
    with pytest.raises(TemplateRefused):
        render("{% set _ = messages.clear() %}")


def test_what_a_template_expects_of_its_messages_is_read_from_its_source():
    facts = {name: (t.renders_tools, t.arguments_as_text, t.none_for_no_content, t.reads_thinking)
             for name, t in ((n, ChatTemplate(T[n])) for n in T)}
    assert facts["deepseek_v31"] == (False, True, True, True)  # DeepSeek's own
    assert facts["deepseek_r1"] == (False, True, True, False)
    assert facts["deepseek_v31_llamacpp"] == (False, False, False, True)  # llama.cpp's: `| tojson`
    assert facts["deepseek_v32"] == (True, False, False, True)
    for name in ("kimi_k2_first", "kimi_k2_instruct", "kimi_k2_instruct_0905", "kimi_k2_thinking", "glm46",
                 "glm47_flash"):
        assert facts[name] == (True, False, False, False), name


# ---- rendering -----------------------------------------------------------------------------

def test_deepseek_v31_renders_the_model_cards_tool_prompt_and_its_calls_as_json_text():
    text = fmt_of("deepseek_v31").render(history(), tools=[WEATHER]).text
    head, _, turns = text.partition("<｜User｜>")
    assert head.startswith("<｜begin▁of▁sentence｜>Be brief.\n\n## Tools\nYou have access to the following tools:\n\n"
                           "### get_weather\nDescription: The weather in a city\n\nParameters: {\"type\": \"object\"")
    assert head.endswith("- For multiple tool calls, chain them directly without separators or spaces")
    assert turns == ("Weather in Oslo?<｜Assistant｜></think><｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather"
                     '<｜tool▁sep｜>{"city": "Oslo <North>", "days": 2}<｜tool▁call▁end｜><｜tool▁calls▁end｜>'
                     "<｜end▁of▁sentence｜><｜tool▁output▁begin｜>sunny, 21 C<｜tool▁output▁end｜>Sunny, 21 C."
                     "<｜end▁of▁sentence｜><｜User｜>And tomorrow?<｜Assistant｜></think>")
    # the arguments go in as the text they came as; the template adds them to text
    assert fmt_of("deepseek_v31").render(history(arguments=json.dumps(ARGS)), tools=[WEATHER]).text == text


def test_deepseek_r1_renders_fenced_calls_from_a_turn_with_no_content():
    text = fmt_of("deepseek_r1").render(history(), tools=[WEATHER]).text
    assert text.startswith("<｜begin▁of▁sentence｜>Be brief.\n\nYou can call any of the following function tools")
    assert ('<｜Assistant｜><｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n'
            '{"city": "Oslo <North>", "days": 2}\n```<｜tool▁call▁end｜>') in text  # content None: the call is written
    assert "<｜tool▁outputs▁begin｜><｜tool▁output▁begin｜>sunny, 21 C<｜tool▁output▁end｜>" in text
    assert text.endswith("<｜User｜>And tomorrow?<｜Assistant｜><think>\n")


def test_deepseek_v32_renders_its_own_tool_list_dsml_calls_and_results():
    text = fmt_of("deepseek_v32").render(history(), tools=[WEATHER], thinking=Thinking(enable=True)).text
    assert "## Tools\n\nYou have access to a set of tools" in text and '"name": "get_weather"' in text
    assert text.count("## Tools") == 1  # it writes its own list: no second one
    assert ('<｜Assistant｜></think>\n\n<｜DSML｜function_calls>\n<｜DSML｜invoke name="get_weather">\n'
            '<｜DSML｜parameter name="city" string="true">Oslo <North></｜DSML｜parameter>\n'
            '<｜DSML｜parameter name="days" string="false">2</｜DSML｜parameter>\n</｜DSML｜invoke>\n'
            '</｜DSML｜function_calls><｜end▁of▁sentence｜>\n\n<function_results>\n<result>sunny, 21 C</result>\n'
            '</function_results>') in text
    assert text.endswith("<｜User｜>And tomorrow?<｜Assistant｜><think>")


def test_kimi_renders_tools_calls_and_results_under_the_models_own_ids():
    for name in ("kimi_k2_instruct_0905", "kimi_k2_instruct", "kimi_k2_thinking"):
        text = fmt_of(name).render(history("functions.get_weather:0"), tools=[WEATHER]).text
        assert text.startswith('<|im_system|>tool_declare<|im_middle|>'), name
        assert ('<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>'
                '{"city": "Oslo <North>", "days": 2}<|tool_call_end|><|tool_calls_section_end|><|im_end|>') in text
        assert "## Return of functions.get_weather:0\n" in text, name
        assert text.endswith("<|im_user|>user<|im_middle|>And tomorrow?<|im_end|>"
                             "<|im_assistant|>assistant<|im_middle|>"), name


def test_kimi_gives_another_servers_ids_its_own_form_in_the_prompt():
    text = fmt_of("kimi_k2_instruct_0905").render(history("toolu_01ABC"), tools=[WEATHER]).text
    assert "toolu_01ABC" not in text
    assert "<|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>" in text
    assert "## Return of functions.get_weather:0" in text
    two = history("call_a") + [Message("assistant", "", tool_calls=[
        {"id": "call_b", "type": "function", "function": {"name": "get_time", "arguments": {"zone": "CET"}}}]),
        Message("tool", "12:00", tool_call_id="call_b")]
    text = fmt_of("kimi_k2_instruct_0905").render(two, tools=[WEATHER, CLOCK]).text
    assert "functions.get_time:1<|tool_call_argument_begin|>" in text and "## Return of functions.get_time:1" in text


def test_glm47_renders_calls_without_newlines_and_keeps_the_reasoning_of_this_turn():
    loop = history()[:4]  # the call and its result are after the last question: its reasoning stays
    text = fmt_of("glm47_flash").render(loop, tools=[WEATHER]).text
    assert text.startswith("[gMASK]<sop><|system|>\n# Tools\n")
    assert ("<|system|>Be brief.<|user|>Weather in Oslo?<|assistant|><think>The tool knows.</think><tool_call>"
            "get_weather<arg_key>city</arg_key><arg_value>Oslo <North></arg_value><arg_key>days</arg_key>"
            "<arg_value>2</arg_value></tool_call><|observation|><tool_response>sunny, 21 C</tool_response>"
            "<|assistant|><think>") in text
    later = fmt_of("glm47_flash").render(history(), tools=[WEATHER]).text
    assert "The tool knows." not in later and "<|assistant|></think><tool_call>get_weather" in later


def test_kimi_thinking_and_deepseek_v32_keep_the_reasoning_of_a_tool_loop():
    loop = history()[:4]
    kimi = fmt_of("kimi_k2_thinking").render(loop, tools=[WEATHER]).text
    assert "<|im_middle|><think>The tool knows.</think><|tool_calls_section_begin|>" in kimi
    v32 = fmt_of("deepseek_v32").render(loop, tools=[WEATHER], thinking=Thinking(enable=True)).text
    assert "<｜Assistant｜><think>The tool knows.</think>\n\n<｜DSML｜function_calls>" in v32
    assert v32.endswith("</function_results>\n\n<think>")


# ---- parsing: whole, streamed, cut off -----------------------------------------------------

CALLS = {  # two calls each, as the model writes them after its cue
    DEEPSEEK_V31: ('<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{"city": "Oslo <North>", '
                   '"days": 2}<｜tool▁call▁end｜><｜tool▁call▁begin｜>get_time<｜tool▁sep｜>{"zone": "CET"}'
                   '<｜tool▁call▁end｜><｜tool▁calls▁end｜>'),
    DEEPSEEK_V3: ('<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n'
                  '{"city": "Oslo <North>", "days": 2}\n```<｜tool▁call▁end｜>\n<｜tool▁call▁begin｜>function'
                  '<｜tool▁sep｜>get_time\n```json\n{"zone": "CET"}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>'),
    DEEPSEEK_DSML: ('<｜DSML｜function_calls>\n<｜DSML｜invoke name="get_weather">\n<｜DSML｜parameter name="city" '
                    'string="true">Oslo <North></｜DSML｜parameter>\n<｜DSML｜parameter name="days" string="false">2'
                    '</｜DSML｜parameter>\n</｜DSML｜invoke>\n<｜DSML｜invoke name="get_time">\n<｜DSML｜parameter '
                    'name="zone" string="true">CET</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜function_calls>'),
    KIMI_K2: ('<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:3<|tool_call_argument_begin|>'
              '{"city": "Oslo <North>", "days": 2}<|tool_call_end|><|tool_call_begin|>functions.get_time:4'
              '<|tool_call_argument_begin|>{"zone": "CET"}<|tool_call_end|><|tool_calls_section_end|>'),
    GLM45: ("<tool_call>get_weather<arg_key>city</arg_key><arg_value>Oslo <North></arg_value><arg_key>days</arg_key>"
            "<arg_value>2</arg_value></tool_call><tool_call>get_time<arg_key>zone</arg_key><arg_value>CET</arg_value>"
            "</tool_call>"),
}
WANT = [("get_weather", {"city": "Oslo <North>", "days": 2}), ("get_time", {"zone": "CET"})]
FORMATS = list(CALLS)


def through_section(fmt, reply: str, step: int, strict: bool = False, opened: str = "", finish: str = "stop"):
    """The reply fed in `step`-character pieces through the section filter generation.py uses,
    then its calls as Session reads them: (streamed text, OpenAI calls or None, outcome)."""
    setup = ToolSetup(fmt, SCHEMAS, strict, opened=opened)
    section = StopFilter(list(fmt.openers))
    if opened:
        section.assume_matched(fmt.opener, opened[len(fmt.opener):])
    shown = "".join(section.feed(reply[i:i + step]) for i in range(0, len(reply), step)) + section.flush()
    outcome = Outcome(finish_reason=finish)
    calls = Session._tool_calls(setup, section, outcome) if section.matched is not None else None
    return shown, calls, outcome


@pytest.mark.parametrize("fmt", FORMATS, ids=lambda f: f.name)
def test_two_calls_parse_whole_with_their_arguments(fmt):
    parsed = fmt.parse(CALLS[fmt][len(fmt.opener):], SCHEMAS)
    assert [(c.name, c.arguments, c.complete, c.problem) for c in parsed.calls] == [
        (n, a, True, None) for n, a in WANT]
    assert parsed.stray.strip() == "" and strict_problems(parsed, SCHEMAS, cut_off=False) == []


@pytest.mark.parametrize("step", [1, 2, 3, 7, 1000])
@pytest.mark.parametrize("fmt", FORMATS, ids=lambda f: f.name)
def test_the_section_splits_the_same_however_the_text_arrives(fmt, step):
    shown, calls, outcome = through_section(fmt, "Checking both.\n" + CALLS[fmt], step)
    assert shown == "Checking both.\n" and outcome.finish_reason == "tool_calls"
    assert [(c["function"]["name"], json.loads(c["function"]["arguments"])) for c in calls] == WANT
    assert all(c["type"] == "function" and c["id"] for c in calls)


@pytest.mark.parametrize("fmt", [DEEPSEEK_V31, DEEPSEEK_V3, KIMI_K2], ids=lambda f: f.name)
def test_a_call_without_its_section_opener_is_a_call(fmt):
    bare = CALLS[fmt][len(fmt.opener):]  # starts at <｜tool▁call▁begin｜> / <|tool_call_begin|>
    shown, calls, _ = through_section(fmt, "Sure. " + bare, 4)
    assert shown == "Sure. " and [c["function"]["name"] for c in calls] == ["get_weather", "get_time"]


@pytest.mark.parametrize("fmt", FORMATS, ids=lambda f: f.name)
def test_a_call_cut_off_midway_keeps_the_whole_ones_before_it(fmt):
    text = CALLS[fmt]
    cut = text[:text.index("CET") + 1]  # inside the second call's arguments
    shown, calls, outcome = through_section(fmt, cut, 5, finish="length")
    assert [c["function"]["name"] for c in calls] == ["get_weather"]
    with pytest.raises(ModelOutputRefused) as err:
        through_section(fmt, cut, 5, strict=True, finish="length")
    assert err.value.code == "invalid_model_tool_call" and "cut off" in str(err.value)


@pytest.mark.parametrize("fmt", FORMATS, ids=lambda f: f.name)
def test_a_section_with_only_a_cut_off_call_is_text(fmt):
    text = CALLS[fmt]
    cut = text[:text.index("Oslo") + 2]
    shown, calls, outcome = through_section(fmt, cut, 3, finish="length")
    assert calls is None and outcome.tool_calls == [] and outcome.finish_reason == "length"  # sent as text


@pytest.mark.parametrize("fmt, text", [
    (DEEPSEEK_V31, "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{city: Oslo}<｜tool▁call▁end｜>"),
    (DEEPSEEK_V31, "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather {}<｜tool▁call▁end｜>"),
    (KIMI_K2, "<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0{}<|tool_call_end|>"),
    (DEEPSEEK_DSML, '<｜DSML｜function_calls>\n<｜DSML｜invoke name="">\n</｜DSML｜invoke>'),
])
def test_garbled_calls_are_text_and_strict_names_them(fmt, text):
    _, calls, _ = through_section(fmt, text, 4)
    assert calls is None
    with pytest.raises(ModelOutputRefused):
        through_section(fmt, text, 4, strict=True)


def test_arguments_written_as_a_json_string_are_read_through():
    # what a template's `tojson` of string arguments shows the model, and some models copy
    text = '<｜tool▁call▁begin｜>get_time<｜tool▁sep｜>"{\\"zone\\": \\"CET\\"}"<｜tool▁call▁end｜>'
    (call,) = DEEPSEEK_V31.parse(text, SCHEMAS).calls
    assert (call.name, call.arguments, call.problem) == ("get_time", {"zone": "CET"}, None)


def test_dsml_values_are_typed_by_their_string_attribute():
    body = ('<｜DSML｜invoke name="f">\n<｜DSML｜parameter name="a" string="true">007</｜DSML｜parameter>\n'
            '<｜DSML｜parameter name="b" string="false">[1, {"c": null}]</｜DSML｜parameter>\n'
            '<｜DSML｜parameter name="d" string="false">not json</｜DSML｜parameter>\n</｜DSML｜invoke>')
    (call,) = DEEPSEEK_DSML.parse(body, {}).calls
    assert call.arguments == {"a": "007", "b": [1, {"c": None}], "d": "not json"} and call.complete
    # an invoke left open ends where the next one starts: that one is still a call of its own
    cut, whole = DEEPSEEK_DSML.parse('<｜DSML｜invoke name="f">\n<｜DSML｜parameter name="a" string="true">1\n'
                                     + body.replace('name="f"', 'name="g"'), {}).calls
    assert (cut.name, cut.complete) == ("", False) and (whole.name, whole.arguments["a"]) == ("g", "007")


# ---- round trips: a rendered call parses back to itself ----------------------------------------

ROUND_TRIPS = [("deepseek_v31", "<｜end▁of▁sentence｜>"), ("deepseek_v31_llamacpp", "<｜end▁of▁sentence｜>"),
               ("deepseek_r1", "<｜tool▁outputs▁begin｜>"), ("deepseek_v32", "<｜end▁of▁sentence｜>"),
               ("kimi_k2_instruct_0905", "<|im_end|>"), ("kimi_k2_thinking", "<|im_end|>"),
               ("kimi_k2_first", "<|im_end|>"), ("glm47_flash", "<|observation|>"), ("glm46", "<|observation|>")]


@pytest.mark.parametrize("name, turn_end", ROUND_TRIPS)
def test_a_rendered_call_parses_back_to_the_same_call(name, turn_end):
    fmt = fmt_of(name)
    two = [Message("user", "Weather in Oslo, and the time?"), Message("assistant", "", tool_calls=[
        {"id": "functions.get_weather:0", "type": "function", "function": {"name": "get_weather", "arguments": ARGS}},
        {"id": "functions.get_time:1", "type": "function", "function": {"name": "get_time",
                                                                          "arguments": {"zone": "CET"}}}]),
           Message("tool", "sunny", tool_call_id="functions.get_weather:0"),
           Message("tool", "12:00", tool_call_id="functions.get_time:1")]
    text = fmt.render(two, tools=[WEATHER, CLOCK]).text
    tools = fmt.tool_format
    start = text.index(tools.opener, text.index("and the time?"))
    section = text[start + len(tools.opener):text.index(turn_end, start)]
    parsed = tools.parse(section, SCHEMAS)
    assert [(c.name, c.arguments, c.complete, c.problem) for c in parsed.calls] == [(n, a, True, None) for n, a in WANT]
    if tools is KIMI_K2:
        assert [c.id for c in parsed.calls] == ["functions.get_weather:0", "functions.get_time:1"]


# ---- forced calls ----------------------------------------------------------------------------

@pytest.mark.parametrize("name, opening", [
    ("deepseek_v31", "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>"),
    ("deepseek_r1", "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n"),
    ("deepseek_v32", '<｜DSML｜function_calls>\n<｜DSML｜invoke name="get_weather">\n'),
    ("kimi_k2_instruct_0905", "<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:1"
                              "<|tool_call_argument_begin|>"),
    ("glm47_flash", "<tool_call>get_weather")])
def test_a_forced_call_opens_as_the_template_writes_a_call(name, opening):
    fmt = fmt_of(name)
    asked = history()[:4] + [Message("user", "And in Bergen?")]  # one past call: Kimi's next is number 1
    offered, msgs, setup = plan_tools(fmt, Tools([WEATHER, CLOCK], ToolChoice("function", "get_weather")), asked)
    prompt, setup = open_forced_call(fmt.render(msgs, tools=offered, thinking=Thinking(enable=False)), setup)
    if name == "deepseek_r1":  # R1 always opens <think>: the call would land in the reasoning, so none is opened
        assert prompt.in_reasoning and setup.opened == "" and fmt.tool_format.call_opening("get_weather") == opening
        return
    assert setup.opened == opening and prompt.text.endswith(opening) and offered == [WEATHER]
    rest = {"deepseek_v31": '{"city": "Bergen"}<｜tool▁call▁end｜><｜tool▁calls▁end｜>',
            "deepseek_v32": '<｜DSML｜parameter name="city" string="true">Bergen</｜DSML｜parameter>\n'
                            '</｜DSML｜invoke>\n</｜DSML｜function_calls>',
            "kimi_k2_instruct_0905": '{"city": "Bergen"}<|tool_call_end|><|tool_calls_section_end|>',
            "glm47_flash": "<arg_key>city</arg_key><arg_value>Bergen</arg_value></tool_call>"}[name]
    shown, calls, _ = through_section(setup.format, rest, 3, strict=True, opened=opening)
    assert shown == "" and [(c["function"]["name"], c["function"]["arguments"]) for c in calls] == [
        ("get_weather", '{"city": "Bergen"}')]


# ---- Kimi's call ids ---------------------------------------------------------------------------

def test_kimi_calls_come_back_under_the_ids_the_model_wrote():
    _, calls, _ = through_section(KIMI_K2, CALLS[KIMI_K2], 6)
    assert [c["id"] for c in calls] == ["functions.get_weather:3", "functions.get_time:4"]
    _, calls, _ = through_section(DEEPSEEK_V31, CALLS[DEEPSEEK_V31], 6)
    assert all(c["id"].startswith("call_") for c in calls)  # formats without ids of their own get made ones
    # Anthropic's ids are [A-Za-z0-9_-]: Kimi's becomes one (and Kimi's templates renumber it back)
    assert tool_use({"id": "functions.get_weather:3", "function": {"name": "get_weather", "arguments": "{}"}})[
        "id"] == "toolu_functions_get_weather_3"
    assert tool_use({"id": "call_" + "ab" * 12, "function": {"name": "f", "arguments": "{}"}})["id"] == \
        "toolu_" + "ab" * 12


# ---- reasoning: where the reply starts, and the split -------------------------------------------

def split(prompt_in_reasoning: bool, reply: str, step: int = 3) -> tuple[str, str]:
    r = ReasoningSplitter(prompt_in_reasoning)
    outs = [r.feed(reply[i:i + step]) for i in range(0, len(reply), step)] + [r.flush()]
    return "".join(a for a, _ in outs), "".join(c for _, c in outs)


@pytest.mark.parametrize("name, thinking, opened, cue", [
    ("deepseek_v31", True, True, "<｜Assistant｜><think>"), ("deepseek_v31", False, False, "<｜Assistant｜></think>"),
    ("deepseek_v31", None, False, "<｜Assistant｜></think>"),
    ("deepseek_v31_llamacpp", True, True, "<｜Assistant｜><think>"),
    ("deepseek_v32", True, True, "<｜Assistant｜><think>"), ("deepseek_v32", False, False, "<think></think>"),
    ("deepseek_r1", None, True, "<｜Assistant｜><think>\n"),
    ("glm47_flash", None, True, "<|assistant|><think>"), ("glm47_flash", False, False, "<|assistant|></think>"),
    ("glm46", None, False, "<|assistant|>"), ("glm46", False, False, "<|assistant|>\n<think></think>"),
    ("kimi_k2_thinking", None, False, "<|im_assistant|>assistant<|im_middle|>")])
def test_the_cue_says_whether_the_reply_starts_inside_its_reasoning(name, thinking, opened, cue):
    prompt = fmt_of(name).render([Message("user", "Hi")], thinking=Thinking(enable=thinking))
    assert prompt.text.endswith(cue) and prompt.in_reasoning is opened


def test_a_think_tag_in_the_users_text_does_not_open_the_reply_inside_reasoning():
    for name in ("kimi_k2_thinking", "glm46"):  # plain cues: the model opens its own block
        prompt = fmt_of(name).render([Message("user", "What does <think> do?")])
        assert not prompt.in_reasoning, name
    continued = fmt_of("glm46").render([Message("user", "Hi"), Message("assistant", "<think>Greet")])
    assert continued.continued and continued.in_reasoning  # a continued turn's own open block


@pytest.mark.parametrize("name, thinking, reply", [
    ("deepseek_v31", True, "Greet back.</think>Hello!"),  # the prompt opened the block: no tag of its own
    ("deepseek_r1", None, "\nGreet back.</think>\n\nHello!"),
    ("deepseek_v32", True, "Greet back.</think>Hello!"),
    ("glm47_flash", None, "Greet back.</think>Hello!"),
    ("glm46", None, "\n<think>Greet back.</think>\nHello!"),  # the model opens it itself
    ("kimi_k2_thinking", None, "<think>Greet back.</think>Hello!")])
def test_each_familys_reasoning_goes_to_reasoning_content(name, thinking, reply):
    prompt = fmt_of(name).render([Message("user", "Hi")], thinking=Thinking(enable=thinking))
    assert split(prompt.in_reasoning, reply) == ("Greet back.", "Hello!")


@pytest.mark.parametrize("name, fmt", [("deepseek_v31", DEEPSEEK_V31), ("glm47_flash", GLM45)])
def test_reasoning_then_a_call_in_one_stream(name, fmt):
    """generation.py's order: the reasoning split first, the tool section over its content."""
    prompt = fmt_of(name).render([Message("user", "Weather?")], tools=[WEATHER], thinking=Thinking(enable=True))
    assert prompt.in_reasoning
    splitter, section = ReasoningSplitter(True), StopFilter(list(fmt.openers))
    reply = "Ask the tool.</think>" + CALLS[fmt]
    said, shown = "", ""
    for i in range(0, len(reply), 4):
        r, c = splitter.feed(reply[i:i + 4])
        said, shown = said + r, shown + section.feed(c)
    r, c = splitter.flush()
    said, shown = said + r, shown + section.feed(c) + section.flush()
    outcome = Outcome(finish_reason="stop")
    calls = Session._tool_calls(ToolSetup(fmt, SCHEMAS), section, outcome)
    assert said == "Ask the tool." and shown == "" and [c["function"]["name"] for c in calls] == [
        "get_weather", "get_time"]


# ---- what a served model shows and where it stops ------------------------------------------------

class FakeEngine:
    """Just enough of an engine for ServedModel: a few control tokens, bytes for the rest."""

    CONTROL = {"<|tool_calls_section_begin|>": 1, "<|tool_call_begin|>": 2, "<think>": 3, "<|im_user|>": 4,
               "<|im_end|>": 5, "<｜User｜>": 6}
    bos = eos = -1

    def tokenize(self, text, add_bos=None, special=False):
        if special and text in self.CONTROL:
            return [self.CONTROL[text]]
        return [256 + b for b in text.encode()]

    def token_bytes(self, tok, special=False):
        text = next((t for t, i in self.CONTROL.items() if i == tok), None)
        if text is not None:
            return text.encode() if special else b""
        return bytes([tok - 256])

    def model_info(self):
        return {}


def test_a_served_model_shows_the_control_tokens_its_parsers_read_and_stops_at_turn_openers():
    served = ServedModel("kimi", FakeEngine(), None, fmt_of("kimi_k2_thinking"), "deepseek2")
    assert served.shown_control_ids == {1, 2, 3}  # Kimi's tool syntax and <think> (as the fake vocabulary has them)
    assert served.token_text(1) == "<|tool_calls_section_begin|>" and served.token_text(3) == "<think>"
    assert served.token_text(5) == ""  # the end of turn stays unshown (the engine stops there)
    assert served.turn_opener_ids == {4, 6}  # Kimi's <|im_user|>, DeepSeek's <｜User｜>: a new turn ends the reply
    assert {"<｜User｜>", "<|im_user|>", "<|user|>", "<|observation|>"} <= set(TURN_OPENERS)


# ---- end to end: a tiny model wearing each family's template -------------------------------------

E2E = ["deepseek_v31", "deepseek_v32", "kimi_k2_instruct_0905", "glm47_flash"]


@pytest.fixture(scope="module")
def tiny_served():
    from tests.fixtures.moe_models import tiny

    cfg = ServeConfig(model_id="tiny", kv_slots=1, ctx=4096, threads=2, kv_persist=False)
    s = open_served(cfg, tiny("qwen3moe", "Q8_0"))  # each test puts on its family's template
    yield s, cfg
    close_served(s)


@pytest.mark.parametrize("name", E2E)
def test_a_tiny_model_serves_a_forced_call_in_each_familys_format(tiny_served, name):
    """The server renders the tools in the family's way, opens the forced call in the prompt
    and returns what the model wrote after it: no closed call (random weights), so text that
    starts with the opening, whole and streamed, or strict's named refusal."""
    served, cfg = tiny_served
    served.chat_format = fmt_of(name)
    force = {"tools": [WEATHER], "tool_choice": {"type": "function", "function": {"name": "get_weather"}},
             "max_tokens": 8, "temperature": 0, "enable_thinking": False}
    ask = {"model": cfg.model_id, "messages": [{"role": "user", "content": "Weather in Oslo?"}]}

    async def body(c, _):
        out = []
        for extra in ({"max_tokens": 2, "temperature": 0, "enable_thinking": False}, force, {**force, "stream": True},
                      {**force, "strict_tool_calls": True}):
            r = await c.post("/v1/chat/completions", json={**ask, **extra})
            out.append((r.status, await r.json() if r.content_type == "application/json" else await r.text()))
        return out

    (_, plain), (_, forced), (_, streamed), (strict, refused) = run_app(served, body, cfg)
    opening = served.chat_format.tool_format.call_opening("get_weather")
    assert forced["usage"]["prompt_tokens"] > plain["usage"]["prompt_tokens"] + 30, forced  # the tools were rendered
    choice = forced["choices"][0]
    assert "tool_calls" not in choice["message"] and choice["message"]["content"].startswith(opening), choice
    events = [json.loads(b[6:]) for b in streamed.split("\n\n")[:-1] if b[6:] != "[DONE]"]
    assert "".join(e["choices"][0]["delta"].get("content") or "" for e in events) == choice["message"]["content"]
    assert strict == 502 and refused["error"]["code"] == "invalid_model_tool_call"
