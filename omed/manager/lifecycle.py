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
from omed.manager.startup import MSG_FAILED_TO_START

__all__ = [
    "DRAIN_TIMEOUT",
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
        clock: Clock | None = None,
    ) -> None:
        self._servers = list(servers)
        self._work = work
        self._election = election
        self._drain_timeout = drain_timeout
        self._clock: Clock = clock or RealClock()
        self._leading = False

    @property
    def leading(self) -> bool:
        """Whether the leader's work may run now (always, once started, without election)."""
        return self._leading

    def leader_ready(self) -> str | None:
        """The ``/readyz`` check of the leader's work: a standby passes; a leader passes once
        its caches have synced."""
        if not self._leading or self._work.synced:
            return None
        return "informers have not synced"

    async def run(self, stop: asyncio.Event) -> int:
        """Run until ``stop`` is set or the manager fails; return the exit code."""
        stopping = asyncio.ensure_future(stop.wait())
        started: list[Server] = []
        try:
            try:
                for server in self._servers:
                    await server.start()
                    started.append(server)
            except Exception as err:
                _failed(err)
                return 1
            return await self._elect_and_lead(stopping)
        finally:
            await _cancel(stopping)
            await self._stop_servers(started)

    # -- the election and the leader's work ---------------------------------------------------
    async def _elect_and_lead(self, stopping: asyncio.Future[Any]) -> int:
        holding: asyncio.Future[None] | None = None
        if self._election is not None:
            acquiring = asyncio.ensure_future(self._election.acquire())
            await asyncio.wait({acquiring, stopping}, return_when=asyncio.FIRST_COMPLETED)
            if stopping.done():
                log.info(MSG_STOPPING_STANDBY)
                await _cancel(acquiring)
                if acquiring.done() and not acquiring.cancelled() and not acquiring.exception():
                    await self._election.release()  # acquired at the same moment: give it back
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
        self._leading = False
        await self._work.stop(drain=False)
        await _settle(working)
        error = _error_of(holding) or LeaderElectionLost()
        _failed(error)
        await self._work.close(flush=False)
        return 1

    async def _work_failed(
        self, working: asyncio.Future[None], holding: asyncio.Future[None] | None
    ) -> int:
        error = _error_of(working) or RuntimeError("the controllers stopped on their own")
        _failed(error)
        await self._work.stop(drain=False)
        await self._give_up_lease(holding)
        await self._work.close()
        return 1

    async def _graceful_stop(
        self, working: asyncio.Future[None], holding: asyncio.Future[None] | None
    ) -> int:
        log.info(MSG_STOPPING_LEADER, extra=kv(drainTimeout=f"{self._drain_timeout:g}s"))
        draining = asyncio.ensure_future(self._work.stop(drain=True))
        timer = asyncio.ensure_future(self._clock.sleep(self._drain_timeout))
        watched = {draining, timer} if holding is None else {draining, timer, holding}
        try:
            await asyncio.wait(watched, return_when=asyncio.FIRST_COMPLETED)
        finally:
            timer.cancel()
        if not draining.done():
            await _cancel(draining)
            if holding is not None and holding.done():
                return await self._lost(working, holding)
            log.info(MSG_DRAIN_TIMED_OUT, extra=kv(drainTimeout=f"{self._drain_timeout:g}s"))
            await self._work.stop(drain=False)
        elif (drain_error := _error_of(draining)) is not None:
            log.error("Draining the controllers failed", extra=kv(error=str(drain_error)))
            await self._work.stop(drain=False)
        await _settle(working)
        if holding is not None and holding.done():
            return await self._lost(working, holding)
        await self._give_up_lease(holding)
        await self._work.close()
        return 0

    async def _give_up_lease(self, holding: asyncio.Future[None] | None) -> None:
        """Stop renewing, then release the Lease so a standby takes it at its next try."""
        if holding is None or self._election is None:
            return
        await _cancel(holding)
        self._leading = False
        await self._election.release()

    async def _stop_servers(self, started: Sequence[Server]) -> None:
        if not started:
            return
        log.info(MSG_STOPPING_SERVERS)
        for server in reversed(started):
            try:
                await server.stop()
            except Exception as err:
                log.error(
                    "Failed to stop server", extra=kv(server=type(server).__name__, error=str(err))
                )
        log.info(MSG_STOP_COMPLETE)


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
