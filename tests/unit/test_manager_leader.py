"""The leader's work: recorder, informers, cache sync, then controllers; stop in reverse."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from omed.clock import FakeClock
from omed.manager.leader import CacheSyncTimeout, LeaderWork


class FakeInformers:
    """The InformerFactory surface LeaderWork uses; ``synced`` gates the cache sync."""

    def __init__(self, journal: list[str], clock: FakeClock) -> None:
        self.journal = journal
        self.clock = clock
        self.synced = asyncio.Event()

    def informers(self) -> list[object]:
        return [object(), object()]

    def start(self) -> None:
        self.journal.append("informers start")

    async def stop(self) -> None:
        self.journal.append("informers stop")

    async def wait_for_cache_sync(self, *, timeout: float | None = None) -> bool:
        assert timeout is not None
        waiter = asyncio.ensure_future(self.synced.wait())
        timer = asyncio.ensure_future(self.clock.sleep(timeout))
        await asyncio.wait({waiter, timer}, return_when=asyncio.FIRST_COMPLETED)
        waiter.cancel()
        timer.cancel()
        return self.synced.is_set()


class FakeController:
    def __init__(self, name: str, journal: list[str]) -> None:
        self.name = name
        self.journal = journal
        self.fail: Exception | None = None
        self._stopped = asyncio.Event()

    async def run(self) -> None:
        self.journal.append(f"{self.name} run")
        if self.fail is not None:
            raise self.fail
        try:
            await self._stopped.wait()
        except asyncio.CancelledError:
            self.journal.append(f"{self.name} cancelled")
            raise

    async def shutdown(self, *, drain: bool = True) -> None:
        self.journal.append(f"{self.name} shutdown drain={drain}")
        self._stopped.set()

    def close(self) -> None:
        self.journal.append(f"{self.name} close")


class FakeRecorder:
    def __init__(self, journal: list[str]) -> None:
        self.journal = journal

    async def start(self) -> None:
        self.journal.append("recorder start")

    async def stop(self, *, flush: bool = True, timeout: float = 10.0) -> None:
        self.journal.append(f"recorder stop flush={flush}")


async def settle() -> None:
    """Let every ready task run until all of them wait on something."""
    for _ in range(20):
        await asyncio.sleep(0)


class Setup:
    def __init__(self) -> None:
        self.journal: list[str] = []
        self.clock = FakeClock()
        self.informers = FakeInformers(self.journal, self.clock)
        self.controllers = [FakeController(n, self.journal) for n in ("isvc", "irep")]
        self.work = LeaderWork(
            controllers=[(c.name, c) for c in self.controllers],  # type: ignore[misc]
            informers=self.informers,  # type: ignore[arg-type]
            recorder=FakeRecorder(self.journal),  # type: ignore[arg-type]
            cache_sync_timeout=120.0,
        )
        self.task: asyncio.Task[None] | None = None

    def run(self) -> asyncio.Task[None]:
        self.task = asyncio.create_task(self.work.run())
        return self.task

    async def until(self, check: Callable[[], bool], what: str) -> None:
        for _ in range(1000):
            if check():
                return
            await asyncio.sleep(0)
        raise AssertionError(f"never reached: {what}; journal: {self.journal}")


async def test_controllers_start_only_after_every_cache_synced() -> None:
    s = Setup()
    task = s.run()
    await s.until(lambda: "informers start" in s.journal, "informers start")
    await settle()
    assert s.journal == ["recorder start", "informers start"]
    assert not s.work.synced
    s.informers.synced.set()
    await s.until(lambda: "irep run" in s.journal, "controllers run")
    assert s.work.synced
    await s.work.stop(drain=True)
    await task
    assert s.journal == [
        "recorder start",
        "informers start",
        "isvc run",
        "irep run",
        "isvc shutdown drain=True",
        "irep shutdown drain=True",
        "isvc close",
        "irep close",
        "informers stop",
    ]
    await s.work.close()
    assert s.journal[-1] == "recorder stop flush=True"


async def test_caches_that_never_sync_fail_after_the_timeout() -> None:
    s = Setup()
    task = s.run()
    await s.until(lambda: "informers start" in s.journal, "informers start")
    await settle()  # the sync's timer is now asleep on the clock
    s.clock.advance(119.9)
    await settle()
    assert not task.done()
    s.clock.advance(0.1)
    with pytest.raises(CacheSyncTimeout, match=r"^timed out waiting for cache to be synced$"):
        await task
    assert not any(entry.endswith(" run") for entry in s.journal)


async def test_a_stop_during_the_cache_sync_returns_without_starting_controllers() -> None:
    s = Setup()
    task = s.run()
    await s.until(lambda: "informers start" in s.journal, "informers start")
    await s.work.stop(drain=True)
    await task
    assert not any(entry.endswith(" run") for entry in s.journal)
    assert s.journal[-1] == "informers stop"
    assert not s.work.synced


async def test_a_stop_before_the_run_starts_nothing() -> None:
    s = Setup()
    task = s.run()  # created, not yet running
    await s.work.stop(drain=True)
    await task
    assert "informers start" not in s.journal
    assert not any(entry.endswith(" run") for entry in s.journal)


async def test_a_controller_that_fails_stops_the_others_and_raises() -> None:
    s = Setup()
    s.controllers[1].fail = RuntimeError("boom")
    s.informers.synced.set()
    with pytest.raises(RuntimeError, match="boom"):
        await s.run()
    assert "isvc cancelled" in s.journal


async def test_close_is_once_only_and_can_skip_the_flush() -> None:
    s = Setup()
    await s.work.close(flush=False)
    await s.work.close()
    assert s.journal == ["recorder stop flush=False"]
