"""Tool calls in each family's native format: which format a chat template speaks, and
the calls parsed back out of a generated reply.

    fmt = tool_format(template_source)     # HERMES (Qwen2.5, Qwen3), GLM45, MISTRAL(_V11), or None
    calls = fmt.parse(section)             # section: the reply after fmt.opener
    fmt.call_opening("f")                  # a call to f written up to its arguments (a forced call)

Formats, as the families' own templates ask the model to write them:
  Qwen (Hermes)   <tool_call>\\n{"name": "f", "arguments": {...}}\\n</tool_call>   (repeated)
  GLM-4.5         <tool_call>f\\n<arg_key>k</arg_key>\\n<arg_value>v</arg_value>\\n</tool_call>
  Mistral         [TOOL_CALLS] [{"name": "f", "arguments": {...}}, ...]   (v3)
                  [TOOL_CALLS]f[ARGS]{...}                                 (v11+, repeated)
Everything from the first opener on is the tool section: the answer is the text
before it, and calls come after all text (docs/openai-api.md#tool-calls). A call opening is the
format's own text up to where the arguments begin, ending where the model's own
tokens of a call end too (`"arguments":`, then the model writes ` {`).
"""
from __future__ import annotations

import json
import re
import secrets
import string
from dataclasses import dataclass, field
from typing import Any

from colibri.chat.schema import problems

BLOCK = re.compile(r"<tool_call>(.*?)(</tool_call>|$)", re.DOTALL)
GLM_ARG = re.compile(r"<arg_key>(.*?)</arg_key>\s*<arg_value>(.*?)(</arg_value>|$)", re.DOTALL)
ALNUM = string.ascii_letters + string.digits


@dataclass
class ParsedCall:
    name: str
    arguments: Any = None  # the decoded arguments (an object when well formed)
    text: str = ""  # the arguments as the model wrote them
    complete: bool = True  # its closing syntax was there
    problem: str | None = None  # why it is not a well-formed call

    def arguments_json(self) -> str:
        if isinstance(self.arguments, dict):
            return json.dumps(self.arguments, ensure_ascii=False)
        return self.text


@dataclass
class Section:
    calls: list[ParsedCall] = field(default_factory=list)
    stray: str = ""  # text in the section that belongs to no call


def _decode_arguments(call: ParsedCall, value: Any) -> None:
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

    def parse(self, section: str, schemas: dict[str, dict]) -> Section:
        raise NotImplementedError

    def call_opening(self, name: str) -> str:
        """A call to `name` as the model writes it, opener included, up to its arguments."""
        raise NotImplementedError

    def call_id(self) -> str:
        return "call_" + secrets.token_hex(12)


def _blocks(text: str, parse_one) -> Section:
    """Every <tool_call> block of text through parse_one(body, complete); the rest is stray text."""
    out = Section()
    last = 0
    for m in BLOCK.finditer(text):
        out.stray += text[last:m.start()]
        last = m.end()
        out.calls.append(parse_one(m.group(1), bool(m.group(2))))
    out.stray += text[last:]
    return out


class Hermes(ToolFormat):
    name, opener = "hermes", "<tool_call>"

    def call_opening(self, name: str) -> str:
        return f'{self.opener}\n{{"name": {json.dumps(name)}, "arguments":'

    def parse(self, section: str, schemas: dict[str, dict]) -> Section:
        return _blocks(self.opener + section, lambda body, complete: self.parse_block(body.strip(), complete))

    @staticmethod
    def parse_block(body: str, complete: bool) -> ParsedCall:
        try:
            obj = json.loads(body)
        except json.JSONDecodeError:
            return ParsedCall("", text=body, complete=complete, problem="the call is not valid JSON")
        if not isinstance(obj, dict) or not isinstance(obj.get("name"), str):
            return ParsedCall("", text=body, complete=complete, problem="the call has no function name")
        call = ParsedCall(obj["name"], complete=complete)
        _decode_arguments(call, obj.get("arguments", obj.get("parameters", {})))
        return call


class Glm45(ToolFormat):
    name, opener = "glm45", "<tool_call>"

    def call_opening(self, name: str) -> str:
        return self.opener + name

    def parse(self, section: str, schemas: dict[str, dict]) -> Section:
        return _blocks(self.opener + section, lambda body, complete: self.parse_block(body, complete, schemas))

    @staticmethod
    def parse_block(body: str, complete: bool, schemas: dict[str, dict]) -> ParsedCall:
        cut = body.find("<arg_key>")
        name = (body if cut < 0 else body[:cut]).strip()
        call = ParsedCall(name, arguments={}, complete=complete)
        if not name or "<" in name:
            call.problem = "the call has no function name"
        props = (schemas.get(name) or {}).get("properties") or {}
        rest = body if cut < 0 else body[cut:]
        for m in GLM_ARG.finditer(rest):
            key, raw = m.group(1).strip(), m.group(2)
            if not m.group(3):
                call.complete, call.problem = False, f"the value of {key!r} is not closed"
            call.arguments[key] = raw if (props.get(key) or {}).get("type") == "string" else _glm_value(raw)
        if GLM_ARG.sub("", rest).strip():
            call.problem = call.problem or "the call holds text outside <arg_key>/<arg_value> pairs"
        call.text = json.dumps(call.arguments, ensure_ascii=False)
        return call


def _glm_value(raw: str) -> Any:
    """A GLM argument value: JSON where it parses (numbers, booleans, objects), else the text."""
    try:
        return json.loads(raw)
    except json.JSONDecodeError:
        return raw


class Mistral(ToolFormat):
    """Both generations parse; the call opening is the one the template writes (v11: [ARGS])."""

    name, opener = "mistral", "[TOOL_CALLS]"

    def __init__(self, v11: bool = False):
        self.v11 = v11

    def call_opening(self, name: str) -> str:
        if self.v11:
            return f"{self.opener}{name}[ARGS]"
        return f'{self.opener} [{{"name": {json.dumps(name)}, "arguments":'

    def call_id(self) -> str:
        return "".join(secrets.choice(ALNUM) for _ in range(9))  # Mistral's templates want 9 alphanumerics

    def parse(self, section: str, schemas: dict[str, dict]) -> Section:
        out = Section()
        body = section.strip()
        if body.startswith("["):  # v3: one JSON array of calls
            try:
                items, end = json.JSONDecoder().raw_decode(body)
            except json.JSONDecodeError:
                out.calls.append(ParsedCall("", text=body, complete=False, problem="the call array is not valid JSON"))
                return out
            out.stray = body[end:]
            for item in items if isinstance(items, list) else [items]:
                out.calls.append(Hermes.parse_block(json.dumps(item), complete=True))
            return out
        for part in body.split(self.opener):  # v11: name[ARGS]{...}, each after its own opener
            if not part.strip():
                continue
            name, sep, args = part.partition("[ARGS]")
            call = ParsedCall(name.strip(), complete=bool(sep))
            if not sep:
                call.problem = "the call has no [ARGS]"
                out.calls.append(call)
                continue
            try:
                value, end = json.JSONDecoder().raw_decode(args.strip())
            except json.JSONDecodeError:
                call.text, call.complete, call.problem = args.strip(), False, "the arguments are not valid JSON"
                out.calls.append(call)
                continue
            out.stray += args.strip()[end:]
            _decode_arguments(call, value)
            out.calls.append(call)
        return out


HERMES, GLM45, MISTRAL, MISTRAL_V11 = Hermes(), Glm45(), Mistral(), Mistral(v11=True)


def tool_format(template_source: str | None) -> ToolFormat | None:
    """The tool-call format a chat template teaches its model, or None (no tools)."""
    if not template_source:
        return None
    if "<arg_key>" in template_source:
        return GLM45
    if "<tool_call>" in template_source:
        return HERMES
    if "[TOOL_CALLS]" in template_source:
        return MISTRAL_V11 if "[ARGS]" in template_source else MISTRAL
    return None


def strict_problems(section: Section, schemas: dict[str, dict], cut_off: bool) -> list[str]:
    """Why these calls may not be executed (strict_tool_calls): incomplete, duplicate, unknown,
    invalid, or cut off by the generation limit (`cut_off`: the reply hit its token limit).
    Text after complete calls is not a reason: the calls themselves are whole."""
    out = []
    if cut_off and (not section.calls or not section.calls[-1].complete):
        out.append("the tool call was cut off by the generation limit")
    seen = set()
    for i, call in enumerate(section.calls):
        where = f"call {i} ({call.name or 'unnamed'})"
        if not call.complete:
            out.append(f"{where} is incomplete")
        if call.problem:
            out.append(f"{where}: {call.problem}")
            continue
        if call.name not in schemas:
            out.append(f"{where} names a function that was not declared")
            continue
        key = (call.name, json.dumps(call.arguments, sort_keys=True))
        if key in seen:
            out.append(f"{where} duplicates an earlier call")
        seen.add(key)
        out += [f"{where}: {p}" for p in problems(call.arguments, schemas[call.name] or {"type": "object"})]
    return out
