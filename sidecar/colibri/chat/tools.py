"""Tool calls in each family's native format: which format a chat template speaks, and
the calls parsed back out of a generated reply.

    fmt = tool_format(template_source)     # HERMES (Qwen2.5, Qwen3), QWEN3_CODER, GLM45, MISTRAL(_V11), HARMONY,
                                           # DEEPSEEK_V3, DEEPSEEK_V31, DEEPSEEK_DSML, KIMI_K2, GEMMA4, or None
    calls = fmt.parse(section)             # section: the reply after fmt.opener
    fmt.call_opening("f")                  # a call to f written up to its arguments (a forced call)

Formats, as the families' own templates ask the model to write them:
  Qwen (Hermes)   <tool_call>\\n{"name": "f", "arguments": {...}}\\n</tool_call>   (repeated)
  Qwen3-Coder     <tool_call>\\n<function=f>\\n<parameter=k>\\nv\\n</parameter>\\n</function>\\n</tool_call>
  GLM-4.5         <tool_call>f\\n<arg_key>k</arg_key>\\n<arg_value>v</arg_value>\\n</tool_call>
  Mistral         [TOOL_CALLS] [{"name": "f", "arguments": {...}}, ...]   (v3)
                  [TOOL_CALLS]f[ARGS]{...}                                 (v11+, repeated)
  GLM-4.7, GLM-5  GLM-4.5's, without the newlines
  DeepSeek, Kimi  their special-token sections (tools_deepseek.py, tools_kimi.py)
  gpt-oss         harmony messages addressed to functions.NAME (harmony.py)
  Gemma 4         <|tool_call>call:f{k:<|"|>v<|"|>,n:1}<tool_call|>   (tools_gemma4.py)
Hermes templates' models (Qwen2.5's small ones above all) often write a call as bare JSON,
`{"name": "f", "arguments": {...}}`, maybe in a ```json fence or one of the tags llama.cpp's
Hermes 2 Pro parser also accepts (<tools>, <response>, ...): read as llama.cpp reads them
(Hermes.parse_bare), for the Hermes family only, not where a template has its own call syntax.
Everything from the first opener on is the tool section: the answer is the text
before it, and calls come after all text (docs/openai-api.md#tool-calls). A format may
know other texts that start a section too (`openers`: Qwen3-Coder's models often drop the
`<tool_call>` and start with `<function=`); when one of those matched, the section
passed to parse starts with it. A call opening is the format's own text up to where
the arguments begin, ending where the model's own tokens of a call end too
(`"arguments":`, then the model writes ` {`).
"""
from __future__ import annotations

import ast
import json
import math
import re
import secrets
import string
from typing import Any

from colibri.chat.schema import problems
from colibri.chat.harmony import HARMONY, is_harmony
from colibri.chat.tool_calls import ParsedCall, Section, ToolFormat, first, skip_space
from colibri.chat.tool_calls import decode_arguments as _decode_arguments
from colibri.chat.tools_deepseek import DEEPSEEK_DSML, DEEPSEEK_V3, DEEPSEEK_V4_DSML, DEEPSEEK_V31, DSML
from colibri.chat.tools_gemma4 import GEMMA4, GEMMA4_OPENAI, OPENAI_RESULTS
from colibri.chat.tools_kimi import KIMI_K2

BLOCK = re.compile(r"<tool_call>(.*?)(</tool_call>|$)", re.DOTALL)
GLM_ARG = re.compile(r"<arg_key>(.*?)</arg_key>\s*<arg_value>(.*?)(</arg_value>|$)", re.DOTALL)
ALNUM = string.ascii_letters + string.digits


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


# llama.cpp's Hermes 2 Pro parser (common/chat.cpp, common_chat_parse_hermes_2_pro, before its PEG
# parsers): a call starts at an optional code fence, an optional tag, then `{` and "name".
BARE_FENCES = ("```json\n", "```xml\n", "```\n")
BARE_TAGS = ("<tool_call>", "<function_call>", "<tool>", "<tools>", "<response>", "<json>", "<xml>", "<JSON>")
BARE_CALL = re.compile(r'(```(?:xml|json)?\n\s*)?(' + "|".join(map(re.escape, BARE_TAGS)) + r')?(\s*\{\s*"name")')
# the same starts as literal texts, for the stream's split of answer and calls (a StopFilter matches
# texts, not patterns): the spacings models write between a fence or tag, `{` and "name"
_BRACES = ('{"name"', '{ "name"', '{\n"name"', '{\n  "name"', '{\n    "name"', '{\n\t"name"')
BARE_OPENERS = tuple(dict.fromkeys(
    fence + tag + gap + brace for fence in ("",) + BARE_FENCES for tag in ("",) + BARE_TAGS[1:]
    for gap in (("",) if not tag else ("", "\n")) for brace in _BRACES))


class Hermes(ToolFormat):
    """<tool_call> blocks; and the calls a Hermes model writes as bare JSON (BARE_CALL), which
    start a tool section too (BARE_OPENERS) and are read as llama.cpp reads them (parse_bare)."""

    name, opener = "hermes", "<tool_call>"
    markers = ("<tool_call>", "</tool_call>")

    @property
    def openers(self) -> tuple[str, ...]:
        return (self.opener,) + BARE_OPENERS

    def call_opening(self, name: str, prompt: str = "") -> str:
        return f'{self.opener}\n{{"name": {json.dumps(name)}, "arguments":'

    def parse(self, section: str, schemas: dict[str, dict]) -> Section:
        return _blocks(self.opener + section, lambda body, complete: self.parse_block(body.strip(), complete))

    def parse_section(self, matched: str, after: str, schemas: dict[str, dict]) -> Section:
        if matched == self.opener:
            return self.parse(after, schemas)
        return self.parse_bare(matched + after, schemas)

    @staticmethod
    def parse_bare(text: str, schemas: dict[str, dict]) -> Section:
        """Calls as llama.cpp's Hermes 2 Pro parser reads them: each at an optional ```json/```xml/```
        fence, an optional tag, then a JSON object with "name" and "arguments"; after it the tag's
        closing and the fence's ``` must follow (blanks aside); text between calls is stray. Any
        call that does not read so makes the section text, as llama.cpp then returns the whole
        reply as content. One tightening: a call that was not in a <tool_call> tag must name a
        declared tool, so a JSON object about something else (`{"name": "Alice", ...}`) stays text."""
        out = Section()
        pos = 0
        while (m := BARE_CALL.search(text, pos)) is not None:
            out.stray += text[pos:m.start()]
            brace = text.index("{", m.start(3))
            try:
                value, end = json.JSONDecoder().raw_decode(text, brace)
            except json.JSONDecodeError:
                return Section([ParsedCall("", text=text[brace:], complete=False,
                                           problem="the call is not valid JSON")], text)
            call = Hermes.parse_block(text[brace:end], complete=True)
            tag = m.group(2)
            if call.name and tag != "<tool_call>" and call.name not in schemas:
                call.name, call.problem = "", f"{call.name!r} is not a declared tool"
            if call.name and not (isinstance(value, dict) and ("arguments" in value or "parameters" in value)):
                call.name, call.problem = "", "the call has no arguments"
            for closing in (("</" + tag[1:]) if tag else "", "```" if m.group(1) else ""):
                end = skip_space(text, end)
                if not text.startswith(closing, end):
                    call.name, call.complete = "", False
                    call.problem = call.problem or f"the call is not closed by {closing}"
                end += len(closing)
            if not call.name:
                return Section([call], text)
            out.calls.append(call)
            pos = skip_space(text, end)
        out.stray += text[pos:]
        return out

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
    """GLM-4.5 to GLM-5 (4.7 and 5 write no newlines between the tags). A value is text where its
    parameter is declared a string, else JSON where it parses. A call cut off before
    </tool_call> is no call (its section comes back as text)."""

    name, opener = "glm45", "<tool_call>"
    markers = ("<tool_call>", "</tool_call>", "<arg_key>", "</arg_key>", "<arg_value>", "</arg_value>")

    def call_opening(self, name: str, prompt: str = "") -> str:
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
        if not complete and call.name:  # cut off before </tool_call>: no call, its section is text
            call.problem = call.problem or f"the call to {name!r} is cut off before </tool_call>"
            call.name = ""
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
    markers = ("[TOOL_CALLS]", "[ARGS]")

    def __init__(self, v11: bool = False):
        self.v11 = v11

    def call_opening(self, name: str, prompt: str = "") -> str:
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


class Qwen3CoderXml(ToolFormat):
    """Qwen3-Coder's XML calls (also Qwen3.5's), one function per <tool_call>:

        <tool_call>
        <function=NAME>
        <parameter=KEY>
        VALUE
        </parameter>
        </function>
        </tool_call>

    As vLLM's qwen3coder_tool_parser reads them: a value loses one leading and one trailing
    newline (the ones the template writes around it) and nothing else; it is typed by the
    declared schema of its parameter (strings and untyped parameters stay text; integers,
    numbers, booleans, objects and arrays are converted, and a value that does not convert
    stays text for the strict checks to name); a value not closed by </parameter> ends at
    the next <parameter= or </function>. As llama.cpp reads them: a value runs to the first
    </parameter>, so values may hold any other markup (</function> included). A bare
    <function=...> with no <tool_call> before it (these models often drop the opener) is a
    call too. A call cut off before </function> is no call (its section comes back as text);
    one closed by </tool_call> without </function> is kept with a problem."""

    name, opener = "qwen3_coder", "<tool_call>"
    CLOSE = "</tool_call>"
    FUNCTION, FUNCTION_END = "<function=", "</function>"
    PARAMETER, PARAMETER_END = "<parameter=", "</parameter>"

    markers = ("<tool_call>", "</tool_call>")

    @property
    def openers(self) -> tuple[str, ...]:
        return (self.opener, self.FUNCTION)

    def call_opening(self, name: str, prompt: str = "") -> str:
        return f"{self.opener}\n{self.FUNCTION}{name}>\n"

    def parse(self, section: str, schemas: dict[str, dict]) -> Section:
        text = self.opener + section  # a section opened by a bare <function= reads as one block
        out = Section()
        pos = 0
        while True:
            block, bare = text.find(self.opener, pos), text.find(self.FUNCTION, pos)
            if block < 0 and bare < 0:
                out.stray += text[pos:]
                return out
            if bare >= 0 and (block < 0 or bare < block):  # a call without its <tool_call>
                out.stray += text[pos:bare]
                call, pos = self._function(text, bare, schemas)
                out.calls.append(call)
                pos = self._skip(text, pos, self.CLOSE)  # the orphan </tool_call> such calls end with
                continue
            out.stray += text[pos:block]
            pos = self._block(text, block + len(self.opener), schemas, out)

    def _block(self, text: str, pos: int, schemas: dict[str, dict], out: Section) -> int:
        """The calls of one <tool_call> block from pos; where the block ends."""
        found, junk = False, ""
        while True:
            j = skip_space(text, pos)
            if text.startswith(self.FUNCTION, j):
                call, pos = self._function(text, j, schemas)
                out.calls.append(call)
                found = True
            elif text.startswith(self.CLOSE, j) or j >= len(text):
                end = min(j + len(self.CLOSE), len(text))
                if not found:
                    out.calls.append(ParsedCall("", text=junk.strip(), complete=j < len(text),
                                                problem="the <tool_call> block holds no <function=NAME>"))
                else:
                    out.stray += junk
                return end
            else:  # text that is no call: up to the next call or the block's end
                nxt = first(text, j, self.FUNCTION, self.CLOSE)
                junk += text[j:nxt]
                pos = nxt

    def _function(self, text: str, start: int, schemas: dict[str, dict]) -> tuple[ParsedCall, int]:
        """The call at text[start:] (which starts with <function=); where it ends."""
        head = start + len(self.FUNCTION)
        gt = text.find(">", head)
        if gt < 0:
            return ParsedCall("", text=text[start:], complete=False,
                              problem="the call is cut off in its function name"), len(text)
        name = text[head:gt].strip()
        call = ParsedCall(name, arguments={}, complete=False)
        if not name or any(c.isspace() or c in "<>=/" for c in name):
            call.name, call.problem = "", "the call has no function name"
        schema = schemas.get(name) or {}
        props = schema.get("properties") if isinstance(schema.get("properties"), dict) else {}
        extra = schema.get("additionalProperties")
        pos, end = gt + 1, len(text)
        while True:
            j = skip_space(text, pos)
            if text.startswith(self.FUNCTION_END, j):
                call.complete, end = True, j + len(self.FUNCTION_END)
                break
            if text.startswith(self.PARAMETER, j):
                pos = self._parameter(text, j, props, extra if isinstance(extra, dict) else {}, call)
                if pos is None:  # cut off inside the parameter
                    break
                continue
            if text.startswith(self.CLOSE, j) or text.startswith(self.FUNCTION, j):  # ended with no </function>
                call.problem = call.problem or "the call is not closed by </function>"
                end = j
                break
            if j >= len(text):
                break
            nxt = first(text, j, self.PARAMETER, self.FUNCTION_END, self.CLOSE, self.FUNCTION)
            call.problem = call.problem or "the call holds text outside <parameter=...> blocks"
            pos = nxt
        if not call.complete and end == len(text):  # cut off: no call, its section is text
            if call.name:
                call.problem = f"the call to {call.name!r} is cut off before </function>"
            call.name = ""
        call.text = json.dumps(call.arguments, ensure_ascii=False)
        return call, end

    def _parameter(self, text: str, start: int, props: dict, extra: dict, call: ParsedCall) -> int | None:
        """One <parameter=KEY>VALUE</parameter> into call.arguments; where it ends (None: cut off)."""
        head = start + len(self.PARAMETER)
        gt = text.find(">", head)
        if gt < 0:
            return None
        key = text[head:gt].strip()
        value_at = gt + 1
        close = text.find(self.PARAMETER_END, value_at)
        if close >= 0:
            raw, end = text[value_at:close], close + len(self.PARAMETER_END)
        else:  # not closed: up to the next parameter or the function's end (vLLM), else cut off
            nxt = first(text, value_at, self.PARAMETER, self.FUNCTION_END)
            raw, end = text[value_at:nxt], nxt
            if nxt < len(text):
                call.problem = call.problem or f"the value of {key!r} is not closed by </parameter>"
        if not key or "<" in key:
            call.problem = call.problem or "a parameter has no name"
        call.arguments[key] = xml_value(raw, props.get(key, extra))
        return end if end < len(text) or close >= 0 else None

    @staticmethod
    def _skip(text: str, pos: int, tag: str) -> int:
        j = skip_space(text, pos)
        return j + len(tag) if text.startswith(tag, j) else pos


JSON_NUMBER = re.compile(r"-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?")
ENUM_TYPES = ((bool, "boolean"), (int, "integer"), (float, "number"), (str, "string"), (type(None), "null"))


def schema_types(schema: Any) -> set[str]:
    """The JSON types a parameter's schema allows: its `type` (or list), those of anyOf/oneOf
    branches, else those of its enum's values. Empty when it says none."""
    if not isinstance(schema, dict):
        return set()
    kind = schema.get("type")
    out = set(kind if isinstance(kind, list) else [kind] if isinstance(kind, str) else [])
    for key in ("anyOf", "oneOf"):
        for sub in schema.get(key) or []:
            out |= schema_types(sub)
    if not out and isinstance(schema.get("enum"), list):
        out = {next(name for cls, name in ENUM_TYPES if isinstance(v, cls)) for v in schema["enum"]
               if isinstance(v, (bool, int, float, str, type(None)))}
    return {k for k in out if isinstance(k, str)}


def xml_value(raw: str, schema: Any) -> Any:
    """An XML-style argument value typed by its parameter's schema (vLLM's conversion): one
    newline trimmed at each end; text where the schema allows a string or gives no type;
    else the first declared type it converts to; else the text."""
    if raw.startswith("\n"):
        raw = raw[1:]
    if raw.endswith("\n"):
        raw = raw[:-1]
    types = schema_types(schema)
    word = raw.strip()
    if word.lower() == "null" and (not types or "null" in types):
        return None
    if not types or "string" in types:
        return raw
    for kind in ("integer", "number", "boolean", "object", "array", "null"):
        if kind not in types:
            continue
        if kind in ("integer", "number") and JSON_NUMBER.fullmatch(word):
            value = json.loads(word)
            if isinstance(value, int):
                return value
            if math.isfinite(value):  # vLLM: an integral number is an integer (2.0 -> 2)
                return int(value) if value.is_integer() else value
        elif kind == "boolean" and word.lower() in ("true", "false"):
            return word.lower() == "true"
        elif kind in ("object", "array"):
            value = _container(word, dict if kind == "object" else list)
            if value is not None:
                return value
        elif kind == "null" and word == "None":  # what the template's `| string` writes for null
            return None
    return raw


def _container(word: str, cls: type) -> Any:
    """An object or array written as JSON, or as the Python literal Qwen3-Coder's first template
    wrote for one (`{'a': 1}`, vLLM's ast.literal_eval fallback); None when it is neither."""
    try:
        value = json.loads(word, parse_constant=_no_constant)
    except ValueError:  # JSONDecodeError, or NaN/Infinity, which JSON does not have
        if len(word) > 100_000 or sum(word.count(c) for c in "[{(") > 64:  # literal_eval recurses
            return None
        try:
            value = json.loads(json.dumps(ast.literal_eval(word), allow_nan=False))
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            return None
    return value if isinstance(value, cls) else None


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


HERMES, QWEN3_CODER, GLM45, MISTRAL, MISTRAL_V11 = Hermes(), Qwen3CoderXml(), Glm45(), Mistral(), Mistral(v11=True)


def tool_format(template_source: str | None) -> ToolFormat | None:
    """The tool-call format a chat template teaches its model, or None (no tools)."""
    if not template_source:
        return None
    if is_harmony(template_source):  # gpt-oss
        return HARMONY
    if GEMMA4.opener in template_source and "<tool_call|>" in template_source:  # Gemma 4
        return GEMMA4_OPENAI if OPENAI_RESULTS in template_source else GEMMA4
    if "<arg_key>" in template_source:  # GLM-4.5 to GLM-5
        return GLM45
    if DSML in template_source:  # DeepSeek V3.2 (V4 names its block tool_calls)
        return DEEPSEEK_DSML if "function_calls>" in template_source else DEEPSEEK_V4_DSML
    if KIMI_K2.opener in template_source:
        return KIMI_K2
    if DEEPSEEK_V31.opener in template_source:  # V3 and R1 wrap the arguments in ```json, V3.1 does not
        return DEEPSEEK_V3 if "```json" in template_source else DEEPSEEK_V31
    if all(tag in template_source for tag in ("<tool_call>", "<function=", "<parameter=")):  # llama.cpp's test
        return QWEN3_CODER
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
