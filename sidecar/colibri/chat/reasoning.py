"""Splitting a reply into its reasoning block and its answer, as text streams in.

Families with a reasoning mode write `<think>...</think>` before the answer
(or start inside the block when the prompt's cue opened it). The block's
text goes to `reasoning_content`, the rest to `content`; a tag split across
two pieces is held back until it is whole. `answer` records which input
characters became content (log-prob alignment).
"""
from __future__ import annotations

from colibri.chat.spans import Spans

OPEN, CLOSE = "<think>", "</think>"


class ReasoningSplitter:
    def __init__(self, in_reasoning: bool = False):
        self.in_reasoning = in_reasoning
        self.answer = Spans()
        self._held = ""
        self._pos = 0  # input characters fed so far; _held is always their tail
        self._started = in_reasoning  # only a block at the start of the reply is reasoning
        self._after_block = False
        self._after_open = in_reasoning

    def feed(self, text: str) -> tuple[str, str]:
        """(reasoning, content) completed by this piece."""
        buf = self._held + text
        base = self._pos - len(self._held)  # input offset of buf[0]
        self._pos += len(text)
        self._held = ""
        reasoning, content = [], []
        while buf:
            if self.in_reasoning:
                if self._after_open:  # the newlines that follow <think> are layout, however they arrive
                    rest = buf.lstrip("\n")
                    buf, base = rest, base + len(buf) - len(rest)
                    if not buf:
                        break
                    self._after_open = False
                i = buf.find(CLOSE)
                if i < 0:
                    keep = _partial(buf, CLOSE)
                    reasoning.append(buf[:len(buf) - keep])
                    self._held = buf[len(buf) - keep:]
                    break
                reasoning.append(buf[:i])
                buf, base = buf[i + len(CLOSE):], base + i + len(CLOSE)
                self.in_reasoning = False
                self._started = True
                self._after_block = True  # the newlines that follow the tag are layout, not answer
                continue
            if not self._started:
                stripped = buf.lstrip()
                if stripped.startswith(OPEN):
                    self.in_reasoning = self._started = self._after_open = True
                    rest = stripped[len(OPEN):]
                    buf, base = rest, base + len(buf) - len(rest)
                    continue
                if OPEN.startswith(stripped):  # maybe the start of the tag: wait for more
                    self._held = buf
                    break
                self._started = True
            if self._after_block:
                rest = buf.lstrip("\n")
                buf, base = rest, base + len(buf) - len(rest)
                if not buf:
                    break
                self._after_block = False
            content.append(buf)
            self.answer.add(base, base + len(buf))
            break
        return "".join(reasoning), "".join(content)

    def flush(self) -> tuple[str, str]:
        held, self._held = self._held, ""
        if self.in_reasoning:
            return held, ""
        self.answer.add(self._pos - len(held), self._pos)
        return "", held


def _partial(buf: str, tag: str) -> int:
    for n in range(min(len(tag) - 1, len(buf)), 0, -1):
        if buf.endswith(tag[:n]):
            return n
    return 0
