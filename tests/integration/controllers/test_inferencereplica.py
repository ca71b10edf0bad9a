"""The InferenceReplica controller in-process against the real API server and node simulator.

Each test runs its own controller (namespace-scoped informers, its own expectations and
workers) and its own simulator in the test's namespace. A :class:`PodWatch` (a separate
informer on every pod of the namespace) records what a user would see: every creation with
its operation id, and every pod's Ready condition at the moment it was deleted.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections import defaultdict
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any

import pytest

from omed.config import Percent
from omed.controllers.inferencereplica.core import names
from omed.controllers.inferencereplica.core.model import PlanSettings
from omed.controllers.inferencereplica.core.operations import pass_stamp
from omed.controllers.inferencereplica.shell.controller import InferenceReplicaController
from omed.events import EventRecorder
from omed.informers import Handlers, InformerFactory
from omed.informers.transform import Obj, identity
from omed.kube.client import KubeClient
from omed.kube.errors import NotFound
from omed.kube.resources import EVENTS, INFERENCE_REPLICAS, PODS
from omed_devcluster.simulator import NodeSimulator

pytestmark = pytest.mark.integration

TEMPLATE = {
    "metadata": {"labels": {"app": "chat"}},
    "spec": {"containers": [{"name": "ome-container", "image": "ome/serving:1.0"}]},
}


# -- helpers -----------------------------------------------------------------------------------


async def eventually(
    check: Callable[[], Awaitable[bool]],
    *,
    timeout: float = 60.0,
    what: str = "condition",
    interval: float = 0.1,
) -> None:
    deadline = time.monotonic() + timeout
    while not await check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        await asyncio.sleep(interval)


def irep_body(
    name: str, *, replicas: int, runners: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    return {
        "apiVersion": "ome.io/v1beta1",
        "kind": "InferenceReplica",
        "metadata": {"name": name},
        "spec": {
            "component": "engine",
            "replicas": replicas,
            "runners": runners or [{"name": "default", "template": TEMPLATE}],
        },
    }


def ready(pod: Mapping[str, Any]) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or ()
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


class Events:
    """A list-backed event sink."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str, str]] = []

    def event(self, obj: Mapping[str, Any], *, type: str, reason: str, message: str) -> None:
        self.seen.append((obj["kind"], obj["metadata"]["name"], reason))


class Running:
    """One in-process controller; :meth:`kill` abandons it as ``kill -9`` would."""

    def __init__(
        self,
        kube: KubeClient,
        namespace: str,
        settings: PlanSettings,
        events: Any,
        client: Any = None,
    ) -> None:
        self.factory = InformerFactory(kube)
        self.controller = InferenceReplicaController(
            client=client or kube, factory=self.factory, events=events, settings=settings,
            workers=4, namespace=namespace,
        )  # fmt: skip
        self.task: asyncio.Task[None] | None = None

    async def start(self) -> Running:
        self.factory.start()
        assert await self.factory.wait_for_cache_sync(timeout=30)
        self.task = asyncio.create_task(self.controller.run())
        return self

    async def kill(self) -> None:
        assert self.task is not None
        self.task.cancel()  # in-flight reconciles stop at whatever await they are in
        await asyncio.gather(self.task, return_exceptions=True)
        await self.factory.stop()
        self.controller.close()


class PodWatch:
    """Every pod of the namespace as a user sees it: creations, and Ready at deletion."""

    def __init__(self, kube: KubeClient, namespace: str) -> None:
        self.factory = InformerFactory(kube)
        self.informer = self.factory.informer(PODS, namespace=namespace, transform=identity)
        self.uids: dict[str, list[str]] = defaultdict(list)
        self.operations: dict[str, str] = {}
        self.last_ready: dict[str, bool] = {}
        self.deleted: set[str] = set()
        self.routed_deletions: list[str] = []
        self.informer.add_event_handler(
            Handlers(on_add=self._seen, on_update=lambda _o, n: self._seen(n), on_delete=self._gone)
        )

    def _seen(self, pod: Obj) -> None:
        meta = pod["metadata"]
        name, uid = meta["name"], meta["uid"]
        if uid not in self.uids[name]:
            self.uids[name].append(uid)
            op = (meta.get("annotations") or {}).get(names.ANNOTATION_OPERATION_ID)
            if op:
                self.operations[uid] = op
        if meta.get("deletionTimestamp") and uid not in self.deleted:
            self.deleted.add(uid)
            if ready(pod):  # the state the API server held when the delete was accepted
                self.routed_deletions.append(name)
        self.last_ready[uid] = ready(pod)

    def _gone(self, pod: Obj) -> None:
        uid = pod["metadata"]["uid"]
        if uid not in self.deleted:
            self.deleted.add(uid)
            if self.last_ready.get(uid):
                self.routed_deletions.append(pod["metadata"]["name"])

    def uids_now(self) -> list[str]:
        """The uids of the pods that exist now (not deleted)."""
        return [uid for uids in self.uids.values() for uid in uids if uid not in self.deleted]

    def passes(self) -> list[int]:
        """How many pods each reconcile pass created (grouped by the operations' pass stamp)."""
        counts: dict[str, int] = defaultdict(int)
        for op in self.operations.values():
            counts[pass_stamp(op)] += 1
        return [counts[stamp] for stamp in sorted(counts)]


class WaveLines(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.lines: list[dict[str, Any]] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.getMessage() == names.LogLine.SCALE_DOWN_WAVE:
            self.lines.append(dict(getattr(record, "kv", {})))


class Cluster:
    """The test's namespace, simulator, pod watch and controllers."""

    def __init__(self, kube: KubeClient, namespace: str) -> None:
        self.kube = kube
        self.namespace = namespace
        self.watch = PodWatch(kube, namespace)
        self.running: list[Running] = []
        self.events = Events()

    async def controller(
        self, settings: PlanSettings | None = None, events: Any = None, client: Any = None
    ) -> Running:
        running = Running(
            self.kube, self.namespace, settings or PlanSettings(), events or self.events, client
        )
        self.running.append(running)
        return await running.start()

    async def create(self, body: dict[str, Any]) -> dict[str, Any]:
        created: dict[str, Any] = await self.kube.create(INFERENCE_REPLICAS, body, self.namespace)
        return created

    async def scale(self, name: str, replicas: int) -> None:
        patch = {"spec": {"replicas": replicas}}
        await self.kube.patch(INFERENCE_REPLICAS, name, patch, self.namespace)

    async def get(self, name: str) -> dict[str, Any]:
        found: dict[str, Any] = await self.kube.get(INFERENCE_REPLICAS, name, self.namespace)
        return found

    async def pods(self) -> list[dict[str, Any]]:
        return list(await self.kube.list_all(PODS, self.namespace))

    async def describe(self, name: str) -> str:
        """What a timed-out wait saw: the replica's counts and rows, and each pod's node,
        phase and readiness (so a failure says where convergence stopped)."""
        irep = await self.get(name)
        status = irep.get("status") or {}
        rows = [
            (r.get("index"), r.get("phase"), (r.get("operation") or {}).get("type"))
            for r in status.get("instanceStatuses") or []
        ]
        pods = [
            (
                p["metadata"]["name"],
                (p.get("spec") or {}).get("nodeName"),
                (p.get("status") or {}).get("phase"),
                ready(p),
                bool(p["metadata"].get("deletionTimestamp")),
            )
            for p in await self.pods()
        ]
        counts = {k: status.get(k) for k in ("observedGeneration", "replicas", "readyReplicas")}
        conditions = [
            (c.get("type"), c.get("status"), c.get("reason"))
            for c in status.get("conditions") or []
        ]
        return f"status {counts} conditions {conditions} rows {rows} pods {pods}"

    async def converged(self, name: str, replicas: int, pods_each: int = 1) -> bool:
        irep = await self.get(name)
        status = irep.get("status") or {}
        rows = status.get("instanceStatuses") or []
        live = [p for p in await self.pods() if not p["metadata"].get("deletionTimestamp")]
        return (
            status.get("observedGeneration") == irep["metadata"]["generation"]
            and status.get("readyReplicas") == replicas
            and len(rows) == replicas
            and all(r.get("phase") == "Ready" and not r.get("operation") for r in rows)
            and len(live) == replicas * pods_each
            and len(await self.pods()) == replicas * pods_each
            and all(ready(p) for p in live)
        )


@pytest.fixture
async def cluster(kube: KubeClient, namespace: str, crds_installed: None) -> AsyncIterator[Cluster]:
    sim = NodeSimulator(kube, nodes=3, node_prefix=f"{namespace}-n", namespaces=[namespace])
    await sim.start()
    world = Cluster(kube, namespace)
    world.watch.factory.start()
    assert await world.watch.factory.wait_for_cache_sync(timeout=30)
    try:
        yield world
    finally:
        for running in world.running:
            if running.task is not None and not running.task.done():
                await running.kill()
        await world.watch.factory.stop()
        await sim.stop()


# -- convergence ---------------------------------------------------------------------------------


async def test_a_standalone_replica_with_four_instances_converges(
    cluster: Cluster, kube: KubeClient
) -> None:
    recorder = EventRecorder(kube, burst=100, refill_interval=1.0)
    await recorder.start()
    try:
        await cluster.controller(events=recorder)
        await cluster.create(irep_body("pool-a", replicas=4))
        await eventually(lambda: cluster.converged("pool-a", 4), what="4 Ready Instances")
        await recorder.flush()
    finally:
        await recorder.stop()
    irep = await cluster.get("pool-a")
    status = irep["status"]
    assert names.FINALIZER in irep["metadata"]["finalizers"]
    assert (status["replicas"], status["servingReplicas"], status["availableReplicas"]) == (4, 4, 4)
    assert status["labelSelector"] == "ome.io/inferenceservice=pool-a,component=engine"
    assert status["currentRevision"] == status["updateRevision"]
    assert {c["type"]: c["status"] for c in status["conditions"]} == {
        "Ready": "True",
        "Progressing": "False",
    }
    rows = status["instanceStatuses"]
    assert [(r["index"], r["incarnation"], r["podCount"], r["servingPodCount"]) for r in rows] == [
        (i, 1, 1, 1) for i in range(4)
    ]
    pods = sorted(await cluster.pods(), key=lambda p: p["metadata"]["name"])
    assert [p["metadata"]["name"] for p in pods] == [f"pool-a-{i}-default-0" for i in range(4)]
    for pod in pods:
        labels = pod["metadata"]["labels"]
        assert labels["ome.io/inferenceservice"] == "pool-a"
        assert labels["ome.io/revision-hash"] == status["updateRevision"][-8:]
        assert labels["ome.io/managed-by"] == "OMENative"
        assert labels["app"] == "chat"
    events = await kube.list_all(EVENTS, cluster.namespace)
    reasons = [(e["involvedObject"]["name"], e["reason"]) for e in events]
    assert reasons.count(("pool-a", names.EVENT_INSTANCE_CREATED)) == 4
    assert reasons.count(("pool-a", names.EVENT_INSTANCE_READY)) == 4


async def test_two_instances_of_a_leader_and_two_workers_converge(cluster: Cluster) -> None:
    await cluster.controller()
    runners: list[dict[str, Any]] = [
        {"name": "leader", "template": TEMPLATE},
        {"name": "worker", "size": 2, "template": TEMPLATE},
    ]
    await cluster.create(irep_body("chat-engine", replicas=2, runners=runners))
    await eventually(lambda: cluster.converged("chat-engine", 2, pods_each=3), what="2 x 3 pods")
    names_ = sorted(p["metadata"]["name"] for p in await cluster.pods())
    assert names_ == sorted(
        f"chat-engine-{i}-{r}" for i in range(2) for r in ("leader-0", "worker-0", "worker-1")
    )
    rows = (await cluster.get("chat-engine"))["status"]["instanceStatuses"]
    assert [r["podCount"] for r in rows] == [3, 3]
    assert cluster.events.seen.count(("InferenceReplica", "chat-engine", "InstanceReady")) == 2


async def test_deleting_the_replica_drains_every_pod_and_releases_the_finalizer(
    cluster: Cluster,
) -> None:
    await cluster.controller(PlanSettings(scale_down_pod_batch_size=2))
    await cluster.create(irep_body("doomed", replicas=3))
    await eventually(lambda: cluster.converged("doomed", 3), what="3 Ready Instances")
    await cluster.kube.delete(INFERENCE_REPLICAS, "doomed", cluster.namespace)

    async def gone() -> bool:
        try:
            await cluster.get("doomed")
        except NotFound:
            return not await cluster.pods()
        return False

    await eventually(gone, what="the replica and its pods to be gone")
    assert cluster.watch.routed_deletions == []
    assert len(cluster.watch.deleted) == 3


# -- batches -------------------------------------------------------------------------------------


async def test_scale_up_creates_pods_in_passes_of_at_most_the_batch_size(cluster: Cluster) -> None:
    await cluster.controller(PlanSettings(scale_up_pod_batch_size=5))
    await cluster.create(irep_body("chat-engine", replicas=4))
    await eventually(lambda: cluster.converged("chat-engine", 4), what="4 Instances")
    await cluster.scale("chat-engine", 20)
    await eventually(lambda: cluster.converged("chat-engine", 20), what="20 Instances")
    passes = cluster.watch.passes()
    assert sum(passes) == 20
    assert max(passes) <= 5
    assert len(passes) >= 1 + 16 // 5  # the first 4 in one pass, then at least 4 batches


async def test_scale_down_by_ten_percent_logs_waves_and_never_deletes_a_routed_pod(
    cluster: Cluster,
) -> None:
    lines = WaveLines()
    logger = logging.getLogger("omed.controllers.inferencereplica")
    logger.addHandler(lines)
    logger.setLevel(logging.INFO)
    try:
        settings = PlanSettings(
            scale_down_pod_batch_size=Percent(10), scale_down_requeue_interval=5.0
        )
        await cluster.controller(settings)
        await cluster.create(irep_body("chat-engine", replicas=20))
        await eventually(lambda: cluster.converged("chat-engine", 20), what="20 Instances")
        await cluster.scale("chat-engine", 2)
        await eventually(lambda: cluster.converged("chat-engine", 2), timeout=120, what="2 left")
    finally:
        logger.removeHandler(lines)
    assert cluster.watch.routed_deletions == []
    assert len(cluster.watch.deleted) == 18
    assert lines.lines, "no OMENative scale-down wave line"
    first = lines.lines[0]
    assert set(first) >= {
        "configuredPodBudget",
        "podBudget",
        "podFootprint",
        "activeInstances",
        "deferredInstances",
    }
    assert first["configuredPodBudget"] == "10%"
    assert (first["podFootprint"], first["podBudget"]) == (20, 2)
    for line in lines.lines:  # resolved against the footprint on every pass, rounded up
        assert line["podBudget"] == max(1, -(-line["podFootprint"] // 10))
    assert lines.lines[-1]["deferredInstances"] == 0
    assert {line["podBudget"] for line in lines.lines} == {1, 2}


# -- kill and resume -----------------------------------------------------------------------------


@pytest.mark.parametrize("seed", [7, 11, 23])
async def test_a_killed_controller_resumes_with_exactly_the_wanted_pods(
    cluster: Cluster, seed: int
) -> None:
    rng = random.Random(seed)
    paced = PlanSettings(scale_up_pod_batch_size=2, scale_down_pod_batch_size=2)
    running = await cluster.controller(paced)
    await cluster.create(irep_body("chat-engine", replicas=2))
    await eventually(lambda: cluster.converged("chat-engine", 2), what="2 Instances")

    async def kill_when(started: Callable[[], bool], measure: Callable[[], int]) -> list[int]:
        nonlocal running

        async def under_way() -> bool:
            return started()

        # the first kill lands as soon as the change is under way
        await eventually(under_way, interval=0.002, what="the change to start")
        seen = []
        for _ in range(4):
            await running.kill()
            seen.append(measure())
            running = await cluster.controller(paced)
            await asyncio.sleep(rng.uniform(0.0, 0.3))  # the next ones at random points
        return seen

    await cluster.scale("chat-engine", 16)
    created = await kill_when(lambda: len(cluster.watch.uids) > 2, lambda: len(cluster.watch.uids))
    assert any(2 < seen < 16 for seen in created), created  # killed mid-flight
    await eventually(lambda: cluster.converged("chat-engine", 16), timeout=120, what="16")
    duplicates = {name: uids for name, uids in cluster.watch.uids.items() if len(uids) > 1}
    assert duplicates == {}
    assert len(cluster.watch.uids) == 16

    await cluster.scale("chat-engine", 3)
    deleted = await kill_when(
        lambda: any(cluster.watch.last_ready.get(u) is False for u in cluster.watch.uids_now()),
        lambda: len(cluster.watch.deleted),
    )
    assert any(seen < 13 for seen in deleted), deleted  # killed mid-flight
    await eventually(lambda: cluster.converged("chat-engine", 3), timeout=120, what="3")
    assert cluster.watch.routed_deletions == []
    assert len(cluster.watch.deleted) == 13
    names_ = sorted(p["metadata"]["name"] for p in await cluster.pods())
    assert names_ == [f"chat-engine-{i}-default-0" for i in range(3)]
