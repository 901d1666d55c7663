"""The engine thread: one thread owns the C engine and steps every KV slot.

asyncio code calls `submit()` (a Generation) or `generate()` (its events); the
request travels to the thread as a command, the thread calls `colibri_step()`
while any slot runs (the GIL is released inside the C calls), and each slot's
events come back to the consumer's event loop through a mailbox: a deque, and a
pipe the loop reads. The pipe is written by the next step itself, from C, once
the GIL is let go (colibri_step_wake): woken earlier, by a write from Python,
the loop would take the GIL at once and the next step would wait for the
loop's whole per-token work before it could start (a quarter of a millisecond
a token, 2% of a decode step, when both cores compute). And a loop is woken at
most once per `wake_interval` while tokens flow (a first token, an end and an
error at once): a fast model's tokens then reach the loop several at a time,
and go out framed in one write, so the loop's and the client's work per wake,
which takes the decoding threads' cores, is paid once for all of them.
A generation ends with its Finish; `Generation.ended` resolves then, and only
then may the slot take the next request (the scheduler's lease waits for it).

With a persistence directory, each slot's history and KV cache are saved
after every request and restored at start, so a restarted server keeps its
warm conversations. With a heat file, the routing counts of every expert are
kept between runs, and at start the hottest experts are pinned in RAM (when
experts stream from disk): the longer a workload runs, the more of it stays.
"""
from __future__ import annotations

import asyncio
import logging
import struct
import math
import os
import threading
import time
import weakref
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import AsyncIterator

from colibri.engine import MAX_LOGPROBS, Engine, last_error, write_wake
from colibri.errors import ColiError, EngineError

log = logging.getLogger("colibri.engine")


class SlotBusy(ColiError):
    """The slot already serves a request."""


@dataclass
class GenRequest:
    slot: int
    prompt: list[int]
    max_tokens: int
    temperature: float = 0.0
    top_p: float = 1.0
    top_k: int = 0             # only the k most likely tokens; 0: off
    seed: int | None = None
    top_logprobs: int = 0      # 0..MAX_LOGPROBS entries of the top-k table per token
    echo: bool = False         # read-out of the prompt positions (Finish.prompt_readout)
    echo_from: int = 0         # with echo: the first position that needs one; the prefix before may be reused
    ignore_eos: bool = False
    logprobs: bool = True      # False: TokenEvent.logprob is NaN unless top_logprobs > 0 (the engine skips
                               # the log-softmax over the vocabulary: what no request asked for is free)


@dataclass(frozen=True)
class TokenEvent:
    token: int
    logprob: float                          # may be -inf or nan: reported, never clamped (nan: not asked for)
    top: list[tuple[int, float]] | None     # unsorted; None when top_logprobs == 0


@dataclass(frozen=True)
class PromptPosition:
    token: int
    logprob: float | None                   # None at position 0 and where the prefix came from the cache
    top: list[tuple[int, float]]


@dataclass(frozen=True)
class Finish:
    reason: str                 # stop | length | context | cancelled | error
    n_prompt: int
    n_reused: int
    n_generated: int
    error: str | None = None
    error_code: str | None = None          # the engine's error name, for reason "error" (e.g. model_file_changed)
    stop_token: int | None = None          # the end-of-generation token, for reason "stop"
    stop_logprob: float | None = None
    prompt_readout: list[PromptPosition] | None = None
    timings: dict[str, float] = field(default_factory=dict)


@dataclass
class _Job:
    req: GenRequest
    loop: asyncio.AbstractEventLoop
    mailbox: "_Mailbox | None"  # None: a loop without add_reader; events go by call_soon_threadsafe
    ended: asyncio.Future  # resolved on the loop once the Finish (or the failure) has arrived
    items: deque = field(default_factory=deque)  # arrived, not yet read
    waiter: asyncio.Future | None = None         # the reader's, while it waits on an empty deque
    submitted_at: float = 0.0
    first_token_at: float | None = None
    n_reused: int = 0
    cancelled: bool = False


class Generation:
    """One request on one slot, from its submission to the engine's Finish: iterate it for
    the events (TokenEvents, then one Finish, or the failure raised)."""

    def __init__(self, thread: "EngineThread", job: _Job):
        self._thread = thread
        self._job = job

    @property
    def slot(self) -> int:
        return self._job.req.slot

    @property
    def ended(self) -> asyncio.Future:
        """Resolves once the engine has finished this generation and let go of its slot."""
        return self._job.ended

    def cancel(self) -> None:
        """Stop early (a stop sequence matched, the client went away). A consumer that keeps
        reading still gets the tokens already made and a Finish ("cancelled", with n_reused
        and any echo read-out)."""
        self._thread.cancel_job(self._job)

    def __aiter__(self) -> "Generation":
        return self

    async def __anext__(self) -> TokenEvent | Finish:
        job = self._job
        while not job.items:
            if job.ended.done():
                raise StopAsyncIteration
            job.waiter = job.loop.create_future()
            try:
                await job.waiter
            finally:
                job.waiter = None
        item = job.items.popleft()
        if isinstance(item, BaseException):
            raise item
        return item


class _Mailbox:
    """Events bound for one event loop: the engine thread appends them and has the pipe
    written (see the module's doc); the loop reads the pipe and hands them over in order."""

    def __init__(self, loop: asyncio.AbstractEventLoop, arrive) -> None:
        self.items: deque = deque()
        self.r, self.w = os.pipe()
        self.woken_at = 0.0  # engine thread: when its pipe was last written (time.monotonic)
        weakref.finalize(self, _close_pipe, self.r, self.w)  # once neither the loop nor the thread holds it
        os.set_blocking(self.r, False)
        os.set_blocking(self.w, False)  # a full pipe already wakes the loop: the writer never waits
        self._arrive = arrive
        loop.add_reader(self.r, self._drain)  # NotImplementedError on a loop without readers

    def _drain(self) -> None:
        try:
            os.read(self.r, 4096)  # bytes left over keep the pipe readable: this runs again
        except BlockingIOError:
            pass
        items, arrive = self.items, self._arrive
        while items:
            arrive(*items.popleft())


    def detach(self, loop: asyncio.AbstractEventLoop) -> None:
        """On the loop: hand over what is left, then stop reading the pipe."""
        self._drain()
        loop.remove_reader(self.r)


def _close_pipe(r: int, w: int) -> None:
    os.close(r)
    os.close(w)


HEAT_MAGIC = b"COLIHEAT"
HEAT_SAVE_EVERY = 16  # turns


def load_heat(path: Path, n_layer: int, n_expert: int) -> list[int] | None:
    """Routing counts saved by save_heat, or None (with one warning) when absent or unusable."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as e:
        log.warning("ignoring the routing heat file %s (%s)", path, e)
        return None
    n = n_layer * n_expert
    if len(data) != 16 + 4 * n or data[:8] != HEAT_MAGIC or struct.unpack("<II", data[8:16]) != (n_layer, n_expert):
        log.warning("ignoring the routing heat file %s (not this model's)", path)
        return None
    return list(struct.unpack(f"<{n}I", data[16:]))


def save_heat(path: Path, n_layer: int, n_expert: int, counts) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".tmp.{os.getpid()}")
    tmp.write_bytes(HEAT_MAGIC + struct.pack("<II", n_layer, n_expert) + struct.pack(f"<{len(counts)}I", *counts))
    os.replace(tmp, path)


WAKE_INTERVAL_S = 0.05  # a loop's wakes while tokens flow: at most 20 a second, a film's frame rate


class EngineThread:
    def __init__(self, engine: Engine, persist_dir: str | os.PathLike[str] | None = None,
                 heat_dir: str | os.PathLike[str] | None = None, wake_interval: float = WAKE_INTERVAL_S):
        self.engine = engine
        self.wake_interval = wake_interval  # seconds; 0: a wake per step that has events
        self.n_slots = engine.n_slots
        self.n_ctx = engine.n_ctx
        self.persist_dir = Path(persist_dir) / engine.model_id if persist_dir else None
        self._cond = threading.Condition()
        self._commands: deque[tuple[str, object]] = deque()
        self._running: dict[int, _Job] = {}       # engine thread: slot -> the generation it steps
        self._live: dict[int, _Job] = {}          # event loop: slot -> the generation not yet finished
        self._closing = False
        self._stopped = False                     # the thread has returned
        self._thread: threading.Thread | None = None
        self.restored: dict[int, int] = {}        # slot -> tokens restored from disk
        self.heat_path = Path(heat_dir) / f"{engine.model_id}.heat" if heat_dir else None
        self.pinned = 0                           # experts pinned from learned heat at start
        self._heat_base: list[int] | None = None  # counts of earlier runs
        self._turns = 0
        self._mailboxes: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # loop -> _Mailbox | None
        self._mailbox_lock = threading.Lock()     # submit() may run on several loops' threads
        # engine thread: mailboxes given events since their last wake -> whether one of them must not wait
        self._unwoken: dict[_Mailbox, bool] = {}

    # ---- lifetime ------------------------------------------------------------

    def start(self) -> None:
        if self.persist_dir:
            self._restore()
        if self.heat_path:
            self._pin_from_heat()
        self._thread = threading.Thread(target=self._run, name="colibri-engine", daemon=True)
        self._thread.start()

    async def close(self) -> None:
        """Let running requests finish, then stop the thread."""
        with self._cond:
            self._closing = True
            self._cond.notify()
        if self._thread:
            await asyncio.get_running_loop().run_in_executor(None, self._thread.join)
        self._drop_mailboxes(asyncio.get_running_loop())

    def _drop_mailboxes(self, running: asyncio.AbstractEventLoop) -> None:
        """The loops stop reading this thread's pipes (a loop outlives an unloaded model);
        a pipe is closed once nothing holds its mailbox."""
        with self._mailbox_lock:
            boxes = [(loop, mb) for loop, mb in self._mailboxes.items() if mb is not None]
            self._mailboxes.clear()
        for loop, mb in boxes:
            if loop.is_closed():
                continue
            if loop is running:
                mb.detach(loop)
            else:
                try:
                    loop.call_soon_threadsafe(mb.detach, loop)
                except RuntimeError:  # closed meanwhile
                    pass

    def _pin_from_heat(self) -> None:
        st = self.engine.stats()
        if not st["n_expert"]:
            self.heat_path = None  # a dense model has no routing to learn
            return
        self._heat_base = load_heat(self.heat_path, st["n_layer"], st["n_expert"])
        if self._heat_base and st["streaming"]:
            self.pinned = self.engine.pin_experts(self._heat_base)
            log.info("pinned %d experts from learned routing heat", self.pinned)

    def save_heat(self) -> None:
        """Earlier runs' counts plus this run's, to the heat file."""
        if not self.heat_path:
            return
        try:
            st = self.engine.stats(arrays=True)
        except (EngineError, TypeError):  # the engine is closed
            return
        counts = list(st["counts"])
        if self._heat_base:
            counts = [min(a + b, 0xFFFFFFFF) for a, b in zip(counts, self._heat_base)]
        try:
            save_heat(self.heat_path, st["n_layer"], st["n_expert"], counts)
        except OSError as e:
            log.warning("could not save the routing heat (%s)", e)

    def _slot_path(self, slot: int) -> Path:
        assert self.persist_dir is not None
        return self.persist_dir / f"slot-{slot}.kv"

    def _restore(self) -> None:
        assert self.persist_dir is not None
        self.persist_dir.mkdir(parents=True, exist_ok=True)
        for stale in self.persist_dir.glob("slot-*.kv.tmp.*"):  # a save cut short by a crash
            stale.unlink(missing_ok=True)
        for slot in range(self.n_slots):
            path = self._slot_path(slot)
            if not path.exists():
                continue
            try:
                self.restored[slot] = self.engine.slot_load(slot, path)
                log.info("slot %d: restored %d cached tokens", slot, self.restored[slot])
            except EngineError as e:
                log.warning("slot %d: ignoring the saved KV cache (%s)", slot, e)

    # ---- the asyncio side ----------------------------------------------------

    def submit(self, req: GenRequest) -> "Generation":
        """Start req; its slot must have no generation the engine has not finished (the
        scheduler's lease guarantees that: see Lease.hold_until). Call on the event loop."""
        if not 0 <= req.slot < self.n_slots:
            raise ColiError(f"slot {req.slot} does not exist (0..{self.n_slots - 1})")
        if not req.prompt:
            raise ColiError("the prompt is empty")
        if len(req.prompt) > self.n_ctx:
            raise EngineError("too_long", f"the prompt has {len(req.prompt)} tokens, the context holds {self.n_ctx}")
        if req.max_tokens < 0 or not 0 <= req.top_logprobs <= MAX_LOGPROBS:
            raise ColiError(f"max_tokens must be >= 0 and top_logprobs in 0..{MAX_LOGPROBS}")
        if req.slot in self._live:
            raise SlotBusy(f"slot {req.slot} is busy")
        loop = asyncio.get_running_loop()
        job = _Job(req, loop, self._mailbox(loop), loop.create_future())
        with self._cond:
            if self._closing or self._stopped:
                raise ColiError("the engine is shutting down")
            self._commands.append(("submit", job))
            self._cond.notify()
        self._live[req.slot] = job
        return Generation(self, job)

    async def generate(self, req: GenRequest) -> AsyncIterator[TokenEvent | Finish]:
        """Events of one request: TokenEvents, then one Finish. Leaving early cancels it and
        returns once the engine has let go of the slot (deterministically with
        `contextlib.aclosing` or `aclose()`; a bare `break` leaves that to the loop's
        async-generator finalizer)."""
        generation = self.submit(req)
        try:
            async for item in generation:
                yield item
        finally:
            if not generation.ended.done():
                generation.cancel()
                await generation.ended

    def cancel(self, slot: int) -> None:
        """Stop the slot's generation early; see Generation.cancel."""
        job = self._live.get(slot)
        if job is not None:
            self.cancel_job(job)

    def cancel_job(self, job: _Job) -> None:
        if job.ended.done():
            return
        with self._cond:
            job.cancelled = True
            self._commands.append(("cancel", job))
            self._cond.notify()

    def _mailbox(self, loop: asyncio.AbstractEventLoop) -> _Mailbox | None:
        with self._mailbox_lock:
            try:
                return self._mailboxes[loop]
            except KeyError:
                pass
            try:
                mailbox = _Mailbox(loop, self._arrive)
            except NotImplementedError:  # e.g. a proactor loop: call_soon_threadsafe it is
                mailbox = None
            self._mailboxes[loop] = mailbox
            return mailbox

    def _arrive(self, job: "_Job", item: object) -> None:
        """On the consumer's loop: one event of job; its last one ends the generation."""
        job.items.append(item)
        if job.waiter is not None and not job.waiter.done():
            job.waiter.set_result(None)
        if isinstance(item, (Finish, BaseException)):
            if self._live.get(job.req.slot) is job:
                del self._live[job.req.slot]
            if not job.ended.done():
                job.ended.set_result(None)

    # ---- the engine thread ---------------------------------------------------

    def _deliver(self, job: _Job, item: object, urgent: bool = True) -> None:
        """urgent=False: the loop may learn of it up to wake_interval later (a token after a job's first)."""
        if job.mailbox is not None and not job.loop.is_closed():
            job.mailbox.items.append((job, item))
            self._unwoken[job.mailbox] = urgent or self._unwoken.get(job.mailbox, False)
            return
        if job.mailbox is None:
            try:
                job.loop.call_soon_threadsafe(self._arrive, job, item)
                return
            except RuntimeError:
                pass
        # the consumer's loop is closed: nobody reads on, the slot is free
        if isinstance(item, (Finish, BaseException)) and self._live.get(job.req.slot) is job:
            self._live.pop(job.req.slot, None)

    def _wake_fds(self, every: bool = False) -> list[int]:
        """The pipes for the next step to write: of the mailboxes with an urgent event, or with
        events and no wake for wake_interval (every: of all mailboxes with events)."""
        if not self._unwoken:
            return []
        now = time.monotonic()
        due = [mb for mb, urgent in self._unwoken.items()
               if every or urgent or now - mb.woken_at >= self.wake_interval]
        for mb in due:
            mb.woken_at = now
            del self._unwoken[mb]
        return [mb.w for mb in due]

    def _wake_now(self) -> None:
        """No step follows at once: wake the loops from here."""
        for fd in self._wake_fds(every=True):
            write_wake(fd)

    def _stop(self) -> None:
        """The thread returns: whatever was submitted and never ran ends with an error."""
        with self._cond:
            self._stopped = True
            left = [job for kind, job in self._commands if kind == "submit"]
            self._commands.clear()
        for job in left:
            self._deliver(job, ColiError("the engine stopped"))
        self._wake_now()

    def _run(self) -> None:
        while True:
            if not self._running:
                self._wake_now()
            with self._cond:
                while not self._commands and not self._running and not self._closing:
                    self._cond.wait()
                commands = list(self._commands)
                self._commands.clear()
                if self._closing and not self._running and not commands:
                    self.save_heat()
                    self._stopped = True
                    return
            self._run_commands(commands)
            del commands  # a finished job's mailbox (and its loop) must not live on in this frame
            if self._running:
                try:
                    events = self.engine.step(self._wake_fds())
                except EngineError as e:  # a bug or a closed engine: end every request
                    log.error("engine step failed: %s", e)
                    for slot in list(self._running):
                        self._end(slot, "error", None, math.nan, str(e), e.code)
                    if e.code == "bad_state":
                        self._stop()
                        return
                    continue
                self._dispatch(events)

    def _run_commands(self, commands: list[tuple[str, _Job]]) -> None:
        for kind, job in commands:
            if kind == "submit":
                self._submit(job)
            elif kind == "cancel":
                self._cancel(job)

    def _submit(self, job: _Job) -> None:
        slot = job.req.slot
        if slot in self._running:  # a caller that holds no lease on the slot
            self._deliver(job, SlotBusy(f"slot {slot} is busy"))
            return
        if job.cancelled:  # cancelled before it started: nothing ran, nothing to read out
            self._deliver(job, Finish("cancelled", len(job.req.prompt), 0, 0))
            return
        r = job.req
        seed = r.seed if r.seed is not None else int.from_bytes(os.urandom(8), "little")
        job.submitted_at = time.perf_counter()
        try:
            job.n_reused = self.engine.submit(slot, r.prompt, max_tokens=r.max_tokens, temperature=r.temperature,
                                              top_p=r.top_p, seed=seed, n_logprobs=r.top_logprobs, echo=r.echo,
                                              echo_from=r.echo_from, ignore_eos=r.ignore_eos, top_k=r.top_k,
                                              logprob=r.logprobs)
        except EngineError as e:
            self._deliver(job, e)
            return
        except Exception as e:  # noqa: BLE001 - a value the engine's C types cannot hold, say:
            # that request fails; the thread, which serves every other one, goes on
            log.exception("submitting a request failed")
            self._deliver(job, e)
            return
        self._running[slot] = job

    def _cancel(self, job: _Job) -> None:
        if self._running.get(job.req.slot) is job:  # else it has ended, or _submit will see the flag
            self.engine.cancel(job.req.slot)

    def _dispatch(self, events) -> None:
        # why the step failed slots, read before anything else calls the engine (still this thread's)
        failed = last_error() if any(ev.done and ev.finish == "error" for ev in events) else None
        if failed is not None and failed.code == "ok":
            failed = None
        for ev in events:
            job = self._running.get(ev.slot)
            if job is None:
                continue
            if not ev.done:
                first = job.first_token_at is None
                if first:
                    job.first_token_at = time.perf_counter()
                top = ev.top if job.req.top_logprobs else None
                self._deliver(job, TokenEvent(ev.token, ev.logprob, top), urgent=first)
            else:
                err = failed if ev.finish == "error" else None
                self._end(ev.slot, ev.finish or "error", ev.token if ev.token >= 0 else None, ev.logprob,
                          err.message if err else None, err.code if err else None)

    def _end(self, slot: int, reason: str, stop_token: int | None, stop_logprob: float, error: str | None,
             error_code: str | None = None) -> None:
        job = self._running.pop(slot)
        try:
            st = self.engine.slot_status(slot)
        except (EngineError, TypeError):  # the engine was closed under us
            self._deliver(job, Finish("error", len(job.req.prompt), job.n_reused, 0, error or "the engine closed"))
            return
        readout = None
        if job.req.echo and reason != "error" and st["n_past"] >= st["n_prompt"]:
            rows = self.engine.slot_readout(slot, job.req.top_logprobs)
            readout = [PromptPosition(tok, lp, top) for tok, (lp, top) in zip(job.req.prompt, rows)]
        now = time.perf_counter()
        timings = {"prefill_s": st["prefill_s"], "decode_s": st["decode_s"], "total_s": now - job.submitted_at}
        if job.first_token_at is not None:
            timings["ttft_s"] = job.first_token_at - job.submitted_at
        if error is None and reason == "error":
            error = "the engine failed this request"
        self._deliver(job, Finish(reason, len(job.req.prompt), job.n_reused, st["n_generated"], error, error_code,
                                  stop_token, stop_logprob if stop_token is not None else None, readout, timings))
        if self.persist_dir:
            try:
                self.engine.slot_save(slot, self._slot_path(slot))
            except EngineError as e:
                log.warning("slot %d: could not save its KV cache (%s)", slot, e)
        self._turns += 1
        if self._turns % HEAT_SAVE_EVERY == 0:
            self.save_heat()
