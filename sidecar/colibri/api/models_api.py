"""The dashboard's Models page (web/src/features/models): GET /api/models (every model with its
state, whether it runs and its plan, and the pool's loading progress), POST /api/models/{id}/load
(make it the active model, loading it first) and POST /api/models/{id}/unload. Without
--models-dir the server has one model: the list is that model and load/unload are refused
(409 library_off)."""
from __future__ import annotations

import asyncio

from aiohttp import web

from colibri.api.errors import ApiError, json_response
from colibri.api.keys import model_key, pool_key
from colibri.serving.pool import ModelNotFoundError
from colibri.library.discovery import plan_summary

routes = web.RouteTableDef()


def _pool(request: web.Request):
    pool = request.app.get(pool_key)
    if pool is None:
        raise ApiError(409, "library_off", "this server serves one model: start `coli serve --models-dir DIR` "
                                           "to switch between models")
    return pool


@routes.get("/api/models")
async def list_models(request: web.Request) -> web.Response:
    pool = request.app.get(pool_key)
    if pool is None:
        served = request.app[model_key]
        row = {"id": served.model_id, "state": "active", "arch": served.arch, "n_params": served.n_params,
               "n_ctx": served.n_ctx, "n_ctx_train": served.n_ctx_train, "runnable": True, "reason": "loaded",
               "path": str(served.engine.path), "plan": plan_summary(served.plan) if served.plan else None}
        return json_response({"library": False, "active": served.model_id, "models": [row], "pool": None})
    rows = await asyncio.get_running_loop().run_in_executor(None, lambda: pool.listing(with_plans=True))
    return json_response({"library": True, "active": pool.active_id, "models": rows, "pool": pool.snapshot()})


@routes.post("/api/models/{model}/load")
async def load(request: web.Request) -> web.Response:
    pool = _pool(request)
    name = request.match_info["model"]
    try:
        await pool.load(name)
    except ModelNotFoundError as exc:
        raise ApiError(404, "model_not_found", exc.message, param="model") from None
    return json_response({"active": pool.active_id, "pool": pool.snapshot()})


@routes.post("/api/models/{model}/unload")
async def unload(request: web.Request) -> web.Response:
    pool = _pool(request)
    name = request.match_info["model"]
    if name not in pool.resident:
        raise ApiError(404, "model_not_loaded", f"the model {name!r} is not loaded", param="model")
    if name == pool.active_id:
        raise ApiError(409, "model_active", f"{name!r} is the active model: load another one to replace it")
    await pool.unload(name)
    return json_response({"active": pool.active_id, "pool": pool.snapshot()})
