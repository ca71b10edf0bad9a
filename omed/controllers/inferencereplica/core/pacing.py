"""Which status writes may wait, and how long: the pace of informational writes.

Why: during a fleet's convergence most status writes only move what observation shows
(counts, pods appearing, the step of the same operation), and each costs an API round trip
and an InferenceService status write. Such a write (``WriteStatus.paceable``) is held back
while this manager wrote the replica's status less than ``STATUS_PACE`` ago
(``STATUS_PACE_BUSY`` while the controller is busy, :mod:`omed.controllers.pacing`); the
pass requeues for the rest, and a later write, with news or not, carries it.

A migration in flight narrows "news": its surge's and its source's rows (pods appearing,
gates, the surge turning Ready, the source going unready as it drains) and the counts they
alone move are observation, because the record's phase is what tells that move (SurgeReady
says the surge serves, Draining and Completed that the source leaves), and the phase writes
carry those rows with them a moment later.

Invariants: a write that records an operation ahead of its side effect is never held; a
write held back takes its events with it (only InstanceCreated, and InstanceReady of a
migration's surge, can be among them, and both are read off the stored rows again), so none
is lost and none is sent twice; no row outside a migration in flight turning Ready or
Failed, no condition that flips, no new revision, and no count of ready Instances moved by
such a row is ever late. The clock's reading, the last write and "busy" are inputs.
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

_NEWS_FIELDS: Final = ("observed_generation", "current_revision", "update_revision", "retry_blocks")
_COUNT_FIELDS: Final = ("ready_replicas", "available_replicas", "serving_replicas")


def paceable(
    observed: ObservedState,
    status: InferenceReplicaStatus,
    rows: Sequence[InstanceStatus],
    *,
    recorded_ahead: bool,
    events: Sequence[RecordEvent],
    moving: frozenset[int] = frozenset(),
) -> bool:
    """Whether a status write of ``status`` and ``rows`` may wait: it records nothing ahead
    of a pod write (gates need no record ahead of them), carries no event but
    InstanceCreated (and InstanceReady while a migration is in flight: only its surge may turn
    Ready in a write that waits), and only moves observation (:func:`only_observation_moved`;
    ``moving``: the sources and surges of the migrations in flight after the pass). A replica
    without omed's finalizer gets it first and is never paced (the caller's check)."""
    allowed = {names.EVENT_INSTANCE_CREATED}
    if moving:
        allowed.add(names.EVENT_INSTANCE_READY)
    return (
        not recorded_ahead
        and all(event.reason in allowed for event in events)
        and only_observation_moved(observed.status, status, observed.rows, rows, moving=moving)
    )


def only_observation_moved(
    before: InferenceReplicaStatus,
    after: InferenceReplicaStatus,
    rows_before: Mapping[int, InstanceStatus],
    rows_after: Sequence[InstanceStatus],
    *,
    moving: frozenset[int] = frozenset(),
) -> bool:
    """Whether a status change only moves what observation shows: the same Instances with the
    same operations (their steps may move), the same revisions, the same conditions (type,
    status, reason; messages may move), and the same readiness counts, unless only rows in
    ``moving`` (a migration's source and surge) moved them; no row turning Ready or Failed
    but a surge in ``moving`` turning Ready. Such a write may wait a moment."""
    if any(getattr(before, f) != getattr(after, f) for f in _NEWS_FIELDS):
        return False
    counts_moved = any(getattr(before, f) != getattr(after, f) for f in _COUNT_FIELDS)
    if counts_moved and not moving:
        return False

    def flags(status: InferenceReplicaStatus) -> set[tuple[str, str, str | None]]:
        return {(c.type, c.status, c.reason) for c in status.conditions or ()}

    if flags(before) != flags(after):
        return False
    if set(rows_before) != {row.index for row in rows_after}:
        return False
    for row in rows_after:
        old = rows_before[row.index]
        if _op_identity(old.operation) != _op_identity(row.operation):
            return False
        migrating = row.index in moving
        turned = old.phase != row.phase and row.phase in ("Ready", "Failed")
        if turned and not (migrating and row.phase == "Ready"):
            return False
        if counts_moved and not migrating and _counted(old) != _counted(row):
            return False
    return True


def _counted(row: InstanceStatus) -> tuple[object, ...]:
    """What a row gives the readiness counts (:mod:`.summary`)."""
    return (
        row.phase,
        row.pod_count,
        row.serving_pod_count,
        row.available_pod_count,
        row.ready_since is not None,
    )


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
