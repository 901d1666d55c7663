"""sidecar/colibri/detok.py on its own: token bytes in, text out, never a broken character.

The contract: each piece gives exactly the characters it completes; the start of
a character that is not yet whole is held (`pending`) until its bytes arrive;
bytes that can never be part of a character become U+FFFD at once; `flush` turns
a dangling partial character into U+FFFD; streaming any split of the bytes gives
what decoding them at once gives (`detokenize_text`). The real tokenizer of the
default model (Gemma 3, SentencePiece with byte-fallback tokens `<0x00>`..`<0xFF>`)
supplies the token bytes where tokens are involved.
"""
from __future__ import annotations

import random

import pytest

from colibri.detok import Detokenizer, detokenize_text

EMOJI = "😀".encode()  # f0 9f 98 80
CJK = "日".encode()  # e6 97 a5


def stream(pieces, errors="replace"):
    """(per-piece outputs, flush) of feeding byte pieces."""
    d = Detokenizer(errors=errors)
    outs = [d.feed(p) for p in pieces]
    return outs, d.flush()


def random_split(data, rng):
    pieces, i = [], 0
    while i < len(data):
        j = i + rng.choice([0, 1, 1, 1, 2, 3, 5])
        pieces.append(data[i:j])
        i = j
    return pieces


# ---- multi-byte characters split across pieces --------------------------------------

@pytest.mark.parametrize("char", ["é", "日", "😀", "\U0001d518", "\u20ac", "\U0010ffff"])
def test_a_character_comes_out_with_its_last_byte(char):
    data = char.encode()
    d = Detokenizer()
    for k, byte in enumerate(data[:-1]):
        assert d.feed(bytes([byte])) == ""
        assert d.pending == data[:k + 1]
    assert d.feed(data[-1:]) == char
    assert d.pending == b"" and d.flush() == ""


def test_emoji_cut_at_every_place():
    for i in range(1, len(EMOJI)):
        outs, tail = stream([b"a" + EMOJI[:i], EMOJI[i:] + b"b"])
        assert outs == ["a", "😀b"] and tail == "", i


def test_cjk_and_emoji_run_cut_byte_by_byte():
    text = "日本語😀中文"
    outs, tail = stream([bytes([b]) for b in text.encode()])
    assert "".join(outs) == text and tail == ""
    assert [o for o in outs if o] == list(text)  # each character exactly once, the moment it is whole


def test_a_zwj_sequence_is_emitted_code_point_by_code_point():
    family = "👨\u200d👩\u200d👧"
    outs, _ = stream([c.encode() for c in family])
    assert outs == list(family)


def test_pending_plus_output_is_all_the_bytes_fed():
    rng = random.Random(1)
    text = "aé日😀\U0001d518 z"
    for _ in range(300):
        d = Detokenizer()
        said = ""
        fed = b""
        for piece in random_split(text.encode(), rng):
            said += d.feed(piece)
            fed += piece
            assert said.encode() + d.pending == fed
            assert len(d.pending) <= 3
            assert "\ufffd" not in said
            assert d.n_bytes == len(fed)
        assert said == text and d.flush() == ""


# ---- bytes that are not UTF-8 ------------------------------------------------------

@pytest.mark.parametrize("byte", [0x80, 0xBF, 0xC0, 0xC1, 0xF5, 0xFE, 0xFF])
def test_a_byte_that_never_starts_a_character_is_replaced_at_once(byte):
    d = Detokenizer()
    assert d.feed(bytes([byte])) == "\ufffd"
    assert d.pending == b""


def test_a_truncated_character_is_replaced_when_the_next_byte_cannot_continue_it():
    d = Detokenizer()
    assert d.feed(CJK[:2]) == ""
    assert d.feed(b"A") == "\ufffdA"  # one U+FFFD for the two bytes, then the A itself
    assert d.feed(EMOJI[:3]) == ""
    assert d.feed(EMOJI[:1]) == "\ufffd"  # a new start byte ends the old attempt
    assert d.pending == EMOJI[:1]


def test_invalid_sequences_decode_as_python_decodes_them_at_once():
    for bad in (b"\xc0\xaf", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\xe0\x80\x80", b"\xf0\x8f\xbf\xbf"):
        want = bad.decode("utf-8", "replace")
        assert "\ufffd" in want
        outs, tail = stream([bytes([b]) for b in bad])
        assert "".join(outs) + tail == want, bad


def test_dangling_partial_character_flushes_as_one_replacement():
    d = Detokenizer()
    assert d.feed(b"ok" + EMOJI[:3]) == "ok"
    assert d.pending == EMOJI[:3]
    assert d.flush() == "\ufffd"
    assert d.pending == b"" and d.flush() == ""


def test_error_handlers():
    assert stream([b"a\xff", CJK[:2]], errors="ignore") == (["a", ""], "")
    d = Detokenizer(errors="strict")
    assert d.feed(CJK[:1]) == ""  # incomplete is not an error yet
    with pytest.raises(UnicodeDecodeError):
        d.feed(b"\xff")
    d = Detokenizer(errors="strict")
    d.feed(CJK[:2])
    with pytest.raises(UnicodeDecodeError):
        d.flush()


def test_a_byte_order_mark_is_text_not_swallowed():
    assert stream([b"\xef\xbb", b"\xbfhi"]) == (["", "\ufeffhi"], "")


def test_nul_and_control_bytes_pass_through():
    assert stream([b"\x00\x1b[0m\x7f"]) == (["\x00\x1b[0m\x7f"], "")


def test_any_split_of_any_bytes_gives_the_whole_decoding():
    """Property: streaming equals bytes.decode(..., 'replace'), for valid and invalid input alike."""
    rng = random.Random(2)
    alphabet = [0x41, 0x80, 0x98, 0x9F, 0xA0, 0xBF, 0xC0, 0xC3, 0xE6, 0xED, 0xF0, 0xF4, 0x90, 0xF5, 0xFF]
    for _ in range(5000):
        data = bytes(rng.choice(alphabet) for _ in range(rng.randint(0, 12)))
        outs, tail = stream(random_split(data, rng))
        assert "".join(outs) + tail == data.decode("utf-8", "replace"), data


# ---- bookkeeping -------------------------------------------------------------------

def test_n_bytes_counts_every_byte_fed_and_reset_starts_over():
    d = Detokenizer()
    d.feed(b"ab")
    d.feed(EMOJI[:2])
    d.feed(b"")
    assert d.n_bytes == 4 and d.pending == EMOJI[:2]
    d.reset()
    assert d.n_bytes == 0 and d.pending == b""
    assert d.feed(EMOJI[2:]) == "\ufffd\ufffd"  # the old start is gone: its continuation bytes stand alone
    assert d.feed(CJK) == "日"


def test_add_needs_a_token_bytes_function():
    with pytest.raises(TypeError):
        Detokenizer().add(0)


def test_add_and_add_many_look_up_each_token():
    vocab = {0: b"caf", 1: b"\xc3", 2: b"\xa9", 3: EMOJI[:2], 4: EMOJI[2:]}
    looked_up = []

    def token_bytes(tok):
        looked_up.append(tok)
        return vocab[tok]

    d = Detokenizer(token_bytes)
    assert d.add(0) == "caf" and d.add(1) == "" and d.add(2) == "é"
    assert d.add_many([3, 4, 0]) == "😀caf"
    assert looked_up == [0, 1, 2, 3, 4, 0]
    assert d.n_bytes == 3 + 1 + 1 + 4 + 3
    assert detokenize_text(vocab.__getitem__, [0, 1, 2, 3, 4]) == "café😀"
    assert detokenize_text(vocab.__getitem__, [0, 1, 3]) == "caf\ufffd\ufffd"
    assert detokenize_text(vocab.__getitem__, [1], errors="ignore") == ""


# ---- the real tokenizer ------------------------------------------------------------

@pytest.fixture(scope="module")
def gemma(default_model):
    from colibri.engine import Engine

    with Engine(default_model, vocab_only=True) as engine:
        yield engine


@pytest.fixture(scope="module")
def byte_tokens(default_model):
    """byte value -> id of the model's byte-fallback token `<0xNN>`, from the file's vocabulary."""
    from colibri.engine import GGUFFile

    with GGUFFile(default_model) as g:
        vocab = g.get("tokenizer.ggml.tokens")
    ids = {int(t[3:5], 16): i for i, t in enumerate(vocab) if len(t) == 6 and t.startswith("<0x") and t.endswith(">")}
    assert sorted(ids) == list(range(256))
    return ids


def test_byte_fallback_tokens_stand_for_single_raw_bytes(gemma, byte_tokens):
    for value, tok in byte_tokens.items():
        assert gemma.token_bytes(tok) == bytes([value]), hex(value)


def test_rare_character_arrives_as_byte_tokens_and_comes_out_whole(gemma):
    toks = gemma.tokenize("\U0001d518", add_bos=False)  # MATHEMATICAL FRAKTUR CAPITAL U: not in the vocabulary
    assert [len(gemma.token_bytes(t)) for t in toks] == [1, 1, 1, 1]
    d = Detokenizer(gemma.token_bytes)
    assert [d.add(t) for t in toks] == ["", "", "", "\U0001d518"]


def test_any_bytes_streamed_as_byte_tokens(gemma, byte_tokens):
    rng = random.Random(4)
    for _ in range(500):
        data = bytes(rng.choice([0x61, 0x80, 0xA9, 0xC3, 0xE6, 0x97, 0xA5, 0xF0, 0x9F, 0x98, 0xFF])
                     for _ in range(rng.randint(0, 10)))
        toks = [byte_tokens[b] for b in data]
        d = Detokenizer(gemma.token_bytes)
        assert "".join(d.add(t) for t in toks) + d.flush() == data.decode("utf-8", "replace"), data
        assert detokenize_text(gemma.token_bytes, toks) == data.decode("utf-8", "replace")


def test_invalid_bytes_through_the_tokenizer(gemma):
    # (no space right after the bad bytes: there llama.cpp's SentencePiece, and the engine with it, keeps
    # the escaped space as the bytes of U+2581)
    data = b"ok \xff\xe6\x97!then\xc3"
    toks = gemma.tokenize(data, add_bos=False)
    assert gemma.detokenize(toks) == data  # the tokenizer keeps the raw bytes
    d = Detokenizer(gemma.token_bytes)
    outs = [d.add(t) for t in toks]
    assert "".join(outs) == "ok \ufffd\ufffd!then"
    assert d.pending == b"\xc3" and d.flush() == "\ufffd"


@pytest.mark.parametrize("text", [
    "日本語のテキストと中文",
    "emoji 😀👍🏽 and a family 👨\u200d👩\u200d👧",
    "\U0001d518\U0001d52b\U0001d526\U0001d520\U0001d52c\U0001d521\U0001d522",
    "e\u0301 combining, Ω, ß, ﬁ, 한국어, العربية",
    "ascii only",
])
def test_real_tokens_stream_back_to_the_exact_text(gemma, text):
    toks = gemma.tokenize(text, add_bos=False)
    d = Detokenizer(gemma.token_bytes)
    said, fed = "", b""
    for t in toks:
        out = d.add(t)
        assert "\ufffd" not in out  # a character is never broken on the way
        said += out
        fed += gemma.token_bytes(t)
        assert said.encode() + d.pending == fed
    assert said + d.flush() == text
    assert d.n_bytes == len(text.encode())
    assert detokenize_text(gemma.token_bytes, toks) == text


def test_real_tokens_random_text(gemma):
    rng = random.Random(6)
    chars = "aé日😀\U0001d518ß한 \n👍🏽"
    for _ in range(200):
        text = "".join(rng.choice(chars) for _ in range(rng.randint(1, 12)))
        toks = gemma.tokenize(text, add_bos=False)
        d = Detokenizer(gemma.token_bytes)
        outs = [d.add(t) for t in toks]
        assert "".join(outs) + d.flush() == text, text
        assert all("\ufffd" not in o for o in outs), text
