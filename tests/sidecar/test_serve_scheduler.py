"""KV-slot admission: FIFO with reservations, the waiter-only queue limit, deadlines before
availability, cancellation, closing, counters, and the slot choice for requests without one."""
from __future__ import annotations

import asyncio

import pytest

from colibri.api.errors import as_api_error
from colibri.serving.scheduler import QueueFull, QueueTimeout, Scheduler, SchedulerClosed


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 30))


async def settle():
    for _ in range(5):
        await asyncio.sleep(0)


def test_immediate_admission_and_release():
    async def main():
        s = Scheduler(2, max_queue=0)
        a = await s.acquire(None, [1, 2])
        b = await s.acquire(None, [3, 4])
        assert {a.slot, b.slot} == {0, 1} and s.active == 2
        with pytest.raises(QueueFull) as err:  # max_queue 0: nobody may wait
            await s.acquire(None, [5])
        assert as_api_error(err.value).status == 429 and err.value.code == "queue_full"
        assert as_api_error(err.value).headers["Retry-After"] == "1"
        s.release(a, "completed")
        s.release(b, "failed")
        snap = s.snapshot()
        assert (snap["admitted"], snap["completed"], snap["failed"], snap["rejected"]) == (2, 1, 1, 1)
        assert snap["active"] == 0
    run(main())


def test_queue_limit_counts_waiters_only():
    async def main():
        s = Scheduler(1, max_queue=1)
        held = await s.acquire(None, [])
        waiter = asyncio.ensure_future(s.acquire(None, []))
        await settle()
        assert s.queued == 1
        with pytest.raises(QueueFull):
            await s.acquire(None, [])
        s.release(held, "completed")
        lease = await waiter
        assert lease.slot == 0 and lease.wait_s >= 0
    run(main())


def test_full_queue_does_not_refuse_a_request_that_can_start_now():
    async def main():
        s = Scheduler(2, max_queue=1)
        busy = await s.acquire(0, [])
        queued = asyncio.ensure_future(s.acquire(0, []))  # pinned to busy slot 0: waits, reserves only slot 0
        await settle()
        assert s.queued == 1
        free = await s.acquire(None, [])  # queue full, but slot 1 is free and unreserved
        assert free.slot == 1
        s.release(busy, "completed")
        assert (await queued).slot == 0
    run(main())


def test_max_queue_zero_refuses_pinned_busy_slot_even_with_free_slots():
    async def main():
        s = Scheduler(2, max_queue=0)
        await s.acquire(0, [])
        with pytest.raises(QueueFull):
            await s.acquire(0, [])
        assert (await s.acquire(1, [])).slot == 1
    run(main())


def test_older_any_slot_waiter_blocks_younger_ones():
    async def main():
        s = Scheduler(2, max_queue=4)
        a = await s.acquire(0, [])
        b = await s.acquire(1, [])
        order = []
        any_waiter = asyncio.ensure_future(s.acquire(None, []))
        await settle()
        pinned = asyncio.ensure_future(s.acquire(1, []))
        await settle()
        any_waiter.add_done_callback(lambda f: order.append("any"))
        pinned.add_done_callback(lambda f: order.append("pinned"))
        s.release(b, "completed")  # slot 1 frees: the older any-slot waiter takes it, not the pinned one
        await settle()
        assert order == ["any"] and (await any_waiter).slot == 1
        s.release(a, "completed")
        await settle()
        assert not pinned.done()  # slot 0 is free, but the pinned waiter wants slot 1
        s.release(await any_waiter, "completed")
        assert (await pinned).slot == 1
    run(main())


def test_older_pinned_waiter_reserves_only_its_slot():
    async def main():
        s = Scheduler(2, max_queue=4)
        a = await s.acquire(0, [])
        pinned = asyncio.ensure_future(s.acquire(0, []))
        await settle()
        other = await s.acquire(None, [])  # younger, any slot: slot 1 is not reserved
        assert other.slot == 1
        s.release(a, "completed")
        assert (await pinned).slot == 0
    run(main())


def test_deadline_is_checked_before_availability():
    async def main():
        s = Scheduler(1, max_queue=2, queue_timeout=0.3)
        held = await s.acquire(None, [])
        waiter = asyncio.ensure_future(s.acquire(None, []))
        await asyncio.sleep(0.5)  # past the deadline...
        with pytest.raises(QueueTimeout) as err:
            await waiter
        assert as_api_error(err.value).status == 429 and err.value.code == "queue_timeout"
        s.release(held, "completed")
        assert s.snapshot()["timed_out"] == 1 and s.active == 0
    run(main())


def test_cancelled_waiter_leaves_the_queue():
    async def main():
        s = Scheduler(1, max_queue=2)
        held = await s.acquire(None, [])
        waiter = asyncio.ensure_future(s.acquire(None, []))
        await settle()
        waiter.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiter
        assert s.queued == 0 and s.snapshot()["cancelled"] == 1 and s.snapshot()["admitted"] == 1
        s.release(held, "completed")
        assert s.active == 0
    run(main())


def test_admit_context_classifies_outcomes():
    async def main():
        s = Scheduler(1)
        async with s.admit(None, [1]) as lease:
            lease.tokens = [1, 2]
        with pytest.raises(ValueError):
            async with s.admit(None, [1]):
                raise ValueError("engine failure")
        with pytest.raises(ConnectionResetError):
            async with s.admit(None, [1]):
                raise ConnectionResetError()
        snap = s.snapshot()
        assert (snap["completed"], snap["failed"], snap["cancelled"], snap["active"]) == (1, 1, 1, 0)
    run(main())


def test_close_refuses_arrivals_and_wakes_waiters():
    async def main():
        s = Scheduler(1, max_queue=2)
        await s.acquire(None, [])
        waiter = asyncio.ensure_future(s.acquire(None, []))
        await settle()
        s.close()
        with pytest.raises(SchedulerClosed) as err:
            await waiter
        assert as_api_error(err.value).status == 503 and err.value.code == "scheduler_closed"
        with pytest.raises(SchedulerClosed):
            await s.acquire(None, [])
    run(main())


def test_any_slot_requests_follow_their_conversation():
    async def main():
        s = Scheduler(3)
        conv_a = [2, 105, 10, 11, 12, 13, 14, 15]
        conv_b = [2, 105, 20, 21, 22, 23, 24, 25]
        a = await s.acquire(None, conv_a)
        a.tokens = conv_a + [90, 91]
        s.release(a, "completed")
        b = await s.acquire(None, conv_b)  # a different conversation: an unused slot, not slot 0
        assert b.slot != a.slot
        b.tokens = conv_b + [92]
        s.release(b, "completed")
        again = await s.acquire(None, conv_a + [90, 91, 7, 8])  # the next turn of conversation A
        assert again.slot == a.slot
        s.release(again, "completed")
        c = await s.acquire(None, [2, 105, 30, 31, 32, 33])
        assert c.slot not in (a.slot, b.slot)  # the third conversation gets the third slot
    run(main())
