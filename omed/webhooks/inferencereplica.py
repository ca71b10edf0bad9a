"""``/validate-ome-io-v1beta1-inferencereplica``: only omed writes InferenceReplicas.

Why: an InferenceReplica's spec is a projection of its InferenceService, written by the
InferenceService controller, which marks every replica it writes with
``ome.io/controller-write: "true"``. A hand edit would be overwritten at the next reconcile,
or, worse, act before it is: so a write without the mark is refused, and the user is told
to change the InferenceService instead.

One hand write is part of the product: ``kubectl ome instance release-held`` sets
``ome.io/release-held-revision`` on the component's replica, to release a Held retry block.
An UPDATE whose only change is that annotation is admitted even on a replica without the
mark, and whenever a write sets or changes the annotation, its value must be a full
revision of this replica: ``<isvc>-<component>-<8 hex>``, where ``<isvc>`` is the parent
(``spec.parentRef.name``, else the ``ome.io/inferenceservice`` label, else, for a standalone
replica, the replica's own name), cut as the controller cuts a prefix too long for a label
value.

Invariants: DELETE is always admitted, and so is an UPDATE of a replica already being
deleted (its finalizer must come off). Status writes never reach this webhook: its rules
name the main resource only. The mark is a statement of intent, not authentication:
RBAC decides who may write at all.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from omed.api.constants import (
    ANNOTATION_CONTROLLER_WRITE,
    ANNOTATION_RELEASE_HELD_REVISION,
    CONTROLLER_WRITE_TRUE,
    KIND_INFERENCE_REPLICA,
    LABEL_INFERENCE_SERVICE,
)
from omed.api.revision import MAX_REVISION_NAME_LENGTH, REVISION_HASH_LENGTH, is_revision_hash
from omed.webhooks.findings import format_loc, show
from omed.webhooks.review import (
    AdmissionResponse,
    Write,
    WriteValidator,
    allow,
    deny,
)

PATH: Final = "/validate-ome-io-v1beta1-inferencereplica"

SERVER_MANAGED_METADATA: Final = frozenset({"resourceVersion", "managedFields", "generation"})
"""Metadata that changes on every write whoever writes: ignored when comparing an UPDATE."""

CONTROLLER_WRITE_LOC: Final = format_loc(("metadata", "annotations", ANNOTATION_CONTROLLER_WRITE))
RELEASE_HELD_LOC: Final = format_loc(("metadata", "annotations", ANNOTATION_RELEASE_HELD_REVISION))
MSG_NOT_CONTROLLER: Final = (
    f'{CONTROLLER_WRITE_LOC}: must be "true": only the OME controller writes '
    "InferenceReplicas; change the InferenceService instead, or, to release a held revision, "
    f"change only the {ANNOTATION_RELEASE_HELD_REVISION} annotation "
    "(kubectl ome instance release-held)"
)


def _annotations(obj: Mapping[str, Any] | None) -> Mapping[str, Any]:
    metadata = obj.get("metadata") if obj is not None else None
    annotations = metadata.get("annotations") if isinstance(metadata, dict) else None
    return annotations if isinstance(annotations, dict) else {}


def _without_release_annotation(obj: Mapping[str, Any]) -> dict[str, Any]:
    """``obj`` less the release annotation and server-managed metadata, for comparing."""
    copy = dict(obj)
    metadata = obj.get("metadata")
    if isinstance(metadata, dict):
        trimmed = {k: v for k, v in metadata.items() if k not in SERVER_MANAGED_METADATA}
        annotations = trimmed.get("annotations")
        if isinstance(annotations, dict):
            rest = {k: v for k, v in annotations.items() if k != ANNOTATION_RELEASE_HELD_REVISION}
            if rest:
                trimmed["annotations"] = rest
            else:
                trimmed.pop("annotations")
        copy["metadata"] = trimmed
    return copy


def only_release_annotation_changed(new: Mapping[str, Any], old: Mapping[str, Any]) -> bool:
    """Whether ``new`` differs from ``old`` in the release annotation alone."""
    return _without_release_annotation(new) == _without_release_annotation(old)


def revision_prefix(obj: Mapping[str, Any]) -> str | None:
    """``<isvc>-<component>`` of this replica's revisions, cut as the controller cuts it."""
    spec = obj.get("spec")
    metadata = obj.get("metadata")
    if not isinstance(spec, dict) or not isinstance(metadata, dict):
        return None
    component = spec.get("component")
    parent_ref = spec.get("parentRef")
    labels = metadata.get("labels")
    candidates = (
        parent_ref.get("name") if isinstance(parent_ref, dict) else None,
        labels.get(LABEL_INFERENCE_SERVICE) if isinstance(labels, dict) else None,
        metadata.get("name"),
    )
    isvc = next((c for c in candidates if isinstance(c, str) and c), None)
    if isvc is None or not isinstance(component, str) or not component:
        return None
    room = MAX_REVISION_NAME_LENGTH - REVISION_HASH_LENGTH - 1
    return f"{isvc}-{component}"[:room].rstrip("-.")


def release_problem(obj: Mapping[str, Any], value: Any) -> str | None:
    """Why ``value`` isn't a full revision of this replica, or ``None``."""
    prefix = revision_prefix(obj)
    example = f"{prefix}-7f9c4d2b" if prefix else "<isvc>-<component>-7f9c4d2b"
    if (
        isinstance(value, str)
        and prefix is not None
        and value.startswith(prefix + "-")
        and len(value) == len(prefix) + 1 + REVISION_HASH_LENGTH
        and is_revision_hash(value[-REVISION_HASH_LENGTH:])
    ):
        return None
    return (
        f"{RELEASE_HELD_LOC}: must name a full revision of this replica, "
        f"<isvc>-<component>-<8 hex characters> such as {example}, got {show(value)}"
    )


class InferenceReplicaValidator(WriteValidator):
    """The validating webhook for InferenceReplicas."""

    path: Final = PATH
    kind = KIND_INFERENCE_REPLICA
    plural = "InferenceReplicas"

    def check(self, write: Write) -> AdmissionResponse:
        obj, old = write.obj, write.old

        annotations = _annotations(obj)
        release = annotations.get(ANNOTATION_RELEASE_HELD_REVISION)
        release_changed = release is not None and release != _annotations(old).get(
            ANNOTATION_RELEASE_HELD_REVISION
        )
        if release_changed and (problem := release_problem(obj, release)) is not None:
            return deny(problem)
        if annotations.get(ANNOTATION_CONTROLLER_WRITE) == CONTROLLER_WRITE_TRUE:
            return allow()
        if old is not None and only_release_annotation_changed(obj, old):
            return allow()
        return deny(MSG_NOT_CONTROLLER)
