"""Delayed adds on a FakeClock: a key appears when its time comes, and not before."""

from __future__ import annotations

from omed.clock import FakeClock
from omed.workqueue import DelayingQueue

from ._support import sample, settle


async def test_a_delayed_key_is_added_when_its_time_comes_and_not_before() -> None:
    clock = FakeClock()
    queue = DelayingQueue(clock=clock)
    queue.add_after("a", 2.0)
    assert queue.waiting == 1
    clock.advance(1.75)  # dyadic steps: 1000.0 + 1.75 + 0.25 is exactly the ready time
    await settle()
    assert len(queue) == 0
    clock.advance(0.25)
    await settle()
    assert len(queue) == 1
    assert queue.waiting == 0
    assert await queue.get() == "a"
    queue.shutdown()


async def test_a_delay_of_zero_or_less_is_a_plain_add() -> None:
    queue = DelayingQueue(clock=FakeClock())
    queue.add_after("a", 0)
    queue.add_after("b", -1.0)
    assert len(queue) == 2
    assert queue.waiting == 0
    queue.shutdown()


async def test_keys_are_added_in_order_of_their_ready_time() -> None:
    clock = FakeClock()
    queue = DelayingQueue(clock=clock)
    queue.add_after("late", 3.0)
    queue.add_after("early", 1.0)
    queue.add_after("middle", 2.0)
    clock.advance(5.0)
    await settle()
    assert [await queue.get() for _ in range(3)] == ["early", "middle", "late"]
    queue.shutdown()


async def test_the_timer_wakes_for_each_ready_time_in_turn() -> None:
    clock = FakeClock()
    queue = DelayingQueue(clock=clock)
    queue.add_after("a", 1.0)
    queue.add_after("b", 2.0)
    clock.advance(1.0)
    await settle()
    assert await queue.get() == "a"
    assert len(queue) == 0
    clock.advance(1.0)
    await settle()
    assert await queue.get() == "b"
    queue.shutdown()


async def test_an_earlier_add_after_of_a_waiting_key_wins() -> None:
    clock = FakeClock()
    queue = DelayingQueue(clock=clock)
    queue.add_after("a", 10.0)
    queue.add_after("a", 1.0)
    assert queue.waiting == 1
    clock.advance(1.0)
    await settle()
    assert len(queue) == 1
    assert queue.waiting == 0
    assert await queue.get() == "a"
    queue.done("a")
    clock.advance(20.0)  # the superseded 10 s entry adds nothing
    await settle()
    assert len(queue) == 0
    queue.shutdown()


async def test_a_later_add_after_of_a_waiting_key_is_ignored() -> None:
    clock = FakeClock()
    queue = DelayingQueue(clock=clock)
    queue.add_after("a", 1.0)
    queue.add_after("a", 10.0)
    clock.advance(1.0)
    await settle()
    assert len(queue) == 1
    assert queue.waiting == 0
    queue.shutdown()


async def test_a_delayed_key_already_queued_is_deduplicated() -> None:
    clock = FakeClock()
    queue = DelayingQueue(clock=clock)
    queue.add("a")
    queue.add_after("a", 1.0)
    clock.advance(1.0)
    await settle()
    assert len(queue) == 1
    queue.shutdown()


async def test_a_delayed_key_that_comes_due_while_processing_waits_for_done() -> None:
    clock = FakeClock()
    queue = DelayingQueue(clock=clock)
    queue.add("a")
    assert await queue.get() == "a"
    queue.add_after("a", 1.0)
    clock.advance(1.0)
    await settle()
    assert len(queue) == 0
    queue.done("a")
    assert len(queue) == 1
    queue.shutdown()


async def test_shutdown_drops_waiting_keys() -> None:
    clock = FakeClock()
    queue = DelayingQueue(clock=clock)
    queue.add_after("a", 1.0)
    queue.shutdown()
    assert queue.waiting == 0
    queue.add_after("b", 1.0)
    assert queue.waiting == 0
    clock.advance(2.0)
    await settle()
    assert len(queue) == 0
    assert await queue.get() is None


async def test_every_add_after_counts_a_retry(unique_name: str) -> None:
    clock = FakeClock()
    queue = DelayingQueue(unique_name, clock=clock)
    queue.add_after("a", 1.0)
    queue.add_after("a", 2.0)  # ignored for scheduling, still a retry (as client-go)
    queue.add_after("b", 0)
    assert sample("workqueue_retries_total", name=unique_name, controller=unique_name) == 3
    queue.shutdown()
