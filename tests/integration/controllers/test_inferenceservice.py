"""The InferenceService and InferenceReplica controllers together, in-process, against the
real API server and the node simulator: a prefill-decode service converges, Ready is never
reported before every Instance really is, and deleting the service leaves nothing behind."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import pytest
from test_irep_collector import collector_watches_ome_kinds

from omed.controllers.inferencereplica.core.model import PlanSettings
from omed.controllers.inferencereplica.shell.controller import InferenceReplicaController
from omed.controllers.inferenceservice.shell.controller import InferenceServiceController
from omed.events import EventRecorder
from omed.informers import InformerFactory
from omed.kube.client import KubeClient
from omed.kube.errors import NotFound
from omed.kube.resources import INFERENCE_REPLICAS, INFERENCE_SERVICES, PODS, SERVING_RUNTIMES
from omed_devcluster.simulator import NodeSimulator

pytestmark = pytest.mark.integration

RUNTIME = {
    "apiVersion": "ome.io/v1beta1",
    "kind": "ServingRuntime",
    "metadata": {"name": "srt-pd"},
    "spec": {
        "engineConfig": {
            "runner": {
                "name": "ome-container",
                "image": "ome/srt:1.0",
                "resources": {"limits": {"nvidia.com/gpu": "1"}},
            },
        },
        "decoderConfig": {
            "leader": {"runner": {"name": "ome-container", "image": "ome/srt:1.0"}},
            "worker": {"size": 2, "runner": {"name": "ome-container", "image": "ome/srt:1.0"}},
        },
    },
}


def service(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "ome.io/v1beta1",
        "kind": "InferenceService",
        "metadata": {"name": name},
        "spec": {
            "deploymentMode": "OMENative",
            "model": {"name": "llama-3-2-1b-instruct"},
            "runtime": {"name": "srt-pd"},
            "engine": {"minReplicas": 4, "maxReplicas": 4},
            "decoder": {"minReplicas": 2, "maxReplicas": 2},
        },
    }


def _ready(obj: Mapping[str, Any], kind: str = "Ready") -> bool:
    return any(
        c.get("type") == kind and c.get("status") == "True"
        for c in (obj.get("status") or {}).get("conditions") or []
    )


async def eventually(check: Callable[[], Awaitable[bool]], *, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not await check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        await asyncio.sleep(0.1)


@dataclass
class Running:
    replicas: InferenceReplicaController
    services: InferenceServiceController


@asynccontextmanager
async def controllers(kube: KubeClient, namespace: str) -> AsyncIterator[Running]:
    """Both controllers and the node simulator, scoped to ``namespace``."""
    factory = InformerFactory(kube)
    recorder = EventRecorder(kube, burst=400, refill_interval=5)
    replicas = InferenceReplicaController(
        client=kube,
        factory=factory,
        events=recorder,
        settings=PlanSettings(),
        workers=4,
        namespace=namespace,
    )
    services = InferenceServiceController(
        client=kube, factory=factory, workers=2, namespace=namespace
    )
    simulator = NodeSimulator(
        kube,
        nodes=3,
        gpus_per_node=8,
        namespaces=[namespace],
        node_prefix=f"isvc-{uuid.uuid4().hex[:6]}",
    )
    await simulator.start()
    await recorder.start()
    factory.start()
    assert await factory.wait_for_cache_sync(timeout=30)
    tasks = [asyncio.create_task(replicas.run()), asyncio.create_task(services.run())]
    try:
        yield Running(replicas=replicas, services=services)
    finally:
        await services.shutdown(drain=False)
        await replicas.shutdown(drain=False)
        await asyncio.gather(*tasks, return_exceptions=True)
        services.close()
        replicas.close()
        await factory.stop()
        await recorder.stop()
        await simulator.stop()


async def test_service_converges_then_deletes_cleanly(
    kube: KubeClient, namespace: str, crds_installed: None
) -> None:
    await kube.create(SERVING_RUNTIMES, RUNTIME, namespace)
    async with controllers(kube, namespace) as running:
        services = running.services
        await kube.create(INFERENCE_SERVICES, service("chat"), namespace)
        premature: list[str] = []

        async def converged() -> bool:
            isvc = await kube.get(INFERENCE_SERVICES, "chat", namespace)
            pods = (await kube.list_page(PODS, namespace))["items"]
            ready_pods = sum(
                1 for p in pods if _ready(p) and not p["metadata"].get("deletionTimestamp")
            )
            if _ready(isvc) and ready_pods < 10:
                premature.append(f"Ready with {ready_pods}/10 pods ready")
            return _ready(isvc)

        await eventually(converged, timeout=120, what="InferenceService Ready")
        assert premature == []
        isvc = await kube.get(INFERENCE_SERVICES, "chat", namespace)
        assert _ready(isvc, "EngineReady") and _ready(isvc, "DecoderReady")
        assert isvc["status"]["observedGeneration"] == isvc["metadata"]["generation"]
        assert isvc["status"]["components"]["engine"]["readyReplicas"] == 4
        assert isvc["status"]["components"]["decoder"]["readyReplicas"] == 2

        engine = await kube.get(INFERENCE_REPLICAS, "chat-engine", namespace)
        assert engine["spec"]["parentRef"] == {"name": "chat"}
        assert engine["metadata"]["labels"]["ome.io/inferenceservice"] == "chat"
        assert engine["metadata"]["annotations"]["ome.io/controller-write"] == "true"
        assert engine["metadata"]["ownerReferences"][0]["uid"] == isvc["metadata"]["uid"]
        assert engine["metadata"]["finalizers"] == ["ome.io/inferencereplica-cleanup"]
        rows = engine["status"]["instanceStatuses"]
        assert [r["index"] for r in rows] == [0, 1, 2, 3]
        assert all(r["phase"] == "Ready" and r["podCount"] == 1 for r in rows)
        decoder = await kube.get(INFERENCE_REPLICAS, "chat-decoder", namespace)
        assert [r["podCount"] for r in decoder["status"]["instanceStatuses"]] == [3, 3]
        pods = (await kube.list_page(PODS, namespace))["items"]
        assert len(pods) == 4 + 2 * 3
        assert all(p["metadata"]["labels"]["ome.io/inferenceservice"] == "chat" for p in pods)

        # A reconcile that changes nothing writes nothing: the replicas' versions hold still.
        before = {
            (await kube.get(INFERENCE_REPLICAS, n, namespace))["metadata"]["resourceVersion"]
            for n in ("chat-engine", "chat-decoder")
        }
        services.controller.queue.add(f"{namespace}/chat")
        await asyncio.sleep(1.0)
        after = {
            (await kube.get(INFERENCE_REPLICAS, n, namespace))["metadata"]["resourceVersion"]
            for n in ("chat-engine", "chat-decoder")
        }
        assert before == after

        await kube.delete(INFERENCE_SERVICES, "chat", namespace)

        async def gone() -> bool:
            try:
                await kube.get(INFERENCE_SERVICES, "chat", namespace)
                return False
            except NotFound:
                pass
            left = (await kube.list_page(INFERENCE_REPLICAS, namespace))["items"]
            pods = (await kube.list_page(PODS, namespace))["items"]
            return not left and not pods

        await eventually(gone, timeout=90, what="service, replicas and pods gone")


POOL_TEMPLATE = {
    "metadata": {"labels": {"app": "pool"}},
    "spec": {"containers": [{"name": "ome-container", "image": "ome/serving:1.0"}]},
}


async def test_a_service_fronting_a_standalone_replica_follows_its_readiness(
    kube: KubeClient, namespace: str, crds_installed: None
) -> None:
    """spec.replicaRefs: the service writes nothing on the pool and turns Ready when the pool
    does. Only the pool's own events can bring that pass (the service itself doesn't change),
    through the controller's index of services by the replicas they front."""
    fronting = {
        "apiVersion": "ome.io/v1beta1",
        "kind": "InferenceService",
        "metadata": {"name": "front"},
        "spec": {"deploymentMode": "OMENative", "replicaRefs": [{"name": "pool-a"}]},
    }
    pool = {
        "apiVersion": "ome.io/v1beta1",
        "kind": "InferenceReplica",
        "metadata": {"name": "pool-a"},
        "spec": {
            "component": "engine",
            "replicas": 2,
            "runners": [{"name": "default", "template": POOL_TEMPLATE}],
        },
    }
    async with controllers(kube, namespace):
        await kube.create(INFERENCE_SERVICES, fronting, namespace)

        async def reports_missing_pool() -> bool:
            isvc = await kube.get(INFERENCE_SERVICES, "front", namespace)
            ready = [
                c
                for c in (isvc.get("status") or {}).get("conditions") or []
                if c.get("type") == "Ready"
            ]
            return bool(ready) and ready[0]["status"] == "False"

        await eventually(reports_missing_pool, timeout=30, what="a not-ready status")
        await kube.create(INFERENCE_REPLICAS, pool, namespace)

        async def front_ready() -> bool:
            return _ready(await kube.get(INFERENCE_SERVICES, "front", namespace))

        await eventually(front_ready, timeout=90, what="the fronting service Ready")
        isvc = await kube.get(INFERENCE_SERVICES, "front", namespace)
        ready = next(c for c in isvc["status"]["conditions"] if c["type"] == "Ready")
        assert ready["message"] == "all fronted InferenceReplicas ready"
        stored = await kube.get(INFERENCE_REPLICAS, "pool-a", namespace)
        assert "ownerReferences" not in stored["metadata"]
        assert "parentRef" not in stored["spec"]
        assert len(stored["status"]["instanceStatuses"]) == 2
        assert all(r["phase"] == "Ready" for r in stored["status"]["instanceStatuses"])


async def test_a_service_deleted_with_propagation_orphan_leaves_its_replicas_to_the_next_one(
    kube: KubeClient, namespace: str, crds_installed: None
) -> None:
    """Orphan keeps the replicas (and their pods) serving, unowned; the service created again
    adopts them: the same replicas and pods, no pod deleted (docs/controllers.md, "Deletion
    and the garbage collector")."""
    await collector_watches_ome_kinds(kube, namespace)
    await kube.create(SERVING_RUNTIMES, RUNTIME, namespace)
    body = service("chat")
    body["spec"]["engine"] = {"minReplicas": 1, "maxReplicas": 1}
    body["spec"]["decoder"] = {"minReplicas": 1, "maxReplicas": 1}

    async def service_ready() -> bool:
        try:
            return _ready(await kube.get(INFERENCE_SERVICES, "chat", namespace))
        except NotFound:
            return False

    async def uids(resource: Any) -> dict[str, str]:
        items = (await kube.list_page(resource, namespace))["items"]
        return {i["metadata"]["name"]: i["metadata"]["uid"] for i in items}

    async with controllers(kube, namespace):
        await kube.create(INFERENCE_SERVICES, body, namespace)
        await eventually(service_ready, timeout=120, what="InferenceService Ready")
        replicas, pods = await uids(INFERENCE_REPLICAS), await uids(PODS)
        assert sorted(replicas) == ["chat-decoder", "chat-engine"] and len(pods) == 4
        await kube.delete(INFERENCE_SERVICES, "chat", namespace, propagation_policy="Orphan")

        async def service_gone() -> bool:
            try:
                await kube.get(INFERENCE_SERVICES, "chat", namespace)
            except NotFound:
                return True
            return False

        await eventually(service_gone, timeout=60, what="the service to be gone")
        for name in replicas:
            kept = await kube.get(INFERENCE_REPLICAS, name, namespace)
            assert "ownerReferences" not in kept["metadata"]
            assert "deletionTimestamp" not in kept["metadata"]
        assert await uids(PODS) == pods

        created = await kube.create(INFERENCE_SERVICES, body, namespace)
        await eventually(service_ready, timeout=60, what="the new InferenceService Ready")
        assert await uids(INFERENCE_REPLICAS) == replicas
        assert await uids(PODS) == pods
        for name in replicas:
            adopted = await kube.get(INFERENCE_REPLICAS, name, namespace)
            controller = [r for r in adopted["metadata"]["ownerReferences"] if r.get("controller")]
            assert [r["uid"] for r in controller] == [created["metadata"]["uid"]]
