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
