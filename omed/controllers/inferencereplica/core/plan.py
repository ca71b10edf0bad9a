"""The InferenceReplica planner: (desired, observed, settings, now) -> actions and rows.

Why: this is where the Instance rules live (docs/controllers.md), so it is a pure function:
no I/O, no clock, no randomness. It is tested exhaustively and with hypothesis, in milliseconds, and
the executor does only what a :class:`Plan` says.

One pass, in order:

1. every Instance (wanted index, row or pod) gets its facts and its operation from the row;
2. the scale-down wave: Instances the replica doesn't keep (past the lowest ``replicas``
   established indexes, :func:`.ops.migrate.wanted_indexes`; all of them while the
   InferenceReplica is deleted) are drained and deleted in batches under
   ``scaleDownPodBatchSize``; a new batch starts only when no Delete is in flight
   (:mod:`.batching`);
3. Delete operations move on (:mod:`.operations`): gates False, then delete once nothing is
   routed, then wait for the pods to go; then migrations (:mod:`.ops.migrate`: requests
   accepted, records expired, one record driven);
4. the scale-up batch: wanted Instances with missing pods, resumed Creates first, whole
   Instances up to ``scaleUpPodBatchSize`` pods; each gets its Create operation in the rows;
5. Create operations move on; serving gates follow readiness (``readyPolicy``);
6. PodGroups (:mod:`.podgroups`; a Failed one is reset before step 2): created for the
   multi-pod Instances that need one (their pods wait for the cache to show it), patched,
   the leftovers deleted within the scale-down budget;
7. rows, summary, events; ``WriteStatus`` when anything changed.

Invariants (checked by the property tests):

* a pod is deleted only when the observed pod has Ready not True and its gate not True;
* no pod is created for an Instance the replica doesn't keep (the lowest ``replicas``
  indexes with rows, gaps a migration left filled first: ``range(replicas)`` without
  gaps), nor where a pod of that name exists;
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
import operator
from collections.abc import Sequence
from typing import Final

from omed.api.base import Condition, transition_time
from omed.api.inferencereplica import InferenceReplicaStatus, InstanceStatus
from omed.controllers.inferencereplica.core import (
    graces,
    names,
    operations,
    podgroups,
    revisions,
    waiting,
)
from omed.controllers.inferencereplica.core.actions import (
    Action,
    AddFinalizer,
    Plan,
    PodRef,
    RemoveFinalizer,
    ScaleDownWave,
    SetServingGate,
    WriteStatus,
)
from omed.controllers.inferencereplica.core.model import (
    ObservedState,
    PlanSettings,
    ReplicaTarget,
)
from omed.controllers.inferencereplica.core.ops import createdelete, migrate, relocate, update
from omed.controllers.inferencereplica.core.orphans import let_go
from omed.controllers.inferencereplica.core.pacing import paceable
from omed.controllers.inferencereplica.core.rows import (
    FACTS_MEMO,
    ROW_MEMO,
    InstanceFacts,
    condition,
    instance_facts,
    next_available_in,
    ready_reason_indexes,
    ready_reason_indexes_patched,
)
from omed.controllers.inferencereplica.core.samememo import SameMemo
from omed.controllers.inferencereplica.core.status import status_body
from omed.controllers.inferencereplica.core.summary import summarize
from omed.controllers.inferencereplica.core.transitions import transition_events
from omed.controllers.inferencereplica.core.work import InstanceWork as _Instance
from omed.controllers.inferencereplica.core.work import PassWork as _Pass
from omed.controllers.refusedwrite import CONDITION_WRITE_REFUSED


def plan(
    *, target: ReplicaTarget, observed: ObservedState, settings: PlanSettings, now: dt.datetime
) -> Plan:
    """Decide one pass for one InferenceReplica; see the module docstring."""
    if target.orphaning:
        return let_go(target, observed)
    wanted = 0 if target.deleting else target.replicas
    work = _Pass(target, settings, now, act=target.deleting or not target.paused)
    work.gangs = podgroups.start(enabled=settings.pod_groups, groups=observed.pod_groups)
    stored_rows = tuple(observed.rows.values())
    surges = dict(_SURGES.get(target.uid, (stored_rows,), (tuple(observed.rows),)))
    records = list(observed.status.migrations or ())
    moving = migrate.surge_sources(records)
    # An update's surge stands in under an index the replica may want (a scale-up meanwhile
    # takes it over); a migration's is extra until it takes its source's place.
    surges.update(moving)
    seen = sorted(set(observed.rows) | set(observed.pods) | set(surges))
    facts = FACTS_MEMO.facts(target, seen, observed.pods, service_routes=observed.service_routes)
    keep = _WANTED.get(
        target.uid,
        (stored_rows, tuple(facts.values())),
        ((tuple(observed.rows), tuple(facts), wanted, frozenset(moving)),),
    )
    for index in keep - facts.keys():
        facts[index] = _facts(target, observed, index)
    previous_rows = observed.rows.get
    instances = [
        _instance(previous, fact, index in keep)
        if (previous := previous_rows(index)) is None or not previous.incarnation
        else _Instance(fact, previous, previous.incarnation, previous.operation, index in keep)
        for index, fact in sorted(facts.items())
    ]
    if surges:
        for inst in instances:
            inst.surge_of = surges.get(inst.index)
    podgroups.reset(work, instances)
    work.excluded = relocate.exclusions(records, target.fleet.auto_migrate.max_attempts)

    wave = createdelete.scale_down(work, instances)
    for inst in instances:
        if inst.op is not None and operations.is_delete(inst.op):
            createdelete.drive_delete(work, inst)
    if target.deleting and observed.stray_pods:
        createdelete.drain_strays(work, observed.stray_pods)
    moves = migrate.plan_migrations(
        work,
        instances,
        records=records,
        mailbox=observed.mailbox,
        revision_payloads=observed.revision_payloads,
        blocks=observed.status.retry_blocks or (),
        refused=observed.refused,
    )
    deferred_up = createdelete.scale_up(work, instances, wanted)
    update.plan_updates(
        work,
        instances,
        observed.status,
        relocator=lambda inst, pods, revision: relocate.relocate(
            work, moves, inst, pods=pods, revision=revision, rows=observed.rows, kind="Update"
        ),
    )
    all_pod_ready = target.ready_policy == "AllPodReady"
    for inst in instances:
        if not inst.keep:
            continue
        if inst.op is not None and operations.is_create(inst.op):
            revision = inst.op.target_revision or target.update_revision
            attempt_pods = inst.facts.live
            if createdelete.drive_create(work, inst):
                relocate.relocate(
                    work, moves, inst, pods=attempt_pods, revision=revision, rows=observed.rows
                )
        if inst.draining or not work.act or (inst.op is not None and inst.op.type == "Delete"):
            continue
        if inst.facts.gates_settled[all_pod_ready]:
            continue  # its one pod's gate is as its readiness wants (see _serving_gates)
        _serving_gates(work, inst)
    podgroups.finish(work, instances, wave)
    waiting.mark(work, instances, observed.refused)

    kept = [inst for inst in instances if inst.keep]
    rows = ROW_MEMO.build(target, now, map(_ROW_INPUT, kept))
    built = iter(rows)  # one row per kept Instance, in their order
    for inst in instances:
        row = next(built) if inst.keep else None
        previous = inst.previous
        if previous is not None and previous.operation is None and row is previous:
            continue  # the same row, no operation before: no transition (see transition_events)
        work.events.extend(
            transition_events(
                component=target.component,
                update_revision=target.update_revision,
                previous=inst.previous,
                row=row,
                all_pods_exist=not inst.facts.missing,
            )
        )

    pairs = migrate.pair_counts(moves.records, records)
    progress = _progress(target, instances, wave, deferred_up, pairs.aside)
    if progress == names.PROGRESS_UPDATING and update.stalled(work, instances):
        progress = names.PROGRESS_UPDATE_BLOCKED
    status = summarize(
        target=target,
        rows=rows,
        facts=[inst.facts for inst in kept],  # each row's, by position
        previous=observed.status,
        progress=progress,
        now=now,
        wanted_indexes=keep,
        pairs=pairs,
    )
    late = _LATE.get(target.uid, (rows,), (graces.FAILED_CREATE_REASONS,))  # one look
    conditions = [
        *(_since(flagged, observed.status.conditions) for flagged in work.conditions),
        *graces.failed_create_conditions(work, rows, observed.status, late=late),
        *_write_refused_condition(target, observed, now),
    ]
    moves.records = relocate.confirm(moves.records, rows)
    status = status.model_copy(
        update={
            "migrations": moves.records or None,
            "retry_blocks": work.blocks or None,
            "conditions": [*(status.conditions or ()), *conditions],
        }
    )
    actions: list[Action] = []
    if not target.deleting and not target.has_finalizer:
        actions.append(AddFinalizer())
    actions.extend(moves.audit)  # audit rows go ahead of the records that follow them
    if not _unchanged(status, rows, observed):
        # Gates need no record ahead of them (each pass sets them from the pods alone);
        # creations, deletions, image patches and a release do, except the deletion of a
        # source whose record is stored Draining: that record is what licenses it.
        drained = migrate.draining_sources(observed.status.migrations or ())
        recorded_ahead = bool(
            work.creates
            or work.patches
            or any(delete.index not in drained for delete in work.deletes)
            or work.release
            or moves.audit
            or moves.consumed
            or moves.records != list(observed.status.migrations or ())
        )
        may_wait = target.has_finalizer and paceable(
            observed,
            status,
            rows,
            recorded_ahead=recorded_ahead,
            events=work.events,
            moving=migrate.moving_indexes(moves.records),
        )
        actions.append(WriteStatus(status=status, rows=rows, paceable=may_wait))
        actions.extend(work.events)
    elif moves.consumed or moves.audit:
        actions.extend(work.events)  # a rejected request leaves no record: only its events
    consumed = moves.consume_action()
    if consumed is not None:
        actions.append(consumed)
    if work.release is not None:
        actions.append(work.release)
        actions.extend(work.release_events)
    if work.act and not target.deleting:  # paused: nothing written but the status
        created = revisions.create_action(target, observed.revisions)
        if created is not None:
            actions.append(created)
        adopted = revisions.adopt_action(target, observed.revisions)
        if adopted is not None:
            actions.append(adopted)
        live = (
            revisions.in_use(target, (), status)
            | _NAMED.get(target.uid, (rows,))
            | _NAMED.get(target.uid, (tuple(observed.rows.values()),))
        )
        actions.extend(revisions.retention(target, observed.revisions, live))
    actions.extend(podgroups.events(work))
    actions.extend(work.gangs.writes)  # PodGroups first: pods are created against them
    actions.extend(work.gates)
    actions.extend(work.creates)
    actions.extend(work.patches)
    actions.extend(work.deletes)
    if _may_remove_finalizer(target, instances, observed) and not podgroups.remaining(work):
        actions.append(RemoveFinalizer())

    if wave is not None and work.act and settings.scale_down_requeue_interval is not None:
        work.requeue.append(settings.scale_down_requeue_interval)
    if deferred_up and work.act:
        work.requeue.append(settings.scale_up_requeue_interval)
    if target.min_ready_seconds > 0:  # (else no pod waits to become available)
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


_INDEX: Final = operator.attrgetter("index")
_ROW_INPUT: Final = operator.attrgetter(
    "facts", "incarnation", "op", "previous", "deadline_failed", "waiting_pod", "create_failed"
)
"""What :class:`.rows.RowMemo` builds an Instance's row from (:data:`.rows.RowInput`)."""
_LATE: Final = SameMemo(ready_reason_indexes, patch=ready_reason_indexes_patched)
"""The rows late for a deadline or a grace, by reason, for the very same rows."""
_NAMED: Final = SameMemo(revisions.named_by, patch=revisions.named_by_patched)
"""The revisions rows name, for the very same rows (the built ones, the previous ones)."""


def _surges(rows: Sequence[InstanceStatus], indexes: tuple[int, ...]) -> dict[int, int]:
    """:func:`.ops.update.surge_indexes` of the rows under ``indexes``."""
    return update.surge_indexes({i: row.operation for i, row in zip(indexes, rows, strict=True)})


def _surges_patched(
    old: tuple[tuple[InstanceStatus, ...]],
    surges: dict[int, int],
    new: tuple[tuple[InstanceStatus, ...]],
    changed: list[int],
    indexes: tuple[int, ...],
) -> dict[int, int] | None:
    """:func:`_surges` of ``new`` from ``surges``, that of ``old``, which differs from it at
    ``changed`` only: the same where no changed row, before or after, holds an Update."""
    [before], [after] = old, new
    for pos in changed:
        for row in (before[pos], after[pos]):
            if row.operation is not None and row.operation.type == "Update":
                return None
    return surges


_WantedGiven = tuple[tuple[int, ...], tuple[int, ...], int, frozenset[int]]
"""The rows' indexes, the facts' indexes, the replicas wanted, the surges of migrations."""


def _wanted(
    rows: Sequence[InstanceStatus], facts: Sequence[InstanceFacts], given: _WantedGiven
) -> frozenset[int]:
    """:func:`.ops.migrate.wanted_indexes` of the previous rows, with the Instances whose
    facts show them Ready on the spec's images."""
    row_indexes, fact_indexes, wanted, moving = given
    return migrate.wanted_indexes(
        replicas=wanted,
        rows=dict(zip(row_indexes, rows, strict=True)),
        extra=set(moving),
        ready=(i for i, f in zip(fact_indexes, facts, strict=True) if _established(f)),
    )


def _established(facts: InstanceFacts) -> bool:
    return facts.ready and facts.runs_spec_images


def _wanted_patched(
    old: tuple[tuple[InstanceStatus, ...], tuple[InstanceFacts, ...]],
    kept: frozenset[int],
    new: tuple[tuple[InstanceStatus, ...], tuple[InstanceFacts, ...]],
    changed: list[int],
    given: _WantedGiven,
) -> frozenset[int] | None:
    """:func:`_wanted` of ``new`` from ``kept``, that of ``old``, which differs from it at
    ``changed`` only: the same where each changed row establishes its Instance (or is
    deleted) as the one before did, and each changed Instance's facts are Ready on the spec's
    images as they were (all :func:`.ops.migrate.wanted_indexes` reads of them)."""
    (rows_before, facts_before), (rows_after, facts_after) = old, new
    row_indexes, fact_indexes = given[0], given[1]
    for pos in changed:
        if pos < len(rows_after) and _row_wants(rows_before[pos]) != _row_wants(rows_after[pos]):
            return None
        # Readiness counts only for an Instance its row doesn't establish: one whose row (at
        # the same position, of the same index) does, and isn't deleted, is wanted either way.
        if (
            pos < len(facts_after)
            and _established(facts_before[pos]) != _established(facts_after[pos])
            and not (
                pos < len(rows_after)
                and row_indexes[pos] == fact_indexes[pos]
                and _row_wants(rows_after[pos]) == (True, False)
            )
        ):
            return None
    return kept


def _row_wants(row: InstanceStatus) -> tuple[bool, bool]:
    """Whether ``row`` establishes its Instance, and whether it is being deleted."""
    op = row.operation
    return bool(row.running_revision or op is not None), operations.is_delete(op)


_SURGES: Final = SameMemo(_surges, patch=_surges_patched)
"""The surges of Updates of the very same previous rows."""
_WANTED: Final = SameMemo(_wanted, patch=_wanted_patched)
"""The wanted Instances of the very same previous rows and facts."""


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
    if tuple(before) == tuple(map(_INDEX, rows)) and all(map(operator.is_, rows, before.values())):
        return True  # the very rows read, in their order (a pass that changed nothing)
    for row in rows:
        old = before.get(row.index)
        if old is None:
            return False
        if old is not row and old != row and old.to_dict() != row.to_dict():
            return False
    return True


def _facts(target: ReplicaTarget, observed: ObservedState, index: int) -> InstanceFacts:
    return instance_facts(
        target, index, observed.pods_of(index), service_routes=observed.service_routes
    )


def _instance(previous: InstanceStatus | None, facts: InstanceFacts, wanted: bool) -> _Instance:
    """The Instance's work record, from its facts and its previous row."""
    if previous is not None:
        incarnation = previous.incarnation or _incarnation(facts)
        return _Instance(facts, previous, incarnation, previous.operation, wanted)
    return _Instance(facts, None, _incarnation(facts), None, wanted)


def _incarnation(facts: InstanceFacts) -> int:
    return max((pod.incarnation or 0 for pod in facts.pods), default=0) or 1


# -- gates ---------------------------------------------------------------------------------


def _serving_gates(work: _Pass, inst: _Instance) -> None:
    """Gates follow readiness: True when the pod may serve, False when it may not."""
    live = inst.facts.live
    whole: bool | None = None  # under AllPodReady, each pod serves when all may
    if work.target.ready_policy == "AllPodReady":
        whole = inst.facts.complete and all(pod.containers_ready for pod in live)
    for pod in live:
        serve = pod.containers_ready if whole is None else whole
        if serve:
            if pod.serving is True:
                continue
            reason = names.GATE_INSTANCE_READY
        elif pod.serving is True:
            reason = names.GATE_INSTANCE_NOT_READY
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
    aside: frozenset[int] = frozenset(),
) -> str:
    """The Progressing reason for the state this pass leaves behind; ``aside``: the
    Instances the readiness counts leave out (:class:`.summary.PairCounts`; a source
    draining behind its serving surge is no Instance to wait for)."""
    if target.deleting:
        return names.PROGRESS_TERMINATING
    if target.paused:
        return names.PROGRESS_PAUSED
    # One look at each kept Instance for every reason, the first in this order winning.
    creating = updating = waiting = False
    only = frozenset((target.update_revision,))  # a live pod off it: the facts' any_off
    for inst in instances:
        if not inst.keep:
            continue
        op = inst.op
        if op is not None:
            kind = op.type
            if kind == "Delete":
                return names.PROGRESS_SCALING_DOWN
            if kind == "Create":
                creating = True
            elif kind == "Update":
                updating = True
        if inst.wanted:
            facts = inst.facts
            if not updating and facts.revisions and facts.revisions != only:
                updating = True
            if not facts.ready and inst.index not in aside:
                waiting = True
    if wave is not None and wave.deferred_instances:
        return names.PROGRESS_SCALING_DOWN
    if deferred_up or creating:
        return names.PROGRESS_SCALING_UP
    if updating:
        return names.PROGRESS_UPDATING
    if waiting:
        return names.PROGRESS_WAITING
    return names.PROGRESS_COMPLETE


def _since(flagged: Condition, previous: Sequence[Condition] | None) -> Condition:
    """A condition the pass flagged (:meth:`~.work.PassWork.flag`), its transition time kept
    from the stored one while its status stays: a condition that holds writes nothing."""
    since = transition_time(
        previous,
        type=flagged.type,
        status=flagged.status,
        now=flagged.last_transition_time or dt.datetime.min,
    )
    if since == flagged.last_transition_time:
        return flagged
    return flagged.model_copy(update={"last_transition_time": since})


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
