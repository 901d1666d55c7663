"""Completing a prompt on one engine sequence: prefill, then sample and feed
back one token at a time. The arithmetic is all in the engine; this module
only sequences the calls and keeps time."""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable

from colibri.engine import Engine
from colibri.errors import ColiError


class PromptTooLong(ColiError):
    exit_code = 2


@dataclass
class Generation:
    prompt_tokens: list[int]
    tokens: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)  # filled when asked for
    finish_reason: str = "length"  # "stop" (end-of-generation token) or "length"
    prefill_s: float = 0.0
    decode_s: float = 0.0

    @property
    def prefill_tok_per_s(self) -> float:
        return len(self.prompt_tokens) / self.prefill_s if self.prefill_s > 0 else 0.0

    @property
    def decode_tok_per_s(self) -> float:
        # the first token comes from the prefill's logits; each later one costs a decode step
        steps = max(len(self.tokens) - 1, 0)
        return steps / self.decode_s if self.decode_s > 0 else 0.0


def generate(
    engine: Engine,
    prompt_tokens: list[int],
    max_tokens: int,
    temperature: float = 0.0,
    top_p: float = 1.0,
    seed: int | None = None,
    stop_at_eog: bool = True,
    on_token: Callable[[int], None] | None = None,
    logprobs: bool = False,
) -> Generation:
    n_ctx = engine.n_ctx
    if not prompt_tokens:
        raise ColiError("the prompt has no tokens")
    if len(prompt_tokens) >= n_ctx:
        raise PromptTooLong(
            f"the prompt has {len(prompt_tokens)} tokens; the context holds {n_ctx} (raise --ctx or shorten it)"
        )
    if seed is not None:
        engine.seed(seed)
    gen = Generation(prompt_tokens=list(prompt_tokens))
    budget = min(max_tokens, n_ctx - len(prompt_tokens))
    t0 = time.perf_counter()
    engine.eval(prompt_tokens, 0)
    gen.prefill_s = time.perf_counter() - t0
    pos = len(prompt_tokens)
    t0 = time.perf_counter()
    while len(gen.tokens) < budget:
        tok, logprob = engine.sample(temperature, top_p, logprob=logprobs)
        if stop_at_eog and engine.is_eog(tok):
            gen.finish_reason = "stop"
            break
        gen.tokens.append(tok)
        if logprobs:
            gen.logprobs.append(logprob)
        if on_token:
            on_token(tok)
        if len(gen.tokens) == budget:
            break
        engine.eval([tok], pos)
        pos += 1
    gen.decode_s = time.perf_counter() - t0
    return gen
