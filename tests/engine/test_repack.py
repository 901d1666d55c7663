"""Q4_K, Q4_0, IQ4_NL and MXFP4 weights rewritten at load into 16-row tiles
(engine/src/repack.c), read by tile kernels that see 16 rows as one stream: the same
bits as the weights kept as the file stores them, in prefill and decode, for dense,
shared-expert and routed matrices; experts streamed from disk stay as stored;
COLI_REPACK=0 and the scalar set repack nothing."""
from __future__ import annotations

import numpy as np
import pytest

from colibri import engine
from colibri.engine import Engine
from tests.fixtures import moe_models as mm

SIMD = [isa for isa in ("avx2", "avxvnni", "avx512") if engine.kernel_set_runnable(isa)]
pytestmark = pytest.mark.skipif(not SIMD, reason="the tile kernels are the SIMD sets': nothing is repacked here")


@pytest.fixture(autouse=True)
def auto_isa():
    engine.set_kernel_isa("auto")
    yield
    engine.set_kernel_isa("auto")


TILED = ["Q4_K", "Q4_0", "IQ4_NL", "MXFP4"]  # the types with tiles (coli_r16_in_mult)


def model(tmp_path, arch, quant="Q4_K"):
    return mm.write_config(tmp_path / f"{arch}-{quant}.gguf", mm.tiny_config(arch, quant))


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


@pytest.mark.parametrize("quant", TILED)
@pytest.mark.parametrize("arch", ["qwen3moe", "glm4moe", "deepseek2"])
def test_repacked_weights_give_the_same_bits(tmp_path, monkeypatch, arch, quant):
    path = model(tmp_path, arch, quant)
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


@pytest.mark.parametrize("quant", TILED)
def test_every_simd_set_reads_the_tiles(tmp_path, monkeypatch, quant):
    """Each set's tile kernels against its own kernels on the file's layout (the sets differ
    from each other elsewhere: F32's and F16's sums, the element-wise ops' widths)."""
    path = model(tmp_path, "qwen3moe", quant)
    for isa in SIMD:
        engine.set_kernel_isa(isa)
        _, plain = run(path, monkeypatch, False)
        n, repacked = run(path, monkeypatch, True)
        assert n > 0 and np.array_equal(repacked, plain), isa


def test_the_scalar_set_repacks_nothing_and_reads_tiles_with_the_widest(tmp_path, monkeypatch):
    path = model(tmp_path, "qwen3moe")
    engine.set_kernel_isa("scalar")
    n, _ = run(path, monkeypatch, True)
    assert n == 0
    engine.set_kernel_isa("auto")  # repacked at load, then the scalar set forced: the tiles keep their kernels
    monkeypatch.setenv("COLI_REPACK", "1")
    tokens = [5, 17, 99, 240]
    with Engine(path, n_ctx=64, n_threads=1) as e:
        assert e.model_info()["repacked_bytes"] > 0
        ref = np.frombuffer(e.eval(tokens, 0, logits="last"), np.float32).copy()
        engine.set_kernel_isa("scalar")
        assert np.isfinite(np.frombuffer(e.eval(tokens, 0, logits="last"), np.float32)).all()
    assert np.isfinite(ref).all()
