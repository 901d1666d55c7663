"""Incremental detokenization: token ids in, text out, never a broken character.

A token stands for bytes, not characters: byte-fallback tokens (`<0xE6>`) and
byte-level BPE tokens can end in the middle of a UTF-8 sequence. A streamed
reply must hold such a tail back until the bytes that complete it arrive, and
emit U+FFFD only for bytes that can never become a character. This is
codecs' incremental UTF-8 decoder over the engine's exact token bytes.

    detok = Detokenizer(engine.token_bytes)
    for tok in tokens:
        send(detok.add(tok))        # "" while a character is incomplete
    send(detok.flush())             # U+FFFD for a dangling partial character
"""
from __future__ import annotations

import codecs
from typing import Callable, Iterable

TokenBytes = Callable[[int], bytes]


class Detokenizer:
    """Turns a stream of tokens (or raw pieces) into text, UTF-8-safe."""

    def __init__(self, token_bytes: TokenBytes | None = None, errors: str = "replace"):
        self._token_bytes = token_bytes
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors=errors)
        self.n_bytes = 0  # bytes fed so far

    def add(self, tok: int) -> str:
        """The text that token `tok` completes ("" if it only starts a character)."""
        if self._token_bytes is None:
            raise TypeError("Detokenizer.add needs a token_bytes function; use feed(bytes)")
        return self.feed(self._token_bytes(tok))

    def add_many(self, tokens: Iterable[int]) -> str:
        return "".join(self.add(t) for t in tokens)

    def feed(self, piece: bytes) -> str:
        """The text completed by these bytes; a trailing partial character is held."""
        self.n_bytes += len(piece)
        return self._decoder.decode(piece, final=False)

    @property
    def pending(self) -> bytes:
        """Bytes held back: the start of a character not yet complete."""
        return self._decoder.getstate()[0]

    def flush(self) -> str:
        """End of stream: what is still held (an incomplete character decodes as U+FFFD)."""
        return self._decoder.decode(b"", final=True)

    def reset(self) -> None:
        self._decoder.reset()
        self.n_bytes = 0


def detokenize_text(token_bytes: TokenBytes, tokens: Iterable[int], errors: str = "replace") -> str:
    """All of `tokens` as text, decoded at once (equal to streaming them through a Detokenizer)."""
    return b"".join(token_bytes(t) for t in tokens).decode("utf-8", errors)
