"""Server-sent events as the OpenAI streaming API frames them: `data: <json>\\n\\n` per chunk,
`data: [DONE]\\n\\n` last; and waiting on a stream with keep-alives in between."""
from __future__ import annotations

import asyncio
import contextlib
import json
from collections import deque
from typing import Any, AsyncIterator, TypeVar

T = TypeVar("T")
DONE = b"data: [DONE]\n\n"
KEEPALIVE = object()  # yielded by with_keepalive when the stream was idle for an interval

SSE_HEADERS = {
    "Content-Type": "text/event-stream; charset=utf-8",
    "Cache-Control": "no-cache",
    "Connection": "close",
    "X-Accel-Buffering": "no",  # a reverse proxy must not hold chunks back
}


# json.dumps(o, ensure_ascii=False, allow_nan=False), the same text, without a new encoder per call
# (json.dumps builds one whenever an option is given; a stream calls this once a token)
to_json = json.JSONEncoder(ensure_ascii=False, allow_nan=False).encode


def frame(payload: object) -> bytes:
    return b"data: " + to_json(payload).encode("utf-8") + b"\n\n"


class _Gathered:
    """Stands in for a response while one batch is framed: what is written waits to go as one."""
    __slots__ = ("parts",)

    def __init__(self) -> None:
        self.parts: list[bytes] = []

    async def write(self, data: bytes) -> None:
        self.parts.append(data)


@contextlib.asynccontextmanager
async def one_write(holder: Any) -> AsyncIterator[None]:
    """Within it, `holder.resp.write` gathers, and what was written goes out in one write at the
    end (also when the framing fails part way: what was framed is not lost). A client that left
    gets nothing more."""
    resp, gathered = holder.resp, _Gathered()
    holder.resp = gathered
    gone = False
    try:
        yield
    except (asyncio.CancelledError, ConnectionResetError):
        gone = True
        raise
    finally:
        holder.resp = resp
        if gathered.parts and not gone:
            await resp.write(b"".join(gathered.parts))


class _Failed:
    """The source raised: re-raised to the consumer after the items read before it."""
    __slots__ = ("exc",)

    def __init__(self, exc: BaseException) -> None:
        self.exc = exc


_END = object()


async def with_keepalive(source: AsyncIterator[T], interval: float) -> AsyncIterator[list[T] | object]:
    """Items of `source` in batches (a list of every item that has arrived since the consumer
    last came back, in order: framed and sent in one write, they cost one send and one wake
    of the client), and KEEPALIVE after each `interval` seconds without one. The pending
    read is never cancelled by a keep-alive (that would cancel the generation); leaving this
    iterator cancels it and closes `source`.

    One reader task for the whole stream drives `source` and hands its items over through a
    deque; the consumer waits on a bare future only when the deque is empty; one keep-alive
    timer is armed per `interval`, not per item. A token costs no new task and no timer (the
    event loop's per-token work sits on a core a decoding thread pool shares)."""
    loop = asyncio.get_running_loop()
    buf: deque = deque()
    waiter: asyncio.Future | None = None
    due = False  # the keep-alive timer found `interval` seconds without an item
    last = loop.time()  # when the consumer last came back for more
    timer: asyncio.TimerHandle | None = None

    def wake() -> None:
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def tick() -> None:
        nonlocal timer, due
        if loop.time() >= last + interval - 0.001:  # timers may run a clock tick early
            timer, due = None, True  # re-armed once the consumer has sent something
            wake()
        else:
            timer = loop.call_at(last + interval, tick)

    async def pump() -> None:
        anext = source.__anext__
        try:
            while True:
                buf.append(await anext())
                wake()
        except StopAsyncIteration:
            buf.append(_END)
        except asyncio.CancelledError as exc:  # the consumer left (or the source was cancelled: say so)
            buf.append(_Failed(exc))
            wake()
            raise
        except Exception as exc:
            buf.append(_Failed(exc))
        wake()

    reader = loop.create_task(pump())
    timer = loop.call_at(last + interval, tick)
    try:
        while True:
            if buf:
                batch = []
                while buf and buf[0] is not _END and type(buf[0]) is not _Failed:
                    batch.append(buf.popleft())
                if not batch:  # the end, after every item before it went out
                    item = buf.popleft()
                    if item is _END:
                        return
                    raise item.exc
                yield batch
            elif due:
                yield KEEPALIVE
            else:
                waiter = loop.create_future()
                try:
                    await waiter
                finally:
                    waiter = None
                continue
            last = loop.time()
            if timer is None:  # it fired: count the silence from now
                due = False
                timer = loop.call_at(last + interval, tick)
    finally:
        if timer is not None:
            timer.cancel()
        if not reader.done():
            reader.cancel()
        try:
            await reader
        except (asyncio.CancelledError, Exception):  # cleaning up: its outcome no longer matters
            pass
        aclose = getattr(source, "aclose", None)
        if aclose is not None:
            await aclose()
