"""What an Instance is, read off its pods: its facts, its row, and the status summary.

Why: the row is what ``kubectl ome instance`` shows, so its fields must mean one thing. This
module derives them, purely, from the pods the cache holds, the row's operation (decided by
:mod:`.plan`) and the previous row (for times that must not move on every pass).

Row fields (*omed* marks omed's own choice where the CRD leaves the meaning open):

* ``phase``: Deleting while a Delete operation runs; Pending while nothing of the Instance
  exists yet, or none of its pods is bound to a node; Failed while a pod fails (a container
  crash-loops or can't pull its image, or the pod failed), Create operation or not; Migrating
  while the Instance is the source of a migration (its Ready condition still follows its
  pods, and it counts as Ready while they are); Ready when
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

import dataclasses
import datetime as dt
import operator
from collections import Counter, OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final

from omed.api.base import Condition, ConditionStatus, transition_time
from omed.api.inferencereplica import (
    InstancePhase,
    InstanceStatus,
    LastFailure,
    Operation,
    RowCondition,
)
from omed.controllers.inferencereplica.core import names, samememo
from omed.controllers.inferencereplica.core.model import PodSlot, PodView, ReplicaTarget


@dataclass(frozen=True, slots=True)
class InstanceFacts:
    """An Instance's pods measured against the pods it should have.

    What the planner asks of these facts again and again in a pass (its live pods, whether
    they are complete, Ready, on the spec's images, failing) is read off the pods once, when
    the facts are made: the facts are frozen, so these can't go stale."""

    index: int
    pods: tuple[PodView, ...]
    slots: tuple[PodSlot, ...]
    missing: tuple[PodSlot, ...]
    """Slots with no pod of their name at all (creatable now)."""
    service_routes: bool = False
    """See :attr:`.model.ObservedState.service_routes`."""
    live: tuple[PodView, ...] = field(init=False, compare=False, repr=False)
    """The pods not Terminating."""
    complete: bool = field(init=False, compare=False, repr=False)
    """Every slot has a live pod."""
    ready: bool = field(init=False, compare=False, repr=False)
    """Every slot has a live, Ready pod."""
    runs_spec_images: bool = field(init=False, compare=False, repr=False)
    """Every live pod's containers run the images its spec names (an in-place image
    patch took effect); see :attr:`.model.PodView.runs_spec_images`."""
    failing: PodView | None = field(init=False, compare=False, repr=False)
    """The first live pod that is failing, if one is."""
    revisions: frozenset[str | None] = field(init=False, compare=False, repr=False)
    """The revisions the live pods run (empty without live pods)."""
    gates_settled: tuple[bool, bool] = field(init=False, compare=False, repr=False)
    """Whether the Instance has exactly one live pod and its serving gate is True exactly
    when that pod may serve, under a ``readyPolicy`` other than AllPodReady (first) and under
    AllPodReady (second): such an Instance needs no gate change (:mod:`.plan`'s gates)."""

    def __post_init__(self) -> None:
        live = tuple(pod for pod in self.pods if not pod.terminating)
        if len(self.slots) == 1 and len(live) == 1:  # the usual Instance: one pod
            [slot], [pod] = self.slots, live
            complete = pod.name == slot.name
            ready = complete and pod.ready
        else:
            names_live = {pod.name for pod in live}
            names_ready = {pod.name for pod in live if pod.ready}
            complete = all(slot.name in names_live for slot in self.slots)
            ready = bool(self.slots) and all(slot.name in names_ready for slot in self.slots)
        _set = object.__setattr__
        _set(self, "live", live)
        _set(self, "complete", complete)
        _set(self, "ready", ready)
        _set(self, "runs_spec_images", all(pod.runs_spec_images for pod in live))
        _set(self, "failing", next((pod for pod in live if pod.failing), None))
        _set(self, "revisions", frozenset(pod.revision for pod in live))
        settled = (False, False)
        if len(live) == 1:
            [one] = live
            serving = one.serving is True
            settled = (
                bool(one.containers_ready) == serving,
                bool(one.containers_ready and complete) == serving,
            )
        _set(self, "gates_settled", settled)

    def all_on(self, revision: str) -> bool:
        """Live pods, all on ``revision``."""
        revisions = self.revisions
        return len(revisions) == 1 and revision in revisions

    def any_off(self, revision: str) -> bool:
        """A live pod not on ``revision``."""
        revisions = self.revisions
        return len(revisions) > 1 or (len(revisions) == 1 and revision not in revisions)

    @property
    def in_rotation(self) -> bool:
        """Ready, and serving traffic: once the traffic Service has EndpointSlices, one of
        them lists a live pod of the Instance as a ready endpoint. The gate an update passes
        before it drains a serving Instance, so capacity is judged by what the Services
        route to, not only by what the pods report."""
        if not self.ready:
            return False
        return not self.service_routes or any(pod.endpoint_ready is True for pod in self.live)


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


class FactsMemo:
    """Each replica's Instance facts from its last pass, reused for the very same pods.

    Why: the facts of 20,000 Instances were a quarter of a pass that changed nothing, and
    facts are a function of the pod views (kept per cached pod object, so the same objects
    while a pod doesn't change), the Instance's slots (the replica's name and runners' names
    and sizes) and ``service_routes``. An entry is reused only for the same pod views (by
    identity: it holds them) and equal rest; each pass keeps exactly the facts it gave, at
    most ``max_instances`` in all, the replicas read least recently dropped first.

    Invariant: :meth:`facts` gives facts equal to :func:`instance_facts`'s.
    """

    def __init__(self, *, max_instances: int = 100_000) -> None:
        self._max = max_instances
        self._replicas: OrderedDict[str, tuple[object, dict[int, InstanceFacts]]] = OrderedDict()
        self._held = 0

    def facts(
        self,
        target: ReplicaTarget,
        indexes: Iterable[int],
        pods: Mapping[int, Sequence[PodView]],
        *,
        service_routes: bool,
    ) -> dict[int, InstanceFacts]:
        """The facts of Instances ``indexes`` (by index), their pods from ``pods``."""
        shape = (target.name, tuple((r.name, r.size) for r in target.runners), service_routes)
        old_shape, old = self._replicas.pop(target.uid, (None, {}))
        self._held -= len(old)
        if old_shape != shape:
            old = {}
        found: dict[int, InstanceFacts] = {}
        for index in indexes:
            views = pods.get(index, ())
            entry = old.get(index)
            if (
                entry is None
                or len(entry.pods) != len(views)
                or (
                    entry.pods[0] is not views[0]
                    if len(views) == 1  # the usual Instance: nothing to sort
                    else not all(map(operator.is_, entry.pods, sorted(views, key=_by_name)))
                )
            ):
                entry = instance_facts(target, index, views, service_routes=service_routes)
            found[index] = entry
        if len(found) <= self._max:
            self._replicas[target.uid] = (shape, found)
            self._held += len(found)
            while self._held > self._max:
                _, (_, dropped) = self._replicas.popitem(last=False)
                self._held -= len(dropped)
        return found

    def forget(self, uid: str) -> None:
        _, dropped = self._replicas.pop(uid, (None, {}))
        self._held -= len(dropped)


def _by_name(pod: PodView) -> str:
    return pod.name


FACTS_MEMO: Final = FactsMemo()
"""The controller's memo of Instance facts (one controller per process)."""


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


def ready_reason_indexes(
    rows: Iterable[InstanceStatus], reasons: Iterable[str]
) -> dict[str, list[int]]:
    """For each of ``reasons``, the indexes of the rows (in row order) with a Ready condition
    of that reason: one look at each row's conditions for all the reasons."""
    found: dict[str, list[int]] = {reason: [] for reason in reasons}
    ready = names.CONDITION_READY
    for row in rows:
        added: tuple[str, ...] = ()
        for cond in row.conditions or ():
            reason = cond.reason
            if cond.type == ready and reason is not None:
                late = found.get(reason)
                if late is not None and reason not in added:
                    late.append(row.index)
                    added = (*added, reason)
    return found


def ready_reason_indexes_patched(
    old: tuple[tuple[InstanceStatus, ...]],
    found: dict[str, list[int]],
    new: tuple[tuple[InstanceStatus, ...]],
    changed: list[int],
    reasons: tuple[str, ...],
) -> dict[str, list[int]] | None:
    """:func:`ready_reason_indexes` of ``new`` from ``found``, that of ``old``, which differs
    from it at ``changed`` only: the same when each changed row adds what the row it replaced
    added (its index under the same reasons); None otherwise."""
    [before], [after] = old, new
    for pos in changed:
        if _late_for(before[pos], reasons) != _late_for(after[pos], reasons):
            return None
    return found


def _late_for(row: InstanceStatus, reasons: tuple[str, ...]) -> tuple[int, tuple[str, ...]] | None:
    """What ``row`` adds to :func:`ready_reason_indexes`: its index under these reasons."""
    ready = names.CONDITION_READY
    its = tuple(
        dict.fromkeys(
            cond.reason
            for cond in row.conditions or ()
            if cond.type == ready and cond.reason is not None and cond.reason in reasons
        )
    )
    return (row.index, its) if its else None


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
    if op is not None and op.type == "Migrate" and op.from_node is not None:
        return "Migrating"  # the source of a migration (its surge's operation names no node)
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
    # A migrating source serves until it is drained: it counts as Ready meanwhile.
    ready = phase == "Ready" or (
        phase == "Migrating" and facts.ready and facts.runs_spec_images and not facts.missing
    )
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


RowInput = tuple[
    InstanceFacts,
    int,
    Operation | None,
    InstanceStatus | None,
    bool,
    str | None,
    CreateFailure | None,
]
"""What :func:`build_row` builds one row from besides the target and the time: the facts,
incarnation, operation, previous row, ``deadline_failed``, ``waiting_pod`` and
``create_failed``."""


@dataclass(slots=True)
class _Built:
    """A row :func:`build_row` built, what it was built from, and the times it holds for."""

    facts: InstanceFacts
    incarnation: int
    op: Operation | None
    previous: InstanceStatus | None
    waiting_pod: str | None
    update_revision: str
    min_ready_seconds: int
    row: InstanceStatus
    since: dt.datetime | None
    """The row holds for ``now`` at or after this (None: any earlier time)."""
    until: dt.datetime | None
    """The row holds for ``now`` before this (None: any later time)."""


class RowMemo:
    """The rows :func:`build_row` built in each replica's last pass, reused while what they
    were built from holds.

    Why: a pass builds every Instance's row; at 20,000 Instances that was the largest part of
    a pass that changes nothing, and of one that changes one Instance. A row is a function of
    its inputs (:data:`RowInput`, the target's update revision and minReadySeconds) and of
    ``now``; an entry is reused only for the very same previous row and pod views (by
    identity: the entry holds them; or, for the previous row, the row the entry built, which
    a row built from its own output gives again: the module's invariant) and equal other
    inputs, and only where ``now`` can't
    change the row (:func:`_holds_for`): the Ready condition keeps its transition time, no
    failure is stamped with ``now``, and every pod stays on the same side of minReadySeconds.
    A built row equal to the previous one is the previous one (so the pass finds its rows
    unchanged by identity). Each pass keeps exactly the entries of its own rows; at most
    ``max_rows`` are kept, the replicas built least recently dropped first.

    Invariant: :meth:`build` gives rows equal to what :func:`build_row` gives for the same
    inputs and ``now``.
    """

    def __init__(self, *, max_rows: int = 100_000) -> None:
        self._max_rows = max_rows
        self._replicas: OrderedDict[str, dict[int, _Built]] = OrderedDict()
        self._held = 0

    def build(
        self, target: ReplicaTarget, now: dt.datetime, inputs: Iterable[RowInput]
    ) -> tuple[InstanceStatus, ...]:
        old = self._replicas.pop(target.uid, None) or {}
        self._held -= len(old)
        kept: dict[int, _Built] = {}
        rows: list[InstanceStatus] = []
        revision, min_ready = target.update_revision, target.min_ready_seconds
        for facts, incarnation, op, previous, deadline_failed, waiting_pod, failed in inputs:
            index = facts.index
            entry = old.get(index)
            if (
                entry is not None
                and (entry.previous is previous or entry.row is previous)
                and not deadline_failed
                and failed is None
                and (entry.since is None or now >= entry.since)
                and (entry.until is None or now < entry.until)
                and (entry.op is op or entry.op == op)
                and entry.incarnation == incarnation
                and entry.waiting_pod == waiting_pod
                and entry.update_revision == revision
                and entry.min_ready_seconds == min_ready
                and (entry.facts is facts or entry.facts == facts)
            ):
                rows.append(entry.row)
                if entry.previous is not previous:  # the row it built is stored now
                    entry = dataclasses.replace(entry, previous=previous)
                kept[index] = entry
                continue
            row = build_row(
                target=target,
                facts=facts,
                incarnation=incarnation,
                op=op,
                previous=previous,
                now=now,
                deadline_failed=deadline_failed,
                waiting_pod=waiting_pod,
                create_failed=failed,
            )
            if previous is not None and row == previous:
                row = previous
            rows.append(row)
            if deadline_failed or failed is not None:
                continue
            window = _holds_for(
                facts, op=op, previous=previous, row=row, min_ready_seconds=min_ready, now=now
            )
            if window is not None:
                since, until = window
                kept[index] = _Built(
                    facts,
                    incarnation,
                    op,
                    previous,
                    waiting_pod,
                    revision,
                    min_ready,
                    row,
                    since,
                    until,
                )
        if kept and len(kept) <= self._max_rows:
            self._replicas[target.uid] = kept
            self._held += len(kept)
            while self._held > self._max_rows:
                _, dropped = self._replicas.popitem(last=False)
                self._held -= len(dropped)
        return tuple(rows)

    def forget(self, uid: str) -> None:
        dropped: dict[int, _Built] = self._replicas.pop(uid, {})
        self._held -= len(dropped)


def forget_replica(uid: str) -> None:
    """Drop what the memos keep of the replica ``uid`` (it is gone)."""
    FACTS_MEMO.forget(uid)
    ROW_MEMO.forget(uid)
    samememo.forget_all(uid)


def _holds_for(
    facts: InstanceFacts,
    *,
    op: Operation | None,
    previous: InstanceStatus | None,
    row: InstanceStatus,
    min_ready_seconds: int,
    now: dt.datetime,
) -> tuple[dt.datetime | None, dt.datetime | None] | None:
    """The times ``(since, until)`` over which :func:`build_row` builds ``row`` again from
    the same inputs (not failed by a deadline or a grace); None when it depends on ``now``
    itself. These are every use of ``now`` in :func:`build_row`: the Ready condition's
    transition time (``now`` unless the previous row's Ready condition has the same status
    and a time), a failure recorded without a time of its own, a held operation's waiting
    failure recorded at ``now``, and minReadySeconds (a pod's availability flips once, at
    ``readySince + minReadySeconds``)."""
    [ready] = row.conditions or (None,)
    before = (
        next((c for c in (previous.conditions or ()) if c.type == names.CONDITION_READY), None)
        if previous is not None
        else None
    )
    if (
        ready is None
        or before is None
        or before.status != ready.status
        or not before.last_transition_time
    ):
        return None
    if any(pod.failure is not None and pod.failure.time is None for pod in facts.pods):
        return None
    if op is not None and op.waiting:
        held = previous.last_failure if previous is not None else None
        if held is None or held.reason != op.waiting:
            return None
    since: dt.datetime | None = None
    until: dt.datetime | None = None
    if min_ready_seconds > 0:
        wait = dt.timedelta(seconds=min_ready_seconds)
        for pod in facts.live:
            if not pod.ready or pod.ready_since is None:
                continue
            flips = pod.ready_since + wait
            if now >= flips:
                since = flips if since is None else max(since, flips)
            else:
                until = flips if until is None else min(until, flips)
    return since, until


ROW_MEMO: Final = RowMemo()
"""The controller's memo of built rows (one controller per process)."""
