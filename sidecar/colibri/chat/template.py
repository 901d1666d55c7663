"""Rendering a chat template the way Hugging Face's apply_chat_template does: jinja2 in an
immutable sandbox, trim_blocks and lstrip_blocks, loop controls, and the globals and
filters the published templates use (raise_exception, strftime_now, tojson; from_json, which
llama.cpp's DeepSeek V3.2 template calls; the {% generation %} block), and lists a template
may append to (llama.cpp's Kimi K2 templates). A few facts about what a template expects of its
messages are read from its source once (the properties below)."""
from __future__ import annotations

import json
import re
from datetime import datetime
from typing import Any

import jinja2
from jinja2 import nodes
from jinja2.ext import Extension, loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment, SandboxedEnvironment

from colibri.chat.harmony import is_harmony
from colibri.chat.reasoning import ReasoningTags, tags_for


# `... + tool['function']['arguments'] + ...`: the template adds the arguments to text (DeepSeek's own)
ARGUMENTS_AS_TEXT = re.compile(r"""\[['"]arguments['"]\]\s*\+"""
                               r"""|\+\s*\w+(?:\[['"]\w+['"]\])*\[['"]arguments['"]\]\s*[+}]""")
NONE_CONTENT = re.compile(r"""message\[['"]content['"]\]\s+is\s+none\b""")  # DeepSeek's test for a tool-call turn
TOOLS_VARIABLE = re.compile(r"\btools\b")
THINKING_VARIABLE = re.compile(r"\bthinking\s+is\s+(?:not\s+)?defined")  # DeepSeek V3.1, V3.2: their own switch


class TemplateRefused(Exception):
    """The template itself refused the conversation (its raise_exception), or failed on it."""


class GenerationBlock(Extension):
    """Hugging Face's `{% generation %}...{% endgeneration %}` (it marks the assistant's tokens
    for training masks; GLM-5's later templates use it): rendered as its body."""

    tags = {"generation"}

    def parse(self, parser) -> list[nodes.Node]:
        next(parser.stream)
        return parser.parse_statements(("name:endgeneration",), drop_needle=True)


def _raise_exception(message: str) -> None:
    raise TemplateRefused(message)


def _tojson(value: Any, ensure_ascii: bool = False, indent: int | None = None, separators=None,
            sort_keys: bool = False) -> str:
    return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def _strftime_now(fmt: str) -> str:
    return datetime.now().strftime(fmt)


class TemplateSandbox(ImmutableSandboxedEnvironment):
    """Immutable, except that a list may grow and shrink at its end or front (append, pop):
    llama.cpp's Kimi K2 templates queue call ids in a namespace list. What a render is given
    is built afresh for it, so nothing outlives the render."""

    def is_safe_attribute(self, obj: Any, attr: str, value: Any) -> bool:
        if isinstance(obj, list) and attr in ("append", "pop"):
            return SandboxedEnvironment.is_safe_attribute(self, obj, attr, value)
        return super().is_safe_attribute(obj, attr, value)


def _environment() -> ImmutableSandboxedEnvironment:
    env = TemplateSandbox(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols, GenerationBlock])
    env.filters["tojson"] = _tojson
    env.filters["from_json"] = json.loads
    env.globals["raise_exception"] = _raise_exception
    env.globals["strftime_now"] = _strftime_now
    return env


class ChatTemplate:
    """One compiled template and the special-token texts it is rendered with."""

    def __init__(self, source: str, bos_token: str = "", eos_token: str = ""):
        self.source = source
        self.bos_token = bos_token
        self.eos_token = eos_token
        try:
            self._template = _environment().from_string(source)
        except jinja2.TemplateSyntaxError as exc:
            raise TemplateRefused(f"the model's chat template does not compile: {exc}") from exc

    @property
    def renders_tools(self) -> bool:
        """It writes the offered tools itself (DeepSeek V3 and V3.1 leave that to the caller)."""
        return bool(TOOLS_VARIABLE.search(self.source))

    @property
    def arguments_as_text(self) -> bool:
        """It adds a call's arguments to text, so they must stay the JSON text they came as."""
        return bool(ARGUMENTS_AS_TEXT.search(self.source))

    @property
    def none_for_no_content(self) -> bool:
        """It tells a tool-call turn by `content is none`, so an empty content must be None."""
        return bool(NONE_CONTENT.search(self.source))

    @property
    def reads_thinking(self) -> bool:
        """It takes its reasoning switch as `thinking` (DeepSeek V3.1, V3.2) besides enable_thinking."""
        return bool(THINKING_VARIABLE.search(self.source))

    @property
    def has_reasoning(self) -> bool:
        """The family's template knows a reasoning block (<think> for Qwen3, DeepSeek-R1, GLM...;
        Gemma 4's thought channel) or harmony's analysis channel (gpt-oss)."""
        return self.reasoning_tags is not None or self.harmony

    @property
    def reasoning_tags(self) -> ReasoningTags | None:
        """The tags of its reasoning block (chat/reasoning.py); None for harmony, which has channels."""
        return None if self.harmony else tags_for(self.source)

    @property
    def harmony(self) -> bool:
        """It speaks gpt-oss's harmony format (chat/harmony.py): channels, not <think> blocks."""
        return is_harmony(self.source)

    def render(self, messages: list[dict], add_generation_prompt: bool, tools: list[dict] | None = None,
               **kwargs: Any) -> str:
        try:
            return self._template.render(messages=messages, add_generation_prompt=add_generation_prompt,
                                         bos_token=self.bos_token, eos_token=self.eos_token,
                                         tools=list(tools or []) or None, **kwargs)
        except TemplateRefused:
            raise
        except (jinja2.TemplateError, TypeError, KeyError, IndexError, ValueError) as exc:
            raise TemplateRefused(f"the chat template failed on these messages: {exc}") from exc
