"""deepseek32 (DeepSeek V3.2) and glm-dsa (GLM-5/5.1/5.2): MLA plus DeepSeek's
sparse attention, whose lightning indexer picks the idx_top_k cells each query
attends to, against llama.cpp on the synthetic fixtures (tests/fixtures/
moe_models.py: top-16 / top-24 over ~600 positions, so the selection drops
most cells; glm-dsa's layers alternate full and shared indexers) in F32, Q8_0,
Q4_0 and Q4_K. Also: the indexer key cache in the slot's bytes and the plan,
chunked prefill equals one batch, a saved slot continues identically, and bad
files are named load errors."""
from __future__ import annotations

import struct

import numpy as np
import pytest

from colibri.engine import Engine
from colibri.errors import EngineError
from colibri.plan import make_plan
from tests.engine.family_checks import assert_saved_slot_continues, patched_u32, renamed_tensor
from tests.fixtures import moe_models as mm
from tests.reference import arithmetic_mirrored, matches_llama_cpp

pytest.importorskip("gguf")

ARCHS = mm.DSA_ARCHS
QUANTS = ("F32", "Q8_0", "Q4_0", "Q4_K")
POSITIONS = 600  # teacher-forced, one sequence: far past the top-k


def _tokens(e: Engine, n: int, seed: int = 5) -> list[int]:
    rng = np.random.default_rng(seed)
    return [e.bos] + [int(t) for t in rng.integers(0, e.n_vocab, n - 1)]


def _logits(e: Engine, tokens: list[int]) -> np.ndarray:
    return np.frombuffer(e.eval(tokens, 0, logits="all"), np.float32).reshape(len(tokens), -1)


@pytest.mark.parametrize("quant", QUANTS)
@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.isa_bits
def test_matches_llama_cpp(arch, quant):
    ours, theirs = matches_llama_cpp(mm.tiny(arch, quant), POSITIONS, f"{arch} {quant}")
    if arithmetic_mirrored():  # the same bits, selection and all
        assert np.array_equal(ours, theirs)


@pytest.mark.parametrize("arch", ARCHS)
def test_the_selection_drops_cells(arch, tmp_path):
    """With a top-k past the prompt every cell is seen (plain MLA): the logits agree
    while the prompt fits the fixture's top-k and differ after it."""
    cfg = mm.tiny_config(arch, "Q8_0")
    path = mm.tiny(arch, "Q8_0")
    dense = patched_u32(path, tmp_path / "dense.gguf", f"{arch}.attention.indexer.top_k", 4096)
    with Engine(path, n_ctx=256, n_threads=2) as e:
        tokens = _tokens(e, 200, seed=3)
        sparse_logits = _logits(e, tokens)
    with Engine(dense, n_ctx=256, n_threads=2) as e:
        dense_logits = _logits(e, tokens)
    k = cfg.idx_top_k
    assert np.array_equal(sparse_logits[:k], dense_logits[:k])
    differ = np.abs(sparse_logits[k:] - dense_logits[k:]).max(-1) > 1e-3
    assert differ.mean() > 0.9


@pytest.mark.parametrize("arch", ARCHS)
def test_the_cache_holds_the_indexer_keys(arch):
    cfg = mm.tiny_config(arch, "Q8_0")
    path = mm.tiny(arch, "Q8_0")
    full = sum(cfg.has_indexer(il) for il in range(cfg.n_layer))
    assert full == (2 if arch == "glm-dsa" else cfg.n_layer)
    per_token = (cfg.n_layer * (cfg.kv_lora_rank + cfg.rot_dims) + full * cfg.idx_head_dim) * 2  # f16
    with Engine(path, n_ctx=256, n_threads=2) as e:
        assert e.model_info()["kv_bytes_per_slot"] == 256 * per_token
    assert make_plan(path, ctx=256).kv_bytes_per_slot == 256 * per_token


@pytest.mark.parametrize("arch", ARCHS)
def test_long_prompt_in_chunks_equals_one_batch(arch):
    """Prefill in chunks of 16 (each scoring the indexer keys earlier chunks cached)
    gives the bits of one batch."""
    path = mm.tiny(arch, "Q4_0")
    with Engine(path, n_ctx=256, n_threads=2, n_batch=256) as e:
        tokens = _tokens(e, 151, seed=2)
        whole = _logits(e, tokens)
    with Engine(path, n_ctx=256, n_threads=1, n_batch=16) as e:
        chunked = _logits(e, tokens)
    assert np.array_equal(whole, chunked)


@pytest.mark.parametrize("arch", ARCHS)
def test_a_saved_slot_restores_and_continues_identically(arch, tmp_path):
    """The slot file carries the indexer keys with the latent: a restored slot reuses
    the prompt (longer than the top-k) and decodes what the original session does."""
    path = mm.tiny(arch, "Q8_0")
    assert_saved_slot_continues(path, tmp_path)


def _first_layer_shared(src, dst):
    """glm-dsa's attention.indexer.types with layer 0 made shared."""
    raw = bytearray(src.read_bytes())
    k = b"glm-dsa.attention.indexer.types"
    i = raw.find(struct.pack("<Q", len(k)) + k)
    at = i + 8 + len(k)
    assert struct.unpack_from("<II", raw, at) == (9, 7)  # an array of bool
    raw[at + 8 + 8] = 0
    dst.write_bytes(bytes(raw))
    return dst


@pytest.mark.parametrize("case,fragment", [
    ("missing_indexer", "blk.2.indexer.attn_k.weight"),
    ("shared_first", "no full layer precedes it"),
    ("top_k_0", "top-0"),
    ("key_length_48", "power of two"),
])
def test_bad_files_are_named_errors(case, fragment, tmp_path):
    src = mm.tiny("glm-dsa", "Q8_0")
    bad = tmp_path / "bad.gguf"
    if case == "missing_indexer":  # layer 2 is a full layer
        renamed_tensor(src, bad, "blk.2.indexer.attn_k.weight", "blk.2.indexer.attn_x.weight")
    elif case == "shared_first":
        _first_layer_shared(src, bad)
    elif case == "top_k_0":
        patched_u32(src, bad, "glm-dsa.attention.indexer.top_k", 0)
    else:
        patched_u32(src, bad, "glm-dsa.attention.indexer.key_length", 48)
    with pytest.raises(EngineError, match=fragment):
        Engine(bad, n_ctx=64, n_threads=1)


def test_deepseek32_needs_every_layers_indexer(tmp_path):
    bad = renamed_tensor(mm.tiny("deepseek32", "Q8_0"), tmp_path / "bad.gguf", "blk.1.indexer.proj.weight",
                          "blk.1.indexer.prox.weight")
    with pytest.raises(EngineError, match="blk.1.indexer.proj.weight"):
        Engine(bad, n_ctx=64, n_threads=1)
