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
  fresh list); under ``propagationPolicy: Orphan`` nothing is drained and only that happens.

Pure: the same pods give the same plan, and a plan's effects, once seen on the pods, give
the next step (no state is kept between passes, none is needed).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from omed.api.inferencereplica import InferenceReplicaStatus
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
from omed.controllers.inferencereplica.core.model import PlanSettings, PodView
from omed.controllers.inferencereplica.core.orphans import drain_orphans

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


__all__ = ["DRAIN_REASON", "in_flight", "teardown_from_pods"]
