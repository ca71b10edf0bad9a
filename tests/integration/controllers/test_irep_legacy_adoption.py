"""A manager upgraded to upstream's revision names adopts what the previous omed left running.

The previous omed named revisions by the SHA-256 of the template's canonical JSON and labelled
pods ``ome.io/incarnation`` and ``ome.io/revision``. Here its pods and status are written as it
wrote them (against the real API server, the node simulator running the pods), then the new
controller takes over: no pod is deleted or created again, the rows move to the new name, and
the update revision's ControllerRevision is recorded.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from test_inferencereplica import TEMPLATE, Cluster, cluster, eventually, irep_body, ready

from omed.api.revision import legacy_template_hash
from omed.clock import rfc3339
from omed.kube.client import STRATEGIC_MERGE_PATCH, KubeClient
from omed.kube.resources import CONTROLLER_REVISIONS, INFERENCE_REPLICAS, PODS

pytestmark = pytest.mark.integration
__all__ = ["cluster"]

LEGACY = f"chat-engine-engine-{legacy_template_hash(TEMPLATE)}"


def legacy_pod(index: int, *, uid: str) -> dict[str, Any]:
    """A pod as the previous omed rendered it."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"chat-engine-{index}-default-0",
            "labels": {
                "app": "chat",
                "ome.io/inferenceservice": "chat-engine",
                "component": "engine",
                "ome.io/instance-index": str(index),
                "ome.io/incarnation": "1",
                "ome.io/revision": LEGACY,
            },
            "annotations": {"ome.io/operation-id": f"create-{index}-1-legacy"},
            "ownerReferences": [
                {
                    "apiVersion": "ome.io/v1beta1",
                    "kind": "InferenceReplica",
                    "name": "chat-engine",
                    "uid": uid,
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": {
            **TEMPLATE["spec"],
            "readinessGates": [{"conditionType": "ome.io/serving"}],
        },
    }


async def test_pods_and_rows_of_the_previous_names_are_adopted_without_a_rollout(
    cluster: Cluster, kube: KubeClient
) -> None:
    ns = cluster.namespace
    body = irep_body("chat-engine", replicas=2)
    body["metadata"]["finalizers"] = ["ome.io/inferencereplica-cleanup"]
    irep = await cluster.create(body)
    uid = irep["metadata"]["uid"]
    for index in range(2):
        await kube.create(PODS, legacy_pod(index, uid=uid), ns)

    async def running() -> bool:
        pods = await cluster.pods()
        return len(pods) == 2 and all(
            (p.get("status") or {}).get("phase") == "Running" for p in pods
        )

    await eventually(running, what="the simulator runs both pods")
    now = rfc3339(dt.datetime.now(dt.UTC))
    for index in range(2):
        gate = {
            "status": {
                "conditions": [
                    {
                        "type": "ome.io/serving",
                        "status": "True",
                        "reason": "InstanceReady",
                        "message": "",
                        "lastTransitionTime": now,
                    }
                ]
            }
        }
        await kube.patch(
            PODS, f"chat-engine-{index}-default-0", gate, ns,
            content_type=STRATEGIC_MERGE_PATCH, subresource="status",
        )  # fmt: skip

    async def all_ready() -> bool:
        return all(ready(p) for p in await cluster.pods())

    await eventually(all_ready, what="both legacy pods Ready")
    irep = await cluster.get("chat-engine")
    irep["status"] = {
        "observedGeneration": irep["metadata"]["generation"],
        "replicas": 2,
        "readyReplicas": 2,
        "servingReplicas": 2,
        "availableReplicas": 2,
        "updatedReplicas": 2,
        "currentRevision": LEGACY,
        "updateRevision": LEGACY,
        "labelSelector": "ome.io/inferenceservice=chat-engine,component=engine",
        "instanceStatuses": [
            {
                "index": i,
                "incarnation": 1,
                "phase": "Ready",
                "runningRevision": LEGACY,
                "targetRevision": LEGACY,
                "podCount": 1,
                "servingPodCount": 1,
                "availablePodCount": 1,
                "readySince": now,
            }
            for i in range(2)
        ],
    }
    await kube.replace_status(INFERENCE_REPLICAS, irep, ns)
    before = {p["metadata"]["name"]: p["metadata"]["uid"] for p in await cluster.pods()}

    await cluster.controller()

    async def adopted() -> bool:
        status = (await cluster.get("chat-engine")).get("status") or {}
        rows = status.get("instanceStatuses") or []
        update = status.get("updateRevision") or ""
        return (
            update != LEGACY
            and update.startswith("chat-engine-engine-")
            and status.get("currentRevision") == update
            and status.get("updatedReplicas") == 2
            and len(rows) == 2
            and all(r.get("runningRevision") == update and not r.get("operation") for r in rows)
        )

    await eventually(adopted, what="the rows on the new revision name, nothing in flight")
    status = (await cluster.get("chat-engine"))["status"]
    records = await kube.list_all(CONTROLLER_REVISIONS, ns)
    assert [r["metadata"]["name"] for r in records] == [status["updateRevision"]]
    assert records[0]["metadata"]["labels"]["ome.io/managed-by"] == "OMENative"
    after = {p["metadata"]["name"]: p["metadata"]["uid"] for p in await cluster.pods()}
    assert after == before
    assert cluster.watch.deleted == set()
    assert {n: u for n, u in cluster.watch.uids.items() if len(u) > 1} == {}
