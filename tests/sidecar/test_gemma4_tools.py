"""Gemma 4's tool calls (colibri/chat/tools_gemma4.py) as llama.cpp 0.3.36 reads and writes them
(common/parsers/gemma4.cpp): <|tool_call>call:NAME{key:value,...}<tool_call|> with <|"|>-quoted
strings and bare keys; the conversation handed to the template as llama.cpp's
convert_tool_responses_gemma4 hands it (calls, their results and the answer after them as one
assistant message with tool_responses)."""
from __future__ import annotations

import pytest

from colibri.chat.messages import Message
from colibri.chat.prompt import ChatFormat
from colibri.chat.template import ChatTemplate
from colibri.chat.tools import strict_problems, tool_format
from colibri.chat.tools_gemma4 import GEMMA4, QUOTE, read_value, write_value
from tests.fixtures import gemma4_models as g4

Q = QUOTE
TEMPLATE = g4.CHAT_TEMPLATE  # Gemma 4's, condensed (tests/fixtures/gemma4_models.py)
WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "The weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
                   "required": ["city"]}}}


def test_the_template_speaks_gemma4():
    assert tool_format(TEMPLATE) is GEMMA4
    assert GEMMA4.call_opening("get_weather") == "<|tool_call>call:get_weather"
    assert set(GEMMA4.markers) == {"<|tool_call>", "<tool_call|>", QUOTE}


def test_calls_parse_with_their_values():
    section = (f"call:get_weather{{city:{Q}Paris, FR{Q},days:3,opts:{{units:{Q}C{Q},flags:[true,null,-1.5e2]}}}}"
               f"<tool_call|>\n<|tool_call>call:now{{}}<tool_call|>")
    s = GEMMA4.parse(section, {})
    assert [c.name for c in s.calls] == ["get_weather", "now"] and s.stray == "\n"
    assert s.calls[0].arguments == {"city": "Paris, FR", "days": 3,
                                    "opts": {"units": "C", "flags": [True, None, -150.0]}}
    assert s.calls[0].arguments_json() == ('{"city": "Paris, FR", "days": 3, "opts": {"units": "C", '
                                          '"flags": [true, null, -150.0]}}')
    assert s.calls[1].arguments == {} and all(c.complete and c.problem is None for c in s.calls)
    assert strict_problems(s, {"get_weather": WEATHER["function"]["parameters"], "now": {}}, False) == []


@pytest.mark.parametrize("section,problem", [
    (f"call:get_weather{{city:{Q}Par", "cut off in its arguments"),
    (f"call:get_weather{{city:{Q}Paris{Q}}}", "cut off before <tool_call|>"),
    ("call:get_weather{city:Paris}<tool_call|>", "not in Gemma 4's syntax"),
    (f"get_weather{{city:{Q}Paris{Q}}}<tool_call|>", "not call:NAME"),
    (f"call:get_weather{{city:{Q}Paris{Q}}} and more<tool_call|>", "not in Gemma 4's syntax"),
])
def test_a_broken_call_is_no_call(section, problem):
    s = GEMMA4.parse(section, {})
    assert len(s.calls) == 1 and s.calls[0].name == "" and problem in s.calls[0].problem


def test_values_round_trip():
    v = {"a": "x, y: {z}", "b": [1, 2.5, True, None, {"c": []}], "d": {}}
    text = write_value(v)
    assert text.startswith("{a:" + Q) and read_value(text, 0) == (v, len(text))


def test_results_reach_the_template_as_llama_cpp_hands_them():
    """A call, its result (JSON: its value) and the answer after it are one model turn with tool_responses,
    as llama.cpp's convert_tool_responses_gemma4 makes it; a result that is not JSON stays text."""
    f = ChatFormat(ChatTemplate(TEMPLATE, bos_token="<bos>"))
    call = {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}
    msgs = [Message("user", "Weather in Paris?"), Message("assistant", "", tool_calls=[call]),
            Message("tool", '{"temp": 21}', tool_call_id="call_1")]
    text = f.render(msgs, tools=[WEATHER]).text
    assert text.endswith(f"<|turn>model\n<|tool_call>call:get_weather{{city:{Q}Paris{Q}}}<tool_call|>"
                         "<|tool_response>response:get_weather{temp:21}<tool_response|>")
    msgs += [Message("assistant", "It is 21 C."), Message("user", "Thanks")]
    text = f.render(msgs, tools=[WEATHER]).text
    assert text.endswith("<tool_response|>It is 21 C.<turn|>\n<|turn>user\nThanks<turn|>\n<|turn>model\n"
                         "<|channel>thought\n<channel|>")
    merged = GEMMA4.prepare_history([{"role": "assistant", "content": "", "tool_calls": [call]},
                                     {"role": "tool", "content": "sunny", "tool_call_id": "call_1"}])
    assert merged == [{"role": "assistant", "tool_calls": [call],
                       "tool_responses": [{"name": "get_weather", "response": "sunny"}]}]


def test_a_tiny_gemma4_serves_requests_with_tools_and_a_forced_call():
    """End to end on the tiny gemma4 fixture (random weights, its template above): a request with tools and
    a forced call are served; the forced reply starts with the call's opening, and, not being a well-formed
    call (random weights), comes back as text, streamed the same."""
    import json

    from colibri.serve_config import ServeConfig
    from tests.sidecar.serve_support import close_served, open_served, run_app

    cfg = ServeConfig(model_id="tiny-gemma4", kv_slots=1, ctx=1024, threads=2, kv_persist=False)
    served = open_served(cfg, g4.tiny("Q8_0"))
    ask = {"model": cfg.model_id, "messages": [{"role": "user", "content": "Weather in Oslo?"}], "temperature": 0,
           "tools": [WEATHER], "max_tokens": 8}
    force = {"tool_choice": {"type": "function", "function": {"name": "get_weather"}}}

    async def body(c, _):
        out = []
        for extra in ({}, force, {**force, "stream": True}):
            r = await c.post("/v1/chat/completions", json={**ask, **extra})
            out.append((r.status, await r.json() if r.content_type == "application/json" else await r.text()))
        return out

    try:
        assert served.chat_format.tool_format is GEMMA4
        (s1, auto), (s2, forced), (s3, streamed) = run_app(served, body, cfg)
    finally:
        close_served(served)
    assert (s1, s2, s3) == (200, 200, 200), (auto, forced)
    assert auto["choices"][0]["finish_reason"] in ("stop", "length", "tool_calls")
    message = forced["choices"][0]["message"]
    assert "tool_calls" not in message and message["content"].startswith(GEMMA4.call_opening("get_weather")), message
    events = [json.loads(b[6:]) for b in streamed.split("\n\n")[:-1] if b[6:] != "[DONE]"]
    assert "".join(e["choices"][0]["delta"].get("content") or "" for e in events) == message["content"]
