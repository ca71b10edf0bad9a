"""The InferenceReplica's status summary: counts, revisions, selector and conditions.

Why: the scale subresource, the InferenceService's aggregated conditions and users' scripts
read these fields rather than the rows, so each count has one definition:

* ``replicas``: Instances with at least one pod and no Delete operation;
* ``readyReplicas``: rows in phase Ready (every pod Ready), and a migrating source while it
  is Ready; a migration's source and surge count once (:class:`PairCounts`);
* ``servingReplicas``: Instances whose every pod it should have has its gate True;
* ``availableReplicas``: Ready Instances whose every pod is available (minReadySeconds),
  a migration's pair counted once as for ``readyReplicas``;
* ``updatedReplicas``: Instances (not being deleted) whose live pods all run the update
  revision;
* ``currentRevision``: the update revision once every Instance runs it, else the revision
  most Instances not yet updated run (the previous value while nothing runs);
* ``labelSelector``: ``ome.io/inferenceservice=<isvc>,component=<component>``;
* conditions ``Ready`` (every wanted Instance is Ready, a serving surge standing in for its
  source) and ``Progressing`` (work in flight, or waiting for budget, or paused with work
  left; False with reason UpdateBlocked while stale Instances wait on a Held revision or an
  impossible in-place update).

Retry blocks and migrations are other passes' business and are carried over untouched.
Invariant: pure, and stable on its own output like :mod:`.rows`.
"""

from __future__ import annotations

import datetime as dt
import operator
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final

from omed.api.base import ConditionStatus
from omed.api.inferencereplica import InferenceReplicaStatus, InstanceStatus
from omed.controllers.inferencereplica.core import names
from omed.controllers.inferencereplica.core.model import ReplicaTarget
from omed.controllers.inferencereplica.core.rows import InstanceFacts, condition
from omed.controllers.inferencereplica.core.samememo import SameMemo


@dataclass(frozen=True, slots=True)
class PairCounts:
    """Which Instance of each migration's pair the readiness counts see
    (:func:`.ops.migrate.pair_counts` decides it from the records).

    A migration moves one Instance, so the pair counts once in ``readyReplicas``,
    ``availableReplicas`` and the Ready condition: the source until the record is SurgeReady,
    the surge from then on (the source drains behind a surge already serving, so no count
    dips and Ready holds through the move). ``replicas`` and ``servingReplicas`` still count
    both while both have pods and gates (``replicas`` is one over the wanted count during the
    move, as upstream's is)."""

    aside: frozenset[int] = frozenset()
    """Rows the Ready and available counts leave out (a surge not serving yet, a source
    whose surge serves)."""
    stand_in: Mapping[int, int] = field(default_factory=dict)
    """source -> surge: the surge counts as wanted in its source's place."""

    def wanted(self, keep: frozenset[int]) -> frozenset[int]:
        """``keep`` with each source whose surge stands in replaced by that surge."""
        if not self.stand_in:
            return keep
        swapped = {source for source in self.stand_in if source in keep}
        return (keep - swapped) | {self.stand_in[source] for source in swapped}


NO_PAIRS: Final = PairCounts()


def summarize(
    *,
    target: ReplicaTarget,
    rows: Sequence[InstanceStatus],
    facts: Mapping[int, InstanceFacts] | Sequence[InstanceFacts | None],
    previous: InferenceReplicaStatus,
    progress: str,
    now: dt.datetime,
    wanted_indexes: frozenset[int] | None = None,
    pairs: PairCounts = NO_PAIRS,
) -> InferenceReplicaStatus:
    """The summary for ``rows``; ``facts``: the Instances' facts by index, or each row's at
    its position (None: none); ``progress`` is one of the Progressing reasons in names;
    ``wanted_indexes``: the Instances the replica keeps (``range(replicas)`` unless a
    migration left a gap); ``pairs``: which Instance of each migration's pair the readiness
    counts see."""
    wanted = 0 if target.deleting else target.replicas
    keep = wanted_indexes if wanted_indexes is not None else frozenset(range(wanted))
    per_instance = target.pods_per_instance
    existing, ready, serving, available, updated, wanted_ready, others = _COUNTS.get(
        target.uid,
        (
            rows,
            tuple(map(facts.get, map(_INDEX, rows)))
            if isinstance(facts, Mapping)
            else tuple(facts),
        ),
        ((pairs.wanted(keep), pairs.aside, per_instance, target.update_revision),),
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


_INDEX: Final = operator.attrgetter("index")
_Counts = tuple[int, int, int, int, int, int, str | None]
"""Existing, ready, serving, available, updated, wanted Ready; and the revision most
existing rows not updated run (None when none does)."""
_RowCount = tuple[int, int, int, int, int, int, str | None]
"""What one row adds to each count; and its revision when it is existing, not updated."""
_Given = tuple[frozenset[int], frozenset[int], int, str]
"""The wanted indexes, the rows the readiness counts leave out, the pods per Instance, the
update revision."""


def _counts(
    rows: Sequence[InstanceStatus],
    facts: Sequence[InstanceFacts | None],
    given: _Given,
) -> _Counts:
    """The counts of ``rows``, each row's Instance facts at its position in ``facts`` (None:
    none), ``given`` as :data:`_Given` says: the sums of each row's :func:`_row_count`."""
    existing = ready = serving = available = updated = wanted_ready = 0
    others: Counter[str] = Counter()
    for row, instance in zip(rows, facts, strict=True):
        e, r, s, a, u, w, other = _row_count(row, instance, given)
        existing += e
        ready += r
        serving += s
        available += a
        updated += u
        wanted_ready += w
        if other is not None:
            others[other] += 1
    most = others.most_common(1)[0][0] if others else None
    return existing, ready, serving, available, updated, wanted_ready, most


def _row_count(row: InstanceStatus, instance: InstanceFacts | None, given: _Given) -> _RowCount:
    keep, aside, per_instance, revision = given
    ready = available = wanted_ready = 0
    phase = row.phase
    counted = phase == "Ready" or (phase == "Migrating" and row.ready_since is not None)
    if counted and row.index not in aside:
        ready = 1
        available = int((row.available_pod_count or 0) >= per_instance > 0)
        wanted_ready = int(row.index in keep)
    if not row.pod_count or (row.operation and row.operation.type == "Delete"):
        return 0, ready, 0, available, 0, wanted_ready, None
    serving = int((row.serving_pod_count or 0) >= per_instance > 0)
    if instance is not None and instance.all_on(revision):
        return 1, ready, serving, available, 1, wanted_ready, None
    other = row.running_revision or row.target_revision or None
    return 1, ready, serving, available, 0, wanted_ready, other


def _counts_patched(
    old: tuple[tuple[InstanceStatus, ...], tuple[InstanceFacts | None, ...]],
    counts: _Counts,
    new: tuple[tuple[InstanceStatus, ...], tuple[InstanceFacts | None, ...]],
    changed: list[int],
    given: _Given,
) -> _Counts | None:
    """:func:`_counts` of ``new`` from ``counts``, that of ``old``, which differs from it at
    ``changed`` only: each sum less what the old rows added, plus what the new ones add;
    None (the most common revision is not known without every row) when any row, before or
    after, is existing but not updated."""
    if counts[6] is not None:
        return None
    e, r, s, a, u, w, _ = counts
    for rows, facts, sign in ((old[0], old[1], -1), (new[0], new[1], 1)):
        for pos in changed:
            de, dr, ds, da, du, dw, other = _row_count(rows[pos], facts[pos], given)
            if other is not None:
                return None
            e, r, s, a = e + sign * de, r + sign * dr, s + sign * ds, a + sign * da
            u, w = u + sign * du, w + sign * dw
    return e, r, s, a, u, w, None


_COUNTS: Final = SameMemo(_counts, patch=_counts_patched)
"""The counts of the very same rows and facts (a pass that changed nothing has both), or
patched from them where a few changed."""


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
