"""``/validate-apps-v1-controllerrevision``: the runtime revisions omed wrote stay as written.

Why: a runtime revision is the record of one version of a runtime's spec, which
InferenceServices pin and the garbage collection groups by its labels
(``ome.io/runtime-of`` and the kind, namespace and hash beside it). The API server already
refuses a change of a ControllerRevision's ``data`` and ``revision``; a relabel it allows,
and one would let a revision pass for another runtime's or hide from the collection. So,
as upstream OME's immutability validator does, an UPDATE of a revision omed wrote (annotation
``ome.io/created-by: ome-controller``) may change anything but ``data``, ``labels`` and
``revision``: annotations above all, where the collection marks
``ome.io/gc-eligible-since``, and the finalizers, owner references and deletion that other
controllers write.

Difference from upstream, on purpose: the chart sends this webhook only revisions labelled
``ome.io/runtime-of`` (an ``objectSelector``; on an UPDATE the API server matches the old
object as well as the new, so a relabel away from it is still reviewed), instead of every
ControllerRevision in the cluster. With ``failurePolicy: Fail``, reviewing every revision would
make the StatefulSet and DaemonSet controllers of the whole cluster wait on omed's webhook.

Invariants: pure; CREATE and DELETE are admitted; revisions omed didn't write pass through.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from omed.api.constants import ANNOTATION_CREATED_BY, CREATED_BY_OME
from omed.webhooks.review import (
    ALLOWED,
    AdmissionRequest,
    AdmissionResponse,
    Write,
    WriteValidator,
    deny,
)

PATH: Final = "/validate-apps-v1-controllerrevision"
KIND: Final = "ControllerRevision"


def _metadata(obj: Mapping[str, Any] | None) -> Mapping[str, Any]:
    meta = obj.get("metadata") if obj is not None else None
    return meta if isinstance(meta, dict) else {}


def _written_by_omed(obj: Mapping[str, Any] | None) -> bool:
    annotations = _metadata(obj).get("annotations")
    return (
        isinstance(annotations, dict) and annotations.get(ANNOTATION_CREATED_BY) == CREATED_BY_OME
    )


def message(obj: Mapping[str, Any], field: str) -> str:
    """Upstream's refusal: ``ControllerRevision <ns>/<name> is owned by OME; .<field> is
    immutable`` (``field`` is ``data``, ``labels are`` or ``revision``)."""
    meta = _metadata(obj)
    verb = "are" if field == "labels" else "is"
    return (
        f"ControllerRevision {meta.get('namespace', '')}/{meta.get('name', '')} is owned by OME; "
        f".{field} {verb} immutable"
    )


class ControllerRevisionValidator(WriteValidator):
    """The validating webhook for the runtime ControllerRevisions omed writes: only an UPDATE
    can change what omed wrote."""

    path: Final = PATH
    kind = KIND
    plural = "ControllerRevisions"

    def review(self, request: AdmissionRequest) -> AdmissionResponse:
        """The answer to one AdmissionReview request (pure: no I/O)."""
        if request.operation != "UPDATE":
            return ALLOWED
        return super().review(request)

    def check(self, write: Write) -> AdmissionResponse:
        old, new = write.old, write.obj
        if not _written_by_omed(old):
            return ALLOWED
        assert old is not None  # an UPDATE that reached the rules has its old object
        if old.get("data") != new.get("data"):
            return deny(message(old, "data"))
        if (_metadata(old).get("labels") or {}) != (_metadata(new).get("labels") or {}):
            return deny(message(old, "labels"))
        if old.get("revision") != new.get("revision"):
            return deny(message(old, "revision"))
        return ALLOWED
