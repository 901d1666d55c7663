"""A scripted stand-in for EngineThread, for the pure framing tests of `coli serve`: it replays
given token ids (from the real tokenizer) with optional delays, so stop sequences split across
tokens, keep-alives and cancellation can be checked deterministically. Behaviour tests run the
real engine (test_serve_e2e.py)."""
from __future__ import annotations

import asyncio
from dataclasses import dataclass, field


@dataclass
class Token:
    token: int
    logprob: float = 0.0
    top: list | None = None


@dataclass
class End:
    reason: str
    n_prompt: int = 0
    n_reused: int = 0
    n_generated: int = 0
    error: str | None = None
    prompt_readout: list | None = None
    timings: dict = field(default_factory=dict)


@dataclass
class Request:
    slot: int
    prompt: list
    max_tokens: int
    temperature: float = 0.0
    top_p: float = 1.0
    seed: int | None = None


class SlotBusy(Exception):
    """As EngineThread's: the slot is still generating."""


class ScriptedEngineThread:
    def __init__(self, n_ctx: int = 256, n_slots: int = 1):
        self.n_ctx = n_ctx
        self.n_slots = n_slots
        self.script: list[int] = []
        self.reason = "stop"
        self.delay = 0.0  # seconds before each token
        self.first_delay = 0.0  # before the first token (a long prefill)
        self.requests: list[Request] = []
        self.cancelled = 0
        self.closed = False
        self.busy = 0  # refuse this many generate() calls with SlotBusy first

    async def generate(self, req: Request):
        if self.busy:
            self.busy -= 1
            raise SlotBusy(f"slot {req.slot} is generating")
        self.requests.append(req)
        finished = False
        try:
            await asyncio.sleep(self.first_delay)
            for i, tok in enumerate(self.script[:req.max_tokens]):
                if i and self.delay:
                    await asyncio.sleep(self.delay)
                yield Token(tok)
            reason = "length" if len(self.script) >= req.max_tokens else self.reason
            finished = True
            yield End(reason, n_prompt=len(req.prompt), n_generated=min(len(self.script), req.max_tokens))
        finally:
            if not finished:
                self.cancelled += 1

    async def close(self) -> None:
        self.closed = True
