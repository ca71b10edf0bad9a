"""The migration request mailbox: ``ome.io/migration-request-v1-<uuid>`` annotations.

Why one reader: ``kubectl ome migration start`` (and any other client of upstream OME, such as
a dispatcher) writes a request as an annotation on the InferenceService; the webhook checks it
when it is written and the InferenceReplica controller reads it later. Both must read it the
same way, the way upstream OME's controller does (Go ``encoding/json`` into its
``MigrationRequest``), so a request the webhook admits is one the controller can act on.

The value is upstream's JSON body; the UUID is only in the key::

    {"schemaVersion":"v1","component":"engine","instance":3,"from_node":"node-a",
     "hint_target_nodes":["node-b"],"reason":"...","requested_at":"2026-09-28T10:12:04Z",
     "requested_by":"kubectl-ome"}

Rules (upstream's): unknown fields are ignored; ``null`` leaves a field at its zero value; a
field of the wrong JSON type fails the parse; only ``schemaVersion == "v1"`` is checked here.
Whether the component exists, and whether the instance is >= 0, depend on the service
(:func:`problem`).

Invariant: no message quotes ``reason`` or ``requested_by``, which may hold text its author
did not mean to spread.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

import orjson

from omed.api.constants import ANNOTATION_MIGRATION_REQUEST_PREFIX
from omed.api.gojson import go_kind

SCHEMA_V1: Final = "v1"

_UUID: Final = re.compile(
    r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
)

_FIELDS: Final[tuple[tuple[str, str], ...]] = (
    ("schemaVersion", "string"),
    ("component", "string"),
    ("instance", "int32"),
    ("from_node", "string"),
    ("hint_target_nodes", "[]string"),
    ("reason", "string"),
    ("requested_at", "string"),
    ("requested_by", "string"),
)
"""(JSON key, Go type) of upstream's struct, in its field order."""

_INT32: Final = (-(2**31), 2**31 - 1)


def is_request_key(key: str) -> bool:
    return key.startswith(ANNOTATION_MIGRATION_REQUEST_PREFIX)


def request_uuid(key: str) -> str | None:
    """The UUID that ends a request key, or None when the key carries none."""
    suffix = key[len(ANNOTATION_MIGRATION_REQUEST_PREFIX) :]
    return suffix if _UUID.fullmatch(suffix) else None


@dataclass(frozen=True, slots=True, kw_only=True)
class MigrationRequest:
    """One request as upstream's controller reads it."""

    key: str
    uuid: str
    schema_version: str = ""
    component: str = ""
    instance: int = 0
    from_node: str = ""
    hint_target_nodes: tuple[str, ...] = ()
    reason: str = ""
    requested_at: str = ""
    requested_by: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class RequestProblem:
    """Why a request can't be read: ``message`` is upstream's, after ``migration request
    <uuid>: `` (or ``<key>: `` when the key carries no UUID)."""

    key: str
    uuid: str | None
    cause: str
    unsupported_schema: bool = False

    @property
    def message(self) -> str:
        return f"migration request {self.uuid or self.key}: {self.cause}"


def _type_error(key: str, value: Any, go_type: str) -> str:
    kind = go_kind(value)
    if kind == "number":
        kind = f"number {orjson.dumps(value).decode()}"
    return (
        f"parse migration request: json: cannot unmarshal {kind} into Go struct "
        f"field MigrationRequest.{key} of type {go_type}"
    )


def parse(key: str, value: Any) -> MigrationRequest | RequestProblem:
    """Read one annotation (see the module docstring)."""
    uuid = request_uuid(key)
    if uuid is None:
        return RequestProblem(key=key, uuid=None, cause="annotation key carries no request UUID")
    if not isinstance(value, str):
        return RequestProblem(key=key, uuid=uuid, cause="parse migration request: not a string")
    try:
        doc = orjson.loads(value)
    except orjson.JSONDecodeError as err:
        return RequestProblem(key=key, uuid=uuid, cause=f"parse migration request: {err}")
    if doc is None:
        doc = {}
    if not isinstance(doc, dict):
        return RequestProblem(
            key=key,
            uuid=uuid,
            cause=f"parse migration request: json: cannot unmarshal {go_kind(doc)} into Go "
            "value of type audit.MigrationRequest",
        )
    values: dict[str, Any] = {}
    for name, go_type in _FIELDS:
        raw = doc.get(name)
        if raw is None:
            continue
        if go_type == "string" and not isinstance(raw, str):
            return RequestProblem(key=key, uuid=uuid, cause=_type_error(name, raw, go_type))
        if go_type == "int32" and (
            isinstance(raw, bool) or not isinstance(raw, int) or not _INT32[0] <= raw <= _INT32[1]
        ):
            return RequestProblem(key=key, uuid=uuid, cause=_type_error(name, raw, go_type))
        if go_type == "[]string":
            if not isinstance(raw, list):
                return RequestProblem(key=key, uuid=uuid, cause=_type_error(name, raw, go_type))
            bad = next((item for item in raw if not isinstance(item, str | None)), None)
            if bad is not None:
                return RequestProblem(key=key, uuid=uuid, cause=_type_error(name, bad, "string"))
            raw = tuple(item or "" for item in raw)
        values[name] = raw
    version = values.get("schemaVersion", "")
    if version != SCHEMA_V1:
        return RequestProblem(
            key=key,
            uuid=uuid,
            cause=f"UnsupportedSchemaVersion: {orjson.dumps(version).decode()}",
            unsupported_schema=True,
        )
    return MigrationRequest(
        key=key,
        uuid=uuid,
        schema_version=version,
        component=values.get("component", ""),
        instance=values.get("instance", 0),
        from_node=values.get("from_node", ""),
        hint_target_nodes=values.get("hint_target_nodes", ()),
        reason=values.get("reason", ""),
        requested_at=values.get("requested_at", ""),
        requested_by=values.get("requested_by", ""),
    )


def problem(request: MigrationRequest, declared: frozenset[str]) -> RequestProblem | None:
    """What makes a readable request invalid for a service declaring ``declared`` components
    (engine always counts as declared, as upstream's webhook has it)."""
    if request.component != "engine" and request.component not in declared:
        return RequestProblem(
            key=request.key,
            uuid=request.uuid,
            cause=f"component {orjson.dumps(request.component).decode()} does not exist on "
            "this InferenceService",
        )
    if request.instance < 0:
        return RequestProblem(
            key=request.key,
            uuid=request.uuid,
            cause=f"instance must be >= 0, got {request.instance}",
        )
    return None


def requests_of(annotations: Mapping[str, Any] | None) -> list[tuple[str, Any]]:
    """The request annotations, keys sorted (the order the controller takes them in)."""
    return sorted((key, value) for key, value in (annotations or {}).items() if is_request_key(key))


__all__ = [
    "SCHEMA_V1",
    "MigrationRequest",
    "RequestProblem",
    "is_request_key",
    "parse",
    "problem",
    "request_uuid",
    "requests_of",
]
