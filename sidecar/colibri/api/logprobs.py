"""Log-probabilities as the OpenAI APIs shape them, built from the engine's per-token records
and checked before anything is answered.

    entries = described_tokens(records, raw, content)   # the tokens behind the returned text
    chat_logprobs(entries, token_text)                  # {"content": [...], "refusal": None}
    legacy_logprobs(prompt_rows, entries, token_text)   # {"tokens", "token_logprobs", ...}

Each generated token covers a span of the raw generated text; `content` says
which raw characters reached the reply (stops, reasoning, tool syntax and
template markers cut the rest). A token's entry reports exactly its
characters that reached the reply, so "".join over the entries is the reply.
A record the engine could not have produced is a named 5xx, never a
half-described 200.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

from colibri.api.errors import ApiError
from colibri.chat.spans import Spans
from colibri.serving.generation import TokenRecord

TokenText = Callable[[int], str]


@dataclass
class Entry:
    token: int
    text: str
    data: bytes
    logprob: float
    top: list[tuple[int, float]]
    truncated: bool


def number(x: float | None) -> float | None:
    """Six decimal digits, as the engine's values are reported; non-finite values as null."""
    if x is None or not math.isfinite(x):
        return None
    return round(x, 6)


def engine_fault(code: str, message: str) -> ApiError:
    return ApiError(500, code, message)


def check_top(top: list[tuple[int, float]] | None, k: int, n_vocab: int, where: str,
              malformed: str = "engine_logprob_tail_malformed") -> list[tuple[int, float]]:
    top = top or []
    if len(top) != k or any(not 0 <= t < n_vocab for t, _ in top):
        raise engine_fault(malformed, f"the engine's top-{k} table at {where} has {len(top)} readable entries")
    if len({t for t, _ in top}) != len(top):
        raise engine_fault("engine_duplicate_logprob_candidate", f"the engine's top-k table at {where} repeats "
                                                                 "a candidate")
    return top


def described_tokens(records: list[TokenRecord], raw: str, content: Spans, k: int, n_vocab: int) -> list[Entry]:
    """The entries of the tokens whose text reached the reply, each cut to what reached it."""
    if records and records[-1].end != len(raw):
        raise engine_fault("engine_logprob_records_incomplete", "the engine's records stop short of the generated "
                                                                "text")
    out = []
    for i, r in enumerate(records):
        if r.start == r.end:  # part of a character (kept when the character reached the reply) or a marker
            if r.data and content.covers(r.start):
                out.append(Entry(r.token, "", r.data, r.logprob, check_top(r.top, k, n_vocab, f"token {i}"), False))
            continue
        parts = content.pick(r.start, r.end)
        if not parts:
            continue
        text = "".join(raw[s:e] for s, e in parts)
        truncated = text != raw[r.start:r.end]
        out.append(Entry(r.token, text, text.encode("utf-8") if truncated else r.data, r.logprob,
                         check_top(r.top, k, n_vocab, f"token {i}"), truncated))
    return out


def chat_logprobs(entries: list[Entry], token_text: TokenText, token_bytes: Callable[[int], bytes]) -> dict:
    """choices[].logprobs of a chat completion: {token, logprob, bytes, top_logprobs} per entry;
    the top-k table is unsorted, as the engine reads it out."""
    content = []
    for e in entries:
        top = []
        for t, lp in e.top:
            if t == e.token:  # the entry's own token: its text and bytes, cut as the entry is
                top.append({"token": e.text, "logprob": number(lp), "bytes": list(e.data)})
            else:
                top.append({"token": token_text(t), "logprob": number(lp), "bytes": list(token_bytes(t))})
        content.append({"token": e.text, "logprob": number(e.logprob), "bytes": list(e.data), "top_logprobs": top})
    return {"content": content, "refusal": None}


@dataclass
class PromptRow:
    text: str
    logprob: float | None
    top: list[tuple[int, float]] | None


def legacy_logprobs(prompt_rows: list[PromptRow], entries: list[Entry], token_text: TokenText) -> dict:
    """choices[].logprobs of a legacy completion; text_offset counts characters of the returned
    text from 0 (the echoed prompt first, when there is one)."""
    tokens, token_logprobs, tops, offsets = [], [], [], []
    at = 0

    def add(text: str, logprob: float | None, table: dict | None) -> None:
        nonlocal at
        tokens.append(text)
        token_logprobs.append(number(logprob))
        tops.append(table)
        offsets.append(at)
        at += len(text)

    for row in prompt_rows:
        add(row.text, row.logprob, None if row.top is None else _table(row.top, token_text))
    for e in entries:
        add(e.text, e.logprob, _table(e.top, token_text, own=(e.token, e.text)))
    return {"tokens": tokens, "token_logprobs": token_logprobs, "top_logprobs": tops, "text_offset": offsets}


def _table(top: list[tuple[int, float]], token_text: TokenText, own: tuple[int, str] | None = None) -> dict:
    table: dict[str, float | None] = {}
    for t, lp in top:
        text = own[1] if own and t == own[0] else token_text(t)
        value = number(lp)
        if text not in table or (value is not None and (table[text] is None or value > table[text])):
            table[text] = value  # two ids spelling the same text: the likelier one
    return table


def prompt_rows(readout: list | None, n_prompt: int, k: int, n_vocab: int, texts: list[str]) -> list[PromptRow]:
    """The echoed prompt's rows from the engine's read-out (position 0 has no log-prob)."""
    if readout is None:
        raise engine_fault("engine_logprob_records_incomplete", "the engine sent no prompt read-out for the echo")
    if len(readout) != n_prompt:
        raise engine_fault("engine_echo_position_malformed", f"the engine read out {len(readout)} prompt positions, "
                                                             f"the prompt has {n_prompt}")
    rows = []
    for p, pos in enumerate(readout):
        if p == 0:
            rows.append(PromptRow(texts[0], None, None))
            continue
        if pos.logprob is None:
            raise engine_fault("engine_echo_position_malformed", f"prompt position {p} has no log-prob")
        top = check_top(pos.top, k, n_vocab, f"prompt position {p}", malformed="engine_echo_position_malformed")
        rows.append(PromptRow(texts[p], pos.logprob, top))
    return rows
