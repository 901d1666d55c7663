"""GET /health: {"status": "ok"} for anyone; with the API key (or when none is set) also the
model, the scheduler's snapshot and what the machine has."""
from __future__ import annotations

import os
import platform

import psutil
from aiohttp import web

from colibri.api.connections import gate_key
from colibri.api.errors import json_response
from colibri.api.keys import authed_key, config_key, model_key, pool_key, scheduler_key, upstream_key
from colibri.engine import Tier
from colibri.errors import EngineError
from colibri.serving.breaker import CLOSED
from colibri.serving.model import ServedModel

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
    if app.get(upstream_key) is not None:
        return json_response(upstream_health(app))
    pool = app.get(pool_key)
    if pool is not None and pool.active_id not in pool.resident:  # between two models (--models-dir)
        return json_response({"status": "loading", "model": (pool.loading or {}).get("model"),
                              "scheduler": app[scheduler_key].snapshot(), "connections": app[gate_key].snapshot(),
                              "hwinfo": hwinfo(), "library": pool.snapshot()})
    served = app[model_key]
    try:  # "changed": every generation is refused (model_file_changed)
        model_file = served.engine.file_state()
    except (EngineError, TypeError):  # an engine that died still answers /health, without it
        model_file = None
    return json_response({
        "status": "degraded" if model_file == "changed" else "ok",
        "model_file": model_file,
        "model": served.model_id,
        "arch": served.arch,
        "n_ctx": served.n_ctx,
        "n_ctx_train": served.n_ctx_train,
        "kv_slots": served.n_slots,
        "input_modalities": ["text"],
        "continue_assistant": app[config_key].continue_assistant,
        "capabilities": ["chat", "systemone"],
        # templates with a reasoning block think unless asked not to (Qwen3, GLM-4.5)
        "reasoning": "default" if served.chat_format.has_reasoning else "none",
        "scheduler": app[scheduler_key].snapshot(),
        "connections": app[gate_key].snapshot(),
        "hwinfo": hwinfo(),
        # --models-dir: the active and resident models, the one loading and how far (colibri.serving.pool)
        "library": app[pool_key].snapshot() if app.get(pool_key) is not None else None,
        "speculative": safe_speculative(served),
        **safe_placement(served),
    })


def upstream_health(app: web.Application) -> dict:
    """`coli serve --upstream`: each upstream's state and breaker; "degraded" while any breaker is not closed
    (open, or half-open: on trial), "down" when none takes requests."""
    ups = app[upstream_key].all
    n_closed = sum(u.breaker.state == CLOSED for u in ups)
    served = app[model_key]
    return {"status": "ok" if n_closed == len(ups) else ("degraded" if any(u.healthy for u in ups) else "down"),
            "backend": "upstream", "model": served.model_id, "arch": "upstream", "n_ctx": served.n_ctx or None,
            "kv_slots": served.n_slots, "input_modalities": ["text"],
            "continue_assistant": app[config_key].continue_assistant, "capabilities": ["chat", "systemone"],
            "reasoning": "upstream", "upstreams": [u.snapshot() for u in ups],
            "upstream_slots": app[config_key].upstream_slots, "scheduler": app[scheduler_key].snapshot(),
            "connections": app[gate_key].snapshot(), "hwinfo": hwinfo(), "library": None,
            # expert routing is seen only through another colibri (its /experts is relayed); no `moe`: not "dense"
            "routing_visible": any(u.colibri and u.healthy for u in ups)}


def speculative(engine) -> dict:
    """Speculative decoding's counters since the engine opened (engine/src/draft.h): tokens drafted per step
    (0: off), what drafts them (the model's MTP block or prompt lookup), drafted
    and kept, and tokens per decode step."""
    st = engine.stats()
    drafted, accepted, generated = st["draft_tokens"], st["draft_accepted"], st["tokens_generated"]
    return {"draft_tokens": engine.draft_tokens, "drafter": engine.drafter or None,
            "drafted": drafted, "accepted": accepted,
            "draft_steps": st["draft_steps"], "acceptance_rate": accepted / drafted if drafted else None,
            # every decode step of a slot keeps its pending token and the drafts it accepted
            "tokens_per_step": generated / (generated - accepted) if generated > accepted else None}


def safe_speculative(served: ServedModel) -> dict | None:
    try:
        return speculative(served.engine)
    except Exception:  # noqa: BLE001 - an engine that died still answers /health, without these
        return None


def safe_placement(served: ServedModel) -> dict:
    try:
        return placement(served)
    except Exception:  # noqa: BLE001 - an engine that died still answers /health, without these
        return {}


def placement(served: ServedModel) -> dict:
    """moe (the experts map's shape), tiers (experts and GB per tier) and cache (hit rates) for the dashboard."""
    engine = served.engine
    layers = served.moe_layers
    plan = served.plan
    dense_gb = round(plan.dense_bytes / GB, 3) if plan else None
    if not layers:
        return {"moe": None, "tiers": {"vram": 0, "ram": 0, "pinned": 0, "disk": 0, "vram_gb": 0.0, "ram_gb": 0.0,
                                       "pinned_gb": 0.0, "dense_gb": dense_gb}}
    st = engine.stats(arrays=("tiers",))
    E = st["n_expert"]
    tiers = b"".join(st["tiers"][il * E:(il + 1) * E] for il in layers)
    info = engine.model_info()
    one = plan.expert_bytes / max(len(tiers), 1) if plan else 0.0
    ram, pinned = tiers.count(Tier.RAM) + tiers.count(Tier.LOADING), tiers.count(Tier.PINNED)
    chosen = st["hits"] + st["misses"]
    return {
        "moe": {"rows": len(layers), "cols": E, "layers": layers, "experts_per_token": info.get("n_expert_used") or 0,
                "shared_experts": int(info.get("n_expert_shared") or 0)},
        "tiers": {"vram": 0, "ram": ram, "pinned": pinned, "disk": len(tiers) - ram - pinned, "vram_gb": 0.0,
                  "ram_gb": round(ram * one / GB, 3), "pinned_gb": round(pinned * one / GB, 3), "dense_gb": dense_gb},
        "cache": {"budget_gb": round((st["cache_bytes"] + st["pinned_bytes"]) / GB, 6) if st["streaming"]
                  else round((plan.expert_bytes if plan else 0) / GB, 3),
                  "hit_rate": st["hits"] / chosen if chosen else None,
                  "prefetch_hit_rate": st["prefetch_used"] / st["prefetch_issued"] if st["prefetch_issued"] else None,
                  "bytes_read": st["bytes_read"]},
    }
