"""The audit ledger's document: its rows, how one is added, what is kept, the ConfigMap.

Why a pure module: every writer of the ledger (force deletes today, migrations and
automatic relocations later) must produce upstream OME's shape byte for byte, keep the same
rows, and never lose a row another writer added; those rules are tested here without an API
server, and :mod:`.writer` only moves the result.

The shape (upstream OME's ``workload/audit``): the ConfigMap ``<isvc>-ome-migration-audit``
in the InferenceService's namespace, label ``ome.io/managed-by: OMENative``, a controller
owner reference to the InferenceService (so the garbage collector removes it with the
service), and one data key, ``history.json``::

    {"entries":[{"requestUUID":"..","component":"engine","sourceInstance":3,
      "surgeInstance":4,"phase":"Started|Completed|Failed","reason":"..","fromNode":"..",
      "revision":"..","released":false,"hintTargetNodes":[".."],"startedAt":"RFC3339",
      "completedAt":"RFC3339","outcome":".."}]}

written as Go's ``encoding/json`` writes the struct: fields in that order, compact, HTML-safe
strings, and ``omitempty`` on ``surgeInstance``, ``reason``, ``fromNode``, ``revision``,
``released``, ``hintTargetNodes``, ``completedAt`` and ``outcome`` (so a surge at index 0 is
left out, as upstream leaves it out).

Invariants:

* rows this module doesn't model are kept as they were read (their JSON object is carried
  through, not rebuilt), so a newer writer's fields survive an older writer's append;
* a row is identified by ``(requestUUID, reason)``: writing the same row again replaces it in
  place, so a writer that retries after a crash never adds a second row, and a row that moves
  on (Started -> Completed) keeps the ``startedAt`` it was first written with (a migration's
  first row has the request's ``requested_at``);
* retention keeps every ``Started`` row and the last :data:`TERMINAL_KEPT` terminal rows, in
  the order they were written.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal, get_args

from omed.api.constants import KIND_INFERENCE_SERVICE, LABEL_MANAGED_BY
from omed.api.constants import MANAGED_BY_OME_NATIVE as MANAGED_BY
from omed.api.gostring import go_string
from omed.clock import rfc3339
from omed.controllers.owners import controller_reference

SUFFIX: Final = "-ome-migration-audit"
DATA_KEY: Final = "history.json"
TERMINAL_KEPT: Final = 200
"""Terminal (Completed, Failed) rows kept, the newest; Started rows are all kept."""

LedgerPhase = Literal["Started", "Completed", "Failed"]
"""A row's phase: Started while its operation runs, then Completed or Failed."""
PHASES: Final[tuple[LedgerPhase, ...]] = get_args(LedgerPhase)
PHASE_STARTED: Final[LedgerPhase] = "Started"
PHASE_COMPLETED: Final[LedgerPhase] = "Completed"
PHASE_FAILED: Final[LedgerPhase] = "Failed"

REASON_FORCE_DELETE: Final = "ForceDelete"
OUTCOME_FORCE_DELETE: Final = "force-delete-unreachable"
REASON_AUTO_RECOVER: Final = "AutoRecover"
"""The reason of an automatic relocation's row."""
OUTCOME_RELOCATE: Final = "relocate-recreate"
OWN_OUTCOMES: Final[Mapping[str, str]] = {
    REASON_FORCE_DELETE: OUTCOME_FORCE_DELETE,
    REASON_AUTO_RECOVER: OUTCOME_RELOCATE,
}
"""The reasons of the rows OME writes on its own (:func:`own_entry`), each with its row's
outcome."""
RESERVED_REASONS: Final = frozenset(OWN_OUTCOMES)
"""The reasons no migration request may take: OME's own rows'."""
OUTCOME_MIGRATED: Final = "migrated"
"""The outcome of a migration request's Completed row (a Failed one carries the record's
message; the row's reason is the request's)."""


def ledger_name(isvc: str) -> str:
    """The ConfigMap of InferenceService ``isvc``'s ledger."""
    return f"{isvc}{SUFFIX}"


@dataclass(frozen=True, slots=True, kw_only=True)
class LedgerEntry:
    """One row, as a writer builds it."""

    request_uuid: str
    component: str
    source_instance: int
    phase: LedgerPhase
    surge_instance: int | None = None
    reason: str | None = None
    from_node: str | None = None
    revision: str | None = None
    released: bool = False
    hint_target_nodes: tuple[str, ...] = ()
    started_at: dt.datetime
    completed_at: dt.datetime | None = None
    outcome: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The row's JSON object, Go's field order and ``omitempty`` rules."""
        row: dict[str, Any] = {
            "requestUUID": self.request_uuid,
            "component": self.component,
            "sourceInstance": self.source_instance,
        }
        if self.surge_instance:
            row["surgeInstance"] = self.surge_instance
        row["phase"] = self.phase
        if self.reason:
            row["reason"] = self.reason
        if self.from_node:
            row["fromNode"] = self.from_node
        if self.revision:
            row["revision"] = self.revision
        if self.released:
            row["released"] = True
        if self.hint_target_nodes:
            row["hintTargetNodes"] = list(self.hint_target_nodes)
        row["startedAt"] = rfc3339(self.started_at)
        if self.completed_at is not None:
            row["completedAt"] = rfc3339(self.completed_at)
        if self.outcome:
            row["outcome"] = self.outcome
        return row


def own_entry(
    reason: str,
    *,
    key: str,
    component: str,
    index: int,
    node: str | None,
    revision: str | None,
    now: dt.datetime,
) -> LedgerEntry:
    """The row of one step OME takes on its own (``reason`` one of :data:`OWN_OUTCOMES`': a
    force delete, an automatic relocation): terminal at once, there being nothing to wait
    for, with the reason's outcome; keyed by ``key`` (the pod's uid, the relocation's
    request uuid), so a step retried after a crash replaces its own row."""
    return LedgerEntry(
        request_uuid=key,
        component=component,
        source_instance=index,
        phase=PHASE_COMPLETED,
        reason=reason,
        from_node=node,
        revision=revision,
        started_at=now,
        completed_at=now,
        outcome=OWN_OUTCOMES[reason],
    )


class LedgerUnreadable(ValueError):
    """``history.json`` is not a JSON object with an ``entries`` list of objects."""


def read_entries(data: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    """The rows of a ConfigMap's ``data`` (none when the key is absent or empty).

    Raises :class:`LedgerUnreadable` for a document that isn't the ledger's shape: a
    writer must not replace rows it can't read with its own.
    """
    text = (data or {}).get(DATA_KEY)
    if not text:
        return []
    try:
        document = json.loads(text)
    except ValueError as err:
        raise LedgerUnreadable(f"{DATA_KEY} is not JSON: {err}") from err
    entries = document.get("entries") if isinstance(document, dict) else None
    if entries is None and isinstance(document, dict):
        return []
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise LedgerUnreadable(f"{DATA_KEY} has no list of entries")
    return list(entries)


def _identity(row: Mapping[str, Any]) -> tuple[Any, Any]:
    return row.get("requestUUID"), row.get("reason")


def _terminal(row: Mapping[str, Any]) -> bool:
    return row.get("phase") != PHASE_STARTED


def retained(rows: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """Every Started row and the last :data:`TERMINAL_KEPT` terminal rows, order kept."""
    terminal = [i for i, row in enumerate(rows) if _terminal(row)]
    dropped = set(terminal[: max(len(terminal) - TERMINAL_KEPT, 0)])
    return [row for i, row in enumerate(rows) if i not in dropped]


def with_entry(
    rows: Sequence[Mapping[str, Any]], entry: LedgerEntry
) -> list[Mapping[str, Any]] | None:
    """The rows with ``entry`` written (in place of its own earlier row, else appended),
    then the retention applied; ``None`` when the rows already hold it as it is."""
    new = entry.to_json()
    key = _identity(new)
    out: list[Mapping[str, Any]] = []
    replaced = False
    for row in rows:
        if not replaced and _identity(row) == key:
            if isinstance(row.get("startedAt"), str):
                new["startedAt"] = row["startedAt"]  # a row keeps the start it was written with
            if dict(row) == new:
                return None
            out.append(new)
            replaced = True
        else:
            out.append(row)
    if not replaced:
        out.append(new)
    return retained(out)


def _go_json(value: Any) -> str:
    """Compact JSON as Go's ``encoding/json`` writes it (HTML-safe strings)."""
    if isinstance(value, str):
        return go_string(value)
    if isinstance(value, bool) or value is None:
        return json.dumps(value)
    if isinstance(value, int | float):
        return json.dumps(value)
    if isinstance(value, Mapping):
        return "{" + ",".join(f"{go_string(str(k))}:{_go_json(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list | tuple):
        return "[" + ",".join(_go_json(v) for v in value) + "]"
    raise TypeError(f"not JSON: {type(value).__name__}")


def render(rows: Sequence[Mapping[str, Any]]) -> str:
    """``history.json`` for ``rows``."""
    return _go_json({"entries": list(rows)})


@dataclass(frozen=True, slots=True, kw_only=True)
class Owner:
    """The InferenceService that owns the ledger."""

    name: str
    uid: str


def owner_reference(owner: Owner) -> dict[str, Any]:
    """The controller reference that makes ``owner`` the ledger's controller."""
    return controller_reference(kind=KIND_INFERENCE_SERVICE, name=owner.name, uid=owner.uid)


def owned_references(refs: Sequence[Mapping[str, Any]], owner: Owner) -> list[dict[str, Any]]:
    """``refs`` with the controller reference to ``owner``: a controller reference to anyone
    else (a foreign one, or an earlier InferenceService of the name) is replaced."""
    kept = [dict(ref) for ref in refs if not ref.get("controller") and ref.get("uid") != owner.uid]
    return [*kept, owner_reference(owner)]


def owned_by(refs: Sequence[Mapping[str, Any]], owner: Owner) -> bool:
    return any(ref.get("controller") and ref.get("uid") == owner.uid for ref in refs)


def configmap_body(
    *, namespace: str, owner: Owner, rows: Sequence[Mapping[str, Any]]
) -> dict[str, Any]:
    """The ledger ConfigMap to create."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": ledger_name(owner.name),
            "namespace": namespace,
            "labels": {LABEL_MANAGED_BY: MANAGED_BY},
            "ownerReferences": [owner_reference(owner)],
        },
        "data": {DATA_KEY: render(rows)},
    }


def updated_configmap(
    existing: Mapping[str, Any], *, owner: Owner, rows: Sequence[Mapping[str, Any]]
) -> dict[str, Any]:
    """``existing`` with ``rows`` as its document, the label and the controller reference
    set; its resourceVersion kept, so the update is a compare-and-swap."""
    meta = dict(existing.get("metadata") or {})
    meta["labels"] = {**(meta.get("labels") or {}), LABEL_MANAGED_BY: MANAGED_BY}
    meta["ownerReferences"] = owned_references(meta.get("ownerReferences") or (), owner)
    data = {**(existing.get("data") or {}), DATA_KEY: render(rows)}
    return {**existing, "metadata": meta, "data": data}


__all__ = [
    "DATA_KEY",
    "OUTCOME_FORCE_DELETE",
    "OUTCOME_MIGRATED",
    "OUTCOME_RELOCATE",
    "OWN_OUTCOMES",
    "PHASES",
    "PHASE_COMPLETED",
    "PHASE_FAILED",
    "PHASE_STARTED",
    "REASON_AUTO_RECOVER",
    "REASON_FORCE_DELETE",
    "RESERVED_REASONS",
    "SUFFIX",
    "TERMINAL_KEPT",
    "LedgerEntry",
    "LedgerPhase",
    "LedgerUnreadable",
    "Owner",
    "configmap_body",
    "ledger_name",
    "own_entry",
    "owned_by",
    "owned_references",
    "read_entries",
    "render",
    "retained",
    "updated_configmap",
    "with_entry",
]
