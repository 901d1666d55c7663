"""Typed keys of the objects an app shares with its handlers (aiohttp's AppKey: no globals)."""
from __future__ import annotations

from aiohttp import web

from colibri.api.connections import gate_key  # noqa: F401 - every app key is importable from here
from colibri.api.metrics import metrics_key  # noqa: F401
from colibri.serve_config import ServeConfig
from colibri.serving.core import ServingCore
from colibri.serving.model import ServedModel
from colibri.serving.pool import ModelPool
from colibri.serving.scheduler import Scheduler
from colibri.serving.upstream import Upstreams

config_key = web.AppKey("config", ServeConfig)
model_key = web.AppKey("model", ServedModel)
scheduler_key = web.AppKey("scheduler", Scheduler)
core_key = web.AppKey("core", ServingCore)
pool_key = web.AppKey("pool", ModelPool)  # only with --models-dir (colibri.serving.pool)
upstream_key = web.AppKey("upstreams", Upstreams)  # only with --upstream (colibri.serving.upstream)

# per-request values: RequestKey where this aiohttp has it (3.12+), a plain string before
_request_key = getattr(web, "RequestKey", None)
request_id_key = _request_key("request_id", str) if _request_key else "request_id"
authed_key = _request_key("authed", bool) if _request_key else "authed"
release_key = _request_key("model_release", object) if _request_key else "model_release"  # the pool's count
