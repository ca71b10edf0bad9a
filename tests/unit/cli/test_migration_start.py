"""migration start's checks, preview, request, patch and result, from objects as the API
server returns them: OME's tables byte for byte, each refusal with its message and exit code."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from omed.cli import migration_start as core
from omed.cli import release_held
from omed.cli.instances import collect, render_table

ISVC_UID = "5f0c8a52-3b1e-4c8d-9f27-6a1d0e4b7c93"
IR_UID = "0b6e2f41-9d3c-4a57-8e12-c4f5a6b7d890"
REVISION = "chat-engine-5d8f7c9b"
PREVIEW_UUID = "6ff01fa3-2a47-4725-9c85-786ed59ac166"
REQUEST_UUID = "7c9e6679-7425-40de-944b-e07fc1f90ae7"
HOST = "kubernetes.io/hostname"


def isvc(**annotations: str) -> dict[str, Any]:
    return {
        "apiVersion": "ome.io/v1beta1",
        "kind": "InferenceService",
        "metadata": {
            "name": "chat",
            "namespace": "prod",
            "uid": ISVC_UID,
            "resourceVersion": "48213",
            "annotations": dict(annotations),
        },
        "spec": {"engine": {"minReplicas": 4}},
    }


def row(index: int, **extra: Any) -> dict[str, Any]:
    return {
        "index": index,
        "incarnation": 1,
        "phase": "Ready",
        "runningRevision": REVISION,
        "targetRevision": REVISION,
        **extra,
    }


def replica(rows: list[dict[str, Any]], **status: Any) -> dict[str, Any]:
    return {
        "apiVersion": "ome.io/v1beta1",
        "kind": "InferenceReplica",
        "metadata": {
            "name": "chat-engine",
            "namespace": "prod",
            "uid": IR_UID,
            "resourceVersion": "48190",
            "generation": 2,
            "labels": {"ome.io/inferenceservice": "chat"},
            "ownerReferences": [
                {
                    "apiVersion": "ome.io/v1beta1",
                    "kind": "InferenceService",
                    "name": "chat",
                    "uid": ISVC_UID,
                    "controller": True,
                }
            ],
        },
        "spec": {"parentRef": {"name": "chat"}, "component": "engine", "replicas": len(rows)},
        "status": {"observedGeneration": 2, "instanceStatuses": rows, **status},
    }


def pod(index: int, node: str = "node-a", runner: str = "default") -> dict[str, Any]:
    return {
        "metadata": {
            "name": f"chat-engine-{index}-{runner}-0",
            "uid": f"pod-{index}-{runner}",
            "labels": {"ome.io/runner": runner},
        },
        "spec": {"nodeName": node},
    }


def controller_revision() -> dict[str, Any]:
    return {
        "metadata": {
            "name": REVISION,
            "uid": "cr-1",
            "labels": {
                "ome.io/inferenceservice": "chat",
                "component": "engine",
                "ome.io/managed-by": "OMENative",
            },
            "ownerReferences": [{"uid": IR_UID, "controller": True, "kind": "InferenceReplica"}],
        },
        "data": {},
    }


def flags(**overrides: Any) -> core.Flags:
    values: dict[str, Any] = {
        "name": "chat",
        "namespace": "prod",
        "component": "engine",
        "instance": "3",
        "from_node": None,
        "hints": (),
        "reason": "node-a maintenance",
        "requested_by": "kubectl-ome",
        "request_id": None,
        "dry_run": "client",
        "output": "table",
        "ome_namespace": "ome",
        "yes": True,
        **overrides,
    }
    return core.check_flags(**values)


def evidence(
    *,
    service: dict[str, Any] | None = None,
    rows: list[dict[str, Any]] | None = None,
    pods: list[dict[str, Any]] | None = None,
    revision: dict[str, Any] | None = None,
    audit: frozenset[str] | None = frozenset(),
    status: dict[str, Any] | None = None,
    replica_spec: dict[str, Any] | None = None,
    **flag_overrides: Any,
) -> core.Evidence:
    ir = replica(rows if rows is not None else [row(i) for i in range(4)], **(status or {}))
    ir["spec"].update(replica_spec or {})
    collection = collect(service or isvc(), [ir])
    return core.collect_evidence(
        flags=flags(**flag_overrides),
        collection=collection,
        pods=pods if pods is not None else [pod(3)],
        revision=revision if revision is not None else controller_revision(),
        audit_ids=audit,
    )


PAGE_PREVIEW = """\
ALPHA guarded migration preview (not controller convergence)
FIELD              VALUE
Action             migration start
Context            prod-us-east
Workload NS        prod
OME NS             ome
Target             InferenceService/chat
UID                5f0c8a52-3b1e-4c8d-9f27-6a1d0e4b7c93
ResourceVersion    48213
Dry-run            client
Request UUID       6ff01fa3-2a47-4725-9c85-786ed59ac166
Schema             v1
Component          engine
Instance           3
From node          node-a
Hint nodes         <absent>
Reason             "node-a maintenance"
Requested at       2026-09-28T10:12:04Z
Requested by       kubectl-ome
Lookup only        false
Source IR          chat-engine
IR UID             0b6e2f41-9d3c-4a57-8e12-c4f5a6b7d890
IR version         48190
Migration mode     Auto
Running revision   chat-engine-5d8f7c9b
Incarnation        1
Current nodes      node-a
Node hints are soft preferences; capacity, scheduling and controller convergence
are not guaranteed.
Parent UID/resourceVersion CAS is not an IR/Pod/runtime transaction.
"""


def test_the_preview_is_omes_byte_for_byte() -> None:
    found = evidence()
    text = (
        core.PREVIEW_TITLE
        + "\n"
        + render_table(
            core.preview_rows(
                flags(),
                found,
                context="prod-us-east",
                request_id=PREVIEW_UUID,
                requested_at="2026-09-28T10:12:04Z",
            )
        )
        + "".join(line + "\n" for line in core.warning_lines(found))
    )
    assert text == PAGE_PREVIEW


def test_a_lookup_preview_stops_at_ir_version() -> None:
    rows = core.preview_rows(
        flags(request_id=REQUEST_UUID),
        evidence(),
        context="c",
        request_id=REQUEST_UUID,
        requested_at="2026-09-28T10:12:04Z",
    )
    assert rows[-1] == ["IR version", "48190"]
    assert ["Lookup only", "true"] in rows


PAGE_RESULT = """\
FIELD           VALUE
action          migration start
target          InferenceService/prod/chat
dry-run         none
accepted        Yes
applied         Yes
request-id      7c9e6679-7425-40de-944b-e07fc1f90ae7
revision-hash   -
message         API accepted annotation request; delivery and converg...
follow-up       kubectl ome migration status chat --component=engine ...
hint            Use -o json or -o yaml for full values.
"""

PAGE_LOOKUP = """\
FIELD           VALUE
action          migration start
target          InferenceService/prod/chat
dry-run         none
accepted        No
applied         No
request-id      7c9e6679-7425-40de-944b-e07fc1f90ae7
revision-hash   -
message         Identical retained mailbox observed; no replay sent; ...
follow-up       kubectl ome migration status chat --component=engine ...
hint            Use -o json or -o yaml for full values.
"""


def test_the_result_tables_are_omes_byte_for_byte() -> None:
    report = core.result(
        flags(dry_run="none"), evidence(), request_id=REQUEST_UUID, context="prod-us-east"
    )
    assert render_table(release_held.result_rows(report)) == PAGE_RESULT
    assert report["followUp"] == (
        "kubectl ome migration status chat --component=engine -n prod --context=prod-us-east"
    )
    assert report["message"] == (
        "API accepted annotation request; delivery and convergence not observed."
    )
    lookup = core.result(
        flags(dry_run="none", request_id=REQUEST_UUID),
        evidence(),
        request_id=REQUEST_UUID,
        context="prod-us-east",
        looked_up=True,
    )
    assert render_table(release_held.result_rows(lookup)) == PAGE_LOOKUP


@pytest.mark.parametrize(
    ("mode", "accepted", "applied", "message"),
    [
        ("client", False, False, "Validated locally; no patch sent."),
        ("server", True, False, "API dry-run accepted; no changes persisted."),
    ],
)
def test_dry_runs_say_what_was_sent(mode: str, accepted: bool, applied: bool, message: str) -> None:
    report = core.result(flags(dry_run=mode), evidence(), request_id=REQUEST_UUID, context="")
    assert (report["accepted"], report["applied"], report["message"]) == (
        accepted,
        applied,
        message,
    )


def test_the_request_is_upstreams_wire_format_and_reads_back() -> None:
    body = core.request_body(
        flags(hints=["node-b,node-c"]), from_node="node-a", requested_at="2026-09-28T10:12:04Z"
    )
    assert body == (
        '{"schemaVersion":"v1","component":"engine","instance":3,"from_node":"node-a",'
        '"hint_target_nodes":["node-b","node-c"],"reason":"node-a maintenance",'
        '"requested_at":"2026-09-28T10:12:04Z","requested_by":"kubectl-ome"}'
    )
    read = core.strict_mailbox(core.request_key(REQUEST_UUID), body)
    assert read.request.hint_target_nodes == ("node-b", "node-c")
    bare = core.request_body(flags(reason=None), from_node="node-a", requested_at="")
    assert json.loads(bare) == {
        "schemaVersion": "v1",
        "component": "engine",
        "instance": 3,
        "from_node": "node-a",
        "requested_by": "kubectl-ome",
    }


def test_the_patch_tests_uid_and_resource_version_first() -> None:
    ops = core.json_patch(
        uid=ISVC_UID, resource_version="48213", annotations=False, key="ome.io/x-1", value="{}"
    )
    assert ops == [
        {"op": "test", "path": "/metadata/uid", "value": ISVC_UID},
        {"op": "test", "path": "/metadata/resourceVersion", "value": "48213"},
        {"op": "add", "path": "/metadata/annotations", "value": {}},
        {"op": "add", "path": "/metadata/annotations/ome.io~1x-1", "value": "{}"},
    ]


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"component": None}, core.COMPONENT_REQUIRED),
        ({"instance": None}, core.INSTANCE_INVALID),
        ({"instance": "+3"}, core.INSTANCE_INVALID),
        ({"instance": "03"}, core.INSTANCE_INVALID),
        ({"instance": "2147483648"}, core.INSTANCE_INVALID),
        ({"component": "worker"}, core.VALUES_INVALID),
        ({"reason": "see https://x"}, core.VALUES_INVALID),
        ({"reason": "Bearer abc"}, core.VALUES_INVALID),
        ({"reason": "password=x"}, core.VALUES_INVALID),
        ({"reason": "ForceDelete"}, core.VALUES_INVALID),
        ({"reason": "x" * 257}, core.VALUES_INVALID),
        ({"reason": "tab\there"}, core.VALUES_INVALID),
        ({"request_id": "not-a-uuid"}, core.VALUES_INVALID),
        ({"requested_by": "x" * 129}, core.VALUES_INVALID),
        ({"hints": ["a,b,c,d,e,f,g,h,i"]}, core.HINTS_INVALID),
        ({"hints": ["node-b", "node-b"]}, core.HINTS_INVALID),
        ({"hints": ["Node_B"]}, core.HINTS_INVALID),
        ({"hints": ["node-a"], "from_node": "node-a"}, core.HINTS_INVALID),
        ({"name": "Chat"}, core.NAME_INVALID),
        ({"namespace": "Prod"}, core.NAMESPACES_INVALID),
        ({"output": "name"}, core.OUTPUT_INVALID),
        ({"dry_run": "all"}, core.DRY_RUN_INVALID),
    ],
)
def test_each_bad_flag_is_upstreams_message_and_exit_1(
    overrides: dict[str, Any], message: str
) -> None:
    with pytest.raises(core.Refused) as refused:
        flags(**overrides)
    assert (str(refused.value), refused.value.exit_code) == (message, 1)


def _mailbox(uuid: str, **fields: Any) -> str:
    body = {
        "schemaVersion": "v1",
        "component": "engine",
        "instance": 1,
        "from_node": "node-b",
        **fields,
    }
    return json.dumps({k: v for k, v in body.items() if v is not ...})


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("ome.io/migration-request-v1-nope", "{}", core.MAILBOX_IDENTITY),
        (None, "[", core.MAILBOX_PAYLOAD),
        (None, '{"schemaVersion":"v1","schemaVersion":"v1"}', core.MAILBOX_PAYLOAD),
        (None, _mailbox("", extra=1), core.MAILBOX_FIELD),
        (None, _mailbox("", reason=None), core.MAILBOX_FIELD),
        (None, _mailbox("", from_node=...), core.MAILBOX_INCOMPLETE),
        (None, _mailbox("", instance="1"), core.MAILBOX_FIELD_TYPE),
        (None, _mailbox("", requested_at="yesterday"), core.MAILBOX_TIMESTAMP),
    ],
)
def test_a_retained_mailbox_is_read_strictly(key: str | None, value: str, message: str) -> None:
    with pytest.raises(core.Refused) as refused:
        core.strict_mailbox(key or core.request_key("3f2a9c1e-0000-4000-8000-000000000001"), value)
    assert (str(refused.value), refused.value.exit_code) == (message, 1)


OTHER = "3f2a9c1e-0000-4000-8000-000000000001"


def _conflict_cases() -> list[tuple[str, dict[str, Any]]]:
    many = [pod(3, "node-a"), pod(3, "node-b", "worker"), pod(3, "node-a", "leader")]
    return [
        ("paused", {"service": isvc(**{"ome.io/rollout-paused": "true"})}),
        ("paused spec", {"replica_spec": {"paused": True}}),
        ("promote", {"service": isvc(**{"ome.io/rollout-promote": "x"})}),
        ("rollback", {"service": isvc(**{"ome.io/rollout-rollback": "x"})}),
        (
            "pending mailbox",
            {
                "service": isvc(
                    **{core.request_key(OTHER): _mailbox("", instance=3, from_node="node-a")}
                )
            },
        ),
        (
            "record as source",
            {
                "status": {
                    "migrations": [{"requestUUID": OTHER, "sourceInstance": 3, "phase": "Accepted"}]
                }
            },
        ),
        (
            "record as surge",
            {
                "status": {
                    "migrations": [
                        {
                            "requestUUID": OTHER,
                            "sourceInstance": 0,
                            "surgeInstance": 3,
                            "phase": "SurgePending",
                        }
                    ]
                }
            },
        ),
        ("surge index", {"rows": [row(0, operation={"type": "Migrate", "surgeIndex": 3}), row(3)]}),
        ("stale", {"status": {"observedGeneration": 1}}),
        ("mode Never", {"replica_spec": {"lifecycle": {"migrationPolicy": {"mode": "Never"}}}}),
        ("not in status", {"rows": [row(0)]}),
        ("not Ready", {"rows": [row(3, phase="Pending")]}),
        ("operation", {"rows": [row(3, operation={"type": "Update"})]}),
        ("no running revision", {"rows": [row(3, runningRevision=None)]}),
        ("target differs", {"rows": [row(3, targetRevision="chat-engine-7f9c4d2b")]}),
        ("no pods", {"pods": []}),
        ("unscheduled", {"pods": [pod(3, node="")]}),
        ("two defaults", {"pods": [pod(3), pod(3, "node-a")]}),
        ("span without --from-node", {"pods": many[1:]}),
        ("--from-node hosts none", {"from_node": "node-z"}),
        ("revision labels", {"revision": {"metadata": {"uid": "x", "labels": {}}}}),
        (
            "revision owner",
            {
                "revision": {
                    **controller_revision(),
                    "metadata": {**controller_revision()["metadata"], "ownerReferences": []},
                }
            },
        ),
        ("too many replicas", {"replica_spec": {"replicas": 2049}}),
    ]


@pytest.mark.parametrize(
    ("why", "case"), _conflict_cases(), ids=lambda v: v if isinstance(v, str) else ""
)
def test_each_state_that_blocks_the_move_is_a_conflict_exit_3(
    why: str, case: dict[str, Any]
) -> None:
    with pytest.raises(core.Refused) as refused:
        evidence(**case)
    assert (str(refused.value), refused.value.exit_code) == (core.PRECONDITION, 3), why
    assert CAUSES[why] in refused.value.cause


CAUSES = {
    "paused": "paused",
    "paused spec": "paused",
    "promote": "promote or rollback",
    "rollback": "promote or rollback",
    "pending mailbox": "already on the InferenceService",
    "record as source": "takes part in a migration",
    "record as surge": "takes part in a migration",
    "surge index": "another Instance's surge",
    "stale": "STALE:1/2",
    "mode Never": "mode is Never",
    "not in status": "not in the InferenceReplica's status",
    "not Ready": "not Ready",
    "operation": "operation in progress",
    "no running revision": "status is not current",
    "target differs": "doesn't run its target revision",
    "no pods": "incomplete or unscheduled",
    "unscheduled": "incomplete or unscheduled",
    "two defaults": "incomplete or unscheduled",
    "span without --from-node": "span several nodes",
    "--from-node hosts none": "hosts none",
    "revision labels": "lacks OME's labels",
    "revision owner": "isn't owned",
    "too many replicas": "inspection bounds",
}


def test_a_pinned_source_and_a_hint_on_the_derived_node_are_conflicts() -> None:
    pinned = pod(3)
    pinned["spec"]["affinity"] = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {
                        "matchExpressions": [
                            {
                                "key": "kubernetes.io/hostname",
                                "operator": "In",
                                "values": ["node-a"],
                            }
                        ]
                    }
                ]
            }
        }
    }
    with pytest.raises(core.Refused, match="precondition") as refused:
        evidence(pods=[pinned])
    assert "pins" in refused.value.cause
    with pytest.raises(core.Refused) as hinted:
        evidence(hints=["node-a"])
    assert hinted.value.exit_code == 3


def _required(*terms: Any) -> dict[str, Any]:
    return {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": list(terms)}
        }
    }


@pytest.mark.parametrize(
    ("terms", "pinned"),
    [
        (({"matchExpressions": [{"key": HOST, "operator": "In", "values": ["node-a"]}]},), True),
        (
            (
                None,
                {},
                {"matchExpressions": [{"key": HOST, "operator": "In", "values": ["x", "node-a"]}]},
            ),
            True,
        ),
        (({"matchExpressions": [{"key": HOST, "operator": "In", "values": ["node-b"]}]},), False),
        (
            ({"matchExpressions": [{"key": HOST, "operator": "NotIn", "values": ["node-a"]}]},),
            False,
        ),
        ((None, {}, {"matchExpressions": None}), False),
    ],
    ids=["alone", "among others, after null and empty terms", "another node", "NotIn", "empty"],
)
def test_a_source_is_pinned_when_its_node_is_among_a_required_hostname_in(
    terms: tuple[Any, ...], pinned: bool
) -> None:
    source = pod(3)
    source["spec"]["affinity"] = _required(*terms)
    if not pinned:
        assert evidence(pods=[source]).from_node == "node-a"
        return
    with pytest.raises(core.Refused) as refused:
        evidence(pods=[source])
    assert refused.value.cause == "a required node affinity pins the Instance to node-a"


def test_a_gang_on_two_nodes_moves_with_from_node() -> None:
    gang = [pod(3, "node-a", "leader"), pod(3, "node-b", "worker")]
    found = evidence(pods=gang, from_node="node-b")
    assert (found.from_node, found.nodes) == ("node-b", ("node-a", "node-b"))


def test_queued_work_and_an_unreadable_audit_add_warnings() -> None:
    service = isvc(**{core.request_key(OTHER): _mailbox("", instance=1, from_node="node-b")})
    found = evidence(
        service=service,
        audit=None,
        status={"migrations": [{"requestUUID": "x", "sourceInstance": 1, "phase": "Draining"}]},
    )
    assert found.warnings == (
        core.AUDIT_UNAVAILABLE_WARNING,
        core.WARN_QUEUED_REQUESTS,
        core.WARN_QUEUED_WORK,
    )
    assert {OTHER, "x"} <= found.known_ids
    with pytest.raises(core.Refused) as refused:
        evidence(audit=None, request_id=REQUEST_UUID)
    assert str(refused.value).startswith("audit lookup")


def test_a_lookup_finds_only_the_identical_waiting_request() -> None:
    body = core.request_body(flags(), from_node="node-a", requested_at="2026-09-28T10:12:04Z")
    service = isvc(**{core.request_key(REQUEST_UUID): body})
    # The Instance is busy with its own request; a lookup checks no state of the move.
    found = evidence(service=service, request_id=REQUEST_UUID)
    assert core.lookup(flags(request_id=REQUEST_UUID), found).request.uuid == REQUEST_UUID
    for differing in ({"reason": "other"}, {"hints": ["node-c"]}, {"instance": "2"}):
        with pytest.raises(core.Refused) as refused:
            core.lookup(flags(request_id=REQUEST_UUID, **differing), found)
        assert (str(refused.value), refused.value.exit_code) == (core.PRECONDITION, 3)
    gone = evidence(request_id=REQUEST_UUID)
    with pytest.raises(core.Refused) as missing:
        core.lookup(flags(request_id=REQUEST_UUID), gone)
    assert missing.value.exit_code == 3


def test_target_refusals() -> None:
    for change, message in (
        ({"uid": ""}, core.TARGET_UNSAFE),
        ({"deletionTimestamp": "2026-01-01T00:00:00Z"}, core.TARGET_DELETING),
    ):
        service = copy.deepcopy(isvc())
        service["metadata"].update(change)
        with pytest.raises(core.Refused) as refused:
            core.check_target(service)
        assert (str(refused.value), refused.value.exit_code) == (message, 1)
