"""The key queue and timed wake-ups (no wall-clock sleeps: FakeClock)."""

from __future__ import annotations

import asyncio

from omed.clock import FakeClock
from omed.devcluster.sim.watch import KeyQueue, Wakeups


async def test_key_queue_dedups_and_never_hands_a_key_to_two_workers() -> None:
    queue = KeyQueue()
    queue.add("a")
    queue.add("a")
    queue.add("b")
    assert len(queue) == 2
    first = await queue.get()
    assert first == "a"
    queue.add("a")  # dirty while processing: not queued again yet
    assert await queue.get() == "b"
    assert len(queue) == 0
    queue.done("a")
    assert len(queue) == 1
    assert await queue.get() == "a"
    queue.done("a")
    queue.done("b")
    assert queue.idle()


async def test_key_queue_get_waits_for_add() -> None:
    queue = KeyQueue()
    waiter = asyncio.create_task(queue.get())
    await asyncio.sleep(0)
    assert not waiter.done()
    queue.add("x")
    assert await asyncio.wait_for(waiter, 1) == "x"


async def settle() -> None:
    """Let every ready task run (a fake-clock wake-up takes a few loop turns)."""
    for _ in range(50):
        await asyncio.sleep(0)


async def test_wakeups_fire_in_order_and_keep_the_earliest() -> None:
    clock = FakeClock()
    fired: list[str] = []
    wakeups = Wakeups(clock, fired.append)
    task = asyncio.create_task(wakeups.run())
    try:
        wakeups.after("late", 10)
        wakeups.after("soon", 2)
        wakeups.after("soon", 5)  # later than already asked: ignored
        wakeups.after("cancelled", 1)
        wakeups.cancel("cancelled")
        await settle()
        assert fired == []
        clock.advance(2)
        await settle()
        assert fired == ["soon"]
        wakeups.after("late", 3)  # earlier than asked before: moves up
        clock.advance(3)
        await settle()
        assert fired == ["soon", "late"]
        clock.advance(10)
        await settle()
        assert fired == ["soon", "late"]
    finally:
        task.cancel()


async def test_wakeups_stop_when_cancelled_at_any_point() -> None:
    clock = FakeClock()
    for turns in range(12):
        wakeups = Wakeups(clock, lambda key: None)
        task = asyncio.create_task(wakeups.run())
        wakeups.after("k", 1)
        for _ in range(turns):
            clock.advance(1)
            wakeups.after("k", 1)
            await asyncio.sleep(0)
        task.cancel()
        await settle()
        assert task.done(), f"still running after a cancel {turns} turns in"
