"""OpenAI messages to the prompt text a model was trained on, including continuation of a
trailing assistant turn (the prompt then ends inside that turn).

Continuation is the official template rendered with add_generation_prompt=False,
cut right after the last turn's text: exactly Hugging Face's
continue_final_message. A template that does not reproduce the text (so no
cut point exists) falls back to a completed turn plus a fresh cue.

Messages go to the template in the shape it reads (template.py's source facts):
past calls' arguments as a mapping, or as JSON text where the template adds
them to text (DeepSeek's own); an empty tool-call turn's content as None where
the template tests `is none`. A template that renders no tool list (DeepSeek V3,
V3.1) gets the family's own tool instructions appended to the system prompt.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, replace

from colibri.chat.messages import Message, Thinking
from colibri.chat.reasoning import ReasoningTags
from colibri.chat.template import ChatTemplate, TemplateRefused
from colibri.chat.tools import ToolFormat, tool_format
from colibri.chat.tools_gemma4 import GEMMA4_CUE, GEMMA4_TURN_END, Gemma4
from colibri.errors import InvalidRequest


@dataclass
class Prompt:
    text: str
    continued: bool = False  # ends inside the last assistant turn
    in_reasoning: bool = False  # ends inside an open reasoning block (<think>, Gemma 4's thought channel)
    harmony_tail: str | None = None  # harmony (gpt-oss): the text from the last <|start|>, where the reply goes on


class ChatFormat:
    """How one model's conversations become prompts."""

    def __init__(self, template: ChatTemplate | None):
        self.template = template

    @property
    def has_reasoning(self) -> bool:
        return self.template is not None and self.template.has_reasoning

    @property
    def reasoning_tags(self) -> ReasoningTags | None:
        """The family's reasoning block (None: none, or harmony's channels)."""
        return self.template.reasoning_tags if self.template is not None else None

    @property
    def tool_format(self) -> ToolFormat | None:
        """The family's native tool-call format (None: the template offers no tools)."""
        return tool_format(self.template.source if self.template else None)

    def render(self, messages: list[Message], *, continue_assistant: bool = True,
               thinking: Thinking | None = None, tools: list[dict] | None = None) -> Prompt:
        """tools: OpenAI tool objects to offer (already narrowed to what tool_choice allows)."""
        if self.template is None:
            raise InvalidRequest("unsupported_endpoint",
                                 "this model file has no chat template and colibri has none for its family; "
                                 "use /v1/completions with a raw prompt")
        kwargs = self._thinking_kwargs(thinking or Thinking())
        if tools:
            kwargs["tools"] = tools
            messages = self._with_tool_instructions(messages, tools)
        last = messages[-1]
        if last.role == "assistant" and last.content == "" and not last.tool_calls:
            messages = messages[:-1]  # an empty trailing turn asks for a fresh answer
            if not messages:
                raise InvalidRequest("invalid_value", "the conversation has no message to answer", param="messages")
        elif last.role == "assistant" and continue_assistant and not last.tool_calls:
            if tools:  # the tool-call parsers read an assistant turn from its start
                raise InvalidRequest("invalid_value", "a trailing assistant turn cannot be continued together "
                                                      "with tools", param=f"messages.{len(messages) - 1}")
            return self._continue(messages, kwargs)
        return self._finish(self._cued(self._render(messages, True, kwargs)))

    def _continue(self, messages: list[Message], kwargs: dict) -> Prompt:
        last = messages[-1]
        if last.content != last.content.rstrip():
            raise InvalidRequest("invalid_value",
                                 "a trailing assistant turn is continued from its exact text, which must not end in "
                                 "whitespace (the template strips it)", param=f"messages.{len(messages) - 1}.content")
        full = self._render(messages, False, kwargs)
        cut = full.rfind(last.content.lstrip())
        if cut < 0:  # the template rewrote the text: no open-turn shape, complete it instead
            return self._finish(self._cued(self._render(messages, True, kwargs)))
        return self._finish(full[:cut + len(last.content.lstrip())], continued=True)

    def _cued(self, text: str) -> str:
        """Gemma 4's template writes no cue after a model turn that has both calls with their results and text
        (it ends in <turn|>): llama.cpp adds the model's turn header then, and so does this."""
        if isinstance(self.tool_format, Gemma4) and text.endswith(GEMMA4_TURN_END):
            return text + GEMMA4_CUE
        return text

    def _render(self, messages: list[Message], cue: bool, kwargs: dict) -> str:
        try:
            history = [self._as_dict(m) for m in messages]
            fmt = self.tool_format
            return self.template.render(fmt.prepare_history(history) if fmt else history, cue, **kwargs)
        except TemplateRefused as exc:
            raise InvalidRequest("invalid_value", str(exc), param="messages") from exc

    @property
    def markers(self) -> tuple[str, ...]:
        """The texts replies are read by (tool syntax, reasoning tags): shown even when control tokens."""
        fmt, tags = self.tool_format, self.reasoning_tags
        return (*(fmt.markers if fmt else ()), *(tags.markers if tags else ()))

    def _with_tool_instructions(self, messages: list[Message], tools: list[dict]) -> list[Message]:
        fmt = self.tool_format
        text = fmt.describe(tools) if fmt and not self.template.renders_tools else ""
        if not text:
            return messages
        if messages[0].role == "system":
            return [replace(messages[0], content=f"{messages[0].content}\n\n{text}")] + messages[1:]
        return [Message("system", text)] + messages

    def _as_dict(self, m: Message) -> dict:
        empty_call = m.role == "assistant" and m.tool_calls and not m.content
        d: dict = {"role": m.role, "content": None if empty_call and self.template.none_for_no_content else m.content}
        if m.reasoning_content is not None and self.has_reasoning:
            d["reasoning_content"] = m.reasoning_content
            if self.template.harmony:  # gpt-oss's template reads a turn's analysis as `thinking`, as llama.cpp
                d["thinking"] = m.reasoning_content  # passes it, and refuses both beside a call: the call keeps it
                if m.tool_calls:
                    d["content"] = ""
        if m.tool_calls:  # only when present: some templates test `tool_calls is defined`
            as_text = self.template.arguments_as_text
            d["tool_calls"] = [_with_text_arguments(c) if as_text else _with_object_arguments(c) for c in m.tool_calls]
        if m.role == "tool":
            d["tool_call_id"] = m.tool_call_id
            if m.name:
                d["name"] = m.name
        return d

    def _thinking_kwargs(self, thinking: Thinking) -> dict:
        if not self.has_reasoning:
            if thinking.requested:
                param = ("enable_thinking" if thinking.enable else
                         "reasoning_effort" if thinking.effort not in (None, "none") else "preserve_thinking")
                raise InvalidRequest("unsupported_parameter", "this model family has no reasoning mode", param=param)
            return {}
        if self.template.harmony:
            return {"reasoning_effort": _harmony_effort(thinking)}
        kwargs: dict = {}
        enable = thinking.enable
        if enable is None and thinking.effort is not None:
            enable = thinking.effort != "none"
        if enable is not None:
            kwargs["enable_thinking"] = enable
            if self.template.reads_thinking:  # DeepSeek's switch; its V3.1 ignores enable_thinking
                kwargs["thinking"] = enable
        if thinking.effort is not None:
            kwargs["reasoning_effort"] = thinking.effort
        preserve = thinking.preserve if thinking.preserve is not None else (None if enable is None else not enable)
        if preserve is not None:
            kwargs["preserve_thinking"] = preserve
        return kwargs

    def _finish(self, text: str, continued: bool = False) -> Prompt:
        # a cue that ends in <think> (DeepSeek R1, V3.1 and V3.2 thinking, GLM-4.7 and 5) starts the reply
        # inside the reasoning block; a continued turn, where its own text left a block open. Gemma 4's cue
        # with thinking off closes an empty thought channel (<|channel>thought\n<channel|>): not open
        if self.template.harmony:  # channels, not <think>: the reply goes on from the last header
            start = text.rfind("<|start|>")  # none: a template that writes no header; the reply starts between messages
            return Prompt(text=text, continued=continued, harmony_tail=text[start:] if start >= 0 else "")
        tags = self.reasoning_tags
        if tags is None:
            return Prompt(text=text, continued=continued)
        tail = text.rstrip()
        opened = tail.rfind(tags.open) > tail.rfind(tags.close) if continued else tail.endswith(tags.open)
        return Prompt(text=text, continued=continued, in_reasoning=opened)


def _harmony_effort(thinking: Thinking) -> str:
    """gpt-oss's `Reasoning:` line: low, medium (its default) or high. It always reasons, so
    "none", "minimal" and thinking turned off ask for the least, "xhigh" and "max" for the most."""
    effort = thinking.effort
    if effort in ("none", "minimal") or (effort is None and thinking.enable is False):
        return "low"
    if effort in ("xhigh", "max"):
        return "high"
    return effort if effort in ("low", "high") else "medium"


def _with_object_arguments(call: dict) -> dict:
    """A past call as templates take it: arguments that are a JSON object's text decoded to
    the mapping (Qwen3-Coder iterates `arguments|items`, Qwen2.5 writes `arguments|tojson`,
    Qwen3 takes either); anything else as it came."""
    fn = call.get("function")
    args = fn.get("arguments") if isinstance(fn, dict) else None
    if isinstance(args, str):
        try:
            value = json.loads(args)
        except ValueError:
            return call
        if isinstance(value, dict):
            return {**call, "function": {**fn, "arguments": value}}
    return call


def _with_text_arguments(call: dict) -> dict:
    """A past call for a template that adds its arguments to text: the arguments as JSON text."""
    fn = call.get("function")
    args = fn.get("arguments") if isinstance(fn, dict) else None
    if args is None or isinstance(args, str):
        return call
    return {**call, "function": {**fn, "arguments": json.dumps(args, ensure_ascii=False)}}
