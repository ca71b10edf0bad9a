"""The reports of ``kubectl ome instance list`` and ``retry-blocks``, from objects already read.

Why a module of its own: what the plugin shows is decided here, from the InferenceService and
the InferenceReplicas the shell (:mod:`omed.cli.kubectl_ome`) read, with no I/O, so that every
rule (which replicas count, how current their status is, what a row shows, when a Held block
may be released) is tested without a cluster.

Which replicas count: a replica *claims* the
InferenceService when its ``spec.parentRef.name``, its ``ome.io/inferenceservice`` label or a
controller owner reference names it. A claimant is read only when it passes every identity
check (:func:`identity_problems`); one that fails is left out and reported: its component's
EVIDENCE is ``ID_REJECT`` (when it names one) and the table gets a ``summary`` row
``REJECTED``. A replica that claims nothing is ignored silently, whatever its name.

Evidence (one value per component, see docs/kubectl-ome.md): ``OK`` (status observed at the
replica's generation), ``STALE:<observed>/<generation>``, ``NOT-OBSERVED`` (no
``observedGeneration`` yet), ``SOURCE-UNAVL`` (the status can't be decoded) and
``ID_REJECT``. The report's state is ``OK`` when every component is ``OK`` and nothing was
left out, ``UNAVAILABLE`` when the replicas couldn't be listed, else ``PARTIAL``.

Invariant: nothing here raises for what a cluster holds: any shape of status, block or
metadata becomes a value or an issue in the report.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, TypeGuard

from omed.api.constants import (
    API_VERSION,
    COMPONENTS,
    GROUP,
    KIND_INFERENCE_SERVICE,
    LABEL_INFERENCE_SERVICE,
)
from omed.statuscodec import CLI_MAX_ROWS, DecodeError, decode_status, timestamps

REPORT_API_VERSION: Final = "cli.ome.io/v1alpha1"

OK: Final = "OK"
PARTIAL: Final = "PARTIAL"
UNAVAILABLE: Final = "UNAVAILABLE"
NOT_OBSERVED: Final = "NOT-OBSERVED"
SOURCE_UNAVAILABLE: Final = "SOURCE-UNAVL"
ID_REJECT: Final = "ID_REJECT"
REJECTED: Final = "REJECTED"

REVS_WIDTH: Final = 11
REASON_WIDTH: Final = 10
PADDING: Final = 3
"""Spaces between table columns, as kubectl's printers leave."""

_BLOCK_STATES: Final = {"Held": "HELD", "Backoff": "BACKOFF", "RetryInProgress": "RETRYING"}
_REVISION: Final = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?-[0-9a-f]{8}")


def claims(replica: Mapping[str, Any], isvc_name: str) -> bool:
    """Whether ``replica`` says, in any of its three ways, that ``isvc_name`` is its parent."""
    spec = _obj(replica.get("spec"))
    meta = _obj(replica.get("metadata"))
    if _obj(spec.get("parentRef")).get("name") == isvc_name:
        return True
    if _obj(meta.get("labels")).get(LABEL_INFERENCE_SERVICE) == isvc_name:
        return True
    return any(
        _obj(ref).get("controller") is True
        and _obj(ref).get("kind") == KIND_INFERENCE_SERVICE
        and _obj(ref).get("name") == isvc_name
        for ref in _list(meta.get("ownerReferences"))
    )


def identity_problems(replica: Mapping[str, Any], isvc: Mapping[str, Any]) -> list[str]:
    """Why a replica that claims ``isvc`` can't be trusted as its own (empty: it can).

    What OME writes on every InferenceReplica it makes: ``spec.parentRef.name``, the
    ``ome.io/inferenceservice`` label, a controller owner reference to this very
    InferenceService (its uid), a component of engine, decoder or router, and the name
    ``<InferenceService>-<component>``.
    """
    isvc_meta = _obj(isvc.get("metadata"))
    name = isvc_meta.get("name")
    uid = isvc_meta.get("uid")
    spec = _obj(replica.get("spec"))
    meta = _obj(replica.get("metadata"))
    problems: list[str] = []
    if _obj(spec.get("parentRef")).get("name") != name:
        problems.append(f"spec.parentRef.name is not {name}")
    if _obj(meta.get("labels")).get(LABEL_INFERENCE_SERVICE) != name:
        problems.append(f"label {LABEL_INFERENCE_SERVICE} is not {name}")
    controllers = [
        ref for ref in map(_obj, _list(meta.get("ownerReferences"))) if ref.get("controller")
    ]
    if not any(
        ref.get("kind") == KIND_INFERENCE_SERVICE
        and str(ref.get("apiVersion", "")).split("/")[0] == GROUP
        and ref.get("name") == name
        and ref.get("uid") == uid
        for ref in controllers
    ):
        problems.append(f"no controller owner reference to InferenceService {name} (uid {uid})")
    component = spec.get("component")
    if component not in COMPONENTS:
        problems.append(f"spec.component is not one of {', '.join(COMPONENTS)}")
    elif meta.get("name") != f"{name}-{component}":
        problems.append(f"name is not {name}-{component}")
    return problems


def evidence_of(replica: Mapping[str, Any]) -> str:
    """How current the replica's status is (decoding aside)."""
    generation = _obj(replica.get("metadata")).get("generation")
    observed = _obj(replica.get("status")).get("observedGeneration")
    if not _is_int(observed):
        return NOT_OBSERVED
    if _is_int(generation) and observed < generation:
        return f"STALE:{observed}/{generation}"
    return OK


@dataclass(frozen=True, slots=True)
class Issue:
    code: str
    message: str
    component: str | None = None
    replica: str | None = None

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.component is not None:
            out["component"] = self.component
        if self.replica is not None:
            out["replica"] = self.replica
        return out


@dataclass(slots=True)
class Component:
    """One component's replica as read: its evidence and its rows."""

    component: str
    replica: str | None
    evidence: str
    generation: int | None = None
    observed_generation: int | None = None
    encoding: str | None = None
    rows: list[dict[str, Any]] = field(default_factory=list)
    source: Mapping[str, Any] | None = None
    """The replica object (``None`` when it was left out)."""


@dataclass(slots=True)
class Collection:
    """The InferenceService's replicas as the subcommands see them."""

    isvc: Mapping[str, Any]
    components: dict[str, Component]
    issues: list[Issue]
    listed: bool
    """Whether the replicas could be listed at all."""

    @property
    def summary(self) -> str | None:
        """The whole collection's problem, for the ``summary`` row, or ``None``."""
        codes = {issue.code for issue in self.issues}
        if not self.listed or "StatusUndecodable" in codes:
            return SOURCE_UNAVAILABLE
        if "IdentityRejected" in codes:
            return REJECTED
        return None

    @property
    def state(self) -> str:
        if not self.listed:
            return UNAVAILABLE
        if self.issues or any(c.evidence != OK for c in self.components.values()):
            return PARTIAL
        return OK


def collect(
    isvc: Mapping[str, Any],
    replicas: Sequence[Mapping[str, Any]] | None,
    *,
    list_error: str | None = None,
    max_rows: int = CLI_MAX_ROWS,
) -> Collection:
    """Sort the namespace's replicas into the InferenceService's components.

    ``replicas`` is ``None`` when they couldn't be listed (``list_error`` says why).
    """
    name = _obj(isvc.get("metadata")).get("name")
    if replicas is None:
        issue = Issue("ListFailed", f"cannot list InferenceReplicas: {list_error or 'unknown'}")
        return Collection(isvc=isvc, components={}, issues=[issue], listed=False)
    components: dict[str, Component] = {}
    issues: list[Issue] = []
    for replica in replicas:
        if not isinstance(replica, Mapping) or not claims(replica, str(name)):
            continue
        replica_name = str(_obj(replica.get("metadata")).get("name"))
        component = _obj(replica.get("spec")).get("component")
        known = component if component in COMPONENTS else None
        problems = identity_problems(replica, isvc)
        if problems:
            issues.append(
                Issue(
                    "IdentityRejected",
                    f"left out InferenceReplica {replica_name}: {'; '.join(problems)}",
                    component=known,
                    replica=replica_name,
                )
            )
            if known is not None and known not in components:
                components[known] = Component(known, replica_name, ID_REJECT)
            continue
        assert known is not None  # identity_problems checked it
        components[known] = _read(replica, known, replica_name, issues, max_rows=max_rows)
    ordered: dict[str, Component] = {c: components[c] for c in COMPONENTS if c in components}
    return Collection(isvc=isvc, components=ordered, issues=issues, listed=True)


def _read(
    replica: Mapping[str, Any],
    component: str,
    name: str,
    issues: list[Issue],
    *,
    max_rows: int,
) -> Component:
    meta = _obj(replica.get("metadata"))
    status = replica.get("status")
    status_obj = _obj(status)
    generation = meta.get("generation")
    observed = status_obj.get("observedGeneration")
    encoding = status_obj.get("instanceStatusEncoding")
    read = Component(
        component,
        name,
        evidence_of(replica),
        generation=generation if _is_int(generation) else None,
        observed_generation=observed if _is_int(observed) else None,
        encoding=str(encoding) if encoding else "DenseV1",
        source=replica,
    )
    try:
        read.rows = sorted(
            (row for row in decode_status(status, max_rows=max_rows) if isinstance(row, dict)),
            key=_index,
        )
    except DecodeError as exc:
        read.evidence = SOURCE_UNAVAILABLE
        issues.append(
            Issue(
                "StatusUndecodable",
                f"cannot decode the status of InferenceReplica {name}: {exc}",
                component=component,
                replica=name,
            )
        )
    return read


def _index(row: Mapping[str, Any]) -> int:
    index = row.get("index")
    return index if _is_int(index) else -1


# -- list ------------------------------------------------------------------------------------


def short(text: str, width: int) -> str:
    """``text`` cut to ``width`` characters around an ellipsis (``chat...ne-a``)."""
    if len(text) <= width:
        return text
    head = (width - 3) // 2
    return text[:head] + "..." + text[len(text) - (width - 3 - head) :]


def cut(text: str, width: int) -> str:
    """``text``'s first ``width`` characters and an ellipsis when it is longer
    (``ImagePullB...``)."""
    return text if len(text) <= width else text[:width] + "..."


def _flags(row: Mapping[str, Any]) -> str:
    """AOF: Admitted, an Operation in progress, a last Failure recorded."""
    return (
        ("A" if row.get("admitted") is True else "-")
        + ("O" if row.get("operation") else "-")
        + ("F" if row.get("lastFailure") else "-")
    )


def _count(row: Mapping[str, Any], key: str) -> str:
    value = row.get(key)
    return str(value) if _is_int(value) else "0"


def list_rows(collection: Collection) -> list[list[str]]:
    """The table's rows (header first) for ``instance list``."""
    table = [["COMP", "IDX/INC", "PHASE", "PODS", "REVS", "AOF", "EVIDENCE"]]
    for read in collection.components.values():
        if not read.rows:
            table.append([read.component, "-", "-", "-", "-", "---", read.evidence])
            continue
        for row in read.rows:
            revision = row.get("targetRevision") or row.get("runningRevision") or "-"
            table.append(
                [
                    read.component,
                    f"{_text(row.get('index'))}/{_text(row.get('incarnation'))}",
                    _text(row.get("phase")),
                    "/".join(
                        _count(row, key)
                        for key in ("servingPodCount", "availablePodCount", "podCount")
                    ),
                    short(_text(revision), REVS_WIDTH),
                    _flags(row),
                    read.evidence,
                ]
            )
    summary = collection.summary
    if len(table) == 1:
        table.append(["-", "-", "-", "-", "-", "---", summary or collection.state])
    elif summary is not None:
        table.append(["summary", "-", "-", "-", "-", "---", summary])
    return table


def list_names(collection: Collection) -> list[str]:
    """``-o name``: ``<component>/<index>`` for each recorded Instance, in the table's order,
    what ``instance status INDEX --component COMPONENT`` takes. A component without rows,
    and the summary, name nothing (they are no Instance)."""
    return [
        f"{read.component}/{_text(row.get('index'))}"
        for read in collection.components.values()
        for row in read.rows
    ]


def list_report(collection: Collection) -> dict[str, Any]:
    """The ``InstanceListReport`` (``-o json`` / ``-o yaml``): every value in full."""
    instances = [
        {"component": read.component, "evidence": read.evidence, **row}
        for read in collection.components.values()
        for row in read.rows
    ]
    return {
        "apiVersion": REPORT_API_VERSION,
        "kind": "InstanceListReport",
        "inferenceService": _isvc_ref(collection.isvc),
        "state": collection.state,
        "summary": collection.summary,
        "components": [_component_dict(read) for read in collection.components.values()],
        "instances": instances,
        "issues": [issue.as_dict() for issue in collection.issues],
    }


def _component_dict(read: Component) -> dict[str, Any]:
    return {
        "component": read.component,
        "inferenceReplica": read.replica,
        "evidence": read.evidence,
        "generation": read.generation,
        "observedGeneration": read.observed_generation,
        "encoding": read.encoding,
        "instances": len(read.rows),
    }


def _isvc_ref(isvc: Mapping[str, Any]) -> dict[str, Any]:
    meta = _obj(isvc.get("metadata"))
    return {
        "apiVersion": API_VERSION,
        "kind": KIND_INFERENCE_SERVICE,
        "namespace": meta.get("namespace"),
        "name": meta.get("name"),
        "uid": meta.get("uid"),
        "generation": meta.get("generation"),
    }


# -- retry-blocks ----------------------------------------------------------------------------


def digest(revision: str) -> str:
    """The TARGET column's short form: the first four characters and a digest of the whole
    name (``chat-#4c6a152e``). Not the revision's hash: release-held takes the name or hash."""
    return f"{_text(revision[:4])}-#{hashlib.sha256(revision.encode()).hexdigest()[:8]}"


def _deleting(obj: Mapping[str, Any] | None) -> bool:
    return obj is not None and _obj(obj.get("metadata")).get("deletionTimestamp") is not None


def block_problems(block: Any, *, isvc_name: str, component: str, now: int) -> list[str]:
    """Why a retry block can't be read as OME writes it (empty: it is well formed)."""
    if not isinstance(block, Mapping):
        return ["a retry block is not an object"]
    problems: list[str] = []
    target = block.get("targetRevision")
    prefix = f"{isvc_name}-{component}-"
    if (
        not isinstance(target, str)
        or not _REVISION.fullmatch(target)
        or not target.startswith(prefix)
        or len(target) != len(prefix) + 8
    ):
        problems.append(f"targetRevision is not a revision {prefix}<hash>")
    if block.get("state") not in _BLOCK_STATES:
        problems.append(f"state is not one of {', '.join(_BLOCK_STATES)}")
    attempts = block.get("attemptsStarted")
    if attempts is not None and (not _is_int(attempts) or attempts < 0):
        problems.append("attemptsStarted is not an integer >= 0")
    for key in ("firstFailureAt", "lastFailureAt", "nextRetryAt"):
        value = block.get(key)
        if value is None:
            continue
        when = timestamps.parse(value) if isinstance(value, str) else None
        if when is None:
            problems.append(f"{key} is not a time such as 2026-09-14T20:52:31Z")
        elif key != "nextRetryAt" and when > now:
            problems.append(f"{key} {value} is in the future")
    return problems


def _until(value: Any, *, now: int) -> str:
    when = timestamps.parse(value) if isinstance(value, str) else None
    if when is None:
        return "-"
    left = when - now
    if left <= 0:
        return "due"
    if left < 120:
        return f"{left}s"
    if left < 7200:
        return f"{left // 60}m"
    return f"{left // 3600}h"


@dataclass(slots=True)
class RetryBlocks:
    component: str
    replica: str | None
    evidence: str
    blocks: list[dict[str, Any]]
    issues: list[Issue]


def retry_blocks(collection: Collection, component: str, *, now: int) -> RetryBlocks:
    """The component's retry blocks with their release eligibility and issues."""
    isvc_name = str(_obj(collection.isvc.get("metadata")).get("name"))
    issues = [
        issue
        for issue in collection.issues
        if issue.component in (component, None) or issue.code == "IdentityRejected"
    ]
    read = collection.components.get(component)
    if read is None or read.source is None:
        if read is None and collection.listed:
            issues.append(
                Issue(
                    "NoReplica",
                    f"no InferenceReplica of InferenceService {isvc_name} runs the {component}",
                    component=component,
                )
            )
        return RetryBlocks(
            component, read.replica if read else None, read.evidence if read else "-", [], issues
        )
    replica = read.source
    current = read.evidence == OK
    if not current:
        issues.append(
            Issue(
                "StatusNotCurrent",
                f"the status of InferenceReplica {read.replica} is {read.evidence}: "
                "OME hasn't caught up with its latest change",
                component=component,
                replica=read.replica,
            )
        )
    deleting = _deleting(collection.isvc) or _deleting(replica)
    if deleting:
        issues.append(
            Issue(
                "Deleting",
                f"InferenceService {isvc_name} or InferenceReplica {read.replica} is being deleted",
                component=component,
                replica=read.replica,
            )
        )
    blocks: list[dict[str, Any]] = []
    for raw in _list(_obj(replica.get("status")).get("retryBlocks")):
        problems = block_problems(raw, isvc_name=isvc_name, component=component, now=now)
        block = dict(raw) if isinstance(raw, Mapping) else {"value": raw}
        if problems:
            issues.append(
                Issue(
                    "BlockMalformed",
                    f"a retry block of InferenceReplica {read.replica} is malformed: "
                    + "; ".join(problems),
                    component=component,
                    replica=read.replica,
                )
            )
        target = block.get("targetRevision")
        block["digest"] = digest(target) if isinstance(target, str) else None
        block["releaseEligible"] = (
            not problems and block.get("state") == "Held" and current and not deleting
        )
        block["problems"] = problems
        blocks.append(block)
    return RetryBlocks(component, read.replica, read.evidence, blocks, issues)


_ISSUE_ALIASES: Final = {
    "ListFailed": "SourceUnav",
    "StatusUndecodable": "Undecodable",
    "IdentityRejected": "Rejected",
    "NoReplica": "NoReplica",
    "StatusNotCurrent": "Stale",
    "Deleting": "Deleting",
    "BlockMalformed": "Malformed",
}


def retry_block_rows(report: RetryBlocks, *, now: int) -> list[list[str]]:
    table = [["COMP", "STATE", "TARGET", "ATT", "NEXT", "REL", "REASON"]]
    for block in report.blocks:
        state = block.get("state")
        target = block.get("targetRevision")
        attempts = block.get("attemptsStarted")
        table.append(
            [
                report.component,
                _BLOCK_STATES.get(state, "?") if isinstance(state, str) else "?",
                digest(target) if isinstance(target, str) else "-",
                str(attempts) if _is_int(attempts) else "-",
                "-" if state == "Held" else _until(block.get("nextRetryAt"), now=now),
                "YES" if block["releaseEligible"] else ("NO" if state == "Held" else "-"),
                cut(_text(block.get("reason")), REASON_WIDTH),
            ]
        )
    for issue in report.issues:
        alias = _ISSUE_ALIASES.get(issue.code, issue.code)
        table.append([report.component, "ISSUE", "-", "-", "-", "-", alias])
    if len(table) == 1:
        table.append([report.component, "EMPTY", "-", "-", "-", "-", "-"])
    return table


def retry_block_names(report: RetryBlocks) -> list[str]:
    """``-o name``: each block's full target revision, in the table's order, what
    ``release-held --revision`` takes; a block without a target names nothing."""
    return [
        _text(block["targetRevision"])
        for block in report.blocks
        if isinstance(block.get("targetRevision"), str) and block["targetRevision"]
    ]


def retry_blocks_report(collection: Collection, report: RetryBlocks) -> dict[str, Any]:
    """The ``InstanceRetryBlocksReport`` (``-o json`` / ``-o yaml``)."""
    states = [block.get("state") for block in report.blocks]
    return {
        "apiVersion": REPORT_API_VERSION,
        "kind": "InstanceRetryBlocksReport",
        "inferenceService": _isvc_ref(collection.isvc),
        "component": report.component,
        "inferenceReplica": report.replica,
        "evidence": report.evidence,
        "blocks": report.blocks,
        "summary": {
            "blocks": len(report.blocks),
            "held": states.count("Held"),
            "backoff": states.count("Backoff"),
            "retryInProgress": states.count("RetryInProgress"),
            "releaseEligible": sum(1 for block in report.blocks if block["releaseEligible"]),
        },
        "issues": [issue.as_dict() for issue in report.issues],
    }


# -- shared ----------------------------------------------------------------------------------


def render_table(rows: Sequence[Sequence[str]]) -> str:
    """Columns padded to their widest cell plus three spaces; the last one unpadded."""
    widths = [max(len(row[i]) for row in rows) + PADDING for i in range(len(rows[0]))]
    lines = [
        "".join(cell.ljust(width) for cell, width in zip(row[:-1], widths, strict=False)) + row[-1]
        for row in rows
    ]
    return "\n".join(lines) + "\n"


def _obj(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _is_int(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _text(value: Any) -> str:
    if value is None or value == "":
        return "-"
    text = value if value.__class__ is str else str(value)
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() else "?" for ch in text)


__all__ = [
    "Collection",
    "Component",
    "Issue",
    "RetryBlocks",
    "block_problems",
    "claims",
    "collect",
    "cut",
    "digest",
    "evidence_of",
    "identity_problems",
    "list_report",
    "list_rows",
    "render_table",
    "retry_block_rows",
    "retry_blocks",
    "retry_blocks_report",
    "short",
]
