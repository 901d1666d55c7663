"""The engine behind `coli serve --upstream URL`: another server's OpenAI-compatible API
(vLLM, SGLang, llama.cpp's server, llama-cpp-python's, another colibri) instead of the
in-process C engine. UpstreamCore is the second implementation of the serving core's
interface (colibri.serving.backend.Backend): the routes prepare, run and score through
it without knowing which one serves.

    upstreams = Upstreams(["http://gpu-box:8000"], key=None, slots=4, session=aiohttp.ClientSession())
    await upstreams.probe_all()                        # each one's state and model ids
    core = UpstreamCore(upstreams, scheduler, observer)
    prepared = core.prepare_chat(req)                  # the body the upstream is sent (no tokens here)
    async with core.run(prepared) as run:              # admission: --upstream-slots per upstream
        async for delta in run.deltas: ...             # the upstream's chunks, as they arrive

Admission is colibri's own Scheduler with `slots` per upstream: slot s belongs to
upstream s // slots, and only the slots of a healthy upstream are granted. A
conversation is kept on the upstream that holds its prefix by the scheduler's
slot-affinity rule (half the prompt cached), fed with chained hashes of 32-character
pieces of the conversation instead of token ids.

An upstream's HTTP answer, 4xx or 5xx included, is that request's: it goes back to the
client and never takes the upstream out. Only the upstream's own failures do (a refused or
reset connection, silence past --upstream-timeout, a stream cut mid-way, a failed probe),
through its circuit breaker (colibri.serving.breaker). A request that fails before its first
byte that way, or is answered 502/503/504 (the upstream cannot serve now), is retried once on
another healthy upstream; a failure after it ends the reply with UpstreamFailed (the stream
gets its error event, then closes).
"""
from __future__ import annotations

import asyncio
import json
import logging
import time
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import AsyncIterator

import aiohttp

from colibri.chat.messages import Message
from colibri.errors import NotSupported, Unavailable, UpstreamFailed
from colibri.serving.breaker import HALF_OPEN, Breaker
from colibri.serving.core import Run
from colibri.serving.generation import Delta, Outcome
from colibri.serving.requests import ChatRequest, CompletionRequest, Options
from colibri.serving.scheduler import Lease, Observer, Scheduler
from colibri.serving.systemone import Scored, SystemOneRequest, answer, prompts, softmax
from colibri.serving.upstream_logprobs import echoed_logprobs, prompt_logprobs

log = logging.getLogger(__name__)

PROBE_S = 2.0  # seconds between health probes
PROBE_TIMEOUT_S = 3.0
FAILURES = 3  # failures in a row (requests, or probes) that open an upstream's breaker
TIMEOUT_S = 300.0  # seconds an upstream may send nothing (before its reply, or mid-stream) before it has failed
CONNECT_TIMEOUT_S = 5.0
RETRIED_STATUSES = (502, 503, 504)  # answers that say "not now, not here": tried once elsewhere
LOST_BEFORE_OUTPUT = ("upstream_stream_broken", "upstream_timeout")  # a stream lost before its first piece: likewise
CHUNK_CHARS = 32  # a prompt is hashed in pieces this long for affinity: its "tokens" for the scheduler's rule


@dataclass
class Upstream:
    """One engine behind the gateway, and what the gateway has seen of it."""

    url: str  # the base, without /v1
    index: int
    key: str | None = None
    breaker: Breaker = field(default_factory=Breaker)
    models: list[str] = field(default_factory=list)
    n_ctx: int = 0  # its max_model_len / context_length when it says, else 0
    last_error: str | None = None
    requests: int = 0
    errors: int = 0
    in_flight: int = 0
    colibri: bool = False  # another colibri: its dashboard feeds can be relayed
    health_path: str = "/health"  # what the probe GETs once the model ids are known; /v1/models where it 404s
    alias: str | None = None  # the one name clients call its model by (`--upstream URL#ALIAS`, else --model-id)
    scoring: str | None = None  # how System One's prompt log-probs are read here: "echo", "prompt_logprobs"

    @property
    def healthy(self) -> bool:
        """Whether requests may go to it (its breaker closed, or half-open: on trial)."""
        return self.breaker.admits

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.key}"} if self.key else {}

    @property
    def model(self) -> str | None:
        return self.models[0] if self.models else None

    @property
    def names(self) -> list[str]:
        """The model names a request may give to be served here: its alias, else the ids it lists."""
        return [self.alias] if self.alias else self.models

    def serves(self, name: str | None) -> bool:
        return name in self.names

    def snapshot(self) -> dict:
        return {"url": self.url, "state": "up" if self.healthy else "down", "models": self.models, "alias": self.alias,
                "in_flight": self.in_flight, "requests": self.requests, "errors": self.errors,
                "last_error": self.last_error, "colibri": self.colibri, "breaker": self.breaker.snapshot()}


def base_url(url: str) -> str:
    url = url.rstrip("/")
    return url[:-3] if url.endswith("/v1") else url


def split_alias(spec: str) -> tuple[str, str | None]:
    """`http://gpu-a:8000#qwen` -> the URL and the name its model is served under (None: its own ids)."""
    url, _, alias = spec.partition("#")
    return url, alias or None


class Upstreams:
    """The engines behind the gateway: their health (probed), their share of the slots."""

    def __init__(self, urls: list[str], key: str | None, slots: int, session: aiohttp.ClientSession,
                 series: "UpstreamSeries | None" = None, probe_s: float = PROBE_S, alias: str | None = None,
                 failures: int = FAILURES, timeout_s: float = TIMEOUT_S):
        """urls: each `URL` or `URL#ALIAS`; alias (--model-id): the name of every upstream's model without one;
        failures: in a row, to open a breaker; timeout_s: the silence after which a request has failed."""
        self.all = []
        for i, spec in enumerate(urls):
            url, own = split_alias(spec)
            self.all.append(Upstream(base_url(url), i, key, Breaker(failures, probe_s), alias=own or alias))
        self.slots = slots
        self.session = session
        self.series = series
        self.probe_s = probe_s
        self.timeout_s = timeout_s
        self.on_change: list = []  # called with no argument when an upstream goes up or down
        self._task: asyncio.Task | None = None

    @property
    def n_slots(self) -> int:
        return self.slots * len(self.all)

    def of_slot(self, slot: int) -> Upstream:
        return self.all[slot // self.slots]

    def usable(self, slot: int) -> bool:
        """Whether the scheduler may grant this slot: its upstream's breaker admits, one request at a time while
        it is on trial (half-open: only its first slot)."""
        up = self.of_slot(slot)
        if up.breaker.state == HALF_OPEN:
            return slot == up.index * self.slots
        return up.healthy

    def serving(self, model: str | None) -> list[Upstream]:
        """The upstreams a request naming `model` may go to (all of them when none serves it by that name:
        the routes have already refused a name no upstream serves, so that is an unprobed one's default)."""
        named = [u for u in self.all if u.serves(model)]
        return named or self.all

    def slots_of(self, ups: list[Upstream]) -> frozenset[int] | None:
        """Their slots for the scheduler (None: every slot)."""
        if len(ups) == len(self.all):
            return None
        return frozenset(s for u in ups for s in range(u.index * self.slots, (u.index + 1) * self.slots))

    def failed(self, up: Upstream, kind: str, error: str) -> None:
        """A failure of the upstream itself (colibri.serving.breaker.KINDS): counted, and on its breaker."""
        up.errors += 1
        up.last_error = error
        if self.series:
            self.series.errors.labels(up.url, kind).inc()
        self._changed(up, up.breaker.failure(kind, error))

    def answered(self, up: Upstream, status: int = 200, probe: bool = False) -> None:
        """The upstream answered (a reply read to its end, whatever its status; a probe that passed): it works.
        A 5xx is counted as an error of kind `status`, never on the breaker: it is the request's."""
        if status >= 500:
            up.errors += 1
            if self.series:
                self.series.errors.labels(up.url, "status").inc()
        self._changed(up, up.breaker.success(probe))

    def _changed(self, up: Upstream, changed: bool) -> None:
        if not changed:
            return
        b = up.breaker
        log.warning("upstream %s is %s (breaker %s)%s", up.url, "up" if up.healthy else "down", b.state,
                    f": {b.reason}" if b.reason else "")
        for callback in self.on_change:
            callback()

    async def probe(self, up: Upstream) -> None:
        """When its breaker says a probe is due: GET /v1/models (its model ids) until they are known, then
        GET /health (vLLM's, SGLang's, llama-server's, colibri's) where there is one."""
        if not up.breaker.probe_due():
            return
        timeout = aiohttp.ClientTimeout(total=PROBE_TIMEOUT_S)
        try:
            if up.models and up.health_path != "/v1/models":
                async with self.session.get(up.url + up.health_path, headers=up.headers, timeout=timeout) as resp:
                    if resp.status == 200:
                        self.answered(up, probe=True)
                        return
                    if resp.status not in (404, 405):
                        raise UpstreamFailed("upstream_unhealthy", f"GET {up.health_path} answered {resp.status}")
                    up.health_path = "/v1/models"
            async with self.session.get(up.url + "/v1/models", headers=up.headers,
                                        timeout=timeout) as resp:
                if resp.status != 200:
                    raise UpstreamFailed("upstream_unhealthy", f"GET /v1/models answered {resp.status}")
                body = await resp.json(content_type=None)
            cards = [c for c in body.get("data") or [] if isinstance(c, dict) and c.get("id")]
            up.models = [str(c["id"]) for c in cards] or up.models
            first = cards[0] if cards else {}
            up.n_ctx = int(first.get("max_model_len") or first.get("context_length") or 0)
            up.colibri = first.get("owned_by") == "colibri"
            self.answered(up, probe=True)
        except asyncio.TimeoutError:
            # busy (llama-cpp-python queues a probe behind a generation): its requests' deadline judges it
            if up.in_flight:
                up.breaker.postpone()
                return
            self.failed(up, "probe", f"no answer to its health probe within {PROBE_TIMEOUT_S:g} s")
        except (aiohttp.ClientError, OSError, ValueError, AttributeError, UpstreamFailed) as exc:  # AttributeError:
            self.failed(up, "probe", str(exc) or type(exc).__name__)  # a /v1/models answer that is not a dict

    async def probe_all(self) -> None:
        await asyncio.gather(*(self.probe(u) for u in self.all))

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._probe_forever())

    async def _probe_forever(self) -> None:
        while True:  # each upstream when its breaker's schedule says (probe_s; longer while open)
            await asyncio.sleep(min([self.probe_s] + [u.breaker.next_probe_in_s() for u in self.all]) + 0.01)
            await self.probe_all()

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
        await self.session.close()


class UpstreamFormat:
    """The chat format as the gateway sees it: the upstream's own template decides everything."""

    has_reasoning = True  # whether it reasons is the upstream's business; its reasoning is passed on
    reasoning_tags = None  # it comes split already (reasoning_content)
    tool_format = True  # likewise its tool calls
    template = None


class UpstreamModel:
    """What the routes read of the model (model_key): its id and sizes, no engine."""

    arch = "upstream"
    routes_by_model = True  # a request goes to the upstreams serving the model it names
    plan = None
    n_ctx_train = 0
    n_params = 0
    moe_layers: list[int] = []
    chat_format = UpstreamFormat()

    def __init__(self, upstreams: Upstreams, model_id: str = ""):
        self.upstreams = upstreams
        self._model_id = model_id
        self.created = int(time.time())

    @property
    def model_id(self) -> str:
        first = next((u.names[0] for u in self.upstreams.all if u.names), None)
        return first or self._model_id or "upstream"

    @property
    def n_ctx(self) -> int:
        return min((u.n_ctx for u in self.upstreams.all if u.n_ctx), default=0)

    @property
    def n_slots(self) -> int:
        return self.upstreams.n_slots

    def check_fits(self, tokens: list[int], param: str) -> None:
        """The upstream counts its own tokens and refuses a prompt too long itself."""


@dataclass
class UpstreamPrepared:
    """A request made ready for an upstream: the path and body it is sent (the model filled in per upstream)."""

    path: str
    body: dict
    options: Options
    affinity: list[int]  # chained hashes of 32-character pieces: the scheduler's prefix rule runs on these
    tools: bool | None = None  # truthy when the request declares tools (the frames' tools_active)
    tokens: list[int] = field(default_factory=list)  # not known at the gateway


def openai_message(m: Message) -> dict:
    out: dict = {"role": m.role, "content": m.content}
    if m.tool_calls:
        out["tool_calls"] = m.tool_calls
        out["content"] = m.content or None
    if m.tool_call_id:
        out["tool_call_id"] = m.tool_call_id
    if m.name:
        out["name"] = m.name
    if m.reasoning_content:
        out["reasoning_content"] = m.reasoning_content
    return out


def pieces_of(text: str) -> list[str]:
    return [text[i:i + CHUNK_CHARS] for i in range(0, len(text), CHUNK_CHARS)]


def chained(pieces: list) -> list[int]:
    """A hash per piece of everything up to it: two requests share a prefix of these exactly as far as
    they share their leading pieces."""
    out, h = [], 0
    for piece in pieces:
        h = hash((h, piece))
        out.append(h)
    return out


def sampling(o: Options, stream: bool) -> dict:
    body: dict = {"max_tokens": o.max_tokens, "temperature": o.temperature, "top_p": o.top_p, "stream": stream}
    if o.top_k:
        body["top_k"] = o.top_k
    if o.seed is not None:
        body["seed"] = o.seed
    if o.ignore_eos:  # llama-server's own field
        body["ignore_eos"] = True
    if o.stop:
        body["stop"] = o.stop
    if stream:  # usage for every reply (Anthropic's, the Responses API's), not just when the client asks
        body["stream_options"] = {"include_usage": True}
    return body


def chat_body(req: ChatRequest) -> dict:
    body = {"messages": [openai_message(m) for m in req.messages], **sampling(req.options, req.options.stream)}
    if req.options.logprobs:
        body["logprobs"] = True
        if req.options.top_logprobs:
            body["top_logprobs"] = req.options.top_logprobs
    tools = req.tools
    if tools.declared and tools.active:
        body["tools"] = tools.declared
        body["tool_choice"] = ({"type": "function", "function": {"name": tools.choice.name}}
                               if tools.choice.mode == "function" else tools.choice.mode)
    return body


def thinking_fields(req: ChatRequest) -> dict:
    """What the request asks of the reasoning mode, as vLLM, SGLang and llama-server read it
    (chat_template_kwargs.enable_thinking; reasoning_effort); `for_upstream` respells it for a colibri."""
    out: dict = {}
    if req.thinking.enable is not None:
        out["chat_template_kwargs"] = {"enable_thinking": req.thinking.enable}
    if req.thinking.effort is not None:
        out["reasoning_effort"] = req.thinking.effort
    return out


def for_upstream(up: "Upstream", body: dict, model: str | None = None) -> dict:
    """The body as this upstream takes it: the id asked for where it lists that one, else its own first id
    (the name asked for may be an alias); colibri reads enable_thinking at the top level."""
    out = {**body, "model": model if model in up.models else up.model or body.get("model")}
    if up.colibri and "chat_template_kwargs" in out:
        out["enable_thinking"] = out.pop("chat_template_kwargs")["enable_thinking"]
    return out


def completion_body(req: CompletionRequest) -> dict:
    body = {"prompt": req.prompt, **sampling(req.options, req.options.stream)}
    if req.options.logprobs:
        body["logprobs"] = req.options.top_logprobs
    if req.options.echo:
        body["echo"] = True
    return body


class UpstreamCore:
    """The serving core's interface over upstream engines (colibri.serving.backend.Backend)."""

    def __init__(self, upstreams: Upstreams, scheduler: Scheduler, observer: Observer | None = None,
                 served: UpstreamModel | None = None):
        self.upstreams = upstreams
        self.scheduler = scheduler
        self.observer = observer
        self.served = served or UpstreamModel(upstreams)
        self.turns = Turns()
        scheduler.usable = upstreams.usable
        upstreams.on_change.append(scheduler.regrant)

    # ---- prepare -----------------------------------------------------------------

    def prepare_chat(self, req: ChatRequest, *, thinking_is_a_hint: bool = False,
                     check_fits: bool = True) -> UpstreamPrepared:
        text = "".join(f"\x00{m.role}\x00{m.content}\x00{json.dumps(m.tool_calls)}" for m in req.messages)
        affinity = chained(pieces_of(text))
        body = chat_body(req)
        if not thinking_is_a_hint:  # Anthropic's `thinking` is a hint: a family without it answers without
            body.update(thinking_fields(req))
        return UpstreamPrepared("/v1/chat/completions", body, req.options, affinity,
                                tools=bool(req.tools.declared and req.tools.active) or None)

    def prepare_completion(self, req: CompletionRequest) -> UpstreamPrepared:
        return UpstreamPrepared("/v1/completions", completion_body(req), req.options, chained(pieces_of(req.prompt)))

    def count_chat(self, req: ChatRequest) -> int:
        raise NotSupported("upstream_cannot_count", "token counting is not forwarded to an upstream engine: "
                                                    "its tokenizer is not known here")

    # ---- run -----------------------------------------------------------------------

    def check_up(self, ups: list[Upstream]) -> None:
        """Refuse at once while every upstream that may serve it is down: a waiter would only wait for its
        timeout."""
        if not any(u.healthy for u in ups):
            raise Unavailable("upstream_unavailable", "no upstream engine is answering: "
                              + "; ".join(f"{u.url}: {u.breaker.reason or u.last_error}" for u in ups))

    @asynccontextmanager
    async def run(self, prepared: UpstreamPrepared) -> AsyncIterator[Run]:
        model = prepared.options.model
        ups = self.upstreams.serving(model)
        self.check_up(ups)
        async with self.scheduler.admit(prepared.options.cache_slot, prepared.affinity,
                                        self.upstreams.slots_of(ups)) as lease:
            outcome = Outcome()
            yield Run(lease, self._forward(prepared, self.upstreams.of_slot(lease.slot), outcome, lease.wait_s),
                      outcome)

    async def _open(self, up: Upstream, path: str, body: dict, model: str | None = None,
                    affinity: list[int] | None = None) -> tuple[Upstream, aiohttp.ClientResponse, Lease | None]:
        """The upstream's response, its status checked; a failure before the first byte is retried once on
        another healthy upstream serving `model`, on a slot of its own taken through the scheduler (waiting for
        one like any request; Overloaded as any request). That second lease is returned: the caller releases it
        (`self.retired`) once done with the response."""
        extra_box: list[Lease] = []
        try:
            return await self._attempts(up, path, body, model, affinity or [], extra_box)
        except BaseException:
            for extra in extra_box:
                self.retired(extra)
            raise

    async def _reopen(self, up: Upstream, prepared: UpstreamPrepared,
                      error: UpstreamFailed) -> tuple[Upstream, aiohttp.ClientResponse, Lease | None]:
        """The retry of a stream that `up` broke before anything of it went out (llama-server answers a stream's
        headers before its prefill): once, on another healthy upstream, as `_open` retries; `error` where none."""
        extra_box: list[Lease] = []
        try:
            other = await self._another(up, prepared.options.model, prepared.affinity, extra_box)
            if other is None:
                raise error
            log.info("retrying elsewhere: %s", error.message)
            return await self._attempts(other, prepared.path, prepared.body, prepared.options.model,
                                        prepared.affinity, extra_box, retries=0)
        except BaseException:
            for extra in extra_box:
                self.retired(extra)
            raise

    async def _another(self, up: Upstream, model: str | None, affinity: list[int],
                       extra_box: list) -> Upstream | None:
        """Another healthy upstream serving `model` than `up`, on a slot of its own granted by the scheduler (into
        extra_box); None when there is none."""
        others = [u for u in self.upstreams.serving(model) if u is not up and u.healthy]
        if not others:
            return None
        extra_box.append(await self.scheduler.acquire(None, affinity, self.upstreams.slots_of(others), counted=False))
        return self.upstreams.of_slot(extra_box[0].slot)

    def retired(self, extra: Lease | None) -> None:
        """Give back the retry's slot: the request it served is counted once, by its own admission."""
        if extra is not None:
            self.scheduler.release(extra, None)

    async def _attempts(self, up: Upstream, path: str, body: dict, model: str | None, affinity: list[int],
                        extra_box: list, retries: int = 1) -> tuple[Upstream, aiohttp.ClientResponse, Lease | None]:
        timeout = aiohttp.ClientTimeout(total=None, connect=CONNECT_TIMEOUT_S, sock_read=self.upstreams.timeout_s)
        for attempt in range(retries + 1):
            up.requests += 1
            up.in_flight += 1  # until the caller is done with the response
            try:
                resp = await self.upstreams.session.post(up.url + path, json=for_upstream(up, body, model),
                                                         headers=up.headers, timeout=timeout)
                if resp.status < 400:
                    return up, resp, (extra_box[0] if extra_box else None)
                status = resp.status
                error = await refusal(up, resp)
            except (aiohttp.ClientError, asyncio.TimeoutError, OSError) as exc:
                up.in_flight -= 1
                kind, error = lost(up, exc, self.upstreams.timeout_s, started=False)
                self.upstreams.failed(up, kind, error.message)
            except BaseException:
                up.in_flight -= 1
                raise
            else:
                up.in_flight -= 1
                self.upstreams.answered(up, status)  # a working upstream's answer to this request
                if status not in RETRIED_STATUSES:
                    raise error  # the request's own: another engine would answer it alike
            other = await self._another(up, model, affinity, extra_box) if attempt < retries else None
            if other is None:
                raise error
            log.info("retrying elsewhere: %s", error.message)
            up = other
        raise AssertionError("unreachable")

    async def _forward(self, prepared: UpstreamPrepared, up: Upstream, outcome: Outcome,
                       wait_s: float = 0.0) -> AsyncIterator[Delta]:
        t0 = time.monotonic()
        first = None
        series = self.upstreams.series
        up, resp, extra = await self._open(up, prepared.path, prepared.body, prepared.options.model,
                                           prepared.affinity)
        chunks = 0
        try:
            if prepared.body.get("stream"):
                while True:
                    try:
                        async for delta in self._chunks(up, resp, outcome):
                            chunks += 1
                            if first is None:
                                first = time.monotonic() - t0
                                if self.observer:
                                    self.observer.observe("first_output", first)
                                if series:
                                    series.first_byte.labels(up.url).observe(first)
                            yield delta
                        break
                    except UpstreamFailed as exc:  # the upstream lost it before anything went out: once elsewhere
                        if chunks or extra is not None or exc.code not in LOST_BEFORE_OUTPUT:
                            raise
                        again = await self._reopen(up, prepared, exc)  # raising: the finally lets go of this one
                        up.in_flight -= 1
                        resp.release()
                        up, resp, extra = again
            else:
                delta = whole(await self._reply(up, resp), outcome)
                if delta.content or delta.reasoning:
                    yield delta
        finally:
            up.in_flight -= 1
            resp.release()
            self.retired(extra)
            elapsed = time.monotonic() - t0
            if self.observer:
                self.observer.observe("engine_call", elapsed)
            if series:
                series.latency.labels(up.url).observe(elapsed)
            self.turns.add(up, wait_s, first, elapsed, chunks, outcome)

    async def _reply(self, up: Upstream, resp: aiohttp.ClientResponse) -> dict:
        """A whole (non-streamed) reply's JSON; a connection lost or silent while it is read is the upstream's
        failure, a body that is not JSON the request's."""
        try:
            reply = await resp.json(content_type=None)
        except (aiohttp.ClientError, asyncio.TimeoutError) as exc:
            kind, error = lost(up, exc, self.upstreams.timeout_s, started=True)
            self.upstreams.failed(up, kind, error.message)
            raise error from exc
        except ValueError as exc:
            self.upstreams.answered(up)
            raise UpstreamFailed("upstream_bad_reply", f"the upstream engine {up.url} answered with a body that "
                                                       f"is not JSON: {exc}") from exc
        self.upstreams.answered(up)
        return reply if isinstance(reply, dict) else {}

    async def _chunks(self, up: Upstream, resp: aiohttp.ClientResponse, outcome: Outcome) -> AsyncIterator[Delta]:
        """The upstream's SSE chunks as deltas; tool calls gathered by index into the outcome."""
        calls: dict[int, dict] = {}
        done = False
        try:
            async for line in resp.content:
                line = line.strip()
                if not line.startswith(b"data:"):
                    continue
                data = line[5:].strip()
                if data == b"[DONE]":
                    done = True
                    break
                chunk = json.loads(data)
                if chunk.get("error"):  # the upstream's own error event: the request's, the upstream works
                    err = chunk["error"]
                    self.upstreams.answered(up)
                    raise UpstreamFailed("upstream_error", f"the upstream engine {up.url} failed: "
                                                           f"{err.get('message') if isinstance(err, dict) else err}")
                take_usage(chunk.get("usage"), outcome)
                for choice in chunk.get("choices") or []:
                    delta = choice.get("delta")
                    if delta is None:  # /v1/completions
                        delta = {"content": choice.get("text") or ""}
                    for call in delta.get("tool_calls") or []:
                        merge_call(calls.setdefault(int(call.get("index") or 0), {}), call)
                    if choice.get("finish_reason"):
                        outcome.finish_reason = choice["finish_reason"]
                    piece = take_text(delta, outcome)
                    if choice.get("logprobs"):  # the chunk's own tokens' log-probs, passed on as sent
                        piece = UpstreamDelta(piece.content, piece.reasoning, choice["logprobs"])
                    if piece.content or piece.reasoning or isinstance(piece, UpstreamDelta):
                        yield piece
        except (aiohttp.ClientError, asyncio.TimeoutError) as exc:
            kind, error = lost(up, exc, self.upstreams.timeout_s, started=True)
            self.upstreams.failed(up, kind, error.message)
            raise error from exc
        except (ValueError, AttributeError) as exc:  # a chunk that is not OpenAI's JSON: the reply is broken
            self.upstreams.answered(up)
            raise UpstreamFailed("upstream_bad_reply", f"the upstream engine {up.url} sent a chunk colibri cannot "
                                                       f"read: {exc}") from exc
        if not done and outcome.finish_reason is None:
            self.upstreams.failed(up, "stream", "the stream ended without a finish")
            raise UpstreamFailed("upstream_stream_broken", f"the upstream engine {up.url} ended its stream "
                                                           "before the reply's end")
        self.upstreams.answered(up)
        outcome.tool_calls = [calls[i] for i in sorted(calls)]

    # ---- System One -----------------------------------------------------------------

    async def score(self, req: SystemOneRequest) -> Scored:
        """Each option's log-probability read from the upstream's /v1/completions with echo + logprobs."""
        plans = [(q, *prompts(req, q)) for q in req.questions]
        answers, output_tokens, longest, calls = {}, 0, 0, 0
        ups = self.upstreams.serving(self.served.model_id)  # the default model's upstreams
        self.check_up(ups)
        async with self.scheduler.admit(req.cache_slot, chained([req.prefix, req.state]),
                                        self.upstreams.slots_of(ups)) as lease:
            up = self.upstreams.of_slot(lease.slot)
            for q, question, options in plans:
                if len(options) == 1:
                    answers[q.id] = answer(q, [1.0])
                    continue
                scored = []
                for option in options:
                    scored.append(await self._option_score(up, question, option, req.normalize == "mean"))
                    calls += 1
                output_tokens += sum(n for _, n, _ in scored)
                longest = max([longest] + [p for _, _, p in scored])
                answers[q.id] = answer(q, softmax([s for s, _, _ in scored]))
            wait_s = lease.wait_s
        return Scored(answers, longest, output_tokens, wait_s, 0, 0, calls)

    async def _option_score(self, up: Upstream, question: str, option: str, mean: bool) -> tuple[float, int, int]:
        """One option's log-probability: echo + logprobs (OpenAI's legacy completions: llama-cpp-python, SGLang,
        colibri), else vLLM's prompt_logprobs; which one an upstream takes is remembered."""
        refused = []
        for how in ([up.scoring] if up.scoring else ["echo", "prompt_logprobs"]):
            body = {"prompt": option, "max_tokens": 1, "temperature": 0.0, "stream": False,
                    **({"echo": True, "logprobs": 1} if how == "echo" else {"prompt_logprobs": 0})}
            try:
                at, resp, extra = await self._open(up, "/v1/completions", body, self.served.model_id)
            except UpstreamFailed as exc:
                if exc.status >= 500:
                    raise
                refused.append(f"{how}: {exc.message}")
                continue
            try:
                reply = await self._reply(at, resp)
            finally:
                at.in_flight -= 1
                resp.release()
                self.retired(extra)
            rows = echoed_logprobs(reply, option) if how == "echo" else prompt_logprobs(reply, option)
            if rows is None:
                refused.append(f"{how}: it returned no prompt log-probs")
                continue
            at.scoring = up.scoring = how
            mine = [v for off, v in rows if off >= len(question) and v is not None]
            if not mine:
                raise cannot_score(at, "an option has no tokens of its own to score")
            total = sum(mine)
            return (total / len(mine) if mean else total), len(mine), len(rows)
        raise cannot_score(up, "; ".join(refused))


@dataclass
class UpstreamDelta(Delta):
    """A streamed piece with the upstream's log-probs for it (OpenAI's chunk `logprobs`: chat's `content`
    list, or the legacy arrays of /v1/completions); Anthropic's frames read only its text."""

    logprobs: dict | None = None


def cannot_score(up: Upstream, why: str) -> NotSupported:
    return NotSupported("upstream_cannot_score", f"System One needs the prompt's log-probs (/v1/completions with "
                                                 f"echo and logprobs) and the upstream engine {up.url} does not give "
                                                 f"them: {why}")


def lost(up: Upstream, exc: BaseException, timeout_s: float, started: bool) -> tuple[str, UpstreamFailed]:
    """The kind of failure (colibri.serving.breaker.KINDS) and the error of a request whose upstream went
    silent past the deadline (504), could not be reached, or broke its reply once `started`."""
    why = str(exc) or type(exc).__name__
    if isinstance(exc, asyncio.TimeoutError) and not isinstance(exc, aiohttp.ConnectionTimeoutError):
        where = "mid-reply" if started else "before its reply"
        return "timeout", UpstreamFailed("upstream_timeout", f"the upstream engine {up.url} sent nothing for "
                                                             f"{timeout_s:g} s {where}", 504)
    if started:
        return "stream", UpstreamFailed("upstream_stream_broken", f"the upstream engine {up.url} failed mid-reply: "
                                                                  f"{why}")
    return "connect", UpstreamFailed("upstream_unreachable", f"the upstream engine {up.url} cannot be reached: {why}")


async def refusal(up: Upstream, resp: aiohttp.ClientResponse) -> UpstreamFailed:
    """The upstream's error, named as it named it (OpenAI's error object), with its status for a 4xx."""
    raw = await resp.read()
    resp.release()
    code, message = "upstream_error", raw.decode("utf-8", "replace")[:500]
    try:
        err = json.loads(raw).get("error")
        if isinstance(err, dict):  # a code that is a number (llama-server's: the status) names nothing: its type does
            named = [v for v in (err.get("code"), err.get("type")) if isinstance(v, str) and v and not v.isdigit()]
            code = named[0] if named else code
            message = str(err.get("message") or message)
        elif isinstance(err, str):
            message = err
    except (ValueError, AttributeError):
        pass
    status = resp.status if resp.status < 500 else 502
    return UpstreamFailed(code, f"the upstream engine {up.url} answered {resp.status}: {message}", status)


def take_usage(usage: dict | None, outcome: Outcome) -> None:
    if not usage:
        return
    outcome.prompt_tokens = int(usage.get("prompt_tokens") or 0)
    outcome.generated = int(usage.get("completion_tokens") or 0)
    outcome.cached_tokens = int((usage.get("prompt_tokens_details") or {}).get("cached_tokens") or 0)


def merge_call(into: dict, part: dict) -> None:
    """One streamed piece of a tool call onto the call so far (the arguments arrive in pieces)."""
    if part.get("id"):
        into["id"] = part["id"]
    into["type"] = "function"
    fn = into.setdefault("function", {"name": "", "arguments": ""})
    piece = part.get("function") or {}
    if piece.get("name"):
        fn["name"] += piece["name"]
    if piece.get("arguments"):
        fn["arguments"] += piece["arguments"] if isinstance(piece["arguments"], str) else json.dumps(piece["arguments"])
    into.setdefault("id", "call_" + str(part.get("index") or 0))


def whole(reply: dict, outcome: Outcome) -> Delta:
    """A whole (non-streamed) reply onto the outcome."""
    take_usage(reply.get("usage"), outcome)
    choice = (reply.get("choices") or [{}])[0]
    outcome.finish_reason = choice.get("finish_reason")
    outcome.logprobs = choice.get("logprobs")
    message = choice.get("message")
    if message is None:  # /v1/completions
        message = {"content": choice.get("text") or ""}
    outcome.tool_calls = [{"id": c.get("id") or f"call_{i}", "type": "function",
                           "function": {"name": (c.get("function") or {}).get("name", ""),
                                        "arguments": (c.get("function") or {}).get("arguments") or "{}"}}
                          for i, c in enumerate(message.get("tool_calls") or [])]
    return take_text(message, outcome)


def take_text(message: dict, outcome: Outcome) -> Delta:
    """A message's (or a streamed delta's) reasoning and content onto the outcome, as a Delta."""
    said = message.get("reasoning_content") or message.get("reasoning") or ""
    text = message.get("content") or ""
    if said:
        outcome.reasoning.append(said)
    if text:
        outcome.content.append(text)
    return Delta(content=text, reasoning=said)


class Turns:
    """The last requests as the gateway timed them (the dashboard's Profiling, /profile and /events)."""

    def __init__(self, keep: int = 256):
        self.keep = keep
        self.rows: list[dict] = []
        self.seq = 0

    def add(self, up: Upstream, wait_s: float, first: float | None, wall_s: float, chunks: int,
            outcome: Outcome) -> None:
        self.seq += 1
        itl = (wall_s - first) / (chunks - 1) if first is not None and chunks > 1 else None
        self.rows.append({"id": self.seq, "t": time.time(), "upstream": up.url, "queue_wait_s": round(wait_s, 6),
                          "first_output_s": None if first is None else round(first, 6),
                          "inter_token_s": None if itl is None else round(itl, 6), "wall_s": round(wall_s, 6),
                          "chunks": chunks, "prompt_tokens": outcome.prompt_tokens,
                          "completion_tokens": outcome.completion_tokens,
                          "finish": outcome.finish_reason or "error"})
        del self.rows[:-self.keep]

    def since(self, seq: int) -> list[dict]:
        return [r for r in self.rows if r["id"] > seq]


@dataclass
class UpstreamSeries:
    """The per-upstream Prometheus series (created on the app's registry by api/metrics.py)."""

    latency: object  # Histogram colibri_upstream_request_seconds{upstream}
    first_byte: object  # Histogram colibri_upstream_first_output_seconds{upstream}
    errors: object  # Counter colibri_upstream_errors_total{upstream,kind}
