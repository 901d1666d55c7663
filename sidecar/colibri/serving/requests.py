"""What the serving core is asked to do, already checked: the HTTP edge parses each vendor's
JSON into these (api/protocol.py, api/anthropic_protocol.py), and nothing below it sees JSON."""
from __future__ import annotations

from dataclasses import dataclass, field

from colibri.chat.messages import Message, Thinking


@dataclass(frozen=True)
class Limits:
    """What the server decides about a request before it reads one."""

    kv_slots: int = 1
    max_tokens: int = 1024
    temperature: float = 0.7
    top_p: float = 0.9
    stream_logprobs: bool = False  # per-chunk log-probs in a stream: only an upstream engine's, passed on


@dataclass
class Options:
    """The generation settings both endpoints share."""

    max_tokens: int
    temperature: float
    top_p: float
    top_k: int = 0  # only the k most likely tokens (llama.cpp's top-k, before top_p); 0: off
    seed: int | None = None
    stream: bool = False
    include_usage: bool = False
    stop: list[str] = field(default_factory=list)
    ignore_leading_stop: bool = False
    cache_slot: int | None = None
    logprobs: bool = False  # per-token log-probabilities in the reply
    top_logprobs: int = 0  # entries of the top-k table per token (the engine's read-out, 0..32)
    echo: bool = False  # /v1/completions: the prompt, with its read-out, before the completion
    model: str | None = None  # the model the request names (`coli serve --upstream` routes on it)
    ignore_eos: bool = False  # generate past the end-of-generation token, up to max_tokens (benchmarks)


@dataclass
class ToolChoice:
    mode: str = "none"  # none, auto, required, function
    name: str | None = None  # mode "function": the one tool to call


@dataclass
class Tools:
    """The functions a chat request declares and what it asks of them."""

    declared: list[dict] = field(default_factory=list)  # OpenAI tool objects, as sent
    choice: ToolChoice = field(default_factory=ToolChoice)
    strict: bool = False  # strict_tool_calls: only complete, valid calls, else 502

    @property
    def active(self) -> bool:
        return self.choice.mode != "none"

    @property
    def schemas(self) -> dict[str, dict]:
        return {t["function"]["name"]: t["function"].get("parameters") or {"type": "object"} for t in self.declared}


@dataclass
class ChatRequest:
    messages: list[Message]
    options: Options
    thinking: Thinking
    tools: Tools = field(default_factory=Tools)


@dataclass
class CompletionRequest:
    prompt: str
    options: Options
