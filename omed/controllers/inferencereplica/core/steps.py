"""The steps Update and Restart operations share: drain, delete, recreate, deadlines.

Why: SurgeThenDrain, RecreatePod and RecreateInstanceOnPodRestart all drain an Instance
(gates False, delete once unrouted, wait until gone) and rebuild it under its own index as
a new incarnation; they differ only in what comes before and after. These functions are
those shared steps.

Invariants: pure (``now`` comes from the pass); the incarnation is bumped only in the pass
that observes every old pod gone, and the row records it (step CreatePods) before the new
pods are created, so a restarted manager neither skips nor repeats an incarnation.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from omed.api.inferencereplica import (
    Operation,
    OperationType,
)
from omed.controllers.inferencereplica.core import names, operations, podgroups
from omed.controllers.inferencereplica.core.actions import (
    CreatePods,
    DeletePods,
    PodRef,
    PodToCreate,
    SetServingGate,
)
from omed.controllers.inferencereplica.core.model import PodSlot
from omed.controllers.inferencereplica.core.ops.migratepods import with_overlay
from omed.controllers.inferencereplica.core.podtemplate import render_pod
from omed.controllers.inferencereplica.core.work import InstanceWork, PassWork

_RECREATE_DRAIN = (names.STEP_DRAIN, names.STEP_DELETE_PODS, names.STEP_WAIT_PODS_GONE)
RECREATE_DRAIN_STEPS = frozenset(_RECREATE_DRAIN)
"""The steps of a rebuild before its new incarnation's pods are created."""


def recreate(work: PassWork, inst: InstanceWork) -> bool:
    """The RecreatePod steps; True once the Instance is Ready on the update revision.

    The WaitReady of an in-place Update ends here too: Ready alone isn't enough there (the
    old containers stay Ready until the kubelet stops them), so every container must also
    run the image its spec names (:func:`ready_on`)."""
    op = inst.op
    assert op is not None
    step = op.step
    if step in _RECREATE_DRAIN:
        inst.draining = True
        if not drain(work, inst, op):
            return False
        if not work.act:
            return False
        inst.incarnation += 1
        inst.draining = False
        inst.op = op = operations.at_step(op, names.STEP_CREATE_PODS, work.now).model_copy(
            update={"deadline": deadline(work)}
        )
        step = op.step
    if step == names.STEP_CREATE_PODS and inst.facts.missing:
        if inst.facts.pods and not on_revision(inst, work.target.update_revision):
            return False  # pods of the earlier incarnation still shown: wait for the cache
        create(work, inst, op.id or "")
        return False
    inst.op = operations.at_step(op, names.STEP_WAIT_READY, work.now)
    return ready_on(inst, work.target.update_revision)


def drain(work: PassWork, inst: InstanceWork, op: Operation) -> bool:
    """Gates False, delete once unrouted; True when no pod of ``inst`` is left."""
    pods = inst.facts.pods
    step = operations.delete_step(pods)
    if step is None:
        return True
    if inst.surge_of is None and inst.op is not None:
        inst.op = operations.at_step(inst.op, step, work.now)
    queue_drain(
        work,
        inst,
        operations.drain_state(pods),
        reason=names.GATE_UPDATING,
        operation_id=op.id or "",
    )
    return False


def queue_drain(
    work: PassWork,
    inst: InstanceWork,
    state: operations.Drain,
    *,
    reason: str,
    operation_id: str,
) -> None:
    """Gate off the pods that still serve; delete the live pods once none is routed."""
    if not work.act:
        return
    for pod in state.gate_off:
        work.gates.append(
            SetServingGate(
                index=inst.index, pod=PodRef(pod.name, pod.uid), serving=False, reason=reason
            )
        )
    if state.deletable:
        work.deletes.append(
            DeletePods(
                index=inst.index,
                operation_id=operation_id,
                pods=tuple(PodRef(pod.name, pod.uid) for pod in state.live),
                service=names.traffic_service(work.target.isvc, work.target.component)
                if inst.facts.service_routes
                else None,
            )
        )


def start(
    work: PassWork,
    inst: InstanceWork,
    type: OperationType,
    step: str,
    *,
    reason: names.OperationReason,
    target_revision: str | None,
) -> Operation:
    """A new operation of ``type`` on ``inst``'s current incarnation, at ``step``, started now."""
    return operations.start(
        type=type,
        index=inst.index,
        incarnation=inst.incarnation,
        step=step,
        reason=reason,
        target_revision=target_revision,
        now=work.now,
    )


def create(work: PassWork, inst: InstanceWork, op_id: str) -> None:
    if not work.act or not inst.facts.missing:
        return
    if not podgroups.admits(work, inst):
        return  # a gang's pods wait for the cache to show its PodGroup
    work.creates.append(
        CreatePods(
            index=inst.index,
            operation_id=op_id,
            pods=tuple(
                PodToCreate(slot.name, _kept_off(work, inst, slot, op_id))
                for slot in inst.facts.missing
            ),
        )
    )
    inst.created_now = True


def _kept_off(work: PassWork, inst: InstanceWork, slot: PodSlot, op_id: str) -> dict[str, Any]:
    """The pod of ``slot``, kept off the nodes an automatic relocation excludes, if any."""
    pod = render_pod(
        work.target, index=inst.index, incarnation=inst.incarnation, slot=slot, operation_id=op_id
    )
    avoid = work.excluded.get(inst.index, ())
    return with_overlay(pod, from_node=None, hints=(), exclude=avoid) if avoid else pod


def deadline(work: PassWork) -> dt.datetime | None:
    timeout = work.target.update.ready_timeout
    return None if timeout is None else work.now + dt.timedelta(seconds=timeout)


def expired(work: PassWork, inst: InstanceWork, waiting_on: int) -> bool:
    """The Update's deadline passed with Instance ``waiting_on`` not Ready (a Warning event);
    else a requeue at the deadline."""
    op = inst.op
    if op is None or op.deadline is None:
        return False
    left = (op.deadline - work.now).total_seconds()
    if left > 0:
        work.requeue.append(left)
        return False
    work.warn(
        names.EVENT_PROGRESS_DEADLINE,
        f"Instance {waiting_on} of {work.target.component} was not Ready within "
        f"instanceReadyTimeout ({work.target.update.ready_timeout:g}s) on "
        f"{work.target.update_revision}; its {op.type} operation failed",
    )
    return True


def ready_on(inst: InstanceWork, revision: str) -> bool:
    """The Instance is in rotation on ``revision``, its containers running their spec's
    images: what an Update waits for before it moves on (to drain a surge, or to the next
    Instance)."""
    return inst.facts.in_rotation and inst.facts.runs_spec_images and on_revision(inst, revision)


def on_revision(inst: InstanceWork, revision: str) -> bool:
    """Live pods, all on ``revision``."""
    return inst.facts.all_on(revision)
