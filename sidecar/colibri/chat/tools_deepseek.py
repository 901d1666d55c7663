"""DeepSeek's tool calls, as each generation's template teaches them:

  V3, R1    <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME\\n```json\\n{...}\\n```<｜tool▁call▁end｜>
            (more calls, each after a newline) <｜tool▁calls▁end｜>
  V3.1      <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>NAME<｜tool▁sep｜>{...}<｜tool▁call▁end｜>...<｜tool▁calls▁end｜>
  V3.2      <｜DSML｜function_calls>                                     (V4: <｜DSML｜tool_calls>)
            <｜DSML｜invoke name="NAME">
            <｜DSML｜parameter name="K" string="true">V</｜DSML｜parameter>   (string="false": V is JSON)
            </｜DSML｜invoke>
            </｜DSML｜function_calls>

Both V3 forms parse with either parser (a V3.1 model may fall back to the older one). A
call whose arguments are cut off, or are not JSON, is no call (the section comes back as
text; strict_tool_calls names why). The V3 and V3.1 templates render no tool list, so
`describe` gives the instructions the model card prints (V3.1) or llama.cpp's (V3, R1).
"""
from __future__ import annotations

import json
import re

from colibri.chat.tool_calls import ParsedCall, Section, ToolFormat, delimited_calls, json_arguments

CALLS_BEGIN, CALLS_END = "<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>"
CALL_BEGIN, CALL_END, SEP = "<｜tool▁call▁begin｜>", "<｜tool▁call▁end｜>", "<｜tool▁sep｜>"
FENCE = re.compile(r"\A\s*```(?:json)?\s*\n?(.*?)\n?\s*(```\s*)?\Z", re.DOTALL)


class DeepSeekCalls(ToolFormat):
    """V3/R1 (fenced=True: `function<｜tool▁sep｜>NAME` and a ```json block) or V3.1 (`NAME<｜tool▁sep｜>{...}`)."""

    opener = CALLS_BEGIN
    markers = (CALLS_BEGIN, CALL_BEGIN, SEP, CALL_END, CALLS_END)

    def __init__(self, fenced: bool):
        self.fenced = fenced
        self.name = "deepseek_v3" if fenced else "deepseek_v31"

    @property
    def openers(self) -> tuple[str, ...]:
        return (CALLS_BEGIN, CALL_BEGIN)  # models sometimes start at the call itself

    def call_opening(self, name: str, prompt: str = "") -> str:
        if self.fenced:
            return f"{CALLS_BEGIN}{CALL_BEGIN}function{SEP}{name}\n```json\n"
        return f"{CALLS_BEGIN}{CALL_BEGIN}{name}{SEP}"

    def parse(self, section: str, schemas: dict[str, dict]) -> Section:
        return delimited_calls(section, CALL_BEGIN, CALL_END, CALLS_END, self.parse_call)

    @staticmethod
    def parse_call(body: str, closed: bool, nth: int = 0) -> ParsedCall:
        head, sep, rest = body.partition(SEP)
        if not sep:
            return ParsedCall("", text=body, complete=False, problem="the call has no <｜tool▁sep｜>")
        name = head.strip()
        if name == "function":  # V3/R1: the type, then the name on the separator's line, then ```json
            name, _, rest = rest.partition("\n")
            name = name.strip()
            fence = FENCE.match(rest)
            if fence:
                rest = fence.group(1)
        call = ParsedCall(name, complete=closed)
        json_arguments(call, rest.strip(), closed)
        if not name or any(c.isspace() or c in "<>{}" for c in name):
            call.name, call.problem = "", call.problem or "the call has no function name"
        return call

    def describe(self, tools: list[dict]) -> str:
        if self.fenced:  # llama.cpp's tool prompt for DeepSeek-R1 (models/templates/llama-cpp-deepseek-r1.jinja)
            functions = json.dumps([t["function"] for t in tools], ensure_ascii=False, indent=2)
            return (f"You can call any of the following function tools to satisfy the user's requests: {functions}"
                    f"\n\nExample function tool call syntax:\n\n{CALLS_BEGIN}{CALL_BEGIN}function{SEP}"
                    'example_function_name\n```json\n{\n  "arg1": "some_value"\n  ...\n}\n```\n'
                    f"{CALL_END}{CALLS_END}\n\n")
        parts = ["## Tools\nYou have access to the following tools:\n"]  # DeepSeek-V3.1's model card, "ToolCall"
        for t in tools:
            fn = t["function"]
            parts.append(f"\n### {fn['name']}\nDescription: {fn.get('description') or ''}\n\n"
                         f"Parameters: {json.dumps(fn.get('parameters') or {}, ensure_ascii=False)}\n")
        parts.append(f"\nIMPORTANT: ALWAYS adhere to this exact format for tool use:\n{CALLS_BEGIN}{CALL_BEGIN}"
                     f"tool_call_name{SEP}tool_call_arguments{CALL_END}{{{{additional_tool_calls}}}}{CALLS_END}\n\n"
                     "Where:\n- `tool_call_name` must be an exact match to one of the available tools\n"
                     "- `tool_call_arguments` must be valid JSON that strictly follows the tool's Parameters Schema\n"
                     "- For multiple tool calls, chain them directly without separators or spaces")
        return "".join(parts)


DSML = "｜DSML｜"
# a block not closed ends where the next one opens, or with the text
INVOKE = re.compile(r'<｜DSML｜invoke\s+name="([^"]*)"\s*>(.*?)(</｜DSML｜invoke>|(?=<｜DSML｜invoke)|\Z)', re.DOTALL)
PARAMETER = re.compile(r'<｜DSML｜parameter\s+name="([^"]*)"(?:\s+string="(true|false)")?\s*>(.*?)'
                       r'(</｜DSML｜parameter>|(?=<｜DSML｜parameter|</｜DSML｜invoke)|\Z)', re.DOTALL)


class DeepSeekDsml(ToolFormat):
    """V3.2's DSML blocks (V4 names its block tool_calls). A value marked string="true" is the
    text as written; string="false" is JSON (kept as text when it is not, for the schema checks
    to name). An invoke not closed by </｜DSML｜invoke> is cut off: no call."""

    def __init__(self, block: str = "function_calls"):
        self.name = "deepseek_dsml" if block == "function_calls" else f"deepseek_dsml_{block}"
        self.opener, self.close = f"<{DSML}{block}>", f"</{DSML}{block}>"

    @property
    def openers(self) -> tuple[str, ...]:
        return (self.opener, f"<{DSML}invoke")

    @property
    def markers(self) -> tuple[str, ...]:
        return (DSML, *self.openers)

    def call_opening(self, name: str, prompt: str = "") -> str:
        return f'{self.opener}\n<{DSML}invoke name="{name}">\n'

    def parse(self, section: str, schemas: dict[str, dict]) -> Section:
        out = Section()
        last = 0
        for m in INVOKE.finditer(section):
            out.stray += section[last:m.start()]
            last = m.end()
            out.calls.append(self._invoke(m.group(1).strip(), m.group(2), bool(m.group(3))))
        out.stray += section[last:].replace(self.close, "", 1)
        return out

    @staticmethod
    def _invoke(name: str, body: str, closed: bool) -> ParsedCall:
        call = ParsedCall(name, arguments={}, complete=closed)
        for p in PARAMETER.finditer(body):
            key, is_string, raw = p.group(1).strip(), p.group(2) != "false", p.group(3)
            if not p.group(4):
                call.complete, call.problem = False, f"the value of {key!r} is not closed"
            if is_string:
                call.arguments[key] = raw
                continue
            try:
                call.arguments[key] = json.loads(raw)
            except json.JSONDecodeError:
                call.arguments[key] = raw
        if PARAMETER.sub("", body).strip():
            call.problem = call.problem or "the call holds text outside <｜DSML｜parameter> blocks"
        if not name or any(c in '<>"' for c in name):
            call.name, call.problem = "", "the call has no function name"
        if not closed:  # cut off: no call, its section is text
            call.problem = f"the call to {name!r} is cut off before </｜DSML｜invoke>"
            call.name = ""
        call.text = json.dumps(call.arguments, ensure_ascii=False)
        return call


DEEPSEEK_V3, DEEPSEEK_V31 = DeepSeekCalls(fenced=True), DeepSeekCalls(fenced=False)
DEEPSEEK_DSML, DEEPSEEK_V4_DSML = DeepSeekDsml(), DeepSeekDsml("tool_calls")
