"""The serving core: a checked request becomes tokens (prepare), waits for a KV slot (admit)
and runs on the engine (generate, or read out). Every route, OpenAI's, Anthropic's and
System One, goes through here; none of it knows HTTP, and its refusals are
colibri.errors.RequestErrors that the edge maps to statuses.

    core = ServingCore(served, scheduler, observer)
    prepared = core.prepare_chat(req)                      # InvalidRequest / ContextExceeded here
    async with core.run(prepared) as run:                  # Overloaded / Unavailable here
        async for delta in run.deltas: ...                 # run.outcome says how it ended
"""
from __future__ import annotations

from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import AsyncIterator

from colibri.chat.messages import Thinking
from colibri.serving.generation import Delta, Outcome, Prepared, Session
from colibri.serving.model import ServedModel
from colibri.serving.requests import ChatRequest, CompletionRequest
from colibri.serving.scheduler import Lease, Observer, Scheduler
from colibri.serving.tool_plan import open_forced_call, plan_tools


@dataclass
class Run:
    """One admitted generation: its deltas (iterate them) and how it ended (filled in as it runs)."""

    lease: Lease
    deltas: AsyncIterator[Delta]
    outcome: Outcome


class ServingCore:
    def __init__(self, served: ServedModel, scheduler: Scheduler, observer: Observer | None = None, *,
                 continue_assistant: bool = True):
        self.served = served
        self.scheduler = scheduler
        self.observer = observer
        self.continue_assistant = continue_assistant

    # ---- prepare -----------------------------------------------------------------

    def prepare_chat(self, req: ChatRequest, *, thinking_is_a_hint: bool = False, check_fits: bool = True) -> Prepared:
        """The rendered, tokenized conversation. thinking_is_a_hint: a family without a reasoning
        mode runs without it instead of refusing (Anthropic's `thinking` is a request, not a contract)."""
        served = self.served
        fmt = served.chat_format
        offered, messages, tools = plan_tools(fmt, req.tools, req.messages)
        thinking = Thinking() if thinking_is_a_hint and not fmt.has_reasoning else req.thinking
        prompt = fmt.render(messages, continue_assistant=self.continue_assistant, thinking=thinking, tools=offered)
        prompt, tools = open_forced_call(prompt, tools)
        tokens = served.tokenize_chat(prompt.text, messages)
        if check_fits:
            served.check_fits(tokens, "messages")
        return Prepared(tokens, req.options, in_reasoning=prompt.in_reasoning, reasoning=fmt.has_reasoning,
                        reasoning_tags=fmt.reasoning_tags,
                        tools=tools, harmony_tail=prompt.harmony_tail)

    def count_chat(self, req: ChatRequest) -> int:
        return len(self.prepare_chat(req, thinking_is_a_hint=True, check_fits=False).tokens)

    def prepare_completion(self, req: CompletionRequest) -> Prepared:
        tokens = self.served.tokenize_completion(req.prompt)
        self.served.check_fits(tokens, "prompt")
        return Prepared(tokens, req.options)

    async def score(self, req):
        """System One (colibri.serving.systemone): every question's answer under one admission."""
        from colibri.serving.systemone import score  # it imports this module

        return await score(self, req)

    # ---- admit, generate -------------------------------------------------------------

    @asynccontextmanager
    async def admit(self, slot: int | None, tokens: list[int]) -> AsyncIterator[Session]:
        """A KV slot for one request (the one asked for, or the best free one for these tokens),
        held until the block ends and the engine has finished its work on it."""
        async with self.scheduler.admit(slot, tokens) as lease:
            yield Session(self.served, lease, self.observer)

    @asynccontextmanager
    async def run(self, prepared: Prepared) -> AsyncIterator[Run]:
        """Admit, then generate: the Run's deltas start the engine's work when first read."""
        async with self.admit(prepared.options.cache_slot, prepared.tokens) as session:
            outcome = Outcome()
            n = len(prepared.tokens)  # known before the first token (a stream's opening usage)
            outcome.prompt_tokens = n
            outcome.cached_tokens = 0 if prepared.options.echo else min(session.lease.cached, n)
            yield Run(session.lease, session.generate(prepared, outcome), outcome)
