"""What the routes ask of whatever serves them: the interface both backends satisfy.

    ServingCore   (colibri.serving.core)      the in-process C engine: tokens, KV slots, the engine thread
    UpstreamCore  (colibri.serving.upstream)  another server's OpenAI-compatible API (`coli serve --upstream`)

The routes hold one as app[core_key] and the model facts replies need as
app[model_key] (`served`: model_id, n_ctx, n_slots, chat_format, check_fits);
neither knows which backend it is.
"""
from __future__ import annotations

from typing import AsyncContextManager, Protocol

from colibri.serving.core import Run
from colibri.serving.requests import ChatRequest, CompletionRequest
from colibri.serving.scheduler import Scheduler
from colibri.serving.systemone import Scored, SystemOneRequest


class Backend(Protocol):
    served: object  # the model facts (ServedModel, UpstreamModel)
    scheduler: Scheduler  # admission: the bounded FIFO, its 429s and timeouts

    def prepare_chat(self, req: ChatRequest, *, thinking_is_a_hint: bool = False, check_fits: bool = True):
        """A checked chat request made ready to run (InvalidRequest / ContextExceeded here)."""

    def prepare_completion(self, req: CompletionRequest):
        """A checked completion request made ready to run."""

    def count_chat(self, req: ChatRequest) -> int:
        """The prompt tokens of a conversation (Anthropic's count_tokens)."""

    def run(self, prepared) -> AsyncContextManager[Run]:
        """Admit, then generate: Overloaded / Unavailable on entry; the Run's deltas as they come."""

    async def score(self, req: SystemOneRequest) -> Scored:
        """System One's answers, under one admission."""
