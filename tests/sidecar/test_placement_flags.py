"""The placement flags `coli generate`, `coli perplexity` and `coli serve` share (cli_options.add_placement_args)
and their COLI_* variables: parsed alike, flags over variables, bad values named; then the real CLI streams
a MoE model's experts when told to."""
from __future__ import annotations

import argparse

import pytest

from colibri.cli import build_parser
from colibri.commands import serve
from colibri.errors import ColiError
from colibri.cli_options import PLACEMENT_VARS, placement_from_args
from tests.conftest import run_coli
from tests.fixtures import moe_models

FLAGS = ["--expert-cache-gb", "0.5", "--pin-gb", "0.1", "--io-threads", "3", "--no-prefetch", "--no-direct-io",
         "--expert-policy", "lru", "--draft-tokens", "2", "--draft-model", "small.gguf"]
WANT = dict(expert_cache_gb=0.5, pin_gb=0.1, io_threads=3, direct_io=False, prefetch=False, expert_policy="lru",
            draft_tokens=2, draft_model="small.gguf")


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    for var in PLACEMENT_VARS.values():
        monkeypatch.delenv(var, raising=False)


def parse(cmd: str, argv: list[str]) -> argparse.Namespace:
    extra = {"generate": ["-p", "x"], "perplexity": ["-f", "x.txt"], "serve": [], "plan": []}[cmd]
    return build_parser().parse_args([cmd, *extra, *argv])


@pytest.mark.parametrize("cmd", ["generate", "perplexity", "serve"])
def test_the_same_flags_and_variables_everywhere(cmd, monkeypatch):
    assert placement_from_args(parse(cmd, [])) == dict(expert_cache_gb=None, pin_gb=None, io_threads=0,
                                                       direct_io=True, prefetch=True, expert_policy="",
                                                       draft_tokens=None, draft_model=None)
    assert placement_from_args(parse(cmd, FLAGS)) == WANT
    for var, value in (("COLI_EXPERT_CACHE_GB", "0.5"), ("COLI_PIN_GB", "0.1"), ("COLI_IO_THREADS", "3"),
                       ("COLI_PREFETCH", "0"), ("COLI_DIRECT_IO", "0"), ("COLI_EXPERT_POLICY", "LRU"),
                       ("COLI_DRAFT_TOKENS", "2"), ("COLI_DRAFT_MODEL", "small.gguf")):
        monkeypatch.setenv(var, value)
    assert placement_from_args(parse(cmd, [])) == WANT
    assert placement_from_args(parse(cmd, ["--expert-cache-gb", "2", "--prefetch"]))["expert_cache_gb"] == 2.0
    assert placement_from_args(parse(cmd, ["--prefetch"]))["prefetch"] is True  # the flag wins


def test_serve_config_takes_them(monkeypatch):
    monkeypatch.setenv("COLI_IO_THREADS", "3")
    cfg = serve.config_from_args(parse("serve", ["--expert-cache-gb", "0.5", "--pin-gb", "0.1", "--no-prefetch",
                                                 "--no-direct-io", "--expert-policy", "lru", "--draft-tokens", "2",
                                                 "--draft-model", "small.gguf"]))
    assert (cfg.expert_cache_gb, cfg.pin_gb, cfg.io_threads, cfg.direct_io, cfg.prefetch,
            cfg.expert_policy, cfg.draft_tokens, cfg.draft_model) == tuple(WANT.values())


@pytest.mark.parametrize("env, argv, words", [
    ({"COLI_EXPERT_CACHE_GB": "lots"}, [], "COLI_EXPERT_CACHE_GB='lots'"),
    ({"COLI_IO_THREADS": "2.5"}, [], "COLI_IO_THREADS"),
    ({}, ["--pin-gb", "-1"], "--pin-gb must be >= 0"),
    ({"COLI_EXPERT_POLICY": "lfu"}, [], "COLI_EXPERT_POLICY='lfu': expected one of lrfu, lru"),
    ({}, ["--draft-tokens", "9"], "--draft-tokens must be 0 to 8"),
    ({"COLI_DRAFT_TOKENS": "four"}, [], "COLI_DRAFT_TOKENS='four'"),
])
def test_bad_values_are_named(env, argv, words, monkeypatch):
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    with pytest.raises(ColiError, match=words.replace("(", r"\(")):
        placement_from_args(parse("generate", argv))


def test_generate_and_perplexity_stream_experts_when_told(tmp_path):
    path = moe_models.tiny("qwen3moe", "Q8_0")
    r = run_coli("-v", "generate", "-m", str(path), "-p", "hello", "-n", "4", "--ignore-eos", "--json",
                 "--expert-cache-gb", "0.001", "--pin-gb", "0", "--io-threads", "2", "--expert-policy", "lru")
    assert r.returncode == 0, r.stderr
    assert "experts stream from disk: 1.0 MiB cache + 0 B pinned" in r.stderr
    text = tmp_path / "t.txt"
    text.write_text("the quick brown fox jumps over the lazy dog. " * 40)
    r = run_coli("-v", "perplexity", "-m", str(path), "-f", str(text), "--ctx", "64", "--chunks", "2", "--json",
                 env={"COLI_EXPERT_CACHE_GB": "0.001", "COLI_PREFETCH": "0"})
    assert r.returncode == 0, r.stderr
    assert "experts stream from disk" in r.stderr
    r = run_coli("-v", "generate", "-m", str(path), "-p", "hello", "-n", "2", "--json")  # no flags, RAM to spare
    assert r.returncode == 0 and "placement resident" in r.stderr
    assert "stream" not in r.stderr


def test_generate_takes_a_draft_model():
    """`coli generate --draft-model` opens the second model (its vocabulary checked) and says why not when it
    cannot; generate's own loop does not draft (serve's does), so the tokens are the same."""
    import json

    target, draft = moe_models.tiny("glm4moe", "Q8_0"), moe_models.tiny("qwen3moe", "Q8_0")
    outs = []
    for extra in ([], ["--draft-model", str(draft)]):
        r = run_coli("generate", "-m", str(target), "-p", "hello there", "-n", "12", "--ignore-eos", "--json",
                     "--temperature", "0", *extra)
        assert r.returncode == 0, r.stderr
        outs.append(json.loads(r.stdout)["tokens"])
    assert outs[0] == outs[1] and len(outs[0]) == 12
    r = run_coli("generate", "-m", str(target), "-p", "hi", "-n", "2", "--draft-model", str(moe_models.tiny("qwen35moe", "Q8_0")))
    assert r.returncode != 0 and "recurrent state" in r.stderr
