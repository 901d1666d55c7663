"""`coli plan`: the memory plan agrees with the file and with what the engine allocates."""
from __future__ import annotations

import json

import pytest

from colibri.engine import Engine, GGUFFile
from colibri.plan import AGENT_CTX, auto_ctx, describe, make_plan
from tests.conftest import run_coli
from tests.fixtures import moe_models


def test_plan_of_the_default_model_matches_the_engine(default_model):
    r = run_coli("plan", "--model", str(default_model), "--ctx", "1024", "--kv-slots", "3", "--json")
    assert r.returncode == 0, r.stderr
    plan = json.loads(r.stdout)
    with GGUFFile(default_model) as g:
        assert plan["dense_bytes"] == sum(t.nbytes for t in g.tensors())
    with Engine(default_model, n_ctx=1024, n_threads=1) as e:
        assert plan["kv_bytes_per_slot"] == e.model_info()["kv_bytes_per_slot"]
    assert plan["placement"] == "resident" and plan["expert_bytes"] == 0 and plan["fits"]
    assert plan["kv_slots"] == 3 and plan["ctx"] == 1024
    text = run_coli("plan", "--model", str(default_model)).stdout
    assert "resident" in text and "KV cache" in text and "fits" in text


def test_plan_of_a_moe_model_counts_experts_and_streams_on_request():
    path = moe_models.tiny("qwen3moe", "Q8_0")
    auto = make_plan(path)
    with GGUFFile(path) as g:
        tensors = list(g.tensors())
    experts = sum(t.nbytes for t in tensors if "_exps." in t.name)
    assert auto.expert_bytes == experts
    assert auto.dense_bytes + auto.row_read_bytes + experts == sum(t.nbytes for t in tensors)
    assert auto.expert_bytes_per_token == experts // 8 * 2 and auto.moe_layers == 3
    assert auto.placement == "resident"  # a few MB fit anywhere
    forced = make_plan(path, expert_cache_gb=0.001, pin_gb=0.0005)
    assert forced.placement == "streaming" and forced.cache_bytes == int(0.001 * (1 << 30))
    assert forced.read_per_token(0.5) == forced.expert_bytes_per_token // 2
    r = run_coli("plan", "--model", str(path), "--expert-cache-gb", "0.001", env={"COLI_PIN_GB": "0.0005"})
    assert r.returncode == 0 and "streaming" in r.stdout and "disk reads" in r.stdout


def test_the_automatic_context_is_the_trained_one_and_shrinks_only_for_memory(default_model):
    per_token = 1 << 20  # a big model's KV: 1 MiB per token for all its slots
    assert auto_ctx(131072, lambda n: n * per_token, 1 << 40) == 131072  # room: the trained context
    assert auto_ctx(8192, lambda n: n * per_token, 1 << 40) == 8192  # never past the trained context
    assert auto_ctx(131072, lambda n: n * per_token, 32 << 30) == 8192  # 8 GiB of KV is a quarter of 32 GiB
    assert auto_ctx(131072, lambda n: n * per_token, 0) == 4096  # never below 4096
    assert auto_ctx(2048, lambda n: n * per_token, 0) == 2048
    # Gemma 3 270M, trained on 32768: 3 global layers keep every position, 15 sliding ones a window of
    # 512 + 64 + 512 cells; 1 KiB per layer and position
    plan = make_plan(default_model)
    assert plan.ctx == 32768 and plan.kv_bytes_per_slot == (3 * 32768 + 15 * 1088) * 1024
    with Engine(default_model, n_ctx=32768, n_threads=1) as e:  # maps address space only
        assert e.model_info()["kv_bytes_per_slot"] == plan.kv_bytes_per_slot
    assert make_plan(default_model, ctx=100000).ctx == 32768
    assert AGENT_CTX <= 32768


def test_plan_of_a_hybrid_model_counts_full_attention_layers_and_the_recurrent_state():
    """qwen3next / qwen35moe: the KV cache holds the full-attention layers alone, and each slot the
    linear layers' f32 state whatever its context: the plan says what the engine maps."""
    for arch in moe_models.GDN_ARCHS:
        path = moe_models.tiny(arch, "Q8_0")
        for ctx in (64, 1024):
            plan = make_plan(path, ctx=ctx)
            with Engine(path, n_ctx=ctx, n_threads=1) as e:
                engine_kv = e.model_info()["kv_bytes_per_slot"]
            assert abs(plan.kv_bytes_per_slot - engine_kv) < 64, (arch, ctx, plan.kv_bytes_per_slot, engine_kv)


def test_plan_of_a_hybrid_model_counts_its_recurrent_checkpoints(monkeypatch):
    """Each slot may keep COLI_RS_CHECKPOINTS copies of the recurrent state (8 by default), taken
    on first use beside the KV mapping: the plan counts them per slot, and none for other models."""
    path = moe_models.tiny("qwen35moe", "Q8_0")
    monkeypatch.delenv("COLI_RS_CHECKPOINTS", raising=False)
    eight = make_plan(path, ctx=64, kv_slots=2)
    monkeypatch.setenv("COLI_RS_CHECKPOINTS", "0")
    none = make_plan(path, ctx=64, kv_slots=2)
    monkeypatch.setenv("COLI_RS_CHECKPOINTS", "2")
    two = make_plan(path, ctx=64, kv_slots=2)
    assert none.checkpoint_bytes_per_slot == 0 and eight.checkpoint_bytes_per_slot > 0
    assert eight.checkpoint_bytes_per_slot == 4 * two.checkpoint_bytes_per_slot
    # one checkpoint is the state the KV mapping already holds once per slot
    assert two.checkpoint_bytes_per_slot // 2 < eight.kv_bytes_per_slot
    assert "checkpoints" in describe(eight) and "checkpoints" not in describe(none)
    monkeypatch.delenv("COLI_RS_CHECKPOINTS")
    assert make_plan(moe_models.tiny("qwen3moe", "Q8_0"), ctx=64).checkpoint_bytes_per_slot == 0


def test_plan_counts_a_verifys_recurrent_state_copies(monkeypatch):
    """A hybrid model that drafts keeps a copy of its recurrent state per drafted row of a verify (to take
    back rejected drafts): the default 4, --draft-tokens N's N, none with drafting off or without a state."""
    path = moe_models.tiny("qwen35moe", "Q8_0")
    monkeypatch.setenv("COLI_RS_CHECKPOINTS", "1")
    state = make_plan(path, ctx=64).checkpoint_bytes_per_slot  # one copy of the state
    plans = {k: make_plan(path, ctx=64, kv_slots=2, draft_tokens=k) for k in (None, 0, 1, 8)}
    assert state > 0 and plans[None].verify_state_bytes_per_slot == 4 * state
    assert plans[0].verify_state_bytes_per_slot == 0 and plans[1].verify_state_bytes_per_slot == state
    assert plans[8].verify_state_bytes_per_slot == 8 * state
    assert "verify" in describe(plans[None]) and "verify " not in describe(plans[0])
    assert make_plan(moe_models.tiny("qwen3moe", "Q8_0"), ctx=64).verify_state_bytes_per_slot == 0


def test_per_layer_token_table_is_read_by_the_row_not_counted_in_ram(tmp_path):
    """Gemma 4 E2B/E4B's per_layer_token_embd is read a token's row at a time from the file mapping:
    the plan keeps it out of the dense part that must sit in RAM, and says so."""
    from tests.fixtures import gemma4_models

    path = gemma4_models.tiny("Q8_0", directory=tmp_path, n_embd_per_layer=32, moe=False, k_eq_v=False,
                              double_wide=True)
    with GGUFFile(path) as g:
        sizes = {t.name: t.nbytes for t in g.tensors()}
    plan = make_plan(path, ctx=256)
    tok = sizes["token_embd.weight"] if "output.weight" in sizes else 0
    assert plan.row_read_bytes == sizes["per_layer_token_embd.weight"] + tok > tok
    assert plan.dense_bytes == sum(sizes.values()) - plan.row_read_bytes
    assert "token tables" in describe(plan) and "row at a time" in describe(plan)


@pytest.mark.parametrize("tied", [False, True])
def test_token_embeddings_are_read_by_the_row_unless_they_are_the_lm_head(tied, tmp_path):
    """forward.c reads a token's embedding row from the mapping: a file with an output.weight of its own
    keeps token_embd out of the RAM the plan reserves (gpt-oss-20b: 615 MB); tied, it is the LM head."""
    path = moe_models.cached(moe_models.tiny_config("qwen3moe", "Q8_0", tied=tied), label="tiny", directory=tmp_path)
    with GGUFFile(path) as g:
        sizes = {t.name: t.nbytes for t in g.tensors()}
    plan = make_plan(path, ctx=64)
    assert ("output.weight" in sizes) is not tied
    assert plan.row_read_bytes == (0 if tied else sizes["token_embd.weight"])
    assert plan.dense_bytes + plan.expert_bytes + plan.row_read_bytes == sum(sizes.values())


def test_the_drafters_weights_and_kv_are_counted():
    """The file's MTP block (drafting by default) is counted as the drafter's, in RAM beside the dense part
    (its experts are read in place, never streamed): its tensors in draft_bytes, one layer of KV per slot;
    with drafting off it takes nothing. A draft model counts its weights and its own KV instead."""
    path = moe_models.tiny("glm4moe", "Q8_0", nextn_layers=1)
    with GGUFFile(path) as g:
        tensors = list(g.tensors())
        n_layer = g.describe()["n_layer"] - 1
    block = sum(t.nbytes for t in tensors if t.name.startswith(f"blk.{n_layer}."))
    total = sum(t.nbytes for t in tensors)
    on = make_plan(path, ctx=256)
    off = make_plan(path, ctx=256, draft_tokens=0)
    assert on.drafter == "mtp" and on.draft_bytes == block
    assert on.dense_bytes + on.row_read_bytes + on.expert_bytes + block == total
    assert (on.dense_bytes, on.expert_bytes) == (off.dense_bytes, off.expert_bytes)
    assert off.drafter == "" and off.draft_bytes == off.draft_kv_bytes_per_slot == 0
    with Engine(path, n_ctx=256, n_threads=1) as e:  # the block's one layer against the trunk's per layer
        per_layer = e.model_info()["kv_bytes_per_slot"] // n_layer
    assert on.draft_kv_bytes_per_slot == per_layer
    assert "drafter      MTP block" in describe(on) and "drafter" not in describe(off)

    small = moe_models.tiny("qwen3moe", "Q8_0")
    with GGUFFile(small) as g:
        small_bytes = sum(t.nbytes for t in g.tensors())
    drafted = make_plan(path, ctx=256, draft_model=small)
    assert drafted.drafter == "model" and drafted.draft_bytes == small_bytes
    assert drafted.draft_kv_bytes_per_slot == make_plan(small, ctx=256).kv_bytes_per_slot
    r = run_coli("plan", "--model", str(path), "--ctx", "256", "--draft-model", str(small), "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["draft_bytes"] == small_bytes


def test_a_sparse_attention_models_block_counts_no_indexer():
    """DeepSeek V3.2's MTP block attends densely (llama.cpp's graph_mtp): the indexer the file holds for it
    is never read, so the drafter's bytes leave it out."""
    path = moe_models.tiny("deepseek32", "Q8_0", nextn_layers=1)
    with GGUFFile(path) as g:
        tensors = list(g.tensors())
        n_layer = g.describe()["n_layer"] - 1
    prefix = f"blk.{n_layer}."
    indexer = sum(t.nbytes for t in tensors if t.name.startswith(prefix + "indexer."))
    block = sum(t.nbytes for t in tensors if t.name.startswith(prefix))
    plan = make_plan(path, ctx=256)
    assert indexer > 0 and plan.drafter == "mtp" and plan.draft_bytes == block - indexer
