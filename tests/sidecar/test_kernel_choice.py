"""kernel_choice.py: at a model's load, each of its weight types that every SIMD set
computes alike is timed, streamed from memory, with each set at each prefetch
level on a slice of its own weights; the level and the sets that make the model's
weights quickest are kept, the timings cached per CPU model and engine build,
shown by `coli --version -v`; COLI_KERNELS forces a set or turns the measuring off."""
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
    engine.set_kernel_prefetch("l1")


def variants() -> set[str]:
    return {f"{isa}/{level}" for isa in SIMD for level in kernel_choice.LEVELS}


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    """A MoE whose experts and attention are Q8_0 and whose head is Q4_0 (two types to time)."""
    path = write_tiny(tmp_path_factory.mktemp("kc") / "moe.gguf", family="qwen3moe", quant=8, tied=False, seed=4)
    return path


def test_samples_are_the_first_expert_of_each_type(model):
    found = kernel_choice.samples(model)
    name, n_in, rows, elements = found["Q8_0"]
    assert name.endswith("_exps.weight") and rows == 32 and n_in in (64, 32) and elements > n_in * rows
    assert "F32" not in found  # F32's sets give other bits: never chosen


@two_sets
def test_a_load_measures_once_and_caches_per_cpu(model, caplog):
    caplog.set_level(logging.INFO, "colibri.kernel_choice")
    kernel_choice.choose(model)
    data = json.loads(kernel_choice.cache_path().read_text())
    entry = data["cpus"][kernel_choice.cpu_model()]
    assert entry["engine"] == kernel_choice.build_key()
    (key, choice), = [(k, v) for k, v in entry["choices"].items() if k.startswith("Q8_0 ")]
    assert set(choice["us"]) == variants()
    assert all(v > 0 for v in choice["us"].values())
    assert "kernels measured for Q8_0" in caplog.text
    caplog.clear()
    mtime = os.stat(kernel_choice.cache_path()).st_mtime_ns
    kernel_choice.choose(model)  # a second load: the cache answers
    assert "kernels measured" not in caplog.text and os.stat(kernel_choice.cache_path()).st_mtime_ns == mtime
    text = version_text(verbose=1)
    assert f"cpu model: {kernel_choice.cpu_model()}" in text and f"  {key}: fastest " in text


@two_sets
def test_the_cached_choice_is_what_runs(model):
    """Cached timings where another set at L2 is fastest (as Zen 4 measures Q4_K) are applied at load."""
    kernel_choice.choose(model)
    data = json.loads(kernel_choice.cache_path().read_text())
    choices = data["cpus"][kernel_choice.cpu_model()]["choices"]
    other = next(isa for isa in SIMD if isa != engine.kernel_default_isa())
    default = engine.kernel_default_isa()
    for key, choice in choices.items():
        choice["us"] = {v: 100.0 for v in variants()}
        choice["us"][f"{default}/l2"] = 50.0
        if key.startswith("Q8_0 "):
            choice["us"][f"{other}/l2"] = 10.0
    kernel_choice.cache_path().write_text(json.dumps(data))
    engine.set_kernel_isa("auto")
    assert kernel_choice.choose(model) == f"{engine.kernel_default_isa()} (Q8_0: decode {other})"
    assert engine.kernel_type_isa("Q8_0") == engine.kernel_default_isa()  # its batches: the widest set's
    assert engine.kernel_prefetch() == "l2"


def test_pick_weighs_each_type_by_its_share_of_the_weights():
    sets = ["avx512", "avx2"]
    # Zen 4's Q4_K experts: AVX-512 stalls at L1, not at L2; AVX2 at L1 decodes fastest of all
    t = {"Q4_K": {"avx512/l1": 35, "avx512/l2": 17, "avx2/l1": 16, "avx2/l2": 21},
         "Q6_K": {"avx512/l1": 10, "avx512/l2": 12, "avx2/l1": 11, "avx2/l2": 30}}  # the head
    assert kernel_choice.pick(t, {"Q4_K": 100, "Q6_K": 1}, sets) == ("l1", {"Q4_K": "avx2", "Q6_K": "avx512"})
    # where only AVX-512 is quick at L2, L2 takes the file whose Q4_K is most of it
    t["Q4_K"]["avx2/l1"] = 30
    assert kernel_choice.pick(t, {"Q4_K": 100, "Q6_K": 1}, sets) == ("l2", {"Q4_K": "avx512", "Q6_K": "avx512"})
    assert kernel_choice.pick(t, {"Q4_K": 1, "Q6_K": 100}, sets) == ("l1", {"Q4_K": "avx2", "Q6_K": "avx512"})
    # Zen 4's Q4_0: AVX2 decodes 13% faster at L1
    q40 = {"Q4_0": {"avx512/l1": 18.2, "avx512/l2": 22.4, "avx2/l1": 15.8, "avx2/l2": 24.1}}
    assert kernel_choice.pick(q40, {"Q4_0": 1}, sets) == ("l1", {"Q4_0": "avx2"})
    # within the margins of the defaults (the first set, L1): they stay
    near = {"Q4_0": {"avx512/l1": 20, "avx512/l2": 19.8, "avx2/l1": 19.7, "avx2/l2": 30}}
    assert kernel_choice.pick(near, {"Q4_0": 1}, sets) == ("l1", {"Q4_0": "avx512"})
    assert kernel_choice.pick({}, {}, sets) == ("l1", {})


def test_a_cache_from_another_engine_build_is_measured_again(model):
    kernel_choice.cache_path().write_text(json.dumps({"cpus": {kernel_choice.cpu_model(): {
        "engine": "0.0.0 (other flags)", "choices": {"Q8_0 64x32": {"us": {"avx2/l1": 1.0}}}}}}))
    assert kernel_choice.cached_choices() == {}
    kernel_choice.cache_path().write_text("{not json")
    assert kernel_choice.cached_choices() == {}
    kernel_choice.choose(model)  # a broken cache is rewritten, not an error


def test_coli_kernels_forces_a_set_or_skips_the_measure(model, monkeypatch):
    engine.set_kernel_prefetch("l2")
    monkeypatch.setenv("COLI_KERNELS", "auto")
    assert kernel_choice.choose(model) == engine.kernel_default_isa() and engine.kernel_prefetch() == "l1"
    assert not kernel_choice.cache_path().exists()
    monkeypatch.setenv("COLI_KERNELS", "scalar")
    assert kernel_choice.choose(model) == "scalar"
    monkeypatch.setenv("COLI_KERNELS", "neon-ish")
    with pytest.raises(engine.EngineError, match="COLI_KERNELS=neon-ish: .*expected auto, scalar"):
        kernel_choice.choose(model)


def test_coli_kernel_lookup_forces_a_way_and_version_shows_it(model, monkeypatch):
    try:
        monkeypatch.setenv("COLI_KERNEL_LOOKUP", "loads")
        kernel_choice.choose(model)
        assert engine.kernel_lookup() == "loads"
        monkeypatch.setenv("COLI_KERNEL_LOOKUP", "gather")
        kernel_choice.choose(model)
        assert engine.kernel_lookup() == "gather"
        if engine.kernel_set_runnable("avx2"):
            where = "IQ2/IQ3 on AVX-512" if engine.kernel_set_runnable("avx512") else "IQ2_S, IQ3 on AVX2"
            assert any(line.startswith(f"grid i-quant lookups ({where}): gather (COLI_KERNEL_LOOKUP)")
                       for line in kernel_choice.version_lines())
        monkeypatch.setenv("COLI_KERNEL_LOOKUP", "sometimes")
        with pytest.raises(engine.EngineError, match="COLI_KERNEL_LOOKUP=sometimes: .*expected auto, gather or loads"):
            kernel_choice.choose(model)
    finally:
        engine.set_kernel_lookup("auto")


@two_sets
def test_a_cached_choice_this_cpu_cannot_run_is_measured_again(model):
    """A cache entry naming a set not among this CPU's (a VM that hides a feature under the same
    model name), or a broken entry, is measured again instead of failing the load."""
    kernel_choice.choose(model)
    data = json.loads(kernel_choice.cache_path().read_text())
    choices = data["cpus"][kernel_choice.cpu_model()]["choices"]
    for key in choices:
        choices[key] = {"us": {"neon/l1": 1.0}} if key.startswith("Q8_0 ") else "garbage"
    kernel_choice.cache_path().write_text(json.dumps(data))
    engine.set_kernel_isa("auto")
    assert kernel_choice.choose(model).split()[0] == engine.kernel_default_isa()
    again = kernel_choice.cached_choices()
    assert all(isinstance(v, dict) and set(v["us"]) == variants() for v in again.values())
