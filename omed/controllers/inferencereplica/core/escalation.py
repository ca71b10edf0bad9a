"""Pods that don't go, and teardowns that can't finish: the force-delete escalation and the
teardown deadline.

Why: a pod is gone only once its kubelet confirms that its containers stopped. A pod on a
node whose kubelet is gone (the node deleted, tainted ``node.kubernetes.io/unreachable``, or
NotReady for long) stays Terminating for ever, and with it the scale-down or teardown that
waits for it. Where the fleet configures ``lifecycle.forceDelete``, such a pod is deleted
with grace 0 (:func:`judge` says when); where it configures ``lifecycle.teardown.deadline``,
a deleted InferenceReplica whose teardown is still not done by its deletion time plus the
deadline has its finalizer lifted (:func:`teardown_deadline`).

When a pod is force-deleted (all must hold):

* ``forceDelete`` is configured (``overdueSlack`` or ``nodeUnreachableThreshold`` set; both
  unset: never). An unset ``overdueSlack`` is no slack; an unset
  ``nodeUnreachableThreshold`` means a node that is only NotReady never counts as dead,
  while a gone or unreachable-tainted node counts at once;
* the pod is Terminating and ``now`` is at least its deletionTimestamp plus ``overdueSlack``;
* its node is dead: gone from a synced node cache; or tainted unreachable, or NotReady,
  since at least ``nodeUnreachableThreshold`` ago (since: the earlier of the taint's
  ``timeAdded`` and the Ready condition's last change; a dead node with no known time is not
  timed, and waits);
* it has no finalizers: one that has them is reported once (PodDeleteBlockedByFinalizer)
  and left, since a grace-0 delete would not remove it either.

A pod on a healthy node (Ready, no unreachable taint) is never force-deleted, however late
its kubelet is. The executor reads the pod and its node again before the delete, and judges
them again with :func:`judge`; the audit row (``ForceDelete``) is written before the delete.

The teardown deadline, with ``teardown.deadline`` set, on a deleted replica whose finalizer
is still on: from the moment the pass sees pods Terminating past their deletion time (plus
the slack) that the escalation won't delete (finalizers, a healthy node whose kubelet doesn't
confirm, a dead node with forceDelete unconfigured), a Warning TeardownBlocked names them,
once per set of such pods, with when the finalizer will be lifted. At the deletion time plus
the deadline, if the teardown hasn't removed the finalizer itself, the finalizer is lifted
(``RemoveFinalizer(lifted=True)``, no fresh list) with a Warning TeardownDeadlineExceeded
that names every pod left. Unset: no deadline.

Invariants: pure, the clock an input; every deadline that isn't due yet is a requeue at its
exact time, so no poll is needed to meet it; what was reported once is kept in the key's
memory (``KeyMemory.escalations_reported``), pruned to what still holds.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Final

from omed.api.events import WARNING
from omed.clock import rfc3339
from omed.config.duration import format_duration
from omed.config.lifecycle import ForceDeleteConfig
from omed.controllers.inferencereplica.core import names
from omed.controllers.inferencereplica.core.actions import (
    Action,
    ForceDeletePod,
    Plan,
    PodRef,
    RecordEvent,
    RemoveFinalizer,
)
from omed.controllers.inferencereplica.core.memory import KeyMemory
from omed.controllers.inferencereplica.core.model import ObservedState, PodView, ReplicaTarget
from omed.controllers.inferencereplica.core.nodes import (
    NODE_GONE,
    NODE_NOT_READY,
    NODE_UNREACHABLE,
    NodeState,
    NodeView,
    node_state,
)

_BLOCKED: Final = "blocked:"
_TEARDOWN: Final = "teardown:"
MAX_NAMED: Final = 10
"""Pods an event names one by one; the rest are counted."""


def enabled(config: ForceDeleteConfig) -> bool:
    return config.overdue_slack is not None or config.node_unreachable_threshold is not None


@dataclass(frozen=True, slots=True)
class Judgement:
    """What the escalation makes of one pod now."""

    due: bool = False
    """Force-delete it now."""
    blocked: bool = False
    """It would be due, but it has finalizers."""
    node: NodeState | None = None
    at: dt.datetime | None = None
    """When it becomes due, if that is later than now."""


NEVER: Final = Judgement()


def judge(
    pod: PodView,
    node: NodeState,
    *,
    overdue_slack: float | None,
    threshold: float | None,
    now: dt.datetime,
) -> Judgement:
    """Whether ``pod``, on a node in state ``node``, is force-deleted now (module docstring)."""
    if overdue_slack is None and threshold is None:
        return NEVER
    if not pod.terminating or pod.deleted_at is None or node.cause is None:
        return NEVER
    times = [pod.deleted_at + dt.timedelta(seconds=overdue_slack or 0.0)]
    if node.cause != NODE_GONE:
        if node.since is None or (node.cause == NODE_NOT_READY and threshold is None):
            return Judgement(node=node)
        times.append(node.since + dt.timedelta(seconds=threshold or 0.0))
    due_at = max(times)
    if now < due_at:
        return Judgement(node=node, at=due_at)
    if pod.finalizers:
        return Judgement(blocked=True, node=node)
    return Judgement(due=True, node=node)


def node_phrase(node: str | None, state: NodeState) -> str:
    """``node X, which is gone`` and the like, for event messages."""
    where = f"node {node}"
    if state.cause == NODE_GONE:
        return f"{where}, which is gone"
    since = f" since {rfc3339(state.since)}" if state.since is not None else ""
    if state.cause == NODE_UNREACHABLE:
        return f"{where}, which is tainted node.kubernetes.io/unreachable{since}"
    if state.cause == NODE_NOT_READY:
        return f"{where}, which is NotReady{since}"
    return where


def force_deleted_message(target: ReplicaTarget, pod: PodView, state: NodeState) -> str:
    assert pod.deleted_at is not None
    return (
        f"force-deleted pod {pod.name} (Instance {pod.index} of {target.component}): "
        f"Terminating past {rfc3339(pod.deleted_at)} on {node_phrase(pod.node, state)}"
    )


def blocked_message(target: ReplicaTarget, pod: PodView, state: NodeState) -> str:
    return (
        f"pod {pod.name} (Instance {pod.index} of {target.component}) is Terminating on "
        f"{node_phrase(pod.node, state)}, but it has finalizers "
        f"({', '.join(pod.finalizers)}): it is not force-deleted while they are on it"
    )


def _pods(observed: ObservedState) -> Iterable[PodView]:
    for group in observed.pods.values():
        yield from group
    yield from observed.stray_pods


@dataclass(frozen=True, slots=True)
class Escalation:
    actions: tuple[Action, ...] = ()
    requeue: tuple[float, ...] = ()
    reported: frozenset[str] = frozenset()
    """What stays reported (the memory's ``escalations_reported``)."""


def _seconds(at: dt.datetime, now: dt.datetime) -> float:
    return max((at - now).total_seconds(), 0.0)


def force_deletes(
    *,
    target: ReplicaTarget,
    observed: ObservedState,
    reported: frozenset[str],
    now: dt.datetime,
) -> Escalation:
    """This pass's force deletes, finalizer reports and the requeue at the next due time."""
    config = target.fleet.force_delete
    if not enabled(config) or observed.nodes is None or (target.paused and not target.deleting):
        return Escalation(reported=frozenset(r for r in reported if not r.startswith(_BLOCKED)))
    actions: list[Action] = []
    requeue: list[float] = []
    still: set[str] = set()
    for pod in _pods(observed):
        state = node_state(pod, observed.nodes)
        verdict = judge(
            pod,
            state,
            overdue_slack=config.overdue_slack,
            threshold=config.node_unreachable_threshold,
            now=now,
        )
        if verdict.at is not None:
            requeue.append(_seconds(verdict.at, now))
        if verdict.blocked:
            key = f"{_BLOCKED}{pod.uid}"
            still.add(key)
            if key not in reported:
                actions.append(
                    RecordEvent(
                        WARNING, names.EVENT_POD_DELETE_BLOCKED, blocked_message(target, pod, state)
                    )
                )
        if verdict.due and state.cause is not None:
            actions.append(
                ForceDeletePod(
                    index=pod.index,
                    pod=PodRef(pod.name, pod.uid),
                    node=pod.node,
                    cause=state.cause,
                    revision=pod.revision,
                    overdue_slack=config.overdue_slack or 0.0,
                    node_unreachable_threshold=config.node_unreachable_threshold,
                    event=RecordEvent(
                        WARNING,
                        names.EVENT_POD_FORCE_DELETED,
                        force_deleted_message(target, pod, state),
                    ),
                )
            )
    kept = {r for r in reported if not r.startswith(_BLOCKED)} | still
    return Escalation(actions=tuple(actions), requeue=tuple(requeue), reported=frozenset(kept))


def _named(pods: list[PodView]) -> str:
    shown = ", ".join(pod.name for pod in pods[:MAX_NAMED])
    more = len(pods) - MAX_NAMED
    return f"{shown} and {more} more" if more > 0 else shown


def _why_stuck(pod: PodView, state: NodeState, config: ForceDeleteConfig) -> str:
    if pod.finalizers:
        return f"finalizers {', '.join(pod.finalizers)}"
    if state.cause is None:
        return f"on node {pod.node}, whose kubelet hasn't confirmed the deletion"
    if not enabled(config):
        return f"on {node_phrase(pod.node, state)}, and lifecycle.forceDelete is not set"
    return f"on {node_phrase(pod.node, state)}"


def teardown_deadline(
    *,
    target: ReplicaTarget,
    observed: ObservedState,
    plan: Plan,
    forced: Escalation,
    now: dt.datetime,
) -> Escalation:
    """TeardownBlocked and the lift of the finalizer at ``teardown.deadline`` (module
    docstring), after ``forced``, this pass's :func:`force_deletes`: what it reports stays
    reported, and the pods it force-deletes are going, not stuck."""
    deadline = target.fleet.teardown.deadline
    reported = forced.reported
    others = frozenset(r for r in reported if not r.startswith(_TEARDOWN))
    if (
        deadline is None
        or not target.deleting
        or target.orphaning
        or not target.has_finalizer
        or target.deleted_at is None
        or plan.of_type(RemoveFinalizer)
    ):
        return Escalation(reported=others)
    due_at = target.deleted_at + dt.timedelta(seconds=deadline)
    left = sorted(_pods(observed), key=lambda p: p.name)
    config = target.fleet.force_delete
    if now >= due_at:
        what = f"pods left: {_named(left)}" if left else "no pod left"
        message = (
            f"teardown of InferenceReplica {target.namespace}/{target.name} did not finish "
            f"within teardown.deadline ({format_duration(deadline)}); finalizer "
            f"{names.FINALIZER} lifted; {what}"
        )
        return Escalation(
            actions=(
                RecordEvent(WARNING, names.EVENT_TEARDOWN_DEADLINE, message),
                RemoveFinalizer(lifted=True),
            ),
            reported=others,
        )
    slack = dt.timedelta(seconds=config.overdue_slack or 0.0)
    going = {a.pod.uid for a in forced.actions if isinstance(a, ForceDeletePod)}
    stuck = [
        pod
        for pod in left
        if pod.terminating
        and pod.deleted_at is not None
        and now >= pod.deleted_at + slack
        and pod.uid not in going
    ]
    requeue = [_seconds(due_at, now)]
    requeue.extend(
        _seconds(pod.deleted_at + slack, now)
        for pod in left
        if pod.terminating and pod.deleted_at is not None and now < pod.deleted_at + slack
    )
    if not stuck:
        return Escalation(requeue=tuple(requeue), reported=others)
    key = _TEARDOWN + ",".join(pod.uid for pod in stuck)
    if key in reported:
        return Escalation(requeue=tuple(requeue), reported=others | {key})
    nodes = observed.nodes
    reasons = "; ".join(
        f"{pod.name} ({_why_stuck(pod, node_state(pod, nodes), config)})"
        for pod in stuck[:MAX_NAMED]
    )
    more = len(stuck) - MAX_NAMED
    message = (
        f"teardown of InferenceReplica {target.namespace}/{target.name} is blocked by "
        f"{len(stuck)} pod(s) Terminating past their deletion time: {reasons}"
        + (f"; and {more} more" if more > 0 else "")
        + f"; finalizer {names.FINALIZER} is lifted at {rfc3339(due_at)} (teardown.deadline "
        f"{format_duration(deadline)})"
    )
    return Escalation(
        actions=(RecordEvent(WARNING, names.EVENT_TEARDOWN_BLOCKED, message),),
        requeue=tuple(requeue),
        reported=others | {key},
    )


def escalate(
    decided: Plan,
    *,
    target: ReplicaTarget,
    observed: ObservedState,
    memory: KeyMemory,
    now: dt.datetime,
) -> tuple[Plan, KeyMemory]:
    """``decided`` with this pass's force deletes and teardown deadline added, and the memory
    of what was reported. Orphan deletions are left alone (their pods are to keep running)."""
    if target.orphaning:
        return decided, memory
    reported = memory.escalations_reported
    forced = force_deletes(target=target, observed=observed, reported=reported, now=now)
    torn = teardown_deadline(target=target, observed=observed, plan=decided, forced=forced, now=now)
    actions = (*forced.actions, *torn.actions)
    requeue = [*forced.requeue, *torn.requeue]
    if decided.requeue_after is not None:
        requeue.append(decided.requeue_after)
    if torn.reported != reported:
        memory = dataclasses.replace(memory, escalations_reported=torn.reported)
    if not actions and (decided.requeue_after is None) == (not requeue):
        return decided, memory
    return (
        dataclasses.replace(
            decided,
            actions=(*decided.actions, *actions),
            requeue_after=min(requeue) if requeue else None,
        ),
        memory,
    )


def nodes_of(pods: Iterable[PodView], nodes: Mapping[str, NodeView]) -> dict[str, NodeView]:
    """The cached nodes of ``pods`` (the ones a pass judges from)."""
    wanted = {pod.node for pod in pods if pod.node}
    return {name: nodes[name] for name in wanted if name in nodes}


__all__ = [
    "Escalation",
    "Judgement",
    "enabled",
    "escalate",
    "force_deletes",
    "judge",
    "teardown_deadline",
]
