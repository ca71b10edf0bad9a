"""A runtime revision's name, content hash and object, as upstream OME writes them.

Names: ``cr-<runtime>-<hash>`` for a ClusterServingRuntime, ``r-<namespace>-<runtime>-<hash>``
for a ServingRuntime (the namespace keeps ``team-a/foo`` and ``team-b/foo`` apart in the one
manager namespace). The hash is upstream's (:func:`omed.api.runtimehash.content_hash`: SHA-256
of Go's ``json.Marshal`` of the typed spec, cut to 8 hex digits), so the same spec gives the
same name after any restart, from omed and from upstream, and a spec changed back to an earlier
one finds its earlier revision again.

The revision's ``data`` is the spec as stored, which is what omed renders a pinned service
from; whether two specs are the same is judged by their hashes, not by the bytes of ``data``,
so a revision upstream wrote (Go's bytes, zero fields included) reads as the spec it holds.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from omed.api.constants import (
    ANNOTATION_CREATED_BY,
    CREATED_BY_OME,
    LABEL_REVISION_HASH,
    LABEL_RUNTIME_OF,
    LABEL_RUNTIME_OF_KIND,
    LABEL_RUNTIME_OF_NAMESPACE,
)
from omed.api.names import DNS1123_SUBDOMAIN_MAX, LABEL_VALUE_MAX
from omed.api.runtimehash import HASH_LENGTH, content_hash
from omed.controllers.runtimerevision.core.model import Source

MAX_NAME: Final = DNS1123_SUBDOMAIN_MAX
"""A ControllerRevision's name is a DNS subdomain."""
MAX_LABEL_VALUE: Final = LABEL_VALUE_MAX

REASON_NAME_TOO_LONG: Final = "revision name would exceed 253 characters"
REASON_LABEL_TOO_LONG: Final = "runtime name exceeds 63 characters, the longest label value"


def revision_name(source: Source, digest: str) -> str:
    if source.kind == "ClusterServingRuntime":
        return f"cr-{source.name}-{digest}"
    return f"r-{source.namespace}-{source.name}-{digest}"


def unwritable(source: Source, digest: str) -> str | None:
    """Why a snapshot of ``source`` can't be written, or ``None``."""
    if len(source.name) > MAX_LABEL_VALUE:
        return REASON_LABEL_TOO_LONG
    if len(revision_name(source, digest)) > MAX_NAME:
        return REASON_NAME_TOO_LONG
    return None


def revision_body(
    *, source: Source, spec: Mapping[str, Any], digest: str, number: int, namespace: str
) -> dict[str, Any]:
    """The ControllerRevision that stores ``spec``: no owner (a revision outlives its runtime,
    and a ServingRuntime in another namespace can't own it)."""
    return {
        "apiVersion": "apps/v1",
        "kind": "ControllerRevision",
        "metadata": {
            "name": revision_name(source, digest),
            "namespace": namespace,
            "labels": {
                LABEL_RUNTIME_OF: source.name,
                LABEL_RUNTIME_OF_KIND: source.kind,
                LABEL_RUNTIME_OF_NAMESPACE: source.namespace,
                LABEL_REVISION_HASH: digest,
            },
            "annotations": {ANNOTATION_CREATED_BY: CREATED_BY_OME},
        },
        "data": dict(spec),
        "revision": number,
    }


__all__ = [
    "HASH_LENGTH",
    "MAX_LABEL_VALUE",
    "MAX_NAME",
    "content_hash",
    "revision_body",
    "revision_name",
    "unwritable",
]
