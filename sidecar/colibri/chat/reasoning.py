"""Splitting a reply into its reasoning block and its answer, as text streams in.

Families with a reasoning mode write a block before the answer (or start inside
it when the prompt's cue opened it): `<think>...</think>` for most, Gemma 4's
thought channel `<|channel>thought\n...<channel|>`. The block's text goes to
`reasoning_content`, the rest to `content`; a tag split across two pieces is
held back until it is whole. `answer` records which input characters became
content (log-prob alignment). The tags are the family's (`tags_for`, keyed by
the template as llama.cpp detects it); gpt-oss's harmony channels are
chat/harmony.py's.
"""
from __future__ import annotations

from dataclasses import dataclass

from colibri.chat.spans import Spans


@dataclass(frozen=True)
class ReasoningTags:
    """A family's reasoning block: its open and close texts, and the texts among them the
    parser must see even where the model file holds them as control tokens."""

    name: str
    open: str
    close: str
    markers: tuple[str, ...]


THINK = ReasoningTags("think", "<think>", "</think>", ("<think>", "</think>"))
# Gemma 4 (llama.cpp common/parsers/gemma4.cpp: thinking_start_tag "<|channel>thought", end "<channel|>";
# <|channel> and <channel|> are control tokens, "thought" is text)
GEMMA4 = ReasoningTags("gemma4", "<|channel>thought", "<channel|>", ("<|channel>", "<channel|>"))
OPEN, CLOSE = THINK.open, THINK.close


def tags_for(source: str | None) -> ReasoningTags | None:
    """The reasoning block a chat template knows (None: no reasoning mode, or harmony's channels).
    Gemma 4's is its thought channel (llama.cpp tells the family by its `<|tool_call>call:` calls;
    the channel is what matters here); any other template that writes `<think>` knows THINK."""
    if not source:
        return None
    if "<|channel>thought" in source:
        return GEMMA4
    if "<think>" in source:
        return THINK
    return None


class ReasoningSplitter:
    def __init__(self, in_reasoning: bool = False, tags: ReasoningTags = THINK):
        self.tags = tags
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
        opening, closing = self.tags.open, self.tags.close
        while buf:
            if self.in_reasoning:
                if self._after_open:  # the newlines that follow the open tag are layout, however they arrive
                    rest = buf.lstrip("\n")
                    buf, base = rest, base + len(buf) - len(rest)
                    if not buf:
                        break
                    self._after_open = False
                i = buf.find(closing)
                if i < 0:
                    keep = _partial(buf, closing)
                    reasoning.append(buf[:len(buf) - keep])
                    self._held = buf[len(buf) - keep:]
                    break
                reasoning.append(buf[:i])
                buf, base = buf[i + len(closing):], base + i + len(closing)
                self.in_reasoning = False
                self._started = True
                self._after_block = True  # the newlines that follow the tag are layout, not answer
                continue
            if not self._started:
                stripped = buf.lstrip()
                if stripped.startswith(opening):
                    self.in_reasoning = self._started = self._after_open = True
                    rest = stripped[len(opening):]
                    buf, base = rest, base + len(buf) - len(rest)
                    continue
                if opening.startswith(stripped):  # maybe the start of the tag: wait for more
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
