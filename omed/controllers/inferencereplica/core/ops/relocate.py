"""Automatic relocation: a Create that failed on one node for a reason that may be the node's
is rebuilt elsewhere, within a budget.

Why: a pod that never comes up on a node with broken hardware, a dead driver or a damaged
runtime comes up nowhere if it is rebuilt on the same node, and holding its revision for a
fault that isn't the revision's wedges a rollout. Upstream OME answers such an attempt with a
*relocation directive* (not a surge migration: nothing serves yet to keep serving).

A Create disposed at its deadline (``instanceReadyTimeout``) or by a pod's grace
(``stuckPodGracePeriod``, ``unschedulableGracePeriod``, :mod:`..graces`) is relocated when all
hold:

* no pod of the attempt shows a workload-caused reason (:data:`WORKLOAD_REASONS`: the image or
  the configuration, which would fail on every node);
* the component's migration mode is Auto or Surge (Never turns relocation off);
* ``lifecycle.autoMigrate.maxAttempts`` > 0 and the Instance has budget left: fewer
  unconfirmed relocations (Relocated records without ``succeeded``) than that;
* the revision the attempt targets has served: some Instance runs it;
* the attempt's live pods all sit on one node (the suspect).

Then, in the pass's one status write: a born-terminal ``Relocated`` record (``trigger: Auto``,
``attempt: N``, ``fromNode`` the suspect, ``reason: AutoRecover``, ``message: relocation
directive recorded; rebuild steered off node <n>``, started = deadline = completed = now); an
audit row (``reason: AutoRecover``, phase Completed, outcome ``relocate-recreate``) ahead of
it; a Normal AutoMigrationTriggered, and a Warning AutoMigrationCapReached with the directive
that fills the last slot. The Instance's Create starts again at its drain step: its pods are
drained and deleted, and its next incarnation is created with a required node affinity off
every suspect of its unconfirmed records (the newest ``maxAttempts`` distinct nodes,
:func:`exclusions`). Its rebuild is a Create like any other, so if it fails the same way it
is relocated again, until the budget is spent; then the attempt fails as before. Once the
Instance is Ready its records get ``succeeded: true`` (:func:`confirm`), which frees the
budget and lifts the exclusions. The caps of ``lifecycle.audit`` don't apply: the record
allocates nothing.

Invariant: pure (the UUID is derived from the replica, the Instance, the attempt and the
time); the record and the rebuild's operation are in the same status write, ahead of any pod
action, so a manager killed after it resumes the rebuild and never records the attempt twice.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping, Sequence
from typing import Final

from omed.api.constants import MIGRATION_PHASE_RELOCATED
from omed.api.inferencereplica import InstanceStatus, MigrationStatus, OperationType
from omed.controllers.inferencereplica.core import names, steps
from omed.controllers.inferencereplica.core.actions import RETRY_SOON
from omed.controllers.inferencereplica.core.migrationactions import WriteAuditRow
from omed.controllers.inferencereplica.core.model import PodView
from omed.controllers.inferencereplica.core.ops.migrate import MigrationPass
from omed.controllers.inferencereplica.core.ops.migratenames import instance_event
from omed.controllers.inferencereplica.core.work import InstanceWork, PassWork
from omed.controllers.ledger.document import REASON_AUTO_RECOVER, own_entry

EVENT_TRIGGERED: Final = "AutoMigrationTriggered"
EVENT_CAP_REACHED: Final = "AutoMigrationCapReached"
WORKLOAD_REASONS: Final = frozenset(
    {"ImagePullBackOff", "ErrImagePull", "InvalidImageName", "CreateContainerConfigError"}
)
"""Waiting reasons that blame the revision (upstream's workload-caused set): never relocated."""


def _unconfirmed(records: Iterable[MigrationStatus], index: int) -> list[MigrationStatus]:
    return [
        r
        for r in records
        if r.phase == MIGRATION_PHASE_RELOCATED and r.source_instance == index and not r.succeeded
    ]


def exclusions(
    records: Sequence[MigrationStatus], max_attempts: int | None
) -> dict[int, tuple[str, ...]]:
    """Instance index -> the nodes its rebuilds are kept off: the suspects of its unconfirmed
    relocations, newest first, at most ``max_attempts`` distinct ones."""
    out: dict[int, list[str]] = {}
    newest_first = sorted(
        (
            r
            for r in records
            if r.phase == MIGRATION_PHASE_RELOCATED and not r.succeeded and r.from_node
        ),
        key=lambda r: r.started_at,
        reverse=True,
    )
    for record in newest_first:
        nodes = out.setdefault(record.source_instance, [])
        assert record.from_node is not None
        if record.from_node not in nodes and len(nodes) < max(max_attempts or 0, 1):
            nodes.append(record.from_node)
    return {index: tuple(nodes) for index, nodes in out.items()}


def _suspect(pods: Sequence[PodView]) -> str | None:
    nodes = {pod.node for pod in pods}
    if not pods or None in nodes or len(nodes) != 1:
        return None
    return next(iter(nodes))


def _workload_caused(pods: Sequence[PodView]) -> bool:
    for pod in pods:
        if pod.stall is not None and pod.stall.reason in WORKLOAD_REASONS:
            return True
        if pod.failure is not None and pod.failing and pod.failure.reason in WORKLOAD_REASONS:
            return True
    return False


def _served(revision: str, rows: Mapping[int, InstanceStatus]) -> bool:
    return any(row.running_revision == revision for row in rows.values())


def relocate(
    work: PassWork,
    mig: MigrationPass,
    inst: InstanceWork,
    *,
    pods: Sequence[PodView],
    revision: str,
    rows: Mapping[int, InstanceStatus],
    kind: OperationType = "Create",
) -> bool:
    """Relocate ``inst``, whose ``kind`` operation (a Create, or the Update of a single-pod
    Instance) this pass failed with ``pods`` live, if it qualifies (see the module
    docstring); True when it was, and ``inst.op`` is then the rebuild at its drain step."""
    target = work.target
    budget = target.fleet.auto_migrate.max_attempts or 0
    if target.migration_mode not in ("Auto", "Surge") or budget <= 0:
        return False
    if kind == "Update" and target.pods_per_instance != 1:
        return False
    node = _suspect(pods)
    if node is None or _workload_caused(pods) or not _served(revision, rows):
        return False
    attempt = len(_unconfirmed(mig.records, inst.index)) + 1
    if attempt > budget:
        return False
    now = work.now
    name = f"{target.uid}/{target.component}/{inst.index}/{attempt}/{now.isoformat()}"
    request = str(uuid.uuid5(uuid.NAMESPACE_URL, name))
    record = MigrationStatus(
        request_uuid=request,
        trigger="Auto",
        source_instance=inst.index,
        from_node=node,
        phase=MIGRATION_PHASE_RELOCATED,
        attempt=attempt,
        reason=REASON_AUTO_RECOVER,
        message=f"relocation directive recorded; rebuild steered off node {node}",
        started_at=now,
        deadline=now,
        completed_at=now,
    )
    mig.put(record)
    if mig.mailbox is not None:
        entry = own_entry(
            REASON_AUTO_RECOVER,
            key=request,
            component=target.component,
            index=inst.index,
            node=node,
            revision=revision,
            now=now,
        )
        mig.audit.append(WriteAuditRow(isvc=mig.mailbox.isvc, uid=mig.mailbox.uid, entry=entry))
    work.tell(
        EVENT_TRIGGERED,
        instance_event(
            target.component,
            inst.index,
            f"relocation directive recorded: attempt {attempt}/{budget}, rebuild steered off "
            f"node {node} (uuid={request})",
        ),
    )
    if attempt == budget:
        work.warn(
            EVENT_CAP_REACHED,
            instance_event(
                target.component,
                inst.index,
                f"relocation budget exhausted ({attempt}/{budget} attempts); further expiries "
                "dispose terminal without relocation",
            ),
        )
    surge = inst.op.surge_index if kind == "Update" and inst.op is not None else None
    inst.op = steps.start(
        work,
        inst,
        kind,
        names.STEP_DRAIN,
        reason=names.OperationReason.RELOCATION,
        target_revision=revision,
    ).model_copy(update={"deadline": steps.deadline(work), "surge_index": surge})
    inst.deadline_failed = False
    inst.create_failed = None
    work.excluded[inst.index] = exclusions(mig.records, budget).get(inst.index, ())
    work.requeue.append(RETRY_SOON)
    return True


def confirm(
    records: list[MigrationStatus], rows: Iterable[InstanceStatus]
) -> list[MigrationStatus]:
    """Relocated records of Instances that are Ready now, marked ``succeeded``."""
    if not records:
        return []
    ready = {row.index for row in rows if row.phase == "Ready" and row.operation is None}
    return [
        r.model_copy(update={"succeeded": True})
        if r.phase == MIGRATION_PHASE_RELOCATED and not r.succeeded and r.source_instance in ready
        else r
        for r in records
    ]


__all__ = ["confirm", "exclusions", "relocate"]
