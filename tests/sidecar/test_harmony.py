"""gpt-oss's harmony format: its real template (OpenAI's, as llama.cpp ships it, the built-in for
gpt-oss files without one), the channels of a reply split into reasoning, answer and tool calls
as text streams in (whole and in one-character pieces, the same), both recipient forms of a
call, the stray channel gpt-oss-20b writes, replies that ignore the format, the reasoning effort,
and past calls and reasoning rendered back. End to end: a tiny fixture (random weights) wearing
the template serves plain, forced-call and streamed requests through the real server.
"""
from __future__ import annotations

import hashlib
import json

import pytest

from colibri.chat.builtin_templates import BY_ARCH
from colibri.chat.harmony import HARMONY, OPENER, HarmonySplitter, is_harmony, parse_header
from colibri.chat.messages import Message, Thinking
from colibri.chat.prompt import ChatFormat
from colibri.chat.stops import StopFilter
from colibri.chat.template import ChatTemplate
from colibri.chat.templates_harmony import GPT_OSS, GPT_OSS_SHA256
from colibri.chat.tools import strict_problems, tool_format
from colibri.serve_config import ServeConfig
from colibri.serving.model import ServedModel
from tests.fixtures.moe_models import tiny
from tests.sidecar.serve_support import close_served, open_served, run_app

WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "The weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
                   "required": ["city"], "additionalProperties": False}}}
SCHEMAS = {"get_weather": WEATHER["function"]["parameters"]}
CUE = "<|start|>assistant"


def fmt() -> ChatFormat:
    return ChatFormat(ChatTemplate(GPT_OSS))


def split(reply: str, *, tools: bool = False, tail: str = CUE, pieces: int = 0):
    """(reasoning, content, answer spans, ended) of a reply fed whole, or in pieces of `pieces` characters."""
    s = HarmonySplitter(tail, tools=tools)
    chunks = [reply[i:i + pieces] for i in range(0, len(reply), pieces)] if pieces else [reply]
    reasoning, content = [], []
    for c in chunks:
        r, t = s.feed(c)
        reasoning.append(r)
        content.append(t)
    r, t = s.flush()
    return "".join(reasoning + [r]), "".join(content + [t]), s.answer.spans, s.ended


# ---- the template ----------------------------------------------------------------------------

def test_the_builtin_is_openais_template_byte_for_byte_and_speaks_harmony():
    assert hashlib.sha256(GPT_OSS.encode()).hexdigest() == GPT_OSS_SHA256
    assert BY_ARCH["gpt-oss"] is GPT_OSS
    assert is_harmony(GPT_OSS) and tool_format(GPT_OSS) is HARMONY
    f = fmt()
    assert f.has_reasoning and f.template.harmony
    assert {"<|channel|>", "<|message|>", "<|start|>", "<|end|>", "<|constrain|>"} <= set(f.markers)


@pytest.mark.parametrize("thinking, line", [
    (Thinking(), "Reasoning: medium"), (Thinking(effort="low"), "Reasoning: low"),
    (Thinking(effort="high"), "Reasoning: high"), (Thinking(effort="xhigh"), "Reasoning: high"),
    (Thinking(effort="none"), "Reasoning: low"), (Thinking(effort="minimal"), "Reasoning: low"),
    (Thinking(enable=False), "Reasoning: low"), (Thinking(enable=True), "Reasoning: medium")])
def test_the_reasoning_effort_is_the_system_messages_reasoning_line(thinking, line):
    prompt = fmt().render([Message("user", "Hi")], thinking=thinking)
    assert line + "\n" in prompt.text
    assert prompt.text.endswith("<|start|>user<|message|>Hi<|end|>" + CUE)
    assert prompt.harmony_tail == CUE and not prompt.in_reasoning


def test_past_calls_results_and_reasoning_render_as_the_template_writes_them():
    call = {"id": "call_1", "type": "function",
            "function": {"name": "get_weather", "arguments": json.dumps({"city": "Oslo", "days": 2})}}
    messages = [Message("system", "Be brief."), Message("user", "Weather in Oslo?"),
                Message("assistant", "", reasoning_content="The tool knows.", tool_calls=[call]),
                Message("tool", "sunny, 21 C", tool_call_id="call_1", name="get_weather")]
    text = fmt().render(messages, tools=[WEATHER]).text
    assert "<|start|>developer<|message|># Instructions\n\nBe brief.\n\n# Tools" in text
    assert "type get_weather = (_: {" in text
    # the call's reasoning is kept (no final answer came after it), then the call in the template's own header
    assert ("<|start|>assistant<|channel|>analysis<|message|>The tool knows.<|end|>"
            '<|start|>assistant to=functions.get_weather<|channel|>commentary json<|message|>{"city": "Oslo", "days": 2}'
            "<|call|>") in text
    assert text.endswith('<|start|>functions.get_weather to=assistant<|channel|>commentary<|message|>"sunny, 21 C"'
                         "<|end|>" + CUE)
    # once a final answer followed, the call's reasoning is dropped, as the template does
    later = fmt().render(messages + [Message("assistant", "Sunny."), Message("user", "Thanks")], tools=[WEATHER]).text
    assert "The tool knows." not in later and "<|channel|>final<|message|>Sunny.<|end|>" in later


def test_a_trailing_assistant_turn_continues_inside_its_final_message():
    prompt = fmt().render([Message("user", "Count"), Message("assistant", "One, two")])
    assert prompt.continued and prompt.text.endswith("<|channel|>final<|message|>One, two")
    assert prompt.harmony_tail == "<|start|>assistant<|channel|>final<|message|>One, two"
    reasoning, content, _, _ = split(", three<|return|>", tail=prompt.harmony_tail)
    assert (reasoning, content) == ("", ", three")


# ---- the split ---------------------------------------------------------------------------------

REPLY = ("<|channel|>analysis<|message|>User greets. Answer <b>briefly</b>.<|end|>"
         "<|start|>assistant<|channel|>final<|message|>Hello! <|how|> are you?")


@pytest.mark.parametrize("pieces", [0, 1, 2, 3, 7])
def test_analysis_is_reasoning_and_final_is_the_answer_however_the_text_arrives(pieces):
    reasoning, content, spans, ended = split(REPLY, pieces=pieces)
    assert reasoning == "User greets. Answer <b>briefly</b>."
    assert content == "Hello! <|how|> are you?"
    assert "".join(REPLY[s:e] for s, e in spans) == content and not ended


def test_a_preamble_to_no_one_is_answer_and_the_stray_channel_is_skipped():
    reply = ("<|channel|>commentary<|channel|>analysis<|message|>think<|end|>"
             "<|start|>assistant<|channel|>commentary<|message|>Let me check.<|end|>"
             "<|start|>assistant<|channel|>commentary to=assistant<|channel|>final<|message|>Done.")
    assert split(reply)[:2] == ("think", "Let me check.Done.")


@pytest.mark.parametrize("reply", [
    "<|channel|>analysis<|message|>Need weather.<|end|><|start|>assistant to=functions.get_weather"
    '<|channel|>commentary json<|message|>{"city": "Oslo"}',
    "<|channel|>analysis<|message|>Need weather.<|end|><|start|>assistant<|channel|>commentary "
    'to=functions.get_weather <|constrain|>json<|message|>{"city": "Oslo"}',
    "<|channel|>analysis<|message|>Need weather.<|end|><|start|>assistant<|channel|>analysis "
    'to=functions.get_weather code<|message|>{"city": "Oslo"}<|call|>'])
@pytest.mark.parametrize("pieces", [0, 1, 5])
def test_a_call_in_either_header_form_becomes_the_tool_section(reply, pieces):
    reasoning, content, _, _ = split(reply, tools=True, pieces=pieces)
    assert reasoning == "Need weather."
    section = StopFilter(list(HARMONY.openers))  # what the generation does with the answer
    before = section.feed(content) + section.flush()
    assert before == "" and section.matched == OPENER
    parsed = HARMONY.parse(section.after, SCHEMAS)
    assert [(c.name, c.arguments) for c in parsed.calls] == [("get_weather", {"city": "Oslo"})]
    assert strict_problems(parsed, SCHEMAS, cut_off=False) == []


def test_without_tools_a_call_is_the_models_own_reasoning_and_not_the_answer():
    reply = ('<|channel|>commentary to=functions.get_weather json<|message|>{"city": "Oslo"}<|end|>'
             "<|start|>assistant<|channel|>final<|message|>It is sunny.")
    assert split(reply) == ('{"city": "Oslo"}', "It is sunny.", split(reply)[2], False)
    assert split('<|channel|>analysis to=browser.search<|message|>{"q": 1}<|end|>', tools=True)[:2] == \
        ('{"q": 1}', "")


def test_a_reply_that_ignores_the_format_is_the_answer_whole():
    for text in ("Hello there, this is plain text with no channels at all.", "Hi\nthere", "x" * 300):
        reasoning, content, spans, _ = split(text, pieces=4)
        assert (reasoning, content) == ("", text)
        assert spans == [(0, len(text))]
    assert split("<|channel|>final")[:2] == ("", "<|channel|>final")  # a header never closed is text


def test_another_roles_turn_ends_the_reply():
    reasoning, content, _, ended = split("<|channel|>final<|message|>Bye.<|end|><|start|>user<|message|>more")
    assert (reasoning, content, ended) == ("", "Bye.", True)


def test_headers_are_read_for_role_channel_and_recipient():
    assert parse_header("assistant to=functions.f<|channel|>commentary json") == ("assistant", "commentary",
                                                                                   "functions.f")
    assert parse_header("<|channel|>commentary to=functions.f <|constrain|>json") == ("", "commentary", "functions.f")
    assert parse_header("assistant<|channel|>final") == ("assistant", "final", "")
    assert parse_header("functions.f to=assistant<|channel|>commentary") == ("functions.f", "commentary", "")


def test_a_forced_call_opens_with_the_templates_header_and_parses_the_rest():
    opening = HARMONY.call_opening("get_weather")
    assert opening == " to=functions.get_weather<|channel|>commentary json<|message|>"
    assert opening.startswith(HARMONY.opener)
    parsed = HARMONY.parse(opening[len(OPENER):] + '{"city": "Oslo", "days": 3}', SCHEMAS)
    assert [(c.name, c.arguments) for c in parsed.calls] == [("get_weather", {"city": "Oslo", "days": 3})]
    cut = HARMONY.parse(opening[len(OPENER):] + '{"city": "Os', SCHEMAS)
    assert not [c for c in cut.calls if c.name]  # cut off: no call (the text comes back)


# ---- end to end ----------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def tiny_served():
    cfg = ServeConfig(model_id="tiny", kv_slots=1, ctx=4096, threads=2, kv_persist=False)
    s: ServedModel = open_served(cfg, tiny("qwen3moe", "Q8_0"))
    s.chat_format = fmt()
    yield s, cfg
    close_served(s)


def test_a_tiny_model_wearing_the_template_serves_plain_forced_and_streamed_requests(tiny_served):
    served, cfg = tiny_served
    ask = {"model": cfg.model_id, "messages": [{"role": "user", "content": "Weather in Oslo?"}], "temperature": 0}
    force = {"tools": [WEATHER], "tool_choice": {"type": "function", "function": {"name": "get_weather"}},
             "max_tokens": 8}

    async def body(c, _):
        out = []
        for extra in ({"max_tokens": 6, "reasoning_effort": "high"}, force, {**force, "stream": True}):
            r = await c.post("/v1/chat/completions", json={**ask, **extra})
            out.append((r.status, await r.json() if r.content_type == "application/json" else await r.text()))
        return out

    (s1, plain), (s2, forced), (s3, streamed) = run_app(served, body, cfg)
    assert (s1, s2, s3) == (200, 200, 200), (plain, forced)
    assert plain["choices"][0]["message"]["content"] or plain["choices"][0]["message"].get("reasoning_content")
    opening = HARMONY.call_opening("get_weather")
    message = forced["choices"][0]["message"]
    assert "tool_calls" not in message and message["content"].startswith(opening), message  # random weights
    events = [json.loads(b[6:]) for b in streamed.split("\n\n")[:-1] if b[6:] != "[DONE]"]
    assert "".join(e["choices"][0]["delta"].get("content") or "" for e in events) == message["content"]


@pytest.fixture(scope="module")
def gpt_oss_served():
    """The gpt-oss fixture (harmony's control tokens in its vocabulary, eos <|return|>, no template)."""
    cfg = ServeConfig(model_id="tiny-gpt-oss", kv_slots=1, ctx=4096, threads=2, kv_persist=False)
    s: ServedModel = open_served(cfg, tiny("gpt-oss", "Q8_0"))
    yield s, cfg
    close_served(s)


def test_a_gpt_oss_file_without_a_template_speaks_harmony_with_its_control_tokens(gpt_oss_served):
    served, cfg = gpt_oss_served
    assert served.chat_format.template.source == GPT_OSS  # the built-in, for the arch
    engine = served.engine
    tok = {t: engine.tokenize(t, add_bos=False, special=True) for t in ("<|start|>", "<|end|>", "<|return|>",
                                                                         "<|call|>", "<|channel|>", "<|message|>")}
    assert all(len(ids) == 1 for ids in tok.values()), tok
    # llama.cpp's end-of-generation list for harmony: <|return|> and <|call|>, and <|end|> taken off it
    assert engine.is_eog(tok["<|return|>"][0]) and engine.is_eog(tok["<|call|>"][0])
    assert not engine.is_eog(tok["<|end|>"][0])
    # the parsers see the markers as text: llama.cpp renders <|start|>, <|channel|>, <|message|>, <|constrain|>
    # (and <|end|>, once off the end-of-generation list) as user-defined tokens, and so does the engine
    for t in ("<|start|>", "<|end|>", "<|channel|>", "<|message|>"):
        assert served.token_bytes(tok[t][0]) == t.encode()
    prompt = served.chat_format.render([Message("user", "Hi")], tools=[WEATHER])
    ids = served.tokenize_chat(prompt.text, [Message("user", "Hi")])
    assert ids.count(tok["<|start|>"][0]) == prompt.text.count("<|start|>") >= 3
    assert served.token_bytes(tok["<|channel|>"][0]) == b"<|channel|>"

    async def body(c, _):
        out = []
        for extra in ({"reasoning_effort": "high"}, {"stream": True},
                      {"tools": [WEATHER], "tool_choice": {"type": "function", "function": {"name": "get_weather"}}}):
            r = await c.post("/v1/chat/completions", json={
                "model": cfg.model_id, "messages": [{"role": "user", "content": "Weather in Oslo?"}],
                "max_tokens": 12, "temperature": 0, **extra})
            out.append((r.status, await r.text()))
        r = await c.post("/v1/messages", headers={"anthropic-version": "2023-06-01"}, json={
            "model": cfg.model_id, "max_tokens": 12, "thinking": {"type": "enabled", "budget_tokens": 1024},
            "messages": [{"role": "user", "content": "Weather in Oslo?"}], "tools": [{
                "name": "get_weather", "description": "The weather", "input_schema": WEATHER["function"]["parameters"]}],
            "tool_choice": {"type": "tool", "name": "get_weather"}})
        out.append((r.status, await r.text()))
        return out

    results = run_app(served, body, cfg)
    assert [s for s, _ in results] == [200, 200, 200, 200], results
    message = json.loads(results[3][1])  # Anthropic's shape: blocks of text / thinking (random weights: no call)
    assert message["type"] == "message" and all(b["type"] in ("text", "thinking", "tool_use") for b in message["content"])
    reply = json.loads(results[0][1])["choices"][0]
    assert reply["finish_reason"] in ("stop", "length")
    for marker in ("<|channel|>", "<|message|>", "<|start|>", "<|end|>"):  # structure, never text (random weights:
        assert marker not in (reply["message"].get("reasoning_content") or ""), reply  # whatever it wrote)
