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
