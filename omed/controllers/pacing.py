"""How long a status write that only informs may wait, in both controllers.

A status write either carries news (a condition that flips, a new operation, Ready rows, a new
observedGeneration) and goes out at once, or only moves what observation shows (counts, pods
appearing, the step of the same operation, a first "not ready yet"): such a write may wait so
that the next write with news carries it. It waits at most :data:`STATUS_PACE` after the
object's last status write, or :data:`STATUS_PACE_BUSY` while the controller is busy.

"Busy" is :meth:`omed.workqueue.Controller.busy` over :data:`BUSY_WINDOW`: within the last
few seconds the controller had more work than workers, more distinct objects than it has
workers, or objects queued with no idle worker (a fleet converging, a resync). Then the API
server's capacity is better spent on the writes that move objects forward (pod creates,
readiness gates, Ready rows), and the informational writes catch up after. A lone object on
a quiet cluster is never busy, nor is one InferenceService's handful of InferenceReplicas,
so their status follows within 5 s.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from omed.clock import Clock

STATUS_PACE: Final = 5.0
"""Seconds an informational status write may wait after the object's last status write."""
STATUS_PACE_BUSY: Final = 30.0
"""The same while the controller is busy."""
BUSY_WINDOW: Final = 5.0
"""Seconds that other objects' work counts as busy after it was seen: a queue that is empty
for a moment in the middle of a fleet's convergence doesn't end the busy pace."""


def pace_wait(last: float | None, now: float, *, busy: bool) -> float:
    """Seconds an informational status write must still wait at ``now`` (0: none), the
    object's last status write by this manager having been at ``last`` (None: never), both
    on the same monotonic clock. The rule itself, without memory, for the pure cores."""
    if last is None:
        return 0.0
    return max(0.0, last + (STATUS_PACE_BUSY if busy else STATUS_PACE) - now)


class StatusPacer:
    """This manager's last status write per object, and how long an informational write of
    it must still wait: :data:`STATUS_PACE` after the last one, :data:`STATUS_PACE_BUSY`
    while ``busy()`` says the controller has more work than workers. Per process: a new leader
    remembers nothing and writes at once."""

    def __init__(self, *, clock: Clock, busy: Callable[[], bool]) -> None:
        self._clock = clock
        self.busy = busy
        self._last: dict[str, float] = {}

    def written(self, key: str, *, at: float | None = None) -> None:
        """The status of ``key`` was written (at ``at``, monotonic; now by default)."""
        self._last[key] = self._clock.monotonic() if at is None else at

    def pace_from_now(self, key: str) -> None:
        """Pace a first write of ``key`` from now, as if a status had just been written
        (unless one was)."""
        self._last.setdefault(key, self._clock.monotonic())

    def forget(self, key: str) -> None:
        self._last.pop(key, None)

    def wait(self, key: str, *, busy: bool | None = None) -> float:
        """Seconds an informational write of ``key`` must still wait (0: none); ``busy`` when
        the caller already asked."""
        last = self._last.get(key)
        if last is None:
            return 0.0
        if busy is None:
            busy = self.busy()
        return pace_wait(last, self._clock.monotonic(), busy=busy)
