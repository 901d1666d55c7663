"""POST /v1/systemone: closed questions about a document, answered by reading the probability
of each allowed answer (colibri.serving.systemone scores them; this route parses and frames)."""
from __future__ import annotations

import secrets
import time

from aiohttp import web

from colibri.api.body import read_json_object
from colibri.api.errors import json_response
from colibri.api.keys import config_key, core_key, model_key
from colibri.api.systemone_protocol import parse_systemone

routes = web.RouteTableDef()


@routes.post("/v1/systemone")
async def systemone(request: web.Request) -> web.Response:
    started = time.monotonic()
    app = request.app
    body = await read_json_object(request, app[config_key].max_body_bytes)
    served = app[model_key]
    scored = await app[core_key].score(parse_systemone(body, served.n_slots))
    headers = {"x-colibri-queue-wait-ms": str(round(scored.wait_s * 1000)),
               "x-colibri-elapsed-ms": str(round((time.monotonic() - started) * 1000)),
               "x-colibri-prefill-tokens": str(scored.prefilled), "x-colibri-reused-tokens": str(scored.reused),
               "x-colibri-engine-calls": str(scored.calls)}
    return json_response({"id": "req_" + secrets.token_hex(16), "model": served.model_id, "provider": "colibri",
                          "answers": scored.answers,
                          "usage": {"input_tokens": scored.input_tokens, "output_tokens": scored.output_tokens,
                                    "cost": 0}}, headers=headers)
