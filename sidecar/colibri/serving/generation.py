"""One generation on a leased slot: token ids in, text deltas out, with the stop sequences,
implicit turn-marker stops, the reasoning split and the tool-call section applied; and a
pure read-out pass (System One's scoring). No HTTP here: the routes decide the framing.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import AsyncIterator

from colibri.chat.harmony import HarmonySplitter
from colibri.chat.reasoning import THINK, ReasoningSplitter, ReasoningTags
from colibri.chat.spans import Spans
from colibri.chat.stops import StopFilter
from colibri.chat.tools import ToolFormat, strict_problems
from colibri.chat.turns import END, turn_marker
from colibri.detok import Detokenizer
from colibri.errors import (ContextExceeded, EngineError, EngineFailed, ModelFileChanged, ModelOutputRefused,
                            Unavailable)
from colibri.serving.engine_thread import Finish, GenRequest, Generation, TokenEvent
from colibri.serving.model import ServedModel
from colibri.serving.requests import Options
from colibri.serving.scheduler import Lease, Observer

FINISH_REASONS = {"stop": "stop", "length": "length", "context": "length"}


@dataclass
class TokenRecord:
    """One generated token as the engine reported it, and where its text sits in the raw reply."""

    token: int
    logprob: float
    top: list[tuple[int, float]] | None
    data: bytes  # the token's own bytes (may be part of a UTF-8 character)
    start: int  # raw characters [start, end) this token completed
    end: int


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
class Prepared:
    """A request made ready for the engine."""

    tokens: list[int]
    options: Options
    in_reasoning: bool = False  # the prompt ends inside an open reasoning block
    reasoning: bool = False  # the family reasons: split its reasoning from the answer
    reasoning_tags: ReasoningTags | None = None  # its block's tags (None: <think>)
    tools: ToolSetup | None = None
    harmony_tail: str | None = None  # gpt-oss: the prompt from its last <|start|> (chat/harmony.py)


@dataclass
class Outcome:
    """How a generation ended, filled in as it runs."""

    finish_reason: str | None = None
    stop_sequence: str | None = None  # the request's stop sequence that ended the reply, when one did
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
    generated: int | None = None  # an upstream engine's count of the reply's tokens (its ids are not seen here)
    logprobs: dict | None = None  # an upstream engine's logprobs object, passed on as it sent it

    @property
    def completion_tokens(self) -> int:
        return len(self.tokens) if self.generated is None else self.generated

    @property
    def text(self) -> str:
        return "".join(self.content)

    @property
    def usage(self) -> dict:
        return {"prompt_tokens": self.prompt_tokens, "completion_tokens": self.completion_tokens,
                "total_tokens": self.prompt_tokens + self.completion_tokens,
                "prompt_tokens_details": {"cached_tokens": self.cached_tokens}}


class Session:
    """The engine work of one admitted request, on the slot its lease holds."""

    def __init__(self, served: ServedModel, lease: Lease, observer: Observer | None = None):
        self.served = served
        self.lease = lease
        self.observer = observer

    def start(self, req: GenRequest) -> Generation:
        """Start a generation on the lease's slot; the lease lasts until its Finish."""
        try:
            generation = self.served.engine_thread.submit(req)
        except EngineError as exc:
            raise self._refusal(exc, len(req.prompt)) from exc
        self.lease.hold_until(generation.ended)
        return generation

    async def _checked(self, generation: Generation, n_prompt: int) -> AsyncIterator[TokenEvent | Finish]:
        """The generation's events, with the engine's own length refusal named as the client's."""
        try:
            async for ev in generation:
                yield ev
        except EngineError as exc:
            raise self._refusal(exc, n_prompt) from exc

    def _refusal(self, exc: EngineError, n_prompt: int) -> Exception:
        return ContextExceeded(n_prompt, self.served.n_ctx, "prompt") if exc.code == "too_long" else exc

    async def generate(self, prepared: Prepared, outcome: Outcome) -> AsyncIterator[Delta]:
        """Deltas of text as they become final; `outcome` says how it ended (and, with tools,
        holds the calls, which come after all text). Leaving early (client gone) cancels the
        engine's work on this slot; the lease ends when the engine has let go of it."""
        served, lease, observer = self.served, self.lease, self.observer
        prompt, options, tools = prepared.tokens, prepared.options, prepared.tools
        outcome.prompt_tokens = len(prompt)
        outcome.cached_tokens = 0 if options.echo else min(lease.cached, len(prompt))  # until the engine says
        budget = min(options.max_tokens, served.n_ctx - len(prompt))  # a ceiling, clamped to what the context holds
        req = GenRequest(slot=lease.slot, prompt=list(prompt), max_tokens=budget, temperature=options.temperature,
                         top_p=options.top_p, top_k=options.top_k, seed=options.seed,
                         top_logprobs=options.top_logprobs, echo=options.echo, logprobs=options.logprobs,
                         ignore_eos=options.ignore_eos)
        detok = Detokenizer(served.token_bytes)
        stops = StopFilter(options.stop, ignore_leading=options.ignore_leading_stop)
        opened = tools.opened if tools else ""
        if opened:
            split = None
        elif prepared.harmony_tail is not None:  # channels: reasoning, answer and calls by message
            split = HarmonySplitter(prepared.harmony_tail, tools=tools is not None)
        else:
            split = ReasoningSplitter(prepared.in_reasoning, prepared.reasoning_tags or THINK) if prepared.reasoning \
                else None
        section = StopFilter(list(tools.format.openers)) if tools else None  # the answer ends where calls begin
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
        generation = self.start(req)
        try:
            async for ev in self._checked(generation, len(prompt)):
                if isinstance(ev, Finish):  # always the last event
                    self._finish(ev, outcome, counted=not ended)
                    continue
                if ended:
                    continue
                outcome.tokens.append(ev.token)
                marker = turn_marker(ev.token, served.turn_opener_ids, shown)
                if marker is not None:
                    outcome.records.append(TokenRecord(ev.token, ev.logprob, ev.top, b"", raw_len, raw_len))
                    if marker == END:
                        outcome.finish_reason = "stop"
                        ended = True
                        generation.cancel()  # read on to its Finish: reuse, read-out
                    continue  # a leading marker is ignored (docs/openai-api.md#turn-markers)
                data = served.token_bytes(ev.token)
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
                if stops.matched is not None or getattr(split, "ended", False):  # a stop, or another role's turn
                    outcome.finish_reason = "stop"
                    ended = True
                    generation.cancel()  # read on to its Finish: reuse, read-out
            tail = detok.flush()  # a dangling partial character: U+FFFD, the last token's text
            if tail and outcome.records:
                outcome.records[-1].end += len(tail)
                outcome.raw.append(tail)
            delta = stage(stops.feed(tail) + stops.flush())
            if stops.matched is not None and not ended:  # a stop the end of generation decided
                outcome.finish_reason = "stop"
            if split:
                said, answer = split.flush()
                delta = Delta(content=delta.content + (section.feed(answer) if section else answer),
                              reasoning=delta.reasoning + said)
            if section:
                delta.content += section.flush()
            if delta.content or delta.reasoning:
                yield _record(outcome, delta)
            outcome.stop_sequence = stops.matched
            answer = split.answer.through(stops.kept) if split else stops.kept
            outcome.answer = section.kept.through(answer) if section else answer
            if section and section.matched is not None:
                calls = self._tool_calls(tools, section, outcome)
                if calls is None:  # nothing parsed as a call: the section was text after all
                    outcome.answer = answer
                    yield _record(outcome, Delta(content=section.matched + section.after))
        finally:
            generation.cancel()  # a gone client ends the slot's work now (a no-op once it has ended)
            if observer:
                observer.observe("engine_call", time.monotonic() - t0)
            lease.tokens = list(prompt) + outcome.tokens

    @staticmethod
    def _tool_calls(tools: ToolSetup, section: StopFilter, outcome: Outcome) -> list[dict] | None:
        """The calls of the tool section, in OpenAI's shape; None when it holds none."""
        parsed = tools.format.parse_section(section.matched, section.after, tools.schemas)
        if tools.strict:
            problems = strict_problems(parsed, tools.schemas, cut_off=outcome.finish_reason == "length")
            if problems:
                raise ModelOutputRefused("invalid_model_tool_call",
                                         "the model's tool call cannot be executed: " + "; ".join(problems))
        named = [c for c in parsed.calls if c.name]
        if not named:
            return None
        outcome.tool_calls = [{"id": c.id or tools.format.call_id(), "type": "function",
                               "function": {"name": c.name, "arguments": c.arguments_json()}} for c in named]
        outcome.finish_reason = "tool_calls"
        return outcome.tool_calls

    async def read_out(self, tokens: list[int], echo_from: int = 0) -> Finish:
        """A pure scoring pass: no token generated, the read-out of the prompt positions from
        echo_from on (the prefix before it may come from the slot's cache)."""
        req = GenRequest(slot=self.lease.slot, prompt=tokens, max_tokens=0, temperature=0.0, top_p=1.0, echo=True,
                         echo_from=echo_from)
        t0 = time.monotonic()
        finish = None
        generation = self.start(req)
        try:
            async for ev in self._checked(generation, len(tokens)):
                if isinstance(ev, Finish):
                    finish = ev
        finally:
            generation.cancel()
            if self.observer:
                self.observer.observe("engine_call", time.monotonic() - t0)
        if finish is None or finish.reason == "error" or finish.prompt_readout is None:
            raise EngineFailed("engine_logprob_records_incomplete", "the engine returned no read-out for a "
                                                                     "System One option")
        self.lease.tokens = list(tokens)
        return finish

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
            raise Unavailable("engine_unavailable", "the engine stopped this generation (shutting down)")
        elif ev.error_code == "model_file_changed":
            raise ModelFileChanged(ev.error or "the model file changed while serving")
        else:
            raise EngineFailed("engine_error", f"the engine failed: {ev.error or ev.reason}")


def _record(outcome: Outcome, delta: Delta) -> Delta:
    if delta.content:
        outcome.content.append(delta.content)
    if delta.reasoning:
        outcome.reasoning.append(delta.reasoning)
    return delta
