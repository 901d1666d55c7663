"""Admission of generation requests to KV slots: FIFO with reservations, a bounded queue,
a deadline, and the counters /health and /metrics report. The scheduler is the one owner
of a slot's occupancy: a slot is someone's from its grant until its lease ends.

    async with scheduler.admit(slot=None, tokens=prompt) as lease:   # Overloaded/Unavailable raised here
        generation = engine_thread.start(GenRequest(slot=lease.slot, ...))
        lease.hold_until(generation.ended)                           # the engine's Finish ends the lease
        ... read the generation's events ...
        lease.tokens = prompt + generated                            # what the slot now caches

A lease ends when both the holder is done with it and the engine has reported
the Finish of every generation it started on the slot, so a slot whose
cancelled generation is still winding down is never granted to the next
request.

Rules (docs/server.md#slots-and-the-queue):
- a request targets one slot (`cache_slot`) or any slot;
- it is admitted at once when an eligible free slot is not reserved by an
  older waiter; otherwise it waits, and the queue limit counts waiters only
  (a full queue never refuses a request that can start now);
- an older any-slot waiter blocks every younger waiter; an older pinned
  waiter reserves only its own slot;
- each wake (a release, or every 0.25 s) checks, in order: closed (503),
  deadline passed (429 queue_timeout, even if a slot is free now), admitted.
A cancelled waiter (client gone) leaves the queue and counts as cancelled.

Any-slot requests go to the free slot that already caches at least half of
the prompt (the most of it first); failing that to an unused slot, then the
least recently used one.
Upstream hashes the conversation's first user message instead, which piles
every conversation sharing a system prompt and first question onto one slot.
"""
from __future__ import annotations

import asyncio
import time
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import AsyncIterator, Protocol

from colibri.errors import Overloaded, Unavailable

POLL_S = 0.25
REUSE_FRACTION = 0.5  # a slot holds this conversation when it caches half the prompt (llama.cpp's rule)


class QueueFull(Overloaded):
    def __init__(self, max_queue: int):
        super().__init__("queue_full", f"the server is busy: {max_queue} requests are already waiting")


class QueueTimeout(Overloaded):
    def __init__(self, timeout: float):
        super().__init__("queue_timeout", f"no KV slot became free within {timeout:g} s")


class SchedulerClosed(Unavailable):
    def __init__(self) -> None:
        super().__init__("scheduler_closed", "the server is shutting down")


class Observer(Protocol):
    def observe(self, name: str, seconds: float) -> None: ...


@dataclass
class Waiter:
    target: int | None
    tokens: list[int]
    since: float
    allowed: frozenset[int] | None = None  # the slots it may take (an upstream gateway: those serving its model)
    granted: asyncio.Future = field(default_factory=lambda: asyncio.get_running_loop().create_future())


@dataclass
class Lease:
    slot: int
    wait_s: float
    tokens: list[int]  # what the slot caches after this request (set by the caller)
    started: float = field(default_factory=time.monotonic)
    cached: int = 0  # prompt tokens the slot already held when granted (the gateway's view of prefix reuse)
    engine_work: list[asyncio.Future] = field(default_factory=list)  # generations whose Finish ends the lease

    def hold_until(self, ended: asyncio.Future) -> None:
        """Keep the slot until `ended` resolves (the engine reported a generation's Finish),
        even when the holder is done with it sooner (a client gone, a stop matched)."""
        self.engine_work = [f for f in self.engine_work if not f.done()] + [ended]


@dataclass
class Counters:
    admitted: int = 0
    completed: int = 0
    failed: int = 0
    rejected: int = 0
    timed_out: int = 0
    cancelled: int = 0


def common_prefix(a: list[int], b: list[int]) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


class Scheduler:
    def __init__(self, n_slots: int, max_queue: int = 8, queue_timeout: float = 300.0,
                 observer: Observer | None = None):
        self.capacity = n_slots
        self.max_queue = max_queue
        self.queue_timeout = queue_timeout
        self.observer = observer
        self.counters = Counters()
        self.closed = False
        self._free = set(range(n_slots))
        self._waiters: list[Waiter] = []
        self._cached: dict[int, list[int]] = {}  # slot -> tokens its KV holds
        self._last_used: dict[int, float] = {}
        self.usable = lambda slot: True  # a backend's say on which slots may be granted now (an upstream that is down)

    @property
    def active(self) -> int:
        return self.capacity - len(self._free)

    @property
    def queued(self) -> int:
        return len(self._waiters)

    def snapshot(self) -> dict:
        c = self.counters
        return {"active": self.active, "queued": self.queued, "capacity": self.capacity,
                "max_queue": self.max_queue, "queue_timeout_seconds": self.queue_timeout,
                "admitted": c.admitted, "completed": c.completed, "failed": c.failed, "rejected": c.rejected,
                "timed_out": c.timed_out, "cancelled": c.cancelled}

    @asynccontextmanager
    async def admit(self, slot: int | None, tokens: list[int],
                    allowed: frozenset[int] | None = None) -> AsyncIterator[Lease]:
        lease = await self.acquire(slot, tokens, allowed)
        outcome = "failed"
        try:
            yield lease
            outcome = "completed"
        except (asyncio.CancelledError, ConnectionResetError):
            outcome = "cancelled"  # the client went away: not a failure of the request
            raise
        finally:
            self._release_when_idle(lease, outcome)

    async def acquire(self, slot: int | None, tokens: list[int], allowed: frozenset[int] | None = None,
                      counted: bool = True) -> Lease:
        """A slot. counted=False: a second slot for a request already admitted (an upstream's retry elsewhere),
        which the counters and the queue-wait series do not count again (release it with outcome None)."""
        if self.closed:
            raise SchedulerClosed()
        now = time.monotonic()
        w = Waiter(target=slot, tokens=list(tokens), since=now, allowed=allowed)
        self._waiters.append(w)
        self._grant()
        if not w.granted.done() and len(self._waiters) - 1 >= self.max_queue:
            self._waiters.remove(w)
            self._count("rejected", counted)
            raise QueueFull(self.max_queue)
        deadline = now + self.queue_timeout
        while not w.granted.done():
            try:
                await asyncio.wait({w.granted}, timeout=max(0.0, min(POLL_S, deadline - time.monotonic())))
            except asyncio.CancelledError:
                self._abandon(w)
                self._count("cancelled", counted)
                raise
            if self.closed:
                self._abandon(w)
                raise SchedulerClosed()
            if time.monotonic() >= deadline:  # checked before availability (docs/server.md#slots-and-the-queue)
                self._abandon(w)
                self._count("timed_out", counted)
                raise QueueTimeout(self.queue_timeout)
        wait = time.monotonic() - w.since
        self._count("admitted", counted)
        if self.observer and counted:
            self.observer.observe("queue_wait", wait)
        slot = w.granted.result()
        return Lease(slot=slot, wait_s=wait, tokens=w.tokens, cached=common_prefix(self._cached.get(slot, []), w.tokens))

    def _release_when_idle(self, lease: Lease, outcome: str) -> None:
        """Count the request's outcome now (it has ended); free its slot now, or once the engine
        has finished every generation started on it."""
        self._count(outcome)
        pending = [f for f in lease.engine_work if not f.done()]
        if not pending:
            self._free_slot(lease)
            return
        remaining = len(pending)

        def one_done(_: asyncio.Future) -> None:
            nonlocal remaining
            remaining -= 1
            if remaining == 0:
                self._free_slot(lease)

        for f in pending:
            f.add_done_callback(one_done)

    def release(self, lease: Lease, outcome: str | None) -> None:
        """Free the slot and count the request's outcome (None: a slot acquired uncounted)."""
        self._count(outcome)
        self._free_slot(lease)

    def _count(self, outcome: str | None, counted: bool = True) -> None:
        if outcome is not None and counted:
            setattr(self.counters, outcome, getattr(self.counters, outcome) + 1)

    def _free_slot(self, lease: Lease) -> None:
        if self.observer:
            self.observer.observe("slot_duration", time.monotonic() - lease.started)
        self._cached[lease.slot] = list(lease.tokens)
        self._last_used[lease.slot] = time.monotonic()
        self._free.add(lease.slot)
        self._grant()

    def remember(self, slot: int, tokens: list[int]) -> None:
        """What a slot caches without a request having put it there (restored from disk)."""
        self._cached[slot] = list(tokens)

    def close(self) -> None:
        """Refuse new arrivals and wake every waiter with 503; admitted requests run on."""
        self.closed = True
        for w in self._waiters:
            if not w.granted.done():
                w.granted.set_exception(SchedulerClosed())
                w.granted.exception()  # retrieved here: the waiter reads `closed`, not the future
        self._waiters.clear()

    def _abandon(self, w: Waiter) -> None:
        if w in self._waiters:
            self._waiters.remove(w)
        if w.granted.done() and not w.granted.cancelled() and w.granted.exception() is None:
            self._free.add(w.granted.result())  # granted just too late: give the slot on
        elif not w.granted.done():
            w.granted.cancel()
        self._grant()

    def regrant(self) -> None:
        """Look again at the waiters: a slot became usable (an upstream came back)."""
        self._grant()

    def _grant(self) -> None:
        """Hand free slots to waiters in FIFO order, honouring older waiters' reservations."""
        reserved: set[int] = set()
        for w in list(self._waiters):
            available = {s for s in self._free - reserved if self.usable(s) and (w.allowed is None or s in w.allowed)}
            if w.target is not None:
                if w.target in available:
                    self._give(w, w.target)
                else:
                    reserved.add(w.target)
                continue
            if not available:
                if w.allowed is not None:  # it holds back only the slots it may take: others serve younger waiters
                    reserved |= w.allowed
                    continue
                break  # an any-slot waiter that cannot start blocks everyone younger
            self._give(w, self._best_slot(available, w.tokens))

    def _give(self, w: Waiter, slot: int) -> None:
        self._waiters.remove(w)
        self._free.discard(slot)
        w.granted.set_result(slot)

    def _best_slot(self, available: set[int], tokens: list[int]) -> int:
        def reuse(slot: int) -> int:
            cached = self._cached.get(slot)
            if not cached:
                return 0
            n = common_prefix(cached, tokens)
            return n if n >= REUSE_FRACTION * len(tokens) else 0

        # most reuse first; then never-used slots; then least recently used; then lowest index
        return min(available, key=lambda s: (-reuse(s), s in self._cached, self._last_used.get(s, 0.0), s))
