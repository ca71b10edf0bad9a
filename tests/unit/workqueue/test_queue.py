"""The dedup queue's semantics, one test per rule (client-go's ``workqueue.Type``)."""

from __future__ import annotations

import asyncio

import pytest

from omed.clock import FakeClock
from omed.workqueue import Queue

from ._support import sample, settle


async def test_a_key_queued_twice_is_queued_once() -> None:
    queue = Queue()
    queue.add("a")
    queue.add("a")
    assert len(queue) == 1
    assert await queue.get() == "a"
    assert len(queue) == 0


async def test_keys_come_out_in_the_order_they_were_first_added() -> None:
    queue = Queue()
    for key in ["b", "a", "c", "a", "b"]:
        queue.add(key)
    assert [await queue.get() for _ in range(3)] == ["b", "a", "c"]


async def test_a_key_being_processed_is_not_handed_to_a_second_worker() -> None:
    queue = Queue()
    queue.add("a")
    assert await queue.get() == "a"
    assert queue.is_processing("a")
    queue.add("a")  # re-added while processing: stays out of the FIFO
    assert len(queue) == 0
    second = asyncio.create_task(queue.get())
    await settle()
    assert not second.done()
    queue.done("a")
    assert await second == "a"
    queue.done("a")


async def test_a_key_re_added_while_processing_is_processed_exactly_once_more() -> None:
    queue = Queue()
    queue.add("a")
    key = await queue.get()
    assert key == "a"
    queue.add("a")
    queue.add("a")
    queue.done("a")
    assert len(queue) == 1
    assert await queue.get() == "a"
    queue.done("a")
    assert len(queue) == 0
    assert not queue.is_processing("a")
    await asyncio.wait_for(queue.wait_idle(), timeout=5)


async def test_done_without_add_again_does_not_requeue() -> None:
    queue = Queue()
    queue.add("a")
    await queue.get()
    queue.done("a")
    assert len(queue) == 0
    assert not queue.is_processing("a")


async def test_done_of_a_key_not_held_raises() -> None:
    queue = Queue()
    queue.add("a")
    with pytest.raises(KeyError):
        queue.done("a")  # queued, not held
    assert await queue.get() == "a"
    queue.done("a")
    with pytest.raises(KeyError):
        queue.done("a")  # released twice


async def test_get_waits_for_an_add() -> None:
    queue = Queue()
    getter = asyncio.create_task(queue.get())
    await settle()
    assert not getter.done()
    queue.add("a")
    assert await getter == "a"


async def test_each_waiting_getter_gets_a_different_key() -> None:
    queue = Queue()
    getters = [asyncio.create_task(queue.get()) for _ in range(3)]
    await settle()
    for key in ["a", "b", "c"]:
        queue.add(key)
    assert sorted(str(key) for key in await asyncio.gather(*getters)) == ["a", "b", "c"]


async def test_a_cancelled_getter_passes_its_wake_up_on() -> None:
    queue = Queue()
    first = asyncio.create_task(queue.get())
    second = asyncio.create_task(queue.get())
    await settle()
    queue.add("a")  # wakes `first`...
    first.cancel()  # ...which is cancelled before it runs
    assert await second == "a"
    with pytest.raises(asyncio.CancelledError):
        await first
    assert len(queue) == 0


async def test_shutdown_wakes_waiting_getters_with_none_and_refuses_adds() -> None:
    queue = Queue()
    getter = asyncio.create_task(queue.get())
    await settle()
    queue.shutdown()
    assert await getter is None
    queue.add("a")
    assert len(queue) == 0
    assert await queue.get() is None
    assert queue.shutting_down


async def test_shutdown_drops_queued_keys_but_lets_in_flight_keys_finish() -> None:
    queue = Queue()
    queue.add("held")
    queue.add("queued")
    assert await queue.get() == "held"
    queue.shutdown()
    assert len(queue) == 0
    assert await queue.get() is None
    assert queue.is_processing("held")
    queue.add("held")  # refused: not requeued at done
    queue.done("held")
    assert not queue.is_processing("held")
    assert await queue.get() is None


async def test_shutdown_with_drain_waits_until_in_flight_keys_are_done() -> None:
    queue = Queue()
    for key in ["a", "b", "c"]:
        queue.add(key)
    first = await queue.get()
    second = await queue.get()
    assert (first, second) == ("a", "b")
    drain = asyncio.create_task(queue.shutdown_with_drain())
    await settle()
    assert not drain.done()
    assert await queue.get() is None  # no new gets while draining
    queue.done("a")
    await settle()
    assert not drain.done()
    queue.done("b")
    await asyncio.wait_for(drain, timeout=5)


async def test_shutdown_with_drain_returns_at_once_when_nothing_is_in_flight() -> None:
    queue = Queue()
    queue.add("a")
    await asyncio.wait_for(queue.shutdown_with_drain(), timeout=5)
    assert await queue.get() is None


async def test_wait_idle_waits_for_queued_and_in_flight_keys() -> None:
    queue = Queue()
    queue.add("a")
    idle = asyncio.create_task(queue.wait_idle())
    await settle()
    assert not idle.done()
    assert await queue.get() == "a"
    await settle()
    assert not idle.done()
    queue.done("a")
    await asyncio.wait_for(idle, timeout=5)


def test_an_empty_name_is_refused() -> None:
    with pytest.raises(ValueError, match="must not be empty"):
        Queue("")


async def test_queue_metrics_count_adds_depth_and_durations(unique_name: str) -> None:
    clock = FakeClock()
    queue = Queue(unique_name, clock=clock)
    labels = {"name": unique_name, "controller": unique_name}

    queue.add("a")
    queue.add("a")  # a duplicate is not an add
    queue.add("b")
    assert sample("workqueue_adds_total", **labels) == 2
    assert sample("workqueue_depth", **labels) == 2

    clock.advance(2.0)
    assert await queue.get() == "a"
    assert sample("workqueue_depth", **labels) == 1
    assert sample("workqueue_queue_duration_seconds_count", **labels) == 1
    assert sample("workqueue_queue_duration_seconds_sum", **labels) == 2.0
    assert sample("workqueue_queue_duration_seconds_bucket", le="1", **labels) == 0
    assert sample("workqueue_queue_duration_seconds_bucket", le="10", **labels) == 1

    clock.advance(3.0)
    assert await queue.get() == "b"
    clock.advance(1.0)
    # a has run 4 s, b 1 s.
    assert sample("workqueue_unfinished_work_seconds", **labels) == 5.0
    assert sample("workqueue_longest_running_processor_seconds", **labels) == 4.0

    queue.done("a")
    queue.done("b")
    assert sample("workqueue_work_duration_seconds_count", **labels) == 2
    assert sample("workqueue_work_duration_seconds_sum", **labels) == 5.0
    assert sample("workqueue_unfinished_work_seconds", **labels) == 0
    assert sample("workqueue_longest_running_processor_seconds", **labels) == 0
    assert sample("workqueue_depth", **labels) == 0


async def test_a_key_re_added_while_processing_counts_in_depth(unique_name: str) -> None:
    queue = Queue(unique_name, clock=FakeClock())
    labels = {"name": unique_name, "controller": unique_name}
    queue.add("a")
    await queue.get()
    queue.add("a")
    assert len(queue) == 0
    assert sample("workqueue_depth", **labels) == 1  # client-go counts it: it is waiting
    queue.shutdown()
    assert sample("workqueue_depth", **labels) == 0
    assert sample("workqueue_adds_total", **labels) == 2


async def test_queues_sharing_a_name_share_counters_and_sum_depth(unique_name: str) -> None:
    labels = {"name": unique_name, "controller": unique_name}
    first = Queue(unique_name)
    second = Queue(unique_name)
    first.add("a")
    second.add("a")
    second.add("b")
    assert sample("workqueue_adds_total", **labels) == 3
    assert sample("workqueue_depth", **labels) == 3
