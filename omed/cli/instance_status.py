"""The report of ``kubectl ome instance status``, from objects already read.

Why: ``status`` shows one Instance: the row OME recorded, the migrations it takes
part in, and its live pods with their Warning events. This module decides every row from the
InferenceService, the component's replica (through :mod:`omed.cli.instances`), the runtime,
the manager's ``deploy`` entry, the pods and the events, with no I/O, so every rule is tested
without a cluster (docs/kubectl-ome.md says what each row holds).

Invariants: nothing here raises for what a cluster holds; text that looks like a credential
shows as ``[REDACTED]``; a control character shows as ``?``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from omed.api.constants import DEPLOYMENT_MODE_OME_NATIVE, READINESS_GATE_SERVING
from omed.api.events import WARNING
from omed.api.lifecyclechoices import UPDATE_STRATEGY_TYPES
from omed.cli.credentials import CREDENTIAL_PATTERNS
from omed.cli.instances import (
    ID_REJECT,
    NOT_OBSERVED,
    OK,
    SOURCE_UNAVAILABLE,
    Collection,
    Issue,
    cut,
)
from omed.controllers.inferencereplica.core.names import (
    WAITING_TOKENS_SHOWN_BY_NAME,
    parse_pod_name,
)
from omed.controllers.inferenceservice.core.mode import resolve_mode_json as resolve_mode

MAX_PODS: Final = 16
"""An Instance with more pods shows the 16 most likely to explain a problem."""
VALUE_WIDTH: Final = 61
"""The table cuts a value to this many characters and ``...``; ``-o wide`` never does."""


REPORTED: Final = "Reported"
NOT_OME_NATIVE: Final = "NotOMENative"
NO_REPLICA: Final = "NoReplica"
NOT_REPORTED: Final = "NotReported"
UNAVAILABLE_STATE: Final = "Unavailable"

_EVIDENCE_WORDS: Final = {
    OK: "Reported",
    NOT_OBSERVED: "NotObserved",
    SOURCE_UNAVAILABLE: "SourceUnavailable",
    ID_REJECT: "IdentityRejected",
}
_REDACT: Final = re.compile("|".join(f"(?:{p.pattern})" for _, p in CREDENTIAL_PATTERNS), re.I)


def evidence_word(evidence: str) -> str:
    """The list's evidence value as status spells it (``OK`` -> ``Reported``,
    ``STALE:3/4`` -> ``Stale:3/4``)."""
    if evidence.startswith("STALE:"):
        return "Stale:" + evidence.removeprefix("STALE:")
    return _EVIDENCE_WORDS.get(evidence, evidence)


def safe(value: Any) -> str:
    """A value as one printable line: ``-`` for nothing, credentials redacted."""
    if value is None or value == "":
        return "-"
    if isinstance(value, bool):
        return "true" if value else "false"
    text = str(value)
    if not text.isprintable():
        text = "".join(ch if ch.isprintable() else "?" for ch in text)
    return "[REDACTED]" if _REDACT.search(text) else text


@dataclass(frozen=True, slots=True)
class Deployment:
    mode: str
    source: str
    """Annotation, ServiceSpec, Runtime, ConfigMap or Default (as OME resolves it)."""
    origin: str
    """LiveRuntime (the runtime was read), NoRuntime, RuntimeNotFound or RuntimeUnreadable."""
    evidence: str
    """Resolved, or Partial when a read the resolution needed failed."""


def deployment(
    isvc: Mapping[str, Any],
    runtime: Mapping[str, Any] | None,
    *,
    origin: str,
    default_mode: str | None,
    default_known: bool,
) -> Deployment:
    """The component's mode, as the InferenceService controller resolves it
    (:func:`omed.controllers.inferenceservice.core.project.resolve_mode`)."""
    mode, source = resolve_mode(isvc, runtime, default_mode)
    partial = (source in ("ConfigMap", "Default") and not default_known) or (
        source not in ("Annotation", "ServiceSpec") and origin == "RuntimeUnreadable"
    )
    return Deployment(mode, source, origin, "Partial" if partial else "Resolved")


@dataclass(slots=True)
class Row:
    label: str
    fields: list[tuple[str, Any]]
    """(key, value); the table joins them as ``key=value``, ``-o wide`` prints one per row."""


@dataclass(slots=True)
class StatusReport:
    state: str
    component: str
    index: int
    evidence: str
    rows: list[Row]
    report: dict[str, Any] = field(default_factory=dict)


def _condition(pod: Mapping[str, Any], kind: str) -> str:
    """The pod condition's status as Kubernetes spells it (True, False, Unknown), ``-`` if
    the pod has none of that type yet."""
    for condition in (pod.get("status") or {}).get("conditions") or []:
        if isinstance(condition, Mapping) and condition.get("type") == kind:
            return str(condition.get("status") or "Unknown")
    return "-"


def _restarts(pod: Mapping[str, Any]) -> int:
    total = 0
    for status in (pod.get("status") or {}).get("containerStatuses") or []:
        count = status.get("restartCount") if isinstance(status, Mapping) else None
        if isinstance(count, int) and not isinstance(count, bool):
            total += count
    return total


def _trouble(pod: Mapping[str, Any]) -> tuple[int, int, int, int, str]:
    """Sort key: pods being deleted, not Ready, not serving, most restarts first."""
    meta = pod.get("metadata") or {}
    return (
        0 if meta.get("deletionTimestamp") else 1,
        1 if _condition(pod, "Ready") == "True" else 0,
        1 if _condition(pod, READINESS_GATE_SERVING) == "True" else 0,
        -_restarts(pod),
        str(meta.get("name", "")),
    )


def pick_pods(pods: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The :data:`MAX_PODS` pods most likely to explain a problem, worst first."""
    return sorted(pods, key=_trouble)[:MAX_PODS]


def warning_counts(
    events: Sequence[Mapping[str, Any]], pod_names: Sequence[str]
) -> list[tuple[str, str, int]]:
    """(pod, reason, count) of the Warning events of these pods, summed per reason."""
    wanted = set(pod_names)
    counts: dict[tuple[str, str], int] = {}
    for event in events:
        involved = event.get("involvedObject") or event.get("regarding") or {}
        if event.get("type") != WARNING or involved.get("kind") != "Pod":
            continue
        name = involved.get("name")
        if name not in wanted:
            continue
        count = event.get("count")
        series = event.get("series") or {}
        if isinstance(series, Mapping) and isinstance(series.get("count"), int):
            count = series["count"]
        number = count if isinstance(count, int) and not isinstance(count, bool) else 1
        key = (str(name), str(event.get("reason") or "-"))
        counts[key] = counts.get(key, 0) + number
    order = {name: i for i, name in enumerate(pod_names)}
    return sorted(
        ((pod, reason, count) for (pod, reason), count in counts.items()),
        key=lambda item: (order[item[0]], -item[2], item[1]),
    )


def build(
    collection: Collection,
    *,
    component: str,
    index: int,
    deploy: Deployment,
    pods: Sequence[Mapping[str, Any]] | None,
    events: Sequence[Mapping[str, Any]] | None,
    read_errors: Sequence[str] = (),
) -> StatusReport:
    """The report of Instance ``index`` of ``component``."""
    issues: list[Issue] = list(collection.issues)
    issues.extend(Issue("ReadFailed", text, component=component) for text in read_errors)
    read = collection.components.get(component)
    evidence = read.evidence if read is not None else "-"
    row: Mapping[str, Any] | None = None
    if deploy.mode != DEPLOYMENT_MODE_OME_NATIVE:
        state = NOT_OME_NATIVE
    elif not collection.listed or (read is not None and read.source is None):
        state = UNAVAILABLE_STATE
    elif read is None:
        state = NO_REPLICA
    elif read.evidence == SOURCE_UNAVAILABLE:
        state = UNAVAILABLE_STATE
    else:
        row = next((r for r in read.rows if r.get("index") == index), None)
        state = REPORTED if row is not None else NOT_REPORTED
    word = evidence_word(evidence) if evidence != "-" else "-"
    rows: list[Row] = [
        Row("state", [("", f"{state} {component}[{index}]"), ("evidence", word)]),
        Row(
            "deployment",
            [
                ("mode", deploy.mode),
                ("source", deploy.source),
                ("origin", deploy.origin),
                ("evidence", deploy.evidence),
            ],
        ),
    ]
    decode_reason = next(
        (i.message.split(": ", 1)[-1] for i in issues if i.code == "StatusUndecodable"), None
    )
    encoding = read.encoding if read is not None and read.encoding else "-"
    rows.append(
        Row("encoding", [("name", encoding), ("evidence", word), ("reason", decode_reason)])
    )
    report_pods: list[dict[str, Any]] = []
    report_events: list[dict[str, Any]] = []
    migrations: list[dict[str, Any]] = []
    if row is not None and read is not None:
        rows.extend(_row_rows(row, read.replica or "-", read.source or {}, issues, component))
        migrations = _migrations(read.source or {}, row, index)
        for migration in migrations:
            rows.append(
                Row(
                    "migration",
                    [
                        ("", migration.get("requestUUID")),
                        ("phase", migration.get("phase")),
                        ("from", migration.get("fromNode")),
                        ("source", migration.get("sourceInstance")),
                        ("surge", migration.get("surgeInstance")),
                        ("deadline", migration.get("deadline")),
                    ],
                )
            )
    if pods is not None and read is not None and state != NOT_OME_NATIVE:
        shown = pick_pods(pods)
        replica = read.replica or ""
        for pod in shown:
            meta = pod.get("metadata") or {}
            name = str(meta.get("name", ""))
            parsed = parse_pod_name(name, replica=replica, index=index)
            runner = parsed[0] if parsed else "-"
            phase = (pod.get("status") or {}).get("phase")
            facts: list[tuple[str, Any]] = [
                ("ready", _condition(pod, "Ready")),
                ("serving", _condition(pod, READINESS_GATE_SERVING)),
                ("deleting", meta.get("deletionTimestamp") is not None),
                ("restarts", _restarts(pod)),
                ("node", (pod.get("spec") or {}).get("nodeName")),
            ]
            rows.append(Row("pod", [("", f"{safe(name)} {safe(runner)}/{safe(phase)}"), *facts]))
            report_pods.append({"name": name, "runner": runner, "phase": phase, **dict(facts)})
        if len(pods) > MAX_PODS:
            rows.append(Row("pods", [("shown", MAX_PODS), ("of", len(pods))]))
        if events is not None:
            for pod_name, reason, count in warning_counts(
                events, [str((p.get("metadata") or {}).get("name", "")) for p in shown]
            ):
                rows.append(
                    Row(
                        "event",
                        [("", f"Pod/{safe(pod_name)}"), ("reason", reason), ("count", count)],
                    )
                )
                report_events.append({"pod": pod_name, "reason": reason, "count": count})
    for issue in issues:
        rows.append(Row("issue", [("", f"{issue.code}: {issue.message}")]))
    report = {
        "apiVersion": "cli.ome.io/v1alpha1",
        "kind": "InstanceStatusReport",
        "state": state,
        "component": component,
        "index": index,
        "evidence": word,
        "deployment": {
            "mode": deploy.mode,
            "source": deploy.source,
            "origin": deploy.origin,
            "evidence": deploy.evidence,
        },
        "encoding": {"name": encoding, "evidence": word, "reason": decode_reason},
        "inferenceReplica": read.replica if read is not None else None,
        "instance": _normalised(row) if row is not None else None,
        "migrations": migrations,
        "pods": report_pods,
        "events": report_events,
        "issues": [issue.as_dict() for issue in issues],
    }
    return StatusReport(state, component, index, word, rows, report)


def _normalised(row: Mapping[str, Any]) -> dict[str, Any]:
    """The row as the report carries it: an unknown waiting token is ``Unknown``."""
    out = dict(row)
    operation = out.get("operation")
    if isinstance(operation, Mapping):
        waiting = operation.get("waiting")
        if waiting and waiting not in WAITING_TOKENS_SHOWN_BY_NAME:
            out["operation"] = {**operation, "waiting": "Unknown"}
    return out


def _row_rows(
    row: Mapping[str, Any],
    replica: str,
    source: Mapping[str, Any],
    issues: list[Issue],
    component: str,
) -> list[Row]:
    rows = [
        Row(
            "instance",
            [
                ("", replica),
                ("inc", row.get("incarnation")),
                ("phase", row.get("phase")),
                ("admitted", row.get("admitted") is True),
            ],
        ),
        _fields_of("revisions", row, ("running", "runningRevision"), ("target", "targetRevision")),
        Row(
            "persisted",
            [
                ("pods", row.get("podCount", 0)),
                ("serving", row.get("servingPodCount", 0)),
                ("available", row.get("availablePodCount", 0)),
            ],
        ),
    ]
    if row.get("activeOrdinal") is not None or row.get("readySince") is not None:
        rows.append(_fields_of("lifecycle", row, "activeOrdinal", "readySince"))
    failure = row.get("lastFailure")
    if isinstance(failure, Mapping) and failure:
        rows.append(_fields_of("failure", failure, "pod", "container", "reason", "exitCode"))
        if failure.get("time"):
            rows.append(Row("fail time", [("", failure.get("time"))]))
    operation = row.get("operation")
    if isinstance(operation, Mapping) and operation:
        rows.append(
            _fields_of(
                "op", operation, "id", "type", "step", ("target", "targetRevision"), "reason"
            )
        )
        if operation.get("type") == "Update":
            lifecycle = (source.get("spec") or {}).get("lifecycle") or {}
            strategy = (
                (lifecycle.get("updateStrategy") or {}) if isinstance(lifecycle, Mapping) else {}
            ).get("type") or "SurgeThenDrain"
            if strategy not in UPDATE_STRATEGY_TYPES:
                issues.append(
                    Issue(
                        "OperationStrategyUnknown",
                        f"the update strategy {safe(strategy)} is not one this CLI knows",
                        component=component,
                    )
                )
                strategy = "Unknown"
            rows.append(Row("op strategy", [("", strategy)]))
        waiting = operation.get("waiting")
        if waiting:
            if waiting not in WAITING_TOKENS_SHOWN_BY_NAME:
                issues.append(
                    Issue(
                        "OperationWaitingUnknown",
                        "the operation waits on a token this CLI doesn't recognise; the "
                        "InferenceReplica's status keeps the raw value",
                        component=component,
                    )
                )
                waiting = "Unknown"
            rows.append(Row("op hold", [("waiting", waiting)]))
        rows.append(
            _fields_of(
                "op timing", operation, "startedAt", "lastProgressAt", "deadline", "retryCount"
            )
        )
    return rows


def _fields_of(label: str, obj: Mapping[str, Any], *keys: str | tuple[str, str]) -> Row:
    """A row of ``obj``'s fields, in the order given: a key is shown as itself, a
    ``(shown, key)`` pair under its shorter name; a missing field shows as None."""
    pairs = [(key, key) if isinstance(key, str) else key for key in keys]
    return Row(label, [(shown, obj.get(key)) for shown, key in pairs])


def _migrations(
    source: Mapping[str, Any], row: Mapping[str, Any], index: int
) -> list[dict[str, Any]]:
    """The replica's migration records that name this Instance (or its operation's request)."""
    operation = row.get("operation")
    request = operation.get("requestUUID") if isinstance(operation, Mapping) else None
    found: list[dict[str, Any]] = []
    for record in (source.get("status") or {}).get("migrations") or []:
        if not isinstance(record, Mapping):
            continue
        named = (record.get("sourceInstance"), record.get("surgeInstance"), record.get("instance"))
        if index in named or (request and record.get("requestUUID") == request):
            found.append(dict(record))
    return found


def _words(key: str) -> str:
    """``exitCode`` -> ``exit code``: a key as ``-o wide`` names its row."""
    return re.sub(r"(?<=[a-z])(?=[A-Z])", " ", key).lower()


def _joined(row: Row) -> str:
    return " ".join(
        safe(value) if key == "" else f"{key}={safe(value)}" for key, value in row.fields
    )


def table_rows(report: StatusReport, *, wide: bool) -> list[list[str]]:
    """``FIELD VALUE`` rows; the table cuts values at :data:`VALUE_WIDTH`, wide splits them."""
    out = [["FIELD", "VALUE"]]
    counters: dict[str, int] = {}
    for row in report.rows:
        if not wide:
            out.append([row.label, cut(_joined(row), VALUE_WIDTH)])
            continue
        label = row.label
        if label in ("pod", "event", "migration"):
            label = f"{label}[{counters.get(label, 0)}]"
            counters[row.label] = counters.get(row.label, 0) + 1
        for key, value in row.fields:
            name = label if key == "" else f"{label} {_words(key)}"
            out.append([name, safe(value)])
    return out


__all__ = [
    "Deployment",
    "StatusReport",
    "build",
    "deployment",
    "evidence_word",
    "pick_pods",
    "safe",
    "table_rows",
    "warning_counts",
]
