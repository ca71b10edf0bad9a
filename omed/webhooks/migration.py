"""Manual migration requests: the ``ome.io/migration-request-v1-<uuid>`` annotations.

Why: ``kubectl ome migration start`` writes a request as an annotation on the
InferenceService, and the controller acts on it later, when nobody is watching; a request the
controller can't read would only fail then. So the webhook refuses it when it is written, with
upstream OME's messages, and ``--dry-run server`` previews exactly these checks.

What is checked is upstream's admission rule, no more (:mod:`omed.api.migrationrequest` reads
the body the way the controller does): the key ends in a UUID, the value is JSON with
``schemaVersion`` v1 and fields of the right JSON types, the component is declared (engine
always; decoder or router only when the spec has them), and the instance is >= 0. The reason,
hint and credential rules belong to the CLI.

Only added or changed annotations are checked: each refusal depends on its annotation alone,
so the ratchet (:mod:`.findings`) admits an UPDATE that leaves a stored request as it was, and
deleting a request (how the controller consumes it) is always admitted.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from omed.api.constants import COMPONENTS
from omed.api.migrationrequest import MigrationRequest, is_request_key, parse, problem
from omed.webhooks.findings import Findings, Loc

__all__ = ["check_request", "is_request_key", "requested_components"]


def _declared(spec: Mapping[str, Any]) -> frozenset[str]:
    return frozenset(c for c in COMPONENTS if isinstance(spec.get(c), dict))


def requested_components(annotations: Mapping[str, Any]) -> frozenset[str]:
    """Components that readable request annotations name (for the readiness-timeout warning)."""
    found: set[str] = set()
    for key, value in annotations.items():
        if is_request_key(key):
            request = parse(key, value)
            if isinstance(request, MigrationRequest) and request.component in COMPONENTS:
                found.add(request.component)
    return frozenset(found)


def check_request(
    findings: Findings,
    *,
    key: str,
    value: Any,
    spec: Mapping[str, Any],
) -> None:
    """The migration request annotation ``key`` with ``value`` on an InferenceService."""
    loc: Loc = ("metadata", "annotations", key)
    request = parse(key, value)
    if isinstance(request, MigrationRequest):
        invalid = problem(request, _declared(spec))
        if invalid is None:
            _warn_never(findings, loc, request.component, spec)
            return
        findings.refuse(invalid.message, depends=(loc,))
        return
    findings.refuse(request.message, depends=(loc,))


def _warn_never(findings: Findings, loc: Loc, component: str, spec: Mapping[str, Any]) -> None:
    body = spec.get(component)
    lifecycle = body.get("lifecycle") if isinstance(body, dict) else None
    policy = lifecycle.get("migrationPolicy") if isinstance(lifecycle, dict) else None
    if isinstance(policy, dict) and policy.get("mode") == "Never":
        findings.warn(
            loc,
            f"{component} has lifecycle.migrationPolicy.mode Never, so OME fails this "
            "request (migrations disabled by MigrationPolicy Mode=Never)",
        )
