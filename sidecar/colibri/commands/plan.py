"""`coli plan`: how a model would be placed in RAM and on disk on this machine."""
from __future__ import annotations

import argparse
import json
import os


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("plan", help="how a model would be placed in RAM and on disk on this machine")
    p.add_argument("--model", "-m", default=None,
                   help="GGUF file or model id, e.g. gemma-3-270m (default: $COLI_MODEL, else "
                        "$COLI_DEFAULT_MODEL, else qwen2.5-coder-0.5b-instruct, downloaded once)")
    p.add_argument("--kv-slots", type=int, default=int(os.environ.get("COLI_KV_SLOTS", 0)) or 1,
                   help="KV slots (conversations) to count ($COLI_KV_SLOTS, default 1)")
    p.add_argument("--ctx", type=int, default=int(os.environ.get("COLI_CTX", 0)) or None,
                   help="context length per slot (default: min(4096, trained); $COLI_CTX)")
    add_expert_args(p)
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=run)


def add_expert_args(p: argparse.ArgumentParser) -> None:
    """The expert-placement flags `coli plan` and `coli serve` share."""
    env_cache, env_pin = os.environ.get("COLI_EXPERT_CACHE_GB"), os.environ.get("COLI_PIN_GB")
    p.add_argument("--expert-cache-gb", type=float, default=float(env_cache) if env_cache else None,
                   help="stream routed experts from disk into a RAM cache of this many GiB "
                        "(default: automatic, resident when everything fits; $COLI_EXPERT_CACHE_GB)")
    p.add_argument("--pin-gb", type=float, default=float(env_pin) if env_pin else None,
                   help="GiB of experts pinned in RAM by learned routing heat (default: a quarter of the "
                        "automatic budget; $COLI_PIN_GB)")


def run(args: argparse.Namespace) -> int:
    from colibri.models import resolve_model
    from colibri.plan import describe, make_plan

    plan = make_plan(resolve_model(args.model), ctx=args.ctx, kv_slots=args.kv_slots,
                     expert_cache_gb=args.expert_cache_gb, pin_gb=args.pin_gb)
    print(json.dumps(plan.as_dict(), indent=2) if args.json else describe(plan))
    return 0
