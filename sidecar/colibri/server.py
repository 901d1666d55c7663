"""The HTTP server: the app factory, loading the served model, and running until SIGTERM.

    served = load_model(cfg)                 # the engine, its thread, the chat format
    app = create_app(cfg, served)            # routes, middleware, scheduler, metrics
    asyncio.run(serve(cfg))                  # what `coli serve` does: load, bind, print the URL, drain on SIGTERM
"""
from __future__ import annotations

import asyncio
import logging
import signal
import sys
from pathlib import Path
from typing import Callable

from aiohttp import web

from colibri.api import anthropic, dashboard_feeds, health, metrics, middleware, openai, static, systemone
from colibri.api.errors import ApiError
from colibri.api.keys import config_key, metrics_key, model_key, scheduler_key
from colibri.api.serving import ServedModel
from colibri.chat.builtin_templates import BY_ARCH
from colibri.chat.prompt import ChatFormat
from colibri.chat.template import ChatTemplate, TemplateRefused
from colibri.scheduler import Scheduler
from colibri.serve_config import ServeConfig

log = logging.getLogger(__name__)


def create_app(cfg: ServeConfig, served: ServedModel) -> web.Application:
    app = web.Application(middlewares=[middleware.gateway], client_max_size=cfg.max_body_bytes + 1024)
    app[config_key] = cfg
    app[model_key] = served
    scheduler = Scheduler(served.n_slots, max_queue=cfg.max_queue, queue_timeout=cfg.queue_timeout)
    app[scheduler_key] = scheduler
    for slot in getattr(served.engine_thread, "restored", {}):  # slots warm from disk keep their conversations
        scheduler.remember(slot, served.engine.slot_tokens(slot))
    app[metrics_key] = scheduler.observer = metrics.Metrics(scheduler)
    app.on_response_prepare.append(middleware.on_prepare)
    app.on_shutdown.append(close_scheduler)  # before in-flight handlers are waited for: no new admissions
    app.router.add_get("/health", health.get_health)
    dashboard_feeds.add_routes(app)
    app.router.add_get("/metrics", metrics.get_metrics)
    app.router.add_routes(openai.routes)
    app.router.add_routes(anthropic.routes)
    app.router.add_routes(systemone.routes)
    app.router.add_route("*", "/v1/{tail:.*}", unknown_api_path)
    app.router.add_get("/{path:.*}", static.get_static)
    return app


async def close_scheduler(app: web.Application) -> None:
    app[scheduler_key].close()


async def unknown_api_path(request: web.Request) -> web.Response:
    raise ApiError(404, "not_found", f"no such endpoint: {request.method} {request.path}")


# ---- the model -------------------------------------------------------------------

def chat_format_for(path: str, arch: str, engine) -> ChatFormat:
    """The GGUF's own tokenizer.chat_template, else colibri's built-in for the family, else none."""
    from colibri.engine import GGUFFile

    with GGUFFile(path) as g:
        source = g.get("tokenizer.chat_template")
    source = source or BY_ARCH.get(arch)
    if not source:
        return ChatFormat(None)
    bos = engine.token_bytes(engine.bos, special=True).decode("utf-8", "replace") if engine.bos >= 0 else ""
    eos = engine.token_bytes(engine.eos, special=True).decode("utf-8", "replace") if engine.eos >= 0 else ""
    try:
        return ChatFormat(ChatTemplate(source, bos_token=bos, eos_token=eos))
    except TemplateRefused as exc:
        log.warning("%s; chat completions are refused, /v1/completions works", exc)
        return ChatFormat(None)


def model_id_for(cfg: ServeConfig, path: Path) -> str:
    from colibri.models import DEFAULT_MODEL_ID, default_model_path

    if cfg.model_id:
        return cfg.model_id
    if cfg.model_path is None:
        try:
            if path == default_model_path(progress=False):
                return DEFAULT_MODEL_ID
        except Exception:  # noqa: BLE001 - only naming is at stake here
            pass
    return path.stem


def load_model(cfg: ServeConfig) -> ServedModel:
    """Open the engine with the server's slots and context, start its thread."""
    from colibri.engine import Engine
    from colibri.engine_thread import EngineThread
    from colibri.models import resolve_model

    from colibri.paths import cache_dir, kv_dir
    from colibri.plan import make_plan

    path = resolve_model(cfg.model_path)
    plan = make_plan(path, ctx=cfg.ctx or None, kv_slots=cfg.kv_slots, expert_cache_gb=cfg.expert_cache_gb,
                     pin_gb=cfg.pin_gb)
    if plan.placement == "streaming":
        log.warning("experts stream from disk: %.1f GiB cache + %.1f GiB pinned (%s)", plan.cache_bytes / (1 << 30),
                    plan.pin_bytes / (1 << 30), plan.reason)
    elif not plan.fits:
        log.warning("the model does not fit in available memory: %s", plan.reason)
    engine = Engine(path, n_ctx=cfg.ctx, n_slots=cfg.kv_slots, n_threads=cfg.threads,
                    expert_cache_bytes=plan.cache_bytes, expert_pin_bytes=plan.pin_bytes, io_threads=cfg.io_threads,
                    direct_io=cfg.direct_io, prefetch=cfg.prefetch)
    arch = engine.model_info().get("arch") or "unknown"
    thread = EngineThread(engine, persist_dir=kv_dir() if cfg.kv_persist else None, heat_dir=cache_dir() / "heat")
    thread.start()
    served = ServedModel(model_id_for(cfg, Path(path)), engine, thread, chat_format_for(str(path), arch, engine), arch)
    served.plan = plan
    return served


async def close_model(served: ServedModel) -> None:
    await served.engine_thread.close()  # finishes in-flight work, then stops the thread


# ---- running ---------------------------------------------------------------------

async def serve(cfg: ServeConfig, announce: Callable[[str], None] | None = None) -> None:
    """Load, bind, announce the URL once ready, and on SIGTERM/SIGINT drain and stop."""
    loop = asyncio.get_running_loop()
    served = await loop.run_in_executor(None, load_model, cfg)
    runner = web.AppRunner(create_app(cfg, served), handler_cancellation=True, shutdown_timeout=cfg.drain_s,
                           access_log=log if log.isEnabledFor(logging.INFO) else None)
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        try:
            loop.add_signal_handler(sig, stop.set)
        except (NotImplementedError, RuntimeError):  # Windows: Ctrl+C arrives as KeyboardInterrupt
            pass
    try:
        await runner.setup()
        site = web.TCPSite(runner, cfg.host, cfg.port)
        await site.start()
        port = runner.addresses[0][1] if runner.addresses else cfg.port
        host = f"[{cfg.host}]" if ":" in cfg.host else cfg.host
        (announce or _print)(f"colibri: serving {served.model_id} at http://{host}:{port}/v1 "
                             f"(dashboard http://{host}:{port}/)")
        await stop.wait()
        log.info("stopping: draining in-flight requests (up to %.0f s)", cfg.drain_s)
    finally:
        await runner.cleanup()
        await close_model(served)


def _print(line: str) -> None:
    print(line, flush=True)
    sys.stdout.flush()
