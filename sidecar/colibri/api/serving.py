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
from colibri.api.protocol import Message, Options
from colibri.chat.builtin_templates import TURN_OPENERS
from colibri.chat.prompt import ChatFormat
from colibri.chat.reasoning import ReasoningSplitter
from colibri.chat.stops import StopFilter
from colibri.chat.turns import END, SKIP, turn_marker
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
class Outcome:
    """How a generation ended, filled in as it runs."""

    finish_reason: str | None = None
    prompt_tokens: int = 0
    cached_tokens: int = 0  # prompt tokens the slot's KV cache already held (prefix reuse)
    tokens: list[int] = field(default_factory=list)
    content: list[str] = field(default_factory=list)
    reasoning: list[str] = field(default_factory=list)

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
                       in_reasoning: bool = False, reasoning: bool = False,
                       observer: Observer | None = None) -> AsyncIterator[Delta]:
        """Deltas of text as they become final; `outcome` says how it ended. Leaving early
        (client gone) cancels the engine's work on this slot."""
        outcome.prompt_tokens = len(prompt)
        budget = min(options.max_tokens, self.n_ctx - len(prompt))  # a ceiling, clamped to what the context holds
        req = GenRequest(slot=lease.slot, prompt=list(prompt), max_tokens=budget,
                                temperature=options.temperature, top_p=options.top_p, seed=options.seed)
        detok = Detokenizer(self.engine.token_bytes)
        stops = StopFilter(options.stop, ignore_leading=options.ignore_leading_stop)
        split = ReasoningSplitter(in_reasoning) if reasoning else None
        shown = False  # some non-whitespace text went out: a turn marker now ends the reply
        t0 = time.monotonic()
        first_output = None
        events = self._events(req)
        try:
            async for ev in events:
                if isinstance(ev, Finish):  # always the last event
                    self._finish(ev, outcome)
                    break
                outcome.tokens.append(ev.token)
                marker = turn_marker(ev.token, self.turn_opener_ids, shown)
                if marker == END:
                    outcome.finish_reason = "stop"
                    break
                if marker == SKIP:
                    continue  # a leading marker is ignored (serve-api spec)
                raw = detok.add(ev.token)
                if raw and first_output is None:
                    first_output = time.monotonic() - t0
                    if observer:
                        observer.observe("first_output", first_output)
                text = stops.feed(raw)
                if text:
                    shown = shown or bool(text.strip())
                    delta = _split(split, text)
                    if delta:
                        yield _record(outcome, delta)
                if stops.matched is not None:
                    outcome.finish_reason = "stop"
                    break
            tail = stops.feed(detok.flush()) + stops.flush()
            delta = _merge(_split(split, tail), _flush(split))
            if delta:
                yield _record(outcome, delta)
        finally:
            await events.aclose()  # a stop match or a gone client ends the slot's work now, not at GC
            if observer:
                observer.observe("engine_call", time.monotonic() - t0)
            lease.tokens = list(prompt) + outcome.tokens

    async def _events(self, req: Any) -> AsyncIterator[Any]:
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
    def _finish(ev: Finish, outcome: Outcome) -> None:
        outcome.cached_tokens = ev.n_reused
        if ev.reason in FINISH_REASONS:
            outcome.finish_reason = FINISH_REASONS[ev.reason]
        elif ev.reason == "cancelled":
            raise ApiError(503, "engine_unavailable", "the engine stopped this generation (shutting down)")
        else:
            raise ApiError(500, "engine_error", f"the engine failed: {ev.error or ev.reason}")


def _split(split: ReasoningSplitter | None, text: str) -> Delta | None:
    if not text:
        return None
    if split is None:
        return Delta(content=text)
    reasoning, content = split.feed(text)
    return Delta(content=content, reasoning=reasoning) if (reasoning or content) else None


def _flush(split: ReasoningSplitter | None) -> Delta | None:
    if split is None:
        return None
    reasoning, content = split.flush()
    return Delta(content=content, reasoning=reasoning) if (reasoning or content) else None


def _merge(a: Delta | None, b: Delta | None) -> Delta | None:
    if a is None or b is None:
        return a or b
    return Delta(content=a.content + b.content, reasoning=a.reasoning + b.reasoning)


def _record(outcome: Outcome, delta: Delta) -> Delta:
    if delta.content:
        outcome.content.append(delta.content)
    if delta.reasoning:
        outcome.reasoning.append(delta.reasoning)
    return delta
