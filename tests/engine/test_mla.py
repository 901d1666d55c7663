"""deepseek2 (DeepSeek V2/V3/R1, Kimi K2, GLM-4.7-Flash): multi-head latent
attention absorbed as llama.cpp computes it, YaRN with its mscale, grouped
sigmoid routing with a selection bias, shared experts and a dense lead layer,
against llama.cpp on the synthetic fixtures (tests/fixtures/moe_models.py)
with and without a query LoRA, in F32, Q8_0, Q4_0 and Q4_K. Also: the KV
cache holds the latent (kv_lora_rank + rope dims per token and layer), and
bad metadata is a named load error."""
from __future__ import annotations

import struct

import numpy as np
import pytest

from colibri.engine import Engine
from colibri.errors import EngineError
from colibri.plan import make_plan
from tests.engine.family_checks import assert_saved_slot_continues
from tests.fixtures import moe_models as mm
from tests.reference import matches_llama_cpp

pytest.importorskip("gguf")

QUANTS = ("F32", "Q8_0", "Q4_0", "Q4_K")
VARIANTS = {"q_lora": {}, "no_q_lora": {"q_lora_rank": 0},
            "fused_kv_b": {"mla_fused_kv_b": True}}  # older converters: llama.cpp's MHA path, full heads cached
POSITIONS = 600  # teacher-forced, one sequence


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("quant", QUANTS)
@pytest.mark.isa_bits
def test_deepseek2_matches_llama_cpp(quant, variant):
    matches_llama_cpp(mm.tiny("deepseek2", quant, **VARIANTS[variant]), POSITIONS, f"deepseek2 {quant} {variant}")


def test_the_cache_holds_the_latent_not_the_heads():
    cfg = mm.tiny_config("deepseek2", "Q8_0")
    path = mm.tiny("deepseek2", "Q8_0")
    per_token = cfg.n_layer * (cfg.kv_lora_rank + cfg.rot_dims) * 2  # f16, no separate values
    with Engine(path, n_ctx=256, n_threads=2) as e:
        assert e.model_info()["kv_bytes_per_slot"] == 256 * per_token
    assert make_plan(path, ctx=256).kv_bytes_per_slot == 256 * per_token
    heads = cfg.n_layer * cfg.n_head * (cfg.head_dim + cfg.rot_dims + cfg.v_dim) * 2
    assert per_token * 2 < heads  # what a decompressed cache would take


def test_long_prompt_in_chunks_equals_one_batch():
    """Prefill in chunks of 16 (each reading the latent the earlier chunks cached)
    gives the bits of one batch, and decoding continues from either identically."""
    path = mm.tiny("deepseek2", "Q4_0")
    rng = np.random.default_rng(2)
    with Engine(path, n_ctx=256, n_threads=2, n_batch=256) as e:
        tokens = [e.bos] + [int(t) for t in rng.integers(0, e.n_vocab, 150)]
        whole = np.frombuffer(e.eval(tokens, 0, logits="all"), np.float32).reshape(len(tokens), -1)
    with Engine(path, n_ctx=256, n_threads=1, n_batch=16) as e:
        chunked = np.frombuffer(e.eval(tokens, 0, logits="all"), np.float32).reshape(len(tokens), -1)
    assert np.array_equal(whole, chunked)


def _patched(src, dst, key: str, value: int | None = None, rename: str | None = None):
    """A copy of src with the u32 metadata `key` set to value, or the key renamed (same length)."""
    raw = bytearray(src.read_bytes())
    k = key.encode()
    i = raw.find(struct.pack("<Q", len(k)) + k)
    assert i >= 0, key
    at = i + 8 + len(k)
    if rename is not None:
        assert len(rename) == len(key)
        raw[i + 8: at] = rename.encode()
    else:
        assert struct.unpack_from("<I", raw, at)[0] == 4  # GGUF u32
        struct.pack_into("<I", raw, at + 4, value)
    dst.write_bytes(bytes(raw))
    return dst


@pytest.mark.parametrize("key,value,rename,fragment", [
    ("deepseek2.attention.kv_lora_rank", 32, None, "kv_lora_rank 32"),
    ("deepseek2.attention.head_count_kv", 2, None, "one key/value head"),
    ("deepseek2.expert_group_used_count", 5, None, "groups used"),
    ("deepseek2.expert_group_count", 3, None, "groups must divide the experts"),
    ("deepseek2.attention.key_length_mla", None, "deepseek2.attention.key_length_mlx", "only one of"),
], ids=["rank", "kv_heads", "topk_group", "n_group", "half_mla_keys"])
def test_bad_mla_metadata_is_a_named_error(tmp_path, key, value, rename, fragment):
    bad = _patched(mm.tiny("deepseek2", "Q8_0"), tmp_path / "bad.gguf", key, value, rename)
    with pytest.raises(EngineError, match=fragment):
        Engine(bad, n_ctx=64, n_threads=1)


def test_a_saved_latent_cache_restores_and_continues_identically(tmp_path):
    """The slot file carries the latent cache: a restored slot reuses the prompt and
    continues with the tokens the original session decodes."""
    path = mm.tiny("deepseek2", "Q8_0")
    assert_saved_slot_continues(path, tmp_path)


@pytest.mark.isa_bits
def test_decode_matches_llama_cpp_decode_past_a_thousand_cells():
    """Token by token past 1024 cells (decode's many-head scores and the blocked P.V read
    from the latent rows, 8 heads a task at 2 threads), against llama.cpp fed one token
    at a time: the same bits."""
    from tests.engine.family_checks import random_tokens
    from tests.reference import arithmetic_mirrored, load_reference

    path = mm.tiny("deepseek2", "Q8_0", n_head=16, n_rot=32)  # a 96-wide latent row: a multiple of 32
    n = 1100
    with Engine(path, n_ctx=n + 64, n_threads=2) as e:
        toks = random_tokens(e, n)
        ours = np.stack([np.frombuffer(e.eval([t], i, logits="last"), np.float32) for i, t in enumerate(toks)])
    ref = load_reference(path, n_ctx=n + 64)
    for t in toks:
        ref.eval([t])
    theirs = np.array(ref.scores[:n], dtype=np.float32)
    d = float(np.abs(ours - theirs).max())
    print(f"FIDELITY deepseek2 Q8_0 decode to {n}: max |dlogit| {d:.3g}")
    if arithmetic_mirrored():
        assert d == 0.0
    assert (ours.argmax(-1) == theirs.argmax(-1)).mean() > 0.99
