"""Acceptance of the OMENative core with the manager as a real process (``python -m omed``).

What a user of a cluster sees, with nothing of the manager in the test's process: a
ServingRuntime and an InferenceService (an engine of single-pod Instances and a decoder of
two Instances of a leader and two workers) converge; Ready turns True only when every
wanted pod is really Ready; scale-ups create pods in passes of at most
``scaleUpPodBatchSize``; scale-downs by ``"10%"`` log their ``OMENative scale-down wave``
lines and never delete a pod that is still routed; a ``kill -9`` of the manager in the middle
of a scale-up or a scale-down leaves a new manager to finish with exactly the wanted pods;
deleting the InferenceService leaves nothing behind.

The manager's namespace (its ``inferenceservice-config`` ConfigMap and its Lease) is the
test's own namespace (the e2e conftest's ``managers`` and ``manager_config`` fixtures), so
managers of other tests never share a Lease with it. The node simulator only runs the pods
of that namespace.

:class:`Observer` watches as a user would, from its own informers: every pod with its uid,
incarnation and creating operation, the Ready condition each pod held when its deletion was
accepted, and every stored version of the InferenceService (a watch, so no version is
missed): each one that says Ready is checked against the pods as they were at that very
resourceVersion (a list with ``resourceVersionMatch=Exact``).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import defaultdict
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import _support as support
import pytest
from _support import condition, eventually, pod_ready

from omed.api.constants import LABEL_COMPONENT, LABEL_INCARNATION
from omed.controllers.inferencereplica.core import names
from omed.controllers.inferencereplica.core.operations import pass_stamp
from omed.informers import Handlers, InformerFactory
from omed.informers.transform import Obj, identity
from omed.kube.client import KubeClient
from omed.kube.errors import NotFound
from omed.kube.resources import INFERENCE_REPLICAS, INFERENCE_SERVICES, PODS
from omed.statuscodec import decode_status

pytestmark = [pytest.mark.integration, pytest.mark.slow]

SERVICE = "chat"
ENGINE, DECODER = f"{SERVICE}-engine", f"{SERVICE}-decoder"
DECODER_PODS = 3  # a leader and two workers
LIFECYCLE = support.lifecycle(scale_up_pod_batch_size=5)
WAVE_FIELDS = {
    "configuredPodBudget",
    "podBudget",
    "podFootprint",
    "activeInstances",
    "deferredInstances",
}

RUNTIME = support.serving_runtime(
    "srt-pd",
    engineConfig={
        "runner": {
            "name": "ome-container",
            "image": "ome/srt:1.0",
            "args": ["--disaggregation-mode", "prefill"],
            "resources": {"limits": {"nvidia.com/gpu": "1"}},
        },
    },
    decoderConfig={
        "leader": {"runner": {"name": "ome-container", "image": "ome/srt:1.0"}},
        "worker": {"size": 2, "runner": {"name": "ome-container", "image": "ome/srt:1.0"}},
    },
)


def service_body(engine: int) -> dict[str, Any]:
    return support.inference_service(
        SERVICE,
        runtime="srt-pd",
        engine={"minReplicas": engine, "maxReplicas": engine},
        decoder={"minReplicas": 2, "maxReplicas": 2},
    )


def component_of(pod: Mapping[str, Any]) -> str:
    return str((pod["metadata"].get("labels") or {}).get(LABEL_COMPONENT, ""))


def engine_pod_names(count: int) -> list[str]:
    return [names.pod_name(ENGINE, i, "default", 0) for i in range(count)]


def decoder_pod_names() -> list[str]:
    runners = (("leader", 0), ("worker", 0), ("worker", 1))
    return [names.pod_name(DECODER, i, r, o) for i in range(2) for r, o in runners]


# -- what a user sees ------------------------------------------------------------------------


@dataclass
class PodRecord(support.PodIdentity):
    component: str
    operation: str
    seen_at: float
    deleted: bool = False
    ready_when_deleted: bool | None = None
    last_ready: bool = False


@dataclass
class ReadySample:
    resource_version: str
    generation: int
    wanted: dict[str, int]
    pods_ready: dict[str, int] = field(default_factory=dict)


class Observer:
    """The namespace's pods (every uid ever seen) and every Ready version of the service."""

    def __init__(self, kube: KubeClient, namespace: str) -> None:
        self.kube = kube
        self.namespace = namespace
        self.factory = InformerFactory(kube)
        self.pods = self.factory.informer(PODS, namespace=namespace, transform=identity)
        self.records: dict[str, PodRecord] = {}  # by uid
        self.pods.add_event_handler(
            Handlers(on_add=self._seen, on_update=lambda _o, n: self._seen(n), on_delete=self._gone)
        )
        self.services = self.factory.informer(
            INFERENCE_SERVICES, namespace=namespace, transform=identity
        )
        self.services.add_event_handler(
            Handlers(on_add=self._service, on_update=lambda _o, n: self._service(n))
        )
        self.ready_samples: list[ReadySample] = []
        self.premature: list[str] = []
        self._to_check: asyncio.Queue[ReadySample] = asyncio.Queue()
        self._sampler: asyncio.Task[None] | None = None

    async def start(self) -> None:
        self.factory.start()
        assert await self.factory.wait_for_cache_sync(timeout=30)
        self._sampler = asyncio.create_task(self._check_ready())

    async def stop(self) -> None:
        if self._sampler is not None:
            self._sampler.cancel()
            await asyncio.gather(self._sampler, return_exceptions=True)
        await self.factory.stop()

    def check_sampler(self) -> None:
        if self._sampler is not None and self._sampler.done():
            self._sampler.result()  # raises what killed it

    # pods -----------------------------------------------------------------------------------

    def _seen(self, pod: Obj) -> None:
        meta = pod["metadata"]
        record = self.records.get(meta["uid"])
        if record is None:
            record = PodRecord(
                name=meta["name"],
                uid=meta["uid"],
                component=component_of(pod),
                incarnation=str((meta.get("labels") or {}).get(LABEL_INCARNATION)),
                operation=str((meta.get("annotations") or {}).get(names.ANNOTATION_OPERATION_ID)),
                seen_at=time.monotonic(),
            )
            self.records[meta["uid"]] = record
        if meta.get("deletionTimestamp") and not record.deleted:
            # The event that carries the deletion shows the pod as the API server held it
            # when it accepted the delete.
            record.deleted = True
            record.ready_when_deleted = pod_ready(pod)
        record.last_ready = pod_ready(pod)

    def _gone(self, pod: Obj) -> None:
        record = self.records.get(pod["metadata"]["uid"])
        if record is None:
            self._seen(pod)
            record = self.records[pod["metadata"]["uid"]]
        if not record.deleted:  # deleted at once, without a grace period
            record.deleted = True
            record.ready_when_deleted = record.last_ready

    def of(self, component: str) -> list[PodRecord]:
        return [r for r in self.records.values() if r.component == component]

    def deleted(self, component: str) -> list[PodRecord]:
        return [r for r in self.of(component) if r.deleted]

    def routed_deletions(self) -> list[str]:
        return [r.name for r in self.records.values() if r.deleted and r.ready_when_deleted]

    def duplicates(self) -> dict[str, list[tuple[str, str]]]:
        """Pod names seen with two uids of one incarnation (a pod created twice)."""
        return support.duplicate_pods(self.records.values())

    def passes(self, records: list[PodRecord]) -> list[int]:
        """Pods created per reconcile pass, in order (the pass stamp of their operation)."""
        counts: dict[str, int] = defaultdict(int)
        for record in records:
            counts[pass_stamp(record.operation)] += 1
        return [counts[stamp] for stamp in sorted(counts)]

    # Ready, every version ----------------------------------------------------------------

    def _service(self, isvc: Obj) -> None:
        meta, status = isvc["metadata"], isvc.get("status") or {}
        if condition(isvc, "Ready") != "True":
            return
        if status.get("observedGeneration") != meta.get("generation"):
            return  # a claim about an older spec
        spec = isvc["spec"]
        wanted = {
            "engine": int(spec["engine"]["minReplicas"]),
            "decoder": int(spec["decoder"]["minReplicas"]) * DECODER_PODS,
        }
        self._to_check.put_nowait(
            ReadySample(str(meta["resourceVersion"]), int(meta["generation"]), wanted)
        )

    async def _check_ready(self) -> None:
        """Check every stored version that says Ready against the pods at that version."""
        while True:
            sample = await self._to_check.get()
            # The pods exactly as they were when this status was stored.
            listed = await self.kube.list_page(
                PODS,
                self.namespace,
                resourceVersion=sample.resource_version,
                resourceVersionMatch="Exact",
            )
            ready: dict[str, int] = defaultdict(int)
            for pod in listed.get("items") or ():
                if pod_ready(pod) and not pod["metadata"].get("deletionTimestamp"):
                    ready[component_of(pod)] += 1
            sample.pods_ready = dict(ready)
            self.ready_samples.append(sample)
            if any(ready[c] < n for c, n in sample.wanted.items()):
                self.premature.append(
                    f"Ready at {sample.resource_version} with {dict(ready)} of "
                    f"{sample.wanted} pods Ready"
                )
            self._to_check.task_done()

    async def checked(self) -> None:
        """Wait until every Ready version seen so far has been checked."""
        self.check_sampler()
        await asyncio.wait_for(self._to_check.join(), timeout=30)


# -- the cluster ---------------------------------------------------------------------------


class World(support.ManagerWorld):
    """The test's namespace: simulator, observer, and the manager processes."""

    def __init__(self, *, kube: KubeClient, namespace: str, managers: Any) -> None:
        super().__init__(kube=kube, namespace=namespace, managers=managers)
        self.observer = Observer(kube, namespace)

    async def scale_engine(self, engine: int) -> None:
        patch = {"spec": {"engine": {"minReplicas": engine, "maxReplicas": engine}}}
        await self.patch_service(SERVICE, patch)

    async def replica(self, name: str) -> dict[str, Any]:
        found: dict[str, Any] = await self.kube.get(INFERENCE_REPLICAS, name, self.namespace)
        return found

    async def converged(self, engine: int) -> bool:
        """The whole service at ``engine`` engine Instances: Ready, rows, counts, pods."""
        self.observer.check_sampler()
        self.check_manager()
        isvc = await self.kube.get(INFERENCE_SERVICES, SERVICE, self.namespace)
        status = isvc.get("status") or {}
        if condition(isvc, "Ready") != "True":
            return False
        if status.get("observedGeneration") != isvc["metadata"]["generation"]:
            return False
        components = status.get("components") or {}
        if (components.get("engine") or {}).get("readyReplicas") != engine:
            return False
        pods = await self.pods()
        if len(pods) != engine + 2 * DECODER_PODS:
            return False
        if not all(pod_ready(p) and not p["metadata"].get("deletionTimestamp") for p in pods):
            return False
        for name, count in ((ENGINE, engine), (DECODER, 2)):
            irep = await self.replica(name)
            rows = decode_status(irep.get("status"), max_rows=20000)
            if len(rows) != count or any(r.get("operation") for r in rows):
                return False
        return True

    async def assert_converged(self, engine: int) -> None:
        """Every figure of the converged service, exactly (call after :meth:`converged`)."""
        isvc = await self.kube.get(INFERENCE_SERVICES, SERVICE, self.namespace)
        status = isvc["status"]
        assert {c["type"]: c["status"] for c in status["conditions"]} == {
            "EngineReady": "True",
            "DecoderReady": "True",
            "Ready": "True",
        }
        engine_summary = status["components"]["engine"]
        decoder_summary = status["components"]["decoder"]
        assert engine_summary["inferenceReplica"] == ENGINE
        assert (engine_summary["replicas"], engine_summary["readyReplicas"]) == (engine, engine)
        assert engine_summary["servingReplicas"] == engine
        assert (decoder_summary["replicas"], decoder_summary["readyReplicas"]) == (2, 2)
        assert decoder_summary["servingReplicas"] == 2

        for name, count, pods_each in ((ENGINE, engine, 1), (DECODER, 2, DECODER_PODS)):
            irep = await self.replica(name)
            irep_status = irep["status"]
            assert irep["spec"]["replicas"] == count
            assert irep_status["observedGeneration"] == irep["metadata"]["generation"]
            assert (
                irep_status["replicas"],
                irep_status["readyReplicas"],
                irep_status["servingReplicas"],
                irep_status["availableReplicas"],
            ) == (count, count, count, count)
            wanted_conditions = {
                "Ready": ("True", names.READY_ALL),
                "Progressing": ("False", names.PROGRESS_COMPLETE),
            }
            if pods_each > 1:  # a gang, on a cluster without the PodGroup CRD
                wanted_conditions[names.CONDITION_GANG_UNAVAILABLE] = (
                    "True",
                    names.REASON_POD_GROUP_CRD_NOT_INSTALLED,
                )
            conditions = irep_status["conditions"]
            assert {c["type"]: (c["status"], c["reason"]) for c in conditions} == wanted_conditions
            rows = decode_status(irep_status, max_rows=20000)
            assert [r["index"] for r in rows] == list(range(count))
            for row in rows:
                assert row["phase"] == "Ready", row
                assert (row["podCount"], row["servingPodCount"]) == (pods_each, pods_each), row
                assert "operation" not in row, row
                assert row["runningRevision"] == irep_status["updateRevision"], row

        pods = await self.pods()
        assert sorted(p["metadata"]["name"] for p in pods) == sorted(
            engine_pod_names(engine) + decoder_pod_names()
        )
        for pod in pods:
            gates = {c["type"]: c["status"] for c in pod["status"]["conditions"]}
            assert gates.get("ome.io/serving") == "True", pod["metadata"]["name"]

    async def nothing_left(self) -> bool:
        try:
            await self.kube.get(INFERENCE_SERVICES, SERVICE, self.namespace)
            return False
        except NotFound:
            pass
        left = await self.kube.list_all(INFERENCE_REPLICAS, self.namespace)
        return not left and not await self.pods()

    def wave_lines(self, manager: Any) -> list[dict[str, Any]]:
        lines = []
        # The chart's console encoder: time, level, logger, message, then the fields as JSON.
        for line in manager.log_lines(names.LogLine.SCALE_DOWN_WAVE):
            parts = line.split("\t")
            if len(parts) == 5 and parts[3] == names.LogLine.SCALE_DOWN_WAVE:
                lines.append({"msg": parts[3], **json.loads(parts[4])})
        return lines


@pytest.fixture
async def world(
    kube: KubeClient, namespace: str, managers: Any, manager_config: Any
) -> AsyncIterator[World]:
    await manager_config(lifecycle=LIFECYCLE)
    world = World(kube=kube, namespace=namespace, managers=managers)
    async with world.running(world.observer, nodes=4):
        yield world


# -- the tests -------------------------------------------------------------------------------


async def test_the_service_converges_scales_in_batches_and_waves_and_deletes_cleanly(
    world: World,
) -> None:
    manager = await world.start_manager("manager-a")
    await world.create_service(RUNTIME, service_body(engine=4))

    # An engine of 4 single-pod Instances and a decoder of 2 x (leader + 2 workers).
    await eventually(lambda: world.converged(4), timeout=120, what="4 + 2 Instances Ready")
    await world.assert_converged(4)
    decoder_ops = {r.name: r.operation for r in world.observer.of("decoder")}
    for index in range(2):  # an Instance's pods are made together, by one operation
        instance = [
            f"{DECODER}-{index}-{runner}" for runner in ("leader-0", "worker-0", "worker-1")
        ]
        assert len({decoder_ops[name] for name in instance}) == 1, decoder_ops
    assert all(count <= 5 for count in world.observer.passes(list(world.observer.records.values())))

    # 4 -> 20 with scaleUpPodBatchSize 5.
    before = {r.uid for r in world.observer.of("engine")}
    await world.scale_engine(20)
    await eventually(lambda: world.converged(20), timeout=180, what="20 engine Instances")
    await world.assert_converged(20)
    new = [r for r in world.observer.of("engine") if r.uid not in before]
    passes = world.observer.passes(new)
    assert sum(passes) == 16
    assert max(passes) <= 5, passes
    assert len(passes) >= 4, passes  # 16 pods can't come in fewer passes of 5
    assert world.observer.deleted("engine") == []

    # 20 -> 2 with scaleDownPodBatchSize "10%".
    await world.scale_engine(2)
    await eventually(lambda: world.converged(2), timeout=240, what="2 engine Instances")
    await world.assert_converged(2)
    assert world.observer.routed_deletions() == []
    deleted = world.observer.deleted("engine")
    assert sorted(r.name for r in deleted) == sorted(engine_pod_names(20)[2:])
    waves = world.wave_lines(manager)
    assert waves, "no OMENative scale-down wave line in the manager's log"
    for wave in waves:
        assert set(wave) >= WAVE_FIELDS, wave
        assert wave["inferenceReplica"] == ENGINE
        assert wave["configuredPodBudget"] == "10%"
        # resolved against the footprint on every pass, rounded up, never below 1
        assert wave["podBudget"] == max(1, -(-wave["podFootprint"] // 10)), wave
    assert (waves[0]["podFootprint"], waves[0]["podBudget"]) == (20, 2)
    assert waves[0]["activeInstances"] == 2 and waves[0]["deferredInstances"] == 16
    assert waves[-1]["deferredInstances"] == 0
    assert {w["podBudget"] for w in waves} == {1, 2}

    # Every stored version of the service that said Ready, checked against its pods.
    await world.observer.checked()
    assert world.observer.premature == []
    checked = {(s.wanted["engine"], s.wanted["decoder"]) for s in world.observer.ready_samples}
    assert checked >= {(4, 6), (20, 6), (2, 6)}, checked
    assert world.observer.duplicates() == {}

    await world.kube.delete(INFERENCE_SERVICES, SERVICE, world.namespace)
    await eventually(world.nothing_left, timeout=120, what="nothing left")
    assert world.observer.routed_deletions() == []
    assert manager.running()


async def test_a_manager_killed_mid_scale_is_finished_by_the_next_one(world: World) -> None:
    await world.start_manager("manager-a")
    await world.create_service(RUNTIME, service_body(engine=4))
    await eventually(lambda: world.converged(4), timeout=120, what="4 + 2 Instances Ready")

    # kill -9 in the middle of a scale-up: once the first new pod exists.
    await world.scale_engine(20)
    await eventually(
        lambda: len(world.observer.of("engine")) > 4, timeout=60, interval=0.005, what="scale-up"
    )
    world.kill_manager()
    made = [p for p in await world.pods() if component_of(p) == "engine"]
    assert 4 < len(made) < 20, len(made)  # some, not all, of the change exists

    await world.start_manager("manager-b")
    await eventually(lambda: world.converged(20), timeout=180, what="20 engine Instances")
    await world.assert_converged(20)
    assert world.observer.duplicates() == {}
    assert sorted(r.name for r in world.observer.of("engine")) == sorted(engine_pod_names(20))
    assert world.observer.deleted("engine") == []

    # kill -9 in the middle of a scale-down: once the first pod is deleted.
    await world.scale_engine(2)
    await eventually(
        lambda: world.observer.deleted("engine"), timeout=60, interval=0.005, what="scale-down"
    )
    world.kill_manager()
    live = [
        p
        for p in await world.pods()
        if component_of(p) == "engine" and not p["metadata"].get("deletionTimestamp")
    ]
    assert 2 <= len(live) < 20, len(live)  # some, not all, of the pods are gone or going

    await world.start_manager("manager-c")
    await eventually(lambda: world.converged(2), timeout=240, what="2 engine Instances")
    await world.assert_converged(2)
    assert world.observer.routed_deletions() == []
    assert sorted(r.name for r in world.observer.deleted("engine")) == sorted(
        engine_pod_names(20)[2:]
    )
    assert world.observer.duplicates() == {}
    assert len(world.observer.records) == 20 + 2 * DECODER_PODS  # nothing made twice

    await world.observer.checked()
    assert world.observer.premature == []

    await world.kube.delete(INFERENCE_SERVICES, SERVICE, world.namespace)
    await eventually(world.nothing_left, timeout=120, what="nothing left")
