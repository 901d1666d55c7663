"""sidecar/colibri/chat/reasoning.py on its own: the `<think>...</think>` split of a streamed reply.

The contract: only a block at the start of the reply (after any whitespace) is
reasoning, or the whole reply up to `</think>` when the prompt's cue opened the
block; the newlines right after either tag are layout; a tag split across pieces
is held until it is whole or can no longer be one; an unterminated block is all
reasoning; `answer` records which input characters became content.
"""
from __future__ import annotations

import random

import pytest

from colibri.chat.reasoning import CLOSE, OPEN, ReasoningSplitter


def run(pieces, in_reasoning=False):
    """(reasoning, content, answer spans) of feeding `pieces` then flushing."""
    r = ReasoningSplitter(in_reasoning)
    outs = [r.feed(p) for p in pieces] + [r.flush()]
    return "".join(a for a, _ in outs), "".join(c for _, c in outs), r.answer.spans


def reference(text, in_reasoning=False):
    """The split of a whole reply, written plainly: (reasoning, content)."""
    if not in_reasoning:
        rest = text.lstrip()
        if not rest.startswith(OPEN):
            return "", text
        text = rest[len(OPEN):]
    text = text.lstrip("\n")
    i = text.find(CLOSE)
    if i < 0:
        return text, ""
    return text[:i], text[i + len(CLOSE):].lstrip("\n")


def two_cut_splits(text):
    """`text` cut at every one and every two places (and char by char)."""
    yield [text]
    yield list(text)
    for i in range(len(text) + 1):
        for j in range(i, len(text) + 1):
            yield [text[:i], text[i:j], text[j:]]


def random_split(text, rng):
    pieces, i = [], 0
    while i < len(text):
        j = i + rng.choice([0, 1, 1, 2, 3, 4, 8])
        pieces.append(text[i:j])
        i = j
    return pieces


def test_constants_are_the_tags():
    assert (OPEN, CLOSE) == ("<think>", "</think>")


# ---- a block at the start ----------------------------------------------------------

def test_a_leading_block_goes_to_reasoning_the_rest_to_content():
    assert run(["<think>plan it</think>The answer."])[:2] == ("plan it", "The answer.")


def test_newlines_after_each_tag_are_layout_the_ones_inside_are_not():
    text = "<think>\n\nstep 1\nstep 2\n</think>\n\nLine 1\n\nLine 2\n"
    assert run([text])[:2] == ("step 1\nstep 2\n", "Line 1\n\nLine 2\n")


def test_only_newlines_are_layout_after_the_close():
    assert run(["<think>x</think> \n answer"])[:2] == ("x", " \n answer")
    assert run(["<think> \tx</think>y"])[:2] == (" \tx", "y")


def test_whitespace_before_a_leading_block_is_dropped():
    assert run(["\n  \t<think>r</think>c"])[:2] == ("r", "c")
    for pieces in (["\n", " ", "<th", "ink>r</think>c"], ["\n  ", "\t<think>", "r</think>", "c"]):
        assert run(pieces)[:2] == ("r", "c"), pieces


def test_empty_block():
    assert run(["<think></think>answer"])[:2] == ("", "answer")
    assert run(["<think>\n\n</think>\n\nanswer"])[:2] == ("", "answer")


def test_the_split_in_every_one_and_two_cut_split():
    text = "<think>\nab </think>\n\ncd"
    for pieces in two_cut_splits(text):
        assert run(pieces) == ("ab ", "cd", [(len(text) - 2, len(text))]), pieces


def test_each_feed_returns_only_what_it_completed():
    r = ReasoningSplitter()
    assert r.feed("<th") == ("", "")  # maybe the tag: held
    assert r.feed("ink>\nst") == ("st", "")
    assert r.feed("ep</th") == ("ep", "")  # "</th" may start the close tag
    assert r.feed("ink>") == ("", "")
    assert r.feed("\n") == ("", "")  # layout
    assert r.feed("\nAns") == ("", "Ans")
    assert r.feed("wer") == ("", "wer")
    assert r.flush() == ("", "")
    assert r.in_reasoning is False


def test_a_partial_close_that_fails_is_reasoning_text():
    r = ReasoningSplitter()
    assert r.feed("<think>a </th") == ("a ", "")
    assert r.feed("at was</") == ("</that was", "")
    assert r.feed("think>ok") == ("", "ok")


def test_close_tag_is_found_however_it_is_cut():
    for i in range(1, len(CLOSE)):
        pieces = ["<think>r" + CLOSE[:i], CLOSE[i:] + "c"]
        assert run(pieces)[:2] == ("r", "c"), pieces


# ---- the block opened by the prompt ------------------------------------------------

def test_cue_opened_block_reasoning_until_the_close():
    assert run(["why</think>so"], in_reasoning=True)[:2] == ("why", "so")
    assert run(["\n\nwhy\n</think>\n\nso"], in_reasoning=True)[:2] == ("why\n", "so")
    r = ReasoningSplitter(in_reasoning=True)
    assert r.in_reasoning
    assert r.feed("\n") == ("", "") and r.feed("\nhm") == ("hm", "")


def test_cue_opened_block_a_think_tag_inside_is_just_text():
    assert run(["a <think> b</think>c"], in_reasoning=True)[:2] == ("a <think> b", "c")


def test_cue_opened_block_starts_at_once_no_leading_text_is_content():
    # the reply is inside the block from its first character: nothing waits for an open tag
    r = ReasoningSplitter(in_reasoning=True)
    assert r.feed("Hello") == ("Hello", "")


# ---- unterminated reasoning --------------------------------------------------------

def test_unterminated_block_is_all_reasoning():
    r = ReasoningSplitter()
    assert r.feed("<think>\nstill thinking") == ("still thinking", "")
    assert r.feed(" more") == (" more", "")
    assert r.flush() == ("", "")
    assert r.in_reasoning and r.answer.spans == []


def test_unterminated_block_ending_in_a_partial_close_gives_it_back_as_reasoning():
    r = ReasoningSplitter()
    assert r.feed("<think>x</thi") == ("x", "")
    assert r.flush() == ("</thi", "")
    assert r.answer.spans == []
    assert run(["cut off </thin"], in_reasoning=True) == ("cut off </thin", "", [])


def test_open_tag_alone():
    assert run(["<think>"]) == ("", "", [])
    assert run(["<think>", "\n\n"]) == ("", "", [])


# ---- no block: all content (the model did not reason, or reasoning is off) ---------

@pytest.mark.parametrize("text", [
    "Plain answer.",
    "  Indented answer.",
    "\n\nAfter newlines",
    "<thead>table</thead>",  # looks like the tag for three characters
    "<think",  # the tag, unfinished, at the end
    "<",
    "   ",  # whitespace only
    "</think>not opened",
    "2 < 3 and <think> later",
    "",
])
def test_without_a_leading_block_the_text_passes_unchanged(text):
    for pieces in two_cut_splits(text):
        assert run(pieces) == ("", text, [(0, len(text))] if text else []), pieces


def test_a_block_mid_text_is_content():
    text = "Sure. <think>not reasoning</think> ok"
    assert run([text]) == ("", text, [(0, len(text))])


def test_a_second_block_after_the_first_is_content():
    assert run(["<think>a</think>b<think>c</think>d"])[:2] == ("a", "b<think>c</think>d")


def test_a_possible_tag_is_held_then_released_when_it_cannot_be_one():
    r = ReasoningSplitter()
    assert r.feed(" <thi") == ("", "")
    assert r.feed("s") == ("", " <this")  # leading whitespace kept: no block after all
    assert r.feed(" <think>") == ("", " <think>")
    assert r.flush() == ("", "")


def test_leading_whitespace_is_held_until_the_reply_shows_its_shape():
    r = ReasoningSplitter()
    assert r.feed("\n") == ("", "")
    assert r.feed(" ") == ("", "")
    assert r.feed("Hi") == ("", "\n Hi")
    r = ReasoningSplitter()
    assert r.feed("\n\n") == ("", "")
    assert r.flush() == ("", "\n\n")


# ---- answer spans ------------------------------------------------------------------

def test_answer_spans_in_input_offsets():
    text = "  <think>\nr</think>\n\nHello"
    assert run([text]) == ("r", "Hello", [(len(text) - 5, len(text))])
    for pieces in two_cut_splits(text):
        assert run(pieces)[2] == [(len(text) - 5, len(text))], pieces


def test_answer_spans_of_a_flushed_tail():
    r = ReasoningSplitter()
    r.feed("ab")
    r.feed(" <th")  # content already started: nothing held
    assert r.flush() == ("", "")
    assert r.answer.spans == [(0, 6)]
    r = ReasoningSplitter()
    r.feed("  <th")
    assert r.flush() == ("", "  <th") and r.answer.spans == [(0, 5)]


# ---- property: any split equals the whole, and the whole equals the plain reading ---

def test_any_split_matches_the_plain_reading():
    rng = random.Random(3)
    parts = ["<think>", "</think>", "<th", "</", "ink>", "x", "é", "\n", "\n\n", " ", "\t", "<", ">"]
    for _ in range(6000):
        text = "".join(rng.choice(parts) for _ in range(rng.randint(0, 9)))
        cued = rng.random() < 0.3
        want = reference(text, cued)
        reasoning, content, spans = run(random_split(text, rng), cued)
        assert (reasoning, content) == want, (text, cued)
        assert run(list(text), cued)[:2] == want, (text, cued)
        assert "".join(text[s:e] for s, e in spans) == content, (text, cued)
