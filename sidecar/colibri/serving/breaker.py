"""The circuit breaker of one upstream engine behind `coli serve --upstream`: whether requests may go to it.

    breaker = Breaker(threshold=3, probe_s=2.0)
    breaker.failure("connect", "connection refused")   # a failure of the upstream itself, not of a request
    breaker.success()                                   # a reply read to its end (any status), or a probe passed
    breaker.probe_due()                                 # the probe loop asks before each probe

Only the upstream's own failures count: a refused or reset connection, silence past the deadline, a
stream cut mid-way, a failed health probe. An HTTP answer, 4xx or 5xx included, is a working upstream
answering one request; it goes back to that client and counts as a success here.

    closed     requests flow; `threshold` requests failed in a row, or as many probes, open it
    open       no request is sent; a probe after `probe_s`, doubling after each failed one up to
               BACKOFF_MAX_S; a probe that passes half-opens it (closes it, for an upstream never seen up)
    half_open  on trial: one request at a time; a request that succeeds, or the next probe that passes,
               closes it; any failure opens it again, the wait before its next probe doubled
"""
from __future__ import annotations

import time
from typing import Callable

CLOSED, OPEN, HALF_OPEN = "closed", "open", "half_open"
BACKOFF_MAX_S = 15.0  # the longest wait between two probes of an open upstream (probe_s when that is longer)
KINDS = ("connect", "timeout", "stream", "probe")  # what may count against an upstream


class Breaker:
    def __init__(self, threshold: int = 3, probe_s: float = 2.0, clock: Callable[[], float] = time.monotonic):
        self.threshold = max(1, threshold)
        self.probe_s = probe_s
        self.clock = clock
        self.state = OPEN  # until its first probe passes: nothing is known of it yet
        self.reason: str | None = "not probed yet"  # why it is open or on trial; None while closed
        self.failed_requests = 0  # in a row, since the last request that succeeded
        self.failed_probes = 0  # in a row, since the last probe that passed
        self.opened: dict[str, int] = dict.fromkeys(KINDS, 0)  # times opened, by the kind of the failure that did
        self.opened_at: float | None = None  # clock() when it last opened
        self.seen_up = False  # a first probe that passes closes it: there is nothing to put on trial
        self._wait_s = probe_s  # the wait between two probes while open
        self._next_probe = clock()

    @property
    def admits(self) -> bool:
        """Whether requests may be sent to it now (closed, or on trial)."""
        return self.state != OPEN

    def probe_due(self) -> bool:
        return self.clock() >= self._next_probe

    def next_probe_in_s(self) -> float:
        """Seconds until its next probe (0: due now)."""
        return max(0.0, self._next_probe - self.clock())

    def failure(self, kind: str, message: str) -> bool:
        """One failure of the upstream itself (`kind` in KINDS); True when the state changed."""
        probe = kind == "probe"
        reason = f"{kind}: {message}"
        changed = False
        if self.state == OPEN:
            if not probe:  # a request sent before it opened: the probes decide now
                return False
            self._wait_s = min(max(self.probe_s, BACKOFF_MAX_S), self._wait_s * 2)  # wait longer for the next one
            if not self.seen_up:
                self.reason = reason
        else:
            if probe:
                self.failed_probes += 1
            else:
                self.failed_requests += 1
            if self.state == HALF_OPEN:
                self._open(kind, reason, self._wait_s * 2)
                changed = True
            elif max(self.failed_probes, self.failed_requests) >= self.threshold:
                self._open(kind, reason, self.probe_s)
                changed = True
        if probe or changed:
            self._schedule()
        return changed

    def success(self, probe: bool = False) -> bool:
        """A probe that passed, or a reply read to its end; True when the state changed."""
        if probe:
            self.failed_probes = 0
        else:
            self.failed_requests = 0
        changed = self.state != CLOSED
        if self.state == OPEN and self.seen_up:
            self.state = HALF_OPEN
            self.reason = f"on trial after {self.reason}"
        elif changed:
            self.state, self.reason = CLOSED, None
            self.failed_probes = self.failed_requests = 0
            self._wait_s = self.probe_s
        self.seen_up = True
        if probe or changed:
            self._schedule()
        return changed

    def postpone(self) -> None:
        """A probe that told nothing (it timed out while requests were running): the next one on schedule."""
        self._schedule()

    def _open(self, kind: str, reason: str, wait_s: float) -> None:
        self.state, self.reason = OPEN, reason
        self.opened[kind] += 1
        self.opened_at = self.clock()
        self._wait_s = min(max(self.probe_s, BACKOFF_MAX_S), wait_s)

    def _schedule(self) -> None:
        self._next_probe = self.clock() + (self._wait_s if self.state == OPEN else self.probe_s)

    def snapshot(self) -> dict:
        """For /health: the state, why, the failures in a row, and when it is probed next."""
        now = self.clock()
        wall = time.time() - now  # this clock's reading -> Unix seconds
        return {"state": self.state, "reason": self.reason, "threshold": self.threshold,
                "failed_requests": self.failed_requests, "failed_probes": self.failed_probes,
                "opened": sum(self.opened.values()),
                "opened_at": None if self.opened_at is None else round(self.opened_at + wall, 3),
                "next_probe_at": round(self._next_probe + wall, 3),
                "next_probe_in_s": round(self.next_probe_in_s(), 3)}
