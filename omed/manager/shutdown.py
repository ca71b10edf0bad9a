"""One deadline for the whole ordered stop, shared out between its steps.

Why: the kubelet sends SIGTERM, waits the pod's ``terminationGracePeriodSeconds`` (30 s by
default), then SIGKILLs. The ordered stop (drain, informers, Lease release, event flush,
servers) has steps that each wait on the API server; when it doesn't answer (a partition, an
overloaded or hung API server) each of them waits out its own timeout, and together they
outlast the grace period: the process is killed mid-step, without a word about what was left
undone. So the stop runs under one deadline, ``--graceful-shutdown-timeout`` from the signal
(the chart sets it a few seconds below the grace period), and every step gets only what is
left of it, minus what the steps after it keep for themselves (:data:`KEEP`): the Lease
release, which saves a standby a whole lease duration, keeps its share however long the
drain ran. A step still running when its share ends is cancelled, logged
(:data:`MSG_CUT_SHORT`, with the step) and the stop moves on; the exit code is then 1.

How: asyncio with the injected :class:`~omed.clock.Clock` (:func:`omed.clock.within`), not
anyio's cancel scopes: the steps are already asyncio tasks, and the deadline must move with a
:class:`~omed.clock.FakeClock` so the unit tests run the whole stop without sleeping (anyio's
deadlines read the loop's clock). The release is protected the way a shielded scope would
protect it: nothing cancels it but the end of its own share.

Invariant: once started, every step ends by the deadline (given an event loop that runs), and
the ones after it still get their reserved shares.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Awaitable
from typing import Final

from omed.clock import Clock, within
from omed.log import kv

__all__ = [
    "GRACEFUL_SHUTDOWN_TIMEOUT",
    "KEEP",
    "MSG_CUT_SHORT",
    "STEP_DRAIN",
    "STEP_EVENTS",
    "STEP_HALT",
    "STEP_RELEASE",
    "STEP_SERVERS",
    "StopBudget",
]

log = logging.getLogger("omed.manager")

GRACEFUL_SHUTDOWN_TIMEOUT: Final = 25.0
"""Kubernetes' default terminationGracePeriodSeconds (30 s) less 5 s for the process to exit."""

MSG_CUT_SHORT: Final = "Graceful shutdown timeout reached; cutting the step short"

STEP_DRAIN: Final = "drain the controllers"
STEP_HALT: Final = "stop the controllers"
"""Cancelling what the drain left: it runs in the release's share (the Lease may go only
after it), under its own name."""
STEP_RELEASE: Final = "release the Lease"
STEP_EVENTS: Final = "write the queued events"
STEP_SERVERS: Final = "stop the servers"

KEEP: Final[dict[str, tuple[float, float]]] = {
    STEP_RELEASE: (0.2, 5.0),
    STEP_EVENTS: (0.1, 5.0),
    STEP_SERVERS: (0.1, 2.0),
}
"""What each later step keeps for itself, as (share of the timeout, at most seconds): a step
may use the time left less what the steps after it keep. With the 25 s default the drain may
run until 15.5 s (its own 15 s cap comes first), the release until 20.5 s, the events until
22.5 s, and the servers get the rest."""

_ORDER: Final = (STEP_DRAIN, STEP_RELEASE, STEP_EVENTS, STEP_SERVERS)


class StopBudget:
    """The deadline of one ordered stop, from the moment it was started."""

    def __init__(self, *, timeout: float, clock: Clock) -> None:
        self.timeout = timeout
        self._clock = clock
        self._end = clock.monotonic() + timeout
        self.cut: list[str] = []
        """The steps cut short, in order."""

    def keep_after(self, step: str) -> float:
        """Seconds the steps after ``step`` keep for themselves."""
        later = _ORDER[_ORDER.index(step) + 1 :]
        return sum(min(share * self.timeout, cap) for share, cap in (KEEP[s] for s in later))

    def left(self, step: str) -> float:
        """Seconds ``step`` may still run: what is left less what the later steps keep."""
        return max(0.0, self._end - self._clock.monotonic() - self.keep_after(step))

    async def run(
        self,
        step: str,
        awaitable: Awaitable[object],
        *,
        cap: float = math.inf,
        name: str | None = None,
        why: str | None = None,
    ) -> bool:
        """Await ``awaitable`` for at most ``min(cap, left(step))``; whether it finished.

        When its share runs out first it is cancelled, and the cut logged and recorded as
        ``name`` (default: ``step``), with ``why``. Reaching ``cap`` first raises
        TimeoutError: that is the step's own limit, for the caller to handle, not a cut. Its
        own errors propagate.
        """
        window = min(cap, self.left(step))
        started = self._clock.monotonic()
        try:
            await within(self._clock, awaitable, window)
        except TimeoutError:
            if self._clock.monotonic() - started < window:
                raise  # the step's own TimeoutError, not its share running out
            if window < cap:
                self.cut_short(name or step, waited=window, why=why)
                return False
            raise
        return True

    def cut_short(self, step: str, *, waited: float, why: str | None = None) -> None:
        """Record and log that ``step`` was cut short (also for a step skipped outright)."""
        self.cut.append(step)
        fields: dict[str, object] = {
            "step": step,
            "waited": f"{waited:.3f}s",
            "gracefulShutdownTimeout": f"{self.timeout:g}s",
        }
        if why is not None:
            fields["reason"] = why
        log.error(MSG_CUT_SHORT, extra=kv(**fields))
