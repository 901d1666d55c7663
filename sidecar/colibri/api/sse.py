"""Server-sent events as the OpenAI streaming API frames them: `data: <json>\\n\\n` per chunk,
`data: [DONE]\\n\\n` last; and waiting on a stream with keep-alives in between."""
from __future__ import annotations

import asyncio
import json
from typing import AsyncIterator, TypeVar

T = TypeVar("T")
DONE = b"data: [DONE]\n\n"
KEEPALIVE = object()  # yielded by with_keepalive when the stream was idle for an interval

SSE_HEADERS = {
    "Content-Type": "text/event-stream; charset=utf-8",
    "Cache-Control": "no-cache",
    "Connection": "close",
    "X-Accel-Buffering": "no",  # a reverse proxy must not hold chunks back
}


def frame(payload: object) -> bytes:
    return b"data: " + json.dumps(payload, ensure_ascii=False, allow_nan=False).encode("utf-8") + b"\n\n"


async def with_keepalive(source: AsyncIterator[T], interval: float) -> AsyncIterator[T | object]:
    """Items of `source`, and KEEPALIVE after each `interval` seconds without one. The pending
    read is never cancelled by a keep-alive (that would cancel the generation); leaving this
    iterator cancels it and closes `source`."""
    pending: asyncio.Task | None = None
    try:
        while True:
            if pending is None:
                pending = asyncio.ensure_future(source.__anext__())
            done, _ = await asyncio.wait({pending}, timeout=interval)
            if not done:
                yield KEEPALIVE
                continue
            task, pending = pending, None
            try:
                item = task.result()
            except StopAsyncIteration:
                return
            yield item
    finally:
        if pending is not None:
            pending.cancel()
            try:
                await pending
            except (asyncio.CancelledError, Exception):  # cleaning up: its outcome no longer matters
                pass
        aclose = getattr(source, "aclose", None)
        if aclose is not None:
            await aclose()
