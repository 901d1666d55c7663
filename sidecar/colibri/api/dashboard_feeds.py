"""The dashboard's feeds (web/src/api/types.ts is the contract): GET /experts
(tiers and heat per routed expert, the experts routed since the last poll),
GET /experts/coroute (each expert's strongest co-routing partners, for the
Explore map), GET /profile (the last turns' phase records), and GET
/events, a server-sent-events stream that pushes routing steps and finished
turns as they happen. All of them read the engine's counters
(colibri_stats), which never takes a generation slot.

With `coli serve --upstream` there is no engine here: /profile and /events give
the gateway's own timings per request (queue wait, first output, inter-token),
/experts and /experts/coroute relay another colibri's feeds when an upstream is
one, else say that routing is not visible (`routing_visible: false`)."""
from __future__ import annotations

import asyncio
import base64
import json
import math
import struct

import aiohttp
from aiohttp import web

from colibri.api.errors import json_response
from colibri.api.keys import core_key, model_key, upstream_key
from colibri.engine import Tier
from colibri.serving.model import ServedModel

# the feed's tier codes (web/src/api/types.ts): disk 0, ram 1, vram 2, pinned 3; an expert still loading is on disk
FEED_TIER = {Tier.DISK: 0, Tier.RAM: 1, Tier.PINNED: 3, Tier.LOADING: 0}
EVENTS_PERIOD_S = 0.1
KEEPALIVE_TICKS = 150  # 15 s


def _rows(values, layers: list[int], n_expert: int):
    """The MoE layers' rows of a layer-major per-expert array."""
    out = []
    for il in layers:
        out.extend(values[il * n_expert:(il + 1) * n_expert])
    return out


def _bitmap(flags) -> bytes:
    bits = bytearray((len(flags) + 7) // 8)
    for i, f in enumerate(flags):
        if f:
            bits[i >> 3] |= 1 << (i & 7)
    return bytes(bits)


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _heat_byte(h: float) -> int:
    return min(63, int(math.log2(1.0 + h))) if h > 0 else 0


def experts_feed(app: web.Application, with_counts: bool) -> dict:
    served = app[model_key]
    layers = served.moe_layers
    st = served.engine.stats(arrays=True)
    E = st["n_expert"]
    if not layers or not E:
        return {"v": 1, "rows": 0, "cols": 0, "layers": [], "seq": st["seq"], "map": "", "hits": ""}
    tiers, heat = _rows(st["tiers"], layers, E), _rows(st["heat"], layers, E)
    counts = _rows(st["counts"], layers, E)
    # routed since the previous poll: counts that moved (one snapshot per server)
    previous = app.get("experts_last_counts")
    app["experts_last_counts"] = counts
    if previous is None or len(previous) != len(counts):
        hits = _rows(st["last_hits"], layers, E)
    else:
        hits = [a != b for a, b in zip(counts, previous)]
    feed = {"v": 1, "rows": len(layers), "cols": E, "layers": layers, "seq": st["seq"],
            "map": _b64(bytes(FEED_TIER.get(t, 0) << 6 | _heat_byte(h) for t, h in zip(tiers, heat))),
            "hits": _b64(_bitmap(hits))}
    if with_counts:
        feed["counts"] = _b64(struct.pack(f"<{len(counts)}I", *counts))
        feed["tokens"] = st["tokens_prompt"] + st["tokens_generated"]
    return feed


def _rate(x: float) -> float | None:
    return None if x is None or (isinstance(x, float) and math.isnan(x)) else x


def profile_turn(t: dict, drafter: str) -> dict:
    """A turn of the engine's ring as the feed's ProfileTurn; `drafter` (the engine's: "mtp", "lookup",
    "model" or "") is named when the turn drafted."""
    turn = {"id": t["id"], "t": t["end_time"], "slot": t["slot"], "wall_s": t["wall_s"],
            "prompt_tokens": t["prompt_tokens"], "completion_tokens": t["completion_tokens"],
            "prefill_s": t["prefill_s"], "expert_disk_s": t["disk_s"], "expert_wait_s": t["io_wait_s"],
            "expert_matmul_s": t["matmul_s"], "attention_s": t["attention_s"],
            "linear_attention_s": t["linear_attention_s"], "lm_head_s": t["lm_head_s"],
            "forwards": t["forwards"], "bytes_read": t["bytes_read"], "cache_hit_rate": _rate(t["cache_hit_rate"]),
            "prefetch_hit_rate": _rate(t["prefetch_hit_rate"]), "reused_tokens": t["reused_tokens"],
            "finish": t["finish"], "other_s": t["other_s"], "draft_tokens": t["draft_tokens"],
            "draft_accepted": t["draft_accepted"]}
    if drafter and t["draft_tokens"] > 0:
        turn["drafter"] = drafter
    return turn


# ---- `coli serve --upstream`: the gateway's own timings; routing only from another colibri ----

NOT_VISIBLE = "expert routing is not visible through an upstream engine"


def colibri_upstream(app: web.Application):
    ups = app.get(upstream_key)
    return next((u for u in ups.all if u.colibri and u.healthy), None) if ups is not None else None


async def relay(request: web.Request) -> web.Response | None:
    """The feed of the first healthy upstream that is another colibri, as it answers; None when there is none."""
    ups, up = request.app.get(upstream_key), colibri_upstream(request.app)
    if up is None:
        return None
    try:
        async with ups.session.get(up.url + request.path_qs, headers=up.headers,
                                   timeout=aiohttp.ClientTimeout(total=5)) as resp:
            body = await resp.json(content_type=None)
    except (aiohttp.ClientError, asyncio.TimeoutError, ValueError):
        return None
    return json_response({**body, "relayed_from": up.url}) if isinstance(body, dict) else None


async def upstream_experts(request: web.Request) -> web.Response:
    relayed = await relay(request)
    return relayed or json_response({"v": 1, "rows": 0, "cols": 0, "layers": [], "seq": 0, "map": "", "hits": "",
                                     "routing_visible": False, "reason": NOT_VISIBLE})


def upstream_profile(app: web.Application) -> dict:
    core = app[core_key]
    return {"seq": core.turns.seq, "turns": core.turns.rows, "source": "gateway",
            "upstreams": [u.snapshot() for u in app[upstream_key].all]}


async def relay_events(request: web.Request, up) -> web.StreamResponse | None:
    """Another colibri's /events, byte for byte (its `routing` steps and engine turns); None when it will not open."""
    session = request.app[upstream_key].session
    try:
        upstream = await session.get(up.url + "/events", headers=up.headers,
                                     timeout=aiohttp.ClientTimeout(total=None, connect=5))
    except (aiohttp.ClientError, asyncio.TimeoutError):
        return None
    if upstream.status != 200:
        upstream.release()
        return None
    resp = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
    try:
        await resp.prepare(request)
        async for chunk in upstream.content.iter_any():
            await resp.write(chunk)
    except (aiohttp.ClientError, asyncio.TimeoutError, ConnectionResetError, asyncio.CancelledError):
        pass  # either side went away: the dashboard reconnects
    finally:
        upstream.release()
    return resp


async def upstream_events(request: web.Request) -> web.StreamResponse:
    """SSE: another colibri upstream's own /events, relayed; else `turn` (a gateway-timed request) when one
    finishes, and no `routing` (not visible through an upstream)."""
    up = colibri_upstream(request.app)
    if up is not None:
        relayed = await relay_events(request, up)
        if relayed is not None:
            return relayed
    turns = request.app[core_key].turns
    resp = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
    await resp.prepare(request)
    last, quiet = turns.seq, 0
    while True:
        rows = turns.since(last)
        last = turns.seq
        try:
            for row in rows:
                await resp.write(f"event: turn\ndata: {json.dumps(row)}\n\n".encode())
            quiet = 0 if rows else quiet + 1
            if quiet and quiet % KEEPALIVE_TICKS == 0:
                await resp.write(b": keep-alive\n\n")
        except (ConnectionResetError, asyncio.CancelledError):
            break
        await asyncio.sleep(EVENTS_PERIOD_S)
    return resp


async def get_experts(request: web.Request) -> web.Response:
    if request.app.get(upstream_key) is not None:
        return await upstream_experts(request)
    return json_response(experts_feed(request.app, request.query.get("counts") in ("1", "true")))


def coroute_feed(served: ServedModel, k: int) -> dict:
    layers = served.moe_layers
    st = served.engine.stats()
    E = st["n_expert"]
    empty = {"v": 1, "rows": len(layers), "cols": E if layers else 0, "k": k, "tokens": 0, "nbr": "", "w": ""}
    if not layers:
        return empty
    tokens, nbr, w = served.engine.coroute(k)
    if not tokens:
        return empty
    row_of = {il: r for r, il in enumerate(layers)}
    out_n, out_w = [], bytearray()
    top = max(w) or 1
    for il in layers:
        for e in range(E):
            at = (il * E + e) * k
            for j in range(k):
                cell, weight = nbr[at + j], w[at + j]
                if weight and cell // E in row_of:
                    out_n.append(row_of[cell // E] * E + cell % E)
                    out_w.append(max(1, round(255 * weight / top)))
                else:
                    out_n.append(0xFFFFFFFF)
                    out_w.append(0)
    return {**empty, "tokens": tokens, "nbr": _b64(struct.pack(f"<{len(out_n)}I", *out_n)), "w": _b64(bytes(out_w))}


async def get_coroute(request: web.Request) -> web.Response:
    if request.app.get(upstream_key) is not None:
        relayed = await relay(request)
        return relayed or json_response({"v": 1, "rows": 0, "cols": 0, "k": 0, "tokens": 0, "nbr": "", "w": "",
                                         "routing_visible": False, "reason": NOT_VISIBLE})
    try:
        k = max(1, min(int(request.query.get("k", "8")), 32))
    except ValueError:
        k = 8
    served = request.app[model_key]
    return json_response(await asyncio.get_running_loop().run_in_executor(None, coroute_feed, served, k))


async def get_profile(request: web.Request) -> web.Response:
    if request.app.get(upstream_key) is not None:
        return json_response(upstream_profile(request.app))
    engine = request.app[model_key].engine
    turns = [profile_turn(t, engine.drafter) for t in engine.turns()]
    return json_response({"seq": turns[-1]["id"] if turns else 0, "turns": turns})


async def get_events(request: web.Request) -> web.StreamResponse:
    """SSE: `routing` ({seq, rows, cols, hits}) after every forward pass the
    sampler sees, `turn` (a ProfileTurn) when a request finishes."""
    if request.app.get(upstream_key) is not None:
        return await upstream_events(request)
    served = request.app[model_key]
    engine = served.engine
    layers = served.moe_layers
    resp = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
    await resp.prepare(request)
    last_seq, last_turn, quiet = None, engine.stats()["turns"], 0
    while True:
        st = engine.stats(arrays=("last_hits",) if layers else False)
        chunks = []
        if st["seq"] != last_seq and layers:
            hits = _rows(st["last_hits"], layers, st["n_expert"])
            chunks.append(("routing", {"seq": st["seq"], "rows": len(layers), "cols": st["n_expert"],
                                       "hits": _b64(_bitmap(hits))}))
        last_seq = st["seq"]
        if st["turns"] != last_turn:  # read the ring only when a request has ended
            for t in engine.turns():
                if t["id"] > last_turn:
                    chunks.append(("turn", profile_turn(t, engine.drafter)))
            last_turn = st["turns"]
        try:
            for name, data in chunks:
                await resp.write(f"event: {name}\ndata: {json.dumps(data)}\n\n".encode())
            quiet = 0 if chunks else quiet + 1
            if quiet and quiet % KEEPALIVE_TICKS == 0:  # proxies close silent streams
                await resp.write(b": keep-alive\n\n")
        except (ConnectionResetError, asyncio.CancelledError):
            break
        await asyncio.sleep(EVENTS_PERIOD_S)
    return resp


def add_routes(app: web.Application) -> None:
    app.router.add_get("/experts", get_experts)
    app.router.add_get("/experts/coroute", get_coroute)
    app.router.add_get("/profile", get_profile)
    app.router.add_get("/events", get_events)
