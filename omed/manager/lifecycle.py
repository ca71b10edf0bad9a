"""Ordered start and stop of the manager's runnables, gated by the leader election Lease.

Why: the manager is three groups of runnables, as in controller-runtime's runnable groups,
and the order between them is what makes a handover safe and quick:

* **servers** (health probes, metrics, webhooks) run on every replica, from before the
  election until the very end, so probes, scrapes and admissions never see a gap;
* the **election** (optional): acquire the Lease, then keep renewing it;
* the **leader's work** (:class:`omed.manager.leader.LeaderWork`: informers, controllers,
  event recorder) runs only while this replica holds the Lease.

Start: servers in order, then the election (a standby waits here), then the leader's work.

Stop, on SIGTERM/SIGINT (``stop`` is set), for a leader: the controllers stop taking keys
and the reconciles in flight finish (up to ``drain_timeout``, then they are cancelled:
every multi-step operation is recorded before its first side effect, so the next leader
resumes it); the informers stop; only *then* is the Lease released, so a standby takes
over at its next retry, about one retry period later, and never overlaps with a reconcile
of ours; the queued events are flushed; the servers stop in reverse order. Exit 0.
A standby just stops: servers in reverse order, exit 0.

Every stop (after a signal or a failure) runs under one deadline, ``graceful_shutdown_timeout``
(:mod:`omed.manager.shutdown`): each step gets what is left of it less what the later steps
keep, a step still running at the end of its share is cut short (logged, exit 1), and the
release keeps its share however long the drain ran. The Lease is still released only once
the work has stopped: work that doesn't stop within the release's share keeps the Lease
until it expires.

Losing the Lease (the renew deadline passed, or another holder was seen) is different: a
standby may act from one lease duration after our last renewal, so the work is cancelled
at once, without draining, ``Failed to start manager`` is logged with the error
``leader election lost``, and the manager exits 1 for Kubernetes to restart it. A leader
never leads twice in one process. Any other failure of a started manager (a server that
can't bind, caches that don't sync, a controller that crashes) also logs
``Failed to start manager`` with its error and exits 1, after releasing a Lease it holds.

Invariant: the leader's work never runs without the Lease (when election is on), and the
Lease is released only after the work has stopped.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import Any, Final, Protocol, TypeVar

from omed.clock import Clock, RealClock
from omed.leaderelection import LeaderElectionLost
from omed.log import kv
from omed.manager.shutdown import (
    GRACEFUL_SHUTDOWN_TIMEOUT,
    STEP_DRAIN,
    STEP_EVENTS,
    STEP_HALT,
    STEP_RELEASE,
    STEP_SERVERS,
    StopBudget,
)
from omed.manager.startup import MSG_FAILED_TO_START

__all__ = [
    "DRAIN_TIMEOUT",
    "GRACEFUL_SHUTDOWN_TIMEOUT",
    "MSG_DRAIN_TIMED_OUT",
    "MSG_STOPPING_LEADER",
    "MSG_STOPPING_SERVERS",
    "MSG_STOPPING_STANDBY",
    "MSG_STOP_COMPLETE",
    "Election",
    "Manager",
    "Server",
    "Work",
]

log = logging.getLogger("omed.manager")

DRAIN_TIMEOUT: Final = 15.0
"""How long reconciles in flight may take to finish at stop, within Kubernetes' default
30-second termination grace period, leaving time to release the Lease."""

MSG_STOPPING_LEADER: Final = "Stopping and waiting for leader election runnables"
MSG_DRAIN_TIMED_OUT: Final = "Reconciles still running at the drain timeout; cancelling them"
MSG_STOPPING_STANDBY: Final = "Stopping standby"
MSG_STOPPING_SERVERS: Final = "Stopping and waiting for HTTP servers"
MSG_STOP_COMPLETE: Final = "Wait completed, proceeding to shutdown the manager"

T = TypeVar("T")


class Server(Protocol):
    """A runnable every replica runs: started first, stopped last."""

    async def start(self) -> None: ...

    async def stop(self) -> None: ...


class Election(Protocol):
    """The part of :class:`omed.leaderelection.LeaderElector` the manager drives."""

    async def acquire(self) -> None:
        """Return once this replica holds the Lease."""
        ...

    async def hold(self) -> None:
        """Renew until cancelled; raise :class:`LeaderElectionLost` when leadership ends."""
        ...

    async def release(self) -> bool: ...


class Work(Protocol):
    """The leader's runnables (:class:`omed.manager.leader.LeaderWork`)."""

    @property
    def synced(self) -> bool: ...

    async def run(self) -> None: ...

    async def stop(self, *, drain: bool) -> None: ...

    async def close(self, *, flush: bool = True) -> None: ...


class Manager:
    """Runs the three groups in order; see the module docstring."""

    def __init__(
        self,
        *,
        servers: Sequence[Server],
        work: Work,
        election: Election | None,
        drain_timeout: float = DRAIN_TIMEOUT,
        graceful_shutdown_timeout: float = GRACEFUL_SHUTDOWN_TIMEOUT,
        clock: Clock | None = None,
    ) -> None:
        self._servers = list(servers)
        self._work = work
        self._election = election
        self._drain_timeout = drain_timeout
        self._shutdown_timeout = graceful_shutdown_timeout
        self._clock: Clock = clock or RealClock()
        self._leading = False
        self._budget: StopBudget | None = None

    @property
    def leading(self) -> bool:
        """Whether the leader's work may run now (always, once started, without election)."""
        return self._leading

    @property
    def cut_short(self) -> Sequence[str]:
        """The steps of the stop that the graceful shutdown timeout cut short, in order."""
        return () if self._budget is None else tuple(self._budget.cut)

    def leader_ready(self) -> str | None:
        """The ``/readyz`` check of the leader's work: a standby passes; a leader passes once
        its caches have synced."""
        if not self._leading or self._work.synced:
            return None
        return "informers have not synced"

    async def run(self, stop: asyncio.Event) -> int:
        """Run until ``stop`` is set or the manager fails; return the exit code (1 when the
        graceful shutdown timeout cut a step of the stop short)."""
        stopping = asyncio.ensure_future(stop.wait())
        started: list[Server] = []
        code = 1
        try:
            try:
                for server in self._servers:
                    await server.start()
                    started.append(server)
            except Exception as err:
                _failed(err)
                return 1
            code = await self._elect_and_lead(stopping)
        finally:
            await _cancel(stopping)
            await self._stop_servers(started)
        return 1 if self.cut_short else code

    def _stopping(self) -> StopBudget:
        """The stop's deadline, started by the first call (the signal, or the failure)."""
        if self._budget is None:
            self._budget = StopBudget(timeout=self._shutdown_timeout, clock=self._clock)
        return self._budget

    # -- the election and the leader's work ---------------------------------------------------
    async def _elect_and_lead(self, stopping: asyncio.Future[Any]) -> int:
        holding: asyncio.Future[None] | None = None
        if self._election is not None:
            acquiring = asyncio.ensure_future(self._election.acquire())
            await asyncio.wait({acquiring, stopping}, return_when=asyncio.FIRST_COMPLETED)
            if stopping.done():
                budget = self._stopping()
                log.info(MSG_STOPPING_STANDBY)
                await _cancel(acquiring)
                if acquiring.done() and not acquiring.cancelled() and not acquiring.exception():
                    # acquired at the same moment: give it back
                    await budget.run(STEP_RELEASE, self._election.release())
                return 0
            acquiring.result()
            holding = asyncio.ensure_future(self._election.hold())
        self._leading = True
        working = asyncio.ensure_future(self._work.run())
        try:
            watched = {working, stopping} if holding is None else {working, stopping, holding}
            await asyncio.wait(watched, return_when=asyncio.FIRST_COMPLETED)
            if holding is not None and holding.done():
                return await self._lost(working, holding)
            if working.done():
                return await self._work_failed(working, holding)
            return await self._graceful_stop(working, holding)
        finally:
            self._leading = False
            await _cancel(working)
            if holding is not None:
                await _cancel(holding)

    async def _lost(self, working: asyncio.Future[None], holding: asyncio.Future[None]) -> int:
        """Leadership ended: stop acting now, report it, exit 1."""
        budget = self._stopping()
        self._leading = False
        await budget.run(STEP_RELEASE, self._halt(working, cancel=True), name=STEP_HALT)
        error = _error_of(holding) or LeaderElectionLost()
        _failed(error)
        await budget.run(STEP_EVENTS, self._work.close(flush=False))
        return 1

    async def _work_failed(
        self, working: asyncio.Future[None], holding: asyncio.Future[None] | None
    ) -> int:
        budget = self._stopping()
        error = _error_of(working) or RuntimeError("the controllers stopped on their own")
        _failed(error)
        if await self._halted(budget, working, cancel=True):
            await self._give_up_lease(holding)
        await budget.run(STEP_EVENTS, self._work.close())
        return 1

    async def _graceful_stop(
        self, working: asyncio.Future[None], holding: asyncio.Future[None] | None
    ) -> int:
        budget = self._stopping()
        drain_window = min(self._drain_timeout, budget.left(STEP_DRAIN))
        log.info(MSG_STOPPING_LEADER, extra=kv(drainTimeout=f"{self._drain_timeout:g}s"))
        draining = asyncio.ensure_future(self._work.stop(drain=True))
        timer = asyncio.ensure_future(self._clock.sleep(drain_window))
        watched = {draining, timer} if holding is None else {draining, timer, holding}
        try:
            await asyncio.wait(watched, return_when=asyncio.FIRST_COMPLETED)
        finally:
            timer.cancel()
        cancel = False
        if not draining.done():
            await _cancel(draining)
            if holding is not None and holding.done():
                return await self._lost(working, holding)
            if drain_window < self._drain_timeout:
                budget.cut_short(STEP_DRAIN, waited=drain_window, why="reconciles still running")
            else:
                log.info(MSG_DRAIN_TIMED_OUT, extra=kv(drainTimeout=f"{self._drain_timeout:g}s"))
            cancel = True
        elif (drain_error := _error_of(draining)) is not None:
            log.error("Draining the controllers failed", extra=kv(error=str(drain_error)))
            cancel = True
        halted = await self._halted(budget, working, cancel=cancel)
        if holding is not None and holding.done():
            return await self._lost(working, holding)
        if halted:
            await self._give_up_lease(holding)
        await budget.run(STEP_EVENTS, self._work.close())
        return 0

    async def _halt(self, working: asyncio.Future[None], *, cancel: bool) -> None:
        """Make sure the leader's work has ended: cancelled without draining when ``cancel``."""
        if cancel:
            await self._work.stop(drain=False)
        await _settle(working)

    async def _halted(
        self, budget: StopBudget, working: asyncio.Future[None], *, cancel: bool
    ) -> bool:
        """:meth:`_halt` within the release's share: the Lease may go only once the work has
        stopped, so a work that doesn't stop in time keeps the Lease (until it expires)."""
        return await budget.run(
            STEP_RELEASE,
            self._halt(working, cancel=cancel),
            name=STEP_HALT,
            why="the Lease is not released while they may still write",
        )

    async def _give_up_lease(self, holding: asyncio.Future[None] | None) -> None:
        """Stop renewing, then release the Lease so a standby takes it at its next try."""
        if holding is None or self._election is None:
            return
        await _cancel(holding)
        self._leading = False
        await self._stopping().run(STEP_RELEASE, self._election.release())

    async def _stop_servers(self, started: Sequence[Server]) -> None:
        if not started:
            return
        log.info(MSG_STOPPING_SERVERS)
        await self._stopping().run(STEP_SERVERS, self._stop_each(started))
        log.info(MSG_STOP_COMPLETE)

    async def _stop_each(self, started: Sequence[Server]) -> None:
        for server in reversed(started):
            try:
                await server.stop()
            except Exception as err:
                log.error(
                    "Failed to stop server", extra=kv(server=type(server).__name__, error=str(err))
                )


def _failed(error: BaseException) -> None:
    log.error(MSG_FAILED_TO_START, extra=kv(error=str(error) or type(error).__name__))


def _error_of(task: asyncio.Future[Any]) -> BaseException | None:
    if task.cancelled():
        return None
    return task.exception()


async def _cancel(task: asyncio.Future[Any]) -> None:
    """Cancel ``task`` and wait until it has ended; its outcome is consumed, not raised.

    Only the task's own cancellation is absorbed: if the caller is cancelled while it
    waits, that propagates.
    """
    if not task.done():
        task.cancel()
        await asyncio.wait({task})
    if not task.cancelled():
        task.exception()  # retrieved, so asyncio doesn't report it as never retrieved


async def _settle(task: asyncio.Future[Any]) -> None:
    """Wait for a task that has been told to stop; its error (if any) is logged, not raised."""
    if not task.done():
        await asyncio.wait({task})
    if (error := _error_of(task)) is not None:
        log.debug("Leader work ended with an error while stopping", extra=kv(error=str(error)))
