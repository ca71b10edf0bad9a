"""The InferenceReplica's status summary: counts, revisions, selector and conditions.

Why: the scale subresource, the InferenceService's aggregated conditions and users' scripts
read these fields rather than the rows, so each count has one definition:

* ``replicas``: Instances with at least one pod and no Delete operation;
* ``readyReplicas``: rows in phase Ready (every pod Ready);
* ``servingReplicas``: Instances whose every pod it should have has its gate True;
* ``availableReplicas``: Ready Instances whose every pod is available (minReadySeconds);
* ``updatedReplicas``: Instances (not being deleted) whose live pods all run the update
  revision;
* ``currentRevision``: the update revision once every Instance runs it, else the revision
  most Instances not yet updated run (the previous value while nothing runs);
* ``labelSelector``: ``ome.io/inferenceservice=<isvc>,component=<component>``;
* conditions ``Ready`` (every wanted Instance is Ready) and ``Progressing`` (work in flight,
  or waiting for budget, or paused with work left; False with reason UpdateBlocked while
  stale Instances wait on a Held revision or an impossible in-place update).

Retry blocks and migrations are other passes' business and are carried over untouched.
Invariant: pure, and stable on its own output like :mod:`.rows`.
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Final

from omed.api.base import ConditionStatus
from omed.api.inferencereplica import InferenceReplicaStatus, InstanceStatus
from omed.controllers.inferencereplica.core import names
from omed.controllers.inferencereplica.core.model import ReplicaTarget
from omed.controllers.inferencereplica.core.rows import InstanceFacts, condition
from omed.controllers.inferencereplica.core.samememo import SameMemo


def summarize(
    *,
    target: ReplicaTarget,
    rows: Sequence[InstanceStatus],
    facts: Mapping[int, InstanceFacts],
    previous: InferenceReplicaStatus,
    progress: str,
    now: dt.datetime,
    wanted_indexes: frozenset[int] | None = None,
) -> InferenceReplicaStatus:
    """The summary for ``rows``; ``progress`` is one of the Progressing reasons in names;
    ``wanted_indexes``: the Instances the replica keeps (``range(replicas)`` unless a
    migration left a gap)."""
    wanted = 0 if target.deleting else target.replicas
    keep = wanted_indexes if wanted_indexes is not None else frozenset(range(wanted))
    per_instance = target.pods_per_instance
    existing, ready, serving, available, updated, wanted_ready, others = _COUNTS.get(
        target.uid,
        (rows, tuple(facts.values())),
        (tuple(facts), keep, (per_instance, target.update_revision)),
    )
    if updated == existing:
        current = target.update_revision
    else:
        current = (others or previous.current_revision) or target.update_revision

    all_ready = wanted_ready >= wanted
    ready_condition = condition(
        previous.conditions,
        type=names.CONDITION_READY,
        status="True" if all_ready else "False",
        reason=names.READY_ALL if all_ready else names.READY_NOT_ALL,
        message=f"{wanted_ready}/{wanted} Instances are Ready",
        now=now,
        generation=target.generation,
    )
    progressing_status: ConditionStatus = (
        "False"
        if progress
        in (names.PROGRESS_COMPLETE, names.PROGRESS_PAUSED, names.PROGRESS_UPDATE_BLOCKED)
        else "True"
    )
    progressing = condition(
        previous.conditions,
        type=names.CONDITION_PROGRESSING,
        status=progressing_status,
        reason=progress,
        message=_progress_message(progress),
        now=now,
        generation=target.generation,
    )
    return InferenceReplicaStatus(
        observed_generation=target.generation,
        replicas=existing,
        ready_replicas=ready,
        serving_replicas=serving,
        available_replicas=available,
        updated_replicas=updated,
        current_revision=current,
        update_revision=target.update_revision,
        collision_count=target.collision_count or previous.collision_count,
        label_selector=names.label_selector(target.isvc, target.component),
        conditions=[ready_condition, progressing],
        retry_blocks=previous.retry_blocks,
        migrations=previous.migrations,
    )


def _counts(
    rows: Sequence[InstanceStatus],
    facts: Sequence[InstanceFacts],
    indexes: Sequence[int],
    keep: frozenset[int],
    shape: tuple[int, str],
) -> tuple[int, int, int, int, int, int, str | None]:
    """The counts of ``rows`` (existing, ready, serving, available, updated, wanted Ready)
    and the revision most existing rows not updated run (None when none does); ``facts``
    are the Instances' facts, under ``indexes``; ``shape`` the pods per Instance and the
    update revision. One look at each row for every count."""
    per_instance, revision = shape
    existing = ready = serving = available = updated = wanted_ready = 0
    others: Counter[str] = Counter()
    facts_of = dict(zip(indexes, facts, strict=True)).get
    for row in rows:
        phase = row.phase
        if phase == "Ready" or (phase == "Migrating" and row.ready_since is not None):
            ready += 1
            if (row.available_pod_count or 0) >= per_instance > 0:
                available += 1
            if row.index in keep:
                wanted_ready += 1
        if not row.pod_count or (row.operation and row.operation.type == "Delete"):
            continue
        existing += 1
        if (row.serving_pod_count or 0) >= per_instance > 0:
            serving += 1
        instance = facts_of(row.index)
        if instance is not None and instance.all_on(revision):
            updated += 1
        else:
            running = row.running_revision or row.target_revision
            if running:
                others[running] += 1
    most = others.most_common(1)[0][0] if others else None
    return existing, ready, serving, available, updated, wanted_ready, most


_COUNTS: Final = SameMemo(_counts)
"""The counts of the very same rows and facts (a pass that changed nothing has both)."""


def _progress_message(reason: str) -> str:
    return {
        names.PROGRESS_SCALING_UP: "creating Instances",
        names.PROGRESS_SCALING_DOWN: "deleting Instances",
        names.PROGRESS_TERMINATING: "deleting every Instance of the InferenceReplica",
        names.PROGRESS_WAITING: "waiting for Instances to become Ready",
        names.PROGRESS_PAUSED: "paused: pods are left as they are",
        names.PROGRESS_COMPLETE: "every Instance is as wanted",
        names.PROGRESS_UPDATING: "moving Instances to the update revision",
        names.PROGRESS_UPDATE_BLOCKED: "the update is blocked: see condition UpdateBlocked",
    }.get(reason, reason)
