"""Completing a prompt on one engine sequence: prefill, then sample and feed
back one token at a time (`generate`), or the same on a KV slot through the
engine's batched step, as `coli serve` decodes, drafts and all
(`generate_on_slot`). The arithmetic is all in the engine; this module only
sequences the calls and keeps time."""
from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import Callable

from colibri.engine import Engine, last_error
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
    drafter: str = ""  # generate_on_slot: "mtp", "model", "lookup" or "" (none)
    draft_tokens: int = 0  # tokens drafted, and of them kept
    draft_accepted: int = 0

    @property
    def prefill_tok_per_s(self) -> float:
        return len(self.prompt_tokens) / self.prefill_s if self.prefill_s > 0 else 0.0

    @property
    def decode_tok_per_s(self) -> float:
        # the first token comes from the prefill's logits; each later one costs a decode step
        steps = max(len(self.tokens) - 1, 0)
        return steps / self.decode_s if self.decode_s > 0 else 0.0


def _checked(engine: Engine, prompt_tokens: list[int], max_tokens: int) -> int:
    """The token budget: max_tokens clamped to what the context holds after the prompt."""
    n_ctx = engine.n_ctx
    if not prompt_tokens:
        raise ColiError("the prompt has no tokens")
    if len(prompt_tokens) >= n_ctx:
        raise PromptTooLong(
            f"the prompt has {len(prompt_tokens)} tokens; the context holds {n_ctx} (raise --ctx or shorten it)"
        )
    return min(max_tokens, n_ctx - len(prompt_tokens))


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
    budget = _checked(engine, prompt_tokens, max_tokens)
    if seed is not None:
        engine.seed(seed)
    gen = Generation(prompt_tokens=list(prompt_tokens))
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


def generate_on_slot(
    engine: Engine,
    prompt_tokens: list[int],
    max_tokens: int,
    temperature: float = 0.0,
    top_p: float = 1.0,
    seed: int | None = None,
    stop_at_eog: bool = True,
    on_token: Callable[[int], None] | None = None,
    slot: int = 0,
) -> Generation:
    """The completion on KV slot `slot` through the engine's step: drafts from the model's MTP
    block, a draft model or prompt lookup where the engine was opened with them (greedy tokens
    are plain decoding's). The first token's time counts as the prefill's; a step that keeps
    drafts hands several tokens to on_token at once."""
    budget = _checked(engine, prompt_tokens, max_tokens)
    gen = Generation(prompt_tokens=list(prompt_tokens))
    if budget == 0:
        return gen
    seed = seed if seed is not None else int.from_bytes(os.urandom(8), "little")
    t0 = time.perf_counter()
    engine.submit(slot, list(prompt_tokens), max_tokens=budget, temperature=temperature, top_p=top_p, seed=seed,
                  ignore_eos=not stop_at_eog, logprob=False)
    first = last = finish = None
    try:
        while finish is None:
            events = engine.step()
            now = time.perf_counter()
            for ev in events:
                if ev.slot != slot:
                    continue
                if ev.done:
                    finish = ev.finish
                    break
                if first is None:
                    first = now
                last = now
                gen.tokens.append(ev.token)
                if on_token:
                    on_token(ev.token)
        if finish == "error":
            raise last_error()
        if finish == "cancelled":
            raise ColiError("the generation was cancelled")
    except BaseException:
        try:
            engine.cancel(slot)  # Ctrl-C or an error: the slot lets go before the engine closes
        except ColiError:
            pass
        raise
    gen.finish_reason = "stop" if finish == "stop" else "length"
    gen.prefill_s = (first or time.perf_counter()) - t0
    gen.decode_s = (last - first) if first is not None else 0.0
    gen.drafter = engine.drafter
    turn = next((t for t in reversed(engine.turns()) if t["slot"] == slot), None)
    if turn is not None:
        gen.draft_tokens, gen.draft_accepted = turn["draft_tokens"], turn["draft_accepted"]
    return gen
