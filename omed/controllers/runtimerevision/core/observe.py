"""The cache boundary: raw runtimes, ControllerRevisions and InferenceServices become the
core's models. Pure; a field of the wrong type reads as absent rather than failing the pass,
so one damaged object can't stop the collection of every other revision of its name."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any

from omed.api.constants import (
    ANNOTATION_CREATED_BY,
    ANNOTATION_GC_ELIGIBLE_SINCE,
    CREATED_BY_OME,
    KIND_CLUSTER_SERVING_RUNTIME,
    KIND_SERVING_RUNTIME,
    LABEL_REVISION_HASH,
    LABEL_RUNTIME_OF,
    LABEL_RUNTIME_OF_KIND,
    LABEL_RUNTIME_OF_NAMESPACE,
)
from omed.controllers.runtimerevision.core.model import (
    LiveRuntime,
    Revision,
    ServiceUse,
    Source,
)


def _map(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def parse_time(value: str | None) -> dt.datetime | None:
    """An RFC 3339 time with a zone, in UTC; ``None`` for anything else."""
    if not value:
        return None
    try:
        parsed = dt.datetime.fromisoformat(value)
    except ValueError:
        return None
    if parsed.tzinfo is None or parsed.utcoffset() is None:
        return None
    return parsed.astimezone(dt.UTC)


def runtime_source(obj: Mapping[str, Any]) -> Source:
    """The source of a ServingRuntime (namespaced) or ClusterServingRuntime (not)."""
    meta = _map(obj.get("metadata"))
    namespace = _str(meta.get("namespace"))
    name = str(meta.get("name"))
    if namespace:
        return Source(KIND_SERVING_RUNTIME, namespace, name)
    return Source(KIND_CLUSTER_SERVING_RUNTIME, "", name)


def live_runtime(obj: Mapping[str, Any]) -> LiveRuntime:
    return LiveRuntime(source=runtime_source(obj), spec=_map(obj.get("spec")))


def revision(obj: Mapping[str, Any]) -> Revision:
    meta = _map(obj.get("metadata"))
    labels = _map(meta.get("labels"))
    annotations = _map(meta.get("annotations"))
    name = str(labels.get(LABEL_RUNTIME_OF) or "")
    kind = labels.get(LABEL_RUNTIME_OF_KIND)
    source_namespace = labels.get(LABEL_RUNTIME_OF_NAMESPACE)
    source: Source | None = None
    if kind == KIND_CLUSTER_SERVING_RUNTIME:
        source = Source(KIND_CLUSTER_SERVING_RUNTIME, "", name)
    elif kind == KIND_SERVING_RUNTIME and _str(source_namespace):
        source = Source(KIND_SERVING_RUNTIME, str(source_namespace), name)
    number = obj.get("revision")
    mark = annotations.get(ANNOTATION_GC_ELIGIBLE_SINCE)
    return Revision(
        name=str(meta.get("name")),
        uid=str(meta.get("uid") or ""),
        resource_version=str(meta.get("resourceVersion") or ""),
        runtime_name=name,
        source=source,
        content_hash=str(labels.get(LABEL_REVISION_HASH) or ""),
        number=number if isinstance(number, int) and not isinstance(number, bool) else 0,
        created=parse_time(_str(meta.get("creationTimestamp"))),
        mark=mark if isinstance(mark, str) else None,
        written_by_ome=annotations.get(ANNOTATION_CREATED_BY) == CREATED_BY_OME,
    )


def pins(obj: Mapping[str, Any]) -> tuple[str, ...]:
    """Upstream OME's pins of an InferenceService: ``spec.runtime.revision`` and
    ``status.pinnedRevisionName``."""
    runtime = _map(_map(obj.get("spec")).get("runtime"))
    found = (_str(runtime.get("revision")), _str(_map(obj.get("status")).get("pinnedRevisionName")))
    return tuple(dict.fromkeys(name for name in found if name))


def service_use(obj: Mapping[str, Any]) -> ServiceUse:
    meta = _map(obj.get("metadata"))
    runtime = _map(_map(obj.get("spec")).get("runtime"))
    return ServiceUse(
        namespace=str(meta.get("namespace") or ""),
        name=str(meta.get("name")),
        runtime_name=_str(runtime.get("name")),
        runtime_kind=_str(runtime.get("kind")),
        pins=pins(obj),
    )
