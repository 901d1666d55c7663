"""A conversation as the chat layer sees it: messages and what the request asks of the
family's reasoning mode. The HTTP edge (api/protocol.py, api/anthropic_protocol.py) builds
them from each vendor's JSON."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Message:
    role: str  # system, user, assistant or tool ("developer" is read as system)
    content: str
    reasoning_content: str | None = None
    tool_calls: list[dict] | None = None  # assistant: [{"id", "type": "function", "function": {"name", "arguments"}}]
    tool_call_id: str | None = None  # tool: the call this result answers
    name: str | None = None


@dataclass
class Thinking:
    enable: bool | None = None  # None: the family's default
    effort: str | None = None
    preserve: bool | None = None

    @property
    def requested(self) -> bool:
        return bool(self.enable) or (self.effort not in (None, "none")) or bool(self.preserve)
