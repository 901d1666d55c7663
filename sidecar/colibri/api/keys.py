"""Typed keys of the objects an app shares with its handlers (aiohttp's AppKey: no globals)."""
from __future__ import annotations

from aiohttp import web

from colibri.api.metrics import Metrics
from colibri.api.serving import ServedModel
from colibri.scheduler import Scheduler
from colibri.serve_config import ServeConfig

config_key = web.AppKey("config", ServeConfig)
model_key = web.AppKey("model", ServedModel)
scheduler_key = web.AppKey("scheduler", Scheduler)
metrics_key = web.AppKey("metrics", Metrics)
