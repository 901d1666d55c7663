"""The OpenAI Responses API: POST /v1/responses (a response object, or its event stream),
GET and DELETE /v1/responses/{id} for responses kept with `store`, on the same serving
core as every chat route (docs/responses-api.md).

    created, in_progress                         once the first text or keep-alive is due
    per output item, in order:                   reasoning (a reasoning family), message, function calls
      output_item.added
      content_part.added / *_text.delta... / *_text.done / content_part.done     (reasoning, message)
      function_call_arguments.delta / .done                                      (calls, after all text)
      output_item.done
    completed | incomplete (max_output_tokens)   | failed (after the headers, then the socket closes)

Every event has `event: <type>` and `data: <json>` lines and a `sequence_number` from 0;
`response.in_progress` repeats as the keep-alive while the engine is quiet. Refusals before
the first event (the body, the fields, the prompt length, admission) are JSON errors.

Responses with `store` (the default) are kept in memory, the most recently used
STORE_ENTRIES within STORE_BYTES, so that `previous_response_id` can continue them.
"""
from __future__ import annotations

import asyncio
import json
import logging
import secrets
import time
from collections import OrderedDict
from dataclasses import dataclass, replace

from aiohttp import web

from colibri.api.errors import ApiError, StreamAborted, as_api_error, json_response
from colibri.api.fields import wrong_type
from colibri.api.keys import config_key, core_key, model_key
from colibri.api.request import limits_of, read_request, reply_model
from colibri.api.responses_protocol import ResponsesRequest, encrypted, parse_responses
from colibri.api.sse import KEEPALIVE, SSE_HEADERS, one_write, to_json, with_keepalive
from colibri.chat.reasoning import THINK
from colibri.errors import InvalidRequest
from colibri.serving.core import ServingCore
from colibri.serving.generation import Delta, Outcome, Prepared
from colibri.serving.model import ServedModel
from colibri.serving.requests import Tools

log = logging.getLogger(__name__)
routes = web.RouteTableDef()
STORE_ENTRIES = 64
STORE_BYTES = 64 * 1024 * 1024


# ---- responses kept for previous_response_id ------------------------------------------

@dataclass
class Stored:
    items: list[dict]  # the conversation through this response: input items, then its output
    response: dict
    size: int


class ResponseStore:
    """The last responses made with `store`, least recently used out first; bounded by count
    and by the JSON size of each entry's whole conversation (an overcount: entries of one
    chain share their items)."""

    def __init__(self, max_entries: int = STORE_ENTRIES, max_bytes: int = STORE_BYTES):
        self.max_entries, self.max_bytes = max_entries, max_bytes
        self.entries: OrderedDict[str, Stored] = OrderedDict()
        self.size = 0

    def get(self, response_id: str) -> Stored | None:
        entry = self.entries.get(response_id)
        if entry is not None:
            self.entries.move_to_end(response_id)
        return entry

    def put(self, response_id: str, items: list[dict], response: dict) -> None:
        size = len(json.dumps([items, response], ensure_ascii=False))
        if size > self.max_bytes:
            return  # larger than the whole store: not kept
        self.entries[response_id] = Stored(items, response, size)
        self.size += size
        while len(self.entries) > self.max_entries or self.size > self.max_bytes:
            _, old = self.entries.popitem(last=False)
            self.size -= old.size

    def delete(self, response_id: str) -> bool:
        entry = self.entries.pop(response_id, None)
        if entry is not None:
            self.size -= entry.size
        return entry is not None


store_key = web.AppKey("responses", ResponseStore)


def add_routes(app: web.Application) -> None:
    app[store_key] = ResponseStore()
    app.router.add_routes(routes)


# ---- routes -------------------------------------------------------------------------

@routes.post("/v1/responses")
async def create_response(request: web.Request) -> web.StreamResponse:
    app = request.app
    body = await read_request(request)
    previous = None
    previous_id = body.get("previous_response_id")
    if previous_id is not None:
        if not isinstance(previous_id, str):
            raise wrong_type("previous_response_id", "a string", previous_id)
        entry = app[store_key].get(previous_id)
        if entry is None:
            raise ApiError(400, "previous_response_not_found",
                           f"Previous response with id '{previous_id}' not found: this server keeps the last "
                           f"{STORE_ENTRIES} responses made with 'store' in memory, until it restarts",
                           param="previous_response_id")
        previous = entry.items
    req = parse_responses(body, limits_of(app), previous)
    served = app[model_key]
    prepared = prepare(app[core_key], served, req)
    tags = served.chat_format.reasoning_tags
    reply = Reply(reply_model(served, req.chat.options), req, close=(tags or THINK).close)
    async with app[core_key].run(prepared) as run:
        headers = {"x-colibri-queue-wait-ms": str(round(run.lease.wait_s * 1000))}
        if req.chat.options.stream:
            return await stream(request, reply, run.deltas, run.outcome, headers)
        async for _ in run.deltas:
            pass
        outcome = run.outcome
        output = reply.items(outcome)
        response = reply.final(outcome, output)
        keep(app, reply, output, response)
        return json_response(response, headers=headers)


@routes.get("/v1/responses/{response_id}")
async def get_response(request: web.Request) -> web.Response:
    entry = request.app[store_key].get(request.match_info["response_id"])
    if entry is None:
        raise not_found(request.match_info["response_id"])
    return json_response(entry.response)


@routes.delete("/v1/responses/{response_id}")
async def delete_response(request: web.Request) -> web.Response:
    response_id = request.match_info["response_id"]
    if not request.app[store_key].delete(response_id):
        raise not_found(response_id)
    return json_response({"id": response_id, "object": "response", "deleted": True})


def not_found(response_id: str) -> ApiError:
    return ApiError(404, "not_found", f"No response found with id '{response_id}': only responses made with "
                                      "'store' are kept, in memory", param="response_id")


def prepare(core: ServingCore, served: ServedModel, req: ResponsesRequest) -> Prepared:
    chat = req.chat
    fmt = served.chat_format
    if chat.thinking.requested and not fmt.has_reasoning:
        raise ApiError(400, "unsupported_parameter", f"reasoning.effort {chat.thinking.effort!r}: this model family "
                                                     "has no reasoning mode (send 'none' or leave it out)",
                       param="reasoning.effort")
    if fmt.tool_format is None and chat.tools.choice.mode == "auto":
        # `auto` lets the model answer in text, and a family with no tool-call format can only do
        # that: its tools are not offered (required and named calls are still refused)
        chat = replace(chat, tools=Tools())
    try:
        prepared = core.prepare_chat(chat, check_fits=False)
        served.check_fits(prepared.tokens, "input")
    except InvalidRequest as exc:
        if exc.param == "messages":  # the conversation is this route's `input`
            exc.param = "input"
        raise
    return prepared


def keep(app: web.Application, reply: "Reply", output: list[dict], response: dict) -> None:
    if reply.req.store and response["status"] in ("completed", "incomplete"):
        app[store_key].put(reply.id, reply.req.items + output, response)


# ---- the response object ------------------------------------------------------------

def new_id(prefix: str) -> str:
    return prefix + secrets.token_hex(24)


class Reply:
    """The response object of one request, and its output items."""

    def __init__(self, model: str, req: ResponsesRequest, close: str = THINK.close):
        self.id = new_id("resp_")
        self.model = model
        self.req = req
        self.close = close  # the family's reasoning close tag (reasoning_tokens)
        self.created_at = int(time.time())

    def snapshot(self, status: str, output: list[dict], outcome: Outcome | None = None,
                 error: dict | None = None) -> dict:
        done = status in ("completed", "incomplete")
        incomplete = {"reason": "max_output_tokens"} if status == "incomplete" else None
        echo = self.req.echo
        response = {"id": self.id, "object": "response", "created_at": self.created_at, "status": status,
                    "background": False, "completed_at": int(time.time()) if done else None, "error": error,
                    "incomplete_details": incomplete, "instructions": echo["instructions"],
                    "max_output_tokens": echo["max_output_tokens"], "max_tool_calls": None, "model": self.model,
                    "output": output, "parallel_tool_calls": echo["parallel_tool_calls"],
                    "previous_response_id": echo["previous_response_id"], "prompt_cache_key": echo["prompt_cache_key"],
                    "reasoning": echo["reasoning"], "safety_identifier": None, "service_tier": "default",
                    "store": echo["store"], "temperature": echo["temperature"], "text": echo["text"],
                    "tool_choice": echo["tool_choice"], "tools": echo["tools"], "top_logprobs": 0,
                    "top_p": echo["top_p"], "truncation": "disabled", "metadata": echo["metadata"] or {}}
        if outcome is not None and done:
            response["usage"] = usage(outcome, self.close)
        if echo["user"] is not None:
            response["user"] = echo["user"]
        return response

    def final(self, outcome: Outcome, output: list[dict]) -> dict:
        return self.snapshot(status_of(outcome), output, outcome)

    # output items: reasoning, message, function calls

    def reasoning_item(self, item_id: str, text: str, status: str) -> dict:
        item = {"id": item_id, "type": "reasoning", "summary": [],
                "content": [{"type": "reasoning_text", "text": text}], "status": status}
        if self.req.encrypted_reasoning:
            item["encrypted_content"] = encrypted(text)
        return item

    @staticmethod
    def message_item(item_id: str, text: str, status: str) -> dict:
        return {"id": item_id, "type": "message", "status": status, "role": "assistant",
                "content": [output_text(text)]}

    def call_items(self, outcome: Outcome) -> list[dict]:
        calls = outcome.tool_calls[:1] if not self.req.parallel_tool_calls else outcome.tool_calls
        items = []
        for call in calls:
            name = call["function"]["name"]
            item = {"id": new_id("fc_"), "type": "function_call", "status": "completed", "call_id": call["id"],
                    "name": name, "arguments": call["function"]["arguments"]}
            if name in self.req.namespaces:
                item["namespace"], item["name"] = self.req.namespaces[name]
            items.append(item)
        return items

    def items(self, outcome: Outcome) -> list[dict]:
        status = "incomplete" if status_of(outcome) == "incomplete" else "completed"
        calls = self.call_items(outcome)
        out = []
        if outcome.reasoning:
            cut = status if not outcome.text and not calls else "completed"
            out.append(self.reasoning_item(new_id("rs_"), "".join(outcome.reasoning), cut))
        if outcome.text or not calls:
            out.append(self.message_item(new_id("msg_"), outcome.text, status))
        return out + calls


def output_text(text: str) -> dict:
    return {"type": "output_text", "text": text, "annotations": [], "logprobs": []}


def status_of(outcome: Outcome) -> str:
    return "incomplete" if outcome.finish_reason == "length" else "completed"


def usage(outcome: Outcome, close: str = THINK.close) -> dict:
    n_in, cached, n_out = outcome.prompt_tokens, outcome.cached_tokens, outcome.completion_tokens
    return {"input_tokens": n_in,
            "input_tokens_details": {"cached_tokens": cached, "cache_write_tokens": n_in - cached},
            "output_tokens": n_out, "output_tokens_details": {"reasoning_tokens": reasoning_tokens(outcome, close)},
            "total_tokens": n_in + n_out}


def reasoning_tokens(outcome: Outcome, close: str = THINK.close) -> int:
    """The generated tokens that wrote the reasoning block: those up to its close tag (the
    family's; all of them when it never closed)."""
    if not outcome.reasoning:
        return 0
    raw = "".join(outcome.raw)
    at = raw.find(close)
    end = len(raw) + 1 if at < 0 else at + len(close)
    return sum(1 for r in outcome.records if r.start < end)


# ---- the event stream ---------------------------------------------------------------

class Events:
    """The stream of one response: numbered events, and the output item now open."""

    def __init__(self, resp: web.StreamResponse, reply: Reply):
        self.resp = resp
        self.reply = reply
        self.seq = 0
        self.done: list[dict] = []  # output items finished, in order
        self.open: str | None = None  # "reasoning" or "message"
        self.item_id = ""
        self.text: list[str] = []

    async def send(self, kind: str, **fields: object) -> None:
        data = to_json({"type": kind, "sequence_number": self.seq, **fields})
        self.seq += 1
        await self.resp.write(f"event: {kind}\ndata: {data}\n\n".encode("utf-8"))

    async def lifecycle(self, kind: str, status: str, outcome: Outcome | None = None,
                        error: dict | None = None) -> None:
        await self.send(kind, response=self.reply.snapshot(status, list(self.done), outcome, error))

    @property
    def index(self) -> int:  # the output index of the open item
        return len(self.done)

    async def feed(self, d: Delta) -> None:
        if d.reasoning:
            await self.part("reasoning")
            await self.delta("response.reasoning_text.delta", d.reasoning)
        if d.content:
            await self.part("message")
            await self.delta("response.output_text.delta", d.content, logprobs=[])

    async def part(self, kind: str) -> None:
        """Open an item of `kind` (closing the one open) with its one content part."""
        if self.open == kind:
            return
        await self.close("completed")
        self.open, self.text = kind, []
        if kind == "reasoning":
            self.item_id = new_id("rs_")
            item = {"id": self.item_id, "type": "reasoning", "summary": [], "content": [], "status": "in_progress"}
            part = {"type": "reasoning_text", "text": ""}
        else:
            self.item_id = new_id("msg_")
            item = {**Reply.message_item(self.item_id, "", "in_progress"), "content": []}
            part = output_text("")
        await self.send("response.output_item.added", output_index=self.index, item=item)
        await self.send("response.content_part.added", item_id=self.item_id, output_index=self.index,
                        content_index=0, part=part)

    async def delta(self, kind: str, text: str, **extra: object) -> None:
        self.text.append(text)
        await self.send(kind, item_id=self.item_id, output_index=self.index, content_index=0, delta=text, **extra)

    async def close(self, status: str) -> None:
        if self.open is None:
            return
        text = "".join(self.text)
        where = {"item_id": self.item_id, "output_index": self.index, "content_index": 0}
        if self.open == "reasoning":
            item = self.reply.reasoning_item(self.item_id, text, status)
            await self.send("response.reasoning_text.done", **where, text=text)
            await self.send("response.content_part.done", **where, part={"type": "reasoning_text", "text": text})
        else:
            item = Reply.message_item(self.item_id, text, status)
            await self.send("response.output_text.done", **where, text=text, logprobs=[])
            await self.send("response.content_part.done", **where, part=output_text(text))
        await self.send("response.output_item.done", output_index=self.index, item=item)
        self.done.append(item)
        self.open = None

    async def finish(self, outcome: Outcome) -> dict:
        """Close the reply: the open item, an empty message when there is nothing else, the
        calls; then the terminal event. Returns the final response object."""
        status = status_of(outcome)
        calls = self.reply.call_items(outcome)
        if self.open == "reasoning":  # no text came after it: cut by the budget unless calls follow
            await self.close(status if not calls else "completed")
        if not calls and not any(i["type"] == "message" for i in self.done):
            await self.part("message")  # every reply without calls has its message, empty or not
        await self.close(status)
        for call in calls:
            where = {"item_id": call["id"], "output_index": self.index}
            await self.send("response.output_item.added", output_index=self.index,
                            item={**call, "arguments": "", "status": "in_progress"})
            await self.send("response.function_call_arguments.delta", **where, delta=call["arguments"])
            await self.send("response.function_call_arguments.done", **where, name=call["name"],
                            arguments=call["arguments"])
            await self.send("response.output_item.done", output_index=self.index, item=call)
            self.done.append(call)
        response = self.reply.snapshot(status, list(self.done), outcome)
        await self.send("response.completed" if status == "completed" else "response.incomplete", response=response)
        return response


async def stream(request: web.Request, reply: Reply, deltas, outcome: Outcome,
                 headers: dict[str, str]) -> web.StreamResponse:
    resp = web.StreamResponse(status=200, headers={**SSE_HEADERS, **headers})
    resp.force_close()
    events = Events(resp, reply)

    async def start() -> bool:
        if resp.prepared:
            return False
        await resp.prepare(request)
        await events.lifecycle("response.created", "in_progress")
        await events.lifecycle("response.in_progress", "in_progress")
        return True

    try:
        async for batch in with_keepalive(deltas, request.app[config_key].keepalive_s):
            started = await start()
            if batch is KEEPALIVE:
                if not started:
                    await events.lifecycle("response.in_progress", "in_progress")  # the keep-alive
                continue
            async with one_write(events):
                for d in batch:
                    await events.feed(d)
        await start()
        response = await events.finish(outcome)
    except (asyncio.CancelledError, ConnectionResetError):
        raise  # the client went away
    except Exception as err:  # headers are out: response.failed, then the socket closes
        if not resp.prepared:
            raise  # nothing sent yet: a clean JSON error
        api = as_api_error(err)
        if api is None:
            log.exception("generation failed mid-stream")
            api = ApiError(500, "engine_error", "internal error; see the server log")
        else:
            log.warning("generation failed mid-stream: %s", api.message)
        try:
            code = "rate_limit_exceeded" if api.status == 429 else "server_error"
            await events.lifecycle("response.failed", "failed", error={"code": code, "message": api.message})
        finally:
            if request.transport is not None:
                request.transport.close()
        raise StreamAborted(resp) from err
    keep(request.app, reply, response["output"], response)
    await resp.write_eof()
    return resp
