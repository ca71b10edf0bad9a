"""The manager's start and stop order, with fake servers, election and leader's work.

Every fake writes to one journal, so a test asserts the whole order. Time is a FakeClock
(the drain timeout); the tests step the event loop, never the wall clock.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

import pytest

from omed.clock import FakeClock
from omed.leaderelection import LeaderElectionLost
from omed.manager.lifecycle import DRAIN_TIMEOUT, Manager

SERVERS = ["health", "metrics", "webhook"]
STARTED = [f"start {name}" for name in SERVERS]
STOPPED = [f"stop {name}" for name in reversed(SERVERS)]


class FakeServer:
    def __init__(self, name: str, journal: list[str], *, fail: bool = False) -> None:
        self.name = name
        self.journal = journal
        self.fail = fail

    async def start(self) -> None:
        self.journal.append(f"start {self.name}")
        if self.fail:
            raise OSError(98, "address already in use")

    async def stop(self) -> None:
        self.journal.append(f"stop {self.name}")


class FakeElection:
    """``grant`` lets acquire return; ``lose`` makes hold raise LeaderElectionLost."""

    def __init__(self, journal: list[str]) -> None:
        self.journal = journal
        self.grant = asyncio.Event()
        self.lose = asyncio.Event()

    async def acquire(self) -> None:
        self.journal.append("acquire")
        await self.grant.wait()
        self.journal.append("acquired")

    async def hold(self) -> None:
        try:
            await self.lose.wait()
        except asyncio.CancelledError:
            self.journal.append("renewing stopped")
            raise
        self.journal.append("lost")
        raise LeaderElectionLost()

    async def release(self) -> bool:
        self.journal.append("release")
        return True


class FakeWork:
    """Runs until stopped; ``drain_gate`` holds a draining stop open; ``fail`` crashes run."""

    def __init__(self, journal: list[str]) -> None:
        self.journal = journal
        self.synced = False
        self.sync_gate = asyncio.Event()
        self.sync_gate.set()
        self.drain_gate = asyncio.Event()
        self.drain_gate.set()
        self.fail: Exception | None = None
        self._stopped = asyncio.Event()

    async def run(self) -> None:
        self.journal.append("informers start")
        await self.sync_gate.wait()
        self.synced = True
        if self.fail is not None:
            raise self.fail
        self.journal.append("controllers run")
        await self._stopped.wait()

    async def stop(self, *, drain: bool) -> None:
        self.journal.append(f"controllers stop drain={drain}")
        if drain:
            await self.drain_gate.wait()
        self.journal.append("informers stop")
        self._stopped.set()

    async def close(self, *, flush: bool = True) -> None:
        self.journal.append(f"events close flush={flush}")


class Harness:
    def __init__(self, *, election: bool = True, failing_server: str | None = None) -> None:
        self.journal: list[str] = []
        self.clock = FakeClock()
        self.election = FakeElection(self.journal) if election else None
        self.work = FakeWork(self.journal)
        self.servers = [
            FakeServer(name, self.journal, fail=name == failing_server) for name in SERVERS
        ]
        self.manager = Manager(
            servers=self.servers,
            work=self.work,
            election=self.election,
            clock=self.clock,
        )
        self.stop = asyncio.Event()
        self.task: asyncio.Task[int] | None = None

    def start(self) -> None:
        self.task = asyncio.create_task(self.manager.run(self.stop))

    async def until(self, check: Callable[[], bool], what: str) -> None:
        """Step the loop until ``check`` holds (bounded: a hang fails instead of blocking)."""
        for _ in range(1000):
            if check():
                return
            await asyncio.sleep(0)
        raise AssertionError(f"never reached: {what}; journal: {self.journal}")

    async def logged(self, entry: str) -> None:
        await self.until(lambda: entry in self.journal, entry)

    async def exit_code(self) -> int:
        assert self.task is not None
        await self.until(self.task.done, "manager exit")
        return self.task.result()


def failure_records(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.getMessage() == "Failed to start manager"]


async def test_a_leader_stops_in_order_and_releases_the_lease_last() -> None:
    h = Harness()
    h.start()
    await h.logged("acquire")
    assert h.manager.leader_ready() is None  # a standby is ready
    assert not h.manager.leading
    h.election.grant.set()  # type: ignore[union-attr]
    await h.logged("controllers run")
    assert h.manager.leading
    h.stop.set()
    assert await h.exit_code() == 0
    assert h.journal == [
        *STARTED,
        "acquire",
        "acquired",
        "informers start",
        "controllers run",
        "controllers stop drain=True",
        "informers stop",
        "renewing stopped",
        "release",
        "events close flush=True",
        *STOPPED,
    ]


async def test_reconciles_in_flight_finish_before_the_lease_is_released() -> None:
    h = Harness()
    h.work.drain_gate.clear()
    h.election.grant.set()  # type: ignore[union-attr]
    h.start()
    await h.logged("controllers run")
    h.stop.set()
    await h.logged("controllers stop drain=True")
    for _ in range(50):
        await asyncio.sleep(0)
    assert "release" not in h.journal
    assert not any(entry.startswith("stop ") for entry in h.journal)
    h.work.drain_gate.set()
    assert await h.exit_code() == 0
    assert h.journal.index("informers stop") < h.journal.index("release")


async def test_a_drain_that_outlasts_the_timeout_is_cancelled_then_the_lease_released() -> None:
    h = Harness()
    h.work.drain_gate.clear()
    h.election.grant.set()  # type: ignore[union-attr]
    h.start()
    await h.logged("controllers run")
    h.stop.set()
    await h.logged("controllers stop drain=True")
    h.clock.advance(DRAIN_TIMEOUT - 0.1)
    for _ in range(50):
        await asyncio.sleep(0)
    assert "controllers stop drain=False" not in h.journal
    h.clock.advance(0.2)
    assert await h.exit_code() == 0
    after = h.journal[h.journal.index("controllers stop drain=True") + 1 :]
    assert after == [
        "controllers stop drain=False",
        "informers stop",
        "renewing stopped",
        "release",
        "events close flush=True",
        *STOPPED,
    ]


async def test_a_standby_just_stops_its_servers() -> None:
    h = Harness()
    h.start()
    await h.logged("acquire")
    h.stop.set()
    assert await h.exit_code() == 0
    assert h.journal == [*STARTED, "acquire", *STOPPED]


async def test_losing_the_lease_cancels_the_work_logs_and_exits_1(
    caplog: pytest.LogCaptureFixture,
) -> None:
    h = Harness()
    h.work.drain_gate.clear()  # a drain would hang: losing must not drain
    h.election.grant.set()  # type: ignore[union-attr]
    h.start()
    await h.logged("controllers run")
    with caplog.at_level(logging.INFO):
        h.election.lose.set()  # type: ignore[union-attr]
        assert await h.exit_code() == 1
    assert h.journal[h.journal.index("controllers run") + 1 :] == [
        "lost",
        "controllers stop drain=False",
        "informers stop",
        "events close flush=False",
        *STOPPED,
    ]
    [record] = failure_records(caplog)
    assert record.levelno == logging.ERROR
    assert record.name == "omed.manager"
    assert record.kv == {"error": "leader election lost"}  # type: ignore[attr-defined]


async def test_losing_the_lease_while_draining_stops_at_once_and_exits_1(
    caplog: pytest.LogCaptureFixture,
) -> None:
    h = Harness()
    h.work.drain_gate.clear()
    h.election.grant.set()  # type: ignore[union-attr]
    h.start()
    await h.logged("controllers run")
    h.stop.set()
    await h.logged("controllers stop drain=True")
    h.election.lose.set()  # type: ignore[union-attr]
    assert await h.exit_code() == 1
    assert "release" not in h.journal
    assert "controllers stop drain=False" in h.journal
    assert [r.kv for r in failure_records(caplog)] == [  # type: ignore[attr-defined]
        {"error": "leader election lost"}
    ]


async def test_without_election_the_work_starts_at_once_and_no_lease_is_released() -> None:
    h = Harness(election=False)
    h.start()
    await h.logged("controllers run")
    assert h.manager.leading
    h.stop.set()
    assert await h.exit_code() == 0
    assert h.journal == [
        *STARTED,
        "informers start",
        "controllers run",
        "controllers stop drain=True",
        "informers stop",
        "events close flush=True",
        *STOPPED,
    ]


async def test_a_leader_is_ready_only_once_its_caches_synced() -> None:
    h = Harness()
    h.work.sync_gate.clear()
    h.election.grant.set()  # type: ignore[union-attr]
    h.start()
    await h.logged("informers start")
    assert h.manager.leader_ready() == "informers have not synced"
    h.work.sync_gate.set()
    await h.logged("controllers run")
    assert h.manager.leader_ready() is None
    h.stop.set()
    assert await h.exit_code() == 0


async def test_a_failing_controller_logs_releases_the_lease_and_exits_1(
    caplog: pytest.LogCaptureFixture,
) -> None:
    h = Harness()
    h.work.fail = RuntimeError("timed out waiting for cache to be synced")
    h.election.grant.set()  # type: ignore[union-attr]
    h.start()
    assert await h.exit_code() == 1
    assert h.journal[h.journal.index("informers start") + 1 :] == [
        "controllers stop drain=False",
        "informers stop",
        "renewing stopped",
        "release",
        "events close flush=True",
        *STOPPED,
    ]
    assert [r.kv for r in failure_records(caplog)] == [  # type: ignore[attr-defined]
        {"error": "timed out waiting for cache to be synced"}
    ]


async def test_a_server_that_cannot_bind_stops_the_ones_started_and_exits_1(
    caplog: pytest.LogCaptureFixture,
) -> None:
    h = Harness(failing_server="metrics")
    h.start()
    assert await h.exit_code() == 1
    assert h.journal == ["start health", "start metrics", "stop health"]
    [record] = failure_records(caplog)
    assert record.kv == {"error": "[Errno 98] address already in use"}  # type: ignore[attr-defined]
