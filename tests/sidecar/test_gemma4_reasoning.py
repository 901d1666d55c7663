"""Gemma 4's thinking: its thought channel `<|channel>thought\\n...<channel|>` (llama.cpp
common/parsers/gemma4.cpp: thinking_start_tag "<|channel>thought", end "<channel|>") split from
the answer as `<think>` blocks are, under Gemma 4's real template (llama.cpp's
google-gemma-4-31B-it.jinja, tests/sidecar/templates/): its enable_thinking switch (`<|think|>`
in the system turn; off, the cue closes an empty channel), past reasoning as it keeps it (only
for a tool call after the last user turn), and end to end on the tiny gemma4 fixture wearing it:
the channel's control tokens shown to the splitter, and a reply that writes the channel coming
back as reasoning_content (OpenAI chat), a thinking block (Anthropic) and a reasoning item
(Responses), JSON and streamed. Random weights never write the channel, so the end-to-end
replies are scripted token streams (the real tokenizer's ids) in place of the engine's picks.
"""
from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from colibri.chat.messages import Message, Thinking
from colibri.chat.prompt import ChatFormat
from colibri.chat.reasoning import GEMMA4, THINK, ReasoningSplitter, tags_for
from colibri.chat.template import ChatTemplate
from colibri.chat.tools import tool_format
from colibri.chat.tools_gemma4 import GEMMA4_OPENAI
from tests.fixtures import gemma4_models as g4

SOURCE = (Path(__file__).parent / "templates" / "gemma4_31b_it.jinja").read_text()
CUE_OFF = "<|turn>model\n<|channel>thought\n<channel|>"
WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "The weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}


def fmt() -> ChatFormat:
    return ChatFormat(ChatTemplate(SOURCE, bos_token="<bos>"))


def split(pieces, in_reasoning=False):
    r = ReasoningSplitter(in_reasoning, GEMMA4)
    outs = [r.feed(p) for p in pieces] + [r.flush()]
    return "".join(a for a, _ in outs), "".join(c for _, c in outs), r.answer.spans


# ---- the tags ------------------------------------------------------------------------------

def test_the_family_table():
    assert (GEMMA4.open, GEMMA4.close) == ("<|channel>thought", "<channel|>")
    assert tags_for(SOURCE) is GEMMA4 and tags_for(g4.CHAT_TEMPLATE) is GEMMA4
    assert tags_for("{{ '<think>' }}") is THINK and tags_for("{{ messages }}") is None and tags_for(None) is None
    f = fmt()
    assert f.has_reasoning and f.reasoning_tags is GEMMA4 and tool_format(SOURCE) is GEMMA4_OPENAI
    assert {"<|channel>", "<channel|>"} <= set(f.markers)  # shown to the splitter though control tokens


def test_the_thought_channel_splits_however_it_is_cut():
    text = "<|channel>thought\nI ponder.\nStill.<channel|>The answer."
    for pieces in ([text], list(text), *([text[:i], text[i:]] for i in range(len(text) + 1))):
        assert split(pieces) == ("I ponder.\nStill.", "The answer.", [(len(text) - 11, len(text))]), pieces
    assert split(["<|channel>thought\n<channel|>Hi"])[:2] == ("", "Hi")  # an empty channel
    assert split(["<|channel>thought\nhm"])[:2] == ("hm", "")  # cut off: all reasoning
    assert split(["Plain <|channel>thought\nx<channel|>y"])[:2] == ("", "Plain <|channel>thought\nx<channel|>y")
    assert split(["<think>x</think>y"])[:2] == ("", "<think>x</think>y")  # another family's tags are text
    assert split(["I go on<channel|>Answer"], in_reasoning=True)[:2] == ("I go on", "Answer")


# ---- the template's switch and past reasoning ----------------------------------------------------

def test_thinking_off_by_default_closes_an_empty_channel_in_the_cue():
    p = fmt().render([Message("user", "Hi")])
    assert p.text == "<bos><|turn>user\nHi<turn|>\n" + CUE_OFF and not p.in_reasoning
    off = fmt().render([Message("user", "Hi")], thinking=Thinking(effort="none"))
    assert off.text == p.text and not off.in_reasoning


@pytest.mark.parametrize("thinking", [Thinking(enable=True), Thinking(effort="high")])
def test_thinking_on_puts_the_think_token_in_the_system_turn(thinking):
    p = fmt().render([Message("system", "Be brief."), Message("user", "Hi")], thinking=thinking)
    assert p.text == "<bos><|turn>system\n<|think|>\nBe brief.<turn|>\n<|turn>user\nHi<turn|>\n<|turn>model\n"
    assert not p.in_reasoning  # the model opens its channel itself


def test_past_reasoning_is_dropped_except_before_a_call_after_the_last_user_turn():
    call = {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'}}
    old = [Message("user", "Hi"), Message("assistant", "Hello.", reasoning_content="greet"), Message("user", "Oslo?")]
    text = fmt().render(old, thinking=Thinking(enable=True)).text
    assert "greet" not in text and "<turn|>\n<|turn>model\nHello.<turn|>\n" in text
    chain = old + [Message("assistant", "", reasoning_content="need weather", tool_calls=[call]),
                   Message("tool", '{"temp": 3}', tool_call_id="call_1")]
    text = fmt().render(chain, thinking=Thinking(enable=True), tools=[WEATHER]).text
    assert "<|turn>model\n<|channel>thought\nneed weather\n<channel|><|tool_call>call:get_weather{city:" in text
    assert "greet" not in text


def test_the_updated_template_reads_tool_results_as_they_came():
    """llama.cpp merges calls and results into one message (tool_responses, JSON decoded) only for the older
    Gemma 4 templates; this one forward-scans the role "tool" messages and quotes each result's text."""
    call = {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'}}
    msgs = [Message("user", "Oslo?"), Message("assistant", "", tool_calls=[call]),
            Message("tool", '{"temp": 3}', tool_call_id="call_1")]
    text = fmt().render(msgs, tools=[WEATHER]).text
    assert text.endswith('<|turn>model\n<|tool_call>call:get_weather{city:<|"|>Oslo<|"|>}<tool_call|>'
                         '<|tool_response>response:get_weather{value:<|"|>{"temp": 3}<|"|>}<tool_response|>')
    text = fmt().render(msgs + [Message("assistant", "Cold."), Message("user", "Thanks")], tools=[WEATHER]).text
    assert text.endswith("<tool_response|>Cold.<turn|>\n<|turn>user\nThanks<turn|>\n" + CUE_OFF)


def test_a_turn_with_results_and_text_gets_the_models_header_as_llama_cpp_adds_it():
    call = {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'}}
    msgs = [Message("user", "Oslo?"), Message("assistant", "Let me look.", tool_calls=[call]),
            Message("tool", "3 C", tool_call_id="call_1")]
    text = fmt().render(msgs, tools=[WEATHER]).text
    assert text.endswith('{value:<|"|>3 C<|"|>}<tool_response|>Let me look.<turn|>\n<|turn>model\n')


def test_a_continued_turn_goes_on_as_its_answer():
    p = fmt().render([Message("user", "Hi"), Message("assistant", "The answer is")])
    assert p.continued and p.text.endswith("<|turn>model\nThe answer is") and not p.in_reasoning


# ---- end to end: the tiny gemma4 fixture wearing the real template ---------------------------

@pytest.fixture(scope="module")
def gemma():
    from colibri.serve_config import ServeConfig
    from tests.sidecar.family_templates import with_chat_template
    from tests.sidecar.serve_support import close_served, open_served

    cfg = ServeConfig(model_id="tiny-gemma4", kv_slots=1, ctx=1024, threads=2, kv_persist=False)
    served = open_served(cfg, with_chat_template(g4.tiny("Q8_0"), SOURCE, "gemma4-31b-it"))
    yield served, cfg
    close_served(served)


REPLY = "<|channel>thought\nI ponder.<channel|>Done."


def scripted(served, text: str):
    """Replace the engine's picks by the tokens of `text` (the real tokenizer's, control tokens
    included) for the next generations: the engine runs as many steps, the reply is `text`'s."""
    from colibri.serving.engine_thread import Finish, TokenEvent

    ids = served.engine.tokenize(text, add_bos=False, special=True)
    thread = served.engine_thread
    submit = thread.submit

    class Scripted:
        def __init__(self, real):
            self.real = real

        ended = property(lambda self: self.real.ended)
        slot = property(lambda self: self.real.slot)

        def cancel(self):
            self.real.cancel()

        def __aiter__(self):
            return self._events()

        async def _events(self):
            n = 0
            async for ev in self.real:
                if isinstance(ev, Finish):
                    yield replace(ev, reason="stop" if n == len(ids) else ev.reason, n_generated=n)
                elif n < len(ids):
                    yield TokenEvent(ids[n], ev.logprob, ev.top)
                    n += 1

    def fake(req):
        return Scripted(submit(replace(req, max_tokens=len(ids), ignore_eos=True)))

    thread.submit = fake
    return ids


def test_the_channel_tokens_are_single_tokens_shown_to_the_splitter(gemma):
    served, _ = gemma
    assert served.chat_format.reasoning_tags is GEMMA4
    ids = served.engine.tokenize(REPLY, add_bos=False, special=True)
    opening, closing = (served.engine.tokenize(t, add_bos=False, special=True) for t in ("<|channel>", "<channel|>"))
    # user-defined in Gemma 4's files (its converter's "visible tokens"): one token each, always shown
    assert len(opening) == len(closing) == 1
    assert (served.token_bytes(opening[0]), served.token_bytes(closing[0])) == (b"<|channel>", b"<channel|>")
    assert b"".join(served.token_bytes(t) for t in ids).decode() == REPLY
    r = ReasoningSplitter(False, GEMMA4)
    outs = [r.feed(served.token_text(t)) for t in ids] + [r.flush()]
    assert ("".join(a for a, _ in outs), "".join(c for _, c in outs)) == ("I ponder.", "Done.")


def test_the_channel_comes_back_as_reasoning_in_the_three_apis(gemma):
    from tests.sidecar.serve_support import named_events, run_app

    served, cfg = gemma
    submit = served.engine_thread.submit
    ask = {"model": cfg.model_id, "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 30, "temperature": 0}
    anthropic = {"model": cfg.model_id, "max_tokens": 30, "temperature": 0, "messages": ask["messages"],
                 "thinking": {"type": "enabled", "budget_tokens": 1024}}
    responses = {"model": cfg.model_id, "input": "Hi", "max_output_tokens": 30, "temperature": 0,
                 "reasoning": {"effort": "high"}}
    head = {"anthropic-version": "2023-06-01"}

    thinking = {**ask, "enable_thinking": True}
    calls = (("/v1/chat/completions", thinking, None), ("/v1/chat/completions", {**thinking, "stream": True}, None),
             ("/v1/messages", anthropic, head), ("/v1/messages", {**anthropic, "stream": True}, head),
             ("/v1/responses", responses, None), ("/v1/responses", {**responses, "stream": True}, None))

    async def body(c, _):
        out = []
        for path, payload, headers in calls:
            r = await c.post(path, json=payload, headers=headers)
            out.append((r.status, await r.text()))
        return out

    try:
        scripted(served, REPLY)
        results = run_app(served, body, cfg)
    finally:
        served.engine_thread.submit = submit
    assert [s for s, _ in results] == [200] * 6, results
    (_, chat), (_, chat_sse), (_, msg), (_, msg_sse), (_, resp), (_, resp_sse) = results
    message = json.loads(chat)["choices"][0]["message"]
    assert (message["reasoning_content"], message["content"]) == ("I ponder.", "Done.")
    deltas = [json.loads(b[6:])["choices"][0]["delta"] for b in chat_sse.split("\n\n")[:-1]
              if b[6:] != "[DONE]" and json.loads(b[6:])["choices"]]
    assert "".join(d.get("reasoning_content") or "" for d in deltas) == "I ponder."
    assert "".join(d.get("content") or "" for d in deltas) == "Done."
    blocks = json.loads(msg)["content"]
    assert [(b["type"], b.get("thinking", b.get("text"))) for b in blocks] == [("thinking", "I ponder."),
                                                                               ("text", "Done.")]
    evs = named_events(msg_sse)
    assert [p["content_block"]["type"] for n, p in evs if n == "content_block_start"] == ["thinking", "text"]
    assert "".join(p["delta"].get("thinking", "") for n, p in evs if n == "content_block_delta") == "I ponder."
    assert "".join(p["delta"].get("text", "") for n, p in evs if n == "content_block_delta") == "Done."
    r = json.loads(resp)
    assert [o["type"] for o in r["output"]] == ["reasoning", "message"]
    assert r["output"][0]["content"][0]["text"] == "I ponder." and r["output"][1]["content"][0]["text"] == "Done."
    n_thought = len(served.engine.tokenize("<|channel>thought\nI ponder.<channel|>", add_bos=False, special=True))
    assert r["usage"]["output_tokens_details"]["reasoning_tokens"] == n_thought  # up to Gemma's close tag
    evs = named_events(resp_sse)
    text = "".join(p.get("delta", "") for n, p in evs if n == "response.reasoning_text.delta")
    assert text == "I ponder." and evs[-1][1]["response"]["output"][0]["type"] == "reasoning"
