"""`coli chat`: chat with a model in the terminal (colibri.chat_cli), on a model loaded here or a running server."""
from __future__ import annotations

import argparse
import os
import sys

from colibri.cli_options import add_model_args
from colibri.errors import ColiError


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("chat", help="chat with a model in the terminal (streaming; /help inside)",
                       description="A conversation in the terminal: the model loaded in this process (as "
                                   "`coli generate` loads it), or a running server with --url. Enter sends; a "
                                   "line ending in \\ continues; a line of \"\"\" opens a block for pasting. "
                                   "/reset, /slot N, /save [FILE], /system TEXT, /help. Ctrl+C stops a reply, "
                                   "Ctrl+D or /exit leaves.")
    add_model_args(p)
    p.add_argument("--url", default=os.environ.get("COLI_CHAT_URL") or None,
                   help="chat with a running server instead, e.g. http://127.0.0.1:8000 ($COLI_CHAT_URL)")
    p.add_argument("--api-key", default=os.environ.get("COLI_API_KEY") or None,
                   help="the server's API key, for --url ($COLI_API_KEY)")
    p.add_argument("--kv-slots", type=int, default=2,
                   help="KV slots of the model loaded here, each with its own cached conversation (/slot N; default 2)")
    p.add_argument("--max-tokens", "-n", type=int, default=1024, help="most tokens per reply (default 1024)")
    p.add_argument("--temperature", type=float, default=None,
                   help="sampling temperature (default: the server's, 0.7; 0 = greedy)")
    p.add_argument("--system", default=None, help="a system message to start with")
    p.add_argument("--show-reasoning", action="store_true",
                   help="print the model's reasoning in full, dim (default: folded into one line)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from colibri.chat_cli import ChatSession, Client, LocalServer

    if args.max_tokens < 1:
        raise ColiError("--max-tokens must be >= 1")
    local = None
    if args.url:
        if args.model:
            raise ColiError("--model and --url exclude each other: the server at --url has its model")
        client = Client(args.url, api_key=args.api_key)
        health = client.get("/health")
        model, slots = health.get("model") or client.get("/v1/models")["data"][0]["id"], health.get("kv_slots")
    else:
        from colibri.engine import MAX_SLOTS
        from colibri.models import resolve_model
        from colibri.serve_config import ServeConfig

        if not 1 <= args.kv_slots <= MAX_SLOTS:
            raise ColiError(f"--kv-slots must be 1-{MAX_SLOTS}, got {args.kv_slots}")
        path = resolve_model(args.model)  # the default model is downloaded here, with its progress
        cfg = ServeConfig(model_path=str(path), port=0, kv_slots=args.kv_slots, kv_persist=False,
                          ctx=args.ctx or 0, threads=args.threads or 0, max_tokens=args.max_tokens, web_dir=None)
        tty = sys.stderr.isatty()
        if tty:  # a big model takes a while; the line goes once it is loaded
            print(f"loading {path.name}…", end="", file=sys.stderr, flush=True)
        local = LocalServer(cfg).start()
        if tty:
            print("\r\033[K", end="", file=sys.stderr, flush=True)
        client = Client(local.url)
        model, slots = local.model_id, args.kv_slots
    try:
        return ChatSession(client, model, max_tokens=args.max_tokens, temperature=args.temperature,
                           system=args.system, show_reasoning=args.show_reasoning, kv_slots=slots).repl()
    finally:
        if local is not None:
            local.stop()
