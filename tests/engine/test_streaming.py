"""Expert streaming changes speed, never tokens: with a cache of one expert
per layer (everything streamed), a middling one under either policy, O_DIRECT, no prefetch, and
pinned experts, every MoE architecture, and experts of every low-bit type,
decode exactly the tokens they decode with all experts resident. Also: routing heat, tiers, counters and the
per-turn records the dashboard reads."""
from __future__ import annotations

import math

import pytest

from colibri.engine import Engine
from tests.engine.test_lowbit_models import KINDS as LOWBIT_KINDS
from tests.engine.test_lowbit_models import fixture as lowbit_fixture
from tests.engine.test_lowbit_models import require_kernels
from tests.fixtures import moe_models

pytest.importorskip("gguf")

ARCHS = ("qwen3moe", "olmoe", "llama", "glm4moe", "deepseek2", "deepseek32", "glm-dsa")


def decode(e: Engine, prompts: list[list[int]], max_tokens: int) -> dict[int, list[int]]:
    """Greedy, every prompt on its own slot, all together."""
    for slot, p in enumerate(prompts):
        e.submit(slot, p, max_tokens=max_tokens, ignore_eos=True)
    out: dict[int, list[int]] = {s: [] for s in range(len(prompts))}
    done = 0
    while done < len(prompts):
        for ev in e.step():
            if ev.done:
                done += 1
            else:
                out[ev.slot].append(ev.token)
    return out


def prompts_for(e: Engine) -> list[list[int]]:
    return [[e.bos] + list(range(5, 45)), [e.bos] + list(range(90, 97))]


@pytest.mark.parametrize("quant", ["Q8_0", "Q4_0"])
@pytest.mark.parametrize("arch", ARCHS)
def test_streamed_tokens_equal_resident(arch, quant):
    streamed_equals_resident(moe_models.tiny(arch, quant), f"{arch} {quant}")


@pytest.mark.parametrize("kind", LOWBIT_KINDS)
def test_low_bit_streamed_tokens_equal_resident(kind):
    """Experts of every low-bit type, and the mixed files: an expert is a whole
    number of rows of whole blocks (256-value super-blocks for the IQ, TQ and K
    types; 17-byte MXFP4 blocks make rows of odd size in the gpt-oss-like file),
    sliced by its byte stride, and an O_DIRECT read keeps the file offset's
    alignment (mod 4096) in the buffer, so a streamed expert lies as the mapped one."""
    path = lowbit_fixture(kind)
    require_kernels(path)
    streamed_equals_resident(path, kind)


def streamed_equals_resident(path, label: str) -> None:
    with Engine(path, n_slots=2, n_ctx=128, n_batch=16, n_threads=2) as e:
        want = decode(e, prompts_for(e), 12)
        per_token = e.stats()["n_layer"]  # only to check the engine answers before streaming
        assert per_token > 0
    settings = [dict(expert_cache_bytes=1), dict(expert_cache_bytes=1, prefetch=False),
                dict(expert_cache_bytes=1, direct_io=True), dict(expert_cache_bytes=1 << 20, io_threads=1),
                dict(expert_cache_bytes=1 << 20, expert_policy="lru")]
    for kw in settings:
        with Engine(path, n_slots=2, n_ctx=128, n_batch=16, n_threads=2, **kw) as e:
            got = decode(e, prompts_for(e), 12)
            st = e.stats()
        assert got == want, f"{label} {kw}"
        assert st["streaming"] == 1 and st["loads"] > 0 and st["bytes_read"] > 0
        assert st["hits"] + st["misses"] > 0


def test_expert_policy_is_named():
    """Both policies keep a middling cache's hits apart from its misses; an unknown one is refused by name."""
    path = moe_models.tiny("qwen3moe", "Q8_0")
    for policy in ("lru", "lrfu", ""):
        with Engine(path, n_ctx=128, n_threads=2, expert_cache_bytes=1 << 20, expert_policy=policy) as e:
            decode(e, prompts_for(e)[:1], 8)
            st = e.stats()
        assert st["hits"] > 0 and st["misses"] > 0, policy
    with pytest.raises(ValueError, match="expert_policy 'lfu'"):
        Engine(path, n_ctx=128, expert_cache_bytes=1 << 20, expert_policy="lfu")


def test_pinned_experts_and_heat(tmp_path):
    path = moe_models.tiny("qwen3moe", "Q8_0")
    with Engine(path, n_slots=2, n_ctx=128, n_threads=2) as e:
        want = decode(e, prompts_for(e), 10)
        st = e.stats(arrays=True)
        turns = e.turns()
    L, E, K = st["n_layer"], st["n_expert"], 2
    n_tokens = st["tokens_prompt"] + st["tokens_generated"]
    assert sum(st["counts"]) == n_tokens * L * K  # every layer of the tiny qwen3moe is MoE
    assert 0 < sum(st["last_hits"]) <= 2 * L * K and max(st["heat"]) > 0
    assert set(st["tiers"]) == {1}  # resident: all in RAM
    assert len(turns) == 2 and {t["completion_tokens"] for t in turns} == {10}
    assert all(t["wall_s"] > 0 and t["forwards"] > 0 for t in turns)
    assert math.isnan(turns[0]["cache_hit_rate"])  # nothing streamed
    counts = list(st["counts"])
    one_expert = (moe_models.tiny_config("qwen3moe", "Q8_0").n_ff_exp * 128 * 3) * 34 // 32 + 3 * 4096
    with Engine(path, n_slots=2, n_ctx=128, n_threads=2, expert_cache_bytes=1, expert_pin_bytes=4 * one_expert) as e:
        pinned = e.pin_experts(counts)
        st2 = e.stats(arrays=True)
        got = decode(e, prompts_for(e), 10)
        turn = e.turns()[-1]
    assert pinned >= 3 and st2["n_pinned"] == pinned and list(st2["tiers"]).count(2) == pinned
    hottest = max(range(L * E), key=lambda c: counts[c])
    assert st2["tiers"][hottest] == 2
    assert got == want
    assert 0 <= turn["cache_hit_rate"] <= 1 and turn["bytes_read"] > 0 and turn["io_wait_s"] >= 0


def test_prefetch_reads_ahead_without_displacing_the_working_set():
    """Reads on a prediction start where there is room (a cache that holds every expert, a middling one)
    and are counted as used only when chosen; they change no prediction. A guess evicts only cold experts
    and the reads a step waits for go first (experts.c), so with a cache of one expert per layer, always
    in use, at most the first token's guesses run."""
    path = moe_models.tiny("qwen3moe", "Q8_0")
    for cache in (1, 1 << 19, 1 << 20):
        runs = {}
        for prefetch in (True, False):
            with Engine(path, n_slots=2, n_ctx=128, n_threads=2, expert_cache_bytes=cache, prefetch=prefetch,
                        draft_tokens=-1) as e:  # rows drafted by the timing-driven plan would move the counts
                decode(e, prompts_for(e), 24)
                runs[prefetch] = e.stats()
        on, off = runs[True], runs[False]
        assert off["prefetch_issued"] == 0 and on["prefetch_used"] <= on["prefetch_issued"], cache
        assert on["predicted"] == off["predicted"] and on["predicted_right"] == off["predicted_right"], cache
        if cache == 1:
            assert on["prefetch_issued"] <= on["n_layer"] * 2, cache  # only into entries still free
        else:
            assert on["prefetch_used"] > 0, cache
