"""The OpenAI-compatible routes: /v1/models, /v1/chat/completions, /v1/completions.

Routes parse, call and frame: protocol.py checks requests, the serving core
(colibri.serving.core) prepares, admits and generates. Admission (429) and
prompt length (400) are decided before any streaming header; SSE headers go
out with the first text or the first keep-alive, whichever comes first.
"""
from __future__ import annotations

import asyncio
import datetime
import json
import logging
import secrets
import time
from typing import AsyncIterator

from aiohttp import web

from colibri.api.errors import ApiError, StreamAborted, as_api_error, json_response
from colibri.api.keys import config_key, core_key, model_key, pool_key, upstream_key
from colibri.api.logprobs import Entry, chat_logprobs, described_tokens, legacy_logprobs, prompt_rows
from colibri.api.protocol import parse_chat, parse_completion
from colibri.api.request import limits_of, model_not_found_message, read_request, reply_model
from colibri.api.sse import DONE, KEEPALIVE, SSE_HEADERS, frame, to_json, with_keepalive
from colibri.chat.spans import Spans
from colibri.detok import Detokenizer
from colibri.serving.core import Prepared, Run
from colibri.serving.generation import Delta, Outcome
from colibri.serving.model import ServedModel
from colibri.serving.requests import Options

log = logging.getLogger(__name__)
routes = web.RouteTableDef()


# ---- models --------------------------------------------------------------------

def model_card(served: ServedModel) -> dict:
    """OpenAI's model object, plus the context length under the names clients read it by
    (OpenRouter's context_length, vLLM's max_model_len, llama.cpp's meta.n_ctx)."""
    return {"id": served.model_id, "object": "model", "created": served.created, "owned_by": "colibri",
            "input_modalities": ["text"], "capabilities": ["chat", "systemone"],
            "context_length": served.n_ctx, "max_model_len": served.n_ctx,
            "meta": {"n_ctx": served.n_ctx, "n_ctx_train": served.n_ctx_train, "n_vocab": served.engine.n_vocab,
                     "n_params": served.n_params}}


def anthropic_model_card(served: ServedModel, name: str | None = None) -> dict:
    """Anthropic's ModelInfo: what its SDKs and Claude Code read from /v1/models."""
    created = datetime.datetime.fromtimestamp(served.created, datetime.timezone.utc)
    name = name or served.model_id
    return {"type": "model", "id": name, "display_name": name, "created_at": created.strftime("%Y-%m-%dT%H:%M:%SZ")}


def alias_card(served: ServedModel, alias: str) -> dict:
    """An alias of the loaded model (--model-alias): its card under that name, `root` naming the
    model it serves (as vLLM's cards of its --served-model-name list do)."""
    return {**model_card(served), "id": alias, "root": served.model_id}


def listed_aliases(request: web.Request) -> tuple[str, ...]:
    """The aliases /v1/models lists: every --model-alias but '*' (any name is no name to list)."""
    return tuple(a for a in request.app[config_key].model_aliases if a != "*" and a != request.app[model_key].model_id)


def wants_anthropic(request: web.Request) -> bool:
    """Anthropic's clients send anthropic-version on every request; OpenAI's never do."""
    return "anthropic-version" in request.headers


def library_card(row: dict) -> dict:
    """A library model that is not loaded: what its header says (context_length is the trained one)."""
    return {"id": row["id"], "object": "model", "created": 0, "owned_by": "colibri", "input_modalities": ["text"],
            "capabilities": ["chat", "systemone"], "context_length": row.get("n_ctx_train") or None,
            "meta": {"n_ctx_train": row.get("n_ctx_train"), "n_params": row.get("n_params"), "arch": row.get("arch"),
                     "state": row.get("state"), "size": row.get("size")}}


async def list_library(request: web.Request, pool) -> web.Response:
    """With --models-dir: the loaded models (the active one first), then every runnable one found."""
    rows = await asyncio.get_running_loop().run_in_executor(None, pool.listing)
    loaded = sorted(pool.resident.values(), key=lambda s: s.model_id != pool.active_id)  # the active one first
    cards = [model_card(s) for s in loaded]
    for card in cards:
        card["meta"]["state"] = "active" if card["id"] == pool.active_id else "loaded"
    cards += [library_card(r) for r in rows if r["id"] not in pool.resident and r["runnable"] is not False]
    if wants_anthropic(request):
        data = [{"type": "model", "id": c["id"], "display_name": c["id"], "created_at": "1970-01-01T00:00:00Z"}
                for c in cards]
        return json_response({"data": data, "has_more": False, "first_id": data[0]["id"], "last_id": data[-1]["id"]})
    return json_response({"object": "list", "data": cards,
                          "models": [{"name": c["id"], "description": f"{c['meta'].get('arch') or 'a'} model served "
                                      "by colibri", "release_date": None} for c in cards]})


def upstream_cards(request: web.Request) -> list[dict]:
    """With --upstream: the union of what the upstreams serve (their ids, or their aliases: `--upstream
    URL#ALIAS`, --model-id), each with the upstreams that serve it."""
    served, ups = request.app[model_key], request.app[upstream_key]
    by_id: dict[str, list] = {}
    for up in ups.all:
        for mid in up.names:
            by_id.setdefault(mid, []).append(up)
    cards = []
    for mid, serving in by_id.items():
        n_ctx = min((u.n_ctx for u in serving if u.n_ctx), default=0) or None
        cards.append({"id": mid, "object": "model", "created": served.created, "owned_by": "upstream",
                      "input_modalities": ["text"], "capabilities": ["chat", "systemone"],
                      "context_length": n_ctx, "max_model_len": n_ctx,
                      "meta": {"n_ctx": n_ctx, "upstreams": [u.url for u in serving]}})
    return cards


@routes.get("/v1/models")
async def list_models(request: web.Request) -> web.Response:
    pool = request.app.get(pool_key)
    if pool is not None:
        return await list_library(request, pool)
    if request.app.get(upstream_key) is not None:
        cards = upstream_cards(request)
        if wants_anthropic(request):
            data = [{"type": "model", "id": c["id"], "display_name": c["id"], "created_at": "1970-01-01T00:00:00Z"}
                    for c in cards]
            return json_response({"data": data, "has_more": False, "first_id": data[0]["id"] if data else None,
                                  "last_id": data[-1]["id"] if data else None})
        return json_response({"object": "list", "data": cards})
    served = request.app[model_key]
    aliases = listed_aliases(request)  # after the model's own id, which stays first
    if wants_anthropic(request):  # one model: one page, nothing before or after it
        data = [anthropic_model_card(served)] + [anthropic_model_card(served, a) for a in aliases]
        return json_response({"data": data, "has_more": False, "first_id": data[0]["id"], "last_id": data[-1]["id"]})
    return json_response({"object": "list", "data": [model_card(served)] + [alias_card(served, a) for a in aliases],
                          "models": [{"name": served.model_id, "description": f"{served.arch} model served by colibri",
                                      "release_date": None}]})


@routes.get("/v1/models/{model:.+}")
async def get_model(request: web.Request) -> web.Response:
    served = request.app[model_key]
    pool = request.app.get(pool_key)
    name = request.match_info["model"]
    if request.app.get(upstream_key) is not None:
        card = next((c for c in upstream_cards(request) if c["id"] == name), None)
        if card is None:
            raise ApiError(404, "model_not_found", f"the model {name!r} does not exist", param="model")
        return json_response({"type": "model", "id": name, "display_name": name,
                              "created_at": "1970-01-01T00:00:00Z"} if wants_anthropic(request) else card)
    if pool is not None and name in pool.resident:
        served = pool.resident[name]
    elif pool is not None:
        row = next((r for r in pool.listing() if r["id"] == name and r["runnable"] is not False), None)
        if row is None:
            raise ApiError(404, "model_not_found", f"the model {name!r} does not exist", param="model")
        card = library_card(row)
        if wants_anthropic(request):
            return json_response({"type": "model", "id": name, "display_name": name,
                                  "created_at": "1970-01-01T00:00:00Z"})
        return json_response(card)
    if name in listed_aliases(request):
        return json_response(anthropic_model_card(served, name) if wants_anthropic(request)
                             else alias_card(served, name))
    if name != served.model_id:
        raise ApiError(404, "not_found", model_not_found_message(name, served.model_id,
                                                                 request.app[config_key].model_aliases),
                       param="model")
    return json_response(anthropic_model_card(served) if wants_anthropic(request) else model_card(served))


# ---- generation ----------------------------------------------------------------

@routes.post("/v1/chat/completions")
async def chat_completions(request: web.Request) -> web.StreamResponse:
    body = await read_request(request)
    req = parse_chat(body, limits_of(request.app))
    prepared = request.app[core_key].prepare_chat(req)
    frames = ChatFrames(request.app[model_key], req.options, tools_active=prepared.tools is not None)
    return await respond(request, frames, prepared)


@routes.post("/v1/completions")
async def completions(request: web.Request) -> web.StreamResponse:
    body = await read_request(request)
    req = parse_completion(body, limits_of(request.app))
    prepared = request.app[core_key].prepare_completion(req)
    frames = CompletionFrames(request.app[model_key], req.options, prompt=req.prompt, tokens=prepared.tokens)
    return await respond(request, frames, prepared)


def queue_headers(run: Run) -> dict[str, str]:
    return {"x-colibri-queue-wait-ms": str(round(run.lease.wait_s * 1000))}


async def respond(request: web.Request, frames: "Frames", prepared: Prepared) -> web.StreamResponse:
    async with request.app[core_key].run(prepared) as run:
        if prepared.options.stream:
            return await stream(request, frames, run.deltas, run.outcome, prepared.options, queue_headers(run))
        async for _ in run.deltas:
            pass
        return json_response(frames.whole(run.outcome), headers=queue_headers(run))


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
        async for batch in with_keepalive(deltas, request.app[config_key].keepalive_s):
            await start()
            await resp.write(frame(frames.keepalive(usage)) if batch is KEEPALIVE else
                             b"".join([frames.delta_frame(d, usage) for d in batch]))
    except (asyncio.CancelledError, ConnectionResetError):
        raise  # the client went away
    except Exception as err:  # the streaming twin of the last-resort layer (middleware.gateway)
        if not resp.prepared:
            raise  # nothing sent yet: a clean JSON error
        api = as_api_error(err)
        if api is not None:
            log.warning("generation failed mid-stream: %s", api.message)
        else:
            log.exception("generation failed mid-stream")
            api = ApiError(500, "engine_error", "internal error; see the server log")
        try:  # OpenAI's own error event (the SDKs raise it), then no [DONE]: the reply is incomplete
            await resp.write(frame(api.body()))
        except (ConnectionResetError, RuntimeError):  # the client is gone too
            pass
        if request.transport is not None:
            request.transport.close()  # once a 200 has gone out, an error only closes the socket
        raise StreamAborted(resp) from err  # the scheduler counts it failed; the middleware returns resp
    await start()
    for chunk in frames.tool_calls(outcome, usage):  # after all text (docs/streaming.md#openai-streams)
        await resp.write(frame(chunk))
    await resp.write(frame(frames.finish(outcome.finish_reason or "stop", usage)))
    if usage:
        await resp.write(frame(frames.usage(outcome)))
    await resp.write(DONE)
    await resp.write_eof()
    return resp


# ---- framing -------------------------------------------------------------------

_SLOT = "\x00colibri-text\x00"  # a placeholder no chunk's constant part holds
_SLOT_JSON = json.dumps(_SLOT, ensure_ascii=False).encode("utf-8")


class Frames:
    """The JSON objects of one reply, chat or legacy completion."""

    object_whole = object_chunk = prefix = ""

    def __init__(self, served: ServedModel, options: Options):
        self.id = self.prefix + secrets.token_hex(16)
        self.served = served
        self.options = options
        self.model = reply_model(served, options)
        self.created = int(time.time())
        self._framed: dict[tuple[str, bool], tuple[bytes, bytes]] = {}  # delta_frame's prefix, suffix

    def head(self, obj: str) -> dict:
        return {"id": self.id, "object": obj, "created": self.created, "model": self.model}

    def text_slot(self, d: Delta) -> tuple[str, str] | None:
        """(the Delta field, the text) of a delta whose chunk differs from another such only by
        that one string (no logprobs); None for any other."""
        return None

    def delta_frame(self, d: Delta, usage: bool) -> bytes:
        """frame(self.delta(d, usage)), the same bytes; for the common token (text_slot) from the
        chunk's serialised prefix and suffix, made once per stream: one encoding of a string."""
        slot = self.text_slot(d)
        if slot is None:
            return frame(self.delta(d, usage))
        field, text = slot
        parts = self._framed.get((field, usage))
        if parts is None:
            whole = frame(self.delta(Delta(**{field: _SLOT}), usage))
            pre, post = whole.split(_SLOT_JSON)  # the placeholder's one occurrence
            parts = self._framed[(field, usage)] = (pre, post)
        return parts[0] + to_json(text).encode("utf-8") + parts[1]

    def chunk(self, choice: dict, usage: bool) -> dict:
        reason = choice.pop("finish_reason", None)
        logprobs = choice.pop("logprobs", None)  # only an upstream engine's, per chunk as it sent them
        c = {**self.head(self.object_chunk),
             "choices": [{"index": 0, **choice, "logprobs": logprobs, "finish_reason": reason}]}
        if usage:
            c["usage"] = None  # while include_usage is on, every chunk carries usage: null
        return c

    def usage(self, outcome: Outcome) -> dict:
        return {**self.head(self.object_chunk), "choices": [], "usage": outcome.usage}

    def opening(self, usage: bool) -> list[dict]:
        return []

    def tool_calls(self, outcome: Outcome, usage: bool) -> list[dict]:
        return []

    def entries(self, outcome: Outcome) -> list[Entry]:
        """The generated tokens behind the returned text, checked against the engine's count."""
        if outcome.engine_generated is not None and outcome.engine_generated != len(outcome.tokens):
            raise ApiError(500, "engine_logprob_records_incomplete",
                           f"the engine generated {outcome.engine_generated} tokens but sent records for "
                           f"{len(outcome.tokens)}")
        return described_tokens(outcome.records, "".join(outcome.raw), outcome.answer or Spans(),
                                self.options.top_logprobs, self.served.engine.n_vocab)


class ChatFrames(Frames):
    object_whole, object_chunk, prefix = "chat.completion", "chat.completion.chunk", "chatcmpl-"

    def __init__(self, served: ServedModel, options: Options, tools_active: bool = False):
        super().__init__(served, options)
        self.tools_active = tools_active

    def opening(self, usage: bool) -> list[dict]:
        return [self.chunk({"delta": {"role": "assistant", "content": ""}}, usage)]

    def delta(self, d: Delta, usage: bool) -> dict:
        body = {}
        if d.reasoning:
            body["reasoning_content"] = d.reasoning
        if d.content:
            body["content"] = d.content
        return self.chunk({"delta": body, "logprobs": getattr(d, "logprobs", None)}, usage)

    def keepalive(self, usage: bool) -> dict:
        return self.chunk({"delta": {"reasoning_content": ""}}, usage)

    def text_slot(self, d: Delta) -> tuple[str, str] | None:
        if getattr(d, "logprobs", None) is not None or bool(d.reasoning) == bool(d.content):
            return None
        return ("content", d.content) if d.content else ("reasoning", d.reasoning)

    def tool_calls(self, outcome: Outcome, usage: bool) -> list[dict]:
        return [self.chunk({"delta": {"tool_calls": [{"index": i, **call}]}}, usage)
                for i, call in enumerate(outcome.tool_calls)]

    def finish(self, reason: str, usage: bool) -> dict:
        return self.chunk({"delta": {}, "finish_reason": reason}, usage)

    def whole(self, outcome: Outcome) -> dict:
        content = outcome.text
        message = {"role": "assistant", "content": None if self.tools_active and not content else content,
                   "refusal": None}
        if outcome.reasoning:
            message["reasoning_content"] = "".join(outcome.reasoning)
        if outcome.tool_calls:
            message["tool_calls"] = outcome.tool_calls
        logprobs = None
        if self.options.logprobs and outcome.logprobs is not None:  # an upstream engine's, as it sent them
            logprobs = outcome.logprobs
        elif self.options.logprobs:
            logprobs = chat_logprobs(self.entries(outcome), self.served.token_text, self.served.token_bytes)
        return {**self.head(self.object_whole),
                "choices": [{"index": 0, "message": message, "logprobs": logprobs,
                             "finish_reason": outcome.finish_reason or "stop"}],
                "usage": outcome.usage}


class CompletionFrames(Frames):
    object_whole = object_chunk = "text_completion"
    prefix = "cmpl-"

    def __init__(self, served: ServedModel, options: Options, prompt: str = "", tokens: list[int] | None = None):
        super().__init__(served, options)
        self.prompt = prompt
        self.tokens = tokens or []

    def delta(self, d: Delta, usage: bool) -> dict:
        return self.chunk({"text": d.reasoning + d.content, "logprobs": getattr(d, "logprobs", None)}, usage)

    def keepalive(self, usage: bool) -> dict:
        return self.chunk({"text": ""}, usage)

    def text_slot(self, d: Delta) -> tuple[str, str] | None:
        if getattr(d, "logprobs", None) is not None:
            return None
        return "content", d.reasoning + d.content

    def finish(self, reason: str, usage: bool) -> dict:
        return self.chunk({"text": "", "finish_reason": reason}, usage)

    def whole(self, outcome: Outcome) -> dict:
        text = "".join(outcome.reasoning) + outcome.text
        logprobs = None
        if self.options.logprobs and outcome.logprobs is not None:  # an upstream engine's, as it sent them
            logprobs = outcome.logprobs
        elif self.options.logprobs:
            rows = []
            if self.options.echo:
                rows = prompt_rows(outcome.readout, len(self.tokens), self.options.top_logprobs,
                                   self.served.engine.n_vocab, self.echo_texts())
            logprobs = legacy_logprobs(rows, self.entries(outcome), self.served.token_text)
            text = "".join(logprobs["tokens"])  # the echoed prompt, then the completion
        return {**self.head(self.object_whole),
                "choices": [{"index": 0, "text": text, "logprobs": logprobs,
                             "finish_reason": outcome.finish_reason or "stop"}],
                "usage": outcome.usage}

    def echo_texts(self) -> list[str]:
        """Each prompt token's characters: control tokens the prompt spells keep their text,
        the BOS the tokenizer added has none; a character split over tokens goes to its last."""
        engine = self.served.engine
        detok = Detokenizer()
        texts = []
        for i, tok in enumerate(self.tokens):
            added_bos = i == 0 and tok == engine.bos and not self.prompt.startswith(
                engine.token_bytes(tok, special=True).decode("utf-8", "replace"))
            texts.append("" if added_bos else detok.feed(engine.token_bytes(tok, special=True)))
        if texts:
            texts[-1] += detok.flush()
        return texts
