"""What every tool-call format shares: a parsed call, a parsed section, and the ToolFormat
interface the serving core drives (tools.py: the families' formats and which one a template
speaks).

    fmt.openers           # the texts that start a tool section (fmt.opener first)
    fmt.parse(section)    # the reply after the opener -> Section(calls, stray)
    fmt.parse_section(matched, after)   # the same, from the opener that matched (Hermes: bare JSON)
    fmt.call_opening(f)   # a call to f written up to its arguments (a forced call)
    fmt.markers           # the texts the parser must see: a model file may hold them as
                          # control tokens, which are shown only when asked for
    fmt.describe(tools)   # the family's own tool instructions, for templates that write none
    fmt.prepare_history(messages)   # past calls' ids as the family writes them (Kimi's)
"""
from __future__ import annotations

import json
import secrets
from dataclasses import dataclass, field
from typing import Any


@dataclass
class ParsedCall:
    name: str
    arguments: Any = None  # the decoded arguments (an object when well formed)
    text: str = ""  # the arguments as the model wrote them
    complete: bool = True  # its closing syntax was there
    problem: str | None = None  # why it is not a well-formed call
    id: str | None = None  # the call's id as the model wrote it (Kimi's functions.NAME:IDX), else one is made

    def arguments_json(self) -> str:
        if isinstance(self.arguments, dict):
            return json.dumps(self.arguments, ensure_ascii=False)
        return self.text


@dataclass
class Section:
    calls: list[ParsedCall] = field(default_factory=list)
    stray: str = ""  # text in the section that belongs to no call


def decode_arguments(call: ParsedCall, value: Any) -> None:
    """call.arguments and call.text from the value the model wrote (JSON, or JSON in a string)."""
    if isinstance(value, str):  # some models write the arguments as a JSON string
        call.text = value
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            call.problem = "the arguments are not valid JSON"
            return
    else:
        call.text = json.dumps(value, ensure_ascii=False)
    call.arguments = value
    if not isinstance(value, dict):
        call.problem = "the arguments are not a JSON object"


class ToolFormat:
    name = ""
    opener = ""

    @property
    def openers(self) -> tuple[str, ...]:
        """Every text that starts the tool section (the opener first)."""
        return (self.opener,)

    @property
    def markers(self) -> tuple[str, ...]:
        """The format's syntax texts that a model file may hold as control tokens."""
        return self.openers

    def parse(self, section: str, schemas: dict[str, dict]) -> Section:
        raise NotImplementedError

    def parse_section(self, matched: str, after: str, schemas: dict[str, dict]) -> Section:
        """The section the opener `matched` started, `after` being the reply past it: parse()
        of the text after the opener, or of the whole section for another of the openers."""
        return self.parse(after if matched == self.opener else matched + after, schemas)

    def call_opening(self, name: str, prompt: str = "") -> str:
        """A call to `name` as the model writes it, opener included, up to its arguments;
        `prompt` is the rendered conversation it continues (for formats that number calls)."""
        raise NotImplementedError

    def call_id(self) -> str:
        return "call_" + secrets.token_hex(12)

    def describe(self, tools: list[dict]) -> str:
        """The family's tool instructions for a system prompt ("" when its templates write their own)."""
        return ""

    def prepare_history(self, messages: list[dict]) -> list[dict]:
        """The messages as the template takes them, past calls' ids in the family's own form."""
        return messages


def skip_space(text: str, pos: int) -> int:
    while pos < len(text) and text[pos].isspace():
        pos += 1
    return pos


def first(text: str, pos: int, *tags: str) -> int:
    """Where the first of tags occurs in text from pos (len(text) when none does)."""
    found = [i for i in (text.find(t, pos) for t in tags) if i >= 0]
    return min(found) if found else len(text)


def delimited_calls(section: str, begin: str, end: str, section_end: str, parse_one) -> Section:
    """The calls written between `begin` and `end` markers, through parse_one(body, closed, nth);
    a call not closed ends where the next one begins, or with the text. The rest is stray text
    (the section's own closing marker aside)."""
    out = Section()
    pos = 0
    while True:
        start = section.find(begin, pos)
        if start < 0:
            out.stray += section[pos:].replace(section_end, "", 1)
            return out
        out.stray += section[pos:start]
        body_at = start + len(begin)
        close, nxt = section.find(end, body_at), section.find(begin, body_at)
        closed = close >= 0 and (nxt < 0 or close < nxt)
        stop = close if closed else (nxt if nxt >= 0 else len(section))
        out.calls.append(parse_one(section[body_at:stop], closed, len(out.calls)))
        pos = stop + len(end) if closed else stop


def json_arguments(call: ParsedCall, text: str, closed: bool) -> None:
    """call's arguments from the JSON text the model wrote (a JSON string holding the object,
    as a template's `tojson` of a string writes it, is read through). Text that is not JSON
    makes it no call (its section comes back as text); strict_tool_calls names why."""
    decode_arguments(call, text)
    if isinstance(call.arguments, str):
        call.problem = None
        decode_arguments(call, call.arguments)
    if call.arguments is None:
        call.name = ""
        if not closed:
            call.problem = "the call is cut off in its arguments"
