"""Which characters of a text survive a filter, as ordered [start, end) spans.

Each stream stage (stop sequences, the reasoning split, the tool-call section)
passes on some characters of its input and drops others; it records the spans
it passed on, in its input's coordinates. Composing the stages' spans maps the
final text back onto the raw generated text, so each token's entry in a
log-prob array reports exactly the characters of it that the client received.
"""
from __future__ import annotations


class Spans:
    def __init__(self, spans: list[tuple[int, int]] | None = None):
        self.spans: list[tuple[int, int]] = []
        for s, e in spans or []:
            self.add(s, e)

    def add(self, start: int, end: int) -> None:
        if end <= start:
            return
        if self.spans and self.spans[-1][1] == start:  # adjacent: one span
            self.spans[-1] = (self.spans[-1][0], end)
        else:
            self.spans.append((start, end))

    @property
    def length(self) -> int:
        return sum(e - s for s, e in self.spans)

    def through(self, outer: "Spans") -> "Spans":
        """These spans (in the coordinates of `outer`'s output) in `outer`'s input coordinates."""
        out = Spans()
        base = 0  # offset in outer's output where the current outer span starts
        pieces = iter(outer.spans)
        current = next(pieces, None)
        for s, e in self.spans:
            while s < e and current is not None:
                length = current[1] - current[0]
                if s >= base + length:
                    base += length
                    current = next(pieces, None)
                    continue
                take = min(e, base + length)
                out.add(current[0] + s - base, current[0] + take - base)
                s = take
        return out

    def pick(self, start: int, end: int) -> list[tuple[int, int]]:
        """The parts of [start, end) these spans cover."""
        return [(max(s, start), min(e, end)) for s, e in self.spans if s < end and e > start]

    def covers(self, pos: int) -> bool:
        return any(s <= pos < e for s, e in self.spans)
