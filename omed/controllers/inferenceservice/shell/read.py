"""The cache boundary: raw objects from the informers become the models the core reads.

An object the models refuse is read with less rather than not at all, so that a damaged
status or a value stored before the webhook refused it can't stop a deletion: a replica's
rows (the InferenceReplica controller's, and up to 20,000 of them) are never read here; a
status that doesn't validate is read as absent; a replica spec whose ``lifecycle`` doesn't
validate is read without it. An InferenceService that still can't be read fails the pass
(``Reconciler error``, with back-off), unless it is being deleted: its deletion reads only
its metadata.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from omed.api.inferencereplica import InferenceReplica
from omed.api.inferenceservice import InferenceService
from omed.api.servingruntime import ServingRuntimeSpec

_ROWS = ("instanceStatuses", "instanceStatusColumns")


def _without(obj: Mapping[str, Any], part: str) -> dict[str, Any]:
    return {k: v for k, v in obj.items() if k != part}


def read_replica(obj: Mapping[str, Any]) -> InferenceReplica:
    """``obj`` (an InferenceReplica from the cache or the API server) as a model, rows left
    out."""
    status = obj.get("status")
    trimmed: dict[str, Any] = dict(obj)
    if isinstance(status, Mapping):
        trimmed["status"] = {k: v for k, v in status.items() if k not in _ROWS}
    try:
        return InferenceReplica.model_validate(trimmed)
    except ValidationError:
        trimmed = _without(trimmed, "status")
    try:
        return InferenceReplica.model_validate(trimmed)
    except ValidationError:
        spec = trimmed.get("spec")
        if not isinstance(spec, Mapping):
            raise
        trimmed["spec"] = _without(spec, "lifecycle")
        return InferenceReplica.model_validate(trimmed)


def read_service(obj: Mapping[str, Any]) -> InferenceService:
    """``obj`` as a model; a status the models refuse is read as absent, and a deleted
    service's spec as empty when the models refuse it."""
    try:
        return InferenceService.model_validate(obj)
    except ValidationError:
        trimmed = _without(obj, "status")
    try:
        return InferenceService.model_validate(trimmed)
    except ValidationError:
        if not (obj.get("metadata") or {}).get("deletionTimestamp"):
            raise
        return InferenceService.model_validate({**trimmed, "spec": {}})


def read_runtime_spec(obj: Mapping[str, Any] | None) -> ServingRuntimeSpec | None:
    """The runtime's spec (its metadata is never read)."""
    if obj is None:
        return None
    return ServingRuntimeSpec.model_validate(obj.get("spec") or {})
