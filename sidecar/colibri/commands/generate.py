"""`coli generate`: complete a raw prompt (no chat template), like llama.cpp's llama-cli -p.
It decodes on a KV slot as `coli serve` does, so --draft-tokens and --draft-model draft here too."""
from __future__ import annotations

import argparse
import json
import sys

from colibri.cli_options import add_model_args, add_placement_args, open_planned_engine


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("generate", help="complete a prompt (raw text, no chat template)")
    add_model_args(p)
    add_placement_args(p)
    p.add_argument("--prompt", "-p", required=True, help="the text to complete")
    p.add_argument("--max-tokens", "-n", type=int, default=128, help="most tokens to generate (default 128)")
    p.add_argument("--temperature", type=float, default=0.0, help="0 = greedy (default)")
    p.add_argument("--top-p", type=float, default=1.0, help="nucleus sampling mass (default 1 = off)")
    p.add_argument("--seed", type=int, default=None, help="seed for sampling")
    p.add_argument("--ignore-eos", action="store_true", help="keep going past end-of-generation tokens")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of streaming text")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from colibri.detok import Detokenizer
    from colibri.plan import DRAFTER_NAMES
    from colibri.generate import generate_on_slot

    if args.max_tokens < 0:
        raise SystemExit("coli generate: --max-tokens must be >= 0")
    # the KV this run can write: a token per prompt byte at most (and BOS), then the generated ones
    engine = open_planned_engine(args, kv_tokens=len(args.prompt.encode()) + 2 + args.max_tokens)
    prompt = engine.tokenize(args.prompt)
    detok = Detokenizer(engine.token_bytes)

    def stream(tok: int) -> None:
        sys.stdout.write(detok.add(tok))
        sys.stdout.flush()

    gen = generate_on_slot(engine, prompt, args.max_tokens, args.temperature, args.top_p, args.seed,
                           stop_at_eog=not args.ignore_eos, on_token=None if args.json else stream)
    if args.json:
        text = engine.detokenize(gen.tokens).decode("utf-8", errors="replace")
        print(json.dumps({
            "prompt_tokens": gen.prompt_tokens,
            "tokens": gen.tokens,
            "text": text,
            "finish_reason": gen.finish_reason,
            "tok_per_s": {"prefill": round(gen.prefill_tok_per_s, 2), "decode": round(gen.decode_tok_per_s, 2)},
            "drafts": {"drafter": gen.drafter or None, "drafted": gen.draft_tokens, "accepted": gen.draft_accepted},
        }))
    else:
        sys.stdout.write(detok.flush() + "\n")
        drafts = ""
        if gen.draft_tokens:
            drafts = (f", {DRAFTER_NAMES.get(gen.drafter, gen.drafter)} drafts: {gen.draft_accepted} of "
                      f"{gen.draft_tokens} kept")
        print(f"[{len(gen.prompt_tokens)} prompt tokens at {gen.prefill_tok_per_s:.1f} tok/s, "
              f"{len(gen.tokens)} generated at {gen.decode_tok_per_s:.1f} tok/s{drafts}, {gen.finish_reason}]",
              file=sys.stderr)
    return 0
