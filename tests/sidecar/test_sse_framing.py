"""The streamed chunk of a token from its pre-serialised prefix and suffix (Frames.delta_frame)
is byte for byte the chunk framed whole, for chat and legacy completions, with and without
include_usage, for text that JSON must escape; other deltas take the whole path."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from colibri.api.openai import ChatFrames, CompletionFrames
from colibri.api.sse import frame
from colibri.serving.generation import Delta

TEXTS = ["a", "", " hello", 'quote " and \\ slash', "line\nbreak\t", "é 漢字 🙂", "\x00\x1f", "\u2028"]


def _frames(cls):
    f = cls.__new__(cls)  # no served model needed: the head is set by hand
    f.id, f.model, f.created, f.options, f.tools_active = "x-1", "m \"q\"", 1700000000, SimpleNamespace(), False
    f._framed = {}
    return f


@pytest.mark.parametrize("cls", [ChatFrames, CompletionFrames])
@pytest.mark.parametrize("usage", [False, True])
def test_delta_frame_is_the_whole_frame(cls, usage):
    f = _frames(cls)
    for text in TEXTS:
        for d in (Delta(content=text), Delta(reasoning=text), Delta(content=text, reasoning="r")):
            assert f.delta_frame(d, usage) == frame(f.delta(d, usage)), (cls, usage, d)
    d = Delta(content="t")
    d.logprobs = {"content": []}  # an upstream's logprobs: the whole path
    assert f.delta_frame(d, usage) == frame(f.delta(d, usage))


def test_items_that_arrived_together_come_as_one_batch():
    """with_keepalive hands over every item that arrived while the consumer was away, in
    order, as one batch (one write, one send); a failure comes after the items before it."""
    import asyncio

    from colibri.api.sse import KEEPALIVE, with_keepalive

    async def main():
        more = asyncio.Event()

        async def source():
            for x in "abc":  # arrive together: no suspension between them
                yield x
            await more.wait()
            yield "d"
            raise ValueError("engine failed")

        out = []
        try:
            async for batch in with_keepalive(source(), interval=0.05):
                out.append(batch)
                if batch is KEEPALIVE:
                    more.set()
        except ValueError as exc:
            out.append(str(exc))
        return out

    assert asyncio.run(main()) == [["a", "b", "c"], KEEPALIVE, ["d"], "engine failed"]


def test_one_write_sends_what_a_batch_framed_at_once():
    import asyncio

    from colibri.api.sse import one_write

    class Resp:
        def __init__(self):
            self.writes = []

        async def write(self, data):
            self.writes.append(data)

    async def main():
        holder = SimpleNamespace(resp=Resp())
        async with one_write(holder):
            for part in (b"1", b"2", b"3"):
                await holder.resp.write(part)
        sent = list(holder.resp.writes)
        with pytest.raises(KeyError):  # framing fails part way: what was framed still goes out
            async with one_write(holder):
                await holder.resp.write(b"4")
                raise KeyError("bug")
        with pytest.raises(ConnectionResetError):  # the client left: nothing more is sent
            async with one_write(holder):
                await holder.resp.write(b"5")
                raise ConnectionResetError
        return sent, holder.resp.writes

    sent, after = asyncio.run(main())
    assert sent == [b"123"] and after == [b"123", b"4"]
