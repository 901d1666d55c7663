"""GET /health: {"status": "ok"} for anyone; with the API key (or when none is set) also the
model, the scheduler's snapshot and what the machine has."""
from __future__ import annotations

import os
import platform

import psutil
from aiohttp import web

from colibri.api.errors import json_response
from colibri.api.keys import authed_key, config_key, model_key, scheduler_key

GB = 1024 ** 3


def hwinfo() -> dict:
    mem = psutil.virtual_memory()
    return {"cores": psutil.cpu_count(logical=False) or os.cpu_count(), "ram_total_gb": round(mem.total / GB, 2),
            "ram_avail_gb": round(mem.available / GB, 2), "gpus": 0, "vram_total_gb": 0.0,
            "cpu": platform.processor() or platform.machine(), "gpu": ""}


async def get_health(request: web.Request) -> web.Response:
    if not request.get(authed_key, False):
        return json_response({"status": "ok"})
    app = request.app
    served = app[model_key]
    return json_response({
        "status": "ok",
        "model": served.model_id,
        "arch": served.arch,
        "n_ctx": served.n_ctx,
        "kv_slots": served.n_slots,
        "input_modalities": ["text"],
        "continue_assistant": app[config_key].continue_assistant,
        "capabilities": ["chat"],
        "scheduler": app[scheduler_key].snapshot(),
        "hwinfo": hwinfo(),
    })
