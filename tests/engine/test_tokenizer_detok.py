"""sidecar/colibri/detok.py: streamed detokenization never emits a broken character."""
from __future__ import annotations

import pytest

from colibri.detok import Detokenizer, detokenize_text

# a toy vocabulary whose tokens cut UTF-8 sequences anywhere
PIECES = {
    0: b"Hello ",
    1: "😀".encode()[:1],
    2: "😀".encode()[1:3],
    3: "😀".encode()[3:],
    4: b"\xe6\x97",       # first two bytes of 日
    5: b"\xa5 end",       # its last byte, then ASCII
    6: b"\xff",           # never valid
    7: b"caf\xc3",        # é split
    8: b"\xa9!",
}


def stream(tokens):
    d = Detokenizer(PIECES.__getitem__)
    outs = [d.add(t) for t in tokens]
    return outs, d


def test_split_emoji_is_held_until_complete():
    outs, d = stream([0, 1, 2, 3])
    assert outs == ["Hello ", "", "", "😀"]
    assert d.flush() == ""


def test_split_cjk_and_latin():
    outs, _ = stream([4, 5, 7, 8])
    assert outs == ["", "日 end", "caf", "é!"]


def test_invalid_byte_becomes_replacement_at_once():
    outs, _ = stream([0, 6, 0])
    assert outs == ["Hello ", "\ufffd", "Hello "]


def test_dangling_partial_character_flushes_as_replacement():
    outs, d = stream([0, 1, 2])
    assert "".join(outs) == "Hello "
    assert d.pending == "😀".encode()[:3]
    assert d.flush() == "\ufffd"
    assert d.pending == b""


def test_streamed_equals_decoded_at_once():
    tokens = [0, 1, 2, 3, 4, 5, 6, 7, 8, 0]
    outs, d = stream(tokens)
    assert "".join(outs) + d.flush() == detokenize_text(PIECES.__getitem__, tokens)
    assert d.n_bytes == sum(len(PIECES[t]) for t in tokens)


def test_feed_and_reset():
    d = Detokenizer()
    assert d.feed(b"\xe6") == "" and d.feed(b"\x97\xa5") == "日"
    d.feed(b"\xe6")
    d.reset()
    assert d.pending == b"" and d.n_bytes == 0
    with pytest.raises(TypeError):
        d.add(1)


def test_with_the_engine(default_model):
    """Byte-fallback tokens of the default model stream back to the exact text."""
    from colibri.engine import Engine

    text = "日本語 😀👨‍👩‍👧 \U0001d518\U0001d52b\U0001d526 ok \u0301\u0302"
    with Engine(default_model, vocab_only=True) as gemma:
        toks = gemma.tokenize(text, add_bos=False)
        d = Detokenizer(gemma.token_bytes)
        outs = [d.add(t) for t in toks]
        assert "".join(outs) + d.flush() == text
        assert all("\ufffd" not in o for o in outs)
