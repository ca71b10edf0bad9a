"""Per-Instance status encodings, end to end in-process: the InferenceReplica controller (with
an omenativeStatus block) against the real API server, etcd and the node simulator.

What a user sees is checked through the API server: the stored status form, the events
(InstanceStatusConverted, InstanceStatusDecodeFailed, StatusSizeExceeded) and the pods,
whose uids and resourceVersions show that a replica omed stopped managing was not touched.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any

import pytest

from omed.controllers.inferencereplica.core.encoding import StatusEncodingSettings
from omed.controllers.inferencereplica.core.model import PlanSettings
from omed.controllers.inferencereplica.shell.controller import InferenceReplicaController
from omed.informers import InformerFactory
from omed.kube.client import KubeClient
from omed.kube.resources import INFERENCE_REPLICAS, PODS
from omed.statuscodec import (
    COLUMNAR_V2,
    DENSE_V1,
    DecodeError,
    decode_status,
    encode_columnar,
    encoded_size,
)
from omed_devcluster.simulator import NodeSimulator

pytestmark = pytest.mark.integration

TEMPLATE = {"spec": {"containers": [{"name": "ome-container", "image": "ome/serving:1.0"}]}}
COLUMNAR = StatusEncodingSettings(encoding=COLUMNAR_V2, max_decoded_instances=20000)
DENSE = StatusEncodingSettings(encoding=DENSE_V1, max_decoded_instances=20000)


async def eventually(
    check: Callable[[], Awaitable[bool]], *, timeout: float = 90.0, what: str
) -> None:
    deadline = time.monotonic() + timeout
    while not await check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        await asyncio.sleep(0.2)


def irep_body(name: str, *, replicas: int) -> dict[str, Any]:
    return {
        "apiVersion": "ome.io/v1beta1",
        "kind": "InferenceReplica",
        "metadata": {"name": name},
        "spec": {
            "component": "engine",
            "replicas": replicas,
            "runners": [{"name": "default", "template": TEMPLATE}],
        },
    }


def ready(pod: Mapping[str, Any]) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or ()
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


class Events:
    """A list-backed event sink that keeps the messages."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str, str, str]] = []

    def event(self, obj: Mapping[str, Any], *, type: str, reason: str, message: str) -> None:
        self.seen.append((obj["metadata"]["name"], type, reason, message))

    def of(self, reason: str) -> list[str]:
        return [message for _, _, r, message in self.seen if r == reason]


class World:
    """The test's namespace, simulator and (one at a time) controller."""

    def __init__(self, kube: KubeClient, namespace: str) -> None:
        self.kube = kube
        self.namespace = namespace
        self.events = Events()
        self.factory: InformerFactory | None = None
        self.controller: InferenceReplicaController | None = None
        self.task: asyncio.Task[None] | None = None

    async def start(self, settings: StatusEncodingSettings) -> None:
        await self.stop()
        self.factory = InformerFactory(self.kube)
        self.controller = InferenceReplicaController(
            client=self.kube,
            factory=self.factory,
            events=self.events,
            settings=PlanSettings(),
            workers=4,
            namespace=self.namespace,
            status_encoding=settings,
        )
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

    async def rows(self, name: str) -> list[dict[str, Any]] | None:
        try:
            return decode_status((await self.get(name)).get("status"), max_rows=20000)
        except DecodeError:
            return None

    async def converged(self, name: str, replicas: int) -> bool:
        irep = await self.get(name)
        status = irep.get("status") or {}
        try:
            rows = decode_status(status, max_rows=20000)
        except DecodeError:
            return False
        pods = await self.pods()
        return (
            status.get("observedGeneration") == irep["metadata"]["generation"]
            and status.get("readyReplicas") == replicas
            and len(rows) == replicas
            and all(r.get("phase") == "Ready" and not r.get("operation") for r in rows)
            and len(pods) == replicas
            and all(ready(p) and not p["metadata"].get("deletionTimestamp") for p in pods)
        )

    async def put_status(self, name: str, status: dict[str, Any]) -> None:
        """Replace the status through the status subresource, as a repair tool does."""
        irep = await self.get(name)
        irep["status"] = status
        await self.kube.replace_status(INFERENCE_REPLICAS, irep, self.namespace)

    async def pod_versions(self) -> dict[str, tuple[str, str]]:
        return {
            p["metadata"]["name"]: (p["metadata"]["uid"], p["metadata"]["resourceVersion"])
            for p in await self.pods()
        }


@pytest.fixture
async def world(kube: KubeClient, namespace: str, crds_installed: None) -> AsyncIterator[World]:
    sim = NodeSimulator(kube, nodes=4, node_prefix=f"{namespace}-n", namespaces=[namespace])
    await sim.start()
    test_world = World(kube, namespace)
    try:
        yield test_world
    finally:
        await test_world.stop()
        await sim.stop()


async def test_columnar_v2_stores_a_uniform_fleet_of_fifty_as_columns(world: World) -> None:
    await world.start(COLUMNAR)
    await world.kube.create(INFERENCE_REPLICAS, irep_body("fleet", replicas=50), world.namespace)
    await eventually(lambda: world.converged("fleet", 50), what="50 Ready Instances")
    status = (await world.get("fleet"))["status"]
    assert status["instanceStatusEncoding"] == COLUMNAR_V2
    assert "instanceStatuses" not in status
    columns = status["instanceStatusColumns"]
    assert columns["rowCount"] == 50
    rows = decode_status(status, max_rows=50)
    assert [r["index"] for r in rows] == list(range(50))
    assert encoded_size(columns) * 5 < encoded_size(rows)  # the point of the columns
    assert world.events.of("InstanceStatusConverted") == []  # a new object converts nothing


async def test_a_restart_with_the_other_block_converts_and_converts_back(world: World) -> None:
    await world.start(DENSE)
    await world.kube.create(INFERENCE_REPLICAS, irep_body("pool", replicas=6), world.namespace)
    await eventually(lambda: world.converged("pool", 6), what="6 Ready Instances")
    assert "instanceStatusEncoding" not in (await world.get("pool"))["status"]
    pods = await world.pod_versions()

    async def stored(encoding: str | None) -> bool:
        return (await world.get("pool"))["status"].get("instanceStatusEncoding") == encoding

    await world.start(COLUMNAR)
    await eventually(lambda: stored(COLUMNAR_V2), what="the rows stored as columns")
    await world.start(DENSE)
    await eventually(lambda: stored(None), what="the rows stored as a list again")
    assert world.events.of("InstanceStatusConverted") == [
        f"InferenceReplica {world.namespace}/pool: per-Instance status was rewritten "
        "from DenseV1 to ColumnarV2",
        f"InferenceReplica {world.namespace}/pool: per-Instance status was rewritten "
        "from ColumnarV2 to DenseV1",
    ]
    assert await world.pod_versions() == pods  # a conversion changes only how rows are stored


async def test_a_damaged_status_stops_management_until_it_is_repaired(world: World) -> None:
    await world.start(COLUMNAR)
    await world.kube.create(INFERENCE_REPLICAS, irep_body("chat", replicas=6), world.namespace)
    await eventually(lambda: world.converged("chat", 6), what="6 Ready Instances")
    good = (await world.get("chat"))["status"]
    assert good["instanceStatusEncoding"] == COLUMNAR_V2
    rows = decode_status(good, max_rows=20000)

    damaged = {**good, "instanceStatusColumns": {**good["instanceStatusColumns"], "index": "0-4"}}
    await world.put_status("chat", damaged)
    expected = (
        f"InferenceReplica {world.namespace}/chat: per-Instance status cannot be decoded (coverage)"
    )

    async def warned() -> bool:
        return expected in world.events.of("InstanceStatusDecodeFailed")

    await eventually(warned, what="the InstanceStatusDecodeFailed event")
    before = await world.pod_versions()
    patch = {"spec": {"replicas": 8}}  # work omed would do if it managed the replica
    await world.kube.patch(INFERENCE_REPLICAS, "chat", patch, world.namespace)
    deadline = time.monotonic() + 4.0
    while time.monotonic() < deadline:  # a while: nothing may happen
        assert await world.pod_versions() == before
        assert (await world.get("chat"))["status"]["instanceStatusColumns"]["index"] == "0-4"
        await asyncio.sleep(0.5)
    assert world.events.of("InstanceStatusDecodeFailed").count(expected) <= 2  # per version

    repaired = {**good, "instanceStatusColumns": encode_columnar(rows)}
    await world.put_status("chat", repaired)
    await eventually(lambda: world.converged("chat", 8), what="8 Ready Instances after repair")
    after = await world.pod_versions()
    assert {name: after[name][0] for name in before} == {n: v[0] for n, v in before.items()}


async def test_a_dense_v1_status_too_large_for_etcd_stalls_with_status_size_exceeded(
    world: World,
) -> None:
    await world.start(DENSE)
    # 6000 new rows (each with its Create operation) make a list of about 2 MB: over etcd's
    # 1.5 MiB request limit, under the API server's 3 MiB body limit.
    await world.kube.create(INFERENCE_REPLICAS, irep_body("huge", replicas=6000), world.namespace)

    async def refused() -> bool:
        return bool(world.events.of("StatusSizeExceeded"))

    await eventually(refused, what="the StatusSizeExceeded event")
    message = world.events.of("StatusSizeExceeded")[0]
    prefix = f"InferenceReplica {world.namespace}/huge: status write of "
    assert message.startswith(prefix) and message.endswith(
        " bytes (DenseV1) was rejected as too large"
    )
    size = int(message.removeprefix(prefix).split(" ", 1)[0])
    assert size > 1_572_864
    deadline = time.monotonic() + 3.0
    while time.monotonic() < deadline:  # stalled: no pod, no stored row
        assert await world.pods() == []
        assert await world.rows("huge") == []
        await asyncio.sleep(0.5)

    await world.kube.patch(INFERENCE_REPLICAS, "huge", {"spec": {"replicas": 3}}, world.namespace)
    await eventually(lambda: world.converged("huge", 3), what="3 Ready Instances once it fits")
