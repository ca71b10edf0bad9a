"""The stuck-pod and unschedulable graces: an attempt whose pod can't come up by itself fails
when its grace runs out, not at instanceReadyTimeout.

Why: an image that can't be pulled, a container the runtime can't create or a pod no node
fits doesn't get better by waiting; with a 30-minute instanceReadyTimeout such an attempt
would hold its Instance (and, for an Update, the rollout) for half an hour. The fleet-wide
``lifecycle`` entry's ``stuckPodGracePeriod`` and ``unschedulableGracePeriod`` (no component
field overrides them) bound that wait; unset, only the deadline fails the attempt.

What runs out (read off the pod: :class:`~.model.PodStall`, by :mod:`.observe`):

* stuckPodGracePeriod: a container or init container waits in a terminal kubelet reason
  (:data:`~.observe.STUCK_WAITING_REASONS`), measured from the pod's creation or from the
  last time its ContainersReady left True, whichever is later (upstream OME's "waiting
  episode": the grace is the time a pod gets to come up, and a pod that served and broke is
  measured from the break);
* unschedulableGracePeriod: PodScheduled False with reason Unschedulable, measured from that
  condition's lastTransitionTime (the waiting token Unschedulable shows meanwhile,
  :mod:`.waiting`).

Both are measured from the attempt's start when that is later (``operation.startedAt``): an
attempt started next to a pod that was already stalled gets the whole grace. Every time is
read from the pod or the row, never kept in memory, so a new leader reads the same clock and
restarts none. Only the attempt's own live pods count (an Update's pods on its target
revision, its surge's included; a Restart's rebuilt incarnation; every pod of a Create). A
pass that sees a pod inside its grace asks to be requeued when the grace ends: no watch
event marks that moment. While the InferenceReplica is paused the graces fail nothing; like
a deadline, a grace that ran out during the pause fails the attempt when it resumes.

The failure then takes the path of a deadline (:func:`.steps.expired`): a Warning event
(StuckPodGraceExceeded or UnschedulableGraceExceeded) names the pod, the reason and the
attempt; an Update's retry block moves up the ladder with the pod's reason (such as
CreateContainerError or Unschedulable); a Create ends, its pods kept, its row saying why; a
Restart ends.

Invariant: pure; a grace fails an attempt only when ``now`` is at or past its end.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from omed.api.base import Condition
from omed.api.inferencereplica import InferenceReplicaStatus, InstanceStatus, LastFailure, Operation
from omed.controllers.inferencereplica.core import names
from omed.controllers.inferencereplica.core.model import PodStall, PodView
from omed.controllers.inferencereplica.core.rows import (
    CreateFailure,
    condition,
    ready_reason_indexes,
)
from omed.controllers.inferencereplica.core.work import PassWork


@dataclass(frozen=True, slots=True)
class GraceFailure:
    """The grace that ran out on an attempt's pod."""

    pod: PodView
    stall: PodStall
    grace: float
    """Seconds of the grace that ran out."""

    @property
    def reason(self) -> str:
        """The event's and the row's reason: StuckPodGraceExceeded or
        UnschedulableGraceExceeded."""
        if self.stall.kind == "Unschedulable":
            return names.REASON_UNSCHEDULABLE_GRACE
        return names.REASON_STUCK_POD_GRACE

    @property
    def cause(self) -> str:
        """What the pod shows (ImagePullBackOff, CreateContainerError, Unschedulable, ...): the
        reason an Update's retry block records."""
        return self.stall.reason

    def detail(self) -> str:
        """``pod p wedged in ImagePullBackOff past the stuck-pod grace (stuckPodGracePeriod
        60s)``, in upstream OME's words for a wedged pod."""
        if self.stall.kind == "Unschedulable":
            text = (
                f"pod {self.pod.name} unschedulable past the unschedulable grace "
                f"(unschedulableGracePeriod {self.grace:g}s)"
            )
            return f"{text}: {self.stall.message}" if self.stall.message else text
        return (
            f"pod {self.pod.name} wedged in {self.stall.reason} past the stuck-pod grace "
            f"(stuckPodGracePeriod {self.grace:g}s)"
        )


def grace_of(work: PassWork, stall: PodStall) -> float | None:
    """The configured grace of ``stall``'s kind, in seconds; None when unset."""
    fleet = work.target.fleet
    if stall.kind == "Unschedulable":
        return fleet.unschedulable_grace_period
    return fleet.stuck_pod_grace_period


def ends_at(work: PassWork, op: Operation, pod: PodView) -> tuple[dt.datetime, float] | None:
    """When ``pod``'s grace ends for attempt ``op``, and its length; None when the pod
    isn't stalled or no grace of its kind is configured."""
    stall = pod.stall
    if stall is None or pod.terminating:
        return None
    grace = grace_of(work, stall)
    if grace is None:
        return None
    since = stall.since if op.started_at is None else max(stall.since, op.started_at)
    return since + dt.timedelta(seconds=grace), grace


def judge(
    work: PassWork, op: Operation, pods: Sequence[PodView], *, instance: int
) -> GraceFailure | None:
    """The first of ``pods`` (the attempt's own) whose grace ran out, with a Warning event
    naming it and the attempt; else None, and a requeue at the earliest grace end."""
    if not work.act:
        return None
    waits: list[float] = []
    for pod in pods:
        end = ends_at(work, op, pod)
        if end is None:
            continue
        left = (end[0] - work.now).total_seconds()
        if left > 0:
            waits.append(left)
            continue
        assert pod.stall is not None
        failure = GraceFailure(pod=pod, stall=pod.stall, grace=end[1])
        revision = op.target_revision or work.target.update_revision
        work.warn(
            names.EVENT_UNSCHEDULABLE_GRACE
            if failure.stall.kind == "Unschedulable"
            else names.EVENT_STUCK_POD_GRACE,
            f"Instance {instance} of {work.target.component} was not Ready on {revision}: "
            f"{failure.detail()}; its {op.type} operation failed",
        )
        return failure
    if waits:
        work.requeue.append(min(waits))
    return None


def on_revision(pods: Sequence[PodView], revision: str) -> tuple[PodView, ...]:
    """An Update's own pods among ``pods``: the live ones on its target revision."""
    return tuple(pod for pod in pods if not pod.terminating and pod.revision == revision)


def create_failure(failure: GraceFailure, now: dt.datetime) -> CreateFailure:
    """What the row of a Create the grace failed says: its Ready condition's reason and
    message, and its lastFailure (the pod's own failure when it shows one, so the next pass
    doesn't rewrite it; else the stall's reason)."""
    pod = failure.pod
    seen = pod.failure if pod.failing else None
    last = (
        LastFailure(
            pod=pod.name,
            container=seen.container,
            reason=seen.reason,
            exit_code=seen.exit_code,
            time=seen.time or now,
        )
        if seen is not None
        else LastFailure(
            pod=pod.name,
            container=failure.stall.container or None,
            reason=failure.cause,
            time=now,
        )
    )
    return CreateFailure(
        reason=failure.reason,
        message=f"{failure.detail()}; its Create operation failed at {now.isoformat()}",
        failure=last,
    )


_FAILED_CREATES = (
    (
        names.CONDITION_PROGRESS_DEADLINE,
        names.REASON_PROGRESS_DEADLINE,
        "were not Ready within instanceReadyTimeout",
    ),
    (
        names.CONDITION_STUCK_POD_GRACE,
        names.REASON_STUCK_POD_GRACE,
        "had a pod that couldn't come up within stuckPodGracePeriod",
    ),
    (
        names.CONDITION_UNSCHEDULABLE_GRACE,
        names.REASON_UNSCHEDULABLE_GRACE,
        "had a pod that couldn't come up within unschedulableGracePeriod",
    ),
)
"""Each way a Create fails with its pods kept: the condition, the Ready reason its rows keep,
and what the message says of those Instances."""
FAILED_CREATE_REASONS: Final = tuple(reason for _, reason, _ in _FAILED_CREATES)
"""The Ready reasons of rows whose Create instanceReadyTimeout or a grace failed."""


def failed_create_conditions(
    work: PassWork,
    rows: Sequence[InstanceStatus],
    previous: InferenceReplicaStatus,
    *,
    late: Mapping[str, list[int]] | None = None,
) -> list[Condition]:
    """Conditions ProgressDeadlineExceeded, StuckPodGraceExceeded and
    UnschedulableGraceExceeded while an Instance whose Create failed at instanceReadyTimeout
    or at a grace is still not Ready (its Ready condition keeps that reason); none of a type
    the pass already set (a retry block's ProgressDeadlineExceeded), so each type is one
    condition. ``late``: :func:`~.rows.ready_reason_indexes` of ``rows`` for
    :data:`FAILED_CREATE_REASONS` (among others), when the caller has it already."""
    found: list[Condition] = []
    late_by_reason = late if late is not None else ready_reason_indexes(rows, FAILED_CREATE_REASONS)
    flagged = {c.type for c in work.conditions}
    for type_, reason, why in _FAILED_CREATES:
        indexes = late_by_reason[reason]
        if not indexes or type_ in flagged:
            continue
        which = ", ".join(str(index) for index in indexes)
        found.append(
            condition(
                previous.conditions,
                type=type_,
                status="True",
                reason=reason,
                message=f"Instance(s) {which} of {work.target.component} {why}: their Create "
                "operation failed; their pods are kept",
                now=work.now,
            )
        )
    return found
