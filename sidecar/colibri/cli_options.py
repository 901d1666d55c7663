"""Options every model-running command shares, and opening the engine from them."""
from __future__ import annotations

import argparse
import logging
import os
import time

log = logging.getLogger(__name__)


def add_model_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", "-m", default=None,
                   help="GGUF file or model id, e.g. gemma-3-270m (default: $COLI_MODEL, else "
                        "$COLI_DEFAULT_MODEL, else qwen2.5-coder-0.5b-instruct, downloaded once)")
    p.add_argument("--ctx", type=int, default=int(os.environ.get("COLI_CTX", 0)) or None,
                   help="context length in tokens (default: min(4096, trained); $COLI_CTX)")
    p.add_argument("--threads", "-t", type=int, default=int(os.environ.get("COLI_THREADS", 0)) or None,
                   help="compute threads (default: physical cores; $COLI_THREADS)")
    p.add_argument("--batch", type=int, default=None, help="prefill chunk in tokens (default 512)")


def open_engine(args: argparse.Namespace, vocab_only: bool = False):
    from colibri.engine import Engine
    from colibri.models import resolve_model

    path = resolve_model(args.model)
    t0 = time.perf_counter()
    engine = Engine(path, vocab_only=vocab_only, n_ctx=args.ctx or 0, n_threads=args.threads or 0,
                    n_batch=getattr(args, "batch", None) or 0)
    log.info("loaded %s in %.2f s", path, time.perf_counter() - t0)
    return engine


# ---- placement: the flags `coli generate`, `coli perplexity`, `coli serve` (and `coli plan`) share ----

PLACEMENT_VARS = {"expert_cache_gb": "COLI_EXPERT_CACHE_GB", "pin_gb": "COLI_PIN_GB", "io_threads": "COLI_IO_THREADS",
                  "direct_io": "COLI_DIRECT_IO", "prefetch": "COLI_PREFETCH", "expert_policy": "COLI_EXPERT_POLICY",
                  "draft_tokens": "COLI_DRAFT_TOKENS", "draft_model": "COLI_DRAFT_MODEL"}
DRAFT_MAX = 8  # engine/src/draft.h COLI_DRAFT_MAX
EXPERT_POLICIES = ("lrfu", "lru")  # colibri.h's COLI_POLICY_*: the first is the engine's default


def add_placement_args(p: argparse.ArgumentParser, experts_only: bool = False) -> None:
    """Where routed experts live (colibri.plan); every default is None: placement_from_args
    fills it from the COLI_* variable, else the plan's automatic choice."""
    p.add_argument("--expert-cache-gb", type=float, default=None,
                   help="stream routed experts from disk into a RAM cache of this many GiB (default: automatic: "
                        "resident when everything fits in RAM, or in the container's memory limit; "
                        "$COLI_EXPERT_CACHE_GB)")
    p.add_argument("--pin-gb", type=float, default=None,
                   help="GiB of experts pinned in RAM by learned routing heat (default: a quarter of the "
                        "automatic budget; $COLI_PIN_GB)")
    if experts_only:
        return
    p.add_argument("--io-threads", type=int, default=None,
                   help="threads reading streamed experts (default 4; $COLI_IO_THREADS)")
    p.add_argument("--direct-io", action=argparse.BooleanOptionalAction, default=None,
                   help="read streamed experts with O_DIRECT, bypassing the page cache (default on, where the file "
                        "system allows; $COLI_DIRECT_IO)")
    p.add_argument("--prefetch", action=argparse.BooleanOptionalAction, default=None,
                   help="read the next layer's predicted experts ahead (default on; $COLI_PREFETCH)")
    p.add_argument("--expert-policy", choices=EXPERT_POLICIES, default=None,
                   help="which cached expert makes room: lrfu, the least routing frequency decayed by recency "
                        "(default), or lru, the least recently used ($COLI_EXPERT_POLICY)")
    add_draft_args(p)


def add_draft_args(p: argparse.ArgumentParser) -> None:
    """Speculative decoding's drafter (`coli plan` takes these too: it counts the drafter's memory)."""
    p.add_argument("--draft-tokens", type=int, default=None,
                   help=f"speculative decoding: up to N tokens per step drafted by the model's own MTP block where "
                        f"it has one (DeepSeek V3, GLM-4.5), else from earlier text (prompt lookup), and verified in one batch, 0 to {DRAFT_MAX}; 0 turns it off; never changes the output "
                        f"(default 4; $COLI_DRAFT_TOKENS)")
    p.add_argument("--draft-model", default=None, metavar="PATH_OR_ID",
                   help="speculative decoding's drafts from a smaller model with the same vocabulary (a GGUF file or "
                        "a library model's id, e.g. qwen2.5-coder-0.5b-instruct for qwen2.5-coder-1.5b-instruct) "
                        "instead; its guesses are verified as the others, so the output never changes "
                        "($COLI_DRAFT_MODEL)")


def placement_from_args(args: argparse.Namespace) -> dict:
    """expert_cache_gb, pin_gb (None: automatic), io_threads, direct_io, prefetch, expert_policy: each flag,
    else its COLI_* variable, else the default; a variable that does not parse is a named error."""
    from colibri.errors import ColiError

    def var(name: str, kind):
        raw = os.environ.get(PLACEMENT_VARS[name], "").strip()
        if raw == "":
            return None
        if kind is bool:
            return raw.lower() not in ("0", "false", "no", "off")
        try:
            return kind(raw)
        except ValueError:
            raise ColiError(f"{PLACEMENT_VARS[name]}={raw!r} is not a valid {kind.__name__}") from None

    out = {}
    for name, kind, default in (("expert_cache_gb", float, None), ("pin_gb", float, None), ("io_threads", int, 0),
                                ("direct_io", bool, True), ("prefetch", bool, True), ("expert_policy", str, ""),
                                ("draft_tokens", int, None), ("draft_model", str, None)):
        value = getattr(args, name, None)
        if value is None:
            value = var(name, kind)
        out[name] = default if value is None else value
    for name in ("expert_cache_gb", "pin_gb", "io_threads"):
        if out[name] is not None and out[name] < 0:
            raise ColiError(f"--{name.replace('_', '-')} must be >= 0, got {out[name]}")
    if out["draft_tokens"] is not None and not 0 <= out["draft_tokens"] <= DRAFT_MAX:
        raise ColiError(f"--draft-tokens must be 0 to {DRAFT_MAX}, got {out['draft_tokens']}")
    out["expert_policy"] = out["expert_policy"].strip().lower()
    if out["expert_policy"] not in ("",) + EXPERT_POLICIES:
        raise ColiError(f"{PLACEMENT_VARS['expert_policy']}={out['expert_policy']!r}: expected one of "
                        f"{', '.join(EXPERT_POLICIES)}")
    return out


def open_planned_engine(args: argparse.Namespace, kv_tokens: int | None = None):
    """The engine for a command with add_model_args and add_placement_args, opened as the memory plan
    says (colibri.plan.open_planned: streamed experts under a container's limit, threads by its quota)."""
    from colibri.models import resolve_model
    from colibri.plan import open_planned

    path = resolve_model(args.model)
    t0 = time.perf_counter()
    engine, _ = open_planned(path, placement_from_args(args), ctx=args.ctx, threads=args.threads,
                             n_batch=getattr(args, "batch", None) or 0, kv_tokens=kv_tokens)
    log.info("loaded %s in %.2f s", path, time.perf_counter() - t0)
    return engine
