"""Q4_K weights rewritten at load into 16-row tiles (engine/src/repack.c), read by
tile kernels that see 16 rows as one stream: the same bits as the weights kept as
the file stores them, in prefill and decode, for dense, shared-expert and routed
matrices; experts streamed from disk stay as stored; COLI_REPACK=0 and a forced
narrower ISA repack nothing."""
from __future__ import annotations

import numpy as np
import pytest

from colibri import engine
from colibri.engine import Engine
from tests.fixtures import moe_models as mm

AVX512 = engine.kernel_set_runnable("avx512")
pytestmark = pytest.mark.skipif(not AVX512, reason="the tile kernels are the AVX-512 set's: nothing is repacked here")


@pytest.fixture(autouse=True)
def auto_isa():
    engine.set_kernel_isa("auto")
    yield
    engine.set_kernel_isa("auto")


def model(tmp_path, arch):
    return mm.write_config(tmp_path / f"{arch}.gguf", mm.tiny_config(arch, "Q4_K"))


def run(path, monkeypatch, repack: bool, **kw):
    """Logits of a 40-token prefill (3 batches), then of 8 greedy decode steps."""
    monkeypatch.setenv("COLI_REPACK", "1" if repack else "0")
    tokens = [int(t) for t in np.random.default_rng(3).integers(3, 500, 40)]
    with Engine(path, n_ctx=128, n_threads=2, n_batch=16, **kw) as e:
        repacked = e.model_info()["repacked_bytes"]
        out = [np.frombuffer(e.eval(tokens, 0, logits="all"), np.float32).copy()]
        pos = len(tokens)
        for _ in range(8):
            tok, _ = e.sample()
            out.append(np.frombuffer(e.eval([tok], pos, logits="last"), np.float32).copy())
            pos += 1
    return repacked, np.concatenate(out)


@pytest.mark.parametrize("arch", ["qwen3moe", "glm4moe", "deepseek2"])
def test_repacked_weights_give_the_same_bits(tmp_path, monkeypatch, arch):
    path = model(tmp_path, arch)
    n_repacked, repacked = run(path, monkeypatch, True)
    n_plain, plain = run(path, monkeypatch, False)
    assert n_plain == 0
    assert n_repacked > path.stat().st_size // 2  # the matrices, routed experts included
    assert np.array_equal(repacked, plain)


def test_streamed_experts_stay_as_stored(tmp_path, monkeypatch):
    path = model(tmp_path, "qwen3moe")
    n_resident, _ = run(path, monkeypatch, True)
    n_streamed, streamed = run(path, monkeypatch, True, expert_cache_bytes=1 << 20)
    _, plain = run(path, monkeypatch, False, expert_cache_bytes=1 << 20)
    assert 0 < n_streamed < n_resident // 2  # attention only
    assert np.array_equal(streamed, plain)


def test_a_forced_narrower_isa_repacks_nothing(tmp_path, monkeypatch):
    path = model(tmp_path, "qwen3moe")
    engine.set_kernel_isa("avx2")
    n, _ = run(path, monkeypatch, True)
    assert n == 0
