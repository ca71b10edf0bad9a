"""The key queue and timed wake-ups (no wall-clock sleeps: FakeClock)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import orjson

from omed.clock import FakeClock
from omed.kube.resources import PODS
from omed_devcluster.sim.watch import KeyQueue, Wakeups, list_watch


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


class SilentThenLiveClient:
    """A list of one pod; the first watch stays open and silent (a connection that died
    without a reset), the next one delivers an event."""

    def __init__(self) -> None:
        self.watches: list[dict[str, object]] = []

    async def list_page(self, resource: object, namespace: object, **kw: object) -> object:
        pod = {"metadata": {"name": "a", "namespace": "ns", "resourceVersion": "5"}}
        return {"items": [pod], "metadata": {"resourceVersion": "5"}}

    @contextlib.asynccontextmanager
    async def stream(self, path: str, *, params: dict[str, object]) -> AsyncIterator[object]:
        self.watches.append(params)
        silent = len(self.watches) == 1

        async def lines() -> AsyncIterator[bytes]:
            if silent:
                await asyncio.Event().wait()  # never set
            pod = {"metadata": {"name": "b", "namespace": "ns", "resourceVersion": "6"}}
            yield orjson.dumps({"type": "ADDED", "object": pod})
            await asyncio.Event().wait()

        yield lines()


class Seen:
    def __init__(self) -> None:
        self.names: list[str] = []

    def replace(self, namespace: object, items: list[dict[str, Any]]) -> None:
        self.names.extend(item["metadata"]["name"] for item in items)

    def upsert(self, obj: dict[str, Any]) -> None:
        self.names.append(obj["metadata"]["name"])

    def delete(self, obj: dict[str, Any]) -> None:
        pass


async def test_a_silent_watch_is_restarted_from_the_last_version() -> None:
    client = SilentThenLiveClient()
    seen = Seen()
    task = asyncio.create_task(
        list_watch(client, PODS, seen, namespace="ns", silence_timeout=0.2)  # type: ignore[arg-type]
    )
    try:
        for _ in range(100):
            if seen.names == ["a", "b"]:
                break
            await asyncio.sleep(0.02)
    finally:
        task.cancel()
    assert seen.names == ["a", "b"]
    assert [w["resourceVersion"] for w in client.watches[:2]] == ["5", "5"]
