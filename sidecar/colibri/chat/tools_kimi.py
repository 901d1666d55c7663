"""Kimi K2's tool calls (K2-Instruct, K2-Thinking), as its templates write them:

    <|tool_calls_section_begin|><|tool_call_begin|>functions.NAME:IDX<|tool_call_argument_begin|>{...}<|tool_call_end|>
    ...<|tool_calls_section_end|>

IDX counts the calls of the whole conversation, and the call's id is that text: Kimi's own
templates write each past call's `id` there and answer it with `## Return of {tool_call_id}`,
so the id the model wrote is the id the client gets back (and sends back with the result).
Ids of another form (another server's call_..., Anthropic's toolu_...) are renumbered in the
prompt to functions.NAME:IDX, and the results that answer them follow. A call whose
arguments are cut off, or are not JSON, is no call (the section comes back as text).
"""
from __future__ import annotations

import re

from colibri.chat.tool_calls import ParsedCall, Section, ToolFormat, delimited_calls, json_arguments

SECTION_BEGIN, SECTION_END = "<|tool_calls_section_begin|>", "<|tool_calls_section_end|>"
CALL_BEGIN, ARGUMENTS, CALL_END = "<|tool_call_begin|>", "<|tool_call_argument_begin|>", "<|tool_call_end|>"
CALL_ID = re.compile(r"\A(?:functions\.)?(.+?)(?::(\d+))?\Z", re.DOTALL)
KIMI_ID = re.compile(r"\Afunctions\.[^\s:]+:\d+\Z")


class KimiK2(ToolFormat):
    name, opener = "kimi_k2", SECTION_BEGIN
    markers = (SECTION_BEGIN, CALL_BEGIN, ARGUMENTS, CALL_END, SECTION_END)

    @property
    def openers(self) -> tuple[str, ...]:
        return (SECTION_BEGIN, CALL_BEGIN)  # a call without its section opener is a call too

    def call_opening(self, name: str, prompt: str = "") -> str:
        index = prompt.count(CALL_BEGIN)  # the templates number calls across the conversation
        return f"{SECTION_BEGIN}{CALL_BEGIN}functions.{name}:{index}{ARGUMENTS}"

    def prepare_history(self, messages: list[dict]) -> list[dict]:
        renamed: dict[str, str] = {}
        out, n = [], 0
        for m in messages:
            if m.get("tool_calls"):
                calls = []
                for call in m["tool_calls"]:
                    cid = call.get("id") or ""
                    if not KIMI_ID.match(cid):
                        renamed[cid] = f"functions.{call['function']['name']}:{n}"
                        call = {**call, "id": renamed[cid]}
                    calls.append(call)
                    n += 1
                m = {**m, "tool_calls": calls}
            elif m.get("role") == "tool" and m.get("tool_call_id") in renamed:
                m = {**m, "tool_call_id": renamed[m["tool_call_id"]]}
            out.append(m)
        return out

    def parse(self, section: str, schemas: dict[str, dict]) -> Section:
        return delimited_calls(section, CALL_BEGIN, CALL_END, SECTION_END, self.parse_call)

    @staticmethod
    def parse_call(body: str, closed: bool, nth: int) -> ParsedCall:
        head, sep, rest = body.partition(ARGUMENTS)
        if not sep:
            return ParsedCall("", text=body, complete=False, problem="the call has no <|tool_call_argument_begin|>")
        m = CALL_ID.match(head.strip())
        name, index = (m.group(1).strip(), m.group(2)) if m else ("", None)
        call = ParsedCall(name, complete=closed, id=f"functions.{name}:{nth if index is None else index}")
        json_arguments(call, rest.strip(), closed)
        if not name or any(c.isspace() or c in "<>{}:" for c in name):
            call.name, call.problem = "", call.problem or "the call has no function name"
        return call


KIMI_K2 = KimiK2()
