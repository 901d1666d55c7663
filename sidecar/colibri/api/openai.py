"""The OpenAI-compatible routes: /v1/models, /v1/chat/completions, /v1/completions.

Routes parse, call and frame; protocol.py checks requests, serving.py
generates. Admission (429) and prompt length (400) are decided before any
streaming header; SSE headers go out with the first text or the first
keep-alive, whichever comes first.
"""
from __future__ import annotations

import asyncio
import logging
import secrets
import time
from typing import AsyncIterator

from aiohttp import web

from colibri.api.body import read_json_object
from colibri.api.errors import ApiError, StreamAborted, json_response
from colibri.api.keys import config_key, metrics_key, model_key, scheduler_key
from colibri.api.protocol import Limits, Options, parse_chat, parse_completion, parse_model
from colibri.api.serving import Delta, Outcome, ServedModel
from colibri.api.sse import DONE, KEEPALIVE, SSE_HEADERS, frame, with_keepalive

log = logging.getLogger(__name__)
routes = web.RouteTableDef()


# ---- models --------------------------------------------------------------------

def model_card(served: ServedModel) -> dict:
    return {"id": served.model_id, "object": "model", "created": served.created, "owned_by": "colibri",
            "input_modalities": ["text"], "capabilities": ["chat"]}


@routes.get("/v1/models")
async def list_models(request: web.Request) -> web.Response:
    served = request.app[model_key]
    return json_response({"object": "list", "data": [model_card(served)],
                          "models": [{"name": served.model_id, "description": f"{served.arch} model served by colibri",
                                      "release_date": None}]})


@routes.get("/v1/models/{model:.+}")
async def get_model(request: web.Request) -> web.Response:
    served = request.app[model_key]
    if request.match_info["model"] != served.model_id:
        raise ApiError(404, "not_found", f"the model {request.match_info['model']!r} does not exist; "
                                         f"this server serves {served.model_id!r}", param="model")
    return json_response(model_card(served))


# ---- generation ----------------------------------------------------------------

async def read_request(request: web.Request) -> dict:
    body = await read_json_object(request, request.app[config_key].max_body_bytes)
    served = request.app[model_key]
    model = parse_model(body)
    if model != served.model_id:
        raise ApiError(404, "model_not_found", f"the model {model!r} does not exist; this server serves "
                                               f"{served.model_id!r}", param="model")
    return body


def limits_of(app: web.Application) -> Limits:
    cfg = app[config_key]
    return Limits(kv_slots=app[model_key].n_slots, max_tokens=cfg.max_tokens, temperature=cfg.temperature,
                  top_p=cfg.top_p)


@routes.post("/v1/chat/completions")
async def chat_completions(request: web.Request) -> web.StreamResponse:
    body = await read_request(request)
    req = parse_chat(body, limits_of(request.app))
    served = request.app[model_key]
    prompt = served.chat_format.render(req.messages, continue_assistant=request.app[config_key].continue_assistant,
                                       thinking=req.thinking)
    tokens = served.tokenize_chat(prompt.text, req.messages)
    served.check_fits(tokens, "messages")
    return await respond(request, ChatFrames(served.model_id), tokens, req.options,
                         in_reasoning=prompt.in_reasoning, reasoning=served.chat_format.has_reasoning)


@routes.post("/v1/completions")
async def completions(request: web.Request) -> web.StreamResponse:
    body = await read_request(request)
    req = parse_completion(body, limits_of(request.app))
    served = request.app[model_key]
    tokens = served.tokenize_completion(req.prompt)
    served.check_fits(tokens, "prompt")
    return await respond(request, CompletionFrames(served.model_id), tokens, req.options)


async def respond(request: web.Request, frames: "Frames", tokens: list[int], options: Options, *,
                  in_reasoning: bool = False, reasoning: bool = False) -> web.StreamResponse:
    app = request.app
    served = app[model_key]
    async with app[scheduler_key].admit(options.cache_slot, tokens) as lease:
        outcome = Outcome()
        deltas = served.generate(lease, tokens, options, outcome, in_reasoning=in_reasoning, reasoning=reasoning,
                                 observer=app[metrics_key])
        headers = {"x-colibri-queue-wait-ms": str(round(lease.wait_s * 1000))}
        if options.stream:
            return await stream(request, frames, deltas, outcome, options, headers)
        async for _ in deltas:
            pass
        return json_response(frames.whole(outcome), headers=headers)


async def stream(request: web.Request, frames: "Frames", deltas: AsyncIterator[Delta], outcome: Outcome,
                 options: Options, headers: dict[str, str]) -> web.StreamResponse:
    resp = web.StreamResponse(status=200, headers={**SSE_HEADERS, **headers})
    resp.force_close()
    usage = options.include_usage

    async def start() -> None:
        if not resp.prepared:
            await resp.prepare(request)
            for chunk in frames.opening(usage):
                await resp.write(frame(chunk))

    try:
        async for item in with_keepalive(deltas, request.app[config_key].keepalive_s):
            await start()
            chunk = frames.keepalive(usage) if item is KEEPALIVE else frames.delta(item, usage)
            await resp.write(frame(chunk))
    except (asyncio.CancelledError, ConnectionResetError):
        raise  # the client went away
    except Exception as err:  # the streaming twin of the last-resort layer (middleware.gateway)
        if not resp.prepared:
            raise  # nothing sent yet: a clean JSON error
        if isinstance(err, ApiError):
            log.warning("generation failed mid-stream: %s", err.message)
        else:
            log.exception("generation failed mid-stream")
        if request.transport is not None:
            request.transport.close()  # once a 200 has gone out, an error only closes the socket
        raise StreamAborted(resp) from err  # the scheduler counts it failed; the middleware returns resp
    await start()
    await resp.write(frame(frames.finish(outcome.finish_reason or "stop", usage)))
    if usage:
        await resp.write(frame(frames.usage(outcome)))
    await resp.write(DONE)
    await resp.write_eof()
    return resp


# ---- framing -------------------------------------------------------------------

class Frames:
    """The JSON objects of one reply, chat or legacy completion."""

    object_whole = object_chunk = prefix = ""

    def __init__(self, model_id: str):
        self.id = self.prefix + secrets.token_hex(16)
        self.model = model_id
        self.created = int(time.time())

    def head(self, obj: str) -> dict:
        return {"id": self.id, "object": obj, "created": self.created, "model": self.model}

    def chunk(self, choice: dict, usage: bool) -> dict:
        reason = choice.pop("finish_reason", None)
        c = {**self.head(self.object_chunk),
             "choices": [{"index": 0, **choice, "logprobs": None, "finish_reason": reason}]}
        if usage:
            c["usage"] = None  # while include_usage is on, every chunk carries usage: null
        return c

    def usage(self, outcome: Outcome) -> dict:
        return {**self.head(self.object_chunk), "choices": [], "usage": outcome.usage}

    def opening(self, usage: bool) -> list[dict]:
        return []


class ChatFrames(Frames):
    object_whole, object_chunk, prefix = "chat.completion", "chat.completion.chunk", "chatcmpl-"

    def opening(self, usage: bool) -> list[dict]:
        return [self.chunk({"delta": {"role": "assistant", "content": ""}}, usage)]

    def delta(self, d: Delta, usage: bool) -> dict:
        body = {}
        if d.reasoning:
            body["reasoning_content"] = d.reasoning
        if d.content:
            body["content"] = d.content
        return self.chunk({"delta": body}, usage)

    def keepalive(self, usage: bool) -> dict:
        return self.chunk({"delta": {"reasoning_content": ""}}, usage)

    def finish(self, reason: str, usage: bool) -> dict:
        return self.chunk({"delta": {}, "finish_reason": reason}, usage)

    def whole(self, outcome: Outcome) -> dict:
        message = {"role": "assistant", "content": "".join(outcome.content), "refusal": None}
        if outcome.reasoning:
            message["reasoning_content"] = "".join(outcome.reasoning)
        return {**self.head(self.object_whole),
                "choices": [{"index": 0, "message": message, "logprobs": None,
                             "finish_reason": outcome.finish_reason or "stop"}],
                "usage": outcome.usage}


class CompletionFrames(Frames):
    object_whole = object_chunk = "text_completion"
    prefix = "cmpl-"

    def delta(self, d: Delta, usage: bool) -> dict:
        return self.chunk({"text": d.reasoning + d.content}, usage)

    def keepalive(self, usage: bool) -> dict:
        return self.chunk({"text": ""}, usage)

    def finish(self, reason: str, usage: bool) -> dict:
        return self.chunk({"text": "", "finish_reason": reason}, usage)

    def whole(self, outcome: Outcome) -> dict:
        return {**self.head(self.object_whole),
                "choices": [{"index": 0, "text": "".join(outcome.reasoning) + "".join(outcome.content),
                             "logprobs": None, "finish_reason": outcome.finish_reason or "stop"}],
                "usage": outcome.usage}
