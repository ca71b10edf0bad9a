"""The cache boundary: pods and InferenceReplicas read into the planner's dataclasses."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import pytest

from omed.api.inferencereplica import InstanceStatus, Operation
from omed.config import lifecycle_entry
from omed.config.lifecycle import LifecycleConfig
from omed.controllers.inferencereplica.core.observe import (
    InvalidReplica,
    observe,
    pod_view,
    replica_target,
)
from omed.controllers.inferencereplica.core.podtemplate import revision_of
from omed.controllers.inferencereplica.core.policy import (
    DEFAULT_REVISION_HISTORY_LIMIT,
    RetryPolicy,
)
from omed.controllers.inferencereplica.core.status import (
    RowsUnreadable,
    decode_rows_from_status,
    encode_rows_into_status,
)

TEMPLATE = {"spec": {"containers": [{"name": "ome-container", "image": "ome/serving:1.0"}]}}


def irep(**spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "apiVersion": "ome.io/v1beta1",
        "kind": "InferenceReplica",
        "metadata": {
            "name": "chat-engine",
            "namespace": "prod",
            "uid": "irep-uid",
            "generation": 2,
            "resourceVersion": "10",
            "finalizers": ["ome.io/inferencereplica-cleanup"],
            "ownerReferences": [
                {
                    "apiVersion": "ome.io/v1beta1",
                    "kind": "InferenceService",
                    "name": "chat",
                    "uid": "isvc-uid",
                    "controller": True,
                }
            ],
        },
        "spec": {
            "parentRef": {"name": "chat"},
            "component": "engine",
            "replicas": 2,
            "runners": [{"name": "default", "template": TEMPLATE}],
        },
    }
    body["spec"].update(spec)
    return body


def k8s_pod(name: str, *, index: str | None = "0", owner: str = "irep-uid", **status: Any) -> Any:
    labels = {"ome.io/inferenceservice": "chat", "component": "engine"}
    if index is not None:
        labels |= {"ome.io/instance-index": index, "ome.io/incarnation": "2"}
    return {
        "metadata": {
            "name": name,
            "namespace": "prod",
            "uid": f"u-{name}",
            "labels": labels,
            "annotations": {"ome.io/operation-id": "create-0-2-abc"},
            "ownerReferences": [
                {
                    "kind": "InferenceReplica",
                    "name": "chat-engine",
                    "uid": owner,
                    "controller": True,
                }
            ],
        },
        "spec": {"nodeName": "sim-node-1"},
        "status": status,
    }


def test_a_ready_serving_pod_reads_as_such() -> None:
    pod = k8s_pod(
        "chat-engine-0-default-0",
        phase="Running",
        conditions=[
            {"type": "Ready", "status": "True", "lastTransitionTime": "2026-09-14T20:00:00Z"},
            {"type": "ContainersReady", "status": "True"},
            {"type": "ome.io/serving", "status": "True"},
        ],
    )
    view = pod_view(pod, replica="chat-engine")
    assert (view.index, view.runner, view.ordinal, view.incarnation) == (0, "default", 0, 2)
    assert view.ready and view.containers_ready and view.serving is True
    assert view.ready_since == dt.datetime(2026, 9, 14, 20, 0, tzinfo=dt.UTC)
    assert view.node == "sim-node-1"
    assert view.operation_id == "create-0-2-abc"
    assert not view.failing and not view.terminating


def test_a_pod_deleted_with_no_grace_and_no_finalizer_reads_as_removed() -> None:
    """The kubelet's confirming delete (grace 0) moves deletionTimestamp to its moment; with
    no finalizer the API server removed the pod in that request."""

    def view(grace: int, finalizers: list[str] | None = None) -> Any:
        pod = k8s_pod("chat-engine-0-default-0", phase="Running")
        pod["metadata"] |= {
            "deletionTimestamp": "2026-09-14T20:00:00Z",
            "deletionGracePeriodSeconds": grace,
        }
        if finalizers:
            pod["metadata"]["finalizers"] = finalizers
        return pod_view(pod, replica="chat-engine")

    assert view(0).terminating and view(0).removed
    assert view(30).terminating and not view(30).removed
    assert not view(0, ["example.com/hold"]).removed
    assert not pod_view(k8s_pod("chat-engine-0-default-0"), replica="chat-engine").removed


def test_a_crash_loop_reports_the_termination_reason_and_exit_code() -> None:
    pod = k8s_pod(
        "chat-engine-0-default-0",
        phase="Running",
        containerStatuses=[
            {
                "name": "ome-container",
                "restartCount": 3,
                "state": {"waiting": {"reason": "CrashLoopBackOff"}},
                "lastState": {
                    "terminated": {
                        "reason": "Error",
                        "exitCode": 1,
                        "finishedAt": "2026-09-14T20:52:31Z",
                    }
                },
            }
        ],
    )
    view = pod_view(pod, replica="chat-engine")
    assert view.failing
    assert view.failure is not None
    assert (view.failure.container, view.failure.reason, view.failure.exit_code) == (
        "ome-container",
        "Error",
        1,
    )


def test_image_pull_errors_read_as_one_reason() -> None:
    for reason in ("ErrImagePull", "ImagePullBackOff"):
        pod = k8s_pod(
            "chat-engine-0-default-0",
            containerStatuses=[{"name": "c", "state": {"waiting": {"reason": reason}}}],
        )
        view = pod_view(pod, replica="chat-engine")
        assert view.failing
        assert view.failure is not None and view.failure.reason == "ImagePullBackOff"


def test_a_recovered_container_leaves_a_last_failure_but_is_not_failing() -> None:
    pod = k8s_pod(
        "chat-engine-0-default-0",
        containerStatuses=[
            {
                "name": "c",
                "state": {"running": {}},
                "lastState": {"terminated": {"reason": "OOMKilled", "exitCode": 137}},
            }
        ],
    )
    view = pod_view(pod, replica="chat-engine")
    assert not view.failing
    assert view.failure is not None and view.failure.reason == "OOMKilled"


def test_observe_keeps_only_the_pods_this_replica_controls_and_sets_strays_apart() -> None:
    pods = [
        k8s_pod("chat-engine-0-default-0"),
        k8s_pod("chat-engine-1-default-0", index="1", owner="someone-else"),
        k8s_pod("odd", index=None),
    ]
    target, observed = observe(irep(), pods)
    assert list(observed.pods) == [0]
    assert [p.name for p in observed.stray_pods] == ["odd"]
    assert target.parent is not None and target.parent.uid == "isvc-uid"
    assert target.isvc == "chat"
    assert target.has_finalizer and not target.deleting


def test_the_target_resolves_defaults_and_the_revision() -> None:
    target = replica_target(irep())
    assert target.ready_policy == "AllPodReady"
    assert target.pods_per_instance == 1
    assert target.update_revision.startswith("chat-engine-")
    assert len(target.update_revision) == len("chat-engine-") + 8


def test_a_standalone_replica_uses_its_own_name_for_label_and_revision() -> None:
    body = irep()
    del body["spec"]["parentRef"]
    target = replica_target(body)
    assert target.parent is None
    assert target.isvc == "chat-engine"
    assert target.update_revision.startswith("chat-engine-engine-")


def test_the_revision_changes_with_the_worker_template_not_the_worker_count() -> None:
    # Upstream's payload holds the worker's spec, not the count (docs/controllers.md).
    from omed.controllers.inferencereplica.core.model import RunnerShape

    other = {"spec": {"containers": [{"name": "w", "image": "other"}]}}
    one = (RunnerShape("leader", 1, TEMPLATE), RunnerShape("worker", 2, TEMPLATE))
    two = (RunnerShape("leader", 1, TEMPLATE), RunnerShape("worker", 3, TEMPLATE))
    changed = (RunnerShape("leader", 1, TEMPLATE), RunnerShape("worker", 2, other))
    assert revision_of(isvc="a", component="engine", runners=one) == revision_of(
        isvc="a", component="engine", runners=two
    )
    assert revision_of(isvc="a", component="engine", runners=one) != revision_of(
        isvc="a", component="engine", runners=changed
    )
    long = revision_of(isvc="x" * 80, component="engine", runners=one[:1])
    assert len(long) == 63


def test_an_invalid_spec_is_refused() -> None:
    body = irep(runners=[])
    with pytest.raises(InvalidReplica):
        replica_target(body)


def test_rows_round_trip_through_the_seam() -> None:
    rows = [
        InstanceStatus(index=1, incarnation=1, phase="Ready"),
        InstanceStatus(
            index=0,
            incarnation=2,
            phase="Creating",
            operation=Operation(id="create-0-2-x", type="Create", step="CreatePods"),
        ),
    ]
    status = encode_rows_into_status({"replicas": 2}, rows)
    assert [r["index"] for r in status["instanceStatuses"]] == [0, 1]
    assert decode_rows_from_status(status) == sorted(rows, key=lambda r: r.index)
    assert encode_rows_into_status(status, decode_rows_from_status(status)) == status


def test_unreadable_rows_are_refused_whole() -> None:
    with pytest.raises(RowsUnreadable):
        decode_rows_from_status({"instanceStatusEncoding": "ColumnarV2"})
    with pytest.raises(RowsUnreadable):
        decode_rows_from_status({"instanceStatuses": [{"index": 0}, {"index": 0}]})
    with pytest.raises(RowsUnreadable):
        decode_rows_from_status({"instanceStatuses": [{"index": -1}]})


# --- the fleet-wide lifecycle settings under the component's own ---------------------------


def fleet(**document: Any) -> LifecycleConfig:
    return lifecycle_entry({"lifecycle": json.dumps(document)})


def test_unconfigured_everywhere_means_no_deadline_and_the_default_ladder() -> None:
    target = replica_target(irep(), fleet())
    assert target.update.ready_timeout is None
    assert target.update.retry == RetryPolicy()
    assert target.update.repair_retry is None
    assert target.revision_history_limit == DEFAULT_REVISION_HISTORY_LIMIT


def test_the_configmap_supplies_what_the_component_leaves_unset() -> None:
    settings = fleet(
        instanceReadyTimeout="7m",
        revisionHistoryLimit=2,
        updateRetry={"maxAttempts": 5, "initialDelay": "1s", "multiplier": 4},
        stuckPodGracePeriod="60s",
    )
    target = replica_target(irep(), settings)
    assert target.update.ready_timeout == 420.0
    assert target.update.retry == RetryPolicy(
        max_attempts=5, initial_delay=1.0, max_delay=300.0, multiplier=4.0
    )
    assert target.update.repair_retry == target.update.retry  # a ladder was written
    assert target.revision_history_limit == 2
    assert target.fleet.stuck_pod_grace_period == 60.0


def test_the_component_wins_field_by_field() -> None:
    settings = fleet(
        instanceReadyTimeout="7m",
        revisionHistoryLimit=2,
        updateRetry={"maxAttempts": 5, "initialDelay": "1s", "maxDelay": "2m"},
    )
    own = irep(
        lifecycle={"instanceReadyTimeout": "90s", "updateRetry": {"initialDelay": "3s"}},
        revisionHistoryLimit=0,
    )
    target = replica_target(own, settings)
    assert target.update.ready_timeout == 90.0
    assert target.update.retry == RetryPolicy(
        max_attempts=5, initial_delay=3.0, max_delay=120.0, multiplier=2.0
    )
    assert target.revision_history_limit == 0
