"""``kubectl ome migration start``: the flag checks, the evidence, the preview, the request,
the guarded JSON patch and the ActionResult, decided from objects already read (no I/O).

Why: a migration request is a write that moves serving capacity. The command refuses unless
the Instance is steady, alone in its migration, on one node the request names, on a revision
OME runs, and the InferenceService is the one read (the patch tests its uid and
resourceVersion). The flow (read, preview, prompt, read again, patch) is in
:mod:`omed.cli.kubectl_ome_migration`.

Invariants: every refusal changes nothing and carries the exit code upstream OME gives it
(1 for an error or a refusal, 3 for a state conflict or a lookup miss); no message quotes the
reason; the request written is upstream's wire format (Go struct order, empty optional
fields left out, ``from_node`` always there), read back by :mod:`omed.api.migrationrequest`.
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import orjson

from omed.api import migrationrequest
from omed.api.affinity import required_hostnames
from omed.api.constants import (
    ANNOTATION_MIGRATION_REQUEST_PREFIX,
    ANNOTATION_ROLLOUT_PAUSED,
    ANNOTATION_ROLLOUT_PROMOTE,
    ANNOTATION_ROLLOUT_ROLLBACK,
    LABEL_COMPONENT,
    LABEL_INFERENCE_SERVICE,
    LABEL_MANAGED_BY,
    LABEL_RUNNER,
    MANAGED_BY_OME_NATIVE,
    TERMINAL_MIGRATION_PHASES,
)
from omed.api.names import is_dns1123_label, is_dns1123_subdomain
from omed.cli import migration_status
from omed.cli.credentials import CREDENTIAL_PATTERNS
from omed.cli.instances import OK, Collection
from omed.controllers.ledger.document import RESERVED_REASONS
from omed.statuscodec import GUARDED_ACTION_MAX_ROWS

ACTION: Final = "migration start"
SCHEMA: Final = migrationrequest.SCHEMA_V1
REQUESTED_BY: Final = "kubectl-ome"
PREVIEW_TITLE: Final = "ALPHA guarded migration preview (not controller convergence)"
PROMPT: Final = "Confirm this exact action? [y/N]: "
MAX_HINTS: Final = 8
MAX_REASON_BYTES: Final = 256
MAX_REQUESTED_BY: Final = 128
MAX_SOURCE_PODS: Final = 128
WRAP: Final = 80
OUTPUTS: Final = ("table", "wide", "json", "yaml")
DRY_RUN_MODES: Final = ("none", "client", "server")
EXIT_CONFLICT: Final = 3

# Messages, upstream's byte for byte.
COMPONENT_REQUIRED: Final = "component is required"
INSTANCE_INVALID: Final = "instance must be a canonical integer from 0 through 2147483647"
VALUES_INVALID: Final = "invalid migration request values; use --help"
HINTS_INVALID: Final = "invalid migration node hints"
NAME_INVALID: Final = "invalid inference service name"
NAMESPACES_INVALID: Final = "action namespaces are invalid"
OUTPUT_INVALID: Final = "output must be table, wide, json or yaml"
DRY_RUN_INVALID: Final = "dry-run must be none, client or server"
FLAGS_INVALID: Final = "invalid migration action flags; use --help"
READ_FAILED: Final = migration_status.READ_FAILED  # one message for the migration commands
TARGET_UNSAFE: Final = "action refused: target identity is missing or unsafe"
TARGET_DELETING: Final = "action refused: target is being deleted"
TARGET_BOUNDS: Final = "action refused: safety inputs exceed inspection bounds"
RUNTIME_UNAVAILABLE: Final = (
    "action refused: active runtime is unavailable, inconsistent or unbound"
)
PRECONDITION: Final = (
    "migration precondition conflicts or is stale; inspect migration status and retry explicitly"
)
NOT_CONFIRMED: Final = "action not confirmed; noninteractive input requires --yes"
DEADLINE: Final = "context deadline exceeded"
REJECTED: Final = "guarded migration rejected; inspect migration status using preview UUID"
UNKNOWN_OUTCOME: Final = (
    "migration request failed or outcome unknown; inspect migration status using the preview UUID"
)
REVISION_INVALID: Final = "source revision payload is invalid or exceeds bounds"
MAILBOX_IDENTITY: Final = "retained migration mailbox identity is invalid"
MAILBOX_PAYLOAD: Final = "invalid retained migration payload"
MAILBOX_FIELD: Final = "invalid retained migration field"
MAILBOX_FIELD_TYPE: Final = "invalid retained migration field type"
MAILBOX_TIMESTAMP: Final = "invalid retained migration timestamp"
MAILBOX_INCOMPLETE: Final = "incomplete retained migration payload"
AUDIT_UNAVAILABLE_WARNING: Final = (
    "Audit lookup unavailable; retained delivery history is incomplete."
)
AUDIT_LOOKUP_FAILED: Final = "audit lookup unavailable; retained delivery history is incomplete"
WARN_QUEUED_REQUESTS: Final = (
    "Other migration requests are queued; dispatch is serial and capacity is not guaranteed."
)
WARN_QUEUED_WORK: Final = (
    "Other migration work is queued or executing; dispatch is serial and capacity is not "
    "guaranteed."
)
WARN_HINTS: Final = (
    "Node hints are soft preferences; capacity, scheduling and controller convergence are "
    "not guaranteed."
)
WARN_CAS: Final = "Parent UID/resourceVersion CAS is not an IR/Pod/runtime transaction."
MESSAGE_APPLIED: Final = "API accepted annotation request; delivery and convergence not observed."
MESSAGE_SERVER: Final = "API dry-run accepted; no changes persisted."
MESSAGE_CLIENT: Final = "Validated locally; no patch sent."
MESSAGE_LOOKUP: Final = (
    "Identical retained mailbox observed; no replay sent; acceptance and convergence not observed."
)

_UUID: Final = re.compile(
    r"[0-9a-f]{8}-[0-9a-f]{4}-[1-8][0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}"
)
_CANONICAL_INT: Final = re.compile(r"0|[1-9][0-9]{0,9}")
_REASON_FORBIDDEN: Final = ("://", "bearer ", "password=", "token=")
_TIMESTAMP: Final = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z")
_MAILBOX_KEYS: Final = frozenset(
    {
        "schemaVersion",
        "component",
        "instance",
        "from_node",
        "hint_target_nodes",
        "reason",
        "requested_at",
        "requested_by",
    }
)
_MAILBOX_REQUIRED: Final = ("schemaVersion", "component", "instance", "from_node")


class Refused(Exception):
    """A refusal: ``error: <message>``, nothing changed; ``exit_code`` 1, or 3 for a state
    conflict or a lookup miss. ``cause`` says which check refused (never printed: upstream
    prints one message for every precondition; tests and ``-v`` readers use it)."""

    def __init__(self, message: str, *, exit_code: int = 1, cause: str = "") -> None:
        super().__init__(message)
        self.exit_code = exit_code
        self.cause = cause or message


def conflict(cause: str) -> Refused:
    return Refused(PRECONDITION, exit_code=EXIT_CONFLICT, cause=cause)


# -- Flags --------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class Flags:
    """The request's flags, checked."""

    name: str
    namespace: str
    component: str
    instance: int
    from_node: str
    hints: tuple[str, ...]
    reason: str
    requested_by: str
    request_id: str | None
    dry_run: str
    output: str
    ome_namespace: str
    yes: bool


def reason_ok(reason: str) -> bool:
    """Upstream's reason rules: at most 256 bytes, printable, no URL or credential, and not
    a reason the controller writes itself."""
    if len(reason.encode()) > MAX_REASON_BYTES or not reason.isprintable():
        return False
    lowered = reason.lower()
    if any(word in lowered for word in _REASON_FORBIDDEN):
        return False
    if any(pattern.search(reason) for _, pattern in CREDENTIAL_PATTERNS):
        return False
    return reason not in RESERVED_REASONS


def check_flags(
    *,
    name: str,
    namespace: str,
    component: str | None,
    instance: str | None,
    from_node: str | None,
    hints: Sequence[str],
    reason: str | None,
    requested_by: str,
    request_id: str | None,
    dry_run: str,
    output: str,
    ome_namespace: str,
    yes: bool,
) -> Flags:
    """Every flag, checked before any read, in upstream's order; :class:`Refused` (exit 1)
    with upstream's message for the first that fails."""
    if not component:
        raise Refused(COMPONENT_REQUIRED)
    if instance is None or not _CANONICAL_INT.fullmatch(instance) or int(instance) > 2**31 - 1:
        raise Refused(INSTANCE_INVALID)
    if component not in ("engine", "decoder", "router"):
        raise Refused(VALUES_INVALID)
    node = from_node or ""
    if node and not is_dns1123_subdomain(node):
        raise Refused(VALUES_INVALID)
    if not reason_ok(reason or ""):
        raise Refused(VALUES_INVALID)
    if (
        not requested_by
        or len(requested_by) > MAX_REQUESTED_BY
        or not requested_by.isprintable()
        or not requested_by.isascii()
    ):
        raise Refused(VALUES_INVALID)
    if request_id is not None and not _UUID.fullmatch(request_id):
        raise Refused(VALUES_INVALID)
    split = tuple(h.strip() for hint in hints for h in hint.split(","))
    if (
        len(split) > MAX_HINTS
        or any(not is_dns1123_subdomain(h) for h in split)
        or len(set(split)) != len(split)
        or (node and node in split)
    ):
        raise Refused(HINTS_INVALID)
    if not is_dns1123_label(name):
        raise Refused(NAME_INVALID)
    if not all(is_dns1123_label(ns) for ns in (namespace, ome_namespace)):
        raise Refused(NAMESPACES_INVALID)
    if output not in OUTPUTS:
        raise Refused(OUTPUT_INVALID)
    if dry_run not in DRY_RUN_MODES:
        raise Refused(DRY_RUN_INVALID)
    return Flags(
        name=name,
        namespace=namespace,
        component=component,
        instance=int(instance),
        from_node=node,
        hints=split,
        reason=reason or "",
        requested_by=requested_by,
        request_id=request_id,
        dry_run=dry_run,
        output=output,
        ome_namespace=ome_namespace,
        yes=yes,
    )


# -- The request --------------------------------------------------------------------------------


def request_key(uuid: str) -> str:
    return ANNOTATION_MIGRATION_REQUEST_PREFIX + uuid


def request_body(flags: Flags, *, from_node: str, requested_at: str) -> str:
    """The annotation's value: upstream's struct in its field order, compact, the empty
    optional fields left out and ``from_node`` always written."""
    body: dict[str, Any] = {
        "schemaVersion": SCHEMA,
        "component": flags.component,
        "instance": flags.instance,
        "from_node": from_node,
    }
    if flags.hints:
        body["hint_target_nodes"] = list(flags.hints)
    if flags.reason:
        body["reason"] = flags.reason
    if requested_at:
        body["requested_at"] = requested_at
    if flags.requested_by:
        body["requested_by"] = flags.requested_by
    return orjson.dumps(body).decode()


def json_patch(
    *, uid: str, resource_version: str, annotations: bool, key: str, value: str
) -> list[dict[str, Any]]:
    """The guarded JSON patch: it applies only to the very InferenceService the checks read
    (its uid and resourceVersion are tested), so any change since is a rejection."""
    ops: list[dict[str, Any]] = [
        {"op": "test", "path": "/metadata/uid", "value": uid},
        {"op": "test", "path": "/metadata/resourceVersion", "value": resource_version},
    ]
    if not annotations:
        ops.append({"op": "add", "path": "/metadata/annotations", "value": {}})
    ops.append(
        {
            "op": "add",
            "path": "/metadata/annotations/" + key.replace("~", "~0").replace("/", "~1"),
            "value": value,
        }
    )
    return ops


# -- Retained mailboxes -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Mailbox:
    """A request still on the InferenceService, read strictly."""

    request: migrationrequest.MigrationRequest


def _pairs_no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    keys = [key for key, _ in pairs]
    if len(set(keys)) != len(keys):
        raise ValueError("duplicate key")
    return dict(pairs)


def strict_mailbox(key: str, value: Any) -> Mailbox:
    """A retained request, read with :func:`omed.api.migrationrequest.parse` (the reader the
    webhook and the controller share) after upstream's CLI's stricter shape checks: exact
    keys, no duplicate key, no null, the four required fields. :class:`Refused` (exit 1)
    with upstream's message otherwise."""
    import json

    if migrationrequest.request_uuid(key) is None or key != key.lower():
        raise Refused(MAILBOX_IDENTITY)
    if not isinstance(value, str):
        raise Refused(MAILBOX_PAYLOAD)
    try:
        doc = json.loads(value, object_pairs_hook=_pairs_no_duplicates)
    except ValueError:
        raise Refused(MAILBOX_PAYLOAD) from None
    if not isinstance(doc, dict):
        raise Refused(MAILBOX_PAYLOAD)
    if set(doc) - _MAILBOX_KEYS or any(v is None for v in doc.values()):
        raise Refused(MAILBOX_FIELD)
    if any(required not in doc for required in _MAILBOX_REQUIRED):
        raise Refused(MAILBOX_INCOMPLETE)
    parsed = migrationrequest.parse(key, value)
    if isinstance(parsed, migrationrequest.RequestProblem):
        raise Refused(MAILBOX_FIELD_TYPE)
    if parsed.requested_at and not _TIMESTAMP.fullmatch(parsed.requested_at):
        raise Refused(MAILBOX_TIMESTAMP)
    return Mailbox(parsed)


def mailboxes(isvc: Mapping[str, Any]) -> list[Mailbox]:
    annotations = (isvc.get("metadata") or {}).get("annotations") or {}
    return [strict_mailbox(key, value) for key, value in migrationrequest.requests_of(annotations)]


# -- The evidence -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class Evidence:
    """What the checks found, everything the preview shows and the recheck compares."""

    isvc_name: str
    namespace: str
    uid: str
    resource_version: str
    has_annotations: bool
    replica: str
    replica_uid: str
    replica_version: str
    mode: str
    running_revision: str
    incarnation: int | None
    nodes: tuple[str, ...]
    from_node: str
    warnings: tuple[str, ...]
    mailboxes: tuple[Mailbox, ...]
    known_ids: frozenset[str]
    fingerprint: tuple[Any, ...] = field(compare=False, default=())


def check_target(isvc: Mapping[str, Any]) -> None:
    """Upstream's ``ValidateTarget``: the InferenceService has an identity the patch can
    test, isn't being deleted, and its annotations are within the bounds the CLI inspects."""
    meta = isvc.get("metadata") or {}
    if not meta.get("uid") or not meta.get("resourceVersion") or not meta.get("name"):
        raise Refused(TARGET_UNSAFE)
    if meta.get("deletionTimestamp"):
        raise Refused(TARGET_DELETING)
    annotations = meta.get("annotations") or {}
    if not isinstance(annotations, Mapping) or len(annotations) > 512:
        raise Refused(TARGET_BOUNDS)


def _pod_node(pod: Mapping[str, Any]) -> str:
    return str((pod.get("spec") or {}).get("nodeName") or "")


def _runners_complete(pods: Sequence[Mapping[str, Any]]) -> bool:
    """Upstream's layouts: one ``default`` pod, or one leader and at least one worker."""
    runners = sorted(
        str(((p.get("metadata") or {}).get("labels") or {}).get(LABEL_RUNNER, "default"))
        for p in pods
    )
    if runners == ["default"]:
        return True
    return (
        runners.count("leader") == 1 and len(runners) >= 2 and set(runners) <= {"leader", "worker"}
    )


def migration_mode(replica: Mapping[str, Any], isvc: Mapping[str, Any], component: str) -> str:
    """The component's ``lifecycle.migrationPolicy.mode`` (the replica's projection, else the
    service's), ``Auto`` when unset."""
    for spec in ((replica.get("spec") or {}), ((isvc.get("spec") or {}).get(component) or {})):
        lifecycle = spec.get("lifecycle") if isinstance(spec, Mapping) else None
        policy = (
            (lifecycle or {}).get("migrationPolicy") if isinstance(lifecycle, Mapping) else None
        )
        if isinstance(policy, Mapping) and "mode" in policy:
            return str(policy.get("mode") or "")
    return "Auto"


def _revision_problem(
    revision: Mapping[str, Any] | None, *, isvc: str, component: str, replica_uid: str
) -> str | None:
    """Why the source's ControllerRevision isn't one OME made for this replica (None: it is)."""
    if revision is None:
        return "the running revision's ControllerRevision is missing"
    meta = revision.get("metadata") or {}
    labels = meta.get("labels") or {}
    if (
        labels.get(LABEL_INFERENCE_SERVICE) != isvc
        or labels.get(LABEL_COMPONENT) != component
        or labels.get(LABEL_MANAGED_BY) != MANAGED_BY_OME_NATIVE
    ):
        return "the running revision's ControllerRevision lacks OME's labels"
    owners = [r for r in meta.get("ownerReferences") or [] if isinstance(r, Mapping)]
    if not any(r.get("uid") == replica_uid and r.get("controller") is True for r in owners):
        return "the running revision's ControllerRevision isn't owned by the InferenceReplica"
    return None


def _pins_node(pods: Sequence[Mapping[str, Any]], node: str) -> bool:
    """A required node affinity of a source pod that names the node to leave by hostname
    (among other nodes or alone)."""
    return any(
        node in values for pod in pods for values in required_hostnames(pod.get("spec") or {})
    )


def collect_evidence(
    *,
    flags: Flags,
    collection: Collection,
    pods: Sequence[Mapping[str, Any]],
    revision: Mapping[str, Any] | None,
    audit_ids: frozenset[str] | None,
) -> Evidence:
    """Upstream's ``CollectMigrationEvidence``: every check of the service's state, in order;
    a state that blocks the move is :class:`Refused` with exit 3 (its ``cause`` names the
    check). With ``--request-id`` (a lookup) only what identifies the request is checked:
    the lookup itself is :func:`lookup`. ``audit_ids`` is None when the audit ConfigMap
    couldn't be read."""
    isvc = collection.isvc
    meta = isvc.get("metadata") or {}
    annotations = meta.get("annotations") or {}
    retained = tuple(mailboxes(isvc))
    lookup_only = flags.request_id is not None
    read = collection.components.get(flags.component)
    if not collection.listed:
        raise Refused(READ_FAILED)
    if read is None or read.source is None:
        raise conflict(f"no InferenceReplica runs the {flags.component} (or it isn't OMENative)")
    if read.evidence != OK or any(i.code == "IdentityRejected" for i in collection.issues):
        raise conflict(f"InferenceReplica {read.replica} status is not current ({read.evidence})")
    source = read.source
    replica_meta = source.get("metadata") or {}
    replica_spec = source.get("spec") or {}
    status = source.get("status") or {}
    records = [r for r in status.get("migrations") or [] if isinstance(r, Mapping)]
    known = {str(r.get("requestUUID")) for r in records} | {m.request.uuid for m in retained}
    for other in collection.components.values():
        other_status = (other.source or {}).get("status") or {}
        known |= {
            str(r.get("requestUUID"))
            for r in other_status.get("migrations") or []
            if isinstance(r, Mapping)
        }
    history = (isvc.get("status") or {}).get("migrationHistory") or []
    known |= {str(h.get("requestUUID")) for h in history[:256] if isinstance(h, Mapping)}
    warnings: list[str] = []
    if audit_ids is None:
        if lookup_only:
            raise Refused(AUDIT_LOOKUP_FAILED)
        warnings.append(AUDIT_UNAVAILABLE_WARNING)
    else:
        known |= audit_ids
    if (
        isinstance(replica_spec.get("replicas"), int)
        and replica_spec["replicas"] > GUARDED_ACTION_MAX_ROWS
    ):
        raise conflict("spec.replicas exceeds the inspection bounds")
    mode = migration_mode(source, isvc, flags.component)
    rows = {row.get("index"): row for row in read.rows}
    row = rows.get(flags.instance) or {}
    on_pods = [p for p in pods if not (p.get("metadata") or {}).get("deletionTimestamp")]
    nodes = tuple(sorted({_pod_node(p) for p in on_pods if _pod_node(p)}))
    from_node = flags.from_node or (nodes[0] if len(nodes) == 1 else "")
    evidence = Evidence(
        isvc_name=str(meta.get("name")),
        namespace=str(meta.get("namespace")),
        uid=str(meta.get("uid")),
        resource_version=str(meta.get("resourceVersion")),
        has_annotations=isinstance(meta.get("annotations"), Mapping),
        replica=str(read.replica),
        replica_uid=str(replica_meta.get("uid") or ""),
        replica_version=str(replica_meta.get("resourceVersion") or ""),
        mode=mode,
        running_revision=str(row.get("runningRevision") or ""),
        incarnation=row.get("incarnation") if isinstance(row.get("incarnation"), int) else None,
        nodes=nodes,
        from_node=from_node,
        warnings=tuple(warnings),
        mailboxes=retained,
        known_ids=frozenset(known),
        fingerprint=(
            replica_meta.get("uid"),
            replica_meta.get("generation"),
            status.get("observedGeneration"),
            orjson.dumps(row, option=orjson.OPT_SORT_KEYS),
            tuple(sorted(((p.get("metadata") or {}).get("uid"), _pod_node(p)) for p in pods)),
            ((revision or {}).get("metadata") or {}).get("uid"),
        ),
    )
    if lookup_only:
        return evidence
    if annotations.get(ANNOTATION_ROLLOUT_PAUSED) or replica_spec.get("paused") is True:
        raise conflict("the service is paused")
    if ANNOTATION_ROLLOUT_PROMOTE in annotations or ANNOTATION_ROLLOUT_ROLLBACK in annotations:
        raise conflict("a rollout promote or rollback annotation is present")
    if any(
        m.request.component == flags.component and m.request.instance == flags.instance
        for m in retained
    ):
        raise conflict("a request for the Instance is already on the InferenceService")
    for record in records:
        if record.get("phase") in TERMINAL_MIGRATION_PHASES:
            continue
        if flags.instance in (record.get("sourceInstance"), record.get("surgeInstance")):
            raise conflict("the Instance already takes part in a migration")
    for peer in read.rows:
        if (peer.get("operation") or {}).get("surgeIndex") == flags.instance:
            raise conflict("the Instance is another Instance's surge")
    if mode not in ("Auto", "Surge", ""):
        raise conflict(f"the component's migration mode is {mode}")
    if not row:
        raise conflict(f"Instance {flags.instance} is not in the InferenceReplica's status")
    if row.get("phase") != "Ready" or row.get("operation"):
        raise conflict(f"Instance {flags.instance} is not Ready, or has an operation in progress")
    if not row.get("runningRevision") or row.get(
        "targetRevision", row.get("runningRevision")
    ) != row.get("runningRevision"):
        raise conflict(f"Instance {flags.instance} doesn't run its target revision")
    if len(pods) > MAX_SOURCE_PODS:
        raise conflict("the Instance has more pods than the inspection bounds")
    if (
        not on_pods
        or len(on_pods) != len(pods)
        or not _runners_complete(on_pods)
        or any(not _pod_node(p) for p in on_pods)
    ):
        raise conflict(f"Instance {flags.instance}'s pod set is incomplete or unscheduled")
    if not flags.from_node and len(nodes) > 1:
        raise conflict("the Instance's pods span several nodes and --from-node is absent")
    if flags.from_node and flags.from_node not in nodes:
        raise conflict(f"--from-node {flags.from_node} hosts none of the Instance's pods")
    problem = _revision_problem(
        revision,
        isvc=evidence.isvc_name,
        component=flags.component,
        replica_uid=evidence.replica_uid,
    )
    if problem:
        raise conflict(problem)
    if _pins_node(on_pods, from_node):
        raise conflict(f"a required node affinity pins the Instance to {from_node}")
    if from_node in flags.hints:
        raise conflict("a hint names the node to leave")
    if any(m.request.component == flags.component for m in retained):
        warnings.append(WARN_QUEUED_REQUESTS)
    if any(r.get("phase") not in TERMINAL_MIGRATION_PHASES for r in records):
        warnings.append(WARN_QUEUED_WORK)
    return Evidence(**{**_fields(evidence), "warnings": tuple(warnings)})


def _fields(evidence: Evidence) -> dict[str, Any]:
    return {name: getattr(evidence, name) for name in Evidence.__dataclass_fields__}


def lookup(flags: Flags, evidence: Evidence) -> Mailbox:
    """``--request-id``: the retained request of that ID when it is the very request these
    flags describe (component, instance, from-node, hints in order, reason, requested-by);
    :class:`Refused` with exit 3 when it's unknown, taken, or different."""
    found = next((m for m in evidence.mailboxes if m.request.uuid == flags.request_id), None)
    if found is None:
        raise conflict("no request of that ID waits on the InferenceService")
    request = found.request
    same = (
        request.component == flags.component
        and request.instance == flags.instance
        and request.from_node == (flags.from_node or evidence.from_node)
        and tuple(request.hint_target_nodes) == flags.hints
        and request.reason == flags.reason
        and request.requested_by == flags.requested_by
    )
    if not same:
        raise conflict("the request of that ID differs from these flags")
    return found


# -- Preview and result -------------------------------------------------------------------------


def preview_rows(
    flags: Flags,
    evidence: Evidence,
    *,
    context: str,
    request_id: str,
    requested_at: str,
) -> list[list[str]]:
    """The preview's FIELD VALUE rows, in upstream's order (a lookup stops at IR version)."""
    rows = [
        ["FIELD", "VALUE"],
        ["Action", ACTION],
        ["Context", context or "-"],
        ["Workload NS", flags.namespace],
        ["OME NS", flags.ome_namespace],
        ["Target", f"InferenceService/{flags.name}"],
        ["UID", evidence.uid],
        ["ResourceVersion", evidence.resource_version],
        ["Dry-run", flags.dry_run],
        ["Request UUID", request_id],
        ["Schema", SCHEMA],
        ["Component", flags.component],
        ["Instance", str(flags.instance)],
        ["From node", evidence.from_node or "<absent>"],
        ["Hint nodes", ", ".join(flags.hints) if flags.hints else "<absent>"],
        ["Reason", orjson.dumps(flags.reason).decode()],
        ["Requested at", requested_at],
        ["Requested by", flags.requested_by],
        ["Lookup only", "true" if flags.request_id else "false"],
        ["Source IR", evidence.replica],
        ["IR UID", evidence.replica_uid],
        ["IR version", evidence.replica_version],
    ]
    if flags.request_id:
        return rows
    return [
        *rows,
        ["Migration mode", evidence.mode or "Auto"],
        ["Running revision", evidence.running_revision],
        ["Incarnation", "-" if evidence.incarnation is None else str(evidence.incarnation)],
        ["Current nodes", ", ".join(evidence.nodes) or "<absent>"],
    ]


def warning_lines(evidence: Evidence) -> list[str]:
    """The preview's warnings, wrapped at 80 columns, the two standing ones last."""
    lines: list[str] = []
    for warning in (*evidence.warnings, WARN_HINTS, WARN_CAS):
        lines.extend(textwrap.wrap(warning, WRAP))
    return lines


def result(
    flags: Flags,
    evidence: Evidence,
    *,
    request_id: str,
    context: str,
    looked_up: bool = False,
) -> dict[str, Any]:
    """The ActionResult: ``applied`` means the API server stored the request, nothing more."""
    if looked_up:
        accepted = applied = False
        message = MESSAGE_LOOKUP
    else:
        accepted = flags.dry_run != "client"
        applied = flags.dry_run == "none"
        message = {"none": MESSAGE_APPLIED, "server": MESSAGE_SERVER, "client": MESSAGE_CLIENT}[
            flags.dry_run
        ]
    follow_up = (
        f"kubectl ome migration status {flags.name} --component={flags.component} "
        f"-n {flags.namespace}"
    )
    if context:
        follow_up += f" --context={context}"
    return {
        "apiVersion": "cli.ome.io/v1alpha1",
        "kind": "ActionResult",
        "action": ACTION,
        "target": {
            "kind": "InferenceService",
            "namespace": flags.namespace,
            "name": flags.name,
            "uid": evidence.uid,
            "resourceVersion": evidence.resource_version,
        },
        "dryRun": flags.dry_run,
        "requestID": request_id,
        "accepted": accepted,
        "applied": applied,
        "revisionHash": None,
        "message": message,
        "followUp": follow_up,
    }


__all__ = [
    "ACTION",
    "EXIT_CONFLICT",
    "PREVIEW_TITLE",
    "PROMPT",
    "Evidence",
    "Flags",
    "Mailbox",
    "Refused",
    "check_flags",
    "check_target",
    "collect_evidence",
    "json_patch",
    "lookup",
    "mailboxes",
    "migration_mode",
    "preview_rows",
    "request_body",
    "request_key",
    "result",
    "strict_mailbox",
    "warning_lines",
]
