"""The cache boundary: raw objects from the informers become the models the core reads.

An object the models refuse is read with less rather than not at all, so that a damaged
status or a value stored before the webhook refused it can't stop a deletion: a replica's
rows (the InferenceReplica controller's, and up to 20,000 of them) are never read here; a
status that doesn't validate is read as absent; a replica spec whose ``lifecycle`` doesn't
validate is read without it; a runtime's replica bounds the models refuse are left out (they
are never projected). An InferenceService that still can't be read fails the pass
(``Reconciler error``, with back-off), unless it is being deleted: its deletion reads only
its metadata.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from omed.api.inferencereplica import InferenceReplica
from omed.api.inferenceservice import InferenceService
from omed.api.servingruntime import ServingRuntimeSpec

_ROWS = ("instanceStatuses", "instanceStatusColumns")
_BOUNDS = ("minReplicas", "maxReplicas")

M = TypeVar("M", bound=BaseModel)


def _without(obj: Mapping[str, Any], part: str) -> dict[str, Any]:
    return {k: v for k, v in obj.items() if k != part}


def _first_readable(model: type[M], candidates: Iterator[dict[str, Any]]) -> M:
    """The first of ``candidates`` (each reads less than the one before) that ``model``
    validates; the last one's error when none does."""
    error: ValidationError | None = None
    for candidate in candidates:
        try:
            return model.model_validate(candidate)
        except ValidationError as err:
            error = err
    assert error is not None
    raise error


def _replica_readings(obj: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
    trimmed: dict[str, Any] = dict(obj)
    status = obj.get("status")
    if isinstance(status, Mapping):
        trimmed["status"] = {k: v for k, v in status.items() if k not in _ROWS}
    yield trimmed
    trimmed = _without(trimmed, "status")
    yield trimmed
    spec = trimmed.get("spec")
    if isinstance(spec, Mapping):
        yield {**trimmed, "spec": _without(spec, "lifecycle")}


def read_replica(obj: Mapping[str, Any]) -> InferenceReplica:
    """``obj`` (an InferenceReplica from the cache or the API server) as a model, rows left
    out."""
    return _first_readable(InferenceReplica, _replica_readings(obj))


def _service_readings(obj: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
    yield dict(obj)
    trimmed = _without(obj, "status")
    yield trimmed
    if (obj.get("metadata") or {}).get("deletionTimestamp"):
        yield {**trimmed, "spec": {}}


def read_service(obj: Mapping[str, Any]) -> InferenceService:
    """``obj`` as a model; a status the models refuse is read as absent, and a deleted
    service's spec as empty when the models refuse it."""
    return _first_readable(InferenceService, _service_readings(obj))


def _runtime_readings(spec: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
    yield dict(spec)
    # A runtime's replica bounds are never projected (the component's are): bounds the
    # models refuse (maxReplicas below minReplicas; no webhook checks a runtime) are left out.
    yield {
        key: {k: v for k, v in value.items() if k not in _BOUNDS}
        if key.endswith("Config") and isinstance(value, Mapping)
        else value
        for key, value in spec.items()
    }


def read_runtime_spec(obj: Mapping[str, Any] | None) -> ServingRuntimeSpec | None:
    """The runtime's spec (its metadata is never read)."""
    if obj is None:
        return None
    return _first_readable(ServingRuntimeSpec, _runtime_readings(obj.get("spec") or {}))
