"""Rendering a chat template the way Hugging Face's apply_chat_template does: jinja2 in an
immutable sandbox, trim_blocks and lstrip_blocks, loop controls, and the globals and
filters the published templates use (raise_exception, strftime_now, tojson)."""
from __future__ import annotations

import json
from datetime import datetime
from typing import Any

import jinja2
from jinja2.ext import loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment


class TemplateRefused(Exception):
    """The template itself refused the conversation (its raise_exception), or failed on it."""


def _raise_exception(message: str) -> None:
    raise TemplateRefused(message)


def _tojson(value: Any, ensure_ascii: bool = False, indent: int | None = None, separators=None,
            sort_keys: bool = False) -> str:
    return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def _strftime_now(fmt: str) -> str:
    return datetime.now().strftime(fmt)


def _environment() -> ImmutableSandboxedEnvironment:
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
    env.filters["tojson"] = _tojson
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
    def has_reasoning(self) -> bool:
        """The family's template knows a <think> block (Qwen3, DeepSeek-R1, GLM...)."""
        return "<think>" in self.source

    def render(self, messages: list[dict], add_generation_prompt: bool, tools: list[dict] | None = None,
               **kwargs: Any) -> str:
        try:
            return self._template.render(messages=messages, add_generation_prompt=add_generation_prompt,
                                         bos_token=self.bos_token, eos_token=self.eos_token, tools=tools or None,
                                         **kwargs)
        except TemplateRefused:
            raise
        except (jinja2.TemplateError, TypeError, KeyError, IndexError, ValueError) as exc:
            raise TemplateRefused(f"the chat template failed on these messages: {exc}") from exc
