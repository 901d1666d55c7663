"""kernel_choice.py: at a model's load, each of its weight types that every SIMD set
computes alike is timed with each set on a slice of its own weights, the fastest
kept, the timings cached per CPU model and engine build, shown by
`coli --version -v`; COLI_KERNELS forces a set or turns the measuring off."""
from __future__ import annotations

import json
import logging
import os

import pytest

from colibri import engine, kernel_choice
from colibri.cli import version_text
from tests.engine.tiny_models import write_tiny

SIMD = [isa for isa in ("avx2", "avxvnni", "avx512") if engine.kernel_set_runnable(isa)]
two_sets = pytest.mark.skipif(len(SIMD) < 2, reason="this CPU runs one SIMD kernel set: nothing to choose")


@pytest.fixture(autouse=True)
def restore(monkeypatch, tmp_path):
    monkeypatch.setenv("COLI_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("COLI_KERNELS", raising=False)
    yield
    engine.set_kernel_isa("auto")


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    """A MoE whose experts and attention are Q8_0 and whose head is Q4_0 (two types to time)."""
    path = write_tiny(tmp_path_factory.mktemp("kc") / "moe.gguf", family="qwen3moe", quant=8, tied=False, seed=4)
    return path


def test_samples_are_the_first_expert_of_each_type(model):
    found = kernel_choice.samples(model)
    name, n_in, rows = found["Q8_0"]
    assert name.endswith("_exps.weight") and rows == 32 and n_in in (64, 32)
    assert "F32" not in found  # F32's sets give other bits: never chosen


@two_sets
def test_a_load_measures_once_and_caches_per_cpu(model, caplog):
    caplog.set_level(logging.INFO, "colibri.kernel_choice")
    kernel_choice.choose(model)
    data = json.loads(kernel_choice.cache_path().read_text())
    entry = data["cpus"][kernel_choice.cpu_model()]
    assert entry["engine"] == kernel_choice.build_key()
    (key, choice), = [(k, v) for k, v in entry["choices"].items() if k.startswith("Q8_0 ")]
    assert set(choice["us"]) == set(SIMD) and choice["isa"] in SIMD
    assert all(v > 0 for v in choice["us"].values())
    assert "kernels measured for Q8_0" in caplog.text
    caplog.clear()
    mtime = os.stat(kernel_choice.cache_path()).st_mtime_ns
    kernel_choice.choose(model)  # a second load: the cache answers
    assert "kernels measured" not in caplog.text and os.stat(kernel_choice.cache_path()).st_mtime_ns == mtime
    text = version_text(verbose=1)
    assert f"cpu model: {kernel_choice.cpu_model()}" in text and f"  {key}: {choice['isa']} (" in text


@two_sets
def test_the_cached_choice_is_what_runs(model):
    """A cached pick of another set (as Zen 4 may measure) is applied to the type at load."""
    kernel_choice.choose(model)
    data = json.loads(kernel_choice.cache_path().read_text())
    choices = data["cpus"][kernel_choice.cpu_model()]["choices"]
    other = next(isa for isa in SIMD if isa != engine.kernel_default_isa())
    for key in choices:
        if key.startswith("Q8_0 "):
            choices[key]["isa"] = other
    kernel_choice.cache_path().write_text(json.dumps(data))
    engine.set_kernel_isa("auto")
    assert kernel_choice.choose(model) == f"{engine.kernel_default_isa()} (Q8_0: {other})"


def test_a_cache_from_another_engine_build_is_measured_again(model):
    kernel_choice.cache_path().write_text(json.dumps({"cpus": {kernel_choice.cpu_model(): {
        "engine": "0.0.0 (other flags)", "choices": {"Q8_0 64x32": {"isa": "avx2", "us": {"avx2": 1.0}}}}}}))
    assert kernel_choice.cached_choices() == {}
    kernel_choice.cache_path().write_text("{not json")
    assert kernel_choice.cached_choices() == {}
    kernel_choice.choose(model)  # a broken cache is rewritten, not an error


def test_coli_kernels_forces_a_set_or_skips_the_measure(model, monkeypatch):
    monkeypatch.setenv("COLI_KERNELS", "auto")
    assert kernel_choice.choose(model) == engine.kernel_default_isa()
    assert not kernel_choice.cache_path().exists()
    monkeypatch.setenv("COLI_KERNELS", "scalar")
    assert kernel_choice.choose(model) == "scalar"
    monkeypatch.setenv("COLI_KERNELS", "neon-ish")
    with pytest.raises(engine.EngineError, match="COLI_KERNELS=neon-ish: .*expected auto, scalar"):
        kernel_choice.choose(model)


@two_sets
def test_a_cached_choice_this_cpu_cannot_run_is_measured_again(model):
    """A cache entry naming a set not among this CPU's (a VM that hides a feature under the same
    model name), or a broken entry, is measured again instead of failing the load."""
    kernel_choice.choose(model)
    data = json.loads(kernel_choice.cache_path().read_text())
    choices = data["cpus"][kernel_choice.cpu_model()]["choices"]
    for key in choices:
        choices[key] = {"isa": "neon"} if key.startswith("Q8_0 ") else "garbage"
    kernel_choice.cache_path().write_text(json.dumps(data))
    engine.set_kernel_isa("auto")
    assert kernel_choice.choose(model).split()[0] == engine.kernel_default_isa()
    again = kernel_choice.cached_choices()
    assert all(isinstance(v, dict) and v["isa"] in SIMD for v in again.values())
