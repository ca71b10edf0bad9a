"""The teardown of a deleted InferenceReplica that omed can't read, planned from its pods alone.

Why: an InferenceReplica whose rows can't be decoded (a damaged ColumnarV2 status, rows left
as columns under a manager without ``maxDecodedInstances``) or whose spec the models refuse is
not planned for: management stops with a Warning until an edit repairs it. Deleting it must
not wait for that repair: omed's finalizer would hold the replica, its pods and its
InferenceService for ever. Its pods say all a teardown needs (each carries its Instance's
``ome.io/instance-index`` label and its ``ome.io/serving`` gate), so this module plans the
planner's teardown (:func:`~.plan.plan` with every Instance unwanted) from them:

* Instances are the pods' index groups; pods without a usable index are drained one by one,
  as the planner drains a deleted replica's strays;
* a Delete is *in flight* for an Instance whose pods show one: a pod Terminating, or a gate
  False (written by the batch that started it, or already off: the Instance serves nothing).
  The planner reads that from the rows' operations; here it is read from the pods, since the
  rows are what can't be read and no row is written;
* a new batch starts only when no Delete in flight has a pod left: whole Instances, highest
  index first, under ``scaleDownPodBatchSize`` resolved against the footprint (every pod,
  Terminating ones too), the first alone if it exceeds it (:mod:`.batching`);
* an Instance is drained as the planner drains it (:func:`.operations.drain_state`): gates False,
  then its live pods deleted together once none is routed (the executor re-reads each pod
  and deletes only the same, unrouted pod, with uid and resourceVersion preconditions);
* the finalizer goes once no pod of the replica is left (the executor confirms it with a
  fresh list); under ``propagationPolicy: Orphan`` nothing is drained and only that happens;
* pods that don't go are escalated as on every other teardown (:func:`escalate_from_pods`,
  :mod:`.escalation`): ``lifecycle.forceDelete`` force-deletes those on dead nodes, and
  ``lifecycle.teardown.deadline`` reports a blocked teardown (TeardownBlocked) and lifts the
  finalizer at its time (TeardownDeadlineExceeded). The escalation is told who the replica
  is by :func:`teardown_target`, from what its metadata and pods say, since its spec is
  not trusted.

Pure: the same pods give the same plan, and a plan's effects, once seen on the pods, give
the next step (no state is kept between passes, none is needed).
"""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

from omed.api.constants import KIND_INFERENCE_SERVICE, LABEL_COMPONENT
from omed.api.inferencereplica import InferenceReplicaStatus
from omed.config.lifecycle import LifecycleConfig
from omed.controllers.deletion import orphaning as orphan_deletion
from omed.controllers.inferencereplica.core import names, operations
from omed.controllers.inferencereplica.core.actions import (
    Action,
    DeletePods,
    Plan,
    PodRef,
    RemoveFinalizer,
    ScaleDownWave,
    SetServingGate,
)
from omed.controllers.inferencereplica.core.batching import Candidate, budget_of, take_batch
from omed.controllers.inferencereplica.core.escalation import escalate
from omed.controllers.inferencereplica.core.memory import KeyMemory
from omed.controllers.inferencereplica.core.model import (
    ObservedState,
    ParentRef,
    PlanSettings,
    PodView,
    ReplicaTarget,
)
from omed.controllers.inferencereplica.core.nodes import NodeView
from omed.controllers.inferencereplica.core.observe import api_time
from omed.controllers.inferencereplica.core.orphans import drain_orphans
from omed.controllers.owners import controller_ref

DRAIN_REASON = names.GATE_DRAINING
"""The reason of the gate writes, as the planner's teardown writes it."""


def in_flight(pods: Sequence[PodView]) -> bool:
    """Whether an Instance's pods show a Delete under way: one is Terminating or gated off."""
    return any(pod.terminating or pod.serving is False for pod in pods)


def teardown_from_pods(
    pods: Sequence[PodView],
    *,
    settings: PlanSettings,
    orphaning: bool = False,
    has_finalizer: bool = True,
) -> Plan:
    """One teardown pass of a deleted InferenceReplica from ``pods`` (the pods it controls;
    see the module docstring). The plan holds pod actions and ``RemoveFinalizer`` only: no
    status write (the rows are what can't be read), so ``rows`` is empty."""
    if orphaning:
        actions: tuple[Action, ...] = (RemoveFinalizer(),) if has_finalizer else ()
        return Plan(actions=actions, rows=(), status=InferenceReplicaStatus())
    by_index: dict[int, list[PodView]] = defaultdict(list)
    strays: list[PodView] = []
    for pod in pods:
        (strays if pod.index < 0 else by_index[pod.index]).append(pod)
    instances = {i: tuple(sorted(group, key=lambda p: p.name)) for i, group in by_index.items()}
    flying = sorted(index for index, group in instances.items() if in_flight(group))
    waiting = sorted((i for i in instances if i not in flying), reverse=True)
    footprint = sum(len(group) for group in instances.values())
    budget = budget_of(settings.scale_down_pod_batch_size, footprint)
    if flying:
        started: tuple[int, ...] = ()
        deferred = tuple(waiting)
    else:
        queue = [Candidate(index, len(instances[index])) for index in waiting]
        batch, rest = take_batch(queue, budget)
        started = tuple(c.index for c in batch)
        deferred = tuple(c.index for c in rest)

    gates: list[SetServingGate] = []
    deletes: list[DeletePods] = []
    for index in sorted({*flying, *started}):
        state = operations.drain_state(instances[index])
        gates.extend(
            SetServingGate(
                index=index, pod=PodRef(pod.name, pod.uid), serving=False, reason=DRAIN_REASON
            )
            for pod in state.gate_off
        )
        if state.deletable:
            refs = tuple(PodRef(pod.name, pod.uid) for pod in state.live)
            deletes.append(DeletePods(index=index, operation_id="", pods=refs))
    for action in drain_orphans(strays):
        if isinstance(action, SetServingGate):
            gates.append(action)
        else:
            deletes.append(action)

    planned: list[Action] = [*gates, *deletes]
    if not pods and has_finalizer:
        planned.append(RemoveFinalizer())
    active = tuple(sorted({*flying, *started}))
    wave = (
        ScaleDownWave(
            configured_pod_budget=settings.scale_down_pod_batch_size,
            pod_budget=budget,
            pod_footprint=footprint,
            active_instances=active,
            deferred_instances=tuple(sorted(deferred)),
            started_instances=tuple(sorted(started)),
        )
        if active or deferred
        else None
    )
    requeue = settings.scale_down_requeue_interval if wave is not None else None
    return Plan(
        actions=tuple(planned),
        rows=(),
        status=InferenceReplicaStatus(),
        requeue_after=requeue,
        wave_log=wave,
    )


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def teardown_target(
    irep: Mapping[str, Any], pods: Sequence[Mapping[str, Any]], *, fleet: LifecycleConfig
) -> ReplicaTarget:
    """Who an unreadable, deleted InferenceReplica is, as far as its teardown's escalation
    and its events need: its identity and deletion from ``metadata``, its parent from the
    controller reference (an InferenceService), its component from the spec when that field
    reads as a name, else from its pods' ``component`` label, and the fleet's ``lifecycle``
    settings. It wants no Instance (``replicas`` 0, no runners): nothing is made from it."""
    meta = irep.get("metadata") or {}
    spec = irep.get("spec")
    spec = spec if isinstance(spec, Mapping) else {}
    name = _text(meta.get("name"))
    owner = controller_ref(irep, kind=KIND_INFERENCE_SERVICE)
    parent_ref = spec.get("parentRef")
    parent_name = _text(parent_ref.get("name")) if isinstance(parent_ref, Mapping) else ""
    parent: ParentRef | None = None
    if owner is not None and _text(owner.get("name")):
        parent = ParentRef(_text(owner.get("name")), _text(owner.get("uid")) or None)
    elif parent_name:
        parent = ParentRef(parent_name, None)
    component = _text(spec.get("component"))
    if not component:
        labelled = sorted(
            {
                _text(((pod.get("metadata") or {}).get("labels") or {}).get(LABEL_COMPONENT))
                for pod in pods
            }
            - {""}
        )
        component = labelled[0] if labelled else ""
    finalizers = meta.get("finalizers") or ()
    deleted_at: dt.datetime | None = api_time(meta.get("deletionTimestamp"))
    return ReplicaTarget(
        namespace=_text(meta.get("namespace")),
        name=name,
        uid=_text(meta.get("uid")),
        generation=0,
        isvc=parent.name if parent is not None else name,
        component=component,
        parent=parent,
        replicas=0,
        runners=(),
        update_revision="",
        deleting=meta.get("deletionTimestamp") is not None,
        deleted_at=deleted_at,
        orphaning=orphan_deletion(irep),
        has_finalizer=names.FINALIZER in finalizers,
        fleet=fleet,
    )


def escalate_from_pods(
    decided: Plan,
    *,
    target: ReplicaTarget,
    pods: Sequence[PodView],
    nodes: Mapping[str, NodeView] | None,
    memory: KeyMemory,
    now: dt.datetime,
) -> tuple[Plan, KeyMemory]:
    """``decided`` (a :func:`teardown_from_pods` plan) with the force deletes and the teardown
    deadline of :func:`.escalation.escalate`, judged from ``pods`` and their cached ``nodes``
    (None: no node cache) exactly as a readable replica's teardown is judged."""
    by_index: dict[int, list[PodView]] = defaultdict(list)
    strays: list[PodView] = []
    for pod in pods:
        (strays if pod.index < 0 else by_index[pod.index]).append(pod)
    observed = ObservedState(
        pods={index: tuple(group) for index, group in by_index.items()},
        stray_pods=tuple(strays),
        nodes=nodes,
    )
    return escalate(decided, target=target, observed=observed, memory=memory, now=now)


__all__ = [
    "DRAIN_REASON",
    "escalate_from_pods",
    "in_flight",
    "teardown_from_pods",
    "teardown_target",
]
