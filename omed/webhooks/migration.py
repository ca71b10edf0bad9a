"""Manual migration requests: the ``ome.io/migration-request-v1-<uuid>`` annotations.

Why: ``kubectl ome migration start`` writes a request as an annotation on the
InferenceService, and the controller acts on it later, when nobody is watching. A request
the controller can't read would fail silently, and its ``reason`` is copied into the
migration record, status, events and the audit ConfigMap, where a pasted URL or credential
would spread. So the webhook checks the request when it is written, and
``--dry-run server`` previews exactly these checks.

The value is a JSON object (schema v1)::

    {"schema": "v1", "requestUUID": "<uuid>", "component": "engine", "instance": 3,
     "fromNode": "node-a", "hintNodes": ["node-b"], "reason": "node-a maintenance",
     "requestedAt": "2026-09-28T10:12:04Z", "requestedBy": "kubectl-ome"}

``schema``, ``requestUUID``, ``component`` and ``instance`` are required; the rest are
optional. Keys that schema v1 doesn't know are admitted with a warning (they are ignored).

Invariant: a refusal never quotes the ``reason`` or ``requestedBy`` text: it may hold the
very credential that the rule refuses.
"""

from __future__ import annotations

import datetime as dt
import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

import orjson

from omed.api.base import json_type
from omed.api.constants import ANNOTATION_MIGRATION_REQUEST_PREFIX, COMPONENTS
from omed.api.names import is_dns1123_subdomain
from omed.webhooks.findings import (
    DNS1123_SUBDOMAIN_RULE,
    Findings,
    Loc,
    is_int,
    show,
)

SCHEMA_V1: Final = "v1"
MAX_HINT_NODES: Final = 8
MAX_REASON_LENGTH: Final = 256
MAX_REQUESTED_BY_LENGTH: Final = 253
MAX_REQUEST_BYTES: Final = 8192
"""A v1 request is well under 4 KiB; the cap keeps one annotation from hogging the object."""

KNOWN_KEYS: Final = frozenset(
    {
        "schema",
        "requestUUID",
        "component",
        "instance",
        "fromNode",
        "hintNodes",
        "reason",
        "requestedAt",
        "requestedBy",
    }
)

_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")
_URL = re.compile(r"://|www\.", re.IGNORECASE)

CREDENTIAL_PATTERNS: Final[tuple[tuple[str, re.Pattern[str]], ...]] = (
    (
        "a secret assignment such as password= or token=",
        re.compile(
            r"\b(pass(word)?|passwd|pwd|token|secret|api[-_]?key|access[-_]?key|"
            r"client[-_]?secret|auth|credentials?)\s*[=:]",
            re.IGNORECASE,
        ),
    ),
    ("a bearer token", re.compile(r"\bbearer\b", re.IGNORECASE)),
    ("an access key id", re.compile(r"\b(AKIA|ASIA)[0-9A-Z]{16}\b")),
    ("a private key", re.compile(r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----")),
    ("a token", re.compile(r"\b(gh[pousr]_[A-Za-z0-9]{20,}|xox[abpr]-[A-Za-z0-9-]{10,})")),
    ("a JSON web token", re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.")),
)
"""(what the refusal calls it, pattern): text that looks like a credential."""

_ANY_PROBLEM: Final = re.compile(
    "|".join(
        f"(?:{pattern.pattern})" if not pattern.flags & re.IGNORECASE else f"(?i:{pattern.pattern})"
        for pattern in (_CONTROL, _URL, *(p for _, p in CREDENTIAL_PATTERNS))
    )
)
"""Every rule of :func:`_plain_text_problem` at once: most text matches none, in one scan."""


def is_request_key(key: str) -> bool:
    return key.startswith(ANNOTATION_MIGRATION_REQUEST_PREFIX)


def requested_components(annotations: Mapping[str, Any]) -> frozenset[str]:
    """Components that request annotations name (for the readiness-timeout warning)."""
    found: set[str] = set()
    for key, value in annotations.items():
        if is_request_key(key) and isinstance(value, str):
            component = _judge(key, value).component
            if component is not None:
                found.add(component)
    return frozenset(found)


def _plain_text_problem(text: str) -> str | None:
    """Why ``text`` isn't plain text free of URLs and credentials, or ``None``."""
    if not _ANY_PROBLEM.search(text):
        return None
    if _CONTROL.search(text):
        return "must be plain text on one line, without control characters"
    if _URL.search(text):
        return 'must not contain a URL ("://" or "www.")'
    for name, pattern in CREDENTIAL_PATTERNS:
        if pattern.search(text):
            return f"must not contain credentials (found what looks like {name})"
    return None


def _time_problem(value: Any) -> str | None:
    """Why ``value`` isn't an RFC 3339 time with a zone, or ``None``."""
    if isinstance(value, str) and "T" in value:
        try:
            parsed = dt.datetime.fromisoformat(value)
        except ValueError:
            parsed = None
        if parsed is not None and parsed.tzinfo is not None:
            return None
    return f"must be an RFC 3339 time such as 2026-09-28T10:12:04Z, got {show(value)}"


Field = tuple[str | int, ...]


@dataclass(frozen=True, slots=True)
class _Verdict:
    """What a request annotation says on its own, whatever the spec."""

    component: str | None
    """The component it names, when that is engine, decoder or router."""
    errors: tuple[tuple[Field, str], ...]
    """(field within the request, or () for the annotation itself; text)."""
    warnings: tuple[str, ...]


@functools.lru_cache(maxsize=256)
def _judge(key: str, value: str) -> _Verdict:
    """The spec-independent rules for one annotation. Memoised: a request stays on its
    InferenceService, and is checked again at each write, until the controller takes it."""
    errors: list[tuple[Field, str]] = []
    warnings: list[str] = []

    def error(*field: str | int, text: str) -> None:
        errors.append((field, text))

    def verdict(component: str | None = None) -> _Verdict:
        return _Verdict(component=component, errors=tuple(errors), warnings=tuple(warnings))

    suffix = key[len(ANNOTATION_MIGRATION_REQUEST_PREFIX) :]
    if not _UUID.fullmatch(suffix):
        error(
            text="the key must end in a lowercase UUID, such as "
            "ome.io/migration-request-v1-7c9e6679-7425-40de-944b-e07fc1f90ae7"
        )
        return verdict()
    if len(value) > MAX_REQUEST_BYTES:
        error(text=f"must be a JSON object of at most {MAX_REQUEST_BYTES} bytes")
        return verdict()
    try:
        doc = orjson.loads(value)
    except orjson.JSONDecodeError:
        error(text="must be a JSON object (the migration request), got invalid JSON")
        return verdict()
    if not isinstance(doc, dict):
        error(text=f"must be a JSON object (the migration request), got {show(doc)}")
        return verdict()

    schema = doc.get("schema")
    if schema != SCHEMA_V1:
        error("schema", text=f'must be "{SCHEMA_V1}", got {show(schema)}')
    request_uuid = doc.get("requestUUID")
    if request_uuid != suffix:
        error(
            "requestUUID",
            text=f"must equal the UUID that ends the key ({suffix}), got {show(request_uuid)}",
        )
    component = doc.get("component")
    named: str | None = None
    if isinstance(component, str) and component in COMPONENTS:
        named = component
    else:
        error("component", text=f"must be one of {', '.join(COMPONENTS)}, got {show(component)}")

    instance = doc.get("instance")
    if not is_int(instance) or instance < 0:
        error("instance", text=f"must be an integer >= 0, got {show(instance)}")

    from_node = doc.get("fromNode")
    if from_node is not None and not is_dns1123_subdomain(from_node):
        error("fromNode", text=f"{DNS1123_SUBDOMAIN_RULE}, got {show(from_node)}")

    hints = doc.get("hintNodes")
    if hints is not None:
        if not isinstance(hints, list):
            error("hintNodes", text=f"must be a list of node names, got {show(hints)}")
        elif len(hints) > MAX_HINT_NODES:
            error("hintNodes", text=f"must list at most {MAX_HINT_NODES} nodes, got {len(hints)}")
        else:
            for i, hint in enumerate(hints):
                if not is_dns1123_subdomain(hint):
                    error("hintNodes", i, text=f"{DNS1123_SUBDOMAIN_RULE}, got {show(hint)}")
                elif hint in hints[:i]:
                    error("hintNodes", i, text=f"repeats {hint}")
                elif hint == from_node:
                    error(
                        "hintNodes",
                        i,
                        text=f"is fromNode ({hint}): the replacement must not prefer the node "
                        "it leaves",
                    )

    reason = doc.get("reason")
    if reason is not None:
        if not isinstance(reason, str):
            error("reason", text=f"must be a string, got {json_type(reason, other='array')}")
        elif len(reason) > MAX_REASON_LENGTH:
            error(
                "reason", text=f"must be at most {MAX_REASON_LENGTH} characters, got {len(reason)}"
            )
        elif (problem := _plain_text_problem(reason)) is not None:
            error("reason", text=problem)

    requested_at = doc.get("requestedAt")
    if requested_at is not None and (problem := _time_problem(requested_at)) is not None:
        error("requestedAt", text=problem)

    requested_by = doc.get("requestedBy")
    if requested_by is not None:
        if not isinstance(requested_by, str) or not requested_by:
            error(
                "requestedBy",
                text=f"must be a non-empty string, got {json_type(requested_by, other='array')}",
            )
        elif len(requested_by) > MAX_REQUESTED_BY_LENGTH:
            error(
                "requestedBy",
                text=(
                    f"must be at most {MAX_REQUESTED_BY_LENGTH} characters, got {len(requested_by)}"
                ),
            )
        elif (problem := _plain_text_problem(requested_by)) is not None:
            error("requestedBy", text=problem)

    unknown = sorted(str(k) for k in doc if k not in KNOWN_KEYS)
    if unknown:
        warnings.append(f"schema v1 has no field {', '.join(unknown)} (OME ignores them)")
    return verdict(named)


def check_request(
    findings: Findings,
    *,
    key: str,
    value: Any,
    spec: Mapping[str, Any],
) -> None:
    """The migration request annotation ``key`` with ``value`` on an InferenceService.

    Every error depends on the whole annotation: that is what an UPDATE keeps or changes.
    """
    loc: Loc = ("metadata", "annotations", key)
    if not isinstance(value, str):
        findings.error(loc, f"must be a JSON object of at most {MAX_REQUEST_BYTES} bytes")
        return
    judged = _judge(key, value)
    for field, text in judged.errors:
        findings.error((*loc, *field), text, depends=(loc,))
    component = judged.component
    if component is not None:
        body = spec.get(component)
        if not isinstance(body, dict):
            findings.error(
                (*loc, "component"),
                f"names {component}, which spec.{component} doesn't declare",
                depends=(loc,),
            )
        else:
            lifecycle = body.get("lifecycle")
            policy = lifecycle.get("migrationPolicy") if isinstance(lifecycle, dict) else None
            if isinstance(policy, dict) and policy.get("mode") == "Never":
                findings.warn(
                    loc,
                    f"{component} has lifecycle.migrationPolicy.mode Never, so OME fails this "
                    "request (migrations disabled by MigrationPolicy Mode=Never)",
                )
    for text in judged.warnings:
        findings.warn(loc, text)
