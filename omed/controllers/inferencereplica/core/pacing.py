"""Which status writes may wait, and how long: the pace of informational writes.

Why: during a fleet's convergence most status writes only move what observation shows
(counts, pods appearing, the step of the same operation), and each costs an API round trip
and an InferenceService status write. Such a write (``WriteStatus.paceable``) is held back
while this manager wrote the replica's status less than ``STATUS_PACE`` ago
(``STATUS_PACE_BUSY`` while the controller is busy, :mod:`omed.controllers.pacing`); the
pass requeues for the rest, and a later write, with news or not, carries it.

Invariants: a write that records an operation ahead of its side effect is never held; a
write held back takes its events with it (only InstanceCreated can be among them, and it is
read off the stored rows again), so none is lost and none is sent twice; no row turning
Ready or Failed, no condition that flips, no new revision or count of ready Instances is
ever late. The clock's reading, the last write and "busy" are inputs.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Final

from omed.api.inferencereplica import InferenceReplicaStatus, InstanceStatus, Operation
from omed.controllers.inferencereplica.core import names
from omed.controllers.inferencereplica.core.actions import Plan, RecordEvent, WriteStatus
from omed.controllers.inferencereplica.core.model import ObservedState
from omed.controllers.pacing import pace_wait

_READINESS_FIELDS: Final = (
    "observed_generation",
    "ready_replicas",
    "available_replicas",
    "serving_replicas",
    "current_revision",
    "update_revision",
    "retry_blocks",
)


def paceable(
    observed: ObservedState,
    status: InferenceReplicaStatus,
    rows: Sequence[InstanceStatus],
    *,
    recorded_ahead: bool,
    events: Sequence[RecordEvent],
) -> bool:
    """Whether a status write of ``status`` and ``rows`` may wait: it records nothing ahead
    of a pod write (gates need no record ahead of them), carries no event but
    InstanceCreated, and only moves observation (:func:`only_observation_moved`). A replica
    without omed's finalizer gets it first and is never paced (the caller's check)."""
    return (
        not recorded_ahead
        and all(event.reason == names.EVENT_INSTANCE_CREATED for event in events)
        and only_observation_moved(observed.status, status, observed.rows, rows)
    )


def only_observation_moved(
    before: InferenceReplicaStatus,
    after: InferenceReplicaStatus,
    rows_before: Mapping[int, InstanceStatus],
    rows_after: Sequence[InstanceStatus],
) -> bool:
    """Whether a status change only moves what observation shows: the same Instances with the
    same operations (their steps may move), the same readiness counts and revisions, the same
    conditions (type, status, reason; messages may move). Such a write may wait a moment."""
    if any(getattr(before, f) != getattr(after, f) for f in _READINESS_FIELDS):
        return False

    def flags(status: InferenceReplicaStatus) -> set[tuple[str, str, str | None]]:
        return {(c.type, c.status, c.reason) for c in status.conditions or ()}

    if flags(before) != flags(after):
        return False
    if set(rows_before) != {row.index for row in rows_after}:
        return False
    for row in rows_after:
        old_op, new_op = rows_before[row.index].operation, row.operation
        if _op_identity(old_op) != _op_identity(new_op):
            return False
        if rows_before[row.index].phase != row.phase and row.phase in ("Ready", "Failed"):
            return False
    return True


def _op_identity(op: Operation | None) -> tuple[str | None, str | None, str | None] | None:
    """An operation's id, type and waiting token: what a paced write must not move."""
    return None if op is None else (op.id, op.type, op.waiting)


def pace(decided: Plan, *, last_write: float | None, now: float, busy: bool) -> Plan:
    """``decided`` without its status write (nor that write's events) when every write in it
    is paceable and the pace since ``last_write`` hasn't run out at ``now``; a requeue for
    the rest of the pace carries it (or an earlier pass with news writes it sooner)."""
    writes = decided.of_type(WriteStatus)
    if not writes or not all(write.paceable for write in writes):
        return decided
    wait = pace_wait(last_write, now, busy=busy)
    if wait <= 0:
        return decided
    kept = tuple(a for a in decided.actions if not isinstance(a, WriteStatus | RecordEvent))
    requeue = wait if decided.requeue_after is None else min(wait, decided.requeue_after)
    return dataclasses.replace(decided, actions=kept, requeue_after=requeue)
