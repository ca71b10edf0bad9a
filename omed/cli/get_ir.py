"""``kubectl ome get ir``: every InferenceReplica with the InferenceService it belongs to.

Why: the ``instance`` subcommands start from an InferenceService and never show a standalone
InferenceReplica, one created directly with no parent. This listing starts from the
InferenceReplicas themselves, so a standalone one is found: its PARENT is ``-``.

PARENT is ``spec.parentRef.name``, the field OME writes on every InferenceReplica it creates
(with the ``ome.io/inferenceservice`` label and a controller owner reference); the columns
after it are the InferenceReplica's own printer columns (what ``kubectl get
inferencereplicas`` prints), with ENCODING always named: ``DenseV1`` for the list form, as
the status stores no encoding then.

Invariant: pure; any shape of object becomes a row (a value that isn't there is ``-``).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping
from typing import Any, Final

from omed.statuscodec import DecodeError, stored_encoding

REPORT_API_VERSION: Final = "cli.ome.io/v1alpha1"
REPORT_KIND: Final = "InferenceReplicaListReport"
HEADERS: Final = ("NAME", "PARENT", "COMPONENT", "REPLICAS", "READY", "SERVING", "ENCODING", "AGE")
NONE: Final = "-"


def _obj(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def parent(irep: Mapping[str, Any]) -> str | None:
    """The InferenceService ``irep`` names as its parent; None for a standalone replica."""
    name = _obj(_obj(irep.get("spec")).get("parentRef")).get("name")
    return name if isinstance(name, str) and name else None


def _count(value: Any) -> str:
    return str(value) if isinstance(value, int) and not isinstance(value, bool) else NONE


def encoding(irep: Mapping[str, Any]) -> str:
    """How the status stores its rows: ``DenseV1``, ``ColumnarV2``, or ``-`` when unreadable."""
    try:
        return str(stored_encoding(_obj(irep.get("status"))))
    except DecodeError:
        return NONE


def age(created: Any, *, now: dt.datetime) -> str:
    """kubectl's AGE: ``45s``, ``3m12s`` (under 10 minutes), ``42m``, ``5h``, ``3d``..."""
    if not isinstance(created, str):
        return "<unknown>"
    try:
        then = dt.datetime.fromisoformat(created.replace("Z", "+00:00"))
    except ValueError:
        return "<unknown>"
    seconds = int((now - then).total_seconds())
    if seconds < 0:
        return "<invalid>"
    return human_duration(seconds)


_UNITS: Final = (
    ("m", "s", 60, 10, 180),
    ("h", "m", 60, 8, 48),
    ("d", "h", 24, 8, 365 * 2),
    ("y", "d", 365, 8, None),
)
"""kubectl's duration steps: (unit, the unit below, how many of those make one, below how
many the unit below is shown too, below how many this unit is shown alone; None: always)."""


def human_duration(seconds: int) -> str:
    """kubectl's human duration of ``seconds`` (at least 0): ``45s`` (under 2 minutes),
    ``3m12s`` (under 10 minutes), ``42m``, ``5h7m`` (under 8 hours), ``30h``, ``3d4h``,
    ``400d``, ``3y2d``, ``9y``; a zero remainder is left off (``4m``)."""
    if seconds < 120:
        return f"{seconds}s"
    value = seconds
    for unit, below, per, paired_under, alone_under in _UNITS:
        whole, rest = divmod(value, per)
        if whole < paired_under:
            return f"{whole}{unit}{rest}{below}" if rest else f"{whole}{unit}"
        if alone_under is None or whole < alone_under:
            return f"{whole}{unit}"
        value = whole
    raise AssertionError("the last unit has no limit")


def item(irep: Mapping[str, Any]) -> dict[str, Any]:
    """One InferenceReplica as the report lists it."""
    meta = _obj(irep.get("metadata"))
    spec = _obj(irep.get("spec"))
    status = _obj(irep.get("status"))
    return {
        "namespace": meta.get("namespace"),
        "name": meta.get("name"),
        "parent": parent(irep),
        "component": spec.get("component"),
        "replicas": spec.get("replicas"),
        "readyReplicas": status.get("readyReplicas"),
        "servingReplicas": status.get("servingReplicas"),
        "encoding": None if encoding(irep) == NONE else encoding(irep),
        "creationTimestamp": meta.get("creationTimestamp"),
    }


def _ordered(ireps: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    return sorted(
        ireps,
        key=lambda r: (
            str(_obj(r.get("metadata")).get("namespace") or ""),
            str(_obj(r.get("metadata")).get("name") or ""),
        ),
    )


def rows(
    ireps: Iterable[Mapping[str, Any]], *, now: dt.datetime, all_namespaces: bool
) -> list[list[str]]:
    """The table, its header first (NAMESPACE leads with ``-A``)."""
    header = (["NAMESPACE"] if all_namespaces else []) + list(HEADERS)
    out = [header]
    for irep in _ordered(ireps):
        meta = _obj(irep.get("metadata"))
        spec = _obj(irep.get("spec"))
        status = _obj(irep.get("status"))
        component = spec.get("component")
        row = [
            str(meta.get("name") or NONE),
            parent(irep) or NONE,
            component if isinstance(component, str) and component else NONE,
            _count(spec.get("replicas")),
            _count(status.get("readyReplicas")),
            _count(status.get("servingReplicas")),
            encoding(irep),
            age(meta.get("creationTimestamp"), now=now),
        ]
        out.append(([str(meta.get("namespace") or NONE)] if all_namespaces else []) + row)
    return out


def report(ireps: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """The ``-o json`` / ``-o yaml`` form: every InferenceReplica's values in full."""
    return {
        "apiVersion": REPORT_API_VERSION,
        "kind": REPORT_KIND,
        "items": [item(irep) for irep in _ordered(ireps)],
    }


def nothing_found(namespace: str | None) -> str:
    """kubectl's line for an empty listing (on stderr; the exit code stays 0)."""
    return "No resources found" + (f" in {namespace} namespace." if namespace else "")


__all__ = [
    "HEADERS",
    "age",
    "encoding",
    "human_duration",
    "item",
    "nothing_found",
    "parent",
    "report",
    "rows",
]
