"""PodGroups of multi-pod Instances, with the chart's manager against the real control plane.

With scheduler-plugins' PodGroup CRD installed before the manager starts (from the fixture
manifest, removed again at the end of the test so that no other test file on this control plane
sees it), a decoder of two Instances of a leader and two workers gets one PodGroup per Instance:
created before any of its pods (the watch of the namespace sees the PodGroup's ADDED event at a
lower resourceVersion than every pod of its gang), ``minMember`` 3, ``scheduleTimeoutSeconds``
the chart's 30m instanceReadyTimeout clamped to gangScheduleTimeout's 600s, owned by the
InferenceReplica. A scale-down to one Instance deletes the leftover PodGroup once its pods are
gone. Without the CRD, the pods are created as before and the InferenceReplica's condition
GangSchedulingUnavailable says why. The manager runs under the chart's ServiceAccount, so a
PodGroup rule the chart lacks fails these tests.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import _support as support
import orjson
import pytest
import yaml
from _support import eventually

from omed.api.constants import LABEL_COMPONENT, LABEL_POD_GROUP
from omed.controllers.inferencereplica.core import names
from omed.kube.client import KubeClient
from omed.kube.errors import NotFound
from omed.kube.resources import CRDS, INFERENCE_REPLICAS, POD_GROUPS, PODS
from omed.manager.startup import MSG_POD_GROUPS

pytestmark = [pytest.mark.integration]

CRD_MANIFEST = Path("/work/shared/fixtures/crds/podgroups.scheduling.x-k8s.io.yaml")
"""scheduler-plugins' PodGroup CRD, kept as test data outside the project."""
CRD_NAME = "podgroups.scheduling.x-k8s.io"
SERVICE = "chat"
DECODER = f"{SERVICE}-decoder"
RUNTIME = support.serving_runtime(
    "srt-gang",
    decoderConfig={
        "leader": {"runner": {"name": "ome-container", "image": "ome/srt:1.0"}},
        "worker": {"size": 2, "runner": {"name": "ome-container", "image": "ome/srt:1.0"}},
    },
)
LIFECYCLE = {
    **support.lifecycle(scale_up_pod_batch_size=50),
    "instanceReadyTimeout": "30m",
    "gangScheduleTimeout": {"min": "60s", "max": "600s"},
}


class AddedOrder:
    """A watch of the namespace's pods and PodGroups from before the test's first write: the
    resourceVersion of each object's ADDED event (its creation's place in etcd's order)."""

    def __init__(self, kube: KubeClient, namespace: str) -> None:
        self.kube = kube
        self.namespace = namespace
        self.added: dict[tuple[str, str], int] = {}
        self._tasks: list[asyncio.Task[None]] = []

    async def start(self) -> None:
        for resource in (PODS, POD_GROUPS):
            page = await self.kube.list_page(resource, self.namespace)
            version = page["metadata"]["resourceVersion"]
            self._tasks.append(asyncio.create_task(self._watch(resource, version)))

    async def _watch(self, resource: Any, version: str) -> None:
        params = {"watch": "true", "resourceVersion": version, "timeoutSeconds": "600"}
        async with self.kube.stream(resource.path(self.namespace), params=params) as lines:
            async for line in lines:
                event = orjson.loads(line)
                obj = event.get("object") or {}
                if event.get("type") != "ADDED":
                    continue
                meta = obj["metadata"]
                self.added.setdefault((obj["kind"], meta["name"]), int(meta["resourceVersion"]))

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task


def crd_manifest() -> dict[str, Any]:
    manifest: dict[str, Any] = yaml.safe_load(CRD_MANIFEST.read_text())
    return manifest


@pytest.fixture
async def pod_group_crd(kube: KubeClient) -> AsyncIterator[None]:
    """The PodGroup CRD, established before the manager starts (request this fixture before
    the ones that start managers: it is then removed after them); deleted, and waited for
    until it is gone, at the end."""
    await kube.create(CRDS, crd_manifest())

    async def established() -> bool:
        crd = await kube.get(CRDS, CRD_NAME)
        return support.condition(crd, "Established") == "True"

    try:
        await eventually(established, timeout=30, what="the PodGroup CRD established")
        yield
    finally:
        with contextlib.suppress(NotFound):
            await kube.delete(CRDS, CRD_NAME)

        async def gone() -> bool:
            try:
                await kube.get(CRDS, CRD_NAME)
            except NotFound:
                return True
            return False

        await eventually(gone, timeout=60, what="the PodGroup CRD gone")


async def decoder_pods(world: support.ManagerWorld) -> list[dict[str, Any]]:
    return [
        pod
        for pod in await world.pods()
        if (pod["metadata"].get("labels") or {}).get(LABEL_COMPONENT) == "decoder"
    ]


async def pod_groups(world: support.ManagerWorld) -> dict[str, dict[str, Any]]:
    return {
        group["metadata"]["name"]: group
        for group in await world.kube.list_all(POD_GROUPS, world.namespace)
    }


def decoder(replicas: int) -> dict[str, Any]:
    return {"minReplicas": replicas, "maxReplicas": replicas}


async def test_a_gang_gets_its_pod_group_before_its_pods_and_loses_it_on_scale_down(
    pod_group_crd: None, kube: KubeClient, namespace: str, managers: Any, manager_config: Any
) -> None:
    await manager_config(lifecycle=LIFECYCLE)
    world = support.ManagerWorld(kube=kube, namespace=namespace, managers=managers)
    order = AddedOrder(kube, namespace)
    async with world.running(order, nodes=2):
        manager = await world.start_manager("manager-a")
        line = await manager.wait_log(MSG_POD_GROUPS, timeout=10)
        assert "true" in line.split("podGroups", 1)[1][:10], line
        body = support.inference_service(SERVICE, runtime="srt-gang", decoder=decoder(2))
        await world.create_service(RUNTIME, body)

        async def six_ready() -> bool:
            world.check_manager()
            pods = await decoder_pods(world)
            return len(pods) == 6 and all(support.pod_ready(p) for p in pods)

        await eventually(six_ready, timeout=120, what="two gangs of 3 Ready decoder pods")
        irep = await kube.get(INFERENCE_REPLICAS, DECODER, namespace)
        groups = await pod_groups(world)
        assert sorted(groups) == [f"{DECODER}-0", f"{DECODER}-1"]
        for index in (0, 1):
            group = groups[f"{DECODER}-{index}"]
            assert group["spec"] == {"minMember": 3, "scheduleTimeoutSeconds": 600}
            assert group["metadata"]["labels"] == {
                "ome.io/inferenceservice": SERVICE,
                "component": "decoder",
                "ome.io/managed-by": "OMENative",
                "ome.io/instance-index": str(index),
            }
            (ref,) = group["metadata"]["ownerReferences"]
            assert (ref["kind"], ref["name"], ref["uid"], ref["controller"]) == (
                "InferenceReplica",
                DECODER,
                irep["metadata"]["uid"],
                True,
            )
        for pod in await decoder_pods(world):
            name = pod["metadata"]["name"]
            group_name = pod["metadata"]["labels"][LABEL_POD_GROUP]
            assert order.added[("PodGroup", group_name)] < order.added[("Pod", name)], name
        assert support.condition(irep, names.CONDITION_GANG_UNAVAILABLE) is None

        await world.patch_service(SERVICE, {"spec": {"decoder": decoder(1)}})

        async def leftover_gone() -> bool:
            world.check_manager()
            pods = await decoder_pods(world)
            indexes = {p["metadata"]["labels"]["ome.io/instance-index"] for p in pods}
            return indexes == {"0"} and sorted(await pod_groups(world)) == [f"{DECODER}-0"]

        await eventually(leftover_gone, timeout=120, what="Instance 1's pods and PodGroup gone")
        # This namespace's writes only: the manager watches every namespace, and one that an
        # earlier test is still deleting refuses the writes of its own objects.
        refused = [line for line in manager.log_lines("WriteRefused") if world.namespace in line]
        assert not refused


async def test_without_the_crd_pods_are_created_and_the_condition_says_why(
    kube: KubeClient, namespace: str, managers: Any, manager_config: Any
) -> None:
    with pytest.raises(NotFound):  # no test file before this one left it installed
        await kube.get(CRDS, CRD_NAME)
    await manager_config(lifecycle=LIFECYCLE)
    world = support.ManagerWorld(kube=kube, namespace=namespace, managers=managers)
    async with world.running(nodes=1):
        manager = await world.start_manager("manager-a")
        line = await manager.wait_log(MSG_POD_GROUPS, timeout=10)
        assert "false" in line.split("podGroups", 1)[1][:10], line
        assert f"{CRD_NAME} not found" in line, line
        body = support.inference_service(SERVICE, runtime="srt-gang", decoder=decoder(1))
        await world.create_service(RUNTIME, body)

        async def unavailable() -> dict[str, Any] | None:
            world.check_manager()
            try:
                irep = await kube.get(INFERENCE_REPLICAS, DECODER, namespace)
            except NotFound:
                return None
            found = [
                c
                for c in (irep.get("status") or {}).get("conditions") or ()
                if c["type"] == names.CONDITION_GANG_UNAVAILABLE
            ]
            return found[0] if found else None

        cond = await eventually(unavailable, timeout=60, what="GangSchedulingUnavailable")
        assert (cond["status"], cond["reason"]) == ("True", "PodGroupCRDNotInstalled")
        assert cond["message"] == (
            "scheduler-plugins scheduling.x-k8s.io/v1alpha1 PodGroup CRD is not installed; "
            "multi-pod Instances may schedule partially"
        )

        async def three_pods() -> bool:
            return len(await decoder_pods(world)) == 3

        await eventually(three_pods, timeout=60, what="the gang's 3 pods, without a PodGroup")
