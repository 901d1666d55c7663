"""Drafts from a second, smaller model with the same vocabulary (engine/src/draft_model.h, `--draft-model`)
never change the tokens; a draft model whose vocabulary differs, or whose recurrent state cannot take back a
guess, is refused by name."""
from __future__ import annotations

import pytest

from colibri.engine import Engine
from colibri.errors import EngineError
from tests.engine.test_draft import run
from tests.fixtures import moe_models

pytest.importorskip("gguf")


def equals_plain(target, draft, prompts, max_tokens, ks=(1, 3), **req) -> list[dict]:
    with Engine(target, n_slots=len(prompts), n_ctx=512, n_threads=2, draft_tokens=-1) as e:
        want = run(e, prompts, max_tokens, **req)
        plain = e.stats()
    out = []
    for k in ks:
        with Engine(target, n_slots=len(prompts), n_ctx=512, n_threads=2, draft_tokens=k, draft_always=True,
                    draft_model=draft) as e:
            assert e.drafter == "model"
            got = run(e, prompts, max_tokens, **req)
            st = e.stats()
        assert got == want, f"draft_tokens={k}"
        assert st["tokens_generated"] == plain["tokens_generated"]
        out.append(st)
    return out


def test_fixture_pair_keeps_the_tokens():
    """Two tiny models of one vocabulary (a qwen3moe drafting for a glm4moe): random, so mostly wrong guesses,
    greedy and seeded sampled, two slots at once."""
    target, draft = moe_models.tiny("glm4moe", "Q8_0"), moe_models.tiny("qwen3moe", "Q8_0")
    prompts = [[5, 80, 200, 33], [7, 300, 12, 9, 9]]
    stats = equals_plain(target, draft, prompts, 40, ks=(1, 3, 8), ignore_eos=True)
    assert all(st["draft_tokens"] > 30 for st in stats), stats
    equals_plain(target, draft, prompts, 30, ks=(3,), ignore_eos=True, temperature=0.8, seed=7, n_logprobs=2)


def test_real_pair_keeps_the_tokens():
    """Qwen2.5-Coder 0.5B drafting for 1.5B (the same tokenizer): often right, the tokens those of 1.5B alone."""
    from tests.conftest import real_model_path

    target, draft = real_model_path("qwen2.5-coder-1.5b-instruct"), real_model_path("qwen2.5-coder-0.5b-instruct")
    with Engine(target, n_ctx=512, n_threads=2, vocab_only=True) as e:
        prompt = e.tokenize("<|im_start|>user\nWrite a Python function that reverses a string.<|im_end|>\n"
                            "<|im_start|>assistant\n", add_bos=True, special=True)
    stats = equals_plain(target, draft, [prompt], 48, ks=(3,))
    assert stats[0]["draft_accepted"] > stats[0]["draft_tokens"] // 4, stats  # small models agree often


def test_refused_draft_models():
    target = moe_models.tiny("glm4moe", "Q8_0")
    from tests.conftest import real_model_path

    with pytest.raises(EngineError, match="vocabulary"):  # Gemma's tokens are not the fixtures'
        Engine(target, n_ctx=256, n_threads=2, draft_model=real_model_path("gemma-3-270m"))
    with pytest.raises(EngineError, match="recurrent state"):
        Engine(target, n_ctx=256, n_threads=2, draft_model=moe_models.tiny("qwen35moe", "Q8_0"))
    with pytest.raises(EngineError, match="GGUF|No such file|cannot open"):
        Engine(target, n_ctx=256, n_threads=2, draft_model="/nonexistent/draft.gguf")
    with Engine(target, n_ctx=256, n_threads=2, draft_tokens=-1, draft_model=moe_models.tiny("qwen3moe", "Q8_0")) as e:
        assert e.drafter == ""  # drafting off: the draft model is not even loaded
