"""What omed owns of an InferenceReplica, and the writes that set it. Pure.

The InferenceService controller is the only writer of an InferenceReplica's spec, and writes
nothing else of it but its own labels and annotations and the controller reference: a
patch carries exactly those, set as the projection wants them, on the resourceVersion read,
so whatever a user or another tool keeps on the replica stays, and a replica that moved on
is a Conflict the next pass reads again. The spec is compared and digested in the form the
API server stores (:func:`spec_json`), so a spec the models read back is never a change.
"""

from __future__ import annotations

import copy
import hashlib
from collections.abc import Mapping
from typing import Any, Final

import orjson

from omed.api.base import ObjectMeta
from omed.api.constants import LABEL_INFERENCE_SERVICE
from omed.api.inferencereplica import InferenceReplica, InferenceReplicaSpec

ANNOTATION_SPEC_HASH: Final = "ome.io/inferenceservice-spec-hash"
"""On an InferenceReplica: the digest of the spec its InferenceService last wrote."""


def wire(value: Any) -> Any:
    """``value`` as the API server stores JSON: integral floats become integers."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {k: wire(v) for k, v in value.items()}
    if isinstance(value, list):
        return [wire(v) for v in value]
    return value


def spec_json(spec: InferenceReplicaSpec) -> dict[str, Any]:
    """``spec`` as JSON in the wire form: the lifecycle, the one part with floats, as the API
    server stores it."""
    dumped = spec.to_dict()
    if "lifecycle" in dumped:
        dumped["lifecycle"] = wire(dumped["lifecycle"])
    return dumped


def replica_json(replica: InferenceReplica) -> dict[str, Any]:
    """``replica`` as the body of a create, in the wire form."""
    return {**replica.to_dict(), "spec": spec_json(replica.spec)}


def spec_hash(spec: Mapping[str, Any]) -> str:
    """A digest of the wanted spec, kept in an annotation on the InferenceReplica.

    Comparing digests of what omed *wanted* (rather than the stored spec) keeps a reconcile
    that changes nothing free of writes even when the API server prunes or normalises a
    field on the way in: the stored copy may differ from the wanted one forever.
    """
    return hashlib.sha256(orjson.dumps(spec, option=orjson.OPT_SORT_KEYS)).hexdigest()[:16]


def owned_by(replica: InferenceReplica, uid: str | None) -> bool:
    """Whether ``replica``'s controller owner reference names ``uid``."""
    return any(o.controller and o.uid == uid for o in replica.metadata.owner_references or ())


def adoptable(current: InferenceReplica, wanted: InferenceReplica) -> bool:
    """Whether ``current`` (the replica of the wanted name) is one an InferenceService may
    adopt: no controller owns it, it isn't being deleted, and its ``ome.io/inferenceservice``
    label, ``spec.parentRef`` and component are the ones the projection wants."""
    meta = current.metadata
    if meta.controller_ref() is not None or meta.deletion_timestamp is not None:
        return False
    parent = current.spec.parent_ref
    return bool(
        meta.label(LABEL_INFERENCE_SERVICE) == wanted.metadata.label(LABEL_INFERENCE_SERVICE)
        and wanted.spec.parent_ref is not None
        and parent is not None
        and parent.name == wanted.spec.parent_ref.name
        and current.spec.component == wanted.spec.component
    )


def _owners(meta: ObjectMeta) -> list[dict[str, Any]]:
    return [o.to_dict() for o in meta.owner_references or ()]


def needs_update(current: InferenceReplica, wanted: InferenceReplica) -> bool:
    """Whether the stored InferenceReplica differs from the wanted one in what omed owns: the
    wanted labels and annotations (the spec digest among them) and the controller reference."""
    for have, want in (
        (current.metadata.labels, wanted.metadata.labels),
        (current.metadata.annotations, wanted.metadata.annotations),
    ):
        if any((have or {}).get(k) != v for k, v in (want or {}).items()):
            return True
    reference = wanted.metadata.controller_ref()
    return reference is None or not owned_by(current, reference.uid)


def merge_diff(old: Mapping[str, Any], new: Mapping[str, Any]) -> dict[str, Any]:
    """The JSON merge patch (RFC 7386) that turns ``old`` into ``new``: keys of ``old`` that
    ``new`` lacks are ``None`` (removed), objects are compared key by key, anything else
    (lists included) is replaced whole when it differs. Empty when they are equal."""
    patch: dict[str, Any] = {key: None for key in old if key not in new}
    for key, value in new.items():
        before = old.get(key)
        if isinstance(value, Mapping) and isinstance(before, Mapping):
            nested = merge_diff(before, value)
            if nested:
                patch[key] = nested
        elif key not in old or before != value:
            patch[key] = copy.deepcopy(value)
    return patch


def update_patch(current: InferenceReplica, wanted: InferenceReplica) -> dict[str, Any]:
    """A JSON merge patch of only what omed owns of ``current``, set as ``wanted`` has it.

    Owned: the spec (made equal to the wanted one, keys it lacks removed), the wanted labels
    and annotations (others are left as stored: a user's, and kubectl's last-applied
    configuration, which the informer cache strips), and the controller owner reference (other
    references kept). The patch carries ``current``'s resourceVersion, which the API server
    checks (a Conflict when the object moved on), so it is built on what the controller read.
    A PUT of the cached object would drop whatever the cache left out.
    """
    cur_meta, want_meta = current.metadata, wanted.metadata
    meta: dict[str, Any] = {"resourceVersion": cur_meta.resource_version}
    for field, have, want in (
        ("labels", cur_meta.labels, want_meta.labels),
        ("annotations", cur_meta.annotations, want_meta.annotations),
    ):
        changed = {k: v for k, v in (want or {}).items() if (have or {}).get(k) != v}
        if changed:
            meta[field] = changed
    stored = _owners(cur_meta)
    owners = [*_owners(want_meta), *(o for o in stored if not o.get("controller"))]
    if owners != stored:
        meta["ownerReferences"] = owners
    patch: dict[str, Any] = {"metadata": meta}
    spec = merge_diff(spec_json(current.spec), spec_json(wanted.spec))
    if spec:
        patch["spec"] = spec
    return patch
