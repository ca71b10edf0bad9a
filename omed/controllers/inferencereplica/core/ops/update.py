"""Updates: moving Instances to the update revision, one durable Update operation each.

Why: a pod template change makes a new revision; every Instance must end up on it without
serving capacity dipping more than the strategy allows, and a manager that dies between
any two steps must resume, not repeat. Each Instance's move is an ``Update`` operation in
its row, recorded before its first side effect and re-derived from the pods every pass.

Which Instances move, per pass (nothing while paused or deleted):

* an Instance is *stale* when a live pod runs another revision; one whose pods all run the
  update revision but fail because of it (see :mod:`..retry`) gets another attempt when its
  retry block allows (or when no block exists, after a release);
* Instances with an index below ``rollingUpdate.partition`` stay where they are;
* not-Ready Instances go first (they serve nothing), then the highest index first;
* SurgeThenDrain: at most ``maxSurge`` (default 1, at least 1) Updates in flight, each
  holding one surge Instance; the others: Ready Instances start only while fewer than
  ``maxUnavailable`` (default 1) wanted Instances are unavailable;
* a retry block of the update revision in Backoff (not due) or Held stops new Updates; a
  due block starts exactly one attempt (RetryInProgress).

Strategies (steps are names in :mod:`..names`):

* RecreatePod: Drain -> DeletePods -> WaitPodsGone -> CreatePods (a new incarnation on the
  update revision) -> WaitReady -> done;
* SurgeThenDrain: SurgeCreate (a surge Instance at a fresh index, ``surgeIndex``, on the
  update revision) -> SurgeWaitReady -> the RecreatePod steps on the Instance itself ->
  SurgeDrain (the surge drains and goes) -> done. *omed*: Instance indexes are stable
  identities (pod names derive from them), so the surge is a stand-in: it serves while the
  Instance drains and is rebuilt under its own index, and leaves after. Serving capacity
  never drops below the wanted count. A surge that fails on the revision drains
  (SurgeAbort) and the Instance keeps serving the old revision;
* InPlaceIfPossible: when only container images differ (the current templates with the
  pods' images hash to the pods' revision), PatchImages (images and revision label, pod
  names kept; the kubelet restarts the containers) -> WaitReady, which ends once every
  container's status reports its new image and the pods are Ready (the old containers
  are Ready until the kubelet stops them); otherwise RecreatePod. The Instance counts as
  unavailable in the maxUnavailable budget from its patch until then;
* InPlaceOnly: in place, or no Update at all and condition UpdateBlocked
  (InPlaceUpdateImpossible) on the InferenceReplica.

An attempt fails when its pods on the revision fail for a revision cause, when a pod of it
stays stuck or unschedulable past its grace (:mod:`..graces`), or at instanceReadyTimeout:
the operation ends and the revision's retry block moves up the ladder (:mod:`..retry`).

Invariants: pure (``now`` is injected); every pod action belongs to an operation stored in
this pass's rows; a surge index is recorded in the row before any of its pods is created.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from omed.api.base import resolve_int_or_percent
from omed.api.inferencereplica import InferenceReplicaStatus, Operation, RetryBlock
from omed.controllers.inferencereplica.core import (
    graces,
    names,
    operations,
    retry,
    retryreport,
    steps,
)
from omed.controllers.inferencereplica.core.inplace import in_place_patches
from omed.controllers.inferencereplica.core.model import PodView, ReplicaTarget
from omed.controllers.inferencereplica.core.ops import restart
from omed.controllers.inferencereplica.core.rows import instance_facts
from omed.controllers.inferencereplica.core.work import InstanceWork, PassWork


def surge_indexes(ops: Mapping[int, Operation | None]) -> dict[int, int]:
    """surge index -> index of the Instance whose Update holds it."""
    return {
        op.surge_index: index
        for index, op in ops.items()
        if op is not None and op.type == "Update" and op.surge_index is not None
    }


Relocator = Callable[[InstanceWork, tuple[PodView, ...], str], bool]
"""Relocate an Instance whose Update attempt failed with these live pods on this revision
(:mod:`.relocate`); True when it did (its operation is then the rebuild at its drain step)."""


def plan_updates(
    work: PassWork,
    instances: list[InstanceWork],
    previous: InferenceReplicaStatus,
    *,
    relocator: Relocator | None = None,
) -> None:
    """Drive the Updates in flight, keep the retry blocks, start new Updates. An attempt
    that fails on the Instance's own pods is offered to ``relocator`` first: a relocated
    attempt charges no retry block (the node, not the revision, is the suspect)."""
    target = work.target
    revision = target.update_revision
    sorted_out = retry.sort_out(
        previous.retry_blocks, update_revision=revision, release=_release(target), now=work.now
    )
    retryreport.release(work, sorted_out.released)
    if sorted_out.bad is not None:
        retryreport.report_malformed(work, sorted_out.bad)
    block = sorted_out.current
    ran = _revision_ran(instances, revision)
    by_index = {inst.index: inst for inst in instances}

    failure: str | None = None
    for inst in list(instances):
        if inst.keep and inst.op is not None and inst.op.type == "Restart":
            restart.drive_restart(work, inst)
        elif inst.keep and inst.op is not None and inst.op.type == "Update":
            fleet = _Fleet(by_index, instances, relocator)
            failure = _drive(work, inst, fleet, ran=ran) or failure
    if failure is not None:
        block = retry.failed(
            block, revision=revision, reason=failure, policy=target.update.retry, now=work.now
        )
        work.warn(
            names.EVENT_UPDATE_FAILED,
            f"update of {target.component} to {revision} failed: retry block "
            f"{retry.describe(block)}",
        )
    elif block is not None and block.state != "Held" and _ready_since(instances, block):
        block = None  # an Instance became Ready on the revision after it failed: done

    if sorted_out.bad is None and work.act and not target.deleting:
        block = _start(work, instances, by_index, block, ran=ran)
    if work.act and not target.deleting:
        restart.start_restarts(work, instances, ran=ran)
    if sorted_out.bad is not None:
        work.blocks = list(sorted_out.kept)
    else:
        work.blocks = [block] if block is not None else []
    retryreport.block_condition(work, block)


def stalled(work: PassWork, instances: list[InstanceWork]) -> bool:
    """Nothing moves and nothing will by itself: no operation in flight, and the update is
    blocked by a Held revision or an impossible in-place update."""
    if any(inst.keep and inst.op is not None for inst in instances):
        return False
    return any(
        c.type == names.CONDITION_UPDATE_BLOCKED
        and c.reason in (names.BLOCKED_REVISION_HELD, names.BLOCKED_IN_PLACE_IMPOSSIBLE)
        for c in work.conditions
    )


# -- starting ---------------------------------------------------------------------------------


def _start(
    work: PassWork,
    instances: list[InstanceWork],
    by_index: dict[int, InstanceWork],
    block: RetryBlock | None,
    *,
    ran: bool,
) -> RetryBlock | None:
    target = work.target
    policy = target.update
    revision = target.update_revision
    in_flight = [i for i in instances if i.keep and i.op is not None and i.op.type == "Update"]
    if block is not None and block.state == "Held":
        return block
    if block is not None and block.state == "Backoff" and not retry.due(block, work.now):
        if block.next_retry_at is not None:
            work.requeue.append(max((block.next_retry_at - work.now).total_seconds(), 0.1))
        return block
    only = frozenset((revision,))  # a live pod off it: the facts' any_off, without the call
    partition = policy.partition
    candidates = [
        inst
        for inst in instances
        if inst.wanted
        and inst.keep
        and inst.op is None
        and inst.surge_of is None
        and not inst.created_now
        and inst.index >= partition
        and inst.facts.live
        and (
            inst.facts.revisions != only  # _stale (live pods, so revisions aren't empty)
            or (inst.facts.failing is not None and _failed_on(inst, revision, ran=ran))
        )
    ]
    candidates.sort(key=lambda inst: (_serving(inst), -inst.index))
    if block is not None:  # a due Backoff, or an attempt whose operation is gone
        if in_flight or not candidates:
            return block
        if block.state == "Backoff":
            block = retry.retrying(block)
        candidates = candidates[:1]
    chosen = _within_budget(work, instances, candidates, in_flight)
    for inst in chosen:
        _begin(work, inst, instances, by_index, retrying=block is not None)
    return block


def _within_budget(
    work: PassWork,
    instances: list[InstanceWork],
    candidates: list[InstanceWork],
    in_flight: list[InstanceWork],
) -> list[InstanceWork]:
    policy = work.target.update
    replicas = work.target.replicas
    if policy.strategy == "SurgeThenDrain":
        surge = resolve_int_or_percent(
            policy.max_surge if policy.max_surge is not None else 1, total=replicas, round_up=True
        )
        room = max(surge, 1) - len(in_flight)
        return candidates[: max(room, 0)]
    limit = resolve_int_or_percent(
        policy.max_unavailable if policy.max_unavailable is not None else 1,
        total=replicas,
        round_up=False,
    )
    unavailable = sum(  # an in-place Instance counts from its patch until its containers
        1  # run the new images and are Ready (its Update ends only then)
        for inst in instances
        if inst.wanted and inst.keep and (not _serving(inst) or inst.op is not None)
    )
    room = max(limit, 1) - unavailable
    chosen = []
    for inst in candidates:
        if not _serving(inst):
            chosen.append(inst)  # serves nothing now: updating it costs no capacity
        elif room > 0:
            chosen.append(inst)
            room -= 1
    return chosen


def _begin(
    work: PassWork,
    inst: InstanceWork,
    instances: list[InstanceWork],
    by_index: dict[int, InstanceWork],
    *,
    retrying: bool,
) -> None:
    target = work.target
    strategy = target.update.strategy
    step = names.STEP_DRAIN
    surge: int | None = None
    if strategy in ("InPlaceIfPossible", "InPlaceOnly"):
        if in_place_patches(target, inst, operation_id="") is not None:
            step = names.STEP_PATCH_IMAGES
        elif strategy == "InPlaceOnly":
            if any(c.type == names.CONDITION_UPDATE_BLOCKED for c in work.conditions):
                return
            work.flag(
                names.CONDITION_UPDATE_BLOCKED,
                reason=names.BLOCKED_IN_PLACE_IMPOSSIBLE,
                message=f"Instance {inst.index} can't move to {target.update_revision} in "
                "place: the pod template changed beyond container images "
                "(updateStrategy InPlaceOnly)",
            )
            return
    elif strategy == "SurgeThenDrain":
        surge = max([*by_index, target.replicas - 1]) + 1
        step = names.STEP_SURGE_CREATE
    op = steps.start(
        work,
        inst,
        "Update",
        step,
        reason=names.OperationReason.RETRY if retrying else names.OperationReason.REVISION_CHANGED,
        target_revision=target.update_revision,
    )
    inst.op = op.model_copy(update={"surge_index": surge, "deadline": steps.deadline(work)})
    if surge is not None:
        stand_in = InstanceWork(
            facts=instance_facts(target, surge, ()),
            previous=None,
            incarnation=1,
            op=None,
            wanted=False,
            surge_of=inst.index,
        )
        instances.append(stand_in)
        by_index[surge] = stand_in
    running = inst.previous.running_revision if inst.previous is not None else None
    work.tell(
        names.EVENT_UPDATE_STARTED,
        f"Updating Instance {inst.index} of {target.component} from "
        f"{running or '-'} to {target.update_revision} ({strategy})",
    )
    _drive(work, inst, _Fleet(by_index, instances, None), ran=False)


# -- driving ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Fleet:
    """Every Instance of the pass, and by index (a surge looks up the Instance it serves);
    the pass's relocation of a failed attempt, if it has one."""

    by_index: dict[int, InstanceWork]
    instances: list[InstanceWork]
    relocator: Relocator | None


def _drive(work: PassWork, inst: InstanceWork, fleet: _Fleet, *, ran: bool) -> str | None:
    """Move one Update on; return the revision failure that ended its attempt, if any."""
    op = inst.op
    assert op is not None
    revision = op.target_revision or work.target.update_revision
    if op.surge_index is not None:
        return _drive_surge(work, inst, fleet, ran=ran)
    if op.step == names.STEP_PATCH_IMAGES:
        patches = in_place_patches(work.target, inst, operation_id=op.id or "")
        if patches:
            if work.act:
                work.patches.extend(patches)
            return None
        if patches is None and not steps.on_revision(
            inst, revision
        ):  # no longer possible: recreate
            inst.op = op = operations.at_step(op, names.STEP_DRAIN, work.now)
    waiting = op.step in (names.STEP_CREATE_PODS, names.STEP_WAIT_READY)
    failure = _attempt_failure(work, op, inst, of=inst, revision=revision, ran=ran, waiting=waiting)
    if failure is not None and waiting:
        if _relocated(fleet, inst, revision, ran=ran):
            return None
        inst.op = None
        return failure
    if op.step == names.STEP_PATCH_IMAGES:
        inst.op = operations.at_step(op, names.STEP_WAIT_READY, work.now)
    if steps.recreate(work, inst):
        _completed(work, inst)
    return None


def _drive_surge(work: PassWork, inst: InstanceWork, fleet: _Fleet, *, ran: bool) -> str | None:
    op = inst.op
    assert op is not None and op.surge_index is not None
    target = work.target
    revision = op.target_revision or target.update_revision
    surge = fleet.by_index.get(op.surge_index)
    if surge is None:
        surge = InstanceWork(
            facts=instance_facts(target, op.surge_index, ()),
            previous=None,
            incarnation=1,
            op=None,
            wanted=False,
            surge_of=inst.index,
        )
        fleet.instances.append(surge)
        fleet.by_index[op.surge_index] = surge
    step = op.step
    failure: str | None = None
    if step in (names.STEP_SURGE_CREATE, names.STEP_SURGE_WAIT_READY):
        waiting = not surge.facts.ready
        failure = _attempt_failure(
            work, op, surge, of=inst, revision=revision, ran=ran, waiting=waiting
        )
        if failure is not None:
            step = names.STEP_SURGE_ABORT
        elif surge.facts.missing:
            steps.create(work, surge, op.id or "")
            inst.op = operations.at_step(op, names.STEP_SURGE_CREATE, work.now)
            return None
        elif not surge.facts.in_rotation:
            inst.op = operations.at_step(op, names.STEP_SURGE_WAIT_READY, work.now)
            return None
        else:
            step = names.STEP_DRAIN
            inst.op = operations.at_step(op, step, work.now)
    if step not in (names.STEP_SURGE_ABORT, names.STEP_SURGE_DRAIN):
        if step in (names.STEP_CREATE_PODS, names.STEP_WAIT_READY):
            waiting = not inst.facts.ready
            failure = _attempt_failure(
                work, op, inst, of=inst, revision=revision, ran=ran, waiting=waiting
            )
            if failure is not None and _relocated(fleet, inst, revision, ran=ran):
                return None  # the surge serves on while the Instance is rebuilt elsewhere
        if failure is None and not steps.recreate(work, inst):
            return None
        step = names.STEP_SURGE_DRAIN
    assert inst.op is not None
    inst.op = operations.at_step(inst.op, step, work.now)
    surge.draining = True
    if steps.drain(work, surge, inst.op):
        surge.keep = False
        if step == names.STEP_SURGE_ABORT:
            inst.op = None
        else:
            _completed(work, inst)
    return failure


def _relocated(fleet: _Fleet, inst: InstanceWork, revision: str, *, ran: bool) -> bool:
    """The attempt on the Instance's own pods, disposed by a grace or at its deadline (not by
    a failure that blames the revision), was relocated (the relocator's rules)."""
    live = inst.facts.live
    if fleet.relocator is None or retry.revision_failure(live, revision=revision, revision_ran=ran):
        return False
    return fleet.relocator(inst, live, revision)


def _attempt_failure(
    work: PassWork,
    op: Operation,
    member: InstanceWork,
    *,
    of: InstanceWork,
    revision: str,
    ran: bool,
    waiting: bool,
) -> str | None:
    """Why the Update ``op``'s attempt on ``member`` (the Instance ``of`` itself or its surge)
    failed, the ladder's reason: its pods failed on the revision, or, while it waits for
    them, a grace ran out on them or ``of``'s deadline for ``member`` passed; None while the
    attempt may go on."""
    failure = retry.revision_failure(member.facts.live, revision=revision, revision_ran=ran)
    if failure is None and waiting:
        failure = _grace(work, op, member, revision)
    if failure is None and waiting and steps.expired(work, of, member.index):
        failure = names.REASON_PROGRESS_DEADLINE
    return failure


def _grace(work: PassWork, op: Operation, member: InstanceWork, revision: str) -> str | None:
    """The cause (the ladder's reason) when a grace ran out on ``member``'s pods on the
    Update's revision: ``member`` is the Instance itself or its surge."""
    own = graces.on_revision(member.facts.pods, revision)
    failure = graces.judge(work, op, own, instance=member.index)
    return failure.cause if failure is not None else None


def _completed(work: PassWork, inst: InstanceWork) -> None:
    inst.op = None
    work.tell(
        names.EVENT_UPDATE_COMPLETED,
        f"Instance {inst.index} of {work.target.component} runs "
        f"{work.target.update_revision}: incarnation {inst.incarnation}",
    )


# -- facts and status -------------------------------------------------------------------------


def _serving(inst: InstanceWork) -> bool:
    """Ready, on the containers its spec names (not on old ones about to be restarted)."""
    return inst.facts.ready and inst.facts.runs_spec_images


def _stale(inst: InstanceWork, revision: str) -> bool:
    return inst.facts.any_off(revision)


def _failed_on(inst: InstanceWork, revision: str, *, ran: bool) -> bool:
    pods: tuple[PodView, ...] = inst.facts.live
    # A revision failure is a live pod's failure: none without a failing live pod.
    return (
        inst.facts.failing is not None
        and steps.on_revision(inst, revision)
        and (retry.revision_failure(pods, revision=revision, revision_ran=ran) is not None)
    )


def _ready_since(instances: list[InstanceWork], block: RetryBlock) -> bool:
    """An Instance is Ready on the block's revision, and became so after its last failure."""
    for inst in instances:
        if not steps.ready_on(inst, block.target_revision):
            continue
        times = [pod.ready_since for pod in inst.facts.live if pod.ready_since is not None]
        if block.last_failure_at is None or (times and max(times) > block.last_failure_at):
            return True
    return False


def _revision_ran(instances: list[InstanceWork], revision: str) -> bool:
    return any(
        (inst.previous is not None and inst.previous.running_revision == revision)
        or steps.ready_on(inst, revision)
        for inst in instances
    )


def _release(target: ReplicaTarget) -> str | None:
    """The release annotation's revision; the legacy name of the current templates (set by a
    user who read it off a status written before upstream's hash) means the update revision."""
    if target.legacy_revision is not None and target.release_held == target.legacy_revision:
        return target.update_revision
    return target.release_held
