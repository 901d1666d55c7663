"""Qwen2.5's own chat template and its `<tool_call>` format end to end on a real instruct model
(Qwen2.5-Coder-0.5B-Instruct, the GGUF's template as shipped), through the official `openai` and
`anthropic` SDKs against the app on a real port: a forced call comes back as a tool call, whole
and streamed; its result goes back, is rendered as the template renders it (llama.cpp's own
renderer of the same template is the reference), and gets a text answer; `auto` and `none`
answer too. Greedy throughout.

Asked in prose alone, this model writes the call as bare JSON, without `<tool_call>`, which is
read as a call (test_hermes_bare_json.py); a forced call is reliable because the reply starts
with the template's opening of that call.
"""
from __future__ import annotations

import json
import re

import pytest

from colibri.serving.tool_plan import NAMED
from colibri.chat.tools import HERMES
from colibri.serve_config import ServeConfig
from tests.conftest import real_model_path
from tests.reference import llama_cpp
from tests.sidecar.serve_support import AppThread, close_served, open_served

openai = pytest.importorskip("openai")
anthropic = pytest.importorskip("anthropic")

MODEL = "qwen2.5-coder-0.5b-instruct"
CFG = ServeConfig(model_id=MODEL, kv_slots=1, ctx=1024, threads=2, kv_persist=False)
WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Get the current weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string", "description": "the city name"}},
                   "required": ["city"]}}}
WEATHER_ANTHROPIC = {"name": "get_weather", "description": "Get the current weather in a city",
                     "input_schema": WEATHER["function"]["parameters"]}
ASK = [{"role": "user", "content": "What is the weather like in Paris today?"}]
FORCE_OPENAI = {"type": "function", "function": {"name": "get_weather"}}
FORCE_ANTHROPIC = {"type": "tool", "name": "get_weather"}
RESULT = '{"temperature_c": 18, "sky": "sunny"}'
OPENING = '<tool_call>\n{"name": "get_weather", "arguments":'  # a forced prompt ends with the cue, then this
CUE = "<|im_start|>assistant\n"
GREEDY = {"temperature": 0}  # the anthropic SDK has no temperature argument: an extra body field


@pytest.fixture(scope="module")
def served():
    """The real model as `coli serve` loads it, keeping every chat prompt it renders."""
    s = open_served(CFG, real_model_path(MODEL))
    s.prompts = []
    tokenize = s.tokenize_chat

    def recording(text, messages):
        s.prompts.append(text)
        return tokenize(text, messages)

    s.tokenize_chat = recording
    yield s
    close_served(s)


@pytest.fixture(scope="module")
def base(served):
    with AppThread(CFG, served) as url:
        yield url


@pytest.fixture(scope="module")
def oai(base):
    return openai.OpenAI(base_url=base + "/v1", api_key="local", max_retries=0)


@pytest.fixture(scope="module")
def claude(base):
    return anthropic.Anthropic(base_url=base, api_key="local", max_retries=0)


@pytest.fixture(scope="module")
def reference_render(served):
    """llama.cpp's renderer (llama-cpp-python's Jinja2ChatFormatter) over the template of the
    same file, read by llama.cpp: the prompt an OpenAI conversation should become."""
    mod = llama_cpp()
    template = mod.Llama(model_path=str(real_model_path(MODEL)), vocab_only=True,
                         verbose=False).metadata["tokenizer.chat_template"]
    formatter = mod.llama_chat_format.Jinja2ChatFormatter(template, eos_token="", bos_token="")
    return lambda messages, tools=None: formatter(messages=messages, tools=tools).prompt


def call_turn(name: str, arguments: dict) -> dict:
    """A past assistant call as Hugging Face templates take it (arguments an object)."""
    return {"role": "assistant", "content": "",
            "tool_calls": [{"type": "function", "function": {"name": name, "arguments": arguments}}]}


def sent_prompts(served, request) -> list[str]:
    """The chat prompts the server rendered while `request()` ran."""
    start = len(served.prompts)
    request()
    return served.prompts[start:]


def test_the_files_template_speaks_hermes(served):
    assert served.arch == "qwen2" and served.chat_format.tool_format is HERMES
    assert "<tool_response>" in served.chat_format.template.source  # the GGUF's own, not the built-in ChatML


def test_openai_forced_call_and_its_result(oai, served, reference_render):
    out = {}
    (prompt,) = sent_prompts(served, lambda: out.update(r=oai.chat.completions.create(
        model=MODEL, messages=ASK, tools=[WEATHER], tool_choice=FORCE_OPENAI, temperature=0, max_tokens=32)))
    r = out["r"]
    system = {"role": "system", "content": NAMED.format(name="get_weather")}
    assert prompt == reference_render([system, *ASK], [WEATHER]) + OPENING
    choice = r.choices[0]
    assert choice.finish_reason == "tool_calls" and choice.message.content is None
    (call,) = choice.message.tool_calls
    assert re.fullmatch(r"call_[0-9a-f]{24}", call.id) and call.type == "function"
    assert call.function.name == "get_weather" and json.loads(call.function.arguments) == {"city": "Paris"}

    history = [*ASK, choice.message.model_dump(exclude_none=True),
               {"role": "tool", "tool_call_id": call.id, "content": RESULT}]
    (prompt,) = sent_prompts(served, lambda: out.update(f=oai.chat.completions.create(
        model=MODEL, messages=history, tools=[WEATHER], temperature=0, max_tokens=48)))
    assert prompt == reference_render([*ASK, call_turn("get_weather", {"city": "Paris"}),
                                       {"role": "tool", "tool_call_id": call.id, "content": RESULT}], [WEATHER])
    assert prompt.endswith('<|im_start|>assistant\n<tool_call>\n{"name": "get_weather", "arguments": '
                           '{"city": "Paris"}}\n</tool_call><|im_end|>\n'
                           f"<|im_start|>user\n<tool_response>\n{RESULT}\n</tool_response><|im_end|>\n"
                           "<|im_start|>assistant\n")
    follow = out["f"].choices[0]
    # the 0.5B model answers, or (greedy, as it does here) calls the tool again in bare JSON, which is a call
    if follow.finish_reason == "tool_calls":
        assert [(c.function.name, json.loads(c.function.arguments)) for c in follow.message.tool_calls] == [
            ("get_weather", {"city": "Paris"})]
    else:
        assert follow.finish_reason == "stop" and follow.message.tool_calls is None
        assert isinstance(follow.message.content, str) and follow.message.content.strip()


def test_openai_forced_call_streamed(oai, served):
    seen = []
    with oai.chat.completions.stream(model=MODEL, messages=ASK, tools=[WEATHER], tool_choice=FORCE_OPENAI,
                                     temperature=0, max_tokens=32) as stream:
        for event in stream:
            seen.append(event)
        final = stream.get_final_completion()
    assert served.prompts[-1].endswith(CUE + OPENING)
    assert not [e for e in seen if e.type == "content.delta" and e.delta]  # no tool syntax as text
    (done,) = [e for e in seen if e.type == "tool_calls.function.arguments.done"]
    assert done.name == "get_weather" and json.loads(done.arguments) == {"city": "Paris"}
    choice = final.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert [(c.function.name, json.loads(c.function.arguments)) for c in choice.message.tool_calls] == [
        ("get_weather", {"city": "Paris"})]


def test_anthropic_forced_tool_use_and_its_result(claude, served, reference_render):
    out = {}
    (prompt,) = sent_prompts(served, lambda: out.update(m=claude.messages.create(
        model=MODEL, max_tokens=32, messages=ASK, tools=[WEATHER_ANTHROPIC], tool_choice=FORCE_ANTHROPIC,
        extra_body=GREEDY)))
    system = {"role": "system", "content": NAMED.format(name="get_weather")}
    # the same tool renders as the OpenAI route renders it (name, description, parameters)
    assert prompt == reference_render([system, *ASK], [WEATHER]) + OPENING
    m = out["m"]
    assert m.stop_reason == "tool_use" and [b.type for b in m.content] == ["tool_use"]
    use = m.content[0]
    assert use.id.startswith("toolu_") and use.name == "get_weather" and use.input == {"city": "Paris"}

    history = [*ASK, {"role": "assistant", "content": [use.model_dump(exclude_none=True)]},
               {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use.id, "content": RESULT}]}]
    (prompt,) = sent_prompts(served, lambda: out.update(f=claude.messages.create(
        model=MODEL, max_tokens=48, messages=history, tools=[WEATHER_ANTHROPIC], extra_body=GREEDY)))
    assert prompt == reference_render([*ASK, call_turn("get_weather", {"city": "Paris"}),
                                       {"role": "tool", "tool_call_id": use.id, "content": RESULT}], [WEATHER])
    assert f"<|im_start|>user\n<tool_response>\n{RESULT}\n</tool_response><|im_end|>\n" in prompt
    f = out["f"]
    if f.stop_reason == "tool_use":  # the call again, in bare JSON (see the OpenAI test above)
        assert [(b.type, b.name, b.input) for b in f.content] == [("tool_use", "get_weather", {"city": "Paris"})]
    else:
        assert f.stop_reason == "end_turn" and [b.type for b in f.content] == ["text"] and f.content[0].text.strip()


def test_anthropic_forced_tool_use_streamed(claude, served):
    with claude.messages.stream(model=MODEL, max_tokens=32, messages=ASK, tools=[WEATHER_ANTHROPIC],
                                tool_choice=FORCE_ANTHROPIC, extra_body=GREEDY) as stream:
        kinds = [e.type for e in stream]
        final = stream.get_final_message()
    assert served.prompts[-1].endswith(CUE + OPENING)
    assert "input_json" in kinds and "text" not in kinds
    assert final.stop_reason == "tool_use" and [b.type for b in final.content] == ["tool_use"]
    assert (final.content[0].name, final.content[0].input) == ("get_weather", {"city": "Paris"})


def test_auto_and_none_answer(oai, claude, served):
    for choice, offered in (("auto", True), ("none", False)):
        out = {}
        (prompt,) = sent_prompts(served, lambda: out.update(r=oai.chat.completions.create(
            model=MODEL, messages=ASK, tools=[WEATHER], tool_choice=choice, temperature=0, max_tokens=16)))
        assert ("<tools>" in prompt) == offered and prompt.endswith(CUE), choice  # no call opened
        c = out["r"].choices[0]
        assert c.finish_reason in ("stop", "length", "tool_calls") and (c.message.content or c.message.tool_calls)
        if not offered:
            assert c.message.tool_calls is None and c.finish_reason != "tool_calls"
    for choice, offered in (({"type": "auto"}, True), ({"type": "none"}, False)):
        out = {}
        (prompt,) = sent_prompts(served, lambda: out.update(m=claude.messages.create(
            model=MODEL, max_tokens=16, messages=ASK, tools=[WEATHER_ANTHROPIC], tool_choice=choice,
            extra_body=GREEDY)))
        assert ("<tools>" in prompt) == offered and prompt.endswith(CUE), choice
        m = out["m"]
        assert m.stop_reason in ("end_turn", "max_tokens", "tool_use") and m.content
        if not offered:
            assert m.stop_reason != "tool_use" and [b.type for b in m.content] == ["text"]


def test_ignore_eos_runs_past_the_end_to_the_budget(oai):
    """llama.cpp's server's `ignore_eos`, as the openai SDK sends an extension: a reply that ends by
    itself goes on to max_tokens."""
    say = [{"role": "user", "content": "Say OK."}]
    plain = oai.chat.completions.create(model=MODEL, messages=say, temperature=0, max_tokens=64)
    assert plain.choices[0].finish_reason == "stop"  # the model ends its answer by itself
    n = plain.usage.completion_tokens + 6
    past = oai.chat.completions.create(model=MODEL, messages=say, temperature=0, max_tokens=n,
                                       extra_body={"ignore_eos": True})
    assert past.choices[0].finish_reason == "length" and past.usage.completion_tokens == n
    assert past.choices[0].message.content.startswith(plain.choices[0].message.content)
