"""The InferenceReplica planner: (desired, observed, settings, now) -> actions and rows.

Why: this is where the product pages' rules live, so it is a pure function: no I/O, no
clock, no randomness. It is tested exhaustively and with hypothesis, in milliseconds, and
the executor does only what a :class:`Plan` says.

One pass, in order:

1. every Instance (wanted index, row or pod) gets its facts and its operation from the row;
2. the scale-down wave: Instances past ``replicas`` (all of them while the InferenceReplica
   is deleted) are drained and deleted in batches under ``scaleDownPodBatchSize``; a new
   batch starts only when no Delete is in flight (:mod:`.batching`);
3. Delete operations move on (:mod:`.operations`): gates False, then delete once nothing is
   routed, then wait for the pods to go;
4. the scale-up batch: wanted Instances with missing pods, resumed Creates first, whole
   Instances up to ``scaleUpPodBatchSize`` pods; each gets its Create operation in the rows;
5. Create operations move on; serving gates follow readiness (``readyPolicy``);
6. rows, summary, events; ``WriteStatus`` when anything changed.

Invariants (checked by the property tests):

* a pod is deleted only when the observed pod has Ready not True and its gate not True;
* no pod is created for an index >= ``replicas``, nor where a pod of that name exists;
* every pod action belongs to an operation present in ``Plan.rows``;
* planning again on the state a plan produced (its rows, same pods, same time) writes
  nothing and starts nothing new;
* a paused InferenceReplica gets no pod action (deletion overrides the pause: a deleted
  InferenceReplica must drain, or its finalizer would hold it forever);
* an InferenceReplica deleted with ``propagationPolicy: Orphan`` gets no pod action and no
  status write, only ``RemoveFinalizer``: its pods are to keep running as they are (the
  garbage collector takes their owner references off; a replica of the same name created
  again adopts them).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from typing import Final

from omed.api.base import Condition
from omed.api.inferencereplica import InferenceReplicaStatus, InstanceStatus, Operation
from omed.controllers.inferencereplica.core import names, operations, steps, waiting
from omed.controllers.inferencereplica.core.actions import (
    Action,
    AddFinalizer,
    CreatePods,
    DeletePods,
    Plan,
    PodRef,
    PodToCreate,
    RemoveFinalizer,
    ScaleDownWave,
    SetServingGate,
    WriteStatus,
)
from omed.controllers.inferencereplica.core.batching import (
    Candidate,
    budget_of,
    delete_cost,
    take_batch,
)
from omed.controllers.inferencereplica.core.model import (
    ObservedState,
    PlanSettings,
    PodView,
    ReplicaTarget,
)
from omed.controllers.inferencereplica.core.ops import update
from omed.controllers.inferencereplica.core.podtemplate import render_pod
from omed.controllers.inferencereplica.core.rows import (
    build_row,
    condition,
    instance_facts,
    next_available_in,
)
from omed.controllers.inferencereplica.core.status import status_body
from omed.controllers.inferencereplica.core.summary import summarize
from omed.controllers.inferencereplica.core.transitions import transition_events
from omed.controllers.inferencereplica.core.work import InstanceWork as _Instance
from omed.controllers.inferencereplica.core.work import PassWork as _Pass
from omed.controllers.refusals import CONDITION_WRITE_REFUSED


def plan(
    *, target: ReplicaTarget, observed: ObservedState, settings: PlanSettings, now: dt.datetime
) -> Plan:
    """Decide one pass for one InferenceReplica; see the module docstring."""
    if target.orphaning:
        return _let_go_of_orphaned(target, observed)
    wanted = 0 if target.deleting else target.replicas
    work = _Pass(target, settings, now, act=target.deleting or not target.paused)
    surges = update.surge_indexes({i: row.operation for i, row in observed.rows.items()})
    indexes = sorted(set(observed.rows) | set(observed.pods) | set(range(wanted)) | set(surges))
    instances = [_instance(target, observed, index, wanted) for index in indexes]
    for inst in instances:
        inst.surge_of = surges.get(inst.index)

    wave = _scale_down(work, instances)
    for inst in instances:
        if operations.is_delete(inst.op):
            _drive_delete(work, inst)
    if target.deleting and observed.stray_pods:
        _drain_strays(work, observed.stray_pods)
    deferred_up = _scale_up(work, instances, wanted)
    update.plan_updates(work, instances, observed.status)
    for inst in instances:
        if inst.keep and operations.is_create(inst.op):
            _drive_create(work, inst)
        if inst.keep and not operations.is_delete(inst.op) and not inst.draining and work.act:
            _serving_gates(work, inst)
    waiting.mark(work, instances, observed.refused)

    rows = tuple(
        build_row(
            target=target,
            facts=inst.facts,
            incarnation=inst.incarnation,
            op=inst.op,
            previous=inst.previous,
            now=now,
            deadline_failed=inst.deadline_failed,
            waiting_pod=inst.waiting_pod,
        )
        for inst in instances
        if inst.keep
    )
    by_index = {row.index: row for row in rows}
    for inst in instances:
        work.events.extend(
            transition_events(
                component=target.component,
                update_revision=target.update_revision,
                previous=inst.previous,
                row=by_index.get(inst.index),
                all_pods_exist=not inst.facts.missing,
            )
        )

    progress = _progress(target, instances, wave, deferred_up)
    if progress == names.PROGRESS_UPDATING and update.stalled(work, instances):
        progress = names.PROGRESS_UPDATE_BLOCKED
    facts = {inst.index: inst.facts for inst in instances}
    status = summarize(
        target=target,
        rows=rows,
        facts=facts,
        previous=observed.status,
        progress=progress,
        now=now,
    )
    conditions = [
        *work.conditions,
        *steps.create_deadline_condition(work, rows, observed.status),
        *_write_refused_condition(target, observed, now),
    ]
    status = status.model_copy(
        update={
            "retry_blocks": work.blocks or None,
            "conditions": [*(status.conditions or ()), *conditions],
        }
    )
    actions: list[Action] = []
    if not target.deleting and not target.has_finalizer:
        actions.append(AddFinalizer())
    if not _unchanged(status, rows, observed):
        # Gates need no record ahead of them (each pass sets them from the pods alone);
        # creations, deletions, image patches and a release do.
        recorded_ahead = bool(work.creates or work.patches or work.deletes or work.release)
        paceable = (
            not recorded_ahead
            # InstanceCreated is read off the stored rows, so a later write still reports it
            and all(event.reason == names.EVENT_INSTANCE_CREATED for event in work.events)
            and target.has_finalizer
            and only_observation_moved(observed.status, status, observed.rows, rows)
        )
        actions.append(WriteStatus(status=status, rows=rows, paceable=paceable))
        actions.extend(work.events)
    if work.release is not None:
        actions.append(work.release)
        actions.extend(work.release_events)
    actions.extend(work.gates)
    actions.extend(work.creates)
    actions.extend(work.patches)
    actions.extend(work.deletes)
    if _may_remove_finalizer(target, instances, observed):
        actions.append(RemoveFinalizer())

    if wave is not None and work.act and settings.scale_down_requeue_interval is not None:
        work.requeue.append(settings.scale_down_requeue_interval)
    if deferred_up and work.act:
        work.requeue.append(settings.scale_up_requeue_interval)
    pods = [pod for inst in instances for pod in inst.facts.pods]
    soon = next_available_in(pods, min_ready_seconds=target.min_ready_seconds, now=now)
    if soon is not None:
        work.requeue.append(soon)
    return Plan(
        actions=tuple(actions),
        rows=rows,
        status=status,
        requeue_after=min(work.requeue) if work.requeue else None,
        wave_log=wave,
    )


def _unchanged(
    status: InferenceReplicaStatus, rows: Sequence[InstanceStatus], observed: ObservedState
) -> bool:
    """Whether ``status`` and ``rows`` store as the observed ones do (the JSON compared).

    Row by row: an equal model stores as the same JSON, so only the rows whose models differ
    are serialized and compared (a pass on an unchanged fleet serializes none of its rows, nor
    the stored ones, which share their nested values)."""
    if status_body(status, ()) != status_body(observed.status, ()):
        return False
    before = observed.rows
    if len(rows) != len(before):
        return False
    for row in rows:
        old = before.get(row.index)
        if old is None:
            return False
        if old is not row and old != row and old.to_dict() != row.to_dict():
            return False
    return True


def _let_go_of_orphaned(target: ReplicaTarget, observed: ObservedState) -> Plan:
    """Deleted with ``propagationPolicy: Orphan``: the user asked for the pods to stay.

    Nothing is drained (a drain would race the collector, which takes the owner references
    off at once, and leave some pods gated off and unowned); the rows stay as stored; the
    finalizer goes, which the executor does only once a fresh list shows no pod still
    owned by this InferenceReplica, that is, once the collector has orphaned them all.
    """
    rows = tuple(sorted(observed.rows.values(), key=lambda row: row.index))
    actions: tuple[Action, ...] = (RemoveFinalizer(),) if target.has_finalizer else ()
    return Plan(actions=actions, rows=rows, status=observed.status)


def _instance(target: ReplicaTarget, observed: ObservedState, index: int, wanted: int) -> _Instance:
    previous = observed.rows.get(index)
    pods = observed.pods_of(index)
    if previous is not None and previous.incarnation:
        incarnation = previous.incarnation
    else:
        incarnation = max((pod.incarnation or 0 for pod in pods), default=0) or 1
    return _Instance(
        facts=instance_facts(target, index, pods),
        previous=previous,
        incarnation=incarnation,
        op=previous.operation if previous is not None else None,
        wanted=index < wanted,
    )


# -- scale-down -----------------------------------------------------------------------------


def _scale_down(work: _Pass, instances: list[_Instance]) -> ScaleDownWave | None:
    """Start this pass's Delete operations; describe the wave (None when none runs)."""
    in_flight = [inst for inst in instances if operations.is_delete(inst.op)]
    victims = [
        inst
        for inst in instances
        if not inst.wanted and not operations.is_delete(inst.op) and inst.surge_of is None
    ]
    for inst in victims:
        if not inst.facts.pods:
            inst.keep = False  # nothing to drain: the row (and any Create) simply ends
    waiting = sorted((inst for inst in victims if inst.facts.pods), key=lambda inst: -inst.index)
    footprint = sum(
        delete_cost(len(inst.facts.pods), cleanup_running=operations.is_delete(inst.op))
        for inst in instances
    )
    configured = work.settings.scale_down_pod_batch_size
    budget = budget_of(configured, footprint)
    # The next batch starts when the current one is done: when no Delete in flight has a
    # pod left. A Delete whose pods are gone ends in this pass (its cleanup, costing 1 in
    # the footprint), and the next batch starts in the same pass, recorded in one write.
    unfinished = [inst for inst in in_flight if inst.facts.pods]
    if work.act and not unfinished:
        queue = [Candidate(inst.index, len(inst.facts.pods)) for inst in waiting]
        batch, deferred = take_batch(queue, budget)
    else:
        batch, deferred = (), tuple(Candidate(inst.index, 0) for inst in waiting)
    started = {candidate.index for candidate in batch}
    reason = names.OP_REASON_TEARDOWN if work.target.deleting else names.OP_REASON_SCALE_DOWN
    for inst in waiting:
        if inst.index in started:
            inst.op = operations.start(
                type="Delete",
                index=inst.index,
                incarnation=inst.incarnation,
                step=names.STEP_DRAIN,
                reason=reason,
                target_revision=None,
                now=work.now,
            )
    active = tuple(sorted({inst.index for inst in in_flight} | started))
    if not active and not deferred:
        return None
    return ScaleDownWave(
        configured_pod_budget=configured,
        pod_budget=budget,
        pod_footprint=footprint,
        active_instances=active,
        deferred_instances=tuple(sorted(c.index for c in deferred)),
        started_instances=tuple(sorted(started)),
    )


def _drive_delete(work: _Pass, inst: _Instance) -> None:
    assert inst.op is not None
    pods = inst.facts.pods
    step = operations.delete_step(pods)
    if step is None:  # every pod is gone: the operation is done
        inst.op = None
        if inst.wanted:  # wanted again meanwhile: it comes back as a new incarnation
            inst.incarnation += 1
        else:
            inst.keep = False
        return
    steps.queue_drain(
        work, inst, operations.drain(pods), reason="Draining", operation_id=inst.op.id or ""
    )
    if work.act or step == names.STEP_WAIT_PODS_GONE:
        inst.op = operations.at_step(inst.op, step, work.now)


def _drain_strays(work: _Pass, pods: tuple[PodView, ...]) -> None:
    for action in drain_orphans(pods):
        if isinstance(action, SetServingGate):
            work.gates.append(action)
        else:
            work.deletes.append(action)


def drain_orphans(pods: Sequence[PodView]) -> tuple[SetServingGate | DeletePods, ...]:
    """Drain pods that no row owns, one by one: pods left by a deleted InferenceReplica, or
    a deleted InferenceReplica's pods without a usable index.

    Their state lives on the pods themselves: gate False first, delete once not routed.
    Such actions carry index -1 and no operation id.
    """
    actions: list[SetServingGate | DeletePods] = []
    for pod in pods:
        state = operations.drain([pod])
        ref = PodRef(pod.name, pod.uid)
        if state.gate_off:
            actions.append(SetServingGate(index=-1, pod=ref, serving=False, reason="Draining"))
        if state.deletable:
            actions.append(DeletePods(index=-1, operation_id="", pods=(ref,)))
    return tuple(actions)


# -- scale-up -------------------------------------------------------------------------------


def _scale_up(work: _Pass, instances: list[_Instance], wanted: int) -> int:
    """Start this pass's creations; return how many Instances wait for a later batch."""
    target = work.target
    eligible = [
        inst
        for inst in instances
        if inst.wanted and inst.keep and not operations.is_delete(inst.op) and inst.facts.missing
    ]
    if not eligible:
        return 0
    if not work.act:
        return 0
    resumed = [inst for inst in eligible if operations.is_create(inst.op)]
    fresh = [inst for inst in eligible if inst.op is None]
    footprint = max(
        sum(len(inst.facts.pods) for inst in instances), wanted * target.pods_per_instance
    )
    budget = budget_of(work.settings.scale_up_pod_batch_size, footprint)
    queue = [Candidate(inst.index, len(inst.facts.missing)) for inst in resumed + fresh]
    batch, deferred = take_batch(queue, budget)
    chosen = {candidate.index for candidate in batch}
    for inst in resumed + fresh:
        if inst.index not in chosen:
            continue
        if inst.op is None:
            inst.op = operations.start(
                type="Create",
                index=inst.index,
                incarnation=inst.incarnation,
                step=names.STEP_CREATE_PODS,
                reason=names.OP_REASON_PODS_MISSING
                if inst.facts.pods
                else names.OP_REASON_SCALE_UP,
                target_revision=target.update_revision,
                now=work.now,
            ).model_copy(update={"deadline": steps.deadline(work)})
        op_id = (inst.op.id if inst.op is not None else None) or ""
        work.creates.append(
            CreatePods(
                index=inst.index,
                operation_id=op_id,
                pods=tuple(
                    PodToCreate(
                        slot.name,
                        render_pod(
                            target,
                            index=inst.index,
                            incarnation=inst.incarnation,
                            slot=slot,
                            operation_id=op_id,
                        ),
                    )
                    for slot in inst.facts.missing
                ),
            )
        )
        inst.created_now = True
    return len(deferred)


def _drive_create(work: _Pass, inst: _Instance) -> None:
    """CreatePods -> WaitReady -> done; failed at instanceReadyTimeout (while not paused: a
    paused replica's Create fails when it resumes, its deadline having kept running)."""
    assert inst.op is not None
    if inst.facts.ready:
        inst.op = None
        return
    if work.act and steps.expired(work, inst, inst.index):
        inst.op = None  # the pods stay; the row and a condition say the Create failed
        inst.deadline_failed = True
        return
    step = names.STEP_CREATE_PODS if inst.facts.missing else names.STEP_WAIT_READY
    inst.op = operations.at_step(inst.op, step, work.now)


def _serving_gates(work: _Pass, inst: _Instance) -> None:
    """Gates follow readiness: True when the pod may serve, False when it may not."""
    live = inst.facts.live
    if work.target.ready_policy == "AllPodReady":
        whole = inst.facts.complete and all(pod.containers_ready for pod in live)

        def may_serve(pod: PodView) -> bool:
            return whole
    else:

        def may_serve(pod: PodView) -> bool:
            return pod.containers_ready

    for pod in live:
        serve = may_serve(pod)
        if serve and pod.serving is not True:
            reason = "InstanceReady"
        elif not serve and pod.serving is True:
            reason = "InstanceNotReady"
        else:
            continue
        work.gates.append(
            SetServingGate(
                index=inst.index, pod=PodRef(pod.name, pod.uid), serving=serve, reason=reason
            )
        )


# -- status and events ----------------------------------------------------------------------


def _progress(
    target: ReplicaTarget,
    instances: list[_Instance],
    wave: ScaleDownWave | None,
    deferred_up: int,
) -> str:
    """The Progressing reason for the state this pass leaves behind."""
    if target.deleting:
        return names.PROGRESS_TERMINATING
    if target.paused:
        return names.PROGRESS_PAUSED
    kept = [inst for inst in instances if inst.keep]
    if (wave is not None and wave.deferred_instances) or any(
        operations.is_delete(inst.op) for inst in kept
    ):
        return names.PROGRESS_SCALING_DOWN
    if deferred_up or any(operations.is_create(inst.op) for inst in kept):
        return names.PROGRESS_SCALING_UP
    if any(inst.op is not None and inst.op.type == "Update" for inst in kept) or any(
        inst.wanted and any(p.revision != target.update_revision for p in inst.facts.live)
        for inst in kept
    ):
        return names.PROGRESS_UPDATING
    if any(inst.wanted and not inst.facts.ready for inst in kept):
        return names.PROGRESS_WAITING
    return names.PROGRESS_COMPLETE


def _write_refused_condition(
    target: ReplicaTarget, observed: ObservedState, now: dt.datetime
) -> list[Condition]:
    """WriteRefused True while the controller remembers a refused write (its reason the API
    server's, its message the event's; its transition time kept while it stays); nothing
    once it doesn't, which removes the condition."""
    refusal = observed.write_refused
    if refusal is None:
        return []
    return [
        condition(
            observed.status.conditions,
            type=CONDITION_WRITE_REFUSED,
            status="True",
            reason=refusal.condition_reason,
            message=refusal.message(),
            now=now,
            generation=target.generation,
        )
    ]


def _may_remove_finalizer(
    target: ReplicaTarget, instances: list[_Instance], observed: ObservedState
) -> bool:
    if not target.deleting or not target.has_finalizer:
        return False
    if observed.stray_pods:
        return False
    return not any(inst.keep or inst.facts.pods for inst in instances)


_READINESS_FIELDS: Final = (
    "observed_generation",
    "ready_replicas",
    "available_replicas",
    "serving_replicas",
    "current_revision",
    "update_revision",
    "retry_blocks",
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
