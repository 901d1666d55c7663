"""What a request's tools change before generation, shared by the OpenAI and Anthropic routes:
the family must have a tool format (else a named 400), tool_choice narrows what is offered
and adds one instruction line, and the parser setup travels to the generation."""
from __future__ import annotations

from dataclasses import replace

from colibri.api.errors import ApiError
from colibri.api.protocol import Message, Tools
from colibri.api.serving import ToolSetup
from colibri.chat.prompt import ChatFormat

REQUIRED = "You must answer by calling one of the tools."
NAMED = "You must answer by calling the tool `{name}`."


def plan_tools(fmt: ChatFormat, tools: Tools, messages: list[Message],
               param: str = "tools") -> tuple[list[dict] | None, list[Message], ToolSetup | None]:
    """(tools to render, messages to render, parser setup) for one request."""
    native = fmt.tool_format
    history = any(m.tool_calls or m.role == "tool" for m in messages)
    if native is None and (tools.active or history):
        raise ApiError(400, "unsupported_parameter", "this model family has no tool-call format: its chat template "
                                                     "offers no tools, so tool declarations, choices and tool turns "
                                                     "cannot be honoured", param=param if tools.active else "messages")
    if not tools.active:
        return None, messages, None
    offered = tools.declared
    line = None
    if tools.choice.mode == "function":  # narrowed to the named tool, and named in the instruction
        offered = [t for t in tools.declared if t["function"]["name"] == tools.choice.name]
        line = NAMED.format(name=tools.choice.name)
    elif tools.choice.mode == "required":
        line = REQUIRED
    if line:  # a prompt-level instruction, not a sampling constraint (serve-api spec)
        if messages and messages[0].role == "system":
            messages = [replace(messages[0], content=f"{messages[0].content}\n\n{line}")] + messages[1:]
        else:
            messages = [Message("system", line)] + messages
    return offered, messages, ToolSetup(native, tools.schemas, tools.strict)
