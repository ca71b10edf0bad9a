"""Create and Delete operations: scale-ups and scale-downs in batches of whole Instances.

Why: the two operations that change how many Instances exist share their batch rules
(:mod:`..batching`): whole Instances under a pod budget against the footprint, the next
batch only once the previous one is done. Every operation is recorded in the Instance's row
(:mod:`..operations`) in the pass that starts it, before its pods are created or deleted.

Create: ``CreatePods`` -> ``WaitReady`` -> done when the Instance is Ready; failed when a
pod's grace runs out (:mod:`..graces`) or at ``instanceReadyTimeout`` (the pods stay).
Delete: ``Drain`` -> ``DeletePods`` -> ``WaitPodsGone`` -> done when no pod is left; never
abandoned (an Instance wanted again meanwhile comes back as the next incarnation).

Invariants: a pod is deleted only when no pod of its Instance is routed (Ready not True and
gate not True on every live pod); no pod is created for an Instance the replica doesn't keep
(:func:`.migrate.wanted_indexes`: ``range(replicas)`` unless a migration left a gap) nor where a
pod of that name exists; a scale-down batch starts only when no Delete in flight still has a
pod; paused, nothing starts and no pod is written.
"""

from __future__ import annotations

import operator
from typing import Final

from omed.controllers.inferencereplica.core import graces, names, operations, steps
from omed.controllers.inferencereplica.core.actions import (
    ScaleDownWave,
    SetServingGate,
)
from omed.controllers.inferencereplica.core.batching import (
    Candidate,
    budget_of,
    delete_cost,
    take_batch,
)
from omed.controllers.inferencereplica.core.model import PodView
from omed.controllers.inferencereplica.core.names import OperationReason
from omed.controllers.inferencereplica.core.orphans import drain_orphans
from omed.controllers.inferencereplica.core.work import InstanceWork, PassWork

_PODS: Final = operator.attrgetter("facts.pods")
"""An Instance's pods (summed at C speed over every Instance)."""


def scale_down(work: PassWork, instances: list[InstanceWork]) -> ScaleDownWave | None:
    """Start this pass's Delete operations; describe the wave (None when none runs)."""
    in_flight = [inst for inst in instances if inst.op is not None and inst.op.type == "Delete"]
    victims = [
        inst
        for inst in instances
        if not inst.wanted and not operations.is_delete(inst.op) and inst.surge_of is None
    ]
    for inst in victims:
        if not inst.facts.pods:
            inst.keep = False  # nothing to drain: the row (and any Create) simply ends
    waiting = sorted((inst for inst in victims if inst.facts.pods), key=lambda inst: -inst.index)
    # Each Instance's delete_cost: its pods, or 1 for a Delete with none left (its cleanup).
    footprint = sum(map(len, map(_PODS, instances))) + sum(
        delete_cost(0, cleanup_running=True) for inst in in_flight if not inst.facts.pods
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
    reason = OperationReason.TEARDOWN if work.target.deleting else OperationReason.SCALE_DOWN
    for inst in waiting:
        if inst.index in started:
            inst.op = steps.start(
                work, inst, "Delete", names.STEP_DRAIN, reason=reason, target_revision=None
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


def drive_delete(work: PassWork, inst: InstanceWork) -> None:
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
        work,
        inst,
        operations.drain_state(pods),
        reason=names.GATE_DRAINING,
        operation_id=inst.op.id or "",
    )
    if work.act or step == names.STEP_WAIT_PODS_GONE:
        inst.op = operations.at_step(inst.op, step, work.now)


def drain_strays(work: PassWork, pods: tuple[PodView, ...]) -> None:
    for action in drain_orphans(pods):
        if isinstance(action, SetServingGate):
            work.gates.append(action)
        else:
            work.deletes.append(action)


def scale_up(work: PassWork, instances: list[InstanceWork], wanted: int) -> int:
    """Start this pass's creations; return how many Instances wait for a later batch."""
    target = work.target
    eligible = [
        inst
        for inst in instances
        if inst.facts.missing and inst.wanted and inst.keep and not operations.is_delete(inst.op)
    ]
    if not eligible:
        return 0
    if not work.act:
        return 0
    resumed = [
        inst
        for inst in eligible
        if operations.is_create(inst.op)
        and inst.op is not None
        and inst.op.step not in steps.RECREATE_DRAIN_STEPS
    ]
    fresh = [inst for inst in eligible if inst.op is None]
    footprint = max(sum(map(len, map(_PODS, instances))), wanted * target.pods_per_instance)
    budget = budget_of(work.settings.scale_up_pod_batch_size, footprint)
    queue = [Candidate(inst.index, len(inst.facts.missing)) for inst in resumed + fresh]
    batch, deferred = take_batch(queue, budget)
    chosen = {candidate.index for candidate in batch}
    for inst in resumed + fresh:
        if inst.index not in chosen:
            continue
        if inst.op is None:
            reason = OperationReason.PODS_MISSING if inst.facts.pods else OperationReason.SCALE_UP
            inst.op = steps.start(
                work,
                inst,
                "Create",
                names.STEP_CREATE_PODS,
                reason=reason,
                target_revision=target.update_revision,
            ).model_copy(update={"deadline": steps.deadline(work)})
        op_id = (inst.op.id if inst.op is not None else None) or ""
        steps.create(work, inst, op_id)
    return len(deferred)


def drive_create(work: PassWork, inst: InstanceWork) -> bool:
    """CreatePods -> WaitReady -> done; failed when a pod's grace runs out (:mod:`..graces`)
    or at instanceReadyTimeout (while not paused: a paused replica's Create fails when it
    resumes, its deadline having kept running); True when this pass failed it. A Create at a
    drain step (an automatic relocation's rebuild, :mod:`.relocate`) first drains and deletes
    the pods of the attempt that failed, then creates the next incarnation."""
    assert inst.op is not None
    if inst.op.step in steps.RECREATE_DRAIN_STEPS:
        if steps.recreate(work, inst):
            inst.op = None
        return False
    if inst.facts.ready:
        inst.op = None
        return False
    grace = graces.judge(work, inst.op, inst.facts.live, instance=inst.index)
    if grace is not None:
        inst.op = None  # the pods stay, as at the deadline; the row says which grace ran out
        inst.create_failed = graces.create_failure(grace, work.now)
        return True
    if work.act and steps.expired(work, inst, inst.index):
        inst.op = None  # the pods stay; the row and a condition say the Create failed
        inst.deadline_failed = True
        return True
    step = names.STEP_CREATE_PODS if inst.facts.missing else names.STEP_WAIT_READY
    inst.op = operations.at_step(inst.op, step, work.now)
    return False
