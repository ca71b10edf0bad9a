"""restartPolicy RecreateInstanceOnPodRestart: a restarted container rebuilds its Instance.

Why: multi-pod Instances (a leader and its workers) often can't survive one member's
restart; the policy asks for the whole Instance to be rebuilt as a new incarnation. A
``Restart`` operation runs the shared drain-and-recreate steps (:mod:`..steps`); at most
``repairBatchSize`` (default 1, a count or a percentage of ``replicas``) run at once. Only
Instances on the update revision are restarted: a stale one gets its Update instead. The
same operation repairs an Instance that crash-loops on a revision that did run (reason
CrashLoopRepair), whatever the restart policy. (What holds an operation, such as a pause,
is :mod:`..waiting`'s business.)

Parked repairs: when a repair's rebuilt pods fail again before the Instance is Ready, the
Restart stays in the row at a parked step (``names.PARKED_STEPS``) instead of rebuilding at
once: a crash loop waits for the retry ladder (``lifecycle.updateRetry``) to re-arm it
(``retryCount`` counts re-arms; the next one is due ``lastProgressAt`` + the ladder's delay),
or stays parked when every retry is spent or no ladder is configured; an image or
configuration failure waits in place for the kubelet. :func:`hold_message` words each hold
in the words users see in the event and in ``kubectl ome instance``.

Invariant: pure; a pod of a new incarnation starts with no restarts, so a rebuilt Instance
isn't rebuilt again until one of its containers restarts.
"""

from __future__ import annotations

import datetime as dt
import operator
from typing import Final

from omed.api.base import resolve_int_or_percent
from omed.api.inferencereplica import Operation
from omed.config import resolve_budget
from omed.controllers.inferencereplica.core import graces, names, operations, retry
from omed.controllers.inferencereplica.core.model import PodView
from omed.controllers.inferencereplica.core.names import OperationReason
from omed.controllers.inferencereplica.core.policy import RetryPolicy
from omed.controllers.inferencereplica.core.steps import (
    deadline,
    expired,
    on_revision,
    recreate,
    start,
)
from omed.controllers.inferencereplica.core.work import InstanceWork, PassWork

_INDEX: Final = operator.attrgetter("index")


def start_restarts(work: PassWork, instances: list[InstanceWork], *, ran: bool) -> None:
    """Rebuild Instances of the update revision whole, as new incarnations, at most
    ``repairBatchSize`` at once (the component's, else the ConfigMap's lifecycle entry's,
    else 1): parked repairs the retry ladder re-arms now
    first, then new ones: under RecreateInstanceOnPodRestart when a container restarted;
    always when a pod crash-loops on a revision that did run (one that never ran is the
    retry ladder's business, :mod:`..retry`). Parked repairs take no room."""
    target = work.target
    own = target.update.repair_batch_size
    if own is not None:
        limit = max(resolve_int_or_percent(own, total=target.replicas, round_up=True), 1)
    else:
        limit = resolve_budget(work.settings.repair_batch_size, target.replicas) or 1
    room = limit - sum(
        1
        for i in instances
        if i.op is not None and i.op.type == "Restart" and i.op.step not in names.PARKED_STEPS
    )
    ordered = sorted(instances, key=_INDEX)  # (neither loop adds an Instance or moves one)
    for inst in ordered:
        op = inst.op  # (rearm_due's first test, without the call)
        if (
            op is not None
            and op.type == "Restart"
            and room > 0
            and inst.keep
            and rearm_due(work, inst)
        ):
            room -= 1
            _rearm(work, inst)
    recreate_on_restart = target.update.recreate_on_restart
    for inst in ordered:
        if room <= 0:
            return
        if not (inst.wanted and inst.keep and inst.op is None):
            continue  # (checked again below, with the pods; first, as it is cheap)
        if not recreate_on_restart and not (ran and inst.facts.failing is not None):
            continue  # neither a restarted nor a crash-looping pod is looked for
        restarted = (
            [pod for pod in inst.facts.live if pod.restarts > 0]
            if target.update.recreate_on_restart
            else []
        )
        looping = (
            [pod for pod in inst.facts.live if _crash_looping(pod)]
            if ran and inst.facts.failing is not None  # a crash loop is a failing live pod
            else []
        )
        if not (inst.wanted and inst.keep and inst.op is None and (restarted or looping)):
            continue
        if inst.surge_of is not None or not on_revision(inst, target.update_revision):
            continue  # a stale Instance gets its Update instead
        room -= 1
        inst.op = start(
            work,
            inst,
            "Restart",
            names.STEP_DRAIN,
            reason=OperationReason.CRASH_LOOP if looping else OperationReason.POD_RESTARTED,
            target_revision=target.update_revision,
        ).model_copy(update={"deadline": deadline(work)})
        work.tell(
            names.EVENT_INSTANCE_RESTARTED,
            f"Recreating Instance {inst.index} of {target.component}: pod "
            + (
                f"{looping[0].name} crash-loops on {target.update_revision}, which ran"
                if looping
                else f"{restarted[0].name} restarted a container (RecreateInstanceOnPodRestart)"
            ),
        )
        drive_restart(work, inst)


def drive_restart(work: PassWork, inst: InstanceWork) -> None:
    """A Restart runs the RecreatePod steps; it ends when the new incarnation is Ready, or
    when a rebuilt pod's grace (:mod:`..graces`) or instanceReadyTimeout runs out first.
    When the rebuilt pods fail again before that, the repair is parked (:func:`_park`); a
    parked repair ends when the Instance gets Ready in place or is no longer on the update
    revision (an Update takes over)."""
    op = inst.op
    assert op is not None
    if op.step in names.PARKED_STEPS:
        _drive_parked(work, inst)
        return
    waiting = op.step in (names.STEP_CREATE_PODS, names.STEP_WAIT_READY)
    if waiting and not inst.facts.ready:
        rebuilt = [
            p
            for p in inst.facts.live
            if p.revision == work.target.update_revision
            and p.incarnation in (None, inst.incarnation)
        ]
        config = next((p for p in rebuilt if _config_failure(p)), None)
        crash = next((p for p in rebuilt if _crash_looping(p)), None)
        if config is not None or crash is not None:
            _park(work, inst, config=config is not None)
            return
        if graces.judge(work, op, rebuilt, instance=inst.index) is not None:
            inst.op = None  # stuck or unschedulable past its grace: ends as at the deadline
            return
    timed_out = waiting and not inst.facts.ready and expired(work, inst, inst.index)
    if timed_out or recreate(work, inst):
        inst.op = None


def hold_message(op: Operation | None) -> str | None:
    """What holds a parked repair, as the event and the row say it; None when not parked."""
    if op is None or op.type != "Restart":
        return None
    if op.step == names.STEP_REPAIR_PARKED:
        return "its repair is parked until the retry ladder re-arms it"
    if op.step == names.STEP_REPAIR_PARKED_CONFIG:
        return (
            "its repair is parked, waiting for the configuration or image the pod needs; "
            "the kubelet retries in place"
        )
    if op.step == names.STEP_REPAIR_PARKED_NO_LADDER:
        return (
            "its repair is parked and no retry ladder is configured to re-arm it; "
            "reset the Instance or publish a corrected revision"
        )
    if op.step == names.STEP_REPAIR_PARKED_SPENT:
        return (
            f"its repair is parked after {op.retry_count or 0} re-arm(s) with every retry "
            "spent; reset the Instance or publish a corrected revision"
        )
    return None


def rearm_at(op: Operation, ladder: RetryPolicy | None) -> dt.datetime | None:
    """When the ladder re-arms a repair parked at ``lastProgressAt``; None when it never
    does (not parked on the ladder, or no ladder)."""
    if op.step != names.STEP_REPAIR_PARKED or ladder is None or op.last_progress_at is None:
        return None
    delay = ladder.delay_after((op.retry_count or 0) + 1)
    return op.last_progress_at + dt.timedelta(seconds=delay)


def rearm_due(work: PassWork, inst: InstanceWork) -> bool:
    if not work.act or inst.op is None or inst.op.type != "Restart":
        return False
    when = rearm_at(inst.op, work.target.update.repair_retry)
    return when is not None and when <= work.now


def _park(work: PassWork, inst: InstanceWork, *, config: bool) -> None:
    op = inst.op
    assert op is not None
    ladder = work.target.update.repair_retry
    re_arms = op.retry_count or 0
    if config:
        step = names.STEP_REPAIR_PARKED_CONFIG
    elif ladder is None:
        step = names.STEP_REPAIR_PARKED_NO_LADDER
    elif re_arms >= ladder.max_attempts:
        step = names.STEP_REPAIR_PARKED_SPENT
    else:
        step = names.STEP_REPAIR_PARKED
    parked = operations.at_step(op, step, work.now).model_copy(update={"deadline": None})
    inst.op = parked
    failing = inst.facts.failing
    failure = failing.failure if failing is not None else None
    cause = (
        f"pod {failing.name} container {failure.container or '-'} stuck ({failure.reason})"
        if failing is not None and failure is not None
        else "its pods fail again"
    )
    work.warn(
        names.EVENT_REPAIR_PARKED,
        f"Instance {inst.index} of {work.target.component} failed again after "
        f"its rebuild ({cause}): {hold_message(parked)}",
    )
    _drive_parked(work, inst)


def _drive_parked(work: PassWork, inst: InstanceWork) -> None:
    op = inst.op
    assert op is not None
    if inst.facts.ready or not on_revision(inst, work.target.update_revision):
        inst.op = None  # recovered in place, or an Update (a corrected revision) takes over
        return
    if op.step == names.STEP_REPAIR_PARKED_CONFIG and not any(
        _config_failure(p) for p in inst.facts.live
    ):
        if any(_crash_looping(p) for p in inst.facts.live):
            _park(work, inst, config=False)  # the image or config came; now it crashes
        return
    when = rearm_at(op, work.target.update.repair_retry)
    if when is not None and when > work.now and work.act:
        work.requeue.append((when - work.now).total_seconds())


def _rearm(work: PassWork, inst: InstanceWork) -> None:
    """The ladder's next attempt: rebuild the Instance again (re-arm ``retryCount`` + 1)."""
    op = inst.op
    assert op is not None
    re_arms = (op.retry_count or 0) + 1
    ladder = work.target.update.repair_retry
    inst.op = operations.at_step(op, names.STEP_DRAIN, work.now).model_copy(
        update={"retry_count": re_arms, "deadline": deadline(work)}
    )
    work.tell(
        names.EVENT_INSTANCE_RESTARTED,
        f"Recreating Instance {inst.index} of {work.target.component}: the retry "
        f"ladder re-arms its parked repair ({re_arms} of "
        f"{ladder.max_attempts if ladder else 0})",
    )
    if recreate(work, inst):
        inst.op = None


def _config_failure(pod: PodView) -> bool:
    failure = pod.failure
    return (
        pod.failing
        and failure is not None
        and bool(failure.container)
        and failure.reason in retry.REVISION_FAILURES
    )


def _crash_looping(pod: PodView) -> bool:
    failure = pod.failure
    if not pod.failing or failure is None or not failure.container:
        return False
    return failure.reason == retry.CRASH_LOOP or failure.exit_code is not None
