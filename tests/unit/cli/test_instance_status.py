"""The report of ``kubectl ome instance status`` (omed.cli.instance_status)."""

from __future__ import annotations

from typing import Any

import pytest

from omed.cli import instance_status as st
from omed.cli.instances import collect, render_table

from .test_instances import isvc, replica

POD = "chat-engine-0-default-0"
FAILED_ROW = {
    "index": 0,
    "incarnation": 1,
    "phase": "Failed",
    "targetRevision": "chat-engine-6c4f8b1d",
    "podCount": 1,
    "servingPodCount": 0,
    "availablePodCount": 0,
    "admitted": True,
    "activeOrdinal": 0,
    "lastFailure": {
        "pod": POD,
        "container": "ome-container",
        "reason": "Error",
        "exitCode": 1,
        "time": "2026-09-14T20:52:31Z",
    },
}
RESOLVED = st.Deployment("OMENative", "ServiceSpec", "LiveRuntime", "Resolved")


def pod(
    name: str = POD,
    *,
    ready: str = "False",
    serving: str = "False",
    restarts: int = 21,
    deleting: bool = False,
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "prod"}
    if deleting:
        meta["deletionTimestamp"] = "2026-09-14T20:59:00Z"
    return {
        "metadata": meta,
        "spec": {"nodeName": "node-a"},
        "status": {
            "phase": "Running",
            "conditions": [
                {"type": "Ready", "status": ready},
                {"type": "ome.io/serving", "status": serving},
            ],
            "containerStatuses": [{"name": "ome-container", "restartCount": restarts}],
        },
    }


def event(name: str, reason: str, count: int, kind: str = "Warning") -> dict[str, Any]:
    return {
        "type": kind,
        "reason": reason,
        "count": count,
        "involvedObject": {"kind": "Pod", "name": name},
        "message": "Back-off restarting failed container",
    }


def report(
    rows: list[dict[str, Any]] | None = None,
    *,
    pods: list[dict[str, Any]] | None = None,
    events: list[dict[str, Any]] | None = None,
    deploy: st.Deployment = RESOLVED,
    index: int = 0,
    **status: Any,
) -> st.StatusReport:
    collection = collect(isvc(), [replica(rows=rows or [FAILED_ROW], **status)])
    return st.build(
        collection,
        component="engine",
        index=index,
        deploy=deploy,
        pods=[pod()] if pods is None else pods,
        events=[event(POD, "BackOff", 21)] if events is None else events,
    )


def table(r: st.StatusReport, *, wide: bool = False) -> str:
    return render_table(st.table_rows(r, wide=wide))


def fields(r: st.StatusReport) -> dict[str, str]:
    """The table's rows by FIELD (the last of a repeated one)."""
    return {label: value for label, value in st.table_rows(r, wide=False)[1:]}


def test_the_pages_example_byte_for_byte() -> None:
    assert table(report()) == (
        "FIELD        VALUE\n"
        "state        Reported engine[0] evidence=Reported\n"
        "deployment   mode=OMENative source=ServiceSpec origin=LiveRuntime evidence...\n"
        "encoding     name=DenseV1 evidence=Reported reason=-\n"
        "instance     chat-engine inc=1 phase=Failed admitted=true\n"
        "revisions    running=- target=chat-engine-6c4f8b1d\n"
        "persisted    pods=1 serving=0 available=0\n"
        "lifecycle    activeOrdinal=0 readySince=-\n"
        "failure      pod=chat-engine-0-default-0 container=ome-container reason=Er...\n"
        "fail time    2026-09-14T20:52:31Z\n"
        "pod          chat-engine-0-default-0 default/Running ready=False serving=F...\n"
        "event        Pod/chat-engine-0-default-0 reason=BackOff count=21\n"
    )


def test_wide_prints_every_field_in_full_one_to_a_row() -> None:
    rows = dict(st.table_rows(report(), wide=True)[1:])  # type: ignore[arg-type]
    assert rows["failure exit code"] == "1"
    assert rows["failure reason"] == "Error"
    assert rows["pod[0] restarts"] == "21"
    assert rows["pod[0] serving"] == "False"
    assert rows["deployment evidence"] == "Resolved"
    assert rows["event[0] count"] == "21"


def test_an_operation_shows_its_hold_strategy_and_timing() -> None:
    row = {
        **FAILED_ROW,
        "phase": "Updating",
        "operation": {
            "id": "op-7",
            "type": "Update",
            "step": "SurgeCreated",
            "targetRevision": "chat-engine-00aa11bb",
            "waiting": "Unschedulable",
            "startedAt": "2026-09-14T20:50:00Z",
            "deadline": "2026-09-14T21:20:00Z",
            "retryCount": 0,
        },
    }
    labels = [r.label for r in report([row]).rows]
    assert labels[labels.index("op") :][:4] == ["op", "op strategy", "op hold", "op timing"]
    values = fields(report([row]))
    assert values["op hold"] == "waiting=Unschedulable"
    assert values["op strategy"] == "SurgeThenDrain"
    assert values["op"] == "id=op-7 type=Update step=SurgeCreated target=chat-engine-00aa..."


def test_an_unknown_waiting_token_is_unknown_everywhere_with_an_issue() -> None:
    row = {
        **FAILED_ROW,
        "operation": {"id": "op-1", "type": "Create", "waiting": "CapacityProvisioning"},
    }
    r = report([row])
    assert fields(r)["op hold"] == "waiting=Unknown"
    assert "CapacityProvisioning" not in table(r, wide=True)
    assert r.report["instance"]["operation"]["waiting"] == "Unknown"
    assert [i["code"] for i in r.report["issues"]] == ["OperationWaitingUnknown"]
    assert "issue        OperationWaitingUnknown: " in table(r)


def test_an_unknown_strategy_is_unknown_with_an_issue() -> None:
    row = {**FAILED_ROW, "operation": {"id": "op-1", "type": "Update"}}
    collection = collect(isvc(), [replica(rows=[row])])
    collection.components["engine"].source["spec"]["lifecycle"] = {  # type: ignore[index]
        "updateStrategy": {"type": "BlueGreen"}
    }
    r = st.build(collection, component="engine", index=0, deploy=RESOLVED, pods=[], events=[])
    assert fields(r)["op strategy"] == "Unknown"
    assert [i["code"] for i in r.report["issues"]] == ["OperationStrategyUnknown"]


def test_states() -> None:
    assert report(index=5).state == "NotReported"
    raw = st.Deployment("RawDeployment", "ConfigMap", "NoRuntime", "Resolved")
    assert report(deploy=raw).state == "NotOMENative"
    nothing = st.build(
        collect(isvc(), []), component="router", index=0, deploy=RESOLVED, pods=[], events=[]
    )
    assert nothing.state == "NoReplica"
    unlisted = st.build(
        collect(isvc(), None, list_error="forbidden"),
        component="engine",
        index=0,
        deploy=RESOLVED,
        pods=None,
        events=None,
    )
    assert unlisted.state == "Unavailable"
    assert report(observed=3).rows[0].fields[1] == ("evidence", "Stale:3/4")


def test_a_damaged_status_is_unavailable_with_the_decoders_reason() -> None:
    r = report(instanceStatusEncoding="ColumnarV2")
    assert r.state == "Unavailable"
    encoding = table(r).splitlines()[3]
    assert encoding.startswith("encoding     name=ColumnarV2 evidence=SourceUnavailable reason=")


def test_the_16_pods_most_likely_to_explain_a_problem() -> None:
    pods = [
        pod(f"chat-engine-0-worker-{i}", ready="True", serving="True", restarts=0)
        for i in range(20)
    ]
    pods[7] = pod("chat-engine-0-worker-7", ready="False", restarts=0)
    pods[12] = pod("chat-engine-0-worker-12", ready="True", deleting=True, restarts=0)
    pods[3] = pod("chat-engine-0-worker-3", ready="True", serving="False", restarts=4)
    picked = [p["metadata"]["name"] for p in st.pick_pods(pods)]
    assert len(picked) == 16
    assert picked[:3] == [
        "chat-engine-0-worker-12",  # being deleted
        "chat-engine-0-worker-7",  # not Ready
        "chat-engine-0-worker-3",  # Ready, not serving
    ]
    out = table(report(pods=pods, events=[]))
    assert "pods         shown=16 of=20\n" in out
    assert out.count("\npod ") == 16


def test_warning_events_are_summed_per_pod_and_reason_without_messages() -> None:
    events = [
        event(POD, "BackOff", 20),
        event(POD, "BackOff", 1),
        event(POD, "Pulled", 9, kind="Normal"),
        event("someone-else", "BackOff", 3),
        {**event(POD, "Failed", 1), "count": None, "series": {"count": 4}},
    ]
    assert st.warning_counts(events, [POD]) == [(POD, "BackOff", 21), (POD, "Failed", 4)]
    assert "Back-off" not in table(report(events=events), wide=True)


def test_credentials_are_redacted_and_control_characters_never_printed() -> None:
    row = {**FAILED_ROW, "lastFailure": {"pod": POD, "reason": "token=abc123 \x1b[2J"}}
    out = table(report([row]), wide=True)
    assert "[REDACTED]" in out and "abc123" not in out and "\x1b" not in out


@pytest.mark.parametrize(
    ("meta", "runtime", "default", "expected"),
    [
        (
            {"annotations": {"ome.io/deploymentMode": "OMENative"}},
            None,
            None,
            ("OMENative", "Annotation"),
        ),
        ({}, {"spec": {"deploymentMode": "OMENative"}}, None, ("OMENative", "Runtime")),
        ({}, None, "OMENative", ("OMENative", "ConfigMap")),
        ({}, None, None, ("RawDeployment", "Default")),
    ],
)
def test_the_mode_is_resolved_as_omes_controller_resolves_it(
    meta: dict[str, Any], runtime: Any, default: str | None, expected: tuple[str, str]
) -> None:
    service = isvc(**meta)
    got = st.deployment(
        service, runtime, origin="LiveRuntime", default_mode=default, default_known=True
    )
    assert (got.mode, got.source, got.evidence) == (*expected, "Resolved")


def test_a_fallback_that_could_not_be_read_is_partial() -> None:
    got = st.deployment(isvc(), None, origin="NoRuntime", default_mode=None, default_known=False)
    assert (got.mode, got.source, got.evidence) == ("RawDeployment", "Default", "Partial")
