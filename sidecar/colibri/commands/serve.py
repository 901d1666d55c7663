"""`coli serve`: keep one model loaded and serve the OpenAI-compatible API (and the dashboard)."""
from __future__ import annotations

import argparse
import asyncio
import logging
import os
from pathlib import Path

from colibri.cli_options import add_placement_args, placement_from_args
from colibri.errors import ColiError
from colibri.serve_config import (DEFAULT_PORT, MAX_BODY_BYTES, MAX_KV_SLOTS, ServeConfig, aliases_from,
                                  cors_origins_from, default_web_dir, env_flag, env_list, is_loopback)


def _env(name: str, default: str | None = None) -> str | None:
    value = os.environ.get(name)
    return value if value not in (None, "") else default


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("serve", help="serve the OpenAI-compatible API and the dashboard on localhost")
    p.add_argument("--model", "-m", default=_env("COLI_MODEL"),
                   help="GGUF file or model id, e.g. gemma-3-270m (default: $COLI_MODEL, else "
                        "$COLI_DEFAULT_MODEL, else qwen2.5-coder-0.5b-instruct, downloaded once)")
    p.add_argument("--model-id", default=_env("COLI_MODEL_ID"),
                   help="the name clients use in 'model' (default: $COLI_MODEL_ID, else from the file)")
    p.add_argument("--model-alias", action="append", default=None, metavar="NAME",
                   help="another name requests may send in 'model' for the loaded model, served as it (repeatable "
                        "or a comma list; '*' accepts any name; $COLI_MODEL_ALIAS, comma-separated)")
    p.add_argument("--host", default=_env("COLI_HOST", "127.0.0.1"), help="bind address (default 127.0.0.1; $COLI_HOST)")
    p.add_argument("--port", type=int, default=None,
                   help=f"port (default {DEFAULT_PORT}; 0 picks a free one; $COLI_PORT)")
    p.add_argument("--api-key", default=_env("COLI_API_KEY"),
                   help="require this key as 'Authorization: Bearer KEY' or 'x-api-key' ($COLI_API_KEY)")
    p.add_argument("--kv-slots", type=int, default=None,
                   help=f"independent KV contexts served at once, 1-{MAX_KV_SLOTS} (default 1; $COLI_KV_SLOTS)")
    p.add_argument("--kv-persist", action=argparse.BooleanOptionalAction, default=None,
                   help="save each KV slot after every request and restore it at start, under the state dir "
                        "(default on; $COLI_KV_PERSIST=0 turns it off; $COLI_STATE_DIR moves it)")
    p.add_argument("--ctx", type=int, default=None,
                   help="context length per slot in tokens (default: 32768 or the trained context if less, "
                        "halved while every slot's full KV would take over a quarter of free RAM; $COLI_CTX)")
    p.add_argument("--threads", "-t", type=int, default=None,
                   help="compute threads (default: physical cores; $COLI_THREADS)")
    p.add_argument("--max-queue", type=int, default=None,
                   help="requests allowed to wait for a slot (default 8; $COLI_MAX_QUEUE)")
    p.add_argument("--queue-timeout", type=float, default=None,
                   help="seconds a request may wait for a slot before a 429 (default 300; $COLI_QUEUE_TIMEOUT)")
    p.add_argument("--max-tokens", type=int, default=None,
                   help="budget of a request that names none (default 1024; $COLI_MAX_TOKENS)")
    p.add_argument("--allowed-host", action="append", default=None, metavar="NAME",
                   help="also accept this Host header (repeatable; $COLI_ALLOWED_HOSTS, comma-separated)")
    p.add_argument("--cors-origin", action="append", default=None, metavar="ORIGIN",
                   help="browser origins allowed: the first plain value replaces the defaults, more values "
                        "and +ORIGIN add, '*' allows any (repeatable; $COLI_CORS_ORIGINS, comma-separated)")
    p.add_argument("--max-connections", type=int, default=None,
                   help="open connections in all; over it a connection waiting for its request makes room, "
                        "else the newcomer is closed (default 64; $COLI_MAX_CONNECTIONS)")
    p.add_argument("--max-connections-per-ip", type=int, default=None,
                   help="open connections from one client address other than loopback; 0: no cap "
                        "(default 8; $COLI_MAX_CONNECTIONS_PER_IP)")
    p.add_argument("--read-deadline", type=float, default=None,
                   help="seconds to read a request, headers and body; then the socket is closed "
                        "(default 30; $COLI_READ_DEADLINE)")
    p.add_argument("--idle-timeout", type=float, default=None,
                   help="seconds a keep-alive connection may stay idle between requests (default 30; "
                        "$COLI_IDLE_TIMEOUT)")
    p.add_argument("--allow-insecure-bind", action="store_true",
                   help="bind a non-loopback address without an API key ($COLI_ALLOW_INSECURE_BIND=1)")
    p.add_argument("--models-dir", action="append", default=None, metavar="DIR",
                   help="serve the model library: every model found there and in the usual places (colibri's, "
                        "the Hugging Face cache, LM Studio, llama.cpp) is listed in /v1/models and loaded when a "
                        "request names it (repeatable; $COLI_MODELS_DIR, os.pathsep-separated)")
    p.add_argument("--max-models", type=int, default=None,
                   help="models kept loaded at once with --models-dir; the least recently used idle one is "
                        "unloaded to make room (default 1; $COLI_MAX_MODELS)")
    p.add_argument("--model-ttl", default=None, metavar="SECONDS",
                   help="unload a loaded model idle this long (e.g. 600, 10m), the active one excepted "
                        "(default: never; $COLI_MODEL_TTL)")
    p.add_argument("--upstream", action="append", default=None, metavar="URL[#ALIAS]",
                   help="front another engine's OpenAI-compatible API (vLLM, SGLang, llama-server, another colibri) "
                        "instead of loading a model: colibri's API, guard, queue, /health, /metrics and dashboard "
                        "in front of it (repeatable: requests spread across the healthy ones serving the model they "
                        "name; #ALIAS: the name its model is served under, else its own ids, or --model-id; "
                        "$COLI_UPSTREAM, comma-separated)")
    p.add_argument("--upstream-key", default=_env("COLI_UPSTREAM_KEY"),
                   help="the API key the upstreams want, sent as 'Authorization: Bearer KEY' ($COLI_UPSTREAM_KEY)")
    p.add_argument("--upstream-slots", type=int, default=None,
                   help="requests each upstream runs at once; more wait in colibri's queue "
                        "(default 4; $COLI_UPSTREAM_SLOTS)")
    p.add_argument("--upstream-timeout", type=float, default=None, metavar="SECONDS",
                   help="a forwarded request has failed when its upstream sends nothing for this long, before its "
                        "reply or mid-stream (a 504 upstream_timeout; it counts on the upstream's breaker); a "
                        "non-streamed reply must come whole within it (default 300; $COLI_UPSTREAM_TIMEOUT_S)")
    add_placement_args(p)
    p.add_argument("--web-dir", default=None,
                   help="the built dashboard (default: $COLI_WEB_DIR, else the checkout's web/dist, "
                        "else the one the package carries)")
    p.add_argument("-v", "--verbose", dest="serve_verbose", action="count", default=0,
                   help="more logging (-vv: debug), as `coli -v serve`")
    p.set_defaults(func=run)


def _number(value, env: str, default: str, kind=int):
    """A flag's value, else its COLI_* variable, else the default; a bad variable is a named error."""
    if value is not None:
        return value
    raw = _env(env, default)
    try:
        return kind(raw)
    except ValueError:
        raise ColiError(f"{env}={raw!r} is not a valid {kind.__name__}") from None


def config_from_args(args: argparse.Namespace) -> ServeConfig:
    args.port = _number(args.port, "COLI_PORT", str(DEFAULT_PORT))
    args.kv_slots = _number(args.kv_slots, "COLI_KV_SLOTS", "1")
    args.ctx = _number(args.ctx, "COLI_CTX", "0")
    args.threads = _number(args.threads, "COLI_THREADS", "0")
    args.max_queue = _number(args.max_queue, "COLI_MAX_QUEUE", "8")
    args.queue_timeout = _number(args.queue_timeout, "COLI_QUEUE_TIMEOUT", "300", float)
    args.max_tokens = _number(args.max_tokens, "COLI_MAX_TOKENS", "1024")
    args.max_connections = _number(args.max_connections, "COLI_MAX_CONNECTIONS", "64")
    args.max_connections_per_ip = _number(args.max_connections_per_ip, "COLI_MAX_CONNECTIONS_PER_IP", "8")
    # COLI_READ_TIMEOUT: the same setting under the name issue #22 gave it; upstream's COLI_READ_DEADLINE wins
    args.read_deadline = _number(args.read_deadline, "COLI_READ_DEADLINE",
                                 str(_number(None, "COLI_READ_TIMEOUT", "30", float)), float)
    args.idle_timeout = _number(args.idle_timeout, "COLI_IDLE_TIMEOUT", "30", float)
    args.allow_insecure_bind = args.allow_insecure_bind or env_flag("COLI_ALLOW_INSECURE_BIND", False)
    if not 1 <= args.kv_slots <= MAX_KV_SLOTS:
        raise ColiError(f"--kv-slots must be 1-{MAX_KV_SLOTS}, got {args.kv_slots}")
    if not 0 <= args.port <= 65535:
        raise ColiError(f"--port must be 0-65535, got {args.port}")
    if args.max_queue < 0 or args.queue_timeout <= 0 or args.max_tokens < 1:
        raise ColiError("--max-queue must be >= 0, --queue-timeout > 0 and --max-tokens >= 1")
    if args.max_connections < 1 or args.max_connections_per_ip < 0:
        raise ColiError("--max-connections must be >= 1 and --max-connections-per-ip >= 0")
    if not (args.read_deadline > 0 and args.idle_timeout > 0):
        raise ColiError("--read-deadline and --idle-timeout must be > 0 seconds")
    if not is_loopback(args.host) and not args.api_key and not args.allow_insecure_bind:
        raise ColiError(f"refusing to serve on {args.host} without an API key: anyone who can reach it could use "
                        "it. Set COLI_API_KEY (or --api-key), or COLI_ALLOW_INSECURE_BIND=1 on a trusted network")
    web_dir = Path(args.web_dir) if args.web_dir else default_web_dir()
    upstreams = tuple(args.upstream or env_list("COLI_UPSTREAM"))
    upstream_slots = _number(args.upstream_slots, "COLI_UPSTREAM_SLOTS", "4")
    if upstream_slots < 1:
        raise ColiError(f"--upstream-slots must be >= 1, got {upstream_slots}")
    upstream_failures = _number(None, "COLI_UPSTREAM_FAILURES", "3")
    if upstream_failures < 1:
        raise ColiError(f"COLI_UPSTREAM_FAILURES must be >= 1, got {upstream_failures}")
    upstream_timeout_s = _number(args.upstream_timeout, "COLI_UPSTREAM_TIMEOUT_S", "300", float)
    if not upstream_timeout_s > 0:
        raise ColiError(f"--upstream-timeout must be > 0 seconds, got {upstream_timeout_s:g}")
    for url in upstreams:
        if not url.startswith(("http://", "https://")):
            raise ColiError(f"--upstream {url!r}: give the engine's URL, e.g. http://gpu-box:8000")
    from colibri.library.discovery import models_dirs_from_env
    from colibri.serving.pool import parse_ttl

    models_dirs = tuple(args.models_dir or [str(p) for p in models_dirs_from_env()])
    if upstreams and (args.models_dir or args.model):
        raise ColiError("--upstream serves what the upstream engines serve: it takes no --model or --models-dir")
    aliases = aliases_from(args.model_alias or env_list("COLI_MODEL_ALIAS"))
    if aliases and upstreams:
        raise ColiError("--model-alias names the loaded model; behind --upstream give each engine's name as URL#ALIAS")
    if aliases and models_dirs:
        raise ColiError("--model-alias names the one loaded model; with --models-dir requests name the library's "
                        "models by their ids")
    max_models = _number(args.max_models, "COLI_MAX_MODELS", "1")
    if max_models < 1:
        raise ColiError(f"--max-models must be >= 1, got {max_models}")
    stream_interval_ms = _number(None, "COLI_STREAM_INTERVAL_MS", "50", float)
    if not 0 <= stream_interval_ms <= 1000:
        raise ColiError(f"COLI_STREAM_INTERVAL_MS must be 0..1000 milliseconds, got {stream_interval_ms:g}")
    model_ttl = parse_ttl(args.model_ttl if args.model_ttl is not None else _env("COLI_MODEL_TTL", "0"))
    return ServeConfig(
        model_path=args.model, model_id=args.model_id or "", model_aliases=aliases, host=args.host, port=args.port,
        api_key=args.api_key,
        kv_slots=args.kv_slots,
        kv_persist=args.kv_persist if args.kv_persist is not None else env_flag("COLI_KV_PERSIST", True),
        ctx=args.ctx or 0, threads=args.threads or 0, max_queue=args.max_queue,
        queue_timeout=args.queue_timeout, max_tokens=args.max_tokens,
        allowed_hosts=tuple(args.allowed_host or env_list("COLI_ALLOWED_HOSTS")),
        cors_origins=cors_origins_from(args.cors_origin or env_list("COLI_CORS_ORIGINS"), args.port),
        temperature=_number(None, "COLI_TEMP", "0.7", float), top_p=_number(None, "COLI_TOP_P", "0.9", float),
        continue_assistant=env_flag("COLI_CONTINUE_ASSISTANT", True),
        max_body_bytes=_number(None, "COLI_MAX_BODY_BYTES", str(MAX_BODY_BYTES)),
        max_connections=args.max_connections, max_connections_per_ip=args.max_connections_per_ip,
        read_deadline=args.read_deadline, idle_timeout=args.idle_timeout,
        keepalive_s=_number(None, "COLI_KEEPALIVE_S", "10", float),
        stream_interval_ms=stream_interval_ms,
        drain_s=_number(None, "COLI_ENGINE_DRAIN_S", "30", float),
        web_dir=web_dir, models_dirs=() if upstreams else models_dirs, max_models=max_models, model_ttl=model_ttl,
        upstreams=upstreams, upstream_key=args.upstream_key, upstream_slots=upstream_slots,
        upstream_probe_s=_number(None, "COLI_UPSTREAM_PROBE_S", "2", float),
        upstream_failures=upstream_failures, upstream_timeout_s=upstream_timeout_s,
        **placement_from_args(args),
    )


def run(args: argparse.Namespace) -> int:
    from colibri.server import serve

    if args.serve_verbose:
        logging.getLogger().setLevel(logging.INFO if args.serve_verbose == 1 else logging.DEBUG)
    cfg = config_from_args(args)
    try:
        asyncio.run(serve(cfg))
    except OSError as exc:  # the port is taken, the address is not ours, ...
        raise ColiError(f"cannot serve on {cfg.host}:{cfg.port}: {exc.strerror or exc}") from exc
    return 0
