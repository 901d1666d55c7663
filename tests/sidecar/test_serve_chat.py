"""Prompt rendering (Gemma 3's official template, a GGUF's own ChatML template), continuation
of a trailing assistant turn, stop sequences and the reasoning split (pure, or on the real
tokenizer)."""
from __future__ import annotations

import pytest

from colibri.api.errors import as_api_error
from colibri.errors import InvalidRequest
from colibri.chat.messages import Message, Thinking
from colibri.chat.builtin_templates import GEMMA3
from colibri.chat.prompt import ChatFormat
from colibri.chat.reasoning import ReasoningSplitter
from colibri.chat.stops import StopFilter
from colibri.chat.template import ChatTemplate

GEMMA = ChatFormat(ChatTemplate(GEMMA3, bos_token="<bos>", eos_token="<eos>"))
CHATML_SRC = ("{%- for message in messages -%}"
              "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' -}}"
              "{%- endfor -%}"
              "{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n' -}}{%- endif -%}")
CHATML = ChatFormat(ChatTemplate(CHATML_SRC))
QWEN3_LIKE = ChatFormat(ChatTemplate(
    "{%- for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor -%}"
    "{%- if add_generation_prompt %}<|im_start|>assistant\n"
    "{% if enable_thinking is defined and not enable_thinking %}<think>\n\n</think>\n\n{% endif %}{% endif %}"))


def M(role, content, **kw):
    return Message(role, content, **kw)


def test_gemma3_user_turn_is_googles_format():
    p = GEMMA.render([M("user", "Hello")])
    assert p.text == "<bos><start_of_turn>user\nHello<end_of_turn>\n<start_of_turn>model\n"
    assert not p.continued


def test_gemma3_system_folds_into_first_user_turn():
    p = GEMMA.render([M("system", "Be brief."), M("user", "  Hi  "), M("assistant", "Hello!"), M("user", "Bye")])
    assert p.text == ("<bos><start_of_turn>user\nBe brief.\n\nHi<end_of_turn>\n"
                      "<start_of_turn>model\nHello!<end_of_turn>\n"
                      "<start_of_turn>user\nBye<end_of_turn>\n<start_of_turn>model\n")


def test_gemma3_roles_must_alternate():
    with pytest.raises(InvalidRequest) as err:
        GEMMA.render([M("user", "a"), M("user", "b")])
    assert as_api_error(err.value).status == 400 and err.value.param == "messages"
    assert "alternate" in err.value.message


def test_continuation_ends_inside_the_assistant_turn():
    p = GEMMA.render([M("user", "Capital of France?"), M("assistant", "The capital of France is")])
    assert p.continued
    assert p.text == ("<bos><start_of_turn>user\nCapital of France?<end_of_turn>\n"
                      "<start_of_turn>model\nThe capital of France is")
    p = CHATML.render([M("user", "Count"), M("assistant", "1, 2,")])
    assert p.text == "<|im_start|>user\nCount<|im_end|>\n<|im_start|>assistant\n1, 2,"


def test_continuation_refuses_trailing_whitespace():
    with pytest.raises(InvalidRequest) as err:
        GEMMA.render([M("user", "x"), M("assistant", "The answer is ")])
    assert (err.value.code, err.value.param) == ("invalid_value", "messages.1.content")


def test_continuation_off_completes_the_turn_and_cues_a_new_one():
    p = GEMMA.render([M("user", "x"), M("assistant", "partial")], continue_assistant=False)
    assert not p.continued
    assert p.text.endswith("<start_of_turn>model\npartial<end_of_turn>\n<start_of_turn>model\n")
    # trailing whitespace is fine when nothing is continued
    GEMMA.render([M("user", "x"), M("assistant", "partial ")], continue_assistant=False)


def test_empty_trailing_assistant_turn_asks_for_a_fresh_answer():
    assert GEMMA.render([M("user", "x"), M("assistant", "")]).text == GEMMA.render([M("user", "x")]).text


def test_reasoning_kwargs_reach_the_template_and_are_refused_without_one():
    assert QWEN3_LIKE.has_reasoning and not GEMMA.has_reasoning
    off = QWEN3_LIKE.render([M("user", "x")], thinking=Thinking(effort="none"))
    assert off.text.endswith("<think>\n\n</think>\n\n") and not off.in_reasoning
    on = QWEN3_LIKE.render([M("user", "x")], thinking=Thinking(enable=True))
    assert on.text.endswith("<|im_start|>assistant\n")
    for thinking, param in ((Thinking(enable=True), "enable_thinking"), (Thinking(effort="high"), "reasoning_effort"),
                            (Thinking(preserve=True), "preserve_thinking")):
        with pytest.raises(InvalidRequest) as err:
            GEMMA.render([M("user", "x")], thinking=thinking)
        assert (err.value.code, err.value.param) == ("unsupported_parameter", param)
    GEMMA.render([M("user", "x")], thinking=Thinking(enable=False, effort="none"))  # asking for none is fine


def test_no_template_refuses_chat_by_name():
    with pytest.raises(InvalidRequest) as err:
        ChatFormat(None).render([M("user", "x")])
    assert (as_api_error(err.value).status, err.value.code) == (400, "unsupported_endpoint")


def test_template_sandbox_blocks_python_internals():
    t = ChatFormat(ChatTemplate("{{ messages.__class__.__mro__ }}"))
    with pytest.raises(InvalidRequest):
        t.render([M("user", "x")])


# ---- stop sequences ----------------------------------------------------------------

def feed_all(f: StopFilter, pieces: list[str]) -> str:
    return "".join(f.feed(p) for p in pieces) + f.flush()


@pytest.mark.parametrize("pieces, stops, want, matched", [
    (["Hello", " wor", "ld"], ["world"], "Hello ", "world"),
    (["Hel", "lo"], ["lo"], "Hel", "lo"),
    (["ab", "c", "d"], ["bcd"], "a", "bcd"),
    (["a", "b"], ["bcd"], "ab", None),  # a partial stop at the end is text after all
    (["x\n", "\ny"], ["\n\n"], "x", "\n\n"),
    (["12", "3"], ["23", "123"], "", "123"),  # the earliest match wins
])
def test_stop_filter(pieces, stops, want, matched):
    f = StopFilter(stops)
    assert feed_all(f, pieces) == want
    assert f.matched == matched


def test_stop_filter_holds_back_only_possible_starts():
    f = StopFilter(["END"])
    assert f.feed("Hello E") == "Hello "
    assert f.feed("x") == "Ex"
    assert f.feed("EN") == ""
    assert f.feed("D tail") == "" and f.matched == "END"


def test_ignore_leading_stop():
    f = StopFilter(["<|user|>"], ignore_leading=True)
    assert feed_all(f, ["\n<|us", "er|>", "Answer", " <|user|> more"]) == "\nAnswer "
    assert f.matched == "<|user|>"


def test_reasoning_split_streams_both_parts():
    r = ReasoningSplitter()
    pieces = ["<th", "ink>\nstep 1", " step 2</thi", "nk>\n\n", "The", " answer"]
    out = [r.feed(p) for p in pieces] + [r.flush()]
    assert "".join(a for a, _ in out) == "step 1 step 2"
    assert "".join(b for _, b in out) == "The answer"
    r = ReasoningSplitter(in_reasoning=True)  # the cue opened the block
    assert r.feed("why</think>so") == ("why", "so")
    r = ReasoningSplitter()
    assert r.feed("plain <think> text") == ("", "plain <think> text")  # only a leading block is reasoning


def test_turn_marker_skips_before_text_and_ends_after():
    from colibri.chat.turns import END, SKIP, turn_marker

    markers = frozenset({105})
    assert turn_marker(105, markers, shown=False) == SKIP  # a leading role marker is skipped
    assert turn_marker(105, markers, shown=True) == END  # the model opened a new turn: its reply is over
    assert turn_marker(7, markers, shown=True) is None


def test_reasoning_layout_newlines_are_dropped_however_they_arrive():
    split = ReasoningSplitter()
    parts = [split.feed(p) for p in ("<think>", "\n", "hm", "</think>", "\n", "\nYes")] + [split.flush()]
    assert "".join(r for r, _ in parts) == "hm" and "".join(c for _, c in parts) == "Yes"
    assert split.answer.spans == [(len("<think>\nhm</think>\n\n"), len("<think>\nhm</think>\n\nYes"))]


def test_stop_filter_records_the_characters_it_let_through():
    f = StopFilter(["##"], ignore_leading=True)
    out = f.feed("##Hi #") + f.feed("# no")
    assert out == "Hi " and f.matched == "##"
    assert f.kept.spans == [(2, 5)] and f.after == " no"
