"""Migrations: moving one Instance to another node, its replacement serving before it drains.

Why: a node must be emptied for maintenance without a dip in serving capacity. A request
(the ``ome.io/migration-request-v1-<uuid>`` annotation on the parent InferenceService,
:mod:`omed.api.migrationrequest`) becomes a record in ``status.migrations`` (upstream OME's
``MigrationStatus``), and the record moves through

    Accepted -> SurgePending -> SurgeReady -> Draining -> Completed | Failed

* **accept** (every pass): each request for this component is taken in key order. One that
  already has a record is re-delivered and only consumed; an invalid one is rejected (an
  audit row, a Warning MigrationRequestRejected, no record); under migration mode Never a
  born-terminal Failed record is written; else at most one request per pass is Accepted,
  its deadline ``instanceReadyTimeout`` from now, and stored in that phase (a request
  appears as Accepted before anything moves; the next pass drives it);
* **expiry**: a record past its deadline fails with the blocker of its phase;
* **drive** (one record per pass, the oldest): an Accepted record passes its guards (the
  source row, a steady source, the node it leaves, the caps of ``lifecycle.audit``, the
  source revision) and gets its surge at the lowest free index (SurgePending): the source's
  row gets phase Migrating and a ``Migrate`` operation pointing at the surge, the surge's row
  one pointing back. The surge's pods are built from the source's running revision, with a
  required node affinity off the node it leaves and the hints as a preferred one. Once every
  surge pod is in rotation (the traffic Service's EndpointSlices list it as ready) and
  available, SurgeReady; then the source is gated off (Draining), deleted once no slice lists
  it, and when its pods are gone the surge takes its place: Completed,
  ``migrated to instance=<surge>``. The surge keeps its index: Instance indexes then have a
  gap, which a later scale-up fills (:func:`wanted_indexes`).

Durability: everything a pass decides is in the one status write that precedes its side
effects, so the record always says at least as much as has been done: a surge's index is
recorded before its pods are created, Draining before the source is gated off, and the
source's row leaves only with the record that says Completed. A manager killed at any point
finds the record and the rows, and resumes without a second surge or a double delete.

Failure restores: the surge gets a Delete operation (it is drained and deleted as any
Instance past ``replicas``), and the source's Migrate operation ends, so its gates follow its
readiness again.

Invariants: pure (``now`` is injected); a record never moves back; at most one surge per
record, allocated once; no pod of the source is deleted before the record is Draining and
every surge pod is in rotation.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from omed.api.constants import (
    LABEL_HOSTNAME,
    MIGRATION_PHASE_ACCEPTED,
    MIGRATION_PHASE_COMPLETED,
    MIGRATION_PHASE_DRAINING,
    MIGRATION_PHASE_FAILED,
    MIGRATION_PHASE_RELOCATED,
    MIGRATION_PHASE_SURGE_PENDING,
    MIGRATION_PHASE_SURGE_READY,
)
from omed.api.inferencereplica import (
    InstanceStatus,
    LastFailure,
    MigrationStatus,
    Operation,
    RetryBlock,
)
from omed.api.migrationrequest import MigrationRequest, RequestProblem
from omed.controllers.inferencereplica.core import names, operations, podgroups, retry, steps
from omed.controllers.inferencereplica.core.actions import RETRY_SOON, CreatePods, PodToCreate
from omed.controllers.inferencereplica.core.escalation import enabled as escalation_enabled
from omed.controllers.inferencereplica.core.migrationactions import (
    ConsumeMigrationRequests,
    Mailbox,
    WriteAuditRow,
)
from omed.controllers.inferencereplica.core.model import CreateRefusal
from omed.controllers.inferencereplica.core.ops.migratenames import (
    BLOCKERS,
    CAPACITY_STATES,
    CONDITION_POLICY_UNCONFIGURED,
    EVENT_ACCEPTED,
    EVENT_COMPLETED,
    EVENT_CREATE_BLOCKED,
    EVENT_DEFERRED,
    EVENT_EXPIRED,
    EVENT_FROM_NODE_MISMATCH,
    EVENT_NODE_AFFINITY_CONFLICT,
    EVENT_PARKED,
    EVENT_POLICY_UNCONFIGURED,
    EVENT_RATE_LIMITED,
    EVENT_REJECTED,
    EVENT_UNSUPPORTED_SCHEMA,
    EVENT_WEDGED,
    GATE_MIGRATING,
    HELD_REQUEUE,
    MSG_DRAINING,
    MSG_HELD,
    MSG_NEVER,
    MSG_NO_LIVE_PODS,
    MSG_PARKED,
    MSG_SOURCE_EXPIRED,
    MSG_SOURCE_MISSING,
    MSG_SURGE_ALLOCATED,
    MSG_SURGE_READY,
    STEP_CREATE_SURGE,
    go_duration,
    instance_event,
    migrated_message,
    migration_event,
    rejected_event,
)
from omed.controllers.inferencereplica.core.ops.migratepods import (
    pinned_to,
    source_payload,
    with_overlay,
)
from omed.controllers.inferencereplica.core.ops.restart import hold_message as restart_hold
from omed.controllers.inferencereplica.core.podtemplate import render_pod
from omed.controllers.inferencereplica.core.rows import (
    CreateFailure,
    available,
    condition,
    instance_facts,
)
from omed.controllers.inferencereplica.core.summary import NO_PAIRS, PairCounts
from omed.controllers.inferencereplica.core.work import InstanceWork, PassWork
from omed.controllers.ledger.document import (
    OUTCOME_MIGRATED,
    PHASE_COMPLETED,
    PHASE_FAILED,
    PHASE_STARTED,
    LedgerEntry,
    LedgerPhase,
)

# -- Which Instances the replica wants --------------------------------------------------------


def surge_sources(records: Sequence[MigrationStatus]) -> dict[int, int]:
    """surge index -> source index, for every migration still in flight."""
    return {
        record.surge_instance: record.source_instance
        for record in records
        if not record.terminal and record.surge_instance is not None
    }


def moving_indexes(records: Sequence[MigrationStatus]) -> frozenset[int]:
    """The sources and surges of the migrations in flight with a surge allocated: the rows
    whose pods, gates and readiness the record's phase tells (:mod:`..pacing`)."""
    moving: set[int] = set()
    for record in records:
        if not record.terminal and record.surge_instance is not None:
            moving.update((record.source_instance, record.surge_instance))
    return frozenset(moving)


def draining_sources(records: Sequence[MigrationStatus]) -> frozenset[int]:
    """The sources of the records in ``records`` (the stored ones) that are Draining: their
    pods' deletes need nothing recorded ahead, the stored phase licenses them."""
    return frozenset(
        record.source_instance
        for record in records
        if record.phase == MIGRATION_PHASE_DRAINING and record.surge_instance is not None
    )


_SURGE_SERVES: Final = frozenset({MIGRATION_PHASE_SURGE_READY, MIGRATION_PHASE_DRAINING})
"""The phases in which a migration's surge stands in for its source."""


def pair_counts(
    records: Sequence[MigrationStatus], stored: Sequence[MigrationStatus]
) -> PairCounts:
    """The :class:`PairCounts` of this pass's ``records`` (``stored``: the records it read).
    A record completed in this pass still has its surge stand in: the Instances the pass
    keeps were chosen from the rows it read, where the surge was still extra; the next pass
    keeps the surge in its own right."""
    aside: set[int] = set()
    stand_in: dict[int, int] = {}
    ended_before = {r.request_uuid for r in stored if r.terminal}
    for record in records:
        surge, source = record.surge_instance, record.source_instance
        if surge is None or record.trigger != "Manual":
            continue
        if record.phase in _SURGE_SERVES:
            aside.add(source)
            stand_in[source] = surge
        elif not record.terminal:
            aside.add(surge)
        elif record.phase == MIGRATION_PHASE_COMPLETED and record.request_uuid not in ended_before:
            aside.add(source)
            stand_in[source] = surge
    if not aside and not stand_in:
        return NO_PAIRS
    return PairCounts(aside=frozenset(aside), stand_in=stand_in)


def wanted_indexes(
    *,
    replicas: int,
    rows: Mapping[int, InstanceStatus],
    extra: set[int],
    ready: Iterable[int] = (),
) -> frozenset[int]:
    """The indexes of the ``replicas`` Instances the replica keeps.

    Indexes are identities, and a migration's surge keeps its own (the source's leaves with
    it), so the wanted Instances are the lowest ``replicas`` indexes of the Instances that
    are established (Ready now, ``ready``, or their row has been Ready or records an
    operation other than Delete; never one of ``extra``, the surges in flight), and when there
    are fewer, the lowest free indexes beside them: a scale-up fills a gap first, a scale-down
    takes the highest index. Without gaps this is ``range(replicas)``. What establishes an
    Instance is what its next row records, so planning again on the rows a pass wrote wants
    the same Instances."""
    deleting: set[int] = set()
    established: set[int] = set()
    for index, row in rows.items():  # one look at each row for both
        op = row.operation
        if op is not None:
            established.add(index)
            if op.type == "Delete":
                deleting.add(index)
        elif row.running_revision:
            established.add(index)
    occupied = sorted((established | set(ready)) - deleting - extra)
    kept = occupied[:replicas]
    index = 0
    taken = set(kept) | extra
    while len(kept) < replicas:
        if index not in taken:
            kept.append(index)
            taken.add(index)
        index += 1
    return frozenset(kept)


# -- The pass ---------------------------------------------------------------------------------


@dataclass(slots=True)
class MigrationPass:
    """What this pass decided about migrations, and the pass's Instances it decides on.

    ``instances`` is the planner's own list (a surge the drive adds joins it, so the rest of
    the pass sees it), ``by_index`` the same Instances by index, kept equal to it by
    :meth:`join`; ``payloads`` the cached ControllerRevisions' data by name (a surge is built
    from its source's running revision)."""

    records: list[MigrationStatus]
    instances: list[InstanceWork]
    payloads: Mapping[str, bytes]
    by_index: dict[int, InstanceWork] = field(init=False)
    audit: list[WriteAuditRow] = field(default_factory=list)
    consumed: list[str] = field(default_factory=list)
    mailbox: Mailbox | None = None
    blocks: tuple[RetryBlock, ...] = ()
    refused: dict[int, CreateRefusal] = field(default_factory=dict)
    """The last refused pod create of each Instance (quota, an unreachable webhook)."""

    def __post_init__(self) -> None:
        self.by_index = {inst.index: inst for inst in self.instances}

    def join(self, inst: InstanceWork) -> None:
        """An Instance new to the pass (a surge without a row yet)."""
        self.instances.append(inst)
        self.by_index[inst.index] = inst

    def block(self, revision: str | None) -> RetryBlock | None:
        return next((b for b in self.blocks if b.target_revision == revision), None)

    def record(self, uuid: str) -> MigrationStatus | None:
        return next((r for r in self.records if r.request_uuid == uuid), None)

    def put(self, record: MigrationStatus) -> None:
        for i, old in enumerate(self.records):
            if old.request_uuid == record.request_uuid:
                self.records[i] = record
                return
        self.records.append(record)

    def consume_action(self) -> ConsumeMigrationRequests | None:
        if not self.consumed or self.mailbox is None:
            return None
        return ConsumeMigrationRequests(isvc=self.mailbox.isvc, keys=tuple(self.consumed))


def plan_migrations(
    work: PassWork,
    instances: list[InstanceWork],
    *,
    records: Sequence[MigrationStatus],
    mailbox: Mailbox | None,
    revision_payloads: Mapping[str, bytes],
    blocks: Sequence[RetryBlock] = (),
    refused: Mapping[int, CreateRefusal] | None = None,
) -> MigrationPass:
    """Accept, expire and drive this pass's migrations (see the module docstring);
    ``blocks``: the stored retry blocks (a source on a held revision isn't moved)."""
    mig = MigrationPass(
        records=list(records),
        instances=instances,
        payloads=revision_payloads,
        mailbox=mailbox,
        blocks=tuple(blocks),
        refused=dict(refused or {}),
    )
    target = work.target
    if target.deleting:
        return mig
    _expire(work, mig)
    known = {r.request_uuid for r in mig.records}
    if mailbox is not None:
        _accept(work, mig, mailbox)
    if any(r.request_uuid not in known and not r.terminal for r in mig.records):
        # Stored as Accepted first, the phase a request is documented to appear in; the
        # next pass moves it on.
        work.requeue.append(RETRY_SOON)
    elif work.act:
        record = _next(mig.records)
        if record is not None:
            _drive(work, mig, record)
    _prune(work, mig)
    _capacity_condition(work, mig)
    if any(not r.terminal and r.trigger == "Manual" for r in mig.records):
        work.requeue.append(target.fleet.requeue.operation or HELD_REQUEUE)
    return mig


def _next(records: Sequence[MigrationStatus]) -> MigrationStatus | None:
    """The oldest record in flight; a parked one only when no other is (later requests go
    ahead of a record waiting on pods only their kubelet can end)."""
    active = [r for r in records if not r.terminal and r.trigger == "Manual"]
    if not active:
        return None
    return min(active, key=lambda r: (_is_parked(r), r.started_at))


# -- accept -----------------------------------------------------------------------------------


def _ledger_start(request: MigrationRequest, now: dt.datetime) -> dt.datetime:
    """The ledger's startedAt: the request's ``requested_at`` when it reads as a time."""
    if request.requested_at:
        try:
            parsed = dt.datetime.fromisoformat(request.requested_at.replace("Z", "+00:00"))
        except ValueError:
            parsed = None
        if parsed is not None and parsed.tzinfo is not None:
            return parsed.astimezone(dt.UTC).replace(microsecond=0)
    return now


def _accept(work: PassWork, mig: MigrationPass, mailbox: Mailbox) -> None:
    target = work.target
    accepted = False
    for request in mailbox.requests:
        uuid = request.uuid
        if uuid is not None and mig.record(uuid) is not None:
            mig.consumed.append(request.key)  # re-delivered: the record already answers it
            continue
        if isinstance(request, RequestProblem):
            if target.component != "engine":
                continue  # a request that names no component is answered once, by the engine
            _reject(work, mig, request.key, uuid, request.cause, schema=request.unsupported_schema)
            continue
        if request.component != target.component:
            if request.component in mailbox.declared or target.component != "engine":
                continue  # another InferenceReplica's request
            _reject(
                work,
                mig,
                request.key,
                uuid,
                f'component "{request.component}" does not exist on this InferenceService',
            )
            continue
        if request.instance < 0:
            _reject(work, mig, request.key, uuid, f"instance must be >= 0, got {request.instance}")
            continue
        if target.migration_mode == "Never":
            _never(work, mig, request)
            continue
        if accepted:
            continue  # one accept per pass: the next pass takes the next request
        accepted = True
        timeout = target.update.ready_timeout or 0.0
        deadline = work.now + dt.timedelta(seconds=timeout)
        _answer(
            work, mig, request, PHASE_STARTED, phase=MIGRATION_PHASE_ACCEPTED, deadline=deadline
        )


def _reject(
    work: PassWork,
    mig: MigrationPass,
    key: str,
    uuid: str | None,
    reason: str,
    *,
    schema: bool = False,
) -> None:
    """An invalid request: a terminal audit row (unless the key has no UUID), a Warning, the
    annotation consumed, no record."""
    mig.consumed.append(key)
    shown = uuid or key
    work.warn(EVENT_UNSUPPORTED_SCHEMA if schema else EVENT_REJECTED, rejected_event(shown, reason))
    if uuid is not None and mig.mailbox is not None:
        mig.audit.append(
            WriteAuditRow(
                isvc=mig.mailbox.isvc,
                uid=mig.mailbox.uid,
                entry=LedgerEntry(
                    request_uuid=uuid,
                    component=work.target.component,
                    source_instance=0,
                    phase=PHASE_FAILED,
                    started_at=work.now,
                    completed_at=work.now,
                    outcome=reason,
                ),
            )
        )


def _never(work: PassWork, mig: MigrationPass, request: MigrationRequest) -> None:
    now = work.now
    _answer(
        work,
        mig,
        request,
        PHASE_FAILED,
        phase=MIGRATION_PHASE_FAILED,
        deadline=now,
        message=MSG_NEVER,
        completed_at=now,
    )
    work.warn(EVENT_REJECTED, rejected_event(request.uuid, MSG_NEVER))


def _answer(
    work: PassWork,
    mig: MigrationPass,
    request: MigrationRequest,
    ledger_phase: LedgerPhase,
    *,
    phase: str,
    deadline: dt.datetime,
    message: str | None = None,
    completed_at: dt.datetime | None = None,
) -> None:
    """A manual request answered by its record, started now with the request's source,
    nodes and reason; its annotation consumed; its ledger row at ``ledger_phase``, whose
    startedAt is the request's own time when it has one."""
    record = MigrationStatus(
        request_uuid=request.uuid,
        trigger="Manual",
        source_instance=request.instance,
        from_node=request.from_node or None,
        hint_target_nodes=list(request.hint_target_nodes) or None,
        phase=phase,
        reason=request.reason or None,
        message=message,
        started_at=work.now,
        deadline=deadline,
        completed_at=completed_at,
    )
    mig.put(record)
    mig.consumed.append(request.key)
    _audit(work, mig, record, ledger_phase, started=_ledger_start(request, work.now))


def _audit(
    work: PassWork,
    mig: MigrationPass,
    record: MigrationStatus,
    phase: LedgerPhase,
    *,
    started: dt.datetime | None = None,
    revision: str | None = None,
) -> None:
    if mig.mailbox is None:
        return
    surge = record.surge_instance
    entry = LedgerEntry(
        request_uuid=record.request_uuid,
        component=work.target.component,
        source_instance=record.source_instance,
        surge_instance=-1 if surge is None else surge,
        phase=phase,
        reason=record.reason,
        from_node=record.from_node,
        revision=revision,
        hint_target_nodes=tuple(record.hint_target_nodes or ()),
        started_at=started or _started_of(mig, record),
        completed_at=record.completed_at if phase != PHASE_STARTED else None,
        outcome=(OUTCOME_MIGRATED if phase == PHASE_COMPLETED else record.message)
        if phase != PHASE_STARTED
        else None,
    )
    row = WriteAuditRow(isvc=mig.mailbox.isvc, uid=mig.mailbox.uid, entry=entry)
    for i, earlier in enumerate(mig.audit):  # one write per row and pass: the latest wins,
        if (earlier.entry.request_uuid, earlier.entry.reason) == (entry.request_uuid, entry.reason):
            kept = dataclasses.replace(entry, started_at=earlier.entry.started_at)
            mig.audit[i] = dataclasses.replace(row, entry=kept)  # with the first startedAt
            return
    mig.audit.append(row)


def _started_of(mig: MigrationPass, record: MigrationStatus) -> dt.datetime:
    return record.started_at


# -- expiry, failure --------------------------------------------------------------------------


def _expire(work: PassWork, mig: MigrationPass) -> None:
    by_index = mig.by_index
    for record in list(mig.records):
        phase = record.phase
        if record.terminal or record.trigger != "Manual" or phase is None or phase not in BLOCKERS:
            continue
        left = (record.deadline - work.now).total_seconds()
        if left > 0:
            work.requeue.append(left)
            continue
        source = by_index.get(record.source_instance)
        surge = by_index.get(record.surge_instance) if record.surge_instance is not None else None
        if phase == MIGRATION_PHASE_DRAINING and _tail_ready(work, source, surge):
            continue  # the drive pass completes it (or it stays parked)
        blocker = f"deadline exceeded in phase {phase}: {BLOCKERS[phase]}"
        tail = f"; tearing down surge instance={record.surge_instance}" if surge else ""
        work.warn(EVENT_EXPIRED, migration_event(record.request_uuid, f"expired: {blocker}{tail}"))
        _fail(work, mig, record, blocker, expired=True)
        work.requeue.append(RETRY_SOON)


def _refuse(
    work: PassWork,
    mig: MigrationPass,
    record: MigrationStatus,
    message: str,
    *,
    event: str,
) -> None:
    """A request the guards refuse: the Warning ``event`` saying it was rejected and why
    (:func:`rejected_event`), then its record ends Failed with ``message`` (:func:`_fail`)."""
    work.warn(event, rejected_event(record.request_uuid, message))
    _fail(work, mig, record, message)


def _fail(
    work: PassWork,
    mig: MigrationPass,
    record: MigrationStatus,
    message: str,
    *,
    expired: bool = False,
) -> None:
    """End ``record`` Failed: the surge (if any) is torn down, the source restored
    (:func:`_restore`); ``expired``: its deadline passed."""
    by_index = mig.by_index
    if record.surge_instance is not None:
        surge = by_index.get(record.surge_instance)
        if surge is not None and _migrate_op(surge.op, record):
            surge.surge_of = None
            if surge.facts.pods:
                surge.op = steps.start(
                    work,
                    surge,
                    "Delete",
                    names.STEP_DRAIN,
                    reason=names.OperationReason.SCALE_DOWN,
                    target_revision=None,
                )
                surge.draining = True
            else:
                surge.op = None
                surge.keep = False
    source = by_index.get(record.source_instance)
    if source is not None and _migrate_op(source.op, record):
        source.op = None
        source.draining = False
        _restore(work, source, expired=expired, blocker=message)
    failed = record.model_copy(
        update={"phase": MIGRATION_PHASE_FAILED, "message": message, "completed_at": work.now}
    )
    mig.put(failed)
    _audit(work, mig, failed, PHASE_FAILED)


def _restore(work: PassWork, source: InstanceWork, *, expired: bool, blocker: str) -> None:
    """The source keeps serving from what its pods show: its gates follow its readiness again
    (its Migrate operation ended). When a live pod isn't runtime-ready (its containers not
    ready; its Ready condition may be False only for the drain's gate), the row says why
    the migration left it so: lastFailure and Ready reason ``MigrationExpired`` (``migration
    expired; source pods unhealthy``) after an expiry, else ``MigrationClosedSourceUnhealthy``
    (``<blocker>; source pods not runtime-ready``), kept while it stays not Ready."""
    live = source.facts.live
    sick = next((pod for pod in live if not pod.containers_ready), None)
    if live and sick is None:
        return
    if expired:
        reason, message = names.REASON_MIGRATION_EXPIRED, MSG_SOURCE_EXPIRED
    else:
        reason = names.REASON_MIGRATION_SOURCE_UNHEALTHY
        message = f"{blocker}; source pods not runtime-ready"
    pod = sick.name if sick is not None else None
    source.create_failed = CreateFailure(
        reason=reason,
        message=message,
        failure=LastFailure(pod=pod, reason=reason, time=work.now),
    )


def _migrate_op(op: Operation | None, record: MigrationStatus) -> bool:
    return op is not None and op.type == "Migrate" and op.request_uuid == record.request_uuid


def _prune(work: PassWork, mig: MigrationPass) -> None:
    """Terminal records older than ``audit.window`` leave status (the ledger keeps them);
    an unconfirmed relocation stays while its Instance has a row: it is the Instance's
    relocation budget and exclusion memory (:mod:`.relocate`)."""
    audit = work.target.fleet.audit
    if audit is None:
        return
    horizon = work.now - dt.timedelta(seconds=audit.window)
    rows = {inst.index for inst in mig.by_index.values() if inst.previous is not None}

    def kept(r: MigrationStatus) -> bool:
        if r.phase == MIGRATION_PHASE_RELOCATED and not r.succeeded and r.source_instance in rows:
            return True
        return not (r.terminal and (r.completed_at or r.started_at) < horizon)

    mig.records = [r for r in mig.records if kept(r)]


def _capacity_condition(work: PassWork, mig: MigrationPass) -> None:
    """MigrationPolicyUnconfigured: True while a request is held for want of caps; False once
    caps are set, while any record is in flight (so a replica that never migrates carries no
    such condition)."""
    active = [r for r in mig.records if not r.terminal and r.trigger == "Manual"]
    if not active:
        return
    status, reason, message = CAPACITY_STATES[work.target.fleet.audit is not None]
    work.conditions.append(
        condition(
            None,
            type=CONDITION_POLICY_UNCONFIGURED,
            status=status,
            reason=reason,
            message=message,
            now=work.now,
        )
    )


# -- drive --------------------------------------------------------------------------------------


def _drive(work: PassWork, mig: MigrationPass, record: MigrationStatus) -> None:
    if record.phase == MIGRATION_PHASE_ACCEPTED:
        record = _guards_and_allocate(work, mig, record)
        if record.phase != MIGRATION_PHASE_SURGE_PENDING:
            return
    source = mig.by_index.get(record.source_instance)
    if source is None or record.surge_instance is None:
        _fail(work, mig, record, MSG_SOURCE_MISSING)
        return
    surge = mig.by_index.get(record.surge_instance)
    if surge is None:
        surge = _surge_work(work, record)
        mig.join(surge)
    _stamp(work, record, source, surge)
    if record.phase == MIGRATION_PHASE_SURGE_PENDING:
        wedged = _wedged(work, surge)
        if wedged is not None:
            message = f"surge pod {wedged[0]} wedged in {wedged[1]} past the stuck-pod grace"
            work.warn(
                EVENT_WEDGED,
                migration_event(
                    record.request_uuid,
                    f"failed: {message}; tearing down surge instance={record.surge_instance}",
                ),
            )
            _fail(work, mig, record, message)
            return
        if surge.facts.missing:
            blocked = mig.refused.get(surge.index)
            if blocked is not None and blocked.permanent:  # the same create can only fail again
                message = (
                    f"surge pod {blocked.pod} rejected by the apiserver ({blocked.token}): "
                    f"{blocked.message}"
                )
                _refuse(work, mig, record, message, event=EVENT_REJECTED)
                return
            _create_hold(work, record, surge, blocked)
            _create_surge(work, mig, record, surge)
            return
        _create_hold(work, record, surge, None)
        if not _surge_ready(work, surge):
            return
        mig.put(
            record.model_copy(
                update={"phase": MIGRATION_PHASE_SURGE_READY, "message": MSG_SURGE_READY}
            )
        )
        work.requeue.append(work.target.fleet.requeue.gate or RETRY_SOON)
        return
    if record.phase == MIGRATION_PHASE_SURGE_READY:
        record = record.model_copy(
            update={"phase": MIGRATION_PHASE_DRAINING, "message": MSG_DRAINING}
        )
        mig.put(record)
    if record.phase == MIGRATION_PHASE_DRAINING:
        source.draining = True
        parked = _parked(work, source)
        if parked and not _is_parked(record):
            message = f"{MSG_PARKED}{', '.join(parked)}"
            record = record.model_copy(update={"message": message})
            mig.put(record)
            work.warn(
                EVENT_PARKED,
                migration_event(
                    record.request_uuid,
                    f"parked: {message}; surge instance={record.surge_instance} keeps serving",
                ),
            )
        if not _drained(source):
            assert source.op is not None
            steps.queue_drain(
                work,
                source,
                operations.drain_state(source.facts.pods),
                reason=GATE_MIGRATING,
                operation_id=source.op.id or "",
            )
            return
        _complete(work, mig, record, source, surge)


def _complete(
    work: PassWork,
    mig: MigrationPass,
    record: MigrationStatus,
    source: InstanceWork,
    surge: InstanceWork,
) -> None:
    """The tail: the surge takes the source's place (its operation ends, its row keeps its
    index), the source's row goes, then the record says Completed."""
    assert record.surge_instance is not None
    revision = _running_revision(source) or work.target.update_revision
    surge.op = None
    surge.surge_of = None
    source.op = None
    source.keep = False
    done = record.model_copy(
        update={
            "phase": MIGRATION_PHASE_COMPLETED,
            "message": migrated_message(record.surge_instance),
            "completed_at": work.now,
        }
    )
    mig.put(done)
    _audit(work, mig, done, PHASE_COMPLETED, revision=revision)
    work.tell(
        EVENT_COMPLETED,
        migration_event(
            record.request_uuid,
            f"complete: component={work.target.component} instance={record.source_instance} "
            f"-> instance={record.surge_instance} (revision={revision})",
        ),
    )


def _drained(source: InstanceWork | None) -> bool:
    return source is None or not source.facts.pods


def _tail_ready(work: PassWork, source: InstanceWork | None, surge: InstanceWork | None) -> bool:
    """An expired Draining record is one drive away from Completed: its surge serves and
    every source pod is out of rotation. A source pod Terminating past its deletion deadline
    plus ``forceDelete.overdueSlack``, with force deletes configured, is the exception: the
    escalation had its chance, so the record expires. Without force deletes such a record
    parks (:func:`_parked`) rather than tear down a serving surge."""
    if not _surge_ready(work, surge):
        return False
    if source is None:
        return True
    config = work.target.fleet.force_delete
    if escalation_enabled(config):
        slack = dt.timedelta(seconds=config.overdue_slack or 0.0)
        for pod in source.facts.pods:
            if pod.deleted_at is not None and work.now > pod.deleted_at + slack:
                return False
    return not any(pod.routed for pod in source.facts.pods)


def _parked(work: PassWork, source: InstanceWork) -> list[str]:
    """The source pods, when every one is Terminating past its deletion deadline: every
    delete the drive owns is sent, and only their kubelet, a finalizer's owner or the
    force-delete escalation can end them. A pod already removed (its kubelet confirmed the
    delete, which moves the deadline to that moment: :attr:`~.model.PodView.removed`) is
    leaving, not parked."""
    pods = source.facts.pods
    if not pods or any(p.deleted_at is None or work.now < p.deleted_at or p.removed for p in pods):
        return []
    return sorted(p.name for p in pods)


def _is_parked(record: MigrationStatus) -> bool:
    return record.phase == MIGRATION_PHASE_DRAINING and (record.message or "").startswith(
        MSG_PARKED
    )


def _surge_ready(work: PassWork, surge: InstanceWork | None) -> bool:
    """Every surge pod is in rotation (the traffic Service's slices list it as ready, once it
    has slices) and available (Ready for minReadySeconds)."""
    if surge is None or surge.facts.missing or not surge.facts.in_rotation:
        return False
    live = surge.facts.live
    return all(
        available(pod, min_ready_seconds=work.target.min_ready_seconds, now=work.now)
        for pod in live
    )


def _running_revision(inst: InstanceWork) -> str | None:
    return inst.previous.running_revision if inst.previous is not None else None


# -- guards and allocation ----------------------------------------------------------------------


def _guards_and_allocate(
    work: PassWork, mig: MigrationPass, record: MigrationStatus
) -> MigrationStatus:
    target = work.target
    source = mig.by_index.get(record.source_instance)
    if source is None or source.previous is None:
        _fail(work, mig, record, MSG_SOURCE_MISSING)
        return record
    row = source.previous
    rejection = _retry_block_rejection(work, mig, record, source)
    if rejection is not None:
        _refuse(work, mig, record, rejection, event=EVENT_REJECTED)
        return record
    # Steady: the row Ready with no operation on a running revision, and its pods ready. A
    # row still Ready whose pods are all gone (deleted, evicted) isn't waited on: the node
    # check fails it, as the source names no node to leave.
    steady = (
        row.phase == "Ready"
        and source.op is None
        and bool(row.running_revision)
        and (source.facts.ready or not source.facts.pods)
    )
    if not steady:
        deferral = _deferral(work, mig, source)
        if deferral is not None and record.message != deferral:
            work.warn(EVENT_DEFERRED, deferral)
            record = record.model_copy(update={"message": deferral})
            mig.put(record)
        return record  # deferred: the record stays Accepted, its deadline running
    from_node = _from_node(work, mig, record, source)
    if from_node is None:
        return mig.record(record.request_uuid) or record
    if from_node != record.from_node:
        record = record.model_copy(update={"from_node": from_node})
        mig.put(record)
    audit = target.fleet.audit
    if audit is None:
        if record.message != MSG_HELD:
            work.warn(
                EVENT_POLICY_UNCONFIGURED, migration_event(record.request_uuid, f"held: {MSG_HELD}")
            )
            record = record.model_copy(update={"message": MSG_HELD})
            mig.put(record)
        return record
    cap = _cap_breach(work, mig, record)
    if cap is not None:
        work.warn(EVENT_RATE_LIMITED, rejected_event(record.request_uuid, cap))
        _refuse(work, mig, record, cap, event=EVENT_REJECTED)
        return record
    revision = row.running_revision or ""
    payload = source_payload(target, revision, mig.payloads)
    if payload is None:
        return record  # deferred until the cache shows the source revision's record
    conflict = pinned_to(payload, from_node)
    if conflict:
        message = (
            f"source PodSpec NodeAffinity requires {LABEL_HOSTNAME}={from_node}; overlay's "
            f"NotIn[{from_node}] would make scheduling impossible"
        )
        _refuse(work, mig, record, message, event=EVENT_NODE_AFFINITY_CONFLICT)
        return record
    surge_index = _free_index(mig)
    record = record.model_copy(
        update={
            "surge_instance": surge_index,
            "allocated_at": work.now,
            "phase": MIGRATION_PHASE_SURGE_PENDING,
            "message": MSG_SURGE_ALLOCATED,
        }
    )
    mig.put(record)
    _audit(work, mig, record, PHASE_STARTED, started=_started_of(mig, record), revision=revision)
    work.tell(
        EVENT_ACCEPTED,
        instance_event(
            target.component,
            record.source_instance,
            f"migration accepted (uuid={record.request_uuid}, source-node={from_node}, "
            f"surge-index={surge_index})",
        ),
    )
    return record


def _who(work: PassWork, source: InstanceWork) -> str:
    return f"source component={work.target.component} instance={source.index}"


def _retry_block_rejection(
    work: PassWork, mig: MigrationPass, record: MigrationStatus, source: InstanceWork
) -> str | None:
    """A source whose running revision is held, or that is Failed on a revision that never
    started: waiting could only park the request until its deadline."""
    row = source.previous
    assert row is not None
    held = mig.block(row.running_revision)
    if held is not None and held.state == "Held":
        return (
            f"{_who(work, source)} runs revision {row.running_revision}, which is held after its "
            f"attempts (retry block {retry.describe(held)}); the move would rebuild that revision "
            "elsewhere; correct or release the revision, then request the move again"
        )
    target_revision = row.target_revision
    if (
        row.phase == "Failed"
        and target_revision
        and target_revision != row.running_revision
        and (block := mig.block(target_revision)) is not None
    ):
        return (
            f"{_who(work, source)} is Failed on revision {target_revision}, which has not "
            f"started (retry block {retry.describe(block)}); correct or release the revision, "
            "then request the move again"
        )
    return None


def _deferral(work: PassWork, mig: MigrationPass, source: InstanceWork) -> str | None:
    """Why a source Failed on the revision it runs holds the move, naming what holds its
    repair; None for any other wait (its turn comes by itself)."""
    row = source.previous
    assert row is not None
    revision = row.running_revision
    if row.phase != "Failed" or not revision:
        return None
    if any(pod.revision != revision for pod in source.facts.live):
        return None
    failure = row.last_failure
    if failure is not None and failure.reason:
        detail = (
            f"pod {failure.pod or '-'} container {failure.container or '-'} stuck "
            f"({failure.reason})"
        )
    else:
        detail = "no failure recorded"
    hold = restart_hold(source.op)
    if hold is None and source.op is not None:
        return None  # a repair in flight: its own outcome comes first
    if hold is None:
        block = mig.block(revision)
        if block is not None:
            hold = f"its rebuild waits on the revision's retry block {retry.describe(block)}"
        else:
            hold = "no repair is open on it"
    return (
        f"waiting for {_who(work, source)}, Failed on its running revision {revision} "
        f"({detail}), to be Ready again: {hold}"
    )


def _from_node(
    work: PassWork,
    mig: MigrationPass,
    record: MigrationStatus,
    source: InstanceWork,
) -> str | None:
    """The node the source leaves; None when the record was failed or must wait."""
    live = source.facts.live
    if not live:
        if source.facts.pods:
            return None  # every pod Terminating: wait
        _refuse(work, mig, record, MSG_NO_LIVE_PODS, event=EVENT_FROM_NODE_MISMATCH)
        return None
    if any(not pod.node for pod in live):
        return None  # a pod not scheduled yet: wait
    nodes = sorted({pod.node for pod in live if pod.node})
    wanted = record.from_node
    if len(nodes) > 1:
        if work.target.pods_per_instance > 1:
            if wanted in nodes:
                return wanted
            message = (
                f"request.FromNode={wanted or ''} hosts no source pod; gang spans nodes "
                f"{', '.join(nodes)}"
            )
        else:
            message = f"source pods span multiple nodes ({', '.join(nodes)})"
        _refuse(work, mig, record, message, event=EVENT_FROM_NODE_MISMATCH)
        return None
    observed = nodes[0]
    if wanted and wanted != observed:
        work.tell(
            EVENT_FROM_NODE_MISMATCH,
            f"request.FromNode={wanted} does not match observed source node={observed}; "
            f"component={work.target.component} instance={record.source_instance} leaves "
            f"{observed}",
        )
    return observed


def _cap_breach(work: PassWork, mig: MigrationPass, record: MigrationStatus) -> str | None:
    audit = work.target.fleet.audit
    assert audit is not None
    others = [r for r in mig.records if r.request_uuid != record.request_uuid]
    in_flight = sum(1 for r in others if not r.terminal and r.surge_instance is not None)
    if in_flight >= audit.max_in_flight_migrations:
        return f"in-flight migration cap reached ({in_flight}/{audit.max_in_flight_migrations})"
    horizon = work.now - dt.timedelta(seconds=audit.window)
    in_window = sum(1 for r in others if r.allocated_at is not None and r.allocated_at > horizon)
    if in_window >= audit.max_migrations_per_window:
        return (
            f"migration rate cap reached ({in_window}/{audit.max_migrations_per_window} in the "
            f"last {go_duration(audit.window)})"
        )
    return None


def _free_index(mig: MigrationPass) -> int:
    """The lowest index no Instance holds (a row, pods, a wanted slot, another surge)."""
    taken = {inst.index for inst in mig.instances}
    taken |= {r.surge_instance for r in mig.records if r.surge_instance is not None}
    index = 0
    while index in taken:
        index += 1
    return index


# -- the pair of rows, the surge's pods ---------------------------------------------------------


def _surge_work(work: PassWork, record: MigrationStatus) -> InstanceWork:
    assert record.surge_instance is not None
    return InstanceWork(
        facts=instance_facts(work.target, record.surge_instance, ()),
        previous=None,
        incarnation=1,
        op=None,
        wanted=False,
        surge_of=record.source_instance,
    )


def _start_migrate(
    work: PassWork, record: MigrationStatus, inst: InstanceWork, source: InstanceWork
) -> Operation:
    """A Migrate operation on ``inst`` (``source``, or its surge), at the surge's creation,
    targeting the source's running revision, with the record's request and deadline;
    ``surge_index`` names the other Instance. Only the source's names the node it leaves and
    the hints (:func:`is_migrating_source` tells the two apart by it)."""
    started = steps.start(
        work,
        inst,
        "Migrate",
        STEP_CREATE_SURGE,
        reason=names.OperationReason.MIGRATION,
        target_revision=_running_revision(source),
    )
    update: dict[str, Any] = {"deadline": record.deadline, "request_uuid": record.request_uuid}
    if inst is source:
        update |= {
            "surge_index": record.surge_instance,
            "from_node": record.from_node,
            "hint_target_nodes": record.hint_target_nodes,
        }
    else:
        update["surge_index"] = record.source_instance
    return started.model_copy(update=update)


def _stamp(
    work: PassWork, record: MigrationStatus, source: InstanceWork, surge: InstanceWork
) -> None:
    """The source's and the surge's Migrate operations (idempotent: kept once written)."""
    assert record.surge_instance is not None
    surge.surge_of = record.source_instance
    for inst in (source, surge):
        if not _migrate_op(inst.op, record):
            inst.op = _start_migrate(work, record, inst, source)
    step = names.STEP_CREATE_PODS if surge.facts.missing else names.STEP_WAIT_READY
    assert surge.op is not None
    surge.op = operations.at_step(surge.op, step, work.now)


def _create_hold(
    work: PassWork, record: MigrationStatus, surge: InstanceWork, blocked: CreateRefusal | None
) -> None:
    """A transient refusal of the surge's create (quota, an unreachable webhook) shows as the
    surge's waiting token (QuotaExceeded, AdmissionUnavailable) and is told once per cause,
    with the status write that sets the token, in a Warning MigrationSurgeCreateBlocked; the
    create is retried until the deadline. The token goes once a create gets through."""
    op = surge.op
    if op is None:
        return
    token = blocked.token if blocked is not None and not blocked.permanent else None
    if op.waiting == token or (op.waiting is not None and op.waiting not in _CREATE_HOLDS):
        return
    surge.op = op.model_copy(update={"waiting": token})
    if blocked is not None and token is not None:
        work.warn(
            EVENT_CREATE_BLOCKED,
            migration_event(
                record.request_uuid,
                f"waiting to create surge pod {blocked.pod} before its deadline",
            ),
        )


_CREATE_HOLDS: Final = frozenset({names.WAITING_QUOTA, names.WAITING_ADMISSION})


def _wedged(work: PassWork, surge: InstanceWork) -> tuple[str, str] | None:
    """A surge pod stuck in a terminal waiting reason past ``stuckPodGracePeriod``."""
    grace = work.target.fleet.stuck_pod_grace_period
    if not grace or grace <= 0:
        return None
    for pod in surge.facts.live:
        stall = pod.stall
        if stall is None or stall.kind != "Stuck":
            continue
        left = (stall.since + dt.timedelta(seconds=grace) - work.now).total_seconds()
        if left <= 0:
            return pod.name, stall.reason
        work.requeue.append(left)
    return None


def _create_surge(
    work: PassWork, mig: MigrationPass, record: MigrationStatus, surge: InstanceWork
) -> None:
    """The surge's missing pods, built from its source's running revision, kept off the node
    the source leaves (the source is in the pass: the drive checked it)."""
    if not work.act or not podgroups.admits(work, surge):
        return
    target = work.target
    source = mig.by_index[record.source_instance]
    revision = _running_revision(source) or target.update_revision
    payload = source_payload(target, revision, mig.payloads)
    if payload is None:
        return
    built = dataclasses.replace(target, update_revision=revision, revision_payload=payload)
    assert surge.op is not None
    op_id = surge.op.id or ""
    work.creates.append(
        CreatePods(
            index=surge.index,
            operation_id=op_id,
            pods=tuple(
                PodToCreate(
                    slot.name,
                    with_overlay(
                        render_pod(
                            built,
                            index=surge.index,
                            incarnation=surge.incarnation,
                            slot=slot,
                            operation_id=op_id,
                        ),
                        from_node=record.from_node,
                        hints=tuple(record.hint_target_nodes or ()),
                    ),
                )
                for slot in surge.facts.missing
            ),
        )
    )
    surge.created_now = True


def is_migrating_source(op: Operation | None) -> bool:
    """The source's Migrate operation names the node it leaves; the surge's doesn't."""
    return op is not None and op.type == "Migrate" and op.from_node is not None


__all__ = [
    "MigrationPass",
    "is_migrating_source",
    "plan_migrations",
    "surge_sources",
    "wanted_indexes",
]
