"""The engine thread on the real engine: asyncio consumers on different slots
are served together with the tokens each gets alone; a consumer that leaves
cancels its slot and the generation's `ended` resolves only with its Finish;
a lease lasts until then, so the next request on the slot never meets it busy;
busy slots and oversized prompts are refused up front;
persisted slots survive a restart; bad slot files are ignored with a warning."""
from __future__ import annotations

import asyncio
import gc
import logging
import os
from concurrent.futures import ThreadPoolExecutor
from contextlib import aclosing

import pytest

from colibri.engine import Engine
from colibri.serving.engine_thread import EngineThread, Finish, GenRequest, SlotBusy, TokenEvent
from colibri.errors import EngineError


async def collect(et: EngineThread, req: GenRequest) -> tuple[list[int], Finish]:
    tokens = []
    async for ev in et.generate(req):
        if isinstance(ev, TokenEvent):
            tokens.append(ev.token)
        else:
            return tokens, ev
    raise AssertionError("no Finish event")


def test_concurrent_consumers_get_their_alone_tokens(default_model):
    texts = ("The sea is", "Once upon a time", "def fibonacci(n):")

    async def run(together: bool):
        with Engine(default_model, n_slots=3, n_ctx=128, n_threads=2) as e:
            reqs = [GenRequest(slot=i, prompt=e.tokenize(t), max_tokens=12, ignore_eos=True)
                    for i, t in enumerate(texts)]
            et = EngineThread(e)
            et.start()
            if together:
                out = await asyncio.gather(*[collect(et, r) for r in reqs])
            else:
                out = [await collect(et, r) for r in reqs]
            await et.close()
        return out

    async def main():
        return await run(False), await run(True)

    alone, together = asyncio.run(main())
    for (a, fa), (t, ft) in zip(alone, together):
        assert a == t and fa.reason == ft.reason == "length"
        assert fa.n_generated == 12 and fa.n_prompt > 0 and "ttft_s" in fa.timings


def test_a_request_without_logprobs_gets_the_same_tokens_and_no_readout(default_model):
    """GenRequest.logprobs=False (a serve request that asked for no log-probs): the engine skips
    the log-softmax, the tokens are those of a request that asked (NaN stands for the log-prob)."""
    async def main():
        with Engine(default_model, n_slots=2, n_ctx=128, n_threads=2) as e:
            et = EngineThread(e)
            et.start()
            prompt = e.tokenize("The sea is")
            out = []
            for slot, logprobs in ((0, True), (1, False)):
                events = [ev async for ev in et.generate(GenRequest(slot=slot, prompt=prompt, max_tokens=6,
                                                                    ignore_eos=True, logprobs=logprobs))]
                out.append([ev for ev in events if isinstance(ev, TokenEvent)])
            await et.close()
        return out

    asked, bare = asyncio.run(main())
    assert [ev.token for ev in asked] == [ev.token for ev in bare] and len(bare) == 6
    assert all(ev.logprob <= 0 for ev in asked) and all(ev.logprob != ev.logprob for ev in bare)


def test_leaving_early_cancels_and_frees_the_slot(default_model):
    async def main():
        with Engine(default_model, n_slots=1, n_ctx=128, n_threads=2) as e:
            et = EngineThread(e)
            et.start()
            prompt = e.tokenize("Count with me: one, two, three,")
            seen = 0
            async with aclosing(et.generate(GenRequest(slot=0, prompt=prompt, max_tokens=100,
                                                       ignore_eos=True))) as events:
                async for ev in events:
                    seen += 1
                    if seen == 3:
                        break
            # closing it waited for the engine to let go: the slot takes the next request at once
            tokens, fin = await collect(et, GenRequest(slot=0, prompt=prompt, max_tokens=2))
            with pytest.raises(EngineError) as long:
                async for _ in et.generate(GenRequest(slot=0, prompt=[e.bos] * 200, max_tokens=1)):
                    pass
            gen = et.generate(GenRequest(slot=0, prompt=prompt, max_tokens=50, ignore_eos=True))
            first = await gen.__anext__()
            with pytest.raises(SlotBusy):
                await et.generate(GenRequest(slot=0, prompt=prompt, max_tokens=1)).__anext__()
            await gen.aclose()
            await et.close()
            return seen, tokens, fin, long.value, first, e.slot_status(0)

    seen, tokens, fin, long, first, status = asyncio.run(main())
    assert seen == 3 and fin.reason == "length" and len(tokens) == 2
    assert fin.n_reused > 0  # the cancelled request's prompt stayed cached
    assert long.code == "too_long"
    assert isinstance(first, TokenEvent)
    assert status["finish"] == "cancelled" and status["state"] == "idle"


def test_a_lease_lasts_until_the_cancelled_generation_finishes(default_model):
    from colibri.serving.scheduler import Scheduler

    async def main():
        with Engine(default_model, n_slots=1, n_ctx=128, n_threads=2) as e:
            et = EngineThread(e)
            et.start()
            scheduler = Scheduler(1, max_queue=4)
            prompt = e.tokenize("Count with me: one, two, three,")
            async with scheduler.admit(0, prompt) as lease:
                generation = et.submit(GenRequest(slot=0, prompt=prompt, max_tokens=100, ignore_eos=True))
                lease.hold_until(generation.ended)
                first = await generation.__anext__()
                generation.cancel()  # the holder leaves with the engine still on the slot
            busy_after_leaving = scheduler.active
            ended_then = generation.ended.done()
            async with scheduler.admit(0, prompt) as lease:  # granted only once the Finish is in
                ended_at_grant = generation.ended.done()
                tokens, fin = await collect(et, GenRequest(slot=0, prompt=prompt, max_tokens=2))
            await et.close()
            return first, busy_after_leaving, ended_then, ended_at_grant, tokens, fin, scheduler.counters

    first, busy, ended_then, ended_at_grant, tokens, fin, counters = asyncio.run(main())
    assert isinstance(first, TokenEvent)
    assert busy == 1 and not ended_then  # the lease outlived its holder while the engine wound down
    assert ended_at_grant and len(tokens) == 2 and fin.reason == "length"
    assert counters.completed == 2


def test_persisted_slots_survive_a_restart(tmp_path, default_model, caplog):
    async def turn(prompt_text, max_tokens):
        with Engine(default_model, n_slots=2, n_ctx=128, n_threads=2) as e:
            et = EngineThread(e, persist_dir=tmp_path)
            et.start()
            prompt = e.tokenize(prompt_text)
            history = e.slot_tokens(1)
            tokens, fin = await collect(et, GenRequest(slot=1, prompt=prompt, max_tokens=max_tokens))
            await et.close()
            common = 0
            while common < min(len(history), len(prompt)) and history[common] == prompt[common]:
                common += 1
            return et.restored, history, fin, common

    restored0, _, fin0, _ = asyncio.run(turn("The weather today", 4))
    assert restored0 == {} and fin0.n_reused == 0
    restored1, history, fin1, common = asyncio.run(turn("The weather today is", 4))
    assert restored1 == {1: len(history)} and len(history) > 0
    assert fin1.n_reused == common > 1  # the saved conversation's prefix was reused
    # a damaged file is ignored with one warning and the server still serves
    files = list(tmp_path.rglob("slot-1.kv"))
    assert len(files) == 1
    files[0].write_bytes(files[0].read_bytes()[:-7])
    with caplog.at_level(logging.WARNING, logger="colibri.engine"):
        restored2, history2, fin2, _ = asyncio.run(turn("The weather today is", 2))
    assert restored2 == {} and history2 == [] and fin2.reason == "length"
    assert sum("ignoring the saved KV cache" in r.message for r in caplog.records) == 1


def test_learned_heat_pins_the_hottest_experts_next_time(tmp_path):
    from tests.fixtures import moe_models

    model = moe_models.tiny("qwen3moe", "Q8_0")

    async def run(**kw):
        with Engine(model, n_slots=1, n_ctx=128, n_threads=2, **kw) as e:
            et = EngineThread(e, heat_dir=tmp_path)
            et.start()
            tokens, fin = await collect(et, GenRequest(slot=0, prompt=[e.bos] + list(range(5, 40)), max_tokens=8,
                                                       ignore_eos=True))
            await et.close()
            return et.pinned, tokens, e.stats(arrays=True)

    pinned0, tokens0, st0 = asyncio.run(run())
    files = list(tmp_path.glob("*.heat"))
    assert pinned0 == 0 and len(files) == 1
    pinned1, tokens1, st1 = asyncio.run(run(expert_cache_bytes=1, expert_pin_bytes=1 << 20))
    assert pinned1 > 0 and st1["n_pinned"] == pinned1 and tokens1 == tokens0
    hottest = max(range(len(st0["counts"])), key=lambda c: st0["counts"][c])
    assert st1["tiers"][hottest] == 2  # pinned
    files[0].write_bytes(b"garbage")
    pinned2, tokens2, _ = asyncio.run(run(expert_cache_bytes=1, expert_pin_bytes=1 << 20))
    assert pinned2 == 0 and tokens2 == tokens0


def test_cancel_still_delivers_the_finish(default_model):
    async def main():
        with Engine(default_model, n_slots=1, n_ctx=128, n_threads=2) as e:
            et = EngineThread(e)
            et.start()
            prompt = e.tokenize("Count with me: one, two, three,")
            seen, fin = 0, None
            async for ev in et.generate(GenRequest(slot=0, prompt=prompt, max_tokens=100, ignore_eos=True,
                                                   echo=True, top_logprobs=2)):
                if isinstance(ev, TokenEvent):
                    seen += 1
                    if seen == 3:
                        et.cancel(0)
                else:
                    fin = ev
            await et.close()
            return seen, fin, len(prompt)

    seen, fin, n = asyncio.run(main())
    assert fin.reason == "cancelled" and 3 <= seen < 100 and fin.n_generated == seen
    assert len(fin.prompt_readout) == n and fin.prompt_readout[0].logprob is None
    assert fin.prompt_readout[1].logprob is not None and len(fin.prompt_readout[1].top) == 2


def test_events_ride_the_next_steps_wake(default_model, monkeypatch):
    """While a step follows, the loop is woken by that step (colibri_step_wake, from C with the
    GIL let go), not by a write from Python between steps: Python writes the pipe only when
    nothing runs on, here once, after the Finish. Loops without readers fall back to
    call_soon_threadsafe; a loop's pipe is closed once the loop is gone."""
    import colibri.serving.engine_thread as et_mod

    python_wakes = []
    real = et_mod.write_wake
    monkeypatch.setattr(et_mod, "write_wake", lambda fd: (python_wakes.append(fd), real(fd)))

    class NoReaders(asyncio.SelectorEventLoop):
        def add_reader(self, *args):
            raise NotImplementedError

    def open_fds() -> int:
        return len(os.listdir("/proc/self/fd"))

    with Engine(default_model, n_slots=2, n_ctx=128, n_threads=2) as e:
        et = EngineThread(e)
        et.start()
        prompt = e.tokenize("Once upon a time")

        async def one(slot: int) -> list[int]:
            tokens, fin = await collect(et, GenRequest(slot=slot, prompt=prompt, max_tokens=16, ignore_eos=True))
            assert fin.reason == "length"
            return tokens

        first = asyncio.run(one(0))
        assert len(first) == 16 and len(python_wakes) == 1
        # two loops in two threads at once, each with its own mailbox: the same tokens
        with ThreadPoolExecutor(2) as pool:
            both = list(pool.map(lambda slot: asyncio.run(one(slot)), (0, 1)))
        assert both == [first, first]
        loop = NoReaders()
        try:
            assert loop.run_until_complete(one(1)) == first
            loop.run_until_complete(loop.shutdown_asyncgens())
        finally:
            loop.close()
        gc.collect()
        before = open_fds()
        for _ in range(3):
            assert asyncio.run(one(0)) == first
        gc.collect()
        assert open_fds() == before
        asyncio.run(et.close())


def test_closing_the_thread_lets_go_of_the_loops_pipe(default_model):
    """A loop outlives a model the pool unloads: once the engine thread is closed, the loop no
    longer reads its pipe, and the pipe is closed when nothing holds its mailbox."""
    async def main():
        with Engine(default_model, n_slots=1, n_ctx=128, n_threads=2) as e:
            et = EngineThread(e)
            et.start()
            tokens, fin = await collect(et, GenRequest(slot=0, prompt=e.tokenize("The sea is"), max_tokens=4,
                                                       ignore_eos=True))
            assert len(tokens) == 4 and fin.reason == "length"
            r = et._mailboxes[asyncio.get_running_loop()].r
            n_open = len(os.listdir("/proc/self/fd"))
            await et.close()
            assert not asyncio.get_running_loop().remove_reader(r)  # already removed
            del et
            gc.collect()
            assert len(os.listdir("/proc/self/fd")) == n_open - 2

    asyncio.run(main())


def test_tokens_after_the_first_reach_the_loop_together(default_model, monkeypatch):
    """While tokens flow, a loop is woken at most once per wake_interval: its first token goes
    at once (time to first token), its end at once, and the tokens between in one hand-over.
    With wake_interval 0, a wake per step: many hand-overs. The tokens are the same."""
    import colibri.serving.engine_thread as et_mod

    handovers = []
    real = et_mod._Mailbox._drain

    def drain(self):
        if self.items:
            handovers.append(len(self.items))
        real(self)

    monkeypatch.setattr(et_mod._Mailbox, "_drain", drain)

    async def run(interval: float):
        with Engine(default_model, n_slots=1, n_ctx=128, n_threads=2) as e:
            et = EngineThread(e, wake_interval=interval)
            et.start()
            handovers.clear()
            generation = et.submit(GenRequest(slot=0, prompt=e.tokenize("Once upon a time"), max_tokens=24,
                                              ignore_eos=True))
            tokens, open_at_first = [], None
            async for ev in generation:
                if isinstance(ev, TokenEvent):
                    if open_at_first is None:
                        open_at_first = not generation.ended.done()
                    tokens.append(ev.token)
            await et.close()
            return tokens, open_at_first, list(handovers)

    gathered, first_alone, few = asyncio.run(run(3600.0))
    stepwise, _, many = asyncio.run(run(0.0))
    assert gathered == stepwise and len(gathered) == 24
    assert first_alone, "the first token waited for the generation's end"
    assert sum(few) == 25 and len(few) <= 2, few  # 24 tokens and the Finish
    assert sum(many) == 25 and len(many) >= 3, many
