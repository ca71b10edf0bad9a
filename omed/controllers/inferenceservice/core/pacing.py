"""Whether an InferenceService status write goes now or waits: the decision, pure.

A change that is news (:func:`.status.status_urgent`) is written at once. One that only moves
counts waits until ``pace`` seconds (``pace_busy`` while the controller is busy) have passed
since this manager last wrote that InferenceService's status; the reconcile asks to be looked
at again for the rest. While busy, a first status that only says "not ready yet" waits the
same way, paced from the moment the manager first saw the InferenceService.

The memory is per process and per key (:class:`PaceMemory`): a new leader remembers nothing
and writes at once. The shell keeps it between passes and hands it back unchanged; only a
decision changes it.
"""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True, slots=True)
class PaceMemory:
    """What the pacing remembers of one InferenceService."""

    last_write: float | None = None
    """Monotonic seconds of its last status write by this manager, or of its first sight
    while its first status waits; ``None``: nothing to wait for."""

    def written(self, at: float) -> PaceMemory:
        """A status write went through at ``at``."""
        return PaceMemory(last_write=at)

    def pace_from(self, at: float) -> PaceMemory:
        """Pace a first write from ``at``, as if a status had been written then (unless one
        was, or an earlier sight already started the pace)."""
        return self if self.last_write is not None else PaceMemory(last_write=at)


@dataclasses.dataclass(frozen=True, slots=True)
class Pace:
    """The two paces, in seconds: the quiet one and the one while the controller is busy."""

    quiet: float
    busy: float


def pace_wait(memory: PaceMemory, *, now: float, busy: bool, pace: Pace) -> float:
    """Seconds an informational write must still wait at ``now`` (0: none)."""
    if memory.last_write is None:
        return 0.0
    return max(0.0, memory.last_write + (pace.busy if busy else pace.quiet) - now)


@dataclasses.dataclass(frozen=True, slots=True)
class PaceDecision:
    """Write now (``wait`` 0) or wait ``wait`` seconds; the memory after the decision."""

    wait: float
    memory: PaceMemory


def decide_pace(
    memory: PaceMemory,
    *,
    urgent: bool,
    first_not_ready: bool,
    now: float,
    busy: bool,
    pace: Pace,
) -> PaceDecision:
    """Whether a changed status is written at ``now``.

    ``first_not_ready``: there is no stored status yet and this one says only "not ready yet"
    (no failure, not Ready). Under load it waits like a count change; Ready or a failure,
    when it comes first, is written at once."""
    if first_not_ready and busy:
        urgent = False
        memory = memory.pace_from(now)
    if urgent:
        return PaceDecision(0.0, memory)
    return PaceDecision(pace_wait(memory, now=now, busy=busy, pace=pace), memory)
