"""restartPolicy RecreateInstanceOnPodRestart: a restarted container rebuilds its Instance.

Why: multi-pod Instances (a leader and its workers) often can't survive one member's
restart; the policy asks for the whole Instance to be rebuilt as a new incarnation. A
``Restart`` operation runs the shared drain-and-recreate steps (:mod:`.steps`); at most
``repairBatchSize`` (default 1, a count or a percentage of ``replicas``) run at once. Only
Instances on the update revision are restarted: a stale one gets its Update instead. The
same operation repairs an Instance that crash-loops on a revision that did run (reason
CrashLoopRepair), whatever the restart policy. While the replica is paused, in-flight
Update and Restart operations record ``waiting: Paused`` (and the row's last failure is
recorded under that token).

Invariant: pure; a pod of a new incarnation starts with no restarts, so a rebuilt Instance
isn't rebuilt again until one of its containers restarts.
"""

from __future__ import annotations

from omed.api.base import resolve_int_or_percent
from omed.controllers.inferencereplica import names, operations, retry
from omed.controllers.inferencereplica.actions import RecordEvent
from omed.controllers.inferencereplica.model import PodView
from omed.controllers.inferencereplica.passstate import InstanceWork, PassWork
from omed.controllers.inferencereplica.steps import deadline, expired, on_revision, recreate


def start_restarts(work: PassWork, instances: list[InstanceWork], *, ran: bool) -> None:
    """Rebuild Instances of the update revision whole, as new incarnations, at most
    ``repairBatchSize`` (default 1) at once: under RecreateInstanceOnPodRestart when a
    container restarted; always when a pod crash-loops on a revision that did run (one that
    never ran is the retry ladder's business, :mod:`.retry`)."""
    target = work.target
    batch = target.update.repair_batch_size
    limit = max(resolve_int_or_percent(batch or 1, total=target.replicas, round_up=True), 1)
    room = limit - sum(1 for i in instances if i.op is not None and i.op.type == "Restart")
    for inst in sorted(instances, key=lambda i: i.index):
        if room <= 0:
            return
        restarted = (
            [pod for pod in inst.facts.live if pod.restarts > 0]
            if target.update.recreate_on_restart
            else []
        )
        looping = [pod for pod in inst.facts.live if ran and _crash_looping(pod)]
        if not (inst.wanted and inst.keep and inst.op is None and (restarted or looping)):
            continue
        if inst.surge_of is not None or not on_revision(inst, target.update_revision):
            continue  # a stale Instance gets its Update instead
        room -= 1
        inst.op = operations.start(
            type="Restart",
            index=inst.index,
            incarnation=inst.incarnation,
            step=names.STEP_DRAIN,
            reason=names.OP_REASON_CRASH_LOOP if looping else names.OP_REASON_POD_RESTARTED,
            target_revision=target.update_revision,
            now=work.now,
        ).model_copy(update={"deadline": deadline(work)})
        work.events.append(
            RecordEvent(
                type="Normal",
                reason=names.EVENT_INSTANCE_RESTARTED,
                message=f"Recreating Instance {inst.index} of {target.component}: pod "
                + (
                    f"{looping[0].name} crash-loops on {target.update_revision}, which ran"
                    if looping
                    else f"{restarted[0].name} restarted a container (RecreateInstanceOnPodRestart)"
                ),
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


def _crash_looping(pod: PodView) -> bool:
    failure = pod.failure
    if not pod.failing or failure is None or not failure.container:
        return False
    return failure.reason == retry.CRASH_LOOP or failure.exit_code is not None


def mark_paused(work: PassWork, instances: list[InstanceWork]) -> None:
    """While paused, in-flight Update and Restart operations wait on the token Paused."""
    for inst in instances:
        op = inst.op
        if op is None or op.type not in ("Update", "Restart"):
            continue
        token = names.WAITING_PAUSED if not work.act else None
        if op.waiting != token and (token is not None or op.waiting == names.WAITING_PAUSED):
            inst.op = op.model_copy(update={"waiting": token})
