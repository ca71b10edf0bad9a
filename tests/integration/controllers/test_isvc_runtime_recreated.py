"""A ServingRuntime deleted and created again (same name, same spec) rolls no Instance.

Against the real API server, with the InferenceService controller alone (the replica's spec
is what decides a roll: its revision is the hash of the runner templates). The new runtime
object has a new uid, resourceVersion and creationTimestamp; none of them may reach the
projection. While the runtime is gone the projection can't be made as it was: the replica
must be left as it is (the service says RuntimeUnresolved), not projected without the
runtime's part, which would roll every Instance to a template without it and back again.
"""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import pytest
from test_isvc_replica_metadata import eventually, service_controller

from omed.controllers.inferenceservice.core.owned import ANNOTATION_SPEC_HASH
from omed.kube.client import KubeClient
from omed.kube.errors import NotFound
from omed.kube.resources import INFERENCE_REPLICAS, INFERENCE_SERVICES, SERVING_RUNTIMES

pytestmark = pytest.mark.integration

RUNTIME = {
    "apiVersion": "ome.io/v1beta1",
    "kind": "ServingRuntime",
    "metadata": {"name": "srt"},
    "spec": {
        "engineConfig": {
            "runner": {
                "name": "ome-container",
                "image": "ome/srt:1.0",
                "resources": {"limits": {"nvidia.com/gpu": "1"}},
                "env": [{"name": "RUNTIME_SETTING", "value": "on"}],
            }
        }
    },
}
SERVICE = {
    "apiVersion": "ome.io/v1beta1",
    "kind": "InferenceService",
    "metadata": {"name": "chat"},
    "spec": {
        "deploymentMode": "OMENative",
        "model": {"name": "llama-3-2-1b-instruct"},
        "runtime": {"name": "srt"},
        # Its own image: a projection without the runtime still has one.
        "engine": {"minReplicas": 2, "maxReplicas": 2, "runner": {"image": "ome/srt:1.1"}},
    },
}


def condition(obj: dict[str, Any], kind: str) -> dict[str, Any] | None:
    for item in (obj.get("status") or {}).get("conditions") or ():
        if item.get("type") == kind:
            return dict(item)
    return None


async def test_a_runtime_deleted_and_created_again_changes_no_replica_spec(
    kube: KubeClient, namespace: str, crds_installed: None
) -> None:
    first = await kube.create(SERVING_RUNTIMES, RUNTIME, namespace)
    async with service_controller(kube, namespace):
        await kube.create(INFERENCE_SERVICES, SERVICE, namespace)

        async def replica() -> dict[str, Any] | None:
            try:
                found: dict[str, Any] = await kube.get(INFERENCE_REPLICAS, "chat-engine", namespace)
            except NotFound:
                return None
            return found

        async def created() -> bool:
            return await replica() is not None

        await eventually(created, timeout=30, what="the engine InferenceReplica")
        before = await replica()
        assert before is not None
        runner = before["spec"]["runners"][0]["template"]["spec"]["containers"][0]
        assert runner["env"] == [{"name": "RUNTIME_SETTING", "value": "on"}]  # the runtime's

        await kube.delete(SERVING_RUNTIMES, "srt", namespace)

        async def unresolved() -> bool:
            isvc = await kube.get(INFERENCE_SERVICES, "chat", namespace)
            ready = condition(isvc, "Ready")
            return ready is not None and ready.get("reason") == "RuntimeUnresolved"

        await asyncio.sleep(3.0)  # the runtime's delete event has reached the controller
        gone = await replica()
        assert gone is not None
        assert gone["spec"] == before["spec"]
        assert gone["metadata"]["generation"] == before["metadata"]["generation"]
        await eventually(unresolved, timeout=30, what="Ready False with RuntimeUnresolved")

        again = await kube.create(SERVING_RUNTIMES, copy.deepcopy(RUNTIME), namespace)
        assert again["metadata"]["uid"] != first["metadata"]["uid"]

        async def resolved() -> bool:
            isvc = await kube.get(INFERENCE_SERVICES, "chat", namespace)
            ready = condition(isvc, "Ready")
            return ready is not None and ready.get("reason") != "RuntimeUnresolved"

        await eventually(resolved, timeout=30, what="the runtime resolved again")
        await asyncio.sleep(1.0)  # a pass that would write has had its chance
        after = await replica()
        assert after is not None
        assert after["metadata"]["generation"] == before["metadata"]["generation"]
        assert after["spec"] == before["spec"]
        digest = after["metadata"]["annotations"][ANNOTATION_SPEC_HASH]
        assert digest == before["metadata"]["annotations"][ANNOTATION_SPEC_HASH]
