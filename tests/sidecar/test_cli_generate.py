"""`coli generate` and `coli perplexity` on the real engine and default model."""
from __future__ import annotations

import json
import math

from tests.conftest import run_coli


def test_generate_json_is_deterministic(default_model):
    args = ("generate", "--prompt", "The capital of France is", "--max-tokens", "12", "--json", "--ctx", "256")
    a = run_coli(*args)
    assert a.returncode == 0, a.stderr
    out = json.loads(a.stdout)
    assert set(out) >= {"prompt_tokens", "tokens", "text", "tok_per_s", "finish_reason"}
    assert out["prompt_tokens"][0] == 2  # Gemma's BOS
    assert 0 < len(out["tokens"]) <= 12
    assert out["tok_per_s"]["prefill"] > 0 and out["tok_per_s"]["decode"] > 0
    assert "France" in out["text"] or len(out["text"]) > 0
    b = run_coli(*args)
    assert json.loads(b.stdout)["tokens"] == out["tokens"]


def test_generate_streams_text(default_model):
    r = run_coli("generate", "-p", "1, 2, 3, 4,", "-n", "8", "--ctx", "128")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip()
    assert "generated at" in r.stderr


def test_generate_sampling_seeded(default_model):
    args = ("generate", "-p", "Once upon a time", "-n", "10", "--temperature", "0.9", "--top-p", "0.9",
            "--seed", "7", "--json", "--ctx", "128")
    a, b = run_coli(*args), run_coli(*args)
    assert a.returncode == 0, a.stderr
    assert json.loads(a.stdout)["tokens"] == json.loads(b.stdout)["tokens"]


def test_generate_drafts_and_keeps_the_tokens(default_model):
    """generate decodes on a slot as serve does: prompt lookup drafts a counting prompt's next
    tokens, the greedy tokens are plain decoding's, and the drafts are reported."""
    base = ("generate", "-p", "1, 2, 3, 4, 5, 6, 7, 8, " * 3 + "1, 2,", "-n", "30", "--json", "--ctx", "256",
            "--ignore-eos")
    plain, drafted = run_coli(*base, "--draft-tokens", "0"), run_coli(*base, "--draft-tokens", "4")
    assert plain.returncode == 0 and drafted.returncode == 0, plain.stderr + drafted.stderr
    plain, drafted = json.loads(plain.stdout), json.loads(drafted.stdout)
    assert drafted["tokens"] == plain["tokens"] and len(plain["tokens"]) == 30
    assert plain["drafts"] == {"drafter": None, "drafted": 0, "accepted": 0}
    assert drafted["drafts"]["drafter"] == "lookup"
    assert drafted["drafts"]["drafted"] > 0  # the plan tries drafts before it has measured what they cost
    assert 0 <= drafted["drafts"]["accepted"] <= drafted["drafts"]["drafted"]
    r = run_coli(*(a for a in base if a != "--json"), "--draft-tokens", "4")  # the text line says so too
    assert r.returncode == 0 and "prompt lookup drafts:" in r.stderr and " kept" in r.stderr


def test_generate_prompt_too_long_is_refused(default_model):
    r = run_coli("generate", "-p", "word " * 100, "-n", "4", "--ctx", "32")
    assert r.returncode == 2
    assert "context holds 32" in r.stderr and "Traceback" not in r.stderr


def test_generate_length_is_clamped_to_context(default_model):
    r = run_coli("generate", "-p", "Hello", "-n", "500", "--ctx", "16", "--json", "--ignore-eos")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert len(out["prompt_tokens"]) + len(out["tokens"]) == 16
    assert out["finish_reason"] == "length"


def test_perplexity_json(default_model, tmp_path):
    from tests.reference import real_text

    text = tmp_path / "text.txt"
    text.write_text(real_text()[:6000])
    r = run_coli("perplexity", "--file", str(text), "--ctx", "128", "--chunks", "3", "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["ctx"] == 128 and len(out["chunks"]) == 3
    assert out["n_scored"] == 3 * 63 == len(out["argmax"])
    assert math.isfinite(out["ppl"]) and 1 < out["ppl"] < 1000


def test_perplexity_text_too_short(default_model, tmp_path):
    text = tmp_path / "short.txt"
    text.write_text("too short")
    r = run_coli("perplexity", "--file", str(text), "--ctx", "128")
    assert r.returncode == 1 and "fewer than one chunk" in r.stderr


def test_missing_model_file(tmp_path):
    r = run_coli("generate", "--model", str(tmp_path / "none.gguf"), "-p", "x")
    assert r.returncode == 2 and "model file not found" in r.stderr
