"""The InferenceService controller writes only what it owns of an InferenceReplica.

Against the real API server: a user (or kubectl apply) puts annotations and labels on an
InferenceReplica that an InferenceService projects; the service then changes, and the
controller writes the replica's new spec. Everything it doesn't own must still be there,
including kubectl's last-applied-configuration, which the informer cache strips (so a write
built from the cached object would drop it).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import pytest

from omed.controllers.inferenceservice.shell.controller import InferenceServiceController
from omed.informers import InformerFactory
from omed.informers.transform import LAST_APPLIED
from omed.kube.client import KubeClient
from omed.kube.resources import INFERENCE_REPLICAS, INFERENCE_SERVICES, SERVING_RUNTIMES

pytestmark = pytest.mark.integration

RUNTIME = {
    "apiVersion": "ome.io/v1beta1",
    "kind": "ServingRuntime",
    "metadata": {"name": "srt"},
    "spec": {"engineConfig": {"runner": {"name": "ome-container", "image": "ome/srt:1.0"}}},
}
SERVICE = {
    "apiVersion": "ome.io/v1beta1",
    "kind": "InferenceService",
    "metadata": {"name": "chat"},
    "spec": {
        "deploymentMode": "OMENative",
        "model": {"name": "llama-3-2-1b-instruct"},
        "runtime": {"name": "srt"},
        "engine": {"minReplicas": 1, "maxReplicas": 4},
    },
}
APPLIED = '{"apiVersion":"ome.io/v1beta1","kind":"InferenceReplica","metadata":{"annotations":{"team.example.com/owner":"search"},"name":"chat-engine"}}'  # noqa: E501
USER_METADATA = {
    "annotations": {"team.example.com/owner": "search", LAST_APPLIED: APPLIED},
    "labels": {"team.example.com/tier": "gold"},
}


async def eventually(check: Callable[[], Awaitable[bool]], *, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not await check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        await asyncio.sleep(0.1)


@asynccontextmanager
async def service_controller(kube: KubeClient, namespace: str) -> AsyncIterator[None]:
    factory = InformerFactory(kube)
    services = InferenceServiceController(
        client=kube, factory=factory, workers=2, namespace=namespace
    )
    factory.start()
    assert await factory.wait_for_cache_sync(timeout=30)
    task = asyncio.create_task(services.run())
    try:
        yield
    finally:
        await services.shutdown(drain=False)
        await asyncio.gather(task, return_exceptions=True)
        services.close()
        await factory.stop()


async def test_annotations_and_labels_the_controller_doesnt_own_survive_its_update(
    kube: KubeClient, namespace: str, crds_installed: None
) -> None:
    await kube.create(SERVING_RUNTIMES, RUNTIME, namespace)
    async with service_controller(kube, namespace):
        await kube.create(INFERENCE_SERVICES, SERVICE, namespace)

        async def replica() -> dict[str, Any] | None:
            items = (await kube.list_page(INFERENCE_REPLICAS, namespace))["items"]
            return next((i for i in items if i["metadata"]["name"] == "chat-engine"), None)

        async def created() -> bool:
            return await replica() is not None

        await eventually(created, timeout=30, what="the engine InferenceReplica")
        await kube.patch(INFERENCE_REPLICAS, "chat-engine", {"metadata": USER_METADATA}, namespace)
        await asyncio.sleep(0.5)  # the controller's cache has it before the service changes

        patch = {"spec": {"engine": {"minReplicas": 3, "maxReplicas": 4}}}
        await kube.patch(INFERENCE_SERVICES, "chat", patch, namespace)

        async def updated() -> bool:
            found = await replica()
            return found is not None and found["spec"]["replicas"] == 3

        await eventually(updated, timeout=30, what="the replica's new spec")
        stored = await replica()
        assert stored is not None
        meta = stored["metadata"]
        for key, value in USER_METADATA["annotations"].items():
            assert meta["annotations"].get(key) == value, key
        assert meta["labels"]["team.example.com/tier"] == "gold"
        # and what the controller owns is still its own
        assert meta["labels"]["ome.io/inferenceservice"] == "chat"
        assert meta["annotations"]["ome.io/controller-write"] == "true"
        assert [ref["kind"] for ref in meta["ownerReferences"]] == ["InferenceService"]
