"""Stuck pods and lost nodes under the chart's manager (its ServiceAccount, RBAC, arguments and
ConfigMap), on the real control plane with the node simulator.

One InferenceService, two one-pod Instances on two nodes (8 GPUs each, one pod a node), pods
with a 1 s grace period; ``lifecycle.forceDelete`` 2s/4s and ``teardown.deadline`` 20s.

1. The node of Instance 1 loses its kubelet (NotReady, tainted unreachable) and the engine
   scales to 1: the pod deleted there stays Terminating until the escalation force-deletes
   it, not before its deletion time plus the slack; the scale-down finishes with exactly the
   wanted pod; a Warning PodForceDeleted names it and the audit ledger has its ForceDelete row.
2. The engine scales to 0 while the kubelet of the last node ignores deletions (a healthy,
   Ready node): its pod is never force-deleted, well past slack and threshold.
3. The InferenceService is deleted while that pod still can't terminate: TeardownBlocked names
   it, the teardown deadline lifts the replica's finalizer with TeardownDeadlineExceeded
   naming it, the InferenceService goes, and the pod is all that is left.

And a teardown planned from the pods alone (the replica's status damaged, so omed can't read
it), with ``forceDelete`` unset and a wave of both Instances: the pod of Instance 0 carries a
finalizer of its own, the node of Instance 1 is gone under its pod. Neither pod is
force-deleted; TeardownBlocked says why each is stuck; at the deadline the replica's finalizer
is lifted with TeardownDeadlineExceeded naming the held pod.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

import _support as support
import pytest
from _support import eventually

from omed.clock import parse_rfc3339
from omed.controllers.inferencereplica.core import names
from omed.kube.client import KubeClient
from omed.kube.errors import Conflict, NotFound
from omed.kube.resources import (
    CONFIGMAPS,
    EVENTS,
    INFERENCE_REPLICAS,
    INFERENCE_SERVICES,
    PODS,
)
from omed.statuscodec import COLUMNAR_V2, REASON_DECODE_FAILED, decode_status, encode_columnar

pytestmark = [pytest.mark.integration, pytest.mark.slow]

SERVICE = "chat"
ENGINE = f"{SERVICE}-engine"
SLACK, THRESHOLD, DEADLINE = 2.0, 4.0, 20.0
RUNTIME = support.serving_runtime(
    "srt-engine",
    engineConfig={
        "runner": {
            "name": "ome-container",
            "image": "ome/srt:1.0",
            "resources": {"limits": {"nvidia.com/gpu": "8"}},
        },
    },
)


@pytest.fixture
async def world(
    kube: KubeClient, namespace: str, managers: Any, manager_config: Any
) -> AsyncIterator[support.ManagerWorld]:
    await manager_config(
        lifecycle={
            **support.lifecycle(scale_up_pod_batch_size=10),
            "forceDelete": {"overdueSlack": "2s", "nodeUnreachableThreshold": "4s"},
            "teardown": {"deadline": "20s"},
        }
    )
    world = support.ManagerWorld(kube=kube, namespace=namespace, managers=managers)
    async with world.running(nodes=2):
        yield world


@pytest.fixture
async def unforced_world(
    kube: KubeClient, namespace: str, managers: Any, manager_config: Any
) -> AsyncIterator[support.ManagerWorld]:
    """No ``forceDelete``, ``teardown.deadline`` 20s, and scale-down waves of two pods."""
    await manager_config(
        lifecycle={
            **support.lifecycle(scale_up_pod_batch_size=10),
            "scaleDownPodBatchSize": 2,
            "teardown": {"deadline": "20s"},
        }
    )
    world = support.ManagerWorld(kube=kube, namespace=namespace, managers=managers)
    async with world.running(nodes=2):
        yield world


async def rows(world: support.ManagerWorld) -> list[dict[str, Any]]:
    try:
        irep = await world.kube.get(INFERENCE_REPLICAS, ENGINE, world.namespace)
    except NotFound:
        return []
    return decode_status(irep.get("status") or {}, max_rows=100)


async def converged(world: support.ManagerWorld, wanted: int) -> bool:
    world.check_manager()
    found = await rows(world)
    live = [p for p in await world.pods() if not p["metadata"].get("deletionTimestamp")]
    return (
        len(found) == wanted
        and all(r.get("phase") == "Ready" and not r.get("operation") for r in found)
        and len(await world.pods()) == wanted == len(live)
    )


async def events(world: support.ManagerWorld, reason: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = await world.kube.list_all(
        EVENTS, world.namespace, fieldSelector=f"reason={reason}"
    )
    return found


def pod_named(pods: list[dict[str, Any]], index: int) -> dict[str, Any]:
    return next(p for p in pods if p["metadata"]["labels"]["ome.io/instance-index"] == str(index))


async def test_a_lost_node_a_wedged_kubelet_and_a_teardown_past_its_deadline(
    world: support.ManagerWorld,
) -> None:
    sim = world.simulator
    assert sim is not None
    await world.start_manager("manager-a")
    engine = {"minReplicas": 2, "maxReplicas": 2, "terminationGracePeriodSeconds": 1}
    service = support.inference_service(SERVICE, runtime="srt-engine", engine=engine)
    await world.create_service(RUNTIME, service)
    await eventually(lambda: converged(world, 2), timeout=120, what="2 Ready Instances")
    pods = await world.pods()
    lost_pod, kept_pod = pod_named(pods, 1), pod_named(pods, 0)
    lost_node, kept_node = lost_pod["spec"]["nodeName"], kept_pod["spec"]["nodeName"]
    assert lost_node != kept_node

    # 1. A node lost mid scale-down.
    await sim.set_node_ready(lost_node, False)
    await world.patch_service(SERVICE, {"spec": {"engine": {"minReplicas": 1, "maxReplicas": 1}}})

    async def deleted() -> str | None:
        for pod in await world.pods():
            if pod["metadata"]["uid"] == lost_pod["metadata"]["uid"]:
                stamp: str | None = pod["metadata"].get("deletionTimestamp")
                return stamp
        return None

    await eventually(lambda: _truthy(deleted()), timeout=60, what="the lost pod deleted")
    deletion = parse_rfc3339(str(await deleted()))
    await eventually(lambda: converged(world, 1), timeout=90, what="the scale-down done")
    assert [p["metadata"]["uid"] for p in await world.pods()] == [kept_pod["metadata"]["uid"]]
    (forced,) = await events(world, names.EVENT_POD_FORCE_DELETED)
    name = lost_pod["metadata"]["name"]
    assert forced["type"] == "Warning"
    assert forced["involvedObject"]["kind"] == "InferenceService"
    assert forced["message"].startswith(f"force-deleted pod {name} (Instance 1 of engine): ")
    assert (
        f"on node {lost_node}, which is tainted node.kubernetes.io/unreachable" in forced["message"]
    )
    when = parse_rfc3339(forced.get("firstTimestamp") or forced["eventTime"])
    assert (when - deletion).total_seconds() >= SLACK - 1  # second-precision stamps
    ledger = await world.kube.get(CONFIGMAPS, f"{SERVICE}-ome-migration-audit", world.namespace)
    assert ledger["metadata"]["labels"] == {"ome.io/managed-by": "OMENative"}
    (owner,) = ledger["metadata"]["ownerReferences"]
    isvc = await world.kube.get(INFERENCE_SERVICES, SERVICE, world.namespace)
    assert (owner["kind"], owner["uid"], owner["controller"]) == (
        "InferenceService",
        isvc["metadata"]["uid"],
        True,
    )
    (row,) = json.loads(ledger["data"]["history.json"])["entries"]
    assert row["requestUUID"] == lost_pod["metadata"]["uid"]
    assert (row["reason"], row["phase"], row["outcome"]) == (
        "ForceDelete",
        "Completed",
        "force-delete-unreachable",
    )
    assert (row["component"], row["sourceInstance"], row["fromNode"]) == ("engine", 1, lost_node)

    # 2. A healthy node whose kubelet doesn't act on the deletion: never force-deleted.
    sim.ignore_deletions(kept_node)
    await world.patch_service(
        SERVICE, {"spec": {"engine": {"minReplicas": 0, "maxReplicas": None}}}
    )

    async def kept_deleted() -> bool:
        pods = await world.pods()
        return bool(pods) and bool(pods[0]["metadata"].get("deletionTimestamp"))

    await eventually(kept_deleted, timeout=60, what="the last pod deleted")
    await asyncio.sleep(1 + SLACK + THRESHOLD + 4)
    assert [p["metadata"]["uid"] for p in await world.pods()] == [kept_pod["metadata"]["uid"]]
    assert len(await events(world, names.EVENT_POD_FORCE_DELETED)) == 1

    # 3. The InferenceService deleted while that pod can't terminate.
    await world.kube.delete(INFERENCE_SERVICES, SERVICE, world.namespace)

    async def service_gone() -> bool:
        world.check_manager()
        try:
            await world.kube.get(INFERENCE_SERVICES, SERVICE, world.namespace)
        except NotFound:
            return True
        return False

    await eventually(service_gone, timeout=DEADLINE + 60, what="the InferenceService gone")
    (blocked,) = await events(world, names.EVENT_TEARDOWN_BLOCKED)
    kept_name = kept_pod["metadata"]["name"]
    assert f"{kept_name} (on node {kept_node}, whose kubelet hasn't confirmed" in blocked["message"]
    (exceeded,) = await events(world, names.EVENT_TEARDOWN_DEADLINE)
    assert "within teardown.deadline (20s)" in exceeded["message"]
    assert exceeded["message"].endswith(f"pods left: {kept_name}")
    with pytest.raises(NotFound):
        await world.kube.get(INFERENCE_REPLICAS, ENGINE, world.namespace)
    left = await world.pods()
    assert [p["metadata"]["name"] for p in left] == [kept_name]  # what the event names
    sim.ignore_deletions(kept_node, False)
    await eventually(
        lambda: _none_left(world), timeout=30, what="the pod gone once its kubelet acts"
    )


HOLD = "example.com/hold"


async def test_an_unreadable_replica_past_its_deadline_with_a_held_pod_and_a_gone_node(
    unforced_world: support.ManagerWorld,
) -> None:
    world = unforced_world
    sim = world.simulator
    assert sim is not None
    await world.start_manager("manager-a")
    engine = {"minReplicas": 2, "maxReplicas": 2, "terminationGracePeriodSeconds": 1}
    service = support.inference_service(SERVICE, runtime="srt-engine", engine=engine)
    await world.create_service(RUNTIME, service)
    await eventually(lambda: converged(world, 2), timeout=120, what="2 Ready Instances")
    pods = await world.pods()
    held, lost = pod_named(pods, 0), pod_named(pods, 1)
    held_name, lost_name = held["metadata"]["name"], lost["metadata"]["name"]
    lost_node = lost["spec"]["nodeName"]
    await world.kube.patch(PODS, held_name, {"metadata": {"finalizers": [HOLD]}}, world.namespace)

    async def damaged() -> bool:
        """The rows as damaged columns, which no manager setting reads (False: a write of the
        manager's came first)."""
        irep = await world.kube.get(INFERENCE_REPLICAS, ENGINE, world.namespace)
        status = dict(irep["status"])
        columns = encode_columnar(decode_status(status, max_rows=100))
        status.pop("instanceStatuses", None)
        status["instanceStatusEncoding"] = COLUMNAR_V2
        status["instanceStatusColumns"] = {**columns, "index": "0"}
        try:
            await world.kube.replace_status(
                INFERENCE_REPLICAS, {**irep, "status": status}, world.namespace
            )
        except Conflict:
            return False
        return True

    await eventually(damaged, timeout=30, what="the status damaged")

    async def unreadable() -> bool:
        world.check_manager()
        return bool(await events(world, REASON_DECODE_FAILED))

    await eventually(unreadable, timeout=60, what="the status reported undecodable")

    # The node's kubelet stops (the pod's Ready turns False), then the node goes from under
    # the pod, which keeps its last status.
    await sim.set_node_ready(lost_node, False)

    async def lost_not_ready() -> bool:
        pod = await world.kube.get(PODS, lost_name, world.namespace)
        conditions = (pod.get("status") or {}).get("conditions") or ()
        return any(c["type"] == "Ready" and c["status"] == "False" for c in conditions)

    await eventually(lost_not_ready, timeout=30, what="the lost pod not Ready")
    await sim.remove_node(lost_node, collect_pods=False)
    await world.kube.delete(INFERENCE_SERVICES, SERVICE, world.namespace)

    async def replica_gone() -> bool:
        world.check_manager()
        try:
            await world.kube.get(INFERENCE_REPLICAS, ENGINE, world.namespace)
        except NotFound:
            return True
        return False

    # The pod GC force-deletes a gone node's pods after its 40 s quarantine: the deadline
    # (20 s after the deletion) comes first.
    await eventually(replica_gone, timeout=DEADLINE + 60, what="the replica's finalizer lifted")
    assert await events(world, names.EVENT_POD_FORCE_DELETED) == []
    blocked = " ".join(e["message"] for e in await events(world, names.EVENT_TEARDOWN_BLOCKED))
    assert f"{held_name} (finalizers {HOLD})" in blocked
    assert (
        f"{lost_name} (on node {lost_node}, which is gone, and lifecycle.forceDelete is not set)"
        in blocked
    )
    (exceeded,) = await events(world, names.EVENT_TEARDOWN_DEADLINE)
    assert exceeded["involvedObject"]["kind"] == "InferenceService"
    assert "within teardown.deadline (20s)" in exceeded["message"]
    assert "pods left: " in exceeded["message"] and held_name in exceeded["message"]
    left = {p["metadata"]["name"]: p for p in await world.pods()}
    assert held_name in left and left[held_name]["metadata"].get("deletionTimestamp")

    await world.kube.patch(PODS, held_name, {"metadata": {"finalizers": None}}, world.namespace)
    with contextlib.suppress(NotFound):
        await world.kube.delete(PODS, lost_name, world.namespace, grace_period_seconds=0)
    await eventually(lambda: _none_left(world), timeout=30, what="the pods gone")


async def _truthy(value: Any) -> bool:
    return bool(await value)


async def _none_left(world: support.ManagerWorld) -> bool:
    return not await world.pods()
