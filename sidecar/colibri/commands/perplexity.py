"""`coli perplexity`: perplexity of a model over a text file, like llama-perplexity."""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from colibri.cli_options import add_model_args, add_placement_args, open_planned_engine
from colibri.errors import ColiError


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("perplexity", help="perplexity of a model over a text file (llama-perplexity's method)")
    add_model_args(p)
    add_placement_args(p)
    p.add_argument("--file", "-f", required=True, help="UTF-8 text file")
    p.add_argument("--chunks", type=int, default=None, help="score at most this many chunks")
    p.add_argument("--json", action="store_true",
                   help="print JSON: ppl, n_tokens, n_scored, chunks, argmax (predicted next id per scored position)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from colibri.perplexity import perplexity

    try:
        text = Path(args.file).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ColiError(f"cannot read {args.file}: {exc}") from exc
    ctx = args.ctx or 512  # the chunk size, as llama-perplexity's -c; the engine's context is one chunk
    args.ctx = ctx
    engine = open_planned_engine(args)
    tokens = engine.tokenize(text)
    t0 = time.perf_counter()

    def progress(done: int, total: int, ppl: float) -> None:
        if not args.json:
            print(f"[{done}/{total}] ppl {ppl:.4f}", file=sys.stderr, flush=True)

    res = perplexity(engine, tokens, ctx, args.chunks, progress)
    elapsed = time.perf_counter() - t0
    if args.json:
        print(json.dumps({"ppl": res.ppl, "ctx": ctx, "n_tokens": res.n_tokens, "n_scored": len(res.nll),
                          "chunks": res.chunk_ppl, "argmax": res.argmax, "seconds": round(elapsed, 3)}))
    else:
        print(f"perplexity {res.ppl:.4f} over {len(res.nll)} scored tokens "
              f"({len(res.chunk_ppl)} chunks of {ctx}, {elapsed:.1f} s)")
    return 0
