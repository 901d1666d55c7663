"""The HTTP server: the app factory and running until SIGTERM.

    served = load_model(cfg)                 # colibri.serving.model: the engine, its thread, the chat format
    app = create_app(cfg, served)            # routes, middleware, scheduler, serving core, metrics
    asyncio.run(serve(cfg))                  # what `coli serve` does: load, bind, print the URL, drain on SIGTERM
"""
from __future__ import annotations

import asyncio
import logging
import signal
import sys
from typing import Callable

import aiohttp
from aiohttp import web

from colibri.api import (anthropic, connections, dashboard_feeds, health, metrics, middleware, models_api, openai,
                         request as api_request, responses, static, systemone)
from colibri.api.errors import ApiError
from colibri.api.keys import config_key, core_key, metrics_key, model_key, pool_key, scheduler_key, upstream_key
from colibri.serve_config import ServeConfig
from colibri.serving.core import ServingCore
from colibri.serving.model import ServedModel, close_model, load_model
from colibri.serving.pool import ActiveModel, ModelPool
from colibri.serving.scheduler import Scheduler
from colibri.serving.upstream import UpstreamCore, UpstreamModel, Upstreams

log = logging.getLogger(__name__)


def create_app(cfg: ServeConfig, served: ServedModel) -> web.Application:
    """With cfg.models_dirs (--models-dir) the app serves the library: app[model_key] is the active
    model of a ModelPool that starts with `served` (colibri.serving.pool)."""
    library = bool(cfg.models_dirs)
    app = web.Application(middlewares=[middleware.gateway] + ([api_request.release_model] if library else []),
                          client_max_size=cfg.max_body_bytes + 1024)
    app[config_key] = cfg
    app[connections.gate_key] = connections.Gate(cfg.max_connections, cfg.max_connections_per_ip, cfg.read_deadline)
    scheduler = Scheduler(served.n_slots, max_queue=cfg.max_queue, queue_timeout=cfg.queue_timeout)
    if library:
        pool = app[pool_key] = ModelPool(cfg, served, scheduler)
        app[model_key] = ActiveModel(pool)  # type: ignore[assignment] - every attribute is the active model's
        app.on_startup.append(start_pool)
    else:
        app[model_key] = served
    app[scheduler_key] = scheduler
    for slot in served.engine_thread.restored:  # slots warm from disk keep their conversations
        scheduler.remember(slot, served.engine.slot_tokens(slot))
    app[metrics_key] = scheduler.observer = metrics.Metrics(scheduler)
    app[metrics_key].add_engine(lambda: app[model_key])
    app[core_key] = ServingCore(served, scheduler, app[metrics_key], continue_assistant=cfg.continue_assistant)
    if library:
        app[pool_key].on_switch.append(lambda active: setattr(app[core_key], "served", active))
    add_routes(app)
    return app


def create_upstream_app(cfg: ServeConfig, upstreams: Upstreams) -> web.Application:
    """`coli serve --upstream`: the same routes, guard and admission in front of other engines
    (colibri.serving.upstream); the scheduler has --upstream-slots per upstream."""
    app = web.Application(middlewares=[middleware.gateway], client_max_size=cfg.max_body_bytes + 1024)
    app[config_key] = cfg
    app[connections.gate_key] = connections.Gate(cfg.max_connections, cfg.max_connections_per_ip, cfg.read_deadline)
    scheduler = app[scheduler_key] = Scheduler(upstreams.n_slots, max_queue=cfg.max_queue,
                                               queue_timeout=cfg.queue_timeout)
    app[metrics_key] = scheduler.observer = metrics.Metrics(scheduler)
    upstreams.series = app[metrics_key].add_upstreams(upstreams)
    served = UpstreamModel(upstreams, cfg.model_id)
    app[model_key] = served  # type: ignore[assignment] - the model facts replies read, no engine
    app[core_key] = UpstreamCore(upstreams, scheduler, app[metrics_key], served)  # type: ignore[assignment]
    app[upstream_key] = upstreams
    add_routes(app)
    return app


def add_routes(app: web.Application) -> None:
    app.on_response_prepare.append(middleware.on_prepare)
    app.on_shutdown.append(close_scheduler)  # before in-flight handlers are waited for: no new admissions
    app.router.add_get("/health", health.get_health)
    dashboard_feeds.add_routes(app)
    app.router.add_routes(models_api.routes)
    app.router.add_get("/metrics", metrics.get_metrics)
    app.router.add_routes(openai.routes)
    app.router.add_routes(anthropic.routes)
    responses.add_routes(app)  # /v1/responses, and the store previous_response_id reads
    app.router.add_routes(systemone.routes)
    app.router.add_route("*", "/v1/{tail:.*}", unknown_api_path)
    app.router.add_get("/{path:.*}", static.get_static)


async def close_scheduler(app: web.Application) -> None:
    app[scheduler_key].close()


async def start_pool(app: web.Application) -> None:
    app[pool_key].start()


async def unknown_api_path(request: web.Request) -> web.Response:
    raise ApiError(404, "not_found", f"no such endpoint: {request.method} {request.path}")


# ---- running ---------------------------------------------------------------------

async def serve(cfg: ServeConfig, announce: Callable[[str], None] | None = None) -> None:
    """Load, bind, announce the URL once ready, and on SIGTERM/SIGINT drain and stop."""
    loop = asyncio.get_running_loop()
    upstreams = served = None
    if cfg.upstreams:
        upstreams = Upstreams(list(cfg.upstreams), cfg.upstream_key, cfg.upstream_slots, aiohttp.ClientSession(),
                              probe_s=cfg.upstream_probe_s, alias=cfg.model_id, failures=cfg.upstream_failures,
                              timeout_s=cfg.upstream_timeout_s)
        await upstreams.probe_all()
        for up in upstreams.all:
            if not up.healthy:
                log.warning("upstream %s is not answering yet (%s): probed again in %g s", up.url, up.last_error,
                            up.breaker.next_probe_in_s())
        app = create_upstream_app(cfg, upstreams)
        upstreams.start()
    else:
        served = await loop.run_in_executor(None, load_model, cfg)
        app = create_app(cfg, served)
    runner = web.AppRunner(app, handler_cancellation=True, shutdown_timeout=cfg.drain_s,
                           keepalive_timeout=cfg.idle_timeout,
                           access_log=log if log.isEnabledFor(logging.INFO) else None)
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        try:
            loop.add_signal_handler(sig, stop.set)
        except (NotImplementedError, RuntimeError):  # Windows: Ctrl+C arrives as KeyboardInterrupt
            pass
    try:
        await runner.setup()
        site = connections.GatedSite(runner, app[connections.gate_key], cfg.host, cfg.port)
        await site.start()
        port = runner.addresses[0][1] if runner.addresses else cfg.port
        host = f"[{cfg.host}]" if ":" in cfg.host else cfg.host
        more = ""
        if app.get(pool_key) is not None:
            n = len(await loop.run_in_executor(None, app[pool_key].ids))
            more = f" and {n - 1} more model(s) on request"
        if upstreams is not None:
            more = f" through {len(upstreams.all)} upstream(s): " + ", ".join(u.url for u in upstreams.all)
        (announce or _print)(f"colibri: serving {app[model_key].model_id} at http://{host}:{port}/v1 "
                             f"(dashboard http://{host}:{port}/){more}")
        await stop.wait()
        log.info("stopping: draining in-flight requests (up to %.0f s)", cfg.drain_s)
    finally:
        await runner.cleanup()
        pool = app.get(pool_key)
        if upstreams is not None:
            await upstreams.close()
        else:
            await (pool.close() if pool is not None else close_model(served))


def _print(line: str) -> None:
    print(line, flush=True)
    sys.stdout.flush()
