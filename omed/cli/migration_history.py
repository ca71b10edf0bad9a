"""``kubectl ome migration history``: one service's migration evidence from three sources,
each labelled, as a table, a wide table or a ``MigrationHistoryReport``, from what was read.

Why: a migration's record leaves the InferenceReplica's ``status.migrations`` once the caps'
window has passed it (one hour with the chart); what a user then has is the audit ledger,
the ConfigMap ``<isvc>-ome-migration-audit`` that keeps the last 200 ended migrations. The
command shows both, side by side and never merged, so nobody mistakes a ledger row for the
work OME is doing:

* ``AUTH`` (``Authoritative``): the records in the identity-checked InferenceReplicas'
  ``status.migrations``, as ``migration status`` reads them
  (:func:`omed.cli.migration_status.report`); the only source that says what OME is doing;
* ``PARENT`` (``ParentSummary``): the InferenceService's ``status.migrationHistory``, which
  OME leaves empty in this release (read so a later writer's rows show, labelled);
* ``AUDIT`` (``AuditHistory``): the ledger's ``history.json`` rows (the document
  :mod:`omed.controllers.ledger.document` writes), force-delete rows left out.

Invariants (upstream OME's): every read is bounded (64 InferenceReplicas in two pages of 32,
800 records scanned a source, 200 shown, 8 hints shown of 64 scanned, a ledger document of at
most 1 MiB); a source that can't be trusted fails closed: a ConfigMap that isn't the
service's (``AuditIdentityInvalid``), a document over 1 MiB (``AuditPayloadTooLarge``) or one
that isn't the ledger's shape (``AuditMalformed``) gives no row at all from that source, only
its issue, never a partial reading of it; every other source still shows. The reason a
request gave, annotations, uids and the raw document are never printed; messages are cut at
256 characters, control characters shown as ``?``. The compact table stays within 80 columns.
Nothing here raises for what a cluster holds.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from omed.api.constants import (
    API_VERSION,
    KIND_INFERENCE_SERVICE,
    MIGRATION_PHASES,
    TERMINAL_MIGRATION_PHASES,
)
from omed.api.names import LABEL_VALUE_MAX, is_dns1123_subdomain
from omed.cli import migration_status
from omed.cli.instances import REPORT_API_VERSION, Collection
from omed.controllers.ledger import document as ledger

MAX_SOURCES: Final = 64
"""InferenceReplicas read at most: two pages of :data:`PAGE_SIZE`."""
PAGE_SIZE: Final = 32
MAX_PAGES: Final = 2
MAX_RECORDS: Final = 200
MAX_SCANNED: Final = 800
MAX_HINTS: Final = 8
MAX_SCANNED_HINTS: Final = 64
MAX_EVENTS: Final = 16
MAX_SCANNED_EVENTS: Final = 128
MAX_AUDIT_BYTES: Final = 1 << 20
MESSAGE_WIDTH: Final = 256
CELL_WIDTH: Final = 20
PHASE_WIDTH: Final = 12

AUTHORITATIVE: Final = "Authoritative"
PARENT: Final = "ParentSummary"
AUDIT: Final = "AuditHistory"
REPORT: Final = "Report"
_EVIDENCE_RANK: Final = {AUTHORITATIVE: 0, PARENT: 1, AUDIT: 2}
_SHORT_EVIDENCE: Final = {AUTHORITATIVE: "AUTH", PARENT: "PARENT", AUDIT: "AUDIT"}
_INITIAL: Final = {"engine": "E", "decoder": "D", "router": "R"}
_STATE: Final = {"Active": "A", "Terminal": "T", "Invalid": "!"}

AVAILABLE: Final = "Available"
ABSENT: Final = "Absent"
FORBIDDEN: Final = "Forbidden"
UNREADABLE: Final = "Unreadable"
INVALID: Final = "Invalid"
_UNAVAILABLE_REASON: Final = {
    ABSENT: "NotFound",
    FORBIDDEN: "Forbidden",
    INVALID: "InvalidIdentity",
    UNREADABLE: "Unreadable",
}

TERMINAL: Final = TERMINAL_MIGRATION_PHASES
ACTIVE: Final = frozenset(MIGRATION_PHASES) - TERMINAL | {ledger.PHASE_STARTED}
"""A record's phases that haven't ended, and the audit ledger's Started."""
_TRUNCATIONS: Final = frozenset(
    {"AuthoritativeTruncated", "ParentHistoryTruncated", "AuditHistoryTruncated", "OutputTruncated"}
)
_AUDIT_OUTCOMES: Final[Mapping[str, str]] = {
    ledger.PHASE_STARTED: "InProgress",
    ledger.PHASE_COMPLETED: "Completed",
    ledger.PHASE_FAILED: "Failed",
}
"""A ledger row's phase as a record's outcome (an automatic relocation's row aside)."""
_FORCE_DELETE_OUTCOMES: Final = frozenset({ledger.OUTCOME_FORCE_DELETE, "finalizer-report"})
_ID: Final = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?")
"""A request ID as a non-empty label value: letters, digits, ``-``, ``_`` and ``.``, starting
and ending with a letter or digit, at most :data:`~omed.api.names.LABEL_VALUE_MAX` long."""


@dataclass(frozen=True, slots=True)
class ReplicaRead:
    """How the InferenceReplicas were listed: availability, pages and items seen, and
    whether a page was left unread (more than :data:`MAX_SOURCES`)."""

    availability: str
    pages: int = 0
    items: int = 0
    truncated: bool = False


@dataclass(frozen=True, slots=True)
class AuditRead:
    """The audit ConfigMap as read: its availability (``Available``, ``Absent``,
    ``Forbidden``, ``Unreadable``, or ``Invalid`` when it isn't the service's own) and, when
    available, its ``history.json`` text (nothing else of it is kept)."""

    namespace: str
    name: str
    availability: str
    text: str = ""


def audit_read(
    configmap: Mapping[str, Any], isvc: Mapping[str, Any], *, namespace: str, name: str
) -> AuditRead:
    """The ConfigMap's ``history.json`` when it is the service's own ledger: its name and
    namespace, and exactly one controller owner reference, to this InferenceService (API
    version, kind, name and uid); ``Invalid`` otherwise (a foreign or stale ledger is
    never read)."""
    meta = _mapping(configmap.get("metadata"))
    owner = _mapping(isvc.get("metadata"))
    refs = _items(meta.get("ownerReferences"))
    controllers = [r for r in refs if isinstance(r, Mapping) and r.get("controller") is True]
    exact = len(controllers) == 1 and all(
        (r.get("apiVersion"), r.get("kind"), r.get("name"), r.get("uid"))
        == (API_VERSION, KIND_INFERENCE_SERVICE, owner.get("name"), owner.get("uid"))
        for r in controllers
    )
    if meta.get("name") != name or meta.get("namespace") != namespace or not exact:
        return AuditRead(namespace, name, INVALID)
    text = _mapping(configmap.get("data")).get(ledger.DATA_KEY)
    return AuditRead(namespace, name, AVAILABLE, text if isinstance(text, str) else "")


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _items(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


# -- values ----------------------------------------------------------------------------------


def bounded(value: Any, width: int) -> str:
    """``value`` as one printable line of at most ``width`` characters, ``...`` when cut."""
    text = "".join(c if c.isprintable() else "?" for c in str(value or ""))
    return text if len(text) <= width else text[: width - 3] + "..."


def _safe_id(value: Any) -> str:
    if isinstance(value, str) and len(value) <= LABEL_VALUE_MAX and _ID.fullmatch(value):
        return value
    return "INVALID"


def _time(value: Any) -> dt.datetime | None:
    """An RFC 3339 time in UTC (``None`` when absent or unreadable)."""
    if isinstance(value, dt.datetime):
        return value.astimezone(dt.UTC) if value.tzinfo else value.replace(tzinfo=dt.UTC)
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = dt.datetime.fromisoformat(value.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        return None
    if parsed.tzinfo is None:
        return None
    return parsed.astimezone(dt.UTC)


def _stamp(value: dt.datetime | None) -> str | None:
    return None if value is None else value.strftime("%Y-%m-%dT%H:%M:%SZ")


def _int(value: Any) -> int | None:
    if isinstance(value, int) and not isinstance(value, bool) and -(2**31) <= value < 2**31:
        return value
    return None


def _or(value: int | None, default: int) -> int:
    return default if value is None else value


def _phase(value: Any) -> str:
    return value if isinstance(value, str) and value in TERMINAL | ACTIVE else "Unknown"


def _component(value: Any) -> str | None:
    return value if value in _INITIAL else None


def _nodes(values: Any, issues: list[str] | None = None) -> list[str]:
    """The first :data:`MAX_HINTS` valid node names of the first :data:`MAX_SCANNED_HINTS`,
    sorted, each once."""
    out: list[str] = []
    for value in (values if isinstance(values, list) else [])[:MAX_SCANNED_HINTS]:
        if is_dns1123_subdomain(value):
            out.append(value)
        elif issues is not None:
            _add(issues, "NodeInvalid")
        if len(out) == MAX_HINTS:
            break
    return sorted(set(out))


def _add(codes: list[str], code: str) -> None:
    if code not in codes:
        codes.append(code)


def _identity(request: Any, instance: Any, issues: list[str]) -> tuple[str, int | None]:
    """A row's request ID and source Instance, each with its issue when it isn't one."""
    safe = _safe_id(request)
    if safe == "INVALID":
        _add(issues, "RequestIDInvalid")
    index = _int(instance)
    if index is None or index < 0:
        _add(issues, "InstanceInvalid")
    return safe, index


# -- records ---------------------------------------------------------------------------------


def _record(**fields: Any) -> dict[str, Any]:
    record: dict[str, Any] = {
        "evidence": fields["evidence"],
        "sourceName": fields["sourceName"],
        "requestID": fields["requestID"],
        "component": fields.get("component") or "unknown",
        "sourceInstance": fields.get("sourceInstance", -1),
        "replacementInstance": fields.get("replacementInstance"),
        "trigger": fields.get("trigger") or "Unknown",
        "mode": fields.get("mode") or "Unknown",
        "phase": fields["phase"],
        "state": "Unknown",
        "freshness": fields["freshness"],
        "fromNode": fields.get("fromNode"),
        "targetNodeHints": fields.get("targetNodeHints") or [],
    }
    for key in ("requestedAt", "startedAt", "allocatedAt", "deadline", "completedAt"):
        record[key] = fields.get(key)
    record["eventCount"] = fields.get("eventCount", 0)
    record["outcome"] = fields.get("outcome") or "Unknown"
    record["message"] = bounded(fields.get("message"), MESSAGE_WIDTH) or None
    record["authoritativeIssues"] = list(fields.get("authoritativeIssues") or [])
    record["issues"] = list(fields.get("issues") or [])
    return record


def _finish(record: dict[str, Any]) -> dict[str, Any]:
    """The record's state: Invalid with any issue, else by its phase."""
    phase = record["phase"]
    if record["issues"] or record["authoritativeIssues"]:
        record["state"] = "Invalid"
    elif phase in TERMINAL:
        record["state"] = "Terminal"
    elif phase in ACTIVE:
        record["state"] = "Active"
    else:
        record["state"] = "Unknown"
    return record


def _check_times(record: dict[str, Any]) -> None:
    """TimestampInvalid when the times contradict each other or the phase."""
    times = {k: _time(record[k]) for k in ("requestedAt", "startedAt", "allocatedAt")}
    deadline, completed = _time(record["deadline"]), _time(record["completedAt"])
    start = times["startedAt"] or times["requestedAt"]
    bad = bool(
        times["startedAt"] and times["requestedAt"] and times["startedAt"] < times["requestedAt"]
    )
    for later in (times["allocatedAt"], completed, deadline):
        if later is not None and start is not None and later < start:
            bad = True
    terminal = record["phase"] in TERMINAL
    if terminal != (completed is not None):
        bad = True
    if bad:
        _add(record["issues"], "TimestampInvalid")


def _authoritative(
    collection: Collection, replicas: ReplicaRead, component: str | None
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], str]:
    """AUTH: ``migration status``'s records and issues, as history records and issues, and
    the worst freshness of the sources."""
    if replicas.availability != AVAILABLE or not collection.listed:
        return [], [{"code": "AuthoritativeUnavailable"}], "Unverifiable"
    status = migration_status.report(collection, component=component, max_shown=MAX_SCANNED)
    names = {s["component"]: s["replica"] for s in status["sources"]}
    ranks = ["Current", "Stale", "Unobserved", "Invalid"]
    freshness = max(
        (s["state"] for s in status["sources"]), key=ranks.index, default="Unverifiable"
    )
    issues: list[dict[str, Any]] = []
    if replicas.truncated:
        issues.append({"code": "AuthoritativeTruncated"})
    for issue in status["content"]["issues"]:
        if issue["code"] == "RecordsTruncated":
            issues.append({"code": "AuthoritativeTruncated"})
        else:
            issues.append({"code": "RecordInvalid", "evidence": AUTHORITATIVE})
    records = []
    for item in status["content"]["migrations"]:
        request = _safe_id(item["requestID"])
        own: list[str] = []
        if request == "INVALID":
            _add(own, "RequestIDInvalid")
        if _phase(item["phase"]) == "Unknown":
            _add(own, "PhaseInvalid")
        record = _record(
            evidence=AUTHORITATIVE,
            sourceName=names.get(item["component"]) or "unknown",
            requestID=request,
            component=item["component"],
            sourceInstance=_or(_int(item["sourceInstance"]), -1),
            replacementInstance=_int(item["replacementInstance"]),
            trigger=item["trigger"] if item["trigger"] in ("Manual", "Auto") else "Unknown",
            phase=_phase(item["phase"]),
            freshness=item["currency"],
            fromNode=item["fromNode"] if is_dns1123_subdomain(item["fromNode"]) else None,
            targetNodeHints=_nodes(item["hintTargetNodes"]),
            startedAt=_stamp(_time(item["startedAt"])),
            allocatedAt=_stamp(_time(item["allocatedAt"])),
            deadline=_stamp(_time(item["deadline"])),
            completedAt=_stamp(_time(item["completedAt"])),
            outcome=item["outcome"],
            message=item["message"],
            authoritativeIssues=own,
        )
        if item["state"] == "Invalid":
            _add(record["authoritativeIssues"], "PhaseInvalid")
        records.append(_finish(record))
    return records, issues, freshness


def _parent_freshness(isvc: Mapping[str, Any]) -> str:
    generation = _int((isvc.get("metadata") or {}).get("generation")) or 0
    observed = _int(((isvc.get("status") or {}) or {}).get("observedGeneration"))
    observed = 0 if observed is None else observed
    if generation <= 0 or observed < 0 or observed > generation:
        return "Invalid"
    if observed == 0:
        return "Unobserved"
    return "Stale" if observed < generation else "Current"


def _parent(
    isvc: Mapping[str, Any], component: str | None, freshness: str
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], int, bool]:
    """PARENT: the InferenceService's ``status.migrationHistory`` entries (OME writes none
    in this release)."""
    entries = (isvc.get("status") or {}).get("migrationHistory")
    entries = entries if isinstance(entries, list) else []
    issues: list[dict[str, Any]] = []
    truncated = len(entries) > MAX_SCANNED
    if truncated:
        issues.append({"code": "ParentHistoryTruncated"})
    name = str((isvc.get("metadata") or {}).get("name") or "")
    records = []
    for item in entries[:MAX_SCANNED]:
        entry: Mapping[str, Any] = item if isinstance(item, Mapping) else {}
        own: list[str] = []
        comp = _component(entry.get("component"))
        if comp is None:
            _add(own, "ComponentInvalid")
        if component is not None and comp != component:
            continue
        request, instance = _identity(entry.get("id"), entry.get("instance"), own)
        replacement = _int(entry.get("replacementInstance"))
        if entry.get("replacementInstance") is not None and (
            replacement is None or replacement < 0 or replacement == instance
        ):
            _add(own, "ReplacementInvalid")
        mode = "Surge" if entry.get("mode") == "Surge" else "Unknown"
        if mode == "Unknown":
            _add(own, "ModeInvalid")
        phase = _phase(entry.get("phase"))
        if phase in {"Unknown", ledger.PHASE_STARTED}:
            phase = "Unknown"
            _add(own, "PhaseInvalid")
        requested = _time(entry.get("requestedAt"))
        if requested is None:
            _add(own, "TimestampInvalid")
        completed = _time(entry.get("completedAt"))
        events = _items(entry.get("events"))
        if len(events) > MAX_EVENTS:
            _add(own, "EventsTruncated")
        for event in events[:MAX_SCANNED_EVENTS]:
            at = _time(event.get("at")) if isinstance(event, Mapping) else None
            if at is None or (requested and at < requested) or (completed and at > completed):
                _add(own, "EventInvalid")
        record = _record(
            evidence=PARENT,
            sourceName=name,
            requestID=request,
            component=comp,
            sourceInstance=_or(instance, -1),
            replacementInstance=replacement,
            mode=mode,
            phase=phase,
            freshness=freshness,
            requestedAt=_stamp(requested),
            startedAt=_stamp(_time(entry.get("startedAt"))),
            completedAt=_stamp(completed),
            eventCount=min(len(events), MAX_EVENTS),
            outcome=phase if phase in TERMINAL else "InProgress" if phase in ACTIVE else "Unknown",
            message=entry.get("outcomeReason"),
            issues=own,
        )
        _check_times(record)
        records.append(_finish(record))
    return records, issues, len(entries), truncated


class _Malformed(ValueError):
    """A ledger row whose fields don't have the ledger's types."""


_STRINGS: Final = ("requestUUID", "component", "phase", "fromNode", "startedAt")
_OPTIONAL_STRINGS: Final = ("completedAt", "outcome", "reason", "revision")


def _check_entry(entry: Any) -> Mapping[str, Any]:
    """One ``history.json`` row as a JSON decoder into the ledger's types would take it:
    an object (or null), strings where the ledger writes strings, 32-bit integers for the
    instances, a list of strings for the hints; anything else is malformed."""
    if entry is None:
        return {}
    if not isinstance(entry, Mapping):
        raise _Malformed("row is not an object")
    for key in (*_STRINGS, *_OPTIONAL_STRINGS):
        if entry.get(key) is not None and not isinstance(entry.get(key), str):
            raise _Malformed(f"{key} is not a string")
    for key in ("sourceInstance", "surgeInstance"):
        if entry.get(key) is not None and _int(entry.get(key)) is None:
            raise _Malformed(f"{key} is not a 32-bit integer")
    if entry.get("released") is not None and not isinstance(entry.get("released"), bool):
        raise _Malformed("released is not a boolean")
    hints = entry.get("hintTargetNodes")
    if hints is not None and (
        not isinstance(hints, list) or not all(isinstance(h, str) for h in hints)
    ):
        raise _Malformed("hintTargetNodes is not a list of strings")
    return entry


def audit_rows(text: str) -> list[Mapping[str, Any]]:
    """The rows of a ``history.json`` of at most :data:`MAX_AUDIT_BYTES` (checked by the
    caller); raises :class:`~omed.controllers.ledger.document.LedgerUnreadable` for one that
    isn't the ledger's shape: the reader the ledger's writers use, then each row's types."""
    entries = ledger.read_entries({ledger.DATA_KEY: text})
    try:
        return [_check_entry(entry) for entry in entries]
    except _Malformed as exc:
        raise ledger.LedgerUnreadable(f"{ledger.DATA_KEY}: {exc}") from None


def _audit_record(entry: Mapping[str, Any], name: str) -> dict[str, Any]:
    own: list[str] = []
    phase = _phase(entry.get("phase"))
    if phase not in ledger.PHASES:
        phase = "Unknown"
        _add(own, "PhaseInvalid")
    raw_component = entry.get("component")
    comp = _component(raw_component)
    if comp is None:
        _add(own, "ComponentUnavailable" if not raw_component else "ComponentInvalid")
    request, source = _identity(entry.get("requestUUID"), entry.get("sourceInstance"), own)
    replacement = _int(entry.get("surgeInstance"))
    if replacement is not None:
        if replacement == -1 and phase in (ledger.PHASE_STARTED, ledger.PHASE_FAILED):
            replacement = None  # the writers' "no surge (yet)": a row before allocation
        elif replacement < 0 or replacement == source:
            _add(own, "ReplacementInvalid")
    from_node = entry.get("fromNode") or None
    if from_node is not None and not is_dns1123_subdomain(from_node):
        from_node = None
        _add(own, "NodeInvalid")
    hints = entry.get("hintTargetNodes") or []
    if len(hints) > MAX_HINTS:
        _add(own, "NodeHintsTruncated")
    started = _time(entry.get("startedAt"))
    completed = _time(entry.get("completedAt"))
    if started is None or (entry.get("completedAt") and completed is None):
        _add(own, "TimestampInvalid")
    reason = entry.get("reason")
    if reason == ledger.REASON_AUTO_RECOVER and entry.get("outcome") == ledger.OUTCOME_RELOCATE:
        outcome = "Relocated"
    else:
        outcome = _AUDIT_OUTCOMES.get(phase, "Unknown")
    record = _record(
        evidence=AUDIT,
        sourceName=name,
        requestID=request,
        component=comp,
        sourceInstance=_or(source, -1),
        replacementInstance=replacement,
        trigger="Auto" if reason == ledger.REASON_AUTO_RECOVER else "Unknown",
        phase=phase,
        freshness="Unverifiable",
        fromNode=from_node,
        targetNodeHints=_nodes(hints, own),
        startedAt=_stamp(started),
        completedAt=_stamp(completed),
        outcome=outcome,
        message=entry.get("outcome"),
        issues=own,
    )
    _check_times(record)
    return _finish(record)


def _audit(
    read: AuditRead, component: str | None, source: dict[str, Any]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """AUDIT: the ledger's rows; none at all from a ConfigMap that isn't the service's, a
    document over the bound, or one that isn't the ledger's shape (each its issue)."""
    if read.availability == ABSENT:
        return [], []
    if read.availability in (FORBIDDEN, UNREADABLE):
        return [], [{"code": "AuditUnavailable"}]
    if read.availability != AVAILABLE:
        return [], [{"code": "AuditIdentityInvalid"}]
    if not read.text:
        return [], []
    if len(read.text.encode()) > MAX_AUDIT_BYTES:
        source.update(availability="Unavailable", unavailableReason="PayloadTooLarge")
        return [], [{"code": "AuditPayloadTooLarge"}]
    try:
        entries = audit_rows(read.text)
    except ledger.LedgerUnreadable:
        source.update(availability="Unavailable", unavailableReason="MalformedPayload")
        return [], [{"code": "AuditMalformed"}]
    source["observedItems"] = len(entries)
    issues: list[dict[str, Any]] = []
    if len(entries) > MAX_SCANNED:
        source["truncated"] = True
        issues.append({"code": "AuditHistoryTruncated"})
    records = []
    for entry in entries[:MAX_SCANNED]:
        if (
            entry.get("reason") == ledger.REASON_FORCE_DELETE
            and entry.get("outcome") in _FORCE_DELETE_OUTCOMES
        ):
            continue
        record = _audit_record(entry, read.name)
        if component is not None and record["component"] != component:
            continue
        records.append(record)
    return records, issues


# -- correlations ----------------------------------------------------------------------------


def _correlate(records: list[dict[str, Any]], issues: list[dict[str, Any]]) -> None:
    """The issues between records of one request: the same request twice in one source, two
    sources that disagree on its Instances, a completion before a start, two outcomes."""
    by_request: dict[str, list[dict[str, Any]]] = {}
    for record in records:
        if record["requestID"] != "INVALID":
            by_request.setdefault(record["requestID"], []).append(record)
    for request, group in sorted(by_request.items()):
        for evidence in sorted({r["evidence"] for r in group}, key=_EVIDENCE_RANK.__getitem__):
            same = [r for r in group if r["evidence"] == evidence]
            if len(same) > 1:
                issues.append(
                    {"code": "DuplicateWithinSource", "evidence": evidence, "requestID": request}
                )
                for record in same:
                    _add(record["issues"], "DuplicateWithinSource")
                    _finish(record)
        for code, conflict in (
            ("CrossSourceIdentityConflict", _identity_conflict),
            ("ChronologyConflict", _chronology_conflict),
            ("TerminalOutcomeConflict", _outcome_conflict),
        ):
            if conflict(group):
                issues.append({"code": code, "requestID": request})
                for record in group:
                    _add(record["issues"], code)
                    _finish(record)


def _identity_conflict(group: Sequence[Mapping[str, Any]]) -> bool:
    known = [r for r in group if r["component"] != "unknown" and r["sourceInstance"] >= 0]
    for i, left in enumerate(known):
        for right in known[i + 1 :]:
            if left["evidence"] == right["evidence"]:
                continue
            if (left["component"], left["sourceInstance"]) != (
                right["component"],
                right["sourceInstance"],
            ):
                return True
            a, b = left["replacementInstance"], right["replacementInstance"]
            if a is not None and b is not None and a != b:
                return True
    return False


def _chronology_conflict(group: Sequence[Mapping[str, Any]]) -> bool:
    starts = [
        t
        for r in group
        for t in (_time(r["requestedAt"]), _time(r["startedAt"]), _time(r["allocatedAt"]))
        if t is not None
    ]
    ends = [t for r in group if (t := _time(r["completedAt"])) is not None]
    return bool(starts and ends and min(ends) < max(starts))


def _outcome_conflict(group: Sequence[Mapping[str, Any]]) -> bool:
    outcomes = {
        "Relocated" if r["outcome"] == "RelocationConfirmed" else r["outcome"]
        for r in group
        if r["phase"] in TERMINAL and r["outcome"] != "Unknown"
    }
    return len(outcomes) > 1


# -- the report ------------------------------------------------------------------------------


def _latest(record: Mapping[str, Any]) -> str | None:
    """The record's latest time: completed, else allocated, started, requested."""
    for key in ("completedAt", "allocatedAt", "startedAt", "requestedAt"):
        if record.get(key):
            return str(record[key])
    return None


def _order(record: Mapping[str, Any]) -> tuple[Any, ...]:
    """Newest first (no time last), then request, source, component, instance, phase."""
    when = _time(_latest(record))
    return (
        when is None,
        -(when.timestamp() if when else 0),
        record["requestID"],
        _EVIDENCE_RANK.get(record["evidence"], 3),
        record["sourceName"],
        record["component"],
        record["sourceInstance"],
        record["phase"],
    )


def _issue_order(issue: Mapping[str, Any]) -> tuple[str, str, str]:
    return (issue["code"], issue.get("requestID", ""), issue.get("evidence", ""))


def _source(kind: str, namespace: str, name: str, evidence: str, **extra: Any) -> dict[str, Any]:
    source = {
        "kind": kind,
        "namespace": namespace,
        "name": name,
        "evidence": evidence,
        "availability": AVAILABLE,
        "freshness": "Unverifiable",
        "observedPages": 0,
        "observedItems": 0,
        "bounded": True,
        "truncated": False,
        "collectedAt": None,
    }
    source.update(extra)
    return source


def _availability(value: str) -> dict[str, Any]:
    if value == AVAILABLE:
        return {"availability": AVAILABLE}
    return {
        "availability": "Unavailable",
        "unavailableReason": _UNAVAILABLE_REASON.get(value, "Unreadable"),
    }


def report(
    collection: Collection,
    *,
    replicas: ReplicaRead,
    audit: AuditRead,
    component: str | None,
    now: float,
) -> dict[str, Any]:
    """The ``MigrationHistoryReport`` of the three sources (see the module docstring)."""
    isvc = collection.isvc
    meta = isvc.get("metadata") or {}
    namespace = str(meta.get("namespace") or "")
    collected = _stamp(dt.datetime.fromtimestamp(int(now), tz=dt.UTC))
    auth_records, issues, freshness = _authoritative(collection, replicas, component)
    parent_freshness = _parent_freshness(isvc)
    parent_records, parent_issues, parent_items, parent_cut = _parent(
        isvc, component, parent_freshness
    )
    auth_source = _source(
        "InferenceReplicaStatus",
        namespace,
        "related-inferencereplicas",
        AUTHORITATIVE,
        freshness=freshness,
        observedPages=replicas.pages,
        observedItems=replicas.items,
        truncated=replicas.truncated or any(i["code"] == "AuthoritativeTruncated" for i in issues),
        **_availability(replicas.availability),
    )
    parent_source = _source(
        "InferenceServiceHistory",
        namespace,
        str(meta.get("name") or ""),
        PARENT,
        freshness=parent_freshness,
        observedItems=parent_items,
        truncated=parent_cut,
    )
    audit_source = _source(
        "ConfigMap", audit.namespace, audit.name, AUDIT, **_availability(audit.availability)
    )
    audit_records, audit_issues = _audit(audit, component, audit_source)
    issues += parent_issues + audit_issues
    records = [*auth_records, *parent_records, *audit_records]
    _correlate(records, issues)
    records.sort(key=_order)
    if len(records) > MAX_RECORDS:
        records = records[:MAX_RECORDS]
        issues.append({"code": "OutputTruncated"})
    unique: list[dict[str, Any]] = []
    for issue in sorted(issues, key=_issue_order):
        if issue not in unique:
            unique.append(issue)
    sources = [auth_source, parent_source, audit_source]
    for source in sources:
        source["collectedAt"] = collected
    warnings = []
    if any(i["code"] not in _TRUNCATIONS for i in unique):
        warnings.append({"code": "PartialData"})
    if any(i["code"] in _TRUNCATIONS for i in unique):
        warnings.append({"code": "Truncated"})
    summary = _summary(records, unique, sources)
    return {
        "apiVersion": REPORT_API_VERSION,
        "kind": "MigrationHistoryReport",
        "metadata": {"namespace": namespace, "name": meta.get("name")},
        "collectedAt": collected,
        "sources": sources,
        "content": {"summary": summary, "records": records, "issues": unique},
        "warnings": warnings,
    }


def _summary(
    records: Sequence[Mapping[str, Any]],
    issues: Sequence[Mapping[str, Any]],
    sources: Iterable[Mapping[str, Any]],
) -> dict[str, Any]:
    auth = [r for r in records if r["evidence"] == AUTHORITATIVE]
    invalid = sum(1 for r in records if r["state"] == "Invalid")
    state = "Partial" if issues or invalid else ("Reported" if records else "Empty")
    return {
        "state": state,
        "requests": len({r["requestID"] for r in records if r["requestID"] != "INVALID"}),
        "records": len(records),
        "authoritative": len(auth),
        "parentSummary": sum(1 for r in records if r["evidence"] == PARENT),
        "audit": sum(1 for r in records if r["evidence"] == AUDIT),
        "activeAuthoritative": sum(1 for r in auth if r["state"] == "Active"),
        "terminalAuthoritative": sum(1 for r in auth if r["state"] == "Terminal"),
        "invalid": invalid,
        "truncated": any(s["truncated"] for s in sources)
        or any(i["code"] in _TRUNCATIONS for i in issues),
    }


# -- tables ----------------------------------------------------------------------------------


def _when(record: Mapping[str, Any]) -> str:
    when = _time(_latest(record))
    return "-" if when is None else when.strftime("%m-%dT%H:%MZ")


def _detail(record: Mapping[str, Any]) -> str:
    for codes in (record["issues"], record["authoritativeIssues"]):
        if codes:
            return bounded(codes[0], CELL_WIDTH)
    return bounded(record["message"], CELL_WIDTH) or "-"


def rows(history: Mapping[str, Any]) -> list[list[str]]:
    """The compact ``EVID REQUEST/COMP PHASE/STATE WHEN DETAIL`` table (within 80 columns)."""
    content = history["content"]
    state = content["summary"]["state"]
    table = [["EVID", "REQUEST/COMP", "PHASE/STATE", "WHEN", "DETAIL"]]
    for record in content["records"]:
        table.append(
            [
                _SHORT_EVIDENCE.get(record["evidence"], "REPORT"),
                f"{record['requestID'][:8]}/{_INITIAL.get(record['component'], '?')}",
                f"{bounded(record['phase'], PHASE_WIDTH)}/{_STATE.get(record['state'], '?')}",
                _when(record),
                _detail(record),
            ]
        )
    for issue in content["issues"]:
        request = issue.get("requestID") or "-"
        table.append(
            [
                _SHORT_EVIDENCE.get(issue.get("evidence", ""), "REPORT"),
                f"{request[:8]}/-",
                f"{state}/?",
                "-",
                bounded(issue["code"], CELL_WIDTH),
            ]
        )
    if len(table) == 1:
        table.append(["REPORT", "-/-", f"{state}/?", "-", "-"])
    return table


WIDE_HEADERS: Final = (
    "EVIDENCE",
    "AVAILABILITY",
    "WINDOW",
    "SOURCE",
    "REQUEST",
    "COMPONENT",
    "SOURCE-INSTANCE",
    "REPLACEMENT",
    "TRIGGER",
    "MODE",
    "PHASE",
    "STATE",
    "FRESHNESS",
    "FROM-NODE",
    "TARGET-NODES",
    "REQUESTED",
    "STARTED",
    "ALLOCATED",
    "DEADLINE",
    "COMPLETED",
    "EVENTS",
    "OUTCOME",
    "DETAIL",
    "ISSUES",
)


def _dash(value: Any) -> str:
    return "-" if value is None or value == "" else str(value)


def _window(source: Mapping[str, Any]) -> str:
    """``<pages>p/<items>i/B/<C|T>``: what was read, bounded, complete or truncated."""
    bounded_mark = "B/" if source["bounded"] else ""
    end = "T" if source["truncated"] else "C"
    return f"{source['observedPages']}p/{source['observedItems']}i/{bounded_mark}{end}"


def wide_rows(history: Mapping[str, Any]) -> list[list[str]]:
    """``-o wide``: every field of each record, a row for each source without records (its
    ISSUES the reason it is unavailable, e.g. ``NotFound``), then the issues."""
    sources = history["sources"]
    content = history["content"]
    state = content["summary"]["state"]
    table = [list(WIDE_HEADERS)]
    seen: set[tuple[str, str]] = set()
    for record in content["records"]:
        source = next(
            (
                s
                for s in sources
                if s["evidence"] == record["evidence"] and s["name"] == record["sourceName"]
            ),
            next((s for s in sources if s["evidence"] == record["evidence"]), None),
        )
        if source is not None:
            seen.add((source["evidence"], source["name"]))
        codes = [*record["authoritativeIssues"], *record["issues"]]
        table.append(
            [
                record["evidence"],
                source["availability"] if source else "Unavailable",
                _window(source) if source else "-",
                _dash(record["sourceName"]),
                _dash(record["requestID"]),
                _dash(record["component"]),
                str(record["sourceInstance"]),
                _dash(record["replacementInstance"]),
                record["trigger"],
                record["mode"],
                record["phase"],
                record["state"],
                record["freshness"],
                _dash(record["fromNode"]),
                _dash(",".join(record["targetNodeHints"])),
                _dash(record["requestedAt"]),
                _dash(record["startedAt"]),
                _dash(record["allocatedAt"]),
                _dash(record["deadline"]),
                _dash(record["completedAt"]),
                str(record["eventCount"]),
                record["outcome"],
                _dash(record["message"]),
                _dash(",".join(codes)),
            ]
        )
    for source in sources:
        if (source["evidence"], source["name"]) in seen:
            continue
        table.append(
            [
                source["evidence"],
                source["availability"],
                _window(source),
                _dash(source["name"]),
                *["-"] * 8,
                source["freshness"],
                *["-"] * 10,
                _dash(source.get("unavailableReason")),
            ]
        )
    for issue in content["issues"]:
        table.append(
            [REPORT, *["-"] * 3, _dash(issue.get("requestID")), *["-"] * 6, state]
            + ["-"] * 11
            + [issue["code"]]
        )
    return table


__all__ = [
    "MAX_AUDIT_BYTES",
    "MAX_PAGES",
    "MAX_RECORDS",
    "MAX_SCANNED",
    "PAGE_SIZE",
    "AuditRead",
    "ReplicaRead",
    "audit_read",
    "audit_rows",
    "bounded",
    "report",
    "rows",
    "wide_rows",
]
