"""qwen3next / qwen35moe (Qwen3-Next, Qwen3-Coder-Next, Qwen3.5/3.6 MoE) against llama.cpp 0.3.36
(src/models/qwen3next.cpp, qwen35moe.cpp, delta-net-base.cpp; on the CPU its fused gated_delta_net op for
decode and prefill alike) on the synthetic fixtures (tests/fixtures/moe_models.py: 4 blocks, Gated DeltaNet /
full attention / Gated DeltaNet / full attention; 2 key heads and 4 value heads; gated full attention with
per-head q/k norms and rotary on a quarter of the head; 8 experts top-2 plus a sigmoid-gated shared expert):
600 positions teacher-forced and greedy runs (matches_llama_cpp), the same bits when both split the prompt
alike; the older qwen3next layout (one ssm_in), an MTP block (loaded as nothing), the layer pattern as flags;
decode equal to llama.cpp's decode; the recurrent state per slot (slots decoded together as alone, a saved
slot restored and continued as one never stopped, a cached prefix reused where the state stands or from a
checkpoint: test_hybrid_prefix.py)."""
from __future__ import annotations

import numpy as np
import pytest

from colibri.engine import Engine, GGUFFile
from colibri.errors import EngineError
from tests.engine.family_checks import (all_logits, assert_batched_slots_equal_alone, assert_fidelity,
                                        assert_saved_slot_continues, random_tokens, run_slot)
from tests.engine.test_streaming import streamed_equals_resident
from tests.fixtures import moe_models as mm
from tests.reference import arithmetic_mirrored, load_reference

pytest.importorskip("gguf")

POSITIONS = 600
# (arch, label, quant, options)
FIXTURES = [("qwen3next", "F32", "F32", {}), ("qwen3next", "Q8_0", "Q8_0", {}), ("qwen3next", "Q4_K", "Q4_K", {}),
            ("qwen3next", "legacy_ssm_in", "Q8_0", dict(ssm_legacy_in=True)),
            ("qwen35moe", "F32", "F32", {}), ("qwen35moe", "Q8_0", "Q8_0", {}), ("qwen35moe", "Q4_0", "Q4_0", {}),
            ("qwen35moe", "nextn_flags", "Q8_0", dict(nextn_layers=1, recurrent_layers=(True, True, False, True, False),
                                                     n_ff_shexp=128)),
            # the released models' state size (Qwen3.5/3.6, Qwen3-Next: 128): deltanet.c's AVX-512 recurrence keeps
            # a state row in 8 registers there (4 at the fixtures' 64, the table's dot at 32)
            ("qwen35moe", "d_state128", "Q8_0", dict(ssm_d_state=128)),
            # the conv's taps as GCC vectorised ggml_ssm_conv per ISA (deltanet.c conv_taps): the released 4 (all
            # fused on AVX-512, rounded products on AVX2), 9 (a half vector then one fused), 17 (a whole vector)
            ("qwen35moe", "d_conv9", "F32", dict(ssm_d_conv=9)), ("qwen35moe", "d_conv17", "F32", dict(ssm_d_conv=17))]


@pytest.mark.parametrize("arch,label,quant,options", FIXTURES, ids=[f"{a}-{lb}" for a, lb, _, _ in FIXTURES])
@pytest.mark.isa_bits
def test_matches_llama_cpp(arch, label, quant, options):
    path = mm.tiny(arch, quant, **options)
    assert_fidelity(path, POSITIONS, f"{arch} {label}")


@pytest.mark.parametrize("arch", mm.GDN_ARCHS)
@pytest.mark.isa_bits
def test_decode_matches_llama_cpp_decode(arch):
    """Token by token (the recurrence's one-token path), against llama.cpp fed one token at a time."""
    path = mm.tiny(arch, "Q8_0")
    with Engine(path, n_ctx=96, n_threads=2) as e:
        toks = random_tokens(e, 40)
        ours = np.stack([np.frombuffer(e.eval([t], i, logits="last"), np.float32) for i, t in enumerate(toks)])
    ref = load_reference(path, n_ctx=96)
    theirs = []
    for i, t in enumerate(toks):
        ref.eval([t])
        theirs.append(np.array(ref.scores[i], dtype=np.float32))
    d = float(np.abs(ours - np.stack(theirs)).max())
    print(f"FIDELITY {arch} Q8_0 decode: max |dlogit| {d:.3g}")
    if arithmetic_mirrored():
        assert d == 0.0
    assert (ours.argmax(-1) == np.stack(theirs).argmax(-1)).all()


@pytest.mark.parametrize("arch", mm.GDN_ARCHS)
def test_threads_and_chunks_change_no_bit(arch):
    """The prompt in one batch on 2 threads, in batches of 7 on 1 thread (the state carried between them):
    the same bits (Q8_0's batched kernels do not depend on the chunking)."""
    path = mm.tiny(arch, "Q8_0")
    with Engine(path, n_ctx=96, n_threads=2, n_batch=64) as e:
        toks = random_tokens(e, 50)
        a = all_logits(e, toks)
    with Engine(path, n_ctx=96, n_threads=1, n_batch=7) as e:
        b = all_logits(e, toks)
    assert np.array_equal(a, b)


def test_the_state_cannot_rewind():
    """A position 0 restarts the state; any other position but where it stands is refused by name."""
    with Engine(mm.tiny("qwen3next", "Q8_0"), n_ctx=64, n_threads=1) as e:
        toks = random_tokens(e, 12)
        a = all_logits(e, toks)
        with pytest.raises(EngineError, match="recurrent state holds 12 tokens"):
            e.eval(toks[5:], 5)
        assert np.array_equal(all_logits(e, toks), a)


@pytest.mark.parametrize("arch", mm.GDN_ARCHS)
def test_batched_slots_equal_alone(arch):
    """Four conversations decoded together (joining at different steps, each slot with its own recurrent
    state) give each the tokens it decodes alone."""
    path = mm.tiny(arch, "Q8_0")
    assert_batched_slots_equal_alone(path)


def test_a_cached_prefix_is_reused_only_where_the_state_stands():
    """A continued conversation reuses the whole cached history; a prompt that branches off inside it before
    the state's first checkpoint (test_hybrid_prefix.py) runs again from position 0 (the state cannot rewind),
    with the tokens of a fresh engine."""
    path = mm.tiny("qwen3next", "Q8_0")
    with Engine(path, n_slots=1, n_ctx=200, n_threads=2) as e:
        prompt = random_tokens(e, 30)
        first, _ = run_slot(e, 0, prompt, 8)
        cont = prompt + first[:-1] + [5, 6, 7]
        got_cont, reused_cont = run_slot(e, 0, cont, 8)
        branch = prompt[:20] + [9, 9]
        got_branch, reused_branch = run_slot(e, 0, branch, 8)
    with Engine(path, n_slots=1, n_ctx=200, n_threads=2) as e:
        want_cont, _ = run_slot(e, 0, cont, 8)
        want_branch, _ = run_slot(e, 0, branch, 8)
    assert reused_cont == len(prompt) + len(first) - 1 and got_cont == want_cont
    assert reused_branch == 0 and got_branch == want_branch


def test_the_same_prompt_again_decodes_alike():
    """Asked again, a prompt whose generation moved the state past it replays its cached logits from its
    end-of-prompt checkpoint (test_hybrid_prefix.py; none kept: it runs again from 0); one whose state still
    stands there (one token generated, never evaluated) replays them."""
    path = mm.tiny("qwen35moe", "Q8_0")
    with Engine(path, n_slots=1, n_ctx=200, n_threads=2) as e:
        prompt = random_tokens(e, 25)
        first, _ = run_slot(e, 0, prompt, 10)
        again, reused = run_slot(e, 0, prompt, 10)
        assert again == first and reused == len(prompt)
        one, _ = run_slot(e, 0, prompt + [3], 1)
        third, reused = run_slot(e, 0, prompt + [3], 10)
        assert third[:1] == one
        assert reused == len(prompt) + 1
    with Engine(path, n_slots=1, n_ctx=200, n_threads=2) as e:
        assert run_slot(e, 0, prompt + [3], 10)[0] == third


def test_a_saved_slot_restores_and_continues_identically(tmp_path):
    path = mm.tiny("qwen35moe", "Q8_0")
    assert_saved_slot_continues(path, tmp_path)


@pytest.mark.parametrize("arch", mm.GDN_ARCHS)
def test_streamed_tokens_equal_resident(arch):
    streamed_equals_resident(mm.tiny(arch, "Q4_0"), f"{arch} Q4_0")


@pytest.mark.parametrize("arch", mm.GDN_ARCHS)
def test_described_and_loaded(arch):
    with GGUFFile(mm.tiny(arch, "Q8_0")) as g:
        assert g.describe()["arch"] == arch
    with Engine(mm.tiny(arch, "Q8_0"), n_ctx=64, n_threads=1) as e:
        info = e.model_info()
    assert info["arch"] == arch
    # the KV cache holds the full-attention layers only; the linear ones hold their f32 recurrent state
    cfg = mm.tiny_config(arch, "Q8_0")
    full = sum(not cfg.is_recurrent(il) for il in range(cfg.n_layer))
    kv = full * 64 * 2 * cfg.n_head_kv * cfg.head_dim * 2
    S = cfg.ssm_d_state
    conv = (cfg.ssm_d_conv - 1) * S * (2 * cfg.ssm_n_group + cfg.ssm_dt_rank)
    rs = (cfg.n_layer - full) * (conv + cfg.ssm_dt_rank * S * S) * 4
    assert info["kv_bytes_per_slot"] == (kv + 63) // 64 * 64 + rs
