"""`coli plan`: how a model would be placed in RAM and on disk on this machine."""
from __future__ import annotations

import argparse
import json
import os

from colibri.cli_options import add_draft_args, add_placement_args, placement_from_args


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("plan", help="how a model would be placed in RAM and on disk on this machine")
    p.add_argument("--model", "-m", default=None,
                   help="GGUF file or model id, e.g. gemma-3-270m (default: $COLI_MODEL, else "
                        "$COLI_DEFAULT_MODEL, else qwen2.5-coder-0.5b-instruct, downloaded once)")
    p.add_argument("--kv-slots", type=int, default=int(os.environ.get("COLI_KV_SLOTS", 0)) or 1,
                   help="KV slots (conversations) to count ($COLI_KV_SLOTS, default 1)")
    p.add_argument("--ctx", type=int, default=int(os.environ.get("COLI_CTX", 0)) or None,
                   help="context length per slot (default: min(4096, trained); $COLI_CTX)")
    add_placement_args(p, experts_only=True)
    add_draft_args(p)
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from colibri.models import resolve_model
    from colibri.plan import describe, draft_model_path, make_plan

    placement = placement_from_args(args)
    plan = make_plan(resolve_model(args.model), ctx=args.ctx, kv_slots=args.kv_slots,
                     expert_cache_gb=placement["expert_cache_gb"], pin_gb=placement["pin_gb"],
                     draft_tokens=placement["draft_tokens"], draft_model=draft_model_path(placement["draft_model"]))
    print(json.dumps(plan.as_dict(), indent=2) if args.json else describe(plan))
    return 0
