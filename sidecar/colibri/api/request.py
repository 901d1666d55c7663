"""What every generation route reads first: the JSON body (bounded), the model it names
(this server's, else a 404), and the server's limits a request is checked against."""
from __future__ import annotations

from aiohttp import web

from colibri.api.body import read_json_object
from colibri.api.errors import ApiError
from colibri.api.keys import config_key, model_key, pool_key, release_key, upstream_key
from colibri.api.protocol import parse_model
from colibri.serving.pool import ModelNotFoundError
from colibri.serving.requests import Limits


@web.middleware
async def release_model(request: web.Request, handler):
    """With a pool: the request stops counting on its model once its handler is done (streams included)."""
    try:
        return await handler(request)
    finally:
        release = request.get(release_key)
        if release is not None:
            release()


async def read_request(request: web.Request) -> dict:
    body = await read_json_object(request, request.app[config_key].max_body_bytes)
    model = parse_model(body)
    pool = request.app.get(pool_key)
    if pool is not None:  # --models-dir: the named model is made the active one (it may load first)
        try:
            request[release_key] = await pool.use(model)
        except ModelNotFoundError as exc:
            raise ApiError(404, "model_not_found", exc.message, param="model") from None
        return body
    served = request.app[model_key]
    ups = request.app.get(upstream_key)
    if ups is not None:  # --upstream: any name an upstream serves (its ids, or its alias)
        if any(u.serves(model) for u in ups.all):
            return body
        names = sorted({n for u in ups.all for n in u.names})
        raise ApiError(404, "model_not_found", f"the model {model!r} does not exist; the upstreams serve "
                                               f"{', '.join(map(repr, names)) or 'nothing yet'}", param="model")
    aliases = request.app[config_key].model_aliases
    if model != served.model_id and model not in aliases and "*" not in aliases:
        raise ApiError(404, "model_not_found", model_not_found_message(model, served.model_id, aliases),
                       param="model")
    return body


def model_not_found_message(model: str | None, served_id: str, aliases: tuple[str, ...]) -> str:
    """The 404's words: what was asked, the id served (and its aliases), and how to serve another name."""
    asked = "the request names no model" if model is None else f"the model {model!r} does not exist"
    names = f"this server serves {served_id!r}"
    if aliases:
        names += " (also as " + ", ".join(map(repr, aliases)) + ")"
    return (f"{asked}; {names}: send that name, or start the server with --model-alias NAME "
            f"($COLI_MODEL_ALIAS) to accept another name for it")


def limits_of(app: web.Application) -> Limits:
    cfg = app[config_key]
    return Limits(kv_slots=app[model_key].n_slots, max_tokens=cfg.max_tokens, temperature=cfg.temperature,
                  top_p=cfg.top_p, stream_logprobs=app.get(upstream_key) is not None)


def reply_model(served, options) -> str:
    """The model a reply names: behind --upstream the one the request asked for (it routes on it;
    an alias stays the alias), else the one model served."""
    return options.model if options.model and getattr(served, "routes_by_model", False) else served.model_id
