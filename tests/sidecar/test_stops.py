"""sidecar/colibri/chat/stops.py on its own: stop sequences over streamed text.

The contract: a stop that appears in the text ends the reply and is cut from it;
while no stop has matched, exactly the characters that could still start a stop
are held back (no more, so the stream is not delayed; no less, so a stop split
across chunks is never let through); `flush` gives a held partial stop back as
text; `kept` says which input characters were let through and `after` holds the
input that follows a match.
"""
from __future__ import annotations

import random

import pytest

from colibri.chat.stops import StopFilter


def run(stops, pieces, ignore_leading=False):
    """(output, matched, after, kept spans) of feeding `pieces` then flushing."""
    f = StopFilter(stops, ignore_leading=ignore_leading)
    out = "".join(f.feed(p) for p in pieces) + f.flush()
    return out, f.matched, f.after, f.kept.spans


def compositions(text):
    """Every way of cutting `text` into consecutive non-empty pieces."""
    n = len(text)
    for mask in range(1 << max(n - 1, 0)):
        cuts = [i + 1 for i in range(n - 1) if mask >> i & 1]
        yield [text[a:b] for a, b in zip([0] + cuts, cuts + [n])]


def random_split(text, rng):
    """`text` in random pieces, empty pieces included now and then."""
    pieces, i = [], 0
    while i < len(text):
        j = i + rng.choice([0, 1, 1, 2, 3, 5])
        pieces.append(text[i:j])
        i = j
    return pieces


def longest_partial(text, stops):
    """Reference: the longest tail of `text` that is a proper prefix of a stop."""
    return max((n for s in stops if s for n in range(1, len(s)) if text.endswith(s[:n])), default=0)


def nested(stops):
    """Some stop occurs inside another one (the case where chunking changes which stop wins)."""
    return any(a != b and a in b for a in stops for b in stops)


# ---- the documented example and the basic cut ---------------------------------------

def test_the_docstring_example():
    f = StopFilter(["\n\n", "END"])
    assert f.feed("Hello EN") == "Hello "  # the "EN" could start "END"
    assert f.matched is None
    assert f.feed("D more") == ""
    assert f.matched == "END"
    assert f.flush() == ""
    assert f.after == " more"


def test_a_stop_in_one_chunk_is_cut_with_everything_after_it():
    f = StopFilter(["STOP"])
    assert f.feed("one two STOP three STOP four") == "one two "
    assert f.matched == "STOP" and f.after == " three STOP four"
    assert f.kept.spans == [(0, 8)]


def test_a_stop_at_the_very_start_leaves_nothing():
    f = StopFilter(["END"])
    assert f.feed("END of it") == "" and f.matched == "END"
    assert f.kept.spans == [] and f.after == " of it"


def test_a_stop_split_every_possible_way():
    text = "Hello END more"
    for pieces in compositions(text):
        assert run(["END"], pieces) == ("Hello ", "END", " more", [(0, 6)]), pieces


def test_no_stop_lets_everything_through_in_any_split():
    text = "Hi EN, E, ENx"
    for pieces in compositions(text):
        assert run(["END"], pieces) == (text, None, "", [(0, len(text))]), pieces


# ---- holding back exactly what could still be a stop -------------------------------

def test_only_the_possible_start_of_a_stop_is_held():
    f = StopFilter(["END"])
    assert f.feed("Hello E") == "Hello "
    assert f.feed("N") == ""
    assert f.feed("d") == "ENd"  # "ENd" cannot grow into "END": all of it goes out at once
    assert f.feed("xEN") == "x"


def test_held_text_released_when_the_partial_match_fails():
    f = StopFilter(["<|end|>"])
    assert f.feed("a <|en") == "a "
    assert f.feed("ough") == "<|enough"
    assert f.matched is None and f.flush() == ""


def test_held_partial_stop_at_the_end_is_text_after_all():
    f = StopFilter(["END"])
    assert f.feed("Hello EN") == "Hello "
    assert f.flush() == "EN"
    assert f.matched is None
    assert f.kept.spans == [(0, 8)]
    assert f.flush() == ""  # nothing is given twice


def test_self_overlapping_stop_keeps_only_the_tail_that_can_still_match():
    # "aab": after "aaa" the first "a" can no longer start the stop, the last two still can
    f = StopFilter(["aab"])
    assert [f.feed(c) for c in "aaab"] == ["", "", "a", ""]
    assert f.matched == "aab" and f.kept.spans == [(0, 1)]
    # "abab": "abaa" fails as a match from 0 and from 2, but its last "a" may start one
    f = StopFilter(["abab"])
    assert [f.feed(c) for c in "abaabab"] == ["", "", "", "aba", "", "", ""]
    assert f.matched == "abab" and f.kept.spans == [(0, 3)]


def test_a_stop_found_after_an_earlier_partial_failed():
    for pieces in (["ab", "abc!"], ["a", "b", "a", "b", "c", "!"], ["aba", "bc!"]):
        assert run(["abc"], pieces)[:3] == ("ab", "abc", "!"), pieces


def test_hold_back_is_exactly_the_longest_partial_stop_at_every_step():
    rng = random.Random(7)
    alphabet = "ab c\n"
    for _ in range(3000):
        stops = ["".join(rng.choice(alphabet) for _ in range(rng.randint(1, 4))) for _ in range(rng.randint(1, 3))]
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 14)))
        f = StopFilter(stops)
        fed = emitted = ""
        for piece in random_split(text, rng):
            emitted += f.feed(piece)
            fed += piece
            if f.matched is not None:
                break
            assert emitted == fed[:len(fed) - longest_partial(fed, stops)], (stops, fed, emitted)


# ---- several stops -----------------------------------------------------------------

def test_several_stops_the_first_in_the_text_wins_not_the_first_listed():
    f = StopFilter(["ZZ", "AA", "MM"])
    assert f.feed("x AA y ZZ z MM") == "x " and f.matched == "AA"
    assert f.after == " y ZZ z MM"


def test_several_stops_each_ends_the_reply():
    for stop, text in (("\n\n", "line\n\nrest"), ("User:", "lineUser:rest"), ("###", "line###rest")):
        for pieces in compositions(text):
            assert run(["\n\n", "User:", "###"], pieces)[:3] == ("line", stop, "rest"), pieces


def test_stops_sharing_a_prefix_hold_for_the_longer_and_release_on_divergence():
    f = StopFilter(["<end>", "<eot>"])
    assert f.feed("x<e") == "x"
    assert f.feed("n") == ""  # still "<end>"
    assert f.feed("x") == "<enx"
    assert f.feed("<eo") == ""
    assert f.feed("t>!") == "" and f.matched == "<eot>" and f.after == "!"


def test_at_one_start_the_longest_stop_of_a_chunk_wins():
    f = StopFilter(["ab", "abc"])
    assert f.feed("xabcd") == "x"
    assert f.matched == "abc" and f.after == "d"


def test_the_earliest_stop_wins_when_both_complete_in_one_piece():
    assert run(["23", "123"], ["12", "3"])[:2] == ("", "123")
    assert run(["b", "abc"], ["xabc"])[:2] == ("x", "abc")


def test_any_split_gives_what_the_whole_text_gives():
    """Property: with no stop inside another, chunking never changes the result."""
    rng = random.Random(11)
    alphabet = "ab\n "
    checked = 0
    while checked < 4000:
        stops = ["".join(rng.choice(alphabet) for _ in range(rng.randint(1, 4))) for _ in range(rng.randint(1, 3))]
        if nested(stops):
            continue
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 14)))
        ignore = rng.random() < 0.5
        assert run(stops, random_split(text, rng), ignore) == run(stops, [text], ignore), (stops, text, ignore)
        assert run(stops, list(text), ignore) == run(stops, [text], ignore), (stops, text, ignore)
        checked += 1


def test_nested_stops_give_the_same_answer_in_any_split():
    # "c" completes before "abcd" can, but "abcd" starts first: the filter waits and "abcd" wins
    for pieces in compositions("xabcd"):
        assert run(["abcd", "c"], pieces) == run(["abcd", "c"], ["xabcd"]), pieces
    assert run(["abcd", "c"], ["xabc", "e"])[:2] == ("xab", "c")  # "abcd" failed: "c" matches after all
    assert run(["abcd", "c"], ["xabc"])[:2] == ("xab", "c")  # the end of generation decides: "c"


def test_prefix_stops_report_the_same_match_in_any_split():
    for pieces in compositions("abcd"):
        assert run(["ab", "abc"], pieces) == run(["ab", "abc"], ["abcd"]), pieces


# ---- unicode -----------------------------------------------------------------------

def test_unicode_stops_split_between_characters():
    text = "答案是四。停止了吗"
    for pieces in compositions(text):
        assert run(["停止", "🛑"], pieces)[:3] == ("答案是四。", "停止", "了吗"), pieces


def test_emoji_sequence_stop_held_and_released_by_code_point():
    family = "👨\u200d👩\u200d👧"
    f = StopFilter([family])
    assert f.feed("hi 👨") == "hi "
    assert f.feed("\u200d") == ""
    assert f.feed("👩") == ""
    assert f.feed("!") == "👨\u200d👩!"  # not the family after all
    assert f.feed("👨\u200d👩\u200d") == ""
    assert f.feed("👧 bye") == "" and f.matched == family and f.after == " bye"
    assert f.kept.spans == [(0, 7)]  # offsets count code points: "hi 👨\u200d👩!"


def test_stops_match_characters_not_lookalikes():
    assert run(["é"], ["cafe\u0301 é!"])[:3] == ("cafe\u0301 ", "é", "!")  # e + combining acute is not é
    assert run(["\u03a9"], ["\u2126 \u03a9"])[:3] == ("\u2126 ", "\u03a9", "")  # OHM SIGN is not OMEGA


# ---- empty stops -------------------------------------------------------------------

@pytest.mark.parametrize("stops", [[], [""], ["", ""]])
def test_no_stops_pass_everything_holding_nothing(stops):
    f = StopFilter(stops)
    assert f.stops == []
    assert f.feed("any text, even E") == "any text, even E"
    assert f.feed("") == ""
    assert f.flush() == "" and f.matched is None
    assert f.kept.spans == [(0, 16)]


def test_an_empty_stop_among_real_ones_is_ignored():
    f = StopFilter(["", "END"])
    assert f.stops == ["END"]
    assert f.feed("aEND") == "a" and f.matched == "END"


def test_empty_pieces_change_nothing():
    f = StopFilter(["END"])
    assert f.feed("") == "" and f.feed("xE") == "x" and f.feed("") == ""
    assert f.feed("ND") == "" and f.matched == "END"


# ---- the finish and what follows it ------------------------------------------------

def test_matched_is_set_by_the_feed_that_completes_the_stop():
    f = StopFilter(["\n\n"])
    assert f.feed("para\n") == "para" and f.matched is None
    assert f.feed("\nnext") == "" and f.matched == "\n\n"


def test_after_a_match_everything_goes_to_after_and_nothing_out():
    f = StopFilter(["END"])
    assert f.feed("xEN") == "x"
    assert f.feed("D1") == ""
    assert f.feed("2EN") == "" and f.feed("D") == ""
    assert f.flush() == ""
    assert f.matched == "END" and f.after == "12END"
    assert f.kept.spans == [(0, 1)]


def test_assume_matched_sends_all_input_after_the_stop():
    f = StopFilter(["<tool_call>"])
    f.assume_matched("<tool_call>", '\n{"name": ')
    assert f.matched == "<tool_call>"
    assert f.feed('"f"}') == "" and f.feed("</tool_call>") == ""
    assert f.flush() == ""
    assert f.after == '\n{"name": "f"}</tool_call>'
    assert f.kept.spans == []


# ---- leading stops ignored ---------------------------------------------------------

def test_leading_stops_are_dropped_and_generation_goes_on():
    f = StopFilter(["<|user|>"], ignore_leading=True)
    assert f.feed("<|user|>") == "" and f.matched is None
    assert f.feed(" \n<|user|>Hi") == " \nHi"
    assert f.feed(" <|user|> bye") == " " and f.matched == "<|user|>" and f.after == " bye"


def test_leading_stop_after_whitespace_already_let_through():
    f = StopFilter(["##"], ignore_leading=True)
    assert f.feed("  ") == "  "
    assert f.feed("##x") == "x" and f.matched is None
    assert f.feed("##") == "" and f.matched == "##"
    assert f.kept.spans == [(0, 2), (4, 5)]


def test_leading_stop_is_not_ignored_without_the_option():
    assert run(["##"], ["##x"])[:2] == ("", "##")


def test_leading_stops_dropped_in_any_split():
    text = "\n##\n##Hi ## x"
    for pieces in compositions(text):
        assert run(["##"], pieces, ignore_leading=True) == ("\n\nHi ", "##", " x", [(0, 1), (3, 4), (6, 9)]), pieces


# ---- kept: the characters let through, in input offsets ----------------------------

def test_kept_spans_pick_out_exactly_the_output():
    """Property: output == the input characters at `kept`; `after` == the input past the match."""
    rng = random.Random(5)
    alphabet = "ab\n é"
    for _ in range(4000):
        stops = ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 4))) for _ in range(rng.randint(0, 3))]
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 16)))
        ignore = rng.random() < 0.5
        out, matched, after, spans = run(stops, random_split(text, rng), ignore)
        assert "".join(text[s:e] for s, e in spans) == out, (stops, text)
        assert all(a < b for a, b in spans) and all(p[1] < q[0] for p, q in zip(spans, spans[1:]))
        if matched is None:
            assert after == ""
        else:
            assert matched in stops and text.endswith(matched + after)
        if not ignore:  # nothing is dropped but the stop and what follows it
            assert out + (matched or "") + after == text
            assert not any(s and s in out for s in stops)
