"""What an Instance is, read off its pods: its facts, its row, and the status summary.

Why: the row is what ``kubectl ome instance`` shows, so its fields must mean one thing. This
module derives them, purely, from the pods the cache holds, the row's operation (decided by
:mod:`.plan`) and the previous row (for times that must not move on every pass).

Row fields (*omed* marks omed's own choice where the CRD leaves the meaning open):

* ``phase``: Deleting while a Delete operation runs; Pending while nothing of the Instance
  exists yet, or none of its pods is bound to a node; Failed while a pod fails (a container
  crash-loops or can't pull its image, or the pod failed), Create operation or not; Ready when
  every pod it should have exists and is Ready; Updating while an Update operation runs and
  it isn't Ready; Creating otherwise (pods coming up). *omed*:
  an Instance that was Ready and lost readiness without failing shows Creating; one whose
  container images were patched in place isn't Ready (Updating) until its containers run
  the new images, even while the old containers still are.
* ``podCount``: every pod of the Instance, Terminating ones included; ``servingPodCount``:
  pods whose ome.io/serving gate is True; ``availablePodCount``: live pods Ready for at
  least ``minReadySeconds``.
* ``runningRevision``: the pods' revision, set when the Instance is Ready and kept after;
  ``targetRevision``: the revision the Instance's pods are (being) created at.
* ``admitted`` (*omed*): True when every pod is bound to a node; absent without pods.
* ``readySince`` (*omed*): the latest Ready transition of its pods while the Instance is
  Ready; absent when it isn't.
* ``lastFailure``: the newest failure seen on its pods; kept after recovery. While the
  operation waits on a token (``operation.waiting``, such as Paused), the failure is
  recorded under that token.
* ``conditions``: one ``Ready`` condition whose transition time moves only when it flips.

Invariant: for the same pods, operation, previous row and ``now``, :func:`build_row` returns
an equal row; and a row built from its own output as "previous" is equal again (no field
depends on ``now`` unless something changed), so an idle pass writes nothing.
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from omed.api.base import Condition, ConditionStatus, transition_time
from omed.api.inferencereplica import (
    InstancePhase,
    InstanceStatus,
    LastFailure,
    Operation,
    RowCondition,
)
from omed.controllers.inferencereplica.core import names
from omed.controllers.inferencereplica.core.model import PodSlot, PodView, ReplicaTarget


@dataclass(frozen=True, slots=True)
class InstanceFacts:
    """An Instance's pods measured against the pods it should have."""

    index: int
    pods: tuple[PodView, ...]
    slots: tuple[PodSlot, ...]
    missing: tuple[PodSlot, ...]
    """Slots with no pod of their name at all (creatable now)."""
    service_routes: bool = False
    """See :attr:`.model.ObservedState.service_routes`."""

    @property
    def live(self) -> tuple[PodView, ...]:
        return tuple(pod for pod in self.pods if not pod.terminating)

    @property
    def complete(self) -> bool:
        """Every slot has a live pod."""
        names_live = {pod.name for pod in self.live}
        return all(slot.name in names_live for slot in self.slots)

    @property
    def ready(self) -> bool:
        """Every slot has a live, Ready pod."""
        ready = {pod.name for pod in self.live if pod.ready}
        return bool(self.slots) and all(slot.name in ready for slot in self.slots)

    @property
    def in_rotation(self) -> bool:
        """Ready, and serving traffic: once the traffic Service has EndpointSlices, one of
        them lists a live pod of the Instance as a ready endpoint. The gate an update passes
        before it drains a serving Instance, so capacity is judged by what the Services
        route to, not only by what the pods report."""
        if not self.ready:
            return False
        return not self.service_routes or any(pod.endpoint_ready is True for pod in self.live)

    @property
    def runs_spec_images(self) -> bool:
        """Every live pod's containers run the images its spec names (an in-place image
        patch took effect); see :attr:`.model.PodView.runs_spec_images`."""
        return all(pod.runs_spec_images for pod in self.live)

    @property
    def failing(self) -> PodView | None:
        return next((pod for pod in self.live if pod.failing), None)


@dataclass(frozen=True, slots=True)
class CreateFailure:
    """A Create this pass failed before its deadline (a grace ran out, :mod:`.graces`): the
    reason and message of the row's Ready condition, and the failure the row records."""

    reason: str
    message: str
    failure: LastFailure


def instance_facts(
    target: ReplicaTarget,
    index: int,
    pods: Sequence[PodView],
    *,
    service_routes: bool = False,
) -> InstanceFacts:
    slots = target.slots(index)
    present = {pod.name for pod in pods}
    return InstanceFacts(
        index=index,
        pods=tuple(sorted(pods, key=lambda p: p.name)),
        slots=slots,
        missing=tuple(slot for slot in slots if slot.name not in present),
        service_routes=service_routes,
    )


def available(pod: PodView, *, min_ready_seconds: int, now: dt.datetime) -> bool:
    if not pod.ready or pod.terminating:
        return False
    if min_ready_seconds <= 0:
        return True
    if pod.ready_since is None:
        return False
    return (now - pod.ready_since).total_seconds() >= min_ready_seconds


def next_available_in(
    pods: Iterable[PodView], *, min_ready_seconds: int, now: dt.datetime
) -> float | None:
    """Seconds until the next Ready pod becomes available, if one is waiting for that."""
    waits = [
        min_ready_seconds - (now - pod.ready_since).total_seconds()
        for pod in pods
        if min_ready_seconds > 0 and pod.ready and not pod.terminating and pod.ready_since
    ]
    pending = [w for w in waits if w > 0]
    return min(pending) if pending else None


def condition(
    previous: Sequence[Condition] | None,
    *,
    type: str,
    status: ConditionStatus,
    reason: str,
    message: str,
    now: dt.datetime,
    generation: int | None = None,
) -> Condition:
    """A condition that keeps its previous transition time while its status is unchanged."""
    return Condition(
        type=type,
        status=status,
        reason=reason,
        message=message,
        last_transition_time=transition_time(previous, type=type, status=status, now=now),
        observed_generation=generation,
    )


def row_condition(
    previous: Sequence[RowCondition] | None,
    *,
    type: str,
    status: ConditionStatus,
    reason: str,
    message: str,
    now: dt.datetime,
) -> RowCondition:
    """A row's condition; its transition time moves only when its status changes."""
    since = transition_time(previous, type=type, status=status, now=now)
    return RowCondition(
        type=type, status=status, reason=reason, message=message, last_transition_time=since
    )


def pods_revision(pods: Sequence[PodView], fallback: str | None) -> str | None:
    """The revision most of ``pods`` run (the first seen of the most common), else
    ``fallback``. One revision, the usual case, needs no count (a ``Counter`` per Instance
    was a tenth of a 20,000-Instance pass)."""
    revisions = [pod.revision for pod in pods if pod.revision]
    if not revisions:
        return fallback
    first = revisions[0]
    if revisions.count(first) == len(revisions):
        return first
    return Counter(revisions).most_common(1)[0][0]


def _phase(facts: InstanceFacts, op: Operation | None) -> InstancePhase:
    if op is not None and op.type == "Delete":
        return "Deleting"
    if not facts.pods:
        return "Pending"
    if facts.failing is not None:
        return "Failed"
    if facts.ready and facts.runs_spec_images:
        return "Ready"
    if op is not None and op.type == "Update":
        return "Updating"
    if op is not None and op.type == "Restart":
        return "Restarting"
    if op is not None and op.type == "Create":
        return "Creating"
    if not any(pod.node for pod in facts.pods):
        return "Pending"
    return "Creating"


def _last_failure(
    facts: InstanceFacts, previous: LastFailure | None, now: dt.datetime
) -> LastFailure | None:
    seen = [pod for pod in facts.pods if pod.failure is not None]
    if not seen:
        return previous
    current = [pod for pod in seen if pod.failing] or seen
    pod = max(current, key=lambda p: p.failure.time if p.failure and p.failure.time else now)
    failure = pod.failure
    assert failure is not None
    same = (
        previous is not None
        and previous.pod == pod.name
        and previous.container == failure.container
        and previous.reason == failure.reason
        and previous.exit_code == failure.exit_code
    )
    if same and (failure.time is None or previous is None or previous.time == failure.time):
        return previous
    return LastFailure(
        pod=pod.name,
        container=failure.container,
        reason=failure.reason,
        exit_code=failure.exit_code,
        time=failure.time or now,
    )


def _waiting_failure(
    failure: LastFailure | None,
    op: Operation | None,
    previous: LastFailure | None,
    now: dt.datetime,
    pod: str | None = None,
) -> LastFailure | None:
    """A held operation records the Instance's last failure under its waiting token (the
    pod that shows the hold, when one does), its time kept while the hold lasts."""
    if op is None or not op.waiting:
        return failure
    if previous is not None and previous.reason == op.waiting:
        return previous
    if pod is not None:
        return LastFailure(pod=pod, reason=op.waiting, time=now)
    base = failure or LastFailure()
    return base.model_copy(update={"reason": op.waiting, "time": now})


def _deadline_marked(
    previous: InstanceStatus | None, *, op: Operation | None, ready: bool
) -> RowCondition | None:
    """The previous Ready condition when it says an earlier pass failed the Instance's Create
    (at instanceReadyTimeout or by a grace), and that still holds: not Ready, and no
    operation since."""
    if previous is None or op is not None or ready:
        return None
    old = next((c for c in previous.conditions or () if c.type == names.CONDITION_READY), None)
    if old is None or old.status != "False" or old.reason not in names.CREATE_FAILED_REASONS:
        return None
    return old


def build_row(
    *,
    target: ReplicaTarget,
    facts: InstanceFacts,
    incarnation: int,
    op: Operation | None,
    previous: InstanceStatus | None,
    now: dt.datetime,
    deadline_failed: bool = False,
    waiting_pod: str | None = None,
    create_failed: CreateFailure | None = None,
) -> InstanceStatus:
    """The row of one Instance after this pass's decisions; ``deadline_failed``: this pass
    failed its Create at instanceReadyTimeout; ``create_failed``: this pass failed it by a
    grace (see :func:`_deadline_marked` for how long the row says so)."""
    phase = _phase(facts, op)
    live = facts.live
    ready = phase == "Ready"
    revision = pods_revision(live, None)
    running = revision if ready and revision else previous.running_revision if previous else None
    if op is not None and op.target_revision:
        target_revision: str | None = op.target_revision
    else:
        target_revision = revision or (previous.target_revision if previous else None)
    target_revision = target_revision or target.update_revision

    if phase == "Deleting":
        ready_status: ConditionStatus = "False"
        reason, message = names.INSTANCE_DELETING, "the Instance is being deleted"
    elif ready:
        ready_status = "True"
        reason, message = names.INSTANCE_READY, "every pod of the Instance is Ready"
    elif phase == "Failed":
        ready_status = "False"
        reason, message = names.INSTANCE_PODS_FAILING, "a pod of the Instance is failing"
    elif not facts.complete:
        ready_status = "False"
        reason, message = names.INSTANCE_PODS_MISSING, "the Instance is missing pods"
    else:
        ready_status = "False"
        reason, message = names.INSTANCE_PODS_NOT_READY, "a pod of the Instance is not Ready"
    last_failure = _last_failure(facts, previous.last_failure if previous else None, now)
    failed_now = deadline_failed or create_failed is not None
    marked = _deadline_marked(previous, op=op, ready=ready) if not failed_now else None
    if marked is not None:
        reason, message = marked.reason or names.REASON_PROGRESS_DEADLINE, marked.message or ""
    elif create_failed is not None:
        reason, message = create_failed.reason, create_failed.message
        last_failure = create_failed.failure
    elif deadline_failed:
        reason = names.REASON_PROGRESS_DEADLINE
        message = (
            f"not Ready within instanceReadyTimeout; its Create operation failed at "
            f"{now.isoformat()}"
        )
    if deadline_failed:
        stuck = next((pod.name for pod in facts.live if not pod.ready), None)
        slot = facts.missing[0].name if facts.missing else None
        last_failure = LastFailure(
            pod=stuck or slot, reason=names.REASON_PROGRESS_DEADLINE, time=now
        )
    ready_condition = row_condition(
        previous.conditions if previous else None,
        type=names.CONDITION_READY,
        status=ready_status,
        reason=reason,
        message=message,
        now=now,
    )
    ready_times = [pod.ready_since for pod in live if pod.ready_since is not None]
    return InstanceStatus(
        index=facts.index,
        incarnation=incarnation,
        phase=phase,
        running_revision=running,
        target_revision=target_revision,
        pod_count=len(facts.pods),
        serving_pod_count=sum(1 for pod in facts.pods if pod.serving is True),
        available_pod_count=sum(
            1 for pod in live if available(pod, min_ready_seconds=target.min_ready_seconds, now=now)
        ),
        admitted=all(pod.node for pod in facts.pods) if facts.pods else None,
        conditions=[ready_condition],
        ready_since=max(ready_times) if ready and ready_times else None,
        active_ordinal=0,
        last_failure=_waiting_failure(
            last_failure,
            op,
            previous.last_failure if previous else None,
            now,
            waiting_pod,
        ),
        operation=op,
    )
