"""The InferenceReplica's ControllerRevisions: the update revision's name, record and history.

Why: a revision is a version of the component's pod template, and upstream OME keeps each as a
ControllerRevision ``<isvc>-<component>-<hash>`` in the replica's namespace, owned by the
InferenceReplica (controller reference), labelled ``ome.io/inferenceservice``, ``component``
and ``ome.io/managed-by: OMENative``, its ``data`` the revision payload
(:func:`omed.api.revision.revision_payload`) and its ``revision`` one more than the highest of
the replica's. Pods are built from that payload, so a revision's pods can be made again from
its record after the templates moved on.

Decided here, from the label-scoped cache of them (pure):

* the update revision's name: upstream's hash with ``status.collisionCount``; a
  ControllerRevision of the name that another object controls, or that holds other data, is a
  collision, and the count goes up until the name is free or ours (the count is stored in the
  status, so the name stays put);
* the create of the update revision's ControllerRevision when the cache lacks it (before any
  pod of it is created);
* retention: the revisions in use (the update and current revisions, every row's running and
  target revision, every retry block's) are kept, and of the rest the ``revisionHistoryLimit``
  newest (by ``revision``; 10 when unset); older ones are deleted, by uid;
* the names omed gave before upstream's hash (:func:`~.podtemplate.legacy_revision_of`): a
  pod, row, retry block or status revision naming the legacy name of the *current* templates
  means the update revision, so a manager upgraded under running Instances adopts them
  without a rollout and writes the new name into the rows.
"""

from __future__ import annotations

import dataclasses
import hashlib
import operator
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

import orjson

from omed.api.constants import (
    API_VERSION,
    KIND_INFERENCE_REPLICA,
    LABEL_COMPONENT,
    LABEL_INFERENCE_SERVICE,
    LABEL_MANAGED_BY,
    MANAGED_BY_OME_NATIVE,
)
from omed.api.gojson import marshal_untyped
from omed.api.inferencereplica import InferenceReplicaStatus, InstanceStatus
from omed.controllers.inferencereplica.core.model import PodView, ReplicaTarget, RunnerShape
from omed.controllers.inferencereplica.core.objectrefs import ObjectRef
from omed.controllers.inferencereplica.core.podtemplate import (
    legacy_revision_of,
    revision_of,
    template_digests,
)
from omed.controllers.inferencereplica.core.revisionactions import (
    AdoptControllerRevision,
    CreateControllerRevision,
    DeleteControllerRevision,
)
from omed.controllers.owners import controller_reference, controller_uid

MAX_COLLISIONS: Final = 100
"""Collision counts tried in one pass before the name is taken as it is (the create then fails
with AlreadyExists and the pass is retried)."""


@dataclass(frozen=True, slots=True)
class RevisionView(ObjectRef):
    """One ControllerRevision of the cache."""

    revision: int
    data_digest: str
    """SHA-256 of ``data`` as compact JSON with sorted keys (compared with the payload's, never
    stored)."""
    ours: bool
    """Its controller reference is this InferenceReplica (by uid)."""
    controlled: bool = True
    """It has a controller reference at all (False: an orphan, adoptable)."""
    resource_version: str = ""


@dataclass(frozen=True, slots=True)
class ResolvedRevision:
    name: str
    payload: bytes
    collision_count: int
    legacy: str | None
    adopt: RevisionView | None = None
    """An orphaned record of this payload whose name is the update revision (to adopt)."""


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


_DATA_DIGESTS: dict[str, tuple[Any, str]] = {}
_DATA_DIGESTS_LIMIT: Final = 65536


def _record_digest(uid: str, data: Any) -> str:
    """The digest of a record's ``data``, memoised per record while the cache holds the same
    ``data`` object: each pass needs the digests of every cached record of the replica, a
    record's ``data`` never changes (the API server refuses it), and cached objects are never
    mutated, so the same object means the same content. The memo keeps the object it was
    computed from, so an identity is never mistaken for a later object's."""
    found = _DATA_DIGESTS.get(uid) if uid else None
    if found is not None and found[0] is data:
        return found[1]
    digest = _digest(_data_bytes(data))
    if uid:
        if len(_DATA_DIGESTS) >= _DATA_DIGESTS_LIMIT:
            _DATA_DIGESTS.clear()
        _DATA_DIGESTS[uid] = (data, digest)
    return digest


def _data_bytes(data: Any) -> bytes:
    return orjson.dumps(data, option=orjson.OPT_SORT_KEYS) if data is not None else b""


def revision_views(revisions: Iterable[Mapping[str, Any]], *, uid: str) -> tuple[RevisionView, ...]:
    """The cached ControllerRevisions, as the core compares them."""
    views = []
    for obj in revisions:
        meta = obj.get("metadata") or {}
        number = obj.get("revision")
        views.append(
            RevisionView(
                name=str(meta.get("name") or ""),
                uid=str(meta.get("uid") or ""),
                revision=number if isinstance(number, int) else 0,
                data_digest=_record_digest(str(meta.get("uid") or ""), obj.get("data")),
                ours=bool(uid) and controller_uid(obj, kind=KIND_INFERENCE_REPLICA) == uid,
                controlled=any(ref.get("controller") for ref in meta.get("ownerReferences") or ()),
                resource_version=str(meta.get("resourceVersion") or ""),
            )
        )
    return tuple(sorted(views, key=lambda v: v.name))


def resolve_revision(
    *,
    isvc: str,
    component: str,
    runners: tuple[RunnerShape, ...],
    owner_uid: str,
    replica_uid: str,
    collision_count: int,
    existing: tuple[RevisionView, ...],
) -> ResolvedRevision:
    """The update revision: upstream's name at the first collision count from the stored one
    whose name no other object (or other data) holds in the cache."""
    digests = template_digests(runners)
    payload, wanted = digests.payload, digests.data_digest
    by_name = {view.name: view for view in existing}
    cc = collision_count
    for _ in range(MAX_COLLISIONS):
        name = revision_of(
            isvc=isvc,
            component=component,
            runners=runners,
            owner_uid=owner_uid,
            collision_count=cc,
        )
        held = by_name.get(name)
        if held is None or (held.ours and held.data_digest == wanted):
            break
        cc += 1
    legacy = legacy_revision_of(isvc=isvc, component=component, runners=runners)
    kept = [v for v in existing if (v.ours or not v.controlled) and v.data_digest == wanted]
    if name not in by_name and kept:
        # An earlier replica of this name was deleted with its records orphaned (their hash
        # is scoped to its uid): the newest record of this payload, orphaned or adopted since,
        # keeps its name, so the pods made from it aren't rolled.
        found = max(kept, key=lambda v: (v.revision, v.name))
        adopt = found if not found.controlled else None
        return ResolvedRevision(
            name=found.name, payload=payload, collision_count=cc, legacy=legacy, adopt=adopt
        )
    return ResolvedRevision(name=name, payload=payload, collision_count=cc, legacy=legacy)


def labels_of(target: ReplicaTarget) -> dict[str, str]:
    """The labels of the replica's ControllerRevisions (and the informer's scope)."""
    return {
        LABEL_INFERENCE_SERVICE: target.isvc,
        LABEL_COMPONENT: target.component,
        LABEL_MANAGED_BY: MANAGED_BY_OME_NATIVE,
    }


REVISION_SELECTOR: Final = f"{LABEL_MANAGED_BY}={MANAGED_BY_OME_NATIVE},{LABEL_COMPONENT}"
"""The label selector of the ControllerRevision cache: InferenceReplica revisions only (runtime
revisions carry ``ome.io/runtime-of`` and no ``component``)."""


def adopt_action(
    target: ReplicaTarget, existing: tuple[RevisionView, ...]
) -> AdoptControllerRevision | None:
    """The adoption of the orphaned record that names the update revision, if any."""
    found = next(
        (v for v in existing if v.name == target.update_revision and not v.controlled), None
    )
    if found is None:
        return None
    return AdoptControllerRevision(
        name=found.name, uid=found.uid, resource_version=found.resource_version
    )


def create_action(
    target: ReplicaTarget, existing: tuple[RevisionView, ...]
) -> CreateControllerRevision | None:
    """The create of the update revision's record, when the cache lacks it."""
    if not target.revision_payload or any(v.name == target.update_revision for v in existing):
        return None
    number = max((v.revision for v in existing if v.ours), default=0) + 1
    owner = controller_reference(kind=KIND_INFERENCE_REPLICA, name=target.name, uid=target.uid)
    assert owner["apiVersion"] == API_VERSION
    body: dict[str, Any] = {
        "apiVersion": "apps/v1",
        "kind": "ControllerRevision",
        "metadata": {
            "name": target.update_revision,
            "namespace": target.namespace,
            "labels": labels_of(target),
            "ownerReferences": [owner],
        },
        # Bytes in the form a merge patch re-encodes them to (see
        # omed.api.gojson.marshal_untyped), or the collector's orphaning patch is refused.
        "data": orjson.Fragment(marshal_untyped(orjson.loads(target.revision_payload)).encode()),
        "revision": number,
    }
    return CreateControllerRevision(name=target.update_revision, body=body)


def in_use(
    target: ReplicaTarget,
    rows: Iterable[InstanceStatus],
    status: InferenceReplicaStatus,
) -> frozenset[str]:
    """Revision names something still refers to."""
    names: set[str | None] = {target.update_revision, status.current_revision or ""}
    for block in status.retry_blocks or ():
        names.add(block.target_revision)
    return frozenset(name for name in names if name) | named_by(tuple(rows))  # no None, no ""


def named_by(rows: Sequence[InstanceStatus]) -> frozenset[str]:
    """The revision names ``rows`` refer to (running, target, their operations' target): the
    union of each row's :func:`_named_by_row`."""
    names: set[str | None] = set(map(_RUNNING, rows))
    names.update(map(_TARGET, rows))
    names.update(map(_TARGET, [row.operation for row in rows if row.operation is not None]))
    return frozenset(name for name in names if name)  # no None, no ""


def named_by_patched(
    old: tuple[tuple[InstanceStatus, ...]],
    named: frozenset[str],
    new: tuple[tuple[InstanceStatus, ...]],
    changed: list[int],
) -> frozenset[str] | None:
    """:func:`named_by` of ``new`` from ``named``, that of ``old``, which differs from it at
    ``changed`` only: the names the changed rows add; None (not known without a look at
    every row) when a changed row no longer names one it named."""
    [before], [after] = old, new
    added: set[str] = set()
    for pos in changed:
        was, now = _named_by_row(before[pos]), _named_by_row(after[pos])
        if not was <= now:
            return None
        added |= now - was
    return named | added if added else named


def _named_by_row(row: InstanceStatus) -> frozenset[str]:
    op = row.operation
    found = (
        row.running_revision,
        row.target_revision,
        op.target_revision if op is not None else None,
    )
    return frozenset(name for name in found if name)


_RUNNING: Final = operator.attrgetter("running_revision")
_TARGET: Final = operator.attrgetter("target_revision")


def retention(
    target: ReplicaTarget,
    existing: tuple[RevisionView, ...],
    live: frozenset[str],
) -> tuple[DeleteControllerRevision, ...]:
    """Old revisions past ``revisionHistoryLimit`` (newest kept), never one in use."""
    old = sorted(
        (v for v in existing if v.ours and v.name not in live),
        key=lambda v: (v.revision, v.name),
        reverse=True,
    )
    return tuple(
        DeleteControllerRevision(v.name, v.uid) for v in old[target.revision_history_limit :]
    )


@dataclass(frozen=True, slots=True)
class LegacyTranslation:
    """Reads the legacy name of the current templates as the update revision."""

    legacy: str | None
    update: str

    def _name(self, name: str | None) -> str | None:
        return self.update if name is not None and name == self.legacy else name

    def pod(self, view: PodView) -> PodView:
        if self.legacy is None or view.revision != self.legacy:
            return view
        return dataclasses.replace(view, revision=self.update)

    def rows(self, rows: Mapping[int, InstanceStatus]) -> Mapping[int, InstanceStatus]:
        if self.legacy is None:
            return rows
        out: dict[int, InstanceStatus] = {}
        for index, row in rows.items():
            op = row.operation
            if self.legacy not in (
                row.running_revision,
                row.target_revision,
                op.target_revision if op is not None else None,
            ):
                out[index] = row
                continue
            update: dict[str, Any] = {
                "running_revision": self._name(row.running_revision),
                "target_revision": self._name(row.target_revision),
            }
            if op is not None:
                update["operation"] = op.model_copy(
                    update={"target_revision": self._name(op.target_revision)}
                )
            out[index] = row.model_copy(update=update)
        return out

    def status(self, status: InferenceReplicaStatus) -> InferenceReplicaStatus:
        if self.legacy is None:
            return status
        blocks = status.retry_blocks
        if blocks and any(b.target_revision == self.legacy for b in blocks):
            blocks = [
                b.model_copy(update={"target_revision": self._name(b.target_revision)})
                for b in blocks
            ]
        return status.model_copy(
            update={
                "retry_blocks": blocks,
                "current_revision": self._name(status.current_revision),
                "update_revision": self._name(status.update_revision),
            }
        )


def legacy_translation(target: ReplicaTarget) -> LegacyTranslation:
    legacy = target.legacy_revision
    return LegacyTranslation(
        legacy=legacy if legacy != target.update_revision else None, update=target.update_revision
    )
