"""Bare-JSON tool calls of Hermes-format models (Qwen2.5, Qwen3, Hermes 2/3): a call written as
`{"name": ..., "arguments": ...}` without `<tool_call>`, maybe in a ```json fence, is a call, as
llama.cpp's Hermes 2 Pro parser reads it (common/chat.cpp, common_chat_parse_hermes_2_pro);
formats with a call syntax of their own (Qwen3-Coder's XML, GLM's, Mistral's) do not take it.
The parser and the stream's split are pure functions; then the real server on the real default
model (Qwen2.5-Coder 0.5B Instruct), which writes such calls under tool_choice "auto"."""
from __future__ import annotations

import json

import anthropic
import openai
import pytest

from colibri.chat.stops import StopFilter
from colibri.chat.tools import BARE_OPENERS, GLM45, HERMES, MISTRAL, QWEN3_CODER
from tests.conftest import real_model_path
from tests.sidecar.serve_support import ServerProcess

READ = {"type": "function", "function": {
    "name": "read_file", "description": "Read a file from the repository",
    "parameters": {"type": "object", "properties": {"path": {"type": "string", "description": "the file's path"}},
                   "required": ["path"]}}}
SCHEMAS = {"read_file": READ["function"]["parameters"], "get_weather": {"type": "object"}}
QWEN_SAYS = '```json\n{\n  "name": "read_file",\n  "arguments": {\n    "path": "src/main.py"\n  }\n}\n```'


def split(reply: str, fmt=HERMES, pieces: int = 3):
    """The reply through the stream's split (fed in small pieces) and the section's parse:
    (answer text, [(name, arguments)], the section as text when it holds no call)."""
    section = StopFilter(list(fmt.openers))
    answer = "".join(section.feed(reply[i:i + pieces]) for i in range(0, len(reply), pieces)) + section.flush()
    if section.matched is None:
        return answer, [], ""
    parsed = fmt.parse_section(section.matched, section.after, SCHEMAS)
    calls = [(c.name, c.arguments) for c in parsed.calls if c.name]
    return answer, calls, "" if calls else section.matched + section.after


@pytest.mark.parametrize("reply, answer, calls", [
    (QWEN_SAYS, "", [("read_file", {"path": "src/main.py"})]),
    ('{"name": "read_file", "arguments": {"path": "a.py"}}', "", [("read_file", {"path": "a.py"})]),
    ('Let me look.\n{"name": "read_file", "arguments": {"path": "a.py"}}', "Let me look.\n",
     [("read_file", {"path": "a.py"})]),
    ('```\n{"name": "read_file", "arguments": "{\\"path\\": \\"b\\"}"}\n```', "", [("read_file", {"path": "b"})]),
    ('<tools>\n{"name": "get_weather", "arguments": {"city": "Oslo"}}\n</tools>', "",
     [("get_weather", {"city": "Oslo"})]),
    ('<response>{"name": "read_file", "parameters": {"path": "c"}}</response>', "", [("read_file", {"path": "c"})]),
    # two calls, the second in the template's own tags
    ('{"name": "read_file", "arguments": {"path": "a"}}\n<tool_call>\n{"name": "get_weather", "arguments": '
     '{"city": "Rome"}}\n</tool_call>', "", [("read_file", {"path": "a"}), ("get_weather", {"city": "Rome"})]),
    # the template's own format is read as before
    ('<tool_call>\n{"name": "read_file", "arguments": {"path": "d"}}\n</tool_call>', "",
     [("read_file", {"path": "d"})]),
])
def test_bare_calls_are_calls(reply, answer, calls):
    assert split(reply)[:2] == (answer, calls)
    assert split(reply, pieces=1)[:2] == (answer, calls)


@pytest.mark.parametrize("reply", [
    # what the model writes about a file, named after it: no declared tool, so text (llama.cpp would call "README.md")
    '```json\n{\n  "name": "README.md",\n  "arguments": {\n    "description": "a README"\n  }\n}\n```',
    'A person: {"name": "Alice", "age": 30}',
    '{"name": "read_file"}',  # no arguments
    '```json\n{"name": "read_file", "arguments": {"path": "a"}}',  # the fence is not closed
    '<tools>{"name": "read_file", "arguments": {"path": "a"}}',  # nor the tag
    '```json\n{\n  "name": "read_file",\n  "arguments": {\n    "path": "src/ma',  # cut off by the limit
])
def test_what_does_not_read_as_a_call_stays_text(reply):
    answer, calls, rest = split(reply)
    assert calls == [] and answer + rest == reply


def test_plain_answers_and_other_json_pass_through_whole():
    for reply in ('Use `{"a": 1}` here.', "```json\n[1, 2]\n```", "```python\nprint({'name': 1})\n```", "no braces"):
        assert split(reply) == (reply, [], "")


def test_formats_with_their_own_call_syntax_take_no_bare_json():
    for fmt in (QWEN3_CODER, GLM45, MISTRAL):
        assert not set(fmt.openers) & set(BARE_OPENERS)
        assert split('{"name": "read_file", "arguments": {"path": "a"}}', fmt)[1] == []
    assert set(BARE_OPENERS) < set(HERMES.openers) and HERMES.openers[0] == "<tool_call>"
    assert HERMES.markers == ("<tool_call>", "</tool_call>")  # the control-token markers: the template's tags alone


# ---- the real server on the real default model ----------------------------------------------

MODEL = "qwen2.5-coder-0.5b-instruct"
ASK = [{"role": "user", "content": "Read the file src/main.py and tell me what it does."}]
ABOUT = [{"role": "user", "content": "What is in README.md?"}]


@pytest.fixture(scope="module")
def qwen():
    with ServerProcess(["--model", str(real_model_path(MODEL)), "--ctx", "2048", "--no-kv-persist"]) as srv:
        yield srv


def test_qwen_bare_json_call_under_auto_is_a_tool_call(qwen):
    oai = openai.OpenAI(base_url=qwen.base + "/v1", api_key="local", max_retries=0)
    r = oai.chat.completions.create(model=MODEL, messages=ASK, tools=[READ], tool_choice="auto", temperature=0,
                                    max_tokens=80)
    choice = r.choices[0]
    assert choice.finish_reason == "tool_calls" and not choice.message.content, choice
    (call,) = choice.message.tool_calls
    assert call.function.name == "read_file" and json.loads(call.function.arguments) == {"path": "src/main.py"}
    assert call.id.startswith("call_")

    chunks = list(oai.chat.completions.create(model=MODEL, messages=ASK, tools=[READ], tool_choice="auto",
                                              temperature=0, max_tokens=80, stream=True))
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    streamed = [tc for c in chunks if c.choices for tc in (c.choices[0].delta.tool_calls or [])]
    assert "```" not in text and "{" not in text  # the fence and the JSON went to the call, not the answer
    assert [(t.function.name, json.loads(t.function.arguments)) for t in streamed] == [("read_file",
                                                                                        {"path": "src/main.py"})]
    assert chunks[-1].choices[0].finish_reason == "tool_calls"

    ant = anthropic.Anthropic(base_url=qwen.base, api_key="local", max_retries=0)
    m = ant.messages.create(model=MODEL, max_tokens=80, messages=ASK, extra_body={"temperature": 0},
                            tools=[{"name": "read_file", "description": READ["function"]["description"],
                                    "input_schema": READ["function"]["parameters"]}])
    assert m.stop_reason == "tool_use"
    assert [(b.type, b.name, b.input) for b in m.content if b.type == "tool_use"] == [
        ("tool_use", "read_file", {"path": "src/main.py"})]


def test_qwen_json_about_no_declared_tool_stays_text_and_none_parses_nothing(qwen):
    status, _, body = qwen.post("/v1/chat/completions", {"model": MODEL, "messages": ABOUT, "tools": [READ],
                                                         "tool_choice": "auto", "temperature": 0, "max_tokens": 80})
    message = body["choices"][0]["message"]
    assert status == 200 and not message.get("tool_calls") and body["choices"][0]["finish_reason"] != "tool_calls"
    # its answer is text whatever it wrote: JSON named after the file with the AVX-512 kernels' bits, prose with
    # the AVX2 ones' (that JSON's parse is test_what_does_not_read_as_a_call_stays_text's, model-free)
    assert message["content"].strip()
    status, _, body = qwen.post("/v1/chat/completions", {"model": MODEL, "messages": ASK, "tools": [READ],
                                                         "tool_choice": "none", "temperature": 0, "max_tokens": 80})
    assert status == 200 and not body["choices"][0]["message"].get("tool_calls")
