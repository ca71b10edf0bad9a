"""The manager as the charts deploy it, in a cluster with a real scheduler and controllers.

The manager runs under the chart's ServiceAccount, arguments and ConfigMap (the e2e
conftest's ``managers`` fixture); kube-scheduler places the pods it makes, the garbage
collector and the namespace controller of kube-controller-manager delete what it owns, and
the node simulator plays each node's kubelet. What an operator sees:

* deleting an InferenceService removes its InferenceReplicas and pods, through omed's
  finalizers and the garbage collector, and leaves no finalizer behind;
* deleting the namespace of a serving InferenceService completes within
  :data:`NAMESPACE_DELETION_BOUND` seconds;
* the scheduler places a leader and its workers, and honours the node selector and the pod
  anti-affinity a component carries into its pods;
* a pod that no node can take stays Pending as ``Unschedulable`` while the simulated GPUs
  are taken, and is bound and Ready once a node is added.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import _support as support
import pytest
from _support import condition, eventually, pod_ready

from omed.api.constants import LABEL_COMPONENT
from omed.kube.client import KubeClient
from omed.kube.errors import NotFound
from omed.kube.resources import (
    EVENTS,
    INFERENCE_REPLICAS,
    INFERENCE_SERVICES,
    NAMESPACES,
    NODES,
    PODS,
)
from omed_devcluster.simulator import NodeSimulator

pytestmark = [pytest.mark.integration, pytest.mark.slow]

NAMESPACE_DELETION_BOUND = 60.0
"""Seconds from the namespace's DELETE until it is gone, with an InferenceService of three
Instances (five pods) serving in it: the namespace controller deletes the InferenceService,
omed drains and deletes its pods (each terminating in the simulated kubelet's time) and lifts
its finalizers, then the namespace controller finishes. Measured at about 16 s on 2 cores; the
bound leaves room for a loaded CI machine."""

GPU_RUNTIME = support.serving_runtime(
    "srt-gpu",
    engineConfig={
        "runner": {
            "name": "ome-container",
            "image": "ome/srt:1.0",
            "resources": {"limits": {"nvidia.com/gpu": "4"}},
        },
    },
    decoderConfig={
        "leader": {"runner": {"name": "ome-container", "image": "ome/srt:1.0"}},
        "worker": {"size": 2, "runner": {"name": "ome-container", "image": "ome/srt:1.0"}},
    },
)


@asynccontextmanager
async def simulated_nodes(
    kube: KubeClient, namespace: str, *, nodes: int, **options: Any
) -> AsyncIterator[NodeSimulator]:
    simulator = NodeSimulator(
        kube, nodes=nodes, namespaces=[namespace], node_prefix=f"{namespace}-n", **options
    )
    await simulator.start()
    try:
        yield simulator
    finally:
        await simulator.stop()


async def pods_of(kube: KubeClient, namespace: str, component: str) -> list[dict[str, Any]]:
    return [
        p
        for p in await kube.list_all(PODS, namespace)
        if (p["metadata"].get("labels") or {}).get(LABEL_COMPONENT) == component
    ]


async def ready_pods(kube: KubeClient, namespace: str, component: str, count: int) -> bool:
    pods = await pods_of(kube, namespace, component)
    return len(pods) == count and all(pod_ready(p) for p in pods)


async def gone(kube: KubeClient, resource: Any, name: str, namespace: str | None) -> bool:
    try:
        await kube.get(resource, name, namespace)
    except NotFound:
        return True
    return False


async def serving(world: support.ManagerWorld) -> None:
    """Start a manager and serve ``chat``: an engine of two 4-GPU Instances and a decoder of
    one leader with two workers, every pod Ready."""
    await world.start_manager("manager-a")
    service = support.inference_service(
        "chat",
        runtime="srt-gpu",
        engine={"minReplicas": 2, "maxReplicas": 2},
        decoder={"minReplicas": 1, "maxReplicas": 1},
    )
    await world.create_service(GPU_RUNTIME, service)
    kube, namespace = world.kube, world.namespace
    await eventually(
        lambda: ready_pods(kube, namespace, "engine", 2), timeout=90, what="2 engine pods"
    )
    await eventually(
        lambda: ready_pods(kube, namespace, "decoder", 3), timeout=90, what="3 decoder pods"
    )


async def test_deleting_the_service_leaves_nothing_and_no_finalizer(
    kube: KubeClient, namespace: str, managers: Any, manager_config: Any
) -> None:
    world = support.ManagerWorld(kube=kube, namespace=namespace, managers=managers)
    async with world.running(nodes=2):
        await serving(world)
        replicas = await kube.list_all(INFERENCE_REPLICAS, namespace)
        isvc = await kube.get(INFERENCE_SERVICES, "chat", namespace)
        # Owned as the garbage collector follows it: pod -> InferenceReplica -> service.
        for replica in replicas:
            [owner] = replica["metadata"]["ownerReferences"]
            assert owner["uid"] == isvc["metadata"]["uid"] and owner["controller"] is True
        uids = {r["metadata"]["uid"] for r in replicas}
        for pod in await kube.list_all(PODS, namespace):
            [owner] = pod["metadata"]["ownerReferences"]
            assert owner["uid"] in uids and owner["kind"] == "InferenceReplica"

        await kube.delete(INFERENCE_SERVICES, "chat", namespace)

        async def nothing_left() -> bool:
            return (
                await gone(kube, INFERENCE_SERVICES, "chat", namespace)
                and not await kube.list_all(INFERENCE_REPLICAS, namespace)
                and not await kube.list_all(PODS, namespace)
            )

        await eventually(nothing_left, timeout=90, what="the service, replicas and pods gone")
        world.check_manager()


async def test_deleting_the_namespace_of_a_serving_service_completes_within_the_bound(
    kube: KubeClient, managers: Any, manager_config: Any
) -> None:
    namespace = f"t-{uuid.uuid4().hex[:10]}"
    await kube.create(NAMESPACES, {"metadata": {"name": namespace}})
    try:
        world = support.ManagerWorld(kube=kube, namespace=namespace, managers=managers)
        async with world.running(nodes=2):
            await serving(world)
            started = time.monotonic()
            await kube.delete(NAMESPACES, namespace)
            await eventually(
                lambda: gone(kube, NAMESPACES, namespace, None),
                timeout=NAMESPACE_DELETION_BOUND,
                what=f"namespace {namespace} deleted",
                interval=0.25,
            )
            took = time.monotonic() - started
            world.check_manager()
        print(f"namespace deletion took {took:.1f}s")  # shown with -s; the bound is the check
    finally:
        if not await gone(kube, NAMESPACES, namespace, None):
            await kube.delete(NAMESPACES, namespace)


async def test_the_scheduler_places_leaders_workers_by_selector_and_anti_affinity(
    kube: KubeClient, namespace: str, managers: Any, manager_config: Any
) -> None:
    world = support.ManagerWorld(kube=kube, namespace=namespace, managers=managers)
    spread = {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {
                    "labelSelector": {"matchLabels": {LABEL_COMPONENT: "engine"}},
                    "topologyKey": "kubernetes.io/hostname",
                }
            ]
        }
    }
    async with simulated_nodes(kube, namespace, nodes=2, gpus_per_node=8) as simulator:
        labelled = [await simulator.add_node(labels={"gpu.example/pool": "h100"}) for _ in range(3)]
        await world.start_manager("manager-a")
        try:
            service = support.inference_service(
                "chat",
                runtime="srt-gpu",
                engine={
                    "minReplicas": 3,
                    "maxReplicas": 3,
                    "nodeSelector": {"gpu.example/pool": "h100"},
                    "affinity": spread,
                },
                decoder={"minReplicas": 2, "maxReplicas": 2},
            )
            await world.create_service(GPU_RUNTIME, service)
            await eventually(
                lambda: ready_pods(kube, namespace, "engine", 3), timeout=90, what="engine"
            )
            await eventually(
                lambda: ready_pods(kube, namespace, "decoder", 6), timeout=90, what="decoder"
            )
            engine = await pods_of(kube, namespace, "engine")
            for pod in engine:
                assert pod["spec"]["nodeSelector"] == {"gpu.example/pool": "h100"}
                assert pod["spec"]["affinity"] == spread
            nodes = [p["spec"]["nodeName"] for p in engine]
            assert sorted(nodes) == sorted(labelled), nodes  # one a node, only labelled ones
            decoder = await pods_of(kube, namespace, "decoder")
            assert all(p["spec"].get("nodeName") for p in decoder)
            # The scheduler bound them: each pod's PodScheduled condition is its own.
            for pod in engine + decoder:
                assert condition(pod, "PodScheduled") == "True"
        finally:
            managers.stop_all()


async def test_a_pod_past_the_gpus_is_unschedulable_until_a_node_is_added(
    kube: KubeClient, namespace: str, managers: Any, manager_config: Any
) -> None:
    world = support.ManagerWorld(kube=kube, namespace=namespace, managers=managers)
    async with simulated_nodes(kube, namespace, nodes=1, gpus_per_node=8) as simulator:
        await world.start_manager("manager-a")
        try:
            service = support.inference_service(
                "chat", runtime="srt-gpu", engine={"minReplicas": 3, "maxReplicas": 3}
            )
            await world.create_service(GPU_RUNTIME, service)

            async def one_unschedulable() -> dict[str, Any] | None:
                pods = await pods_of(kube, namespace, "engine")
                pending = [p for p in pods if not p["spec"].get("nodeName")]
                bound = [p for p in pods if p["spec"].get("nodeName") and pod_ready(p)]
                if len(pods) != 3 or len(bound) != 2 or len(pending) != 1:
                    return None
                for item in (pending[0].get("status") or {}).get("conditions") or ():
                    if item.get("type") == "PodScheduled" and item.get("reason") == (
                        "Unschedulable"
                    ):
                        return pending[0]
                return None

            pending = await eventually(
                one_unschedulable, timeout=90, what="two 4-GPU pods Ready, one Unschedulable"
            )
            message = next(
                c["message"] for c in pending["status"]["conditions"] if c["type"] == "PodScheduled"
            )
            assert "Insufficient nvidia.com/gpu" in message, message
            added = await simulator.add_node()
            await eventually(
                lambda: ready_pods(kube, namespace, "engine", 3), timeout=60, what="3 engine"
            )
            bound = await kube.get(PODS, pending["metadata"]["name"], namespace)
            assert bound["metadata"]["uid"] == pending["metadata"]["uid"]  # the same pod
            assert bound["spec"]["nodeName"] == added
            assert (await kube.get(NODES, added))["metadata"]["name"] == added
        finally:
            managers.stop_all()


ENGINE_RUNTIME = support.serving_runtime(
    "srt-one-gpu",
    engineConfig={
        "runner": {
            "name": "ome-container",
            "image": "ome/srt:1.0",
            "resources": {"limits": {"nvidia.com/gpu": "1"}},
        },
    },
)


def without_pod_patch(role: dict[str, Any]) -> dict[str, Any]:
    """The ClusterRole as a chart without ``patch`` on pods would have it."""
    for rule in role["rules"]:
        if rule.get("apiGroups") == [""] and rule.get("resources") == ["pods"]:
            rule["verbs"] = [verb for verb in rule["verbs"] if verb != "patch"]
    return role


async def test_a_refused_write_is_a_warning_event_and_a_condition_until_it_is_allowed(
    kube: KubeClient, namespace: str, managers: Any, manager_config: Any
) -> None:
    """The chart's ClusterRole without ``patch pods`` (as an older chart had it): the
    InPlaceIfPossible update's pod patch is refused with 403, which the InferenceReplica
    shows as a Warning WriteRefused event and a WriteRefused condition naming the verb and
    resource; with the permission back, the update completes and the condition goes."""
    path = "/apis/rbac.authorization.k8s.io/v1/clusterroles/ome-manager-role"
    install = managers.install
    plane = install.plane
    world = support.ManagerWorld(kube=kube, namespace=namespace, managers=managers)
    async with world.running(nodes=1):
        await world.start_manager("manager-a")
        service = support.inference_service(
            "chat",
            runtime="srt-one-gpu",
            engine={
                "minReplicas": 2,
                "maxReplicas": 2,
                "lifecycle": {"updateStrategy": {"type": "InPlaceIfPossible"}},
            },
        )
        await world.create_service(ENGINE_RUNTIME, service)
        await eventually(
            lambda: ready_pods(kube, namespace, "engine", 2), timeout=90, what="2 engine pods"
        )
        before = {p["metadata"]["uid"] for p in await pods_of(kube, namespace, "engine")}
        plane.request_json("PUT", path, without_pod_patch(plane.request_json("GET", path)))
        await eventually(
            lambda: review_denied(plane, install.user, namespace),
            timeout=30,
            what="the RBAC authorizer to see the narrower role",
        )
        await world.patch_service(
            "chat", {"spec": {"engine": {"runner": {"image": "ome/srt:2.0"}}}}
        )

        async def refused() -> tuple[dict[str, Any], dict[str, Any]] | None:
            replica = await kube.get(INFERENCE_REPLICAS, "chat-engine", namespace)
            conditions = (replica.get("status") or {}).get("conditions") or []
            found = [c for c in conditions if c.get("type") == "WriteRefused"]
            events = [
                e
                for e in await kube.list_all(EVENTS, namespace)
                if e.get("reason") == "WriteRefused"
                and e["involvedObject"].get("name") == "chat-engine"
            ]
            return (found[0], events[0]) if found and events else None

        refusal, event = await eventually(refused, timeout=60, what="WriteRefused shown")
        assert refusal["status"] == "True" and refusal["reason"] == "Forbidden", refusal
        for message in (refusal["message"], event["message"]):
            assert message.startswith('patch pods "chat-engine-'), message
            assert "refused by the API server (403 Forbidden)" in message, message
            assert 'cannot patch resource "pods"' in message, message
        assert event["type"] == "Warning"

        plane.request_json("PUT", path, _with_pod_patch(plane.request_json("GET", path)))

        async def updated() -> bool:
            pods = await pods_of(kube, namespace, "engine")
            replica = await kube.get(INFERENCE_REPLICAS, "chat-engine", namespace)
            conditions = (replica.get("status") or {}).get("conditions") or []
            return (
                len(pods) == 2
                and all(p["spec"]["containers"][0]["image"] == "ome/srt:2.0" for p in pods)
                and all(pod_ready(p) for p in pods)
                and not any(c.get("type") == "WriteRefused" for c in conditions)
            )

        await eventually(updated, timeout=90, what="the in-place update done, condition gone")
        after = {p["metadata"]["uid"] for p in await pods_of(kube, namespace, "engine")}
        assert after == before  # patched in place: the same pods
        world.check_manager()


def _with_pod_patch(role: dict[str, Any]) -> dict[str, Any]:
    for rule in role["rules"]:
        if rule.get("apiGroups") == [""] and rule.get("resources") == ["pods"]:
            rule["verbs"] = sorted({*rule["verbs"], "patch"})
    return role


def review_denied(plane: Any, user: str, namespace: str) -> bool:
    answer = plane.request_json(
        "POST",
        "/apis/authorization.k8s.io/v1/subjectaccessreviews",
        {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SubjectAccessReview",
            "spec": {
                "user": user,
                "groups": ["system:serviceaccounts", "system:authenticated"],
                "resourceAttributes": {"verb": "patch", "resource": "pods", "namespace": namespace},
            },
        },
    )
    return not answer["status"].get("allowed")
