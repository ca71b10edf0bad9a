"""The uninstall order of docs/install.md, *Uninstall cleanly*, on a real control plane with
the manager run as the chart deploys it: omed's finalizers are removed by a running manager
only, so workloads deleted after the manager is gone wait, and the webhooks refuse the hand
patch that would lift the finalizer while their configurations outlive the manager.

One test walks the whole story, because each step needs the state the one before left:
a serving InferenceService; the manager gone; the delete that waits on
``ome.io/inferenceservice-cleanup`` and ``ome.io/inferencereplica-cleanup``; the refused
finalizer patch; the manager back, which finishes the teardown.
"""

from __future__ import annotations

import asyncio

import _support as support
import pytest
from _support import eventually

from omed.api.constants import FINALIZER_INFERENCE_REPLICA
from omed.controllers.inferenceservice.core.names import FINALIZER as FINALIZER_SERVICE
from omed.kube.client import KubeClient
from omed.kube.errors import ApiError, NotFound
from omed.kube.resources import INFERENCE_REPLICAS, INFERENCE_SERVICES, PODS

pytestmark = [pytest.mark.integration, pytest.mark.slow]

RUNTIME = support.serving_runtime(
    "srt-one",
    engineConfig={
        "runner": {
            "name": "ome-container",
            "image": "ome/srt:1.0",
            "resources": {"limits": {"nvidia.com/gpu": "1"}},
        },
    },
)

HELD_FOR = 5.0
"""Seconds the deleted InferenceService is watched without a manager: several of the
manager's requeue periods, so a finalizer lifted by anything else would show."""


async def serving_pods(kube: KubeClient, namespace: str) -> bool:
    pods = await kube.list_all(PODS, namespace)
    return len(pods) == 1 and all(support.pod_ready(p) for p in pods)


async def gone(kube: KubeClient, name: str, namespace: str) -> bool:
    try:
        await kube.get(INFERENCE_SERVICES, name, namespace)
    except NotFound:
        return True
    return False


async def test_a_delete_after_the_manager_is_gone_waits_until_it_is_back(
    kube: KubeClient, namespace: str, managers: object, manager_config: object
) -> None:
    world = support.ManagerWorld(kube=kube, namespace=namespace, managers=managers)
    async with world.running(nodes=1):
        await world.start_manager("manager-a")
        service = support.inference_service(
            "chat", runtime="srt-one", engine={"minReplicas": 1, "maxReplicas": 1}
        )
        await world.create_service(RUNTIME, service)
        await eventually(lambda: serving_pods(kube, namespace), timeout=90, what="1 Ready pod")
        isvc = await kube.get(INFERENCE_SERVICES, "chat", namespace)
        assert FINALIZER_SERVICE in isvc["metadata"]["finalizers"]
        [replica] = await kube.list_all(INFERENCE_REPLICAS, namespace)
        assert FINALIZER_INFERENCE_REPLICA in replica["metadata"]["finalizers"]

        # the manager goes (uninstalled, or parked at replicaCount 0): its webhook
        # configurations stay, with no pod behind the Service
        world.kill_manager()
        await kube.delete(INFERENCE_SERVICES, "chat", namespace)
        await asyncio.sleep(HELD_FOR)
        held = await kube.get(INFERENCE_SERVICES, "chat", namespace)
        assert held["metadata"].get("deletionTimestamp")
        assert held["metadata"]["finalizers"] == [FINALIZER_SERVICE]
        assert await kube.list_all(INFERENCE_REPLICAS, namespace)
        assert len(await kube.list_all(PODS, namespace)) == 1

        # lifting the finalizer by hand is an UPDATE, which the webhook refuses unserved
        with pytest.raises(ApiError) as refused:
            await kube.patch(
                INFERENCE_SERVICES, "chat", {"metadata": {"finalizers": None}}, namespace
            )
        message = str(refused.value)
        assert 'failed calling webhook "inferenceservice.ome-webhook-server.' in message
        assert 'no endpoints available for service "ome-webhook-server-service"' in message

        # the manager back: it finishes the teardown and lifts both finalizers
        await world.start_manager("manager-b")
        await eventually(lambda: gone(kube, "chat", namespace), timeout=90, what="chat gone")
        assert not await kube.list_all(INFERENCE_REPLICAS, namespace)
        await eventually(
            lambda: _no_pods(kube, namespace), timeout=60, what="the pods gone with the replica"
        )
        world.check_manager()


async def _no_pods(kube: KubeClient, namespace: str) -> bool:
    return not await kube.list_all(PODS, namespace)
