"""The ordered stop under one deadline (--graceful-shutdown-timeout), with steps that hang.

Each fake can be told to hang in one step, as a step that waits on an API server that
doesn't answer does; time is a FakeClock, which the tests move in small steps, so every
share of the deadline is exact and nothing sleeps on the wall clock.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

from omed.clock import FakeClock
from omed.manager import process
from omed.manager.lifecycle import DRAIN_TIMEOUT, Manager
from omed.manager.shutdown import (
    GRACEFUL_SHUTDOWN_TIMEOUT,
    MSG_CUT_SHORT,
    STEP_DRAIN,
    STEP_EVENTS,
    STEP_HALT,
    STEP_RELEASE,
    STEP_SERVERS,
    StopBudget,
)

HANG = asyncio.Event()  # never set


class Journal(list[str]):
    pass


class Server:
    def __init__(self, name: str, journal: Journal, *, hang: bool = False) -> None:
        self.name, self.journal, self.hang = name, journal, hang

    async def start(self) -> None:
        self.journal.append(f"start {self.name}")

    async def stop(self) -> None:
        self.journal.append(f"stop {self.name}")
        if self.hang:
            await HANG.wait()
        self.journal.append(f"stopped {self.name}")


class Election:
    def __init__(self, journal: Journal, *, hang_release: bool = False) -> None:
        self.journal, self.hang_release = journal, hang_release

    async def acquire(self) -> None:
        self.journal.append("acquired")

    async def hold(self) -> None:
        await HANG.wait()

    async def release(self) -> bool:
        self.journal.append("release")
        if self.hang_release:
            await HANG.wait()
        self.journal.append("released")
        return True


class Standby(Election):
    """A candidate that never gets the Lease."""

    async def acquire(self) -> None:
        self.journal.append("run")  # nothing else runs on a standby
        await HANG.wait()


class Work:
    """``hang`` names the step that never ends: "drain", "halt" (the stop without draining
    too) or "events"."""

    def __init__(self, journal: Journal, *, hang: str = "") -> None:
        self.journal, self.hang = journal, hang
        self.synced = True
        self._stopped = asyncio.Event()

    async def run(self) -> None:
        self.journal.append("run")
        await self._stopped.wait()

    async def stop(self, *, drain: bool) -> None:
        self.journal.append(f"stop drain={drain}")
        if self.hang == "halt" or (drain and self.hang == "drain"):
            await HANG.wait()
        self._stopped.set()

    async def close(self, *, flush: bool = True) -> None:
        self.journal.append("events")
        if self.hang == "events":
            await HANG.wait()
        self.journal.append("events written")


class Harness:
    def __init__(
        self,
        *,
        timeout: float = GRACEFUL_SHUTDOWN_TIMEOUT,
        hang: str = "",
        election: bool = True,
        hang_release: bool = False,
        hang_server: bool = False,
        standby: bool = False,
    ) -> None:
        self.journal = Journal()
        self.clock = FakeClock()
        self.work = Work(self.journal, hang=hang)
        self.election: Election | None = None
        if standby:
            self.election = Standby(self.journal)
        elif election:
            self.election = Election(self.journal, hang_release=hang_release)
        self.manager = Manager(
            servers=[
                Server("probes", self.journal),
                Server("webhook", self.journal, hang=hang_server),
            ],
            work=self.work,
            election=self.election,
            graceful_shutdown_timeout=timeout,
            clock=self.clock,
        )
        self.stop = asyncio.Event()
        self.task = asyncio.create_task(self.manager.run(self.stop))

    async def settle(self) -> None:
        for _ in range(50):
            await asyncio.sleep(0)

    async def stop_and_wait(self, *, limit: float) -> tuple[int, float]:
        """Set ``stop``; move the clock until the manager exits: (its code, seconds taken).
        Fails if it runs past ``limit``."""
        await self.settle()
        assert "run" in self.journal
        self.stop.set()
        began = self.clock.monotonic()
        while not self.task.done():
            assert self.clock.monotonic() - began <= limit, self.journal
            await self.settle()
            self.clock.advance(1 / 16)
        return self.task.result(), self.clock.monotonic() - began


def cuts(caplog: pytest.LogCaptureFixture) -> list[dict[str, Any]]:
    return [r.kv for r in caplog.records if r.getMessage() == MSG_CUT_SHORT]  # type: ignore[attr-defined]


def test_the_default_shares() -> None:
    """25 s: the drain until 15.5 s (its own 15 s first), the release until 20.5 s, the
    events until 22.5 s, the servers the rest."""
    budget = StopBudget(timeout=25.0, clock=FakeClock())
    assert budget.left(STEP_DRAIN) == 15.5
    assert budget.left(STEP_RELEASE) == 20.5
    assert budget.left(STEP_EVENTS) == 23.0
    assert budget.left(STEP_SERVERS) == 25.0
    assert min(DRAIN_TIMEOUT, budget.left(STEP_DRAIN)) == DRAIN_TIMEOUT


async def test_a_stop_that_fits_is_not_cut(caplog: pytest.LogCaptureFixture) -> None:
    h = Harness()
    code, _ = await h.stop_and_wait(limit=1)
    assert code == 0
    assert "released" in h.journal and "events written" in h.journal
    assert h.manager.cut_short == ()
    assert cuts(caplog) == []


async def test_a_release_the_api_server_never_answers_is_cut_and_the_stop_ends_in_time(
    caplog: pytest.LogCaptureFixture,
) -> None:
    h = Harness(hang_release=True)
    code, took = await h.stop_and_wait(limit=GRACEFUL_SHUTDOWN_TIMEOUT)
    assert code == 1
    assert 20.5 <= took <= 20.5 + 1 / 8  # the release's share; the later steps are quick
    assert "released" not in h.journal
    assert h.journal.index("events written") > h.journal.index("release")
    assert "stopped probes" in h.journal  # the servers were stopped too
    [cut] = cuts(caplog)
    assert cut == {"step": STEP_RELEASE, "waited": "20.500s", "gracefulShutdownTimeout": "25s"}
    assert h.manager.cut_short == (STEP_RELEASE,)


async def test_a_drain_longer_than_its_share_is_cut_and_the_release_keeps_its_own() -> None:
    """10 s: the later steps keep 2 + 1 + 1 s, so the drain gets 6 s, not its 15; then the
    reconciles are cancelled and the Lease is still released, in time."""
    h = Harness(timeout=10.0, hang="drain")
    code, took = await h.stop_and_wait(limit=10)
    assert code == 1
    assert h.manager.cut_short == (STEP_DRAIN,)
    assert h.journal.index("stop drain=False") < h.journal.index("released")
    assert "events written" in h.journal
    assert 6.0 <= took <= 6.0 + 1 / 8


async def test_work_that_does_not_stop_keeps_the_lease(caplog: pytest.LogCaptureFixture) -> None:
    """The Lease may go only once the work has stopped: if cancelling it doesn't finish
    within the release's share, the Lease is left to expire rather than handed over while a
    reconcile may still write."""
    h = Harness(timeout=10.0, hang="halt")
    code, took = await h.stop_and_wait(limit=10)
    assert code == 1
    assert "release" not in h.journal
    assert h.manager.cut_short == (STEP_DRAIN, STEP_HALT)
    drain, halt = cuts(caplog)
    assert drain == {
        "step": STEP_DRAIN,
        "waited": "6.000s",
        "gracefulShutdownTimeout": "10s",
        "reason": "reconciles still running",
    }
    assert halt["step"] == STEP_HALT and halt["waited"] == "2.000s"  # the release's share
    assert halt["reason"] == "the Lease is not released while they may still write"
    assert took <= 10.0


async def test_queued_events_that_cannot_be_written_are_cut() -> None:
    h = Harness(hang="events")
    code, took = await h.stop_and_wait(limit=GRACEFUL_SHUTDOWN_TIMEOUT)
    assert code == 1
    assert "released" in h.journal
    assert h.manager.cut_short == (STEP_EVENTS,)
    assert 23.0 <= took <= 23.0 + 1 / 8


async def test_a_server_that_does_not_stop_is_cut_at_the_deadline() -> None:
    h = Harness(hang_server=True)
    code, took = await h.stop_and_wait(limit=GRACEFUL_SHUTDOWN_TIMEOUT + 1)
    assert code == 1
    assert h.manager.cut_short == (STEP_SERVERS,)
    assert "stopped probes" not in h.journal  # after the webhook's, in reverse order
    assert took <= GRACEFUL_SHUTDOWN_TIMEOUT + 1 / 8


async def test_a_standby_stops_its_servers_within_the_deadline() -> None:
    h = Harness(hang_server=True, standby=True)
    code, took = await h.stop_and_wait(limit=GRACEFUL_SHUTDOWN_TIMEOUT + 1)
    assert code == 1
    assert took <= GRACEFUL_SHUTDOWN_TIMEOUT + 1 / 8


async def test_a_zero_timeout_cuts_what_does_not_end_at_once() -> None:
    h = Harness(timeout=0.0, hang_release=True)
    code, took = await h.stop_and_wait(limit=1)
    assert code == 1
    assert "released" not in h.journal
    assert h.manager.cut_short == (STEP_RELEASE,)
    assert took <= 1 / 8


# -- the backstop ------------------------------------------------------------------------------


class FakeTimer:
    made: list[FakeTimer] = []

    def __init__(self, interval: float, function: Any, args: Any = (), kwargs: Any = None) -> None:
        self.interval, self.function, self.args, self.kwargs = interval, function, args, kwargs
        self.daemon = False
        self.started = self.cancelled = False
        FakeTimer.made.append(self)

    def start(self) -> None:
        self.started = True

    def cancel(self) -> None:
        self.cancelled = True


async def test_the_first_signal_arms_a_backstop_that_exits_just_after_the_deadline(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A timer thread: it fires even when the loop doesn't run, for whatever no share
    bounded. It is disarmed when run() returns."""
    import signal

    exits: list[tuple[str, dict[str, Any]]] = []
    FakeTimer.made.clear()
    monkeypatch.setattr(process.threading, "Timer", FakeTimer)
    stop = asyncio.Event()
    signals = process._Signals(asyncio.get_running_loop(), stop, backstop_after=lambda: 25.0)
    try:
        signals._on_signal(signal.SIGTERM)
        assert stop.is_set()
        [timer] = FakeTimer.made
        assert timer.started and timer.daemon
        assert timer.interval == 25.0 + process.BACKSTOP_GRACE
        monkeypatch.setattr(
            process.os, "_exit", lambda code: exits.append(("exit", {"code": code}))
        )
        caplog.set_level(logging.ERROR, logger="setup")
        timer.function(*timer.args, **timer.kwargs)  # as the thread would, at 26 s
        assert exits == [("exit", {"code": 1})]
        assert [r.getMessage() for r in caplog.records] == [process.MSG_SHUTDOWN_OVERRAN]
    finally:
        signals.remove()
    assert timer.cancelled
