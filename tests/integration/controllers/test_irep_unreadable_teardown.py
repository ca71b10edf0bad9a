"""Deleting an InferenceReplica omed can't read still finishes: its pods are drained from what
they show, in the teardown's waves, and the finalizer comes off.

An InferenceReplica whose rows can't be decoded (a damaged ColumnarV2 status, or a manager
switched to DenseV1 without ``maxDecodedInstances`` while the rows are columns) or whose spec
the models refuse (a duration stored before the webhook refused it) is never planned for: omed
leaves it alone with a Warning. Deletion can't wait for a repair: the finalizer would hold the
replica, its pods and its InferenceService forever. These tests delete such replicas against
the real API server and the node simulator, with a pod budget of 1, and check that no pod was
deleted while Ready, that no two Instances were out of service at once, and that the replica
is gone.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from test_inferencereplica import Events, PodWatch, eventually, irep_body, ready
from test_inferenceservice import RUNTIME, _ready, controllers, service

from omed.controllers.inferencereplica.core import names
from omed.controllers.inferencereplica.core.encoding import StatusEncodingSettings
from omed.controllers.inferencereplica.core.model import PlanSettings
from omed.controllers.inferencereplica.shell.controller import InferenceReplicaController
from omed.informers import Handlers, InformerFactory
from omed.informers.transform import Obj
from omed.kube.client import KubeClient
from omed.kube.errors import NotFound
from omed.kube.resources import INFERENCE_REPLICAS, INFERENCE_SERVICES, PODS, SERVING_RUNTIMES
from omed.statuscodec import COLUMNAR_V2, decode_status, encode_columnar
from omed_devcluster.simulator import NodeSimulator

pytestmark = pytest.mark.integration

COLUMNAR = StatusEncodingSettings(encoding=COLUMNAR_V2, max_decoded_instances=100)
DENSE_UNBOUNDED = StatusEncodingSettings()  # DenseV1, no maxDecodedInstances
ONE_POD = PlanSettings(scale_down_pod_batch_size=1)


class OutOfService:
    """The most Instances out of service at once (a live pod not Ready, or Terminating)
    while the replica still had pods, sampled on every pod event."""

    def __init__(self, watch: PodWatch) -> None:
        self.pods: dict[str, Obj] = {}
        self.most = 0
        watch.informer.add_event_handler(
            Handlers(on_add=self._seen, on_update=lambda _o, n: self._seen(n), on_delete=self._gone)
        )

    def _seen(self, pod: Obj) -> None:
        self.pods[pod["metadata"]["uid"]] = pod
        self._sample()

    def _gone(self, pod: Obj) -> None:
        self.pods.pop(pod["metadata"]["uid"], None)
        self._sample()

    def _sample(self) -> None:
        down = {
            (pod["metadata"].get("labels") or {}).get("ome.io/instance-index")
            for pod in self.pods.values()
            if pod["metadata"].get("deletionTimestamp") or not ready(pod)
        }
        self.most = max(self.most, len(down))


class World:
    """The test's namespace, simulator, pod watch and (one at a time) controller."""

    def __init__(self, kube: KubeClient, namespace: str) -> None:
        self.kube = kube
        self.namespace = namespace
        self.events = Events()
        self.watch = PodWatch(kube, namespace)
        self.out = OutOfService(self.watch)
        self.factory: InformerFactory | None = None
        self.controller: InferenceReplicaController | None = None
        self.task: asyncio.Task[None] | None = None

    async def start(self, encoding: StatusEncodingSettings) -> None:
        await self.stop()
        self.factory = InformerFactory(self.kube)
        self.controller = InferenceReplicaController(
            client=self.kube, factory=self.factory, events=self.events, settings=ONE_POD,
            workers=4, namespace=self.namespace, status_encoding=encoding,
        )  # fmt: skip
        self.factory.start()
        assert await self.factory.wait_for_cache_sync(timeout=30)
        self.task = asyncio.create_task(self.controller.run())

    async def stop(self) -> None:
        if self.task is None or self.controller is None or self.factory is None:
            return
        await self.controller.shutdown(drain=True)
        await asyncio.gather(self.task, return_exceptions=True)
        await self.factory.stop()
        self.controller.close()
        self.task = None

    async def get(self, name: str) -> dict[str, Any]:
        found: dict[str, Any] = await self.kube.get(INFERENCE_REPLICAS, name, self.namespace)
        return found

    async def pods(self) -> list[dict[str, Any]]:
        return list(await self.kube.list_all(PODS, self.namespace))

    async def converged(self, name: str, replicas: int) -> bool:
        irep = await self.get(name)
        status = irep.get("status") or {}
        rows = decode_status(status, max_rows=100)
        pods = await self.pods()
        return (
            status.get("observedGeneration") == irep["metadata"]["generation"]
            and len(rows) == replicas
            and all(r.get("phase") == "Ready" and not r.get("operation") for r in rows)
            and len(pods) == replicas
            and all(ready(p) and not p["metadata"].get("deletionTimestamp") for p in pods)
        )

    async def warned(self, reason: str) -> bool:
        return any(r == reason for _, _, r in self.events.seen)

    async def gone(self, name: str) -> bool:
        try:
            await self.get(name)
        except NotFound:
            return not await self.pods()
        return False


@pytest.fixture
async def world(kube: KubeClient, namespace: str, crds_installed: None) -> AsyncIterator[World]:
    sim = NodeSimulator(kube, nodes=3, node_prefix=f"{namespace}-n", namespaces=[namespace])
    await sim.start()
    test_world = World(kube, namespace)
    test_world.watch.factory.start()
    assert await test_world.watch.factory.wait_for_cache_sync(timeout=30)
    try:
        yield test_world
    finally:
        await test_world.stop()
        await test_world.watch.factory.stop()
        await sim.stop()


async def converge_columnar(world: World, name: str, replicas: int) -> dict[str, Any]:
    await world.start(COLUMNAR)
    await world.kube.create(INFERENCE_REPLICAS, irep_body(name, replicas=replicas), world.namespace)
    await eventually(lambda: world.converged(name, replicas), what=f"{replicas} Ready Instances")
    stored = await world.get(name)
    assert stored["status"]["instanceStatusEncoding"] == COLUMNAR_V2
    return stored


async def delete_and_wait(world: World, name: str) -> None:
    world.out.most = 0  # from the deletion on (the pods were not Ready while they started)
    await world.kube.delete(INFERENCE_REPLICAS, name, world.namespace)
    await eventually(lambda: world.gone(name), timeout=90, what="the replica and its pods gone")
    assert world.watch.routed_deletions == []
    assert len(world.watch.deleted) == 3
    assert world.out.most == 1  # one Instance at a time, as scaleDownPodBatchSize 1 says


async def test_a_replica_whose_columns_are_damaged_is_drained_and_released_when_deleted(
    world: World,
) -> None:
    stored = await converge_columnar(world, "dmg", 3)
    columns = stored["status"]["instanceStatusColumns"]
    stored["status"] = {**stored["status"], "instanceStatusColumns": {**columns, "index": "0-1"}}
    await world.kube.replace_status(INFERENCE_REPLICAS, stored, world.namespace)
    await eventually(lambda: world.warned("InstanceStatusDecodeFailed"), what="the warning")
    await delete_and_wait(world, "dmg")


async def test_a_replica_left_as_columns_under_dense_v1_without_a_bound_is_drained_when_deleted(
    world: World,
) -> None:
    await converge_columnar(world, "cols", 3)
    await world.start(DENSE_UNBOUNDED)  # ColumnarV2 rows, and no maxDecodedInstances to read them
    await eventually(lambda: world.warned("InstanceStatusDecodeFailed"), what="the warning")
    await delete_and_wait(world, "cols")


async def test_a_replica_whose_spec_the_models_refuse_is_drained_and_released_when_deleted(
    world: World,
) -> None:
    await converge_columnar(world, "bad", 3)
    # The CRD's pattern takes it; Go's range (and so omed's model and webhook) doesn't. No
    # webhook runs here: such a value is what an object stored before the webhook holds.
    patch = {"spec": {"lifecycle": {"instanceReadyTimeout": "2562048h"}}}
    await world.kube.patch(INFERENCE_REPLICAS, "bad", patch, world.namespace)
    await eventually(lambda: world.warned(names.EVENT_SPEC_INVALID), what="the InvalidSpec event")
    await delete_and_wait(world, "bad")


async def test_an_inference_service_whose_replica_status_is_damaged_is_deleted_cleanly(
    kube: KubeClient, namespace: str, crds_installed: None
) -> None:
    await kube.create(SERVING_RUNTIMES, RUNTIME, namespace)
    body = service("chat")
    del body["spec"]["decoder"]
    body["spec"]["engine"] = {"minReplicas": 2, "maxReplicas": 2}
    async with controllers(kube, namespace):
        await kube.create(INFERENCE_SERVICES, body, namespace)

        async def service_ready() -> bool:
            return _ready(await kube.get(INFERENCE_SERVICES, "chat", namespace))

        await eventually(service_ready, timeout=120, what="InferenceService Ready")
        # The rows as columns, which this manager (DenseV1, no maxDecodedInstances) can't read:
        # what a fleet switched back to DenseV1 without a bound shows.
        engine = await kube.get(INFERENCE_REPLICAS, "chat-engine", namespace)
        status = dict(engine["status"])
        rows = status.pop("instanceStatuses")
        status["instanceStatusEncoding"] = COLUMNAR_V2
        status["instanceStatusColumns"] = encode_columnar(rows)
        engine["status"] = status
        await kube.replace_status(INFERENCE_REPLICAS, engine, namespace)
        await asyncio.sleep(1.0)
        await kube.delete(INFERENCE_SERVICES, "chat", namespace)

        async def gone() -> bool:
            try:
                await kube.get(INFERENCE_SERVICES, "chat", namespace)
                return False
            except NotFound:
                pass
            left = (await kube.list_page(INFERENCE_REPLICAS, namespace))["items"]
            return not left and not (await kube.list_page(PODS, namespace))["items"]

        await eventually(gone, timeout=90, what="service, replica and pods gone")
