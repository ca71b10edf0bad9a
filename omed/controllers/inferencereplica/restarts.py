"""restartPolicy RecreateInstanceOnPodRestart: a restarted container rebuilds its Instance.

Why: multi-pod Instances (a leader and its workers) often can't survive one member's
restart; the policy asks for the whole Instance to be rebuilt as a new incarnation. A
``Restart`` operation runs the shared drain-and-recreate steps (:mod:`.steps`); at most
``repairBatchSize`` (default 1, a count or a percentage of ``replicas``) run at once. Only
Instances on the update revision are restarted: a stale one gets its Update instead.

Invariant: pure; a pod of a new incarnation starts with no restarts, so a rebuilt Instance
isn't rebuilt again until one of its containers restarts.
"""

from __future__ import annotations

from omed.api.base import resolve_int_or_percent
from omed.controllers.inferencereplica import names, operations
from omed.controllers.inferencereplica.actions import RecordEvent
from omed.controllers.inferencereplica.passstate import InstanceWork, PassWork
from omed.controllers.inferencereplica.steps import deadline, expired, on_revision, recreate


def start_restarts(work: PassWork, instances: list[InstanceWork]) -> None:
    """RecreateInstanceOnPodRestart: an Instance of the update revision whose container
    restarted is rebuilt whole, as a new incarnation; at most ``repairBatchSize`` (default
    1) at once."""
    target = work.target
    batch = target.update.repair_batch_size
    limit = max(resolve_int_or_percent(batch or 1, total=target.replicas, round_up=True), 1)
    room = limit - sum(1 for i in instances if i.op is not None and i.op.type == "Restart")
    for inst in sorted(instances, key=lambda i: i.index):
        if room <= 0:
            return
        restarted = [pod for pod in inst.facts.live if pod.restarts > 0]
        if not (inst.wanted and inst.keep and inst.op is None and restarted):
            continue
        if inst.surge_of is not None or not on_revision(inst, target.update_revision):
            continue  # a stale Instance gets its Update instead
        room -= 1
        inst.op = operations.start(
            type="Restart",
            index=inst.index,
            incarnation=inst.incarnation,
            step=names.STEP_DRAIN,
            reason=names.OP_REASON_POD_RESTARTED,
            target_revision=target.update_revision,
            now=work.now,
        ).model_copy(update={"deadline": deadline(work)})
        work.events.append(
            RecordEvent(
                type="Normal",
                reason=names.EVENT_INSTANCE_RESTARTED,
                message=f"Recreating Instance {inst.index} of {target.component}: pod "
                f"{restarted[0].name} restarted a container (RecreateInstanceOnPodRestart)",
            )
        )
        drive_restart(work, inst)


def drive_restart(work: PassWork, inst: InstanceWork) -> None:
    """A Restart runs the RecreatePod steps; it ends when the new incarnation is Ready, or
    when instanceReadyTimeout passes first."""
    op = inst.op
    assert op is not None
    waiting = op.step in (names.STEP_CREATE_PODS, names.STEP_WAIT_READY)
    timed_out = waiting and not inst.facts.ready and expired(work, inst, inst.index)
    if timed_out or recreate(work, inst):
        inst.op = None
