"""Perplexity over a text the way llama.cpp's llama-perplexity measures it:
the tokens are cut into chunks of n_ctx, each chunk starts with BOS (when
the model adds one), and only the second half of each chunk is scored, so
every scored token sees at least n_ctx/2 tokens of context."""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from colibri.engine import Engine
from colibri.errors import ColiError


@dataclass
class PerplexityResult:
    ctx: int
    n_tokens: int
    nll: list[float] = field(default_factory=list)  # per scored position
    argmax: list[int] = field(default_factory=list)  # predicted next token per scored position
    chunk_ppl: list[float] = field(default_factory=list)  # running perplexity after each chunk

    @property
    def ppl(self) -> float:
        return math.exp(sum(self.nll) / len(self.nll)) if self.nll else float("nan")


def perplexity(engine: Engine, tokens: list[int], ctx: int, max_chunks: int | None = None,
               progress=None) -> PerplexityResult:
    if ctx < 4 or ctx > engine.n_ctx:
        raise ColiError(f"--ctx must be between 4 and the engine's context ({engine.n_ctx})")
    n_chunks = len(tokens) // ctx
    if max_chunks is not None:
        n_chunks = min(n_chunks, max_chunks)
    if n_chunks == 0:
        raise ColiError(f"the text has {len(tokens)} tokens, fewer than one chunk of {ctx}")
    res = PerplexityResult(ctx=ctx, n_tokens=len(tokens))
    first = ctx // 2
    add_bos = engine.bos >= 0 and bool(engine.tokenize("", add_bos=None))
    for c in range(n_chunks):
        chunk = list(tokens[c * ctx:(c + 1) * ctx])
        if add_bos:
            chunk[0] = engine.bos
        nll, argmax = engine.score(chunk, first)
        res.nll.extend(nll)
        res.argmax.extend(argmax)
        res.chunk_ppl.append(res.ppl)
        if progress:
            progress(c + 1, n_chunks, res.ppl)
    return res
