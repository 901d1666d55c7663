"""The served model and one generation on it: token ids in, text deltas out, with the
stop sequences, implicit turn-marker stops and the reasoning split applied.

Nothing here knows HTTP: the routes (openai.py) decide the framing.
"""
from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any, AsyncIterator

from colibri.api.errors import ApiError
from colibri.api.logprobs import TokenRecord
from colibri.api.protocol import Message, Options
from colibri.chat.builtin_templates import TURN_OPENERS
from colibri.chat.prompt import ChatFormat
from colibri.chat.reasoning import ReasoningSplitter
from colibri.chat.spans import Spans
from colibri.chat.stops import StopFilter
from colibri.chat.tools import ToolFormat, strict_problems
from colibri.chat.turns import END, turn_marker
from colibri.detok import Detokenizer
from colibri.engine_thread import Finish, GenRequest, SlotBusy
from colibri.scheduler import Lease, Observer

FINISH_REASONS = {"stop": "stop", "length": "length", "context": "length"}
SLOT_BUSY_RETRIES = 200
SLOT_BUSY_WAIT_S = 0.01


@dataclass
class Delta:
    content: str = ""
    reasoning: str = ""


@dataclass
class ToolSetup:
    """What a chat request's tools ask of one generation."""

    format: ToolFormat
    schemas: dict[str, dict]
    strict: bool = False
    forced: str | None = None  # the one function tool_choice names
    opened: str = ""  # the call opening the prompt ends with: the reply is the rest of that call


@dataclass
class Outcome:
    """How a generation ended, filled in as it runs."""

    finish_reason: str | None = None
    prompt_tokens: int = 0
    cached_tokens: int = 0  # prompt tokens the slot's KV cache already held (prefix reuse)
    tokens: list[int] = field(default_factory=list)
    content: list[str] = field(default_factory=list)
    reasoning: list[str] = field(default_factory=list)
    records: list[TokenRecord] = field(default_factory=list)  # per generated token, for log-probs
    raw: list[str] = field(default_factory=list)  # the generated text before any filter
    answer: Spans | None = None  # which raw characters reached `content`
    tool_calls: list[dict] = field(default_factory=list)  # OpenAI shape, after all text
    readout: list | None = None  # the prompt read-out (echo)
    engine_generated: int | None = None  # tokens the engine says it generated (when it ran to its end)
    timings: dict = field(default_factory=dict)

    @property
    def text(self) -> str:
        return "".join(self.content)

    @property
    def usage(self) -> dict:
        return {"prompt_tokens": self.prompt_tokens, "completion_tokens": len(self.tokens),
                "total_tokens": self.prompt_tokens + len(self.tokens),
                "prompt_tokens_details": {"cached_tokens": self.cached_tokens}}


def context_exceeded(n_prompt: int, n_ctx: int, param: str) -> ApiError:
    return ApiError(400, "context_length_exceeded",
                    f"This model's maximum context length is {n_ctx} tokens, however your {param} resulted in "
                    f"{n_prompt} tokens, which leaves no room to generate. Please shorten the {param}.",
                    param=param)


class ServedModel:
    """One loaded model: its engine thread, its chat format, the ids that matter to replies."""

    def __init__(self, model_id: str, engine: Any, engine_thread: Any, chat_format: ChatFormat, arch: str):
        self.model_id = model_id
        self.engine = engine
        self.engine_thread = engine_thread
        self.chat_format = chat_format
        self.arch = arch
        self.created = int(time.time())
        self.turn_opener_ids = self._single_special_tokens(TURN_OPENERS)
        self._bytes: dict[int, bytes] = {}

    def token_bytes(self, token: int) -> bytes:
        """A token's bytes (cached: the vocabulary does not change)."""
        data = self._bytes.get(token)
        if data is None:
            data = self._bytes[token] = self.engine.token_bytes(token)
        return data

    def token_text(self, token: int) -> str:
        return self.token_bytes(token).decode("utf-8", "replace")

    @property
    def n_ctx(self) -> int:
        return self.engine_thread.n_ctx

    @property
    def n_slots(self) -> int:
        return self.engine_thread.n_slots

    def _single_special_tokens(self, texts: tuple[str, ...]) -> frozenset[int]:
        ids = set()
        for text in texts:
            special = self.engine.tokenize(text, add_bos=False, special=True)
            if len(special) == 1 and special != self.engine.tokenize(text, add_bos=False, special=False):
                ids.add(special[0])
        return frozenset(ids)

    # ---- prompts ---------------------------------------------------------------

    def tokenize_chat(self, text: str, messages: list[Message]) -> list[int]:
        """The rendered prompt's tokens: template markers as control tokens, while control-token
        text that a message itself contains stays plain text (no injected turns)."""
        bos = self.chat_format.template.bos_token if self.chat_format.template else ""
        add_bos = False if bos and text.startswith(bos) else None
        risky = [m.content.strip() for m in messages if m.content.strip() and self._has_special(m.content)]
        if not risky:
            return self.engine.tokenize(text, add_bos=add_bos, special=True)
        tokens = self.engine.tokenize("", add_bos=add_bos, special=False)
        cursor = 0
        for plain in risky:
            i = text.find(plain, cursor)
            if i < 0:
                continue
            tokens += self.engine.tokenize(text[cursor:i], add_bos=False, special=True)
            tokens += self.engine.tokenize(plain, add_bos=False, special=False)
            cursor = i + len(plain)
        return tokens + self.engine.tokenize(text[cursor:], add_bos=False, special=True)

    def _has_special(self, text: str) -> bool:
        return self.engine.tokenize(text, add_bos=False, special=True) != self.engine.tokenize(
            text, add_bos=False, special=False)

    def tokenize_completion(self, prompt: str) -> list[int]:
        # as llama.cpp's server: the model's BOS, and control tokens spelled in the prompt are parsed
        return self.engine.tokenize(prompt, add_bos=None, special=True)

    def check_fits(self, tokens: list[int], param: str) -> None:
        if len(tokens) >= self.n_ctx:
            raise context_exceeded(len(tokens), self.n_ctx, param)

    # ---- generation -------------------------------------------------------------

    async def generate(self, lease: Lease, prompt: list[int], options: Options, outcome: Outcome, *,
                       in_reasoning: bool = False, reasoning: bool = False, tools: ToolSetup | None = None,
                       observer: Observer | None = None) -> AsyncIterator[Delta]:
        """Deltas of text as they become final; `outcome` says how it ended (and, with tools,
        holds the calls, which come after all text). Leaving early (client gone) cancels the
        engine's work on this slot."""
        outcome.prompt_tokens = len(prompt)
        outcome.cached_tokens = 0 if options.echo else min(lease.cached, len(prompt))  # until the engine says
        budget = min(options.max_tokens, self.n_ctx - len(prompt))  # a ceiling, clamped to what the context holds
        req = GenRequest(slot=lease.slot, prompt=list(prompt), max_tokens=budget, temperature=options.temperature,
                         top_p=options.top_p, seed=options.seed, top_logprobs=options.top_logprobs, echo=options.echo)
        detok = Detokenizer(self.token_bytes)
        stops = StopFilter(options.stop, ignore_leading=options.ignore_leading_stop)
        opened = tools.opened if tools else ""
        split = ReasoningSplitter(in_reasoning) if reasoning and not opened else None
        section = StopFilter([tools.format.opener]) if tools else None  # the answer ends where calls begin
        if opened:  # a forced call: the reply starts inside the tool section
            section.assume_matched(tools.format.opener, opened[len(tools.format.opener):])

        def stage(text: str) -> Delta:
            said, answer = split.feed(text) if split else ("", text)
            return Delta(content=section.feed(answer) if section else answer, reasoning=said)

        shown = bool(opened)  # some non-whitespace text went out: a turn marker now ends the reply
        ended = False  # the reply is over; the engine's Finish (reuse, read-out) is still read
        t0 = time.monotonic()
        first_output = None
        raw_len = 0
        events = self.events(req)
        try:
            async for ev in events:
                if isinstance(ev, Finish):  # always the last event
                    self._finish(ev, outcome, counted=not ended)
                    break
                if ended:
                    continue
                outcome.tokens.append(ev.token)
                marker = turn_marker(ev.token, self.turn_opener_ids, shown)
                if marker is not None:
                    outcome.records.append(TokenRecord(ev.token, ev.logprob, ev.top, b"", raw_len, raw_len))
                    if marker == END:
                        outcome.finish_reason = "stop"
                        ended = True
                        self.engine_thread.cancel(req.slot)  # read on to its Finish: reuse, read-out
                    continue  # a leading marker is ignored (serve-api spec)
                data = self.token_bytes(ev.token)
                raw = detok.feed(data)
                outcome.records.append(TokenRecord(ev.token, ev.logprob, ev.top, data, raw_len, raw_len + len(raw)))
                outcome.raw.append(raw)
                raw_len += len(raw)
                if raw and first_output is None:
                    first_output = time.monotonic() - t0
                    if observer:
                        observer.observe("first_output", first_output)
                text = stops.feed(raw)
                if text:
                    shown = shown or bool(text.strip())
                    delta = stage(text)
                    if delta.content or delta.reasoning:
                        yield _record(outcome, delta)
                if stops.matched is not None:
                    outcome.finish_reason = "stop"
                    ended = True
                    self.engine_thread.cancel(req.slot)  # read on to its Finish: reuse, read-out
            tail = detok.flush()  # a dangling partial character: U+FFFD, the last token's text
            if tail and outcome.records:
                outcome.records[-1].end += len(tail)
                outcome.raw.append(tail)
            delta = stage(stops.feed(tail) + stops.flush())
            if split:
                said, answer = split.flush()
                delta = Delta(content=delta.content + (section.feed(answer) if section else answer),
                              reasoning=delta.reasoning + said)
            if section:
                delta.content += section.flush()
            if delta.content or delta.reasoning:
                yield _record(outcome, delta)
            answer = split.answer.through(stops.kept) if split else stops.kept
            outcome.answer = section.kept.through(answer) if section else answer
            if section and section.matched is not None:
                calls = self._tool_calls(tools, section, outcome)
                if calls is None:  # nothing parsed as a call: the section was text after all
                    outcome.answer = answer
                    yield _record(outcome, Delta(content=section.matched + section.after))
        finally:
            await events.aclose()  # a stop match or a gone client ends the slot's work now, not at GC
            if observer:
                observer.observe("engine_call", time.monotonic() - t0)
            lease.tokens = list(prompt) + outcome.tokens

    @staticmethod
    def _tool_calls(tools: ToolSetup, section: StopFilter, outcome: Outcome) -> list[dict] | None:
        """The calls of the tool section, in OpenAI's shape; None when it holds none."""
        parsed = tools.format.parse(section.after, tools.schemas)
        if tools.strict:
            problems = strict_problems(parsed, tools.schemas, cut_off=outcome.finish_reason == "length")
            if problems:
                raise ApiError(502, "invalid_model_tool_call", "the model's tool call cannot be executed: "
                                                               + "; ".join(problems))
        named = [c for c in parsed.calls if c.name]
        if not named:
            return None
        outcome.tool_calls = [{"id": tools.format.call_id(), "type": "function",
                               "function": {"name": c.name, "arguments": c.arguments_json()}} for c in named]
        outcome.finish_reason = "tool_calls"
        return outcome.tool_calls

    async def events(self, req: Any) -> AsyncIterator[Any]:
        """The engine thread's events for req. A slot freed a moment ago may still be winding
        down its cancelled generation (SlotBusy): wait for it briefly rather than fail."""
        for attempt in range(SLOT_BUSY_RETRIES + 1):
            events = self.engine_thread.generate(req)
            try:
                first = await events.__anext__()
            except StopAsyncIteration:
                return
            except Exception as exc:
                await events.aclose()
                if isinstance(exc, SlotBusy) and attempt < SLOT_BUSY_RETRIES:
                    await asyncio.sleep(SLOT_BUSY_WAIT_S)
                    continue
                if getattr(exc, "code", None) == "too_long":  # the engine's own length check
                    raise context_exceeded(len(req.prompt), self.n_ctx, "prompt") from exc
                raise
            try:
                yield first
                async for ev in events:
                    yield ev
            finally:
                await events.aclose()  # leaving early cancels the slot's generation
            return

    @staticmethod
    def _finish(ev: Finish, outcome: Outcome, counted: bool) -> None:
        outcome.cached_tokens = ev.n_reused
        outcome.readout = ev.prompt_readout
        outcome.timings = ev.timings
        if not counted:
            return  # the reply already ended (a stop matched) and has its finish reason
        outcome.engine_generated = ev.n_generated
        if ev.reason in FINISH_REASONS:
            outcome.finish_reason = FINISH_REASONS[ev.reason]
        elif ev.reason == "cancelled":
            raise ApiError(503, "engine_unavailable", "the engine stopped this generation (shutting down)")
        else:
            raise ApiError(500, "engine_error", f"the engine failed: {ev.error or ev.reason}")


def _record(outcome: Outcome, delta: Delta) -> Delta:
    if delta.content:
        outcome.content.append(delta.content)
    if delta.reasoning:
        outcome.reasoning.append(delta.reasoning)
    return delta
