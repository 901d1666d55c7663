"""The Anthropic Messages API: POST /v1/messages (JSON or its named-event stream) and
POST /v1/messages/count_tokens, on the same engine and templates as the OpenAI routes.

The stream is Anthropic's, event for event: message_start, then per block
content_block_start / content_block_delta... / content_block_stop (a thinking
block first when the family reasons, closed by its signature_delta, with no
thinking_delta when thinking.display is "omitted"; then the text; then each
tool_use with one input_json_delta), message_delta with the stop_reason (and
the stop_sequence matched) and usage, message_stop; `ping` while the engine is quiet. SSE
headers go out once the request holds its slot (a 429 is still a clean JSON
error); a failure after that is an `error` event, then the socket closes.
"""
from __future__ import annotations

import asyncio
import json
import logging
import re
import secrets
from typing import AsyncIterator

from aiohttp import web

from colibri.api.anthropic_protocol import error_body, parse_messages_request, shows_thinking, tool_input
from colibri.api.errors import ApiError, StreamAborted, as_api_error, json_response
from colibri.api.keys import config_key, core_key, model_key, request_id_key
from colibri.api.request import limits_of, read_request, reply_model
from colibri.api.sse import KEEPALIVE, SSE_HEADERS, one_write, to_json, with_keepalive
from colibri.serving.generation import Delta, Outcome

log = logging.getLogger(__name__)
routes = web.RouteTableDef()
STOP_REASONS = {"stop": "end_turn", "length": "max_tokens", "tool_calls": "tool_use"}
SIGNATURE = "colibri-local"  # thinking blocks are not signed by a hosted model


def stop_fields(outcome: Outcome) -> dict:
    """stop_reason and stop_sequence: `stop_sequence` with the one matched when a request's
    stop sequence ended the reply."""
    if outcome.finish_reason == "stop" and outcome.stop_sequence is not None:
        return {"stop_reason": "stop_sequence", "stop_sequence": outcome.stop_sequence}
    return {"stop_reason": STOP_REASONS.get(outcome.finish_reason or "stop", "end_turn"), "stop_sequence": None}


def usage(outcome: Outcome) -> dict:
    """Anthropic's usage: input_tokens excludes what the KV cache already held (cache reads)."""
    return {"input_tokens": outcome.prompt_tokens - outcome.cached_tokens, "output_tokens": outcome.completion_tokens,
            "cache_creation_input_tokens": 0, "cache_read_input_tokens": outcome.cached_tokens,
            "cache_creation": None, "server_tool_use": None, "service_tier": None}


def tool_use(call: dict) -> dict:
    # Anthropic's ids are [A-Za-z0-9_-]; Kimi's functions.NAME:IDX is not (its templates renumber it back)
    tail = re.sub(r"[^A-Za-z0-9_-]", "_", call["id"].removeprefix("call_"))[-64:]
    return {"type": "tool_use", "id": "toolu_" + tail, "name": call["function"]["name"],
            "input": tool_input(call["function"]["arguments"])}


@routes.post("/v1/messages/count_tokens")
async def count_tokens(request: web.Request) -> web.Response:
    body = await read_request(request)
    req = parse_messages_request(body, limits_of(request.app), counting=True)
    return json_response({"input_tokens": request.app[core_key].count_chat(req)})


@routes.post("/v1/messages")
async def messages(request: web.Request) -> web.StreamResponse:
    app = request.app
    body = await read_request(request)
    req = parse_messages_request(body, limits_of(app))
    shown = shows_thinking(body)
    prepared = app[core_key].prepare_chat(req, thinking_is_a_hint=True)
    head = {"id": "msg_" + secrets.token_hex(12), "type": "message", "role": "assistant",
            "model": reply_model(app[model_key], req.options)}
    async with app[core_key].run(prepared) as run:
        headers = {"x-colibri-queue-wait-ms": str(round(run.lease.wait_s * 1000))}
        if req.options.stream:
            return await stream(request, head, run.deltas, run.outcome, headers, shown)
        async for _ in run.deltas:
            pass
        outcome = run.outcome
        return json_response({**head, "content": content_blocks(outcome, shown), **stop_fields(outcome),
                              "usage": usage(outcome)}, headers=headers)


def text_block(text: str) -> dict:
    return {"type": "text", "text": text, "citations": None}  # Anthropic's schema requires the key


def content_blocks(outcome: Outcome, shown: bool = True) -> list[dict]:
    blocks = []
    if outcome.reasoning:  # thinking.display "omitted": the block, empty, with its signature
        blocks.append({"type": "thinking", "thinking": "".join(outcome.reasoning) if shown else "",
                       "signature": SIGNATURE})
    if outcome.text or not outcome.tool_calls:
        blocks.append(text_block(outcome.text))
    return blocks + [tool_use(c) for c in outcome.tool_calls]


class EventWriter:
    """Anthropic's named SSE events, with the index and kind of the block now open."""

    def __init__(self, resp: web.StreamResponse, shown: bool = True):
        self.resp = resp
        self.shown = shown  # thinking.display "omitted": thinking blocks carry no thinking_delta
        self.index = -1
        self.open: str | None = None
        self.wrote_text = False

    async def event(self, name: str, payload: dict) -> None:
        data = to_json({"type": name, **payload})
        await self.resp.write(f"event: {name}\ndata: {data}\n\n".encode("utf-8"))

    async def start(self, block: dict) -> None:
        await self.stop()
        self.index += 1
        self.open = block["type"]
        await self.event("content_block_start", {"index": self.index, "content_block": block})

    async def stop(self) -> None:
        if self.open == "thinking":
            await self.delta({"type": "signature_delta", "signature": SIGNATURE})
        if self.open is not None:
            await self.event("content_block_stop", {"index": self.index})
            self.open = None

    async def delta(self, delta: dict) -> None:
        await self.event("content_block_delta", {"index": self.index, "delta": delta})

    async def feed(self, d: Delta) -> None:
        if d.reasoning:
            if self.open != "thinking":
                await self.start({"type": "thinking", "thinking": "", "signature": ""})
            if self.shown:
                await self.delta({"type": "thinking_delta", "thinking": d.reasoning})
        if d.content:
            if self.open != "text":
                await self.start(text_block(""))
                self.wrote_text = True
            await self.delta({"type": "text_delta", "text": d.content})


async def stream(request: web.Request, head: dict, deltas: AsyncIterator[Delta], outcome: Outcome,
                 headers: dict[str, str], shown: bool = True) -> web.StreamResponse:
    resp = web.StreamResponse(status=200, headers={**SSE_HEADERS, **headers})
    resp.force_close()
    await resp.prepare(request)
    out = EventWriter(resp, shown)
    start_usage = {**usage(outcome), "output_tokens": 0}
    await out.event("message_start", {"message": {**head, "content": [], "stop_reason": None, "stop_sequence": None,
                                                  "usage": start_usage}})
    try:
        async for batch in with_keepalive(deltas, request.app[config_key].keepalive_s):
            if batch is KEEPALIVE:
                await out.event("ping", {})
                continue
            async with one_write(out):
                for d in batch:
                    await out.feed(d)
        if not out.wrote_text and not outcome.tool_calls:
            await out.start(text_block(""))
        for call in outcome.tool_calls:  # after all text
            block = tool_use(call)
            await out.start({**block, "input": {}})
            args = json.dumps(block["input"], ensure_ascii=False)
            await out.delta({"type": "input_json_delta", "partial_json": args})
        await out.stop()
    except (asyncio.CancelledError, ConnectionResetError):
        raise  # the client went away
    except Exception as err:  # headers are out: an `error` event, then the socket closes
        api = as_api_error(err)
        if api is None:
            log.exception("generation failed mid-stream")
            api = ApiError(500, "engine_error", "internal error; see the server log")
        try:
            await out.event("error", {"error": error_body(api, request.get(request_id_key))["error"]})
        finally:
            if request.transport is not None:
                request.transport.close()
        raise StreamAborted(resp) from err
    final = usage(outcome)
    await out.event("message_delta", {"delta": stop_fields(outcome),
                                      "usage": {k: final[k] for k in ("input_tokens", "output_tokens",
                                                                      "cache_creation_input_tokens",
                                                                      "cache_read_input_tokens", "server_tool_use")}})
    await out.event("message_stop", {})
    await resp.write_eof()
    return resp
