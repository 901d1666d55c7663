"""Turn markers a model writes by itself: a model that opens a new turn (`<start_of_turn>`,
`<|im_start|>`, GLM's `<|user|>`) without its end-of-turn token has finished its reply.

A marker before any visible text is skipped (some templates make models write a
role marker first); after visible text it ends the reply (the implicit stop).
"""
from __future__ import annotations

SKIP, END = "skip", "end"


def turn_marker(token: int, marker_ids: frozenset[int], shown: bool) -> str | None:
    """SKIP or END when `token` opens a turn, None otherwise; `shown`: visible text went out."""
    if token not in marker_ids:
        return None
    return END if shown else SKIP
