"""Gemma 4's tool calls, as its template teaches them and llama.cpp's parser reads them
(common/parsers/gemma4.cpp):

    <|tool_call>call:NAME{key:value,...}<tool_call|>          (repeated for parallel calls)

A value is a string between <|"|> quotes, an object {key:value,...} with bare keys, an array
[v,...], a JSON number, true, false or null. The arguments come back as a JSON object. A call
cut off or not in this syntax is no call (its section comes back as text); strict_tool_calls
names why.
"""
from __future__ import annotations

import json
import re
from typing import Any

from colibri.chat.tool_calls import ParsedCall, Section, ToolFormat, delimited_calls

CALL_BEGIN, CALL_END, QUOTE = "<|tool_call>", "<tool_call|>", '<|"|>'
GEMMA4_TURN_END, GEMMA4_CUE = "<turn|>\n", "<|turn>model\n"  # a turn's end; the model's turn header
NUMBER = re.compile(r"-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?")
LITERALS = (("true", True), ("false", False), ("null", None))


class _Bad(Exception):
    pass


def _space(text: str, pos: int) -> int:
    while pos < len(text) and text[pos] in " \t\r\n":
        pos += 1
    return pos


def _members(text: str, pos: int, close: str, member) -> int:
    """Comma-separated members up to `close` (pos just after the opening bracket); the position after it."""
    pos = _space(text, pos)
    if text.startswith(close, pos):
        return pos + 1
    while True:
        pos = _space(text, member(pos))
        if text.startswith(",", pos):
            pos = _space(text, pos + 1)
        elif text.startswith(close, pos):
            return pos + 1
        else:
            raise _Bad(f"expected ',' or '{close}' at {pos}")


def read_value(text: str, pos: int) -> tuple[Any, int]:
    """One Gemma 4 value at text[pos:] (after spaces) -> (value, position after it)."""
    pos = _space(text, pos)
    if text.startswith(QUOTE, pos):
        end = text.find(QUOTE, pos + len(QUOTE))
        if end < 0:
            raise _Bad("a string is not closed")
        return text[pos + len(QUOTE):end], end + len(QUOTE)
    if text.startswith("{", pos):
        out: dict[str, Any] = {}

        def member(at: int) -> int:
            colon = at
            while colon < len(text) and text[colon] not in ":}":
                colon += 1
            key = text[at:colon].strip()
            if colon >= len(text) or text[colon] != ":" or not key:
                raise _Bad(f"an object member without a key at {at}")
            out[key], after = read_value(text, colon + 1)
            return after

        return out, _members(text, pos + 1, "}", member)
    if text.startswith("[", pos):
        items: list[Any] = []

        def element(at: int) -> int:
            value, after = read_value(text, at)
            items.append(value)
            return after

        return items, _members(text, pos + 1, "]", element)
    m = NUMBER.match(text, pos)
    if m:
        return json.loads(m.group(0)), m.end()
    for word, value in LITERALS:
        if text.startswith(word, pos):
            return value, pos + len(word)
    raise _Bad(f"no value at {pos}")


def write_value(value: Any) -> str:
    """A value in Gemma 4's syntax (the inverse of read_value, as its template's format_argument writes it)."""
    if isinstance(value, str):
        return QUOTE + value + QUOTE
    if isinstance(value, dict):
        return "{" + ",".join(f"{k}:{write_value(v)}" for k, v in value.items()) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(write_value(v) for v in value) + "]"
    return json.dumps(value)


class Gemma4(ToolFormat):
    name, opener = "gemma4", CALL_BEGIN
    markers = (CALL_BEGIN, CALL_END, QUOTE)

    def call_opening(self, name: str, prompt: str = "") -> str:
        return f"{CALL_BEGIN}call:{name}"

    def prepare_history(self, messages: list[dict]) -> list[dict]:
        """As llama.cpp hands a conversation to Gemma 4's template (convert_tool_responses_gemma4): an assistant
        turn with calls, the tool results after it and a plain assistant answer after those become one
        assistant message with tool_calls, tool_responses ({name: the call's function, response: the result
        as JSON where it parses, else its text}) and that answer as content."""
        out: list[dict] = []
        i = 0
        while i < len(messages):
            m = messages[i]
            if m.get("role") != "assistant" or not m.get("tool_calls"):
                out.append(m)
                i += 1
                continue
            calls = list(m["tool_calls"])
            merged: dict = {"role": "assistant", "tool_calls": calls}
            if isinstance(m.get("reasoning_content"), str):
                merged["reasoning_content"] = m["reasoning_content"]
            i += 1
            responses = []
            while i < len(messages) and messages[i].get("role") == "tool":
                t = messages[i]
                body = t.get("content")
                if isinstance(body, str):
                    try:
                        body = json.loads(body)
                    except json.JSONDecodeError:
                        pass
                n = len(responses)
                name = (calls[n].get("function") or {}).get("name", "") if n < len(calls) else ""
                responses.append({"name": name or t.get("tool_call_id") or "", "response": body})
                i += 1
            if i < len(messages) and messages[i].get("role") == "assistant" and not messages[i].get("tool_calls") \
                    and messages[i].get("content"):
                merged["content"] = messages[i]["content"]
                i += 1
            if responses:
                merged["tool_responses"] = responses
            out.append(merged)
        return out

    def parse(self, section: str, schemas: dict[str, dict]) -> Section:
        return delimited_calls(CALL_BEGIN + section, CALL_BEGIN, CALL_END, "", self.parse_call)

    @staticmethod
    def parse_call(body: str, closed: bool, nth: int = 0) -> ParsedCall:
        text = body.strip()
        brace = text.find("{")
        head = text if brace < 0 else text[:brace]
        name = head[len("call:"):].strip() if head.startswith("call:") else ""
        call = ParsedCall(name, text=text[brace:] if brace >= 0 else "", complete=closed)
        if not name or brace < 0:
            call.name, call.problem = "", "the call is not call:NAME{...}"
            return call
        try:
            args, end = read_value(text, brace)
            if _space(text, end) != len(text):
                raise _Bad("text after the arguments")
        except _Bad as e:
            call.name = ""
            call.problem = ("the call is cut off in its arguments" if not closed
                            else f"the arguments are not in Gemma 4's syntax ({e})")
            return call
        call.arguments = args
        if not closed:
            call.problem = f"the call to {name!r} is cut off before {CALL_END}"
            call.name = ""
        return call


class Gemma4OpenAI(Gemma4):
    """Gemma 4's updated template (OPENAI_RESULTS in it) reads role "tool" messages itself, each result as the
    text it came as: llama.cpp hands it the conversation unchanged (its merge is for the older templates)."""

    def prepare_history(self, messages: list[dict]) -> list[dict]:
        return messages


OPENAI_RESULTS = "{#- OpenAI Chat Completions:"  # llama.cpp's test for the updated template (common/chat.cpp)
GEMMA4 = Gemma4()
GEMMA4_OPENAI = Gemma4OpenAI()
