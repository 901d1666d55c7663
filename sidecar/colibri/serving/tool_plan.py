"""What a request's tools change before generation, for every chat route: the family must
have a tool format (else a named refusal), tool_choice narrows what is offered and adds
one instruction line, a forced call is opened in the prompt, and the parser setup travels
to the generation.

    offered, messages, setup = plan_tools(fmt, req.tools, req.messages)
    prompt = fmt.render(messages, tools=offered, ...)
    prompt, setup = open_forced_call(prompt, setup)
"""
from __future__ import annotations

from dataclasses import replace

from colibri.chat.messages import Message
from colibri.chat.prompt import ChatFormat, Prompt
from colibri.errors import InvalidRequest
from colibri.serving.generation import ToolSetup
from colibri.serving.requests import Tools

REQUIRED = "You must answer by calling one of the tools."
NAMED = "You must answer by calling the tool `{name}`."


def plan_tools(fmt: ChatFormat, tools: Tools, messages: list[Message],
               param: str = "tools") -> tuple[list[dict] | None, list[Message], ToolSetup | None]:
    """(tools to render, messages to render, parser setup) for one request."""
    native = fmt.tool_format
    history = any(m.tool_calls or m.role == "tool" for m in messages)
    if native is None and (tools.active or history):
        raise InvalidRequest("unsupported_parameter", "this model family has no tool-call format: its chat template "
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
    if line:  # a prompt-level instruction, not a sampling constraint (docs/openai-api.md#tool-choice)
        if messages and messages[0].role == "system":
            messages = [replace(messages[0], content=f"{messages[0].content}\n\n{line}")] + messages[1:]
        else:
            messages = [Message("system", line)] + messages
    forced = tools.choice.name if tools.choice.mode == "function" else None
    return offered, messages, ToolSetup(native, tools.schemas, tools.strict, forced=forced)


def open_forced_call(prompt: Prompt, setup: ToolSetup | None) -> tuple[Prompt, ToolSetup | None]:
    """A named tool_choice starts the reply with the family's own opening of a call to that tool
    (Qwen: `<tool_call>\\n{"name": "f", "arguments":`): the model writes the arguments, and the
    parser reads the reply as the rest of that call. Asked in prose alone, a small model answers
    in prose or in bare JSON. This is prompt text, not a sampling constraint. A prompt that ends
    inside a reasoning block is left as it is (the call would land in the reasoning)."""
    if setup is None or setup.forced is None or prompt.in_reasoning:
        return prompt, setup
    opening = setup.format.call_opening(setup.forced, prompt.text)
    return replace(prompt, text=prompt.text + opening), replace(setup, opened=opening)
