"""How the grid i-quant kernels (AVX-512; AVX2's IQ2_S, IQ3_XXS, IQ3_S) look up grid points (colibri_kernel_set_lookup):
by gathers or by scalar loads, the faster measured when the engine starts. Both ways
give ggml's bits (tests/engine/test_quant_iq23.py runs every product both ways); here:
the switch, its measurement, and its errors."""
from __future__ import annotations

import pytest

from colibri import engine

AVX2 = engine.kernel_set_runnable("avx2")


@pytest.fixture(autouse=True)
def restore():
    yield
    engine.set_kernel_lookup("auto")


def test_a_way_set_by_name_is_the_way_in_force():
    for way in ("gather", "loads", "gather"):
        engine.set_kernel_lookup(way)
        assert engine.kernel_lookup() == way
        assert engine.kernel_lookup_ns() == (0.0, 0.0)  # chosen, not measured


@pytest.mark.skipif(not AVX2, reason="no AVX2 here: nothing to measure")
def test_auto_measures_both_ways_and_keeps_the_faster():
    engine.set_kernel_lookup("loads")
    engine.set_kernel_lookup("auto")
    loads, gather = engine.kernel_lookup_ns()
    assert 0.5 < loads < 10_000 and 0.5 < gather < 10_000  # ns per super-block, in L1
    assert engine.kernel_lookup() == ("gather" if gather < 0.95 * loads else "loads")


@pytest.mark.skipif(AVX2, reason="AVX2 here: the way is measured (by the AVX-512 kernels where they run)")
def test_without_avx2_nothing_is_measured():
    engine.set_kernel_lookup("auto")
    assert engine.kernel_lookup_ns() == (0.0, 0.0)
    assert engine.kernel_lookup() == "loads"


@pytest.mark.parametrize("way", ["", "Gather", "vpgather", "auto "])
def test_an_unknown_way_is_a_named_error_and_changes_nothing(way):
    engine.set_kernel_lookup("loads")
    with pytest.raises(engine.EngineError, match="expected auto, gather or loads"):
        engine.set_kernel_lookup(way)
    assert engine.kernel_lookup() == "loads"
