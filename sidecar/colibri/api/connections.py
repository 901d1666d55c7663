"""Connections, before HTTP: caps on how many are open and a deadline for reading each request
(docs/server.md#connections). aiohttp has neither (its keep-alive timeout, which the server
sets to --idle-timeout, closes a connection idle between requests; nothing bounds a request
whose headers or body trickle in), so every connection passes through a Gate:

    gate = Gate(max_total=64, max_per_address=8, read_deadline=30)
    site = GatedSite(runner, gate, host, port)     # instead of web.TCPSite

A connection is *waiting* while it is idle (open, no request yet, or between keep-alive
requests) or still sending its request (headers, then the body), and *busy* from the moment
its request has been read until the reply has gone out. Only waiting connections are ever
cut: a busy one is doing work a client asked for.

- Read deadline: a request must be read, headers and body, within `read_deadline` seconds of
  its first byte; otherwise the socket is closed with no reply (a body shorter than its
  Content-Length, a chunked body with no terminator, headers sent a byte at a time).
- Caps: `max_total` connections in all, `max_per_address` from one client address other than
  loopback. A connection over a cap takes the place of the oldest waiting connection of the
  group (all, or that address's); when every one of them is busy, the newcomer is closed with
  no reply. Loopback clients are exempt from the per-address cap: on this machine every agent,
  dashboard tab and stream shares 127.0.0.1, so such a cap could only cut the user's own work.
"""
from __future__ import annotations

import asyncio
import ipaddress
from typing import Callable

from aiohttp import web

IDLE, READING, BUSY = "idle", "reading", "busy"



def is_loopback_address(address: str) -> bool:
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return address == ""  # a Unix socket or an unknown peer: local
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped:
        ip = ip.ipv4_mapped
    return ip.is_loopback


class Gate:
    def __init__(self, max_total: int, max_per_address: int, read_deadline: float):
        self.max_total, self.max_per_address, self.read_deadline = max_total, max_per_address, read_deadline
        self.open: dict[asyncio.BaseTransport, Guarded] = {}
        self.refused = self.evicted = self.timed_out = 0

    def protocols(self, server: web.Server) -> Callable[[], asyncio.Protocol]:
        """A protocol factory for loop.create_server: aiohttp's handlers behind the gate."""
        return lambda: Guarded(self, server)

    def snapshot(self) -> dict:
        return {"open": len(self.open), "busy": sum(c.state == BUSY for c in self.open.values()),
                "max": self.max_total, "max_per_address": self.max_per_address,
                "read_deadline_s": self.read_deadline, "refused": self.refused, "evicted": self.evicted,
                "timed_out": self.timed_out}

    def admit(self, conn: "Guarded") -> bool:
        if self.max_per_address and not is_loopback_address(conn.address):
            mine = [c for c in self.open.values() if c.address == conn.address]
            if len(mine) >= self.max_per_address and not self._evict_oldest(mine):
                self.refused += 1
                return False
        if len(self.open) >= self.max_total and not self._evict_oldest(list(self.open.values())):
            self.refused += 1
            return False
        self.open[conn.transport] = conn
        return True

    def _evict_oldest(self, group: list["Guarded"]) -> bool:
        waiting = [c for c in group if c.state != BUSY]
        if not waiting:
            return False
        victim = min(waiting, key=lambda c: c.since)
        self.evicted += 1
        self.release(victim)
        victim.cut()
        return True

    def release(self, conn: "Guarded") -> None:
        if self.open.get(conn.transport) is conn:
            del self.open[conn.transport]

    def find(self, request: web.Request) -> "Guarded | None":
        return self.open.get(request.transport) if request.transport is not None else None


gate_key = web.AppKey("gate", Gate)


class Guarded(asyncio.Protocol):
    """One connection: aiohttp's RequestHandler inside, the state and the read deadline outside."""

    def __init__(self, gate: Gate, server: web.Server):
        self.gate, self.server = gate, server
        self.inner: asyncio.Protocol | None = None
        self.transport: asyncio.Transport | None = None
        self.address = ""
        self.loop = asyncio.get_running_loop()
        self.state, self.since = IDLE, self.loop.time()
        self.early: float | None = None  # the first byte of a next request, sent while busy
        self.timer: asyncio.TimerHandle | None = None
        self.closed = False

    # ---- the transport's calls, passed on to aiohttp
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport
        peer = transport.get_extra_info("peername")
        self.address = str(peer[0]) if isinstance(peer, tuple) and peer else ""
        if not self.gate.admit(self):
            transport.abort()  # over the cap: closed with no reply
            return
        self.inner = self.server()
        self.inner.connection_made(transport)

    def data_received(self, data: bytes) -> None:
        if self.inner is None:
            return
        if self.state == IDLE:
            self._reading(self.loop.time())
        elif self.state == BUSY and self.early is None:
            self.early = self.loop.time()
        self.inner.data_received(data)

    def eof_received(self) -> bool | None:
        return self.inner.eof_received() if self.inner is not None else None

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self._stop_timer()
        self.gate.release(self)
        if self.inner is not None:
            self.inner.connection_lost(exc)

    def pause_writing(self) -> None:
        if self.inner is not None:
            self.inner.pause_writing()

    def resume_writing(self) -> None:
        if self.inner is not None:
            self.inner.resume_writing()

    # ---- the request's phases (request_started / request_read / the reply's end)
    def _reading(self, since: float) -> None:
        self._stop_timer()
        self.state, self.since = READING, since
        if self.closed:
            return
        self.timer = self.loop.call_at(since + self.gate.read_deadline, self._deadline_passed)

    def read(self) -> None:
        self._stop_timer()
        self.state, self.early = BUSY, None

    def answered(self) -> None:
        self._stop_timer()
        if self.early is not None:  # a pipelined request began while this one was answered
            early, self.early = self.early, None
            self._reading(early)
        else:
            self.state, self.since = IDLE, self.loop.time()

    def _deadline_passed(self) -> None:
        self.timer = None
        if self.state == READING and not self.closed:
            self.closed = True
            self.gate.timed_out += 1
            self.gate.release(self)
            self.transport.abort()  # the request was not read in time: closed with no reply

    def cut(self) -> None:
        """Evicted for a newcomer: an idle connection's last reply is flushed first."""
        self.closed = True
        self._stop_timer()
        if self.state == IDLE:
            self.transport.close()
        else:
            self.transport.abort()

    def _stop_timer(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None


class GatedSite(web.BaseSite):
    """web.TCPSite with every connection passing the gate first."""

    def __init__(self, runner: web.BaseRunner, gate: Gate, host: str, port: int, backlog: int = 128):
        super().__init__(runner, backlog=backlog)
        self._gate, self._host, self._port = gate, host, port

    @property
    def name(self) -> str:
        return f"http://{self._host}:{self._port}"

    async def start(self) -> None:
        await super().start()
        server = self._runner.server
        assert server is not None, "runner.setup() first"
        self._server = await asyncio.get_running_loop().create_server(
            self._gate.protocols(server), self._host, self._port, backlog=self._backlog)


# ---- what the middleware and the body reader tell the gate ----------------------------

def _conn(request: web.Request) -> Guarded | None:
    gate = request.app.get(gate_key)
    return gate.find(request) if gate is not None else None


def request_started(request: web.Request) -> None:
    """A request's headers are in: a request with no body has been read; the reply's end (the
    end of the task that writes it) makes the connection idle again."""
    conn = _conn(request)
    if conn is None:
        return
    if not request.body_exists:
        conn.read()
    task = asyncio.current_task()
    if task is not None:
        task.add_done_callback(lambda _: conn.answered())


def request_read(request: web.Request) -> None:
    """The body has been read: answering may take as long as it takes."""
    conn = _conn(request)
    if conn is not None:
        conn.read()
