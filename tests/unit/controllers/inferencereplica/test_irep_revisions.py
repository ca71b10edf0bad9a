"""ControllerRevisions of an InferenceReplica, upstream's names, and pods of omed's old names."""

from __future__ import annotations

import copy
from typing import Any

import orjson

from omed.api.revision import legacy_template_hash, payload_hash, revision_payload
from omed.clock import parse_rfc3339
from omed.controllers.inferencereplica.core.actions import CreatePods
from omed.controllers.inferencereplica.core.model import PlanSettings
from omed.controllers.inferencereplica.core.observe import observe, replica_target
from omed.controllers.inferencereplica.core.plan import plan
from omed.controllers.inferencereplica.core.revisionactions import (
    AdoptControllerRevision,
    CreateControllerRevision,
    DeleteControllerRevision,
)

NOW = parse_rfc3339("2026-09-14T20:00:00Z")
TEMPLATE: dict[str, Any] = {
    "metadata": {"labels": {"app": "chat"}},
    "spec": {"containers": [{"name": "ome-container", "image": "example/sglang:v0.4.9"}]},
}
LEGACY = f"chat-engine-{legacy_template_hash(TEMPLATE)}"
PAYLOAD = revision_payload(pod_spec=TEMPLATE["spec"], pod_meta=TEMPLATE["metadata"])
UPSTREAM = f"chat-engine-{payload_hash(PAYLOAD, owner_uid='irep-uid')}"


def irep(replicas: int = 1, status: dict[str, Any] | None = None, **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "apiVersion": "ome.io/v1beta1",
        "kind": "InferenceReplica",
        "metadata": {
            "name": "chat-engine",
            "namespace": "prod",
            "uid": "irep-uid",
            "generation": 1,
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
            "replicas": replicas,
            "runners": [{"name": "default", "template": TEMPLATE}],
            **spec,
        },
    }
    if status is not None:
        body["status"] = status
    return body


def record(name: str, number: int, *, owner: str = "irep-uid", data: Any = None) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "ControllerRevision",
        "metadata": {
            "name": name,
            "namespace": "prod",
            "uid": f"cr-{name}",
            "labels": {
                "ome.io/inferenceservice": "chat",
                "component": "engine",
                "ome.io/managed-by": "OMENative",
            },
            "ownerReferences": [
                {
                    "kind": "InferenceReplica",
                    "name": "chat-engine",
                    "uid": owner,
                    "controller": True,
                }
            ],
        },
        "data": orjson.loads(PAYLOAD) if data is None else data,
        "revision": number,
    }


def legacy_pod(index: int = 0, *, revision: str = LEGACY, ready: bool = True) -> dict[str, Any]:
    """A pod as omed wrote it before upstream's labels."""
    return {
        "metadata": {
            "name": f"chat-engine-{index}-default-0",
            "namespace": "prod",
            "uid": f"pod-{index}",
            "resourceVersion": "5",
            "labels": {
                "ome.io/inferenceservice": "chat",
                "component": "engine",
                "ome.io/instance-index": str(index),
                "ome.io/incarnation": "1",
                "ome.io/revision": revision,
            },
            "annotations": {"ome.io/operation-id": "create-0-1-x"},
            "ownerReferences": [
                {
                    "kind": "InferenceReplica",
                    "name": "chat-engine",
                    "uid": "irep-uid",
                    "controller": True,
                }
            ],
        },
        "spec": {
            "nodeName": "node-a",
            "containers": [{"name": "ome-container", "image": "example/sglang:v0.4.9"}],
        },
        "status": {
            "phase": "Running",
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True" if ready else "False",
                    "lastTransitionTime": "2026-09-14T19:00:00Z",
                },
                {"type": "ContainersReady", "status": "True"},
                {"type": "ome.io/serving", "status": "True"},
            ],
            "containerStatuses": [
                {
                    "name": "ome-container",
                    "image": "example/sglang:v0.4.9",
                    "ready": True,
                    "restartCount": 0,
                    "state": {"running": {}},
                }
            ],
        },
    }


def test_the_update_revision_is_upstreams_name_scoped_to_the_inferenceservice() -> None:
    target = replica_target(irep())
    assert target.update_revision == UPSTREAM
    assert target.legacy_revision == LEGACY
    assert target.revision_payload == PAYLOAD


def test_a_standalone_replica_scopes_the_hash_to_itself() -> None:
    body = irep()
    del body["spec"]["parentRef"]
    digest = payload_hash(PAYLOAD, owner_uid="irep-uid")
    assert replica_target(body).update_revision == f"chat-engine-engine-{digest}"


def test_a_scale_is_no_new_revision() -> None:
    assert replica_target(irep(1)).update_revision == replica_target(irep(5)).update_revision


def test_the_first_pass_records_the_revision_before_its_pods() -> None:
    target, observed = observe(irep(), [], revisions=[])
    decided = plan(target=target, observed=observed, settings=PlanSettings(), now=NOW)
    (created,) = decided.of_type(CreateControllerRevision)
    assert created.name == UPSTREAM
    body = created.body
    assert body["metadata"]["labels"] == {
        "ome.io/inferenceservice": "chat",
        "component": "engine",
        "ome.io/managed-by": "OMENative",
    }
    assert body["metadata"]["ownerReferences"][0]["uid"] == "irep-uid"
    assert body["metadata"]["ownerReferences"][0]["controller"] is True
    # The payload's content, in the bytes Go re-encodes a decoded object to (sorted keys,
    # HTML-safe strings), so the collector's merge patch finds data unchanged.
    assert orjson.loads(orjson.dumps(body["data"])) == orjson.loads(PAYLOAD)
    assert orjson.dumps(body["data"]) == orjson.dumps(
        orjson.loads(PAYLOAD), option=orjson.OPT_SORT_KEYS
    )
    assert body["revision"] == 1
    kinds = [type(a).__name__ for a in decided.actions]
    assert kinds.index("CreateControllerRevision") < kinds.index("CreatePods")
    pod = decided.of_type(CreatePods)[0].pods[0].body
    assert pod["metadata"]["labels"]["ome.io/revision-hash"] == UPSTREAM[-8:]
    assert pod["metadata"]["labels"]["app"] == "chat"


def test_a_recorded_revision_is_not_created_again() -> None:
    target, observed = observe(irep(), [], revisions=[record(UPSTREAM, 1)])
    decided = plan(target=target, observed=observed, settings=PlanSettings(), now=NOW)
    assert not decided.of_type(CreateControllerRevision)


def test_retention_keeps_the_limit_of_unused_revisions_newest_first() -> None:
    old = [record(f"chat-engine-{i:08x}", i) for i in range(1, 6)]
    records = [*old, record(UPSTREAM, 6)]
    target, observed = observe(irep(revisionHistoryLimit=2), [], revisions=records)
    decided = plan(target=target, observed=observed, settings=PlanSettings(), now=NOW)
    deleted = {d.name for d in decided.of_type(DeleteControllerRevision)}
    assert deleted == {"chat-engine-00000001", "chat-engine-00000002", "chat-engine-00000003"}


def test_retention_never_deletes_a_revision_in_use_nor_anothers() -> None:
    running = "chat-engine-00000001"
    status = {
        "instanceStatuses": [
            {
                "index": 0,
                "incarnation": 1,
                "phase": "Ready",
                "runningRevision": running,
                "targetRevision": running,
            }
        ]
    }
    records = [
        record(running, 1),
        record("chat-engine-00000002", 2, owner="someone-else"),
        record(UPSTREAM, 3),
    ]
    target, observed = observe(irep(status=status, revisionHistoryLimit=0), [], revisions=records)
    decided = plan(target=target, observed=observed, settings=PlanSettings(), now=NOW)
    assert not decided.of_type(DeleteControllerRevision)


def test_a_name_held_by_another_object_bumps_the_collision_count() -> None:
    foreign = record(UPSTREAM, 1, owner="another-replica")
    target, observed = observe(irep(), [], revisions=[foreign])
    assert target.collision_count == 1
    assert (
        target.update_revision
        == f"chat-engine-{payload_hash(PAYLOAD, collision_count=1, owner_uid='irep-uid')}"
    )
    decided = plan(target=target, observed=observed, settings=PlanSettings(), now=NOW)
    assert decided.status.collision_count == 1
    # The stored count keeps the name where it is on the next pass.
    again = replica_target(irep(status={"collisionCount": 1}))
    assert again.update_revision == target.update_revision


def test_a_name_holding_other_data_is_a_collision_too() -> None:
    stale = record(UPSTREAM, 1, data={"podSpec": {}, "podMeta": None})
    assert (
        replica_target(
            irep(), None, observe(irep(), [], revisions=[stale])[1].revisions
        ).collision_count
        == 1
    )


def test_pods_and_rows_of_the_legacy_name_are_adopted_without_a_rollout() -> None:
    status = {
        "currentRevision": LEGACY,
        "updateRevision": LEGACY,
        "instanceStatuses": [
            {
                "index": 0,
                "incarnation": 1,
                "phase": "Ready",
                "runningRevision": LEGACY,
                "targetRevision": LEGACY,
                "podCount": 1,
                "servingPodCount": 1,
                "availablePodCount": 1,
                "readySince": "2026-09-14T19:00:00Z",
            }
        ],
    }
    target, observed = observe(irep(status=status), [legacy_pod()])
    assert observed.pods[0][0].revision == UPSTREAM
    assert observed.pods[0][0].incarnation == 1
    assert observed.rows[0].running_revision == UPSTREAM
    decided = plan(target=target, observed=observed, settings=PlanSettings(), now=NOW)
    assert not decided.of_type(CreatePods)
    assert all(type(a).__name__ not in ("DeletePods", "PatchPodImages") for a in decided.actions)
    assert decided.status.current_revision == UPSTREAM
    assert decided.rows[0].running_revision == UPSTREAM
    assert decided.rows[0].operation is None


def test_a_pod_of_an_older_legacy_revision_is_still_updated() -> None:
    other = copy.deepcopy(TEMPLATE)
    other["spec"]["containers"][0]["image"] = "example/sglang:v0.4.8"
    older = f"chat-engine-{legacy_template_hash(other)}"
    target, observed = observe(irep(), [legacy_pod(revision=older)])
    assert observed.pods[0][0].revision == older != target.update_revision


def test_a_held_block_of_the_legacy_name_is_read_as_the_update_revision() -> None:
    status = {
        "retryBlocks": [
            {
                "targetRevision": LEGACY,
                "state": "Held",
                "attemptsStarted": 3,
                "firstFailureAt": "2026-09-14T19:00:00Z",
                "lastFailureAt": "2026-09-14T19:10:00Z",
                "reason": "ImagePullBackOff",
            }
        ]
    }
    _, observed = observe(irep(status=status), [], revisions=[])
    assert observed.status.retry_blocks is not None
    assert observed.status.retry_blocks[0].target_revision == UPSTREAM


def test_an_orphaned_record_of_the_payload_keeps_its_name_and_is_adopted() -> None:
    # An earlier replica of the name, deleted with propagationPolicy Orphan, left its record
    # (its hash scoped to that replica's uid) and its pods: the new replica takes the name
    # over instead of rolling the pods to a name of its own uid.
    earlier = "chat-engine-0badc0de"
    orphan = record(earlier, 3)
    del orphan["metadata"]["ownerReferences"]
    orphan["metadata"]["resourceVersion"] = "77"
    target, observed = observe(irep(), [], revisions=[orphan])
    assert target.update_revision == earlier
    decided = plan(target=target, observed=observed, settings=PlanSettings(), now=NOW)
    (adopted,) = decided.of_type(AdoptControllerRevision)
    assert (adopted.name, adopted.uid, adopted.resource_version) == (earlier, f"cr-{earlier}", "77")
    assert not decided.of_type(CreateControllerRevision)

    # Once adopted, the record still names the update revision, and nothing more is written.
    owned = record(earlier, 3)
    target, observed = observe(irep(), [], revisions=[owned])
    assert target.update_revision == earlier
    decided = plan(target=target, observed=observed, settings=PlanSettings(), now=NOW)
    assert not decided.of_type(AdoptControllerRevision)
    assert not decided.of_type(CreateControllerRevision)

    # Another controller's record of the same payload is not taken.
    foreign = record(earlier, 3, owner="someone-else")
    assert observe(irep(), [], revisions=[foreign])[0].update_revision == UPSTREAM
