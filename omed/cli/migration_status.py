"""``kubectl ome migration status``: the migration records of an InferenceService's
InferenceReplicas as a table or a ``MigrationStatusReport``, from objects already read.

Why: after ``migration start`` the one authoritative account of a request is the record OME
keeps in the component's InferenceReplica ``status.migrations``; this command shows it and
says how current that status is. It reads only the InferenceService and its identity-checked
InferenceReplicas (never the audit ConfigMap, pods or events).

Invariants: bounded (200 records shown of at most 800 scanned, upstream's); the table stays
within 80 columns (DETAIL is the message's first 18 characters and ``...``); the reason is
never printed; nothing here raises for what a status holds.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from omed.api.constants import MIGRATION_PHASES, TERMINAL_MIGRATION_PHASES
from omed.cli.instances import NOT_OBSERVED, OK, REPORT_API_VERSION, Collection

READ_FAILED: Final = "required Kubernetes API request failed; check access and connectivity"
"""The error of a migration command whose required reads failed (``migration status``'s when
the InferenceReplicas can't be listed; ``migration start``'s for any of its reads)."""
MAX_SHOWN: Final = 200
MAX_SCANNED: Final = 800
DETAIL_WIDTH: Final = 18
MACHINE_WIDTH: Final = 256
TERMINAL: Final = TERMINAL_MIGRATION_PHASES
PHASES: Final = frozenset(MIGRATION_PHASES)


def _currency(evidence: str) -> str:
    if evidence == OK:
        return "Current"
    if evidence.startswith("STALE:"):
        return "Stale"
    if evidence == NOT_OBSERVED:
        return "Unobserved"
    return "Invalid"


def _clean(text: Any, width: int) -> str:
    value = "".join(c if c.isprintable() else "?" for c in str(text or ""))
    return value[:width]


def _outcome(phase: str, record: Mapping[str, Any]) -> str:
    if phase == "Relocated":
        return "RelocationConfirmed" if record.get("succeeded") is True else "Relocated"
    if phase in ("Completed", "Failed"):
        return phase
    return "InProgress" if phase in PHASES else "Unknown"


def report(
    collection: Collection, *, component: str | None, max_shown: int = MAX_SHOWN
) -> dict[str, Any]:
    """The ``MigrationStatusReport``: each record of the chosen components, with the
    currency of the status it came from, and the issues (stale or unreadable sources,
    truncation). ``max_shown``: history takes every scanned record (800) and cuts its own
    output at 200, after its other sources."""
    migrations: list[dict[str, Any]] = []
    issues: list[dict[str, Any]] = []
    sources: list[dict[str, Any]] = []
    scanned = 0
    for name, read in collection.components.items():
        if component is not None and name != component:
            continue
        currency = _currency(read.evidence)
        sources.append({"component": name, "replica": read.replica, "state": currency})
        if currency != "Current":
            issues.append(
                {"code": f"SourceGeneration{currency}", "component": name, "replica": read.replica}
            )
        records = ((read.source or {}).get("status") or {}).get("migrations") or []
        for record in records if isinstance(records, list) else []:
            scanned += 1
            if scanned > MAX_SCANNED or not isinstance(record, Mapping):
                continue
            phase = str(record.get("phase") or "")
            migrations.append(
                {
                    "requestID": str(record.get("requestUUID") or ""),
                    "component": name,
                    "sourceInstance": record.get("sourceInstance"),
                    "replacementInstance": record.get("surgeInstance"),
                    "trigger": record.get("trigger"),
                    "phase": phase,
                    "state": "Terminal"
                    if phase in TERMINAL
                    else ("Active" if phase in PHASES else "Invalid"),
                    "currency": currency,
                    "fromNode": record.get("fromNode"),
                    "hintTargetNodes": list(record.get("hintTargetNodes") or [])[:8],
                    "startedAt": record.get("startedAt"),
                    "allocatedAt": record.get("allocatedAt"),
                    "deadline": record.get("deadline"),
                    "completedAt": record.get("completedAt"),
                    "message": _clean(record.get("message"), MACHINE_WIDTH),
                    "outcome": _outcome(phase, record),
                }
            )
    warnings: list[str] = []
    if scanned > MAX_SCANNED or len(migrations) > max_shown:
        issues.append({"code": "RecordsTruncated"})
        warnings.append("Truncated")
    if issues:
        warnings.insert(0, "PartialData")
    shown = migrations[:max_shown]
    state = "Partial" if issues else ("Reported" if shown else "Empty")
    meta = collection.isvc.get("metadata") or {}
    return {
        "apiVersion": REPORT_API_VERSION,
        "kind": "MigrationStatusReport",
        "target": {
            "kind": "InferenceService",
            "namespace": meta.get("namespace"),
            "name": meta.get("name"),
        },
        "state": state,
        "sources": sources,
        "content": {
            "summary": {
                "migrations": len(shown),
                "active": sum(1 for m in shown if m["state"] == "Active"),
                "terminal": sum(1 for m in shown if m["state"] == "Terminal"),
            },
            "migrations": shown,
            "issues": issues,
        },
        "warnings": warnings,
    }


def rows(status: Mapping[str, Any]) -> list[list[str]]:
    """The SUBJECT/COMP STATUS DETAIL table of a report."""
    table = [["SUBJECT/COMP", "STATUS", "DETAIL"]]
    for item in status["content"]["migrations"]:
        message = item["message"]
        detail = (
            "MSG: " + message[:DETAIL_WIDTH] + ("..." if len(message) > DETAIL_WIDTH else "")
            if message
            else "-"
        )
        table.append(
            [
                f"{_clean(item['requestID'], 8)}/{item['component']}",
                f"{_clean(item['phase'], 16) or '-'}/{item['state']}/{item['currency']}",
                detail,
            ]
        )
    for issue in status["content"]["issues"]:
        table.append([_clean(issue.get("replica") or "REPORT", 20), "Issue", issue["code"]])
    if len(table) == 1:
        table.append(["-/-", "Empty/Current", "-"])
    return table
