"""``kubectl ome migration drain-node``: which Instances a node holds, their request IDs, when
each request may be sent, and the report, decided from objects already read (no I/O).

Why: ``kubectl drain`` evicts, and an eviction dips serving capacity; OME's answer is one
guarded migration per Instance (its replacement serves before it drains). This module turns a
node into those migrations and keeps the drain inside OME's caps. The flow (read, preview,
prompt, send, follow) is in :mod:`omed.cli.kubectl_ome_drain`; each request is checked and
written exactly as ``migration start`` writes one (:mod:`omed.cli.migration_start`).

Invariants:

* **Resumable.** A request's ID is a function of what it moves, never of the run:
  ``uuid5(DRAIN_NAMESPACE, "drain-node|<node>|<service uid>|<component>|<instance>|<pod
  uids>|<attempt>")``, the pod uids those of the Instance's pods on the node, sorted. A run
  that finds the ID of attempt *n* waiting on the service or in flight in a record follows
  it instead of sending another; an ID that ended (its record terminal, or only the audit
  ConfigMap knowing it) is never sent again, the next attempt's ID is. Pod uids make an
  Instance that a scale-up later rebuilt under a reused index a new subject, with IDs of its
  own.
* **Within the caps.** At most ``max_in_flight`` migrations of the drain's replicas are in
  flight at once (every request waiting on a service and every record not yet terminal
  counts, the drain's own and anyone else's), and at most one per component: the controller
  dispatches a component's migrations one at a time, so a second request would only queue
  with its deadline running. A component whose rate window is spent gets no request (the
  controller would fail it, ``migration rate cap reached``).
* **Never, listed.** An Instance whose component's mode is Never is listed with the reason and
  never sent a request.
"""

from __future__ import annotations

import datetime as dt
import uuid as uuidlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Final

from omed.api.constants import (
    LABEL_COMPONENT,
    LABEL_INFERENCE_SERVICE,
    LABEL_INSTANCE_INDEX,
    LABEL_MANAGED_BY,
    MANAGED_BY_OME_NATIVE,
    MIGRATION_PHASE_COMPLETED,
    TERMINAL_MIGRATION_PHASES,
)
from omed.cli.instances import cut

ACTION: Final = "migration drain-node"
PREVIEW_TITLE: Final = "ALPHA guarded drain preview (not controller convergence)"
DRAIN_NAMESPACE: Final = uuidlib.UUID("5b0d8c1e-2f6a-4e7b-9c3d-8a1f0e6b4d27")
"""The uuid5 namespace of drain-node's request IDs (fixed: a later run derives the same IDs)."""
MAX_ATTEMPTS: Final = 8
"""Attempts per Instance: the IDs of attempts 1..8 are tried in order; past them, refused."""
DETAIL_WIDTH: Final = 40

# Row states. Final ones end a row's part in the run.
PENDING: Final = "Pending"
"""To send once the caps allow."""
SENT: Final = "Sent"
"""The request waits on the InferenceService for OME to take it."""
IN_FLIGHT: Final = "InFlight"
"""OME keeps a record of it that hasn't ended."""
COMPLETED: Final = "Completed"
FAILED: Final = "Failed"
SKIPPED: Final = "Skipped"
"""Mode Never: listed, not moved."""
REFUSED: Final = "Refused"
"""A check of migration start refused it (a state conflict)."""
DEFERRED: Final = "Deferred"
"""The component's rate window is spent: a later run sends it."""
UNKNOWN: Final = "Unknown"
"""The request left the InferenceService, and no record or audit row says what became of it."""
TIMED_OUT: Final = "TimedOut"
INTERRUPTED: Final = "Interrupted"
"""Ctrl-C ended the run first; what was sent stays, and a later run follows it."""
ERROR: Final = "Error"
"""A read or check that failed as an error (migration start's exit 1): the service can't be
read, its runtime doesn't resolve, it is being deleted."""
PLANNED: Final = "Planned"
"""A dry run's row that would be sent."""
FINAL_STATES: Final = frozenset(
    {
        COMPLETED,
        FAILED,
        SKIPPED,
        REFUSED,
        DEFERRED,
        UNKNOWN,
        TIMED_OUT,
        INTERRUPTED,
        PLANNED,
        ERROR,
    }
)
ACTIVE_STATES: Final = frozenset({SENT, IN_FLIGHT})
ERROR_STATES: Final = frozenset({FAILED, UNKNOWN, TIMED_OUT, INTERRUPTED, ERROR})
"""Exit 1: a move that didn't happen, or whose outcome isn't known."""
CONFLICT_STATES: Final = frozenset({REFUSED, DEFERRED})
"""Exit 3: the state blocked a move; nothing was sent for it."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Subject:
    """One Instance with a pod on the node: what a request moves."""

    namespace: str
    service: str
    component: str
    instance: int
    pods: tuple[str, ...]
    """Its pods on the node, by name."""
    pod_uids: tuple[str, ...]
    """Their uids, sorted: part of the request ID."""

    @property
    def key(self) -> tuple[str, str, str, int]:
        return (self.namespace, self.service, self.component, self.instance)

    @property
    def replica_key(self) -> tuple[str, str, str]:
        return (self.namespace, self.service, self.component)

    @property
    def name(self) -> str:
        return f"{self.namespace}/{self.service} {self.component}/{self.instance}"


def _labels(pod: Mapping[str, Any]) -> Mapping[str, Any]:
    return (pod.get("metadata") or {}).get("labels") or {}


def subjects_on_node(pods: Iterable[Mapping[str, Any]], node: str) -> list[Subject]:
    """The OMENative Instances with a live pod on ``node`` (a Terminating pod is leaving on
    its own), one per service, component and index, sorted by them."""
    found: dict[tuple[str, str, str, int], list[Mapping[str, Any]]] = {}
    for pod in pods:
        meta = pod.get("metadata") or {}
        labels = _labels(pod)
        if (pod.get("spec") or {}).get("nodeName") != node or meta.get("deletionTimestamp"):
            continue
        if labels.get(LABEL_MANAGED_BY) != MANAGED_BY_OME_NATIVE:
            continue
        service = labels.get(LABEL_INFERENCE_SERVICE)
        component = labels.get(LABEL_COMPONENT)
        index_label = str(labels.get(LABEL_INSTANCE_INDEX, ""))
        if not service or not component or not index_label.isdigit():
            continue
        key = (str(meta.get("namespace") or ""), str(service), str(component), int(index_label))
        found.setdefault(key, []).append(pod)
    subjects = []
    for (namespace, service, component, index), group in sorted(found.items()):
        metas = sorted((p.get("metadata") or {} for p in group), key=lambda m: str(m.get("name")))
        subjects.append(
            Subject(
                namespace=namespace,
                service=service,
                component=component,
                instance=index,
                pods=tuple(str(m.get("name")) for m in metas),
                pod_uids=tuple(sorted(str(m.get("uid")) for m in metas)),
            )
        )
    return subjects


def request_id(subject: Subject, *, node: str, service_uid: str, attempt: int) -> str:
    """The request ID of ``attempt`` (1, 2, ...) at moving ``subject`` off ``node``: the same in
    every run, so a run finds what an earlier one sent."""
    name = "|".join(
        [
            "drain-node",
            node,
            service_uid,
            subject.component,
            str(subject.instance),
            ",".join(subject.pod_uids),
            str(attempt),
        ]
    )
    return str(uuidlib.uuid5(DRAIN_NAMESPACE, name))


@dataclass(frozen=True, slots=True, kw_only=True)
class Known:
    """What the service knows of request IDs: ``waiting`` on it (annotations), the phase of
    each record of its replicas, and every other ID it knows (the audit ConfigMap, the
    service's history)."""

    waiting: frozenset[str]
    phases: Mapping[str, str]
    others: frozenset[str]


@dataclass(frozen=True, slots=True, kw_only=True)
class Resume:
    """Where a subject's requests stand: ``request_id`` is the attempt to follow (``state``
    Sent or InFlight) or to send (Pending); ``ended`` the attempts before it that ended, with
    their phase."""

    request_id: str | None
    attempt: int
    state: str
    phase: str
    ended: tuple[tuple[str, str], ...] = ()


def resume(subject: Subject, *, node: str, service_uid: str, known: Known) -> Resume:
    """The first attempt whose ID hasn't ended: waiting (Sent), recorded and not terminal
    (InFlight), or unknown everywhere (Pending: to send). Every attempt's ID ended: Refused."""
    ended: list[tuple[str, str]] = []
    for attempt in range(1, MAX_ATTEMPTS + 1):
        rid = request_id(subject, node=node, service_uid=service_uid, attempt=attempt)
        if rid in known.waiting:
            return Resume(request_id=rid, attempt=attempt, state=SENT, phase="", ended=tuple(ended))
        phase = known.phases.get(rid)
        if phase is not None and phase not in TERMINAL_MIGRATION_PHASES:
            return Resume(
                request_id=rid, attempt=attempt, state=IN_FLIGHT, phase=phase, ended=tuple(ended)
            )
        if phase is None and rid not in known.others:
            return Resume(
                request_id=rid, attempt=attempt, state=PENDING, phase="", ended=tuple(ended)
            )
        ended.append((rid, phase or "Ended"))
    return Resume(
        request_id=None, attempt=MAX_ATTEMPTS, state=REFUSED, phase="", ended=tuple(ended)
    )


# -- The caps ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class ReplicaLoad:
    """One component's migrations as last read: how many are in flight (requests waiting on
    the service plus records not terminal, anyone's) and how many of the rate window's slots
    are left (None: no window known)."""

    in_flight: int
    window_left: int | None = None


def in_flight_of(records: Iterable[Mapping[str, Any]], waiting: Iterable[str]) -> int:
    """The component's migrations in flight: its records that haven't ended and the requests
    waiting for it, each ID once (a request the controller has recorded but not yet removed
    from the service is one migration, not two)."""
    active = {
        str(r.get("requestUUID"))
        for r in records
        if str(r.get("phase") or "") not in TERMINAL_MIGRATION_PHASES
    }
    return len(active | set(waiting))


def _epoch(value: Any) -> float | None:
    """Seconds since the epoch of an RFC 3339 time (None: not one)."""
    try:
        return dt.datetime.fromisoformat(str(value).replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def window_left(
    records: Iterable[Mapping[str, Any]],
    *,
    limit: int,
    window_seconds: float,
    now: float,
    waiting: Iterable[str],
) -> int:
    """The rate window's free slots: ``limit`` less the records allocated within the window
    (the controller's count) and those that will allocate (records not yet allocated and not
    terminal, requests waiting that have no record yet)."""
    records = list(records)
    recorded = {str(r.get("requestUUID")) for r in records}
    used = len(set(waiting) - recorded)
    for record in records:
        allocated = record.get("allocatedAt")
        if allocated:
            at = _epoch(allocated)
            if at is not None and at > now - window_seconds:
                used += 1
        elif str(record.get("phase") or "") not in TERMINAL_MIGRATION_PHASES:
            used += 1
    return limit - used


@dataclass(frozen=True, slots=True, kw_only=True)
class Row:
    """One subject's line of the drain: its state and what the last read said."""

    subject: Subject
    state: str
    request_id: str | None = None
    attempt: int = 0
    phase: str = ""
    message: str = ""
    surge: int | None = None
    detail: str = ""
    """Why it is skipped, refused or deferred; the mode and revision of a planned one."""
    resumed: bool = False


def next_sends(
    rows: Sequence[Row], *, loads: Mapping[tuple[str, str, str], ReplicaLoad], max_in_flight: int
) -> list[Row]:
    """The Pending rows to send now, in order: while fewer than ``max_in_flight`` migrations of
    the drain's components are in flight, each row whose component has none in flight and a
    free slot in its rate window (a row sent counts at once)."""
    total = sum(load.in_flight for load in loads.values())
    busy = {key for key, load in loads.items() if load.in_flight > 0}
    chosen: list[Row] = []
    for row in rows:
        if total >= max_in_flight:
            break
        if row.state != PENDING or row.subject.replica_key in busy:
            continue
        load = loads.get(row.subject.replica_key)
        if load is not None and load.window_left is not None and load.window_left <= 0:
            continue
        chosen.append(row)
        busy.add(row.subject.replica_key)
        total += 1
    return chosen


def rate_spent(rows: Sequence[Row], loads: Mapping[tuple[str, str, str], ReplicaLoad]) -> list[Row]:
    """Pending rows whose component has nothing in flight but no slot left in its window:
    nothing this run does frees one, so they are Deferred."""
    out = []
    for row in rows:
        load = loads.get(row.subject.replica_key)
        if (
            row.state == PENDING
            and load is not None
            and load.in_flight == 0
            and load.window_left is not None
            and load.window_left <= 0
        ):
            out.append(row)
    return out


def follow(row: Row, *, known: Known, record: Mapping[str, Any] | None) -> Row:
    """A Sent or InFlight row after a read: its record's phase and message (terminal: its end),
    waiting still (Sent), or gone from the service without a trace (left as it was: the caller
    calls it Unknown when that lasts)."""
    if row.request_id is None or row.state not in ACTIVE_STATES:
        return row
    if record is not None:
        phase = str(record.get("phase") or "")
        surge = record.get("surgeInstance")
        changed = replace(
            row,
            phase=phase,
            message=str(record.get("message") or ""),
            surge=surge if isinstance(surge, int) else row.surge,
        )
        if phase in TERMINAL_MIGRATION_PHASES:
            return replace(
                changed, state=COMPLETED if phase == MIGRATION_PHASE_COMPLETED else FAILED
            )
        return replace(changed, state=IN_FLIGHT)
    if row.request_id in known.waiting:
        return replace(row, state=SENT)
    return row


def not_drained(rows: Sequence[Row]) -> str:
    """What kept the node from draining, for the closing error line: ``1 Failed, 2 Refused``."""
    counts: dict[str, int] = {}
    for row in rows:
        if row.state in ERROR_STATES | CONFLICT_STATES:
            counts[row.state] = counts.get(row.state, 0) + 1
    return ", ".join(f"{n} {state}" for state, n in sorted(counts.items()))


def exit_code(rows: Sequence[Row]) -> int:
    """0 when every Instance moved (or was skipped for mode Never); 1 when a move failed, ended
    unknown or ran out of time; else 3 when the state refused or deferred one."""
    states = {row.state for row in rows}
    if states & ERROR_STATES:
        return 1
    if states & CONFLICT_STATES:
        return 3
    return 0


# -- Output --------------------------------------------------------------------------------------


def _short_id(request: str | None) -> str:
    return request[:8] if request else "-"


def _detail(row: Row) -> str:
    if row.state in (SKIPPED, REFUSED, DEFERRED, PLANNED, PENDING, ERROR) and row.detail:
        return row.detail
    if row.message:
        return row.message
    if row.phase:
        return row.phase
    return row.detail or "-"


def table_rows(rows: Sequence[Row]) -> list[list[str]]:
    """``NAMESPACE SERVICE COMP/INST REQUEST STATE DETAIL``, one per Instance (the detail cut
    at 40 characters; ``-o json`` has it whole)."""
    table = [["NAMESPACE", "SERVICE", "COMP/INST", "REQUEST", "STATE", "DETAIL"]]
    for row in rows:
        subject = row.subject
        state = f"{row.state}(resumed)" if row.resumed and row.state in ACTIVE_STATES else row.state
        table.append(
            [
                subject.namespace,
                subject.service,
                f"{subject.component}/{subject.instance}",
                _short_id(row.request_id),
                state,
                cut(_detail(row), DETAIL_WIDTH),
            ]
        )
    return table


def progress_line(row: Row) -> str:
    """One stderr line when a row changes state."""
    text = f"{row.subject.name}: {row.state}"
    if row.request_id:
        text += f" request {row.request_id}"
    detail = row.message or row.detail or row.phase
    return f"{text} ({detail})" if detail else text


def report(
    rows: Sequence[Row],
    *,
    node: str,
    namespace: str | None,
    dry_run: str,
    max_in_flight: int | None,
    caps_source: str | None,
    peak_in_flight: int,
) -> dict[str, Any]:
    """The ``DrainNodeReport`` of ``-o json`` and ``-o yaml``."""
    summary: dict[str, int] = {}
    for row in rows:
        summary[row.state] = summary.get(row.state, 0) + 1
    return {
        "apiVersion": "cli.ome.io/v1alpha1",
        "kind": "DrainNodeReport",
        "action": ACTION,
        "node": node,
        "namespace": namespace,
        "dryRun": dry_run,
        "caps": {
            "maxInFlightMigrations": max_in_flight,
            "source": caps_source,
            "perComponent": 1,
        },
        "peakInFlight": peak_in_flight,
        "summary": dict(sorted(summary.items())),
        "instances": [
            {
                "namespace": row.subject.namespace,
                "service": row.subject.service,
                "component": row.subject.component,
                "instance": row.subject.instance,
                "pods": list(row.subject.pods),
                "requestID": row.request_id,
                "attempt": row.attempt or None,
                "resumed": row.resumed,
                "state": row.state,
                "phase": row.phase or None,
                "surgeInstance": row.surge,
                "message": row.message or None,
                "detail": row.detail or None,
            }
            for row in rows
        ],
        "exitCode": exit_code(rows),
    }


__all__ = [
    "ACTION",
    "DRAIN_NAMESPACE",
    "MAX_ATTEMPTS",
    "PREVIEW_TITLE",
    "Known",
    "ReplicaLoad",
    "Resume",
    "Row",
    "Subject",
    "exit_code",
    "follow",
    "in_flight_of",
    "next_sends",
    "not_drained",
    "progress_line",
    "rate_spent",
    "report",
    "request_id",
    "resume",
    "subjects_on_node",
    "table_rows",
    "window_left",
]
