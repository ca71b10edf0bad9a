"""A ``kill -9`` of the manager (``python -m omed``) in the middle of an update.

An InferenceService with one engine component of :data:`WANTED` single-pod Instances
converges; its runner image changes, so every Instance has to move to a new revision under
``lifecycle.updateStrategy``. Once an Instance's row carries an ``Update`` operation and (for
SurgeThenDrain) a surge pod exists, or later while an Instance drains or is rebuilt, the
manager is killed with SIGKILL and a new one started;
the new one must finish the update: every Instance on the new revision, exactly the wanted
pods (no surge or old-revision pod left, no pod created twice), the InferenceReplica's counts
and conditions those of a converged replica, and the InferenceService Ready.

:class:`PodLog` watches the namespace's pods from its own informer and, on every pod event,
samples how many Instances serve (every pod Ready and not being deleted): SurgeThenDrain must
never go below the wanted count, RecreatePod never below it less ``maxUnavailable`` (1).
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import Any

import _support as support
import pytest
from _support import condition, eventually, pod_ready

from omed.api.constants import LABEL_INCARNATION, LABEL_INSTANCE_INDEX
from omed.controllers.inferencereplica.core import names
from omed.controllers.inferencereplica.core.observe import pod_revision
from omed.informers import Handlers, InformerFactory
from omed.informers.transform import Obj, identity
from omed.kube.client import KubeClient
from omed.kube.resources import INFERENCE_REPLICAS, INFERENCE_SERVICES, PODS
from omed.statuscodec import decode_status
from omed_devcluster.simulator import Timings

pytestmark = [pytest.mark.integration, pytest.mark.slow]

SERVICE = "chat"
ENGINE = f"{SERVICE}-engine"
WANTED = 4
OLD_IMAGE, NEW_IMAGE = "ome/srt:1.0", "ome/srt:2.0"
LIFECYCLE = support.lifecycle(scale_up_pod_batch_size=50)
RUNTIME = support.serving_runtime(
    "srt-engine",
    engineConfig={
        "runner": {
            "name": "ome-container",
            "image": OLD_IMAGE,
            "resources": {"limits": {"nvidia.com/gpu": "1"}},
        },
    },
)


def service_body(strategy: str) -> dict[str, Any]:
    return support.inference_service(
        SERVICE,
        runtime="srt-engine",
        engine={
            "minReplicas": WANTED,
            "maxReplicas": WANTED,
            "lifecycle": {"updateStrategy": {"type": strategy}},
        },
    )


def live(pod: Mapping[str, Any]) -> bool:
    return not pod["metadata"].get("deletionTimestamp")


def label(pod: Mapping[str, Any], key: str) -> str:
    return str((pod["metadata"].get("labels") or {}).get(key, ""))


def revision_of(pod: Mapping[str, Any]) -> str:
    """The pod's full revision name (from ``ome.io/revision-hash`` and its identity labels)."""
    return pod_revision(pod["metadata"].get("labels") or {}) or ""


def wanted_pod_names() -> list[str]:
    return [names.pod_name(ENGINE, i, "default", 0) for i in range(WANTED)]


@dataclass
class PodRecord(support.PodIdentity):
    index: str
    revision: str
    image: str


class PodLog:
    """Every pod uid ever seen, and the fewest serving Instances since :meth:`arm`."""

    def __init__(self, kube: KubeClient, namespace: str) -> None:
        self.factory = InformerFactory(kube)
        self.pods = self.factory.informer(PODS, namespace=namespace, transform=identity)
        self.records: dict[str, PodRecord] = {}
        self.low: int | None = None
        self.low_at: list[str] = []
        self.samples = 0
        self.pods.add_event_handler(
            Handlers(
                on_add=self._seen,
                on_update=lambda _o, n: self._seen(n),
                on_delete=lambda _o: self._sample(),
            )
        )

    async def start(self) -> None:
        self.factory.start()
        assert await self.factory.wait_for_cache_sync(timeout=30)

    async def stop(self) -> None:
        await self.factory.stop()

    def _seen(self, pod: Obj) -> None:
        meta = pod["metadata"]
        if meta["uid"] not in self.records:
            self.records[meta["uid"]] = PodRecord(
                name=meta["name"],
                uid=meta["uid"],
                index=label(pod, LABEL_INSTANCE_INDEX),
                incarnation=label(pod, LABEL_INCARNATION),
                revision=revision_of(pod),
                image=str(pod["spec"]["containers"][0].get("image")),
            )
        self._sample()

    def serving(self) -> int:
        """Instances whose every pod is Ready and not being deleted (one pod each here)."""
        by_index: dict[str, list[Obj]] = defaultdict(list)
        for pod in self.pods.store.list():
            by_index[label(pod, LABEL_INSTANCE_INDEX)].append(pod)
        return sum(1 for pods in by_index.values() if all(pod_ready(p) and live(p) for p in pods))

    def arm(self) -> None:
        self.low, self.samples = self.serving(), 0

    def _sample(self) -> None:
        if self.low is None:
            return
        self.samples += 1
        now = self.serving()
        if now < self.low:
            self.low = now
            self.low_at.append(
                f"{now} serving: "
                + ", ".join(
                    f"{p['metadata']['name']}(ready={pod_ready(p)},live={live(p)})"
                    for p in sorted(self.pods.store.list(), key=lambda p: p["metadata"]["name"])
                )
            )

    def duplicates(self) -> dict[str, list[tuple[str, str]]]:
        """Pod names seen with two uids of one incarnation (a pod created twice)."""
        return support.duplicate_pods(self.records.values())


class World(support.ManagerWorld):
    """The test's namespace: simulator, pod log, and the manager processes."""

    def __init__(self, *, kube: KubeClient, namespace: str, managers: Any) -> None:
        super().__init__(kube=kube, namespace=namespace, managers=managers)
        self.pod_log = PodLog(kube, namespace)

    async def set_image(self, image: str) -> None:
        patch = {"spec": {"engine": {"runner": {"image": image}}}}
        await self.patch_service(SERVICE, patch)

    async def replica(self) -> dict[str, Any]:
        found: dict[str, Any] = await self.kube.get(INFERENCE_REPLICAS, ENGINE, self.namespace)
        return found

    async def rows(self) -> list[dict[str, Any]]:
        return list(decode_status((await self.replica()).get("status"), max_rows=20000))

    async def converged(self, image: str) -> bool:
        """Ready, every Instance idle on the update revision, exactly the wanted pods."""
        self.check_manager()
        isvc = await self.kube.get(INFERENCE_SERVICES, SERVICE, self.namespace)
        if condition(isvc, "Ready") != "True":
            return False
        if (isvc.get("status") or {}).get("observedGeneration") != isvc["metadata"]["generation"]:
            return False
        irep = await self.replica()
        status = irep.get("status") or {}
        revision = status.get("updateRevision")
        if not revision or status.get("currentRevision") != revision:
            return False
        if status.get("observedGeneration") != irep["metadata"]["generation"]:
            return False
        rows = decode_status(status, max_rows=20000)
        if len(rows) != WANTED or any(r.get("operation") for r in rows):
            return False
        pods = await self.pods()
        return len(pods) == WANTED and all(
            live(p)
            and pod_ready(p)
            and revision_of(p) == revision
            and p["spec"]["containers"][0]["image"] == image
            for p in pods
        )

    async def assert_converged(self, image: str) -> str:
        """Every figure of the converged replica, exactly; returns its revision."""
        isvc = await self.kube.get(INFERENCE_SERVICES, SERVICE, self.namespace)
        assert {c["type"]: c["status"] for c in isvc["status"]["conditions"]} == {
            "EngineReady": "True",
            "Ready": "True",
        }
        summary = isvc["status"]["components"]["engine"]
        assert (summary["replicas"], summary["readyReplicas"]) == (WANTED, WANTED)
        assert summary["servingReplicas"] == WANTED

        irep = await self.replica()
        status = irep["status"]
        revision = str(status["updateRevision"])
        assert revision.startswith(f"{SERVICE}-engine-")
        assert status["currentRevision"] == revision
        assert status["observedGeneration"] == irep["metadata"]["generation"]
        assert (
            status["replicas"],
            status["readyReplicas"],
            status["servingReplicas"],
            status["availableReplicas"],
            status["updatedReplicas"],
        ) == (WANTED,) * 5
        assert {c["type"]: (c["status"], c["reason"]) for c in status["conditions"]} == {
            "Ready": ("True", names.READY_ALL),
            "Progressing": ("False", names.PROGRESS_COMPLETE),
        }
        assert not status.get("retryBlocks")
        rows = decode_status(status, max_rows=20000)
        assert [r["index"] for r in rows] == list(range(WANTED))
        for row in rows:
            assert row["phase"] == "Ready", row
            assert (row["podCount"], row["servingPodCount"]) == (1, 1), row
            assert "operation" not in row, row
            assert row["runningRevision"] == revision, row

        pods = await self.pods()
        assert sorted(p["metadata"]["name"] for p in pods) == sorted(wanted_pod_names())
        for pod in pods:
            assert revision_of(pod) == revision, pod["metadata"]["name"]
            assert pod["spec"]["containers"][0]["image"] == image
            gates = {c["type"]: c["status"] for c in pod["status"]["conditions"]}
            assert gates.get("ome.io/serving") == "True", pod["metadata"]["name"]
        return revision


@pytest.fixture
def sim_timings() -> Timings:
    """The node simulator's timings (a test parametrizes this name to change them)."""
    return Timings()


@pytest.fixture
async def world(
    kube: KubeClient, namespace: str, managers: Any, manager_config: Any, sim_timings: Timings
) -> AsyncIterator[World]:
    await manager_config(lifecycle=LIFECYCLE)
    world = World(kube=kube, namespace=namespace, managers=managers)
    async with world.running(world.pod_log, nodes=2, timings=sim_timings):
        yield world


MOMENT_STEPS: dict[str, frozenset[str] | None] = {
    "start": None,
    "drain": frozenset({names.STEP_DRAIN}),
    "recreate": frozenset(
        {names.STEP_WAIT_PODS_GONE, names.STEP_CREATE_PODS, names.STEP_WAIT_READY}
    ),
}
"""When to kill: as soon as an Update is in flight (with its surge pod, under
SurgeThenDrain); while the Instance itself drains; once its old pod is deleted, while it is
rebuilt on the new revision."""


LOWEST = {"SurgeThenDrain": WANTED, "RecreatePod": WANTED - 1}
"""The fewest serving Instances each strategy allows (RecreatePod: maxUnavailable 1)."""


@pytest.mark.parametrize(
    ("strategy", "moment"),
    [
        ("SurgeThenDrain", "start"),
        ("SurgeThenDrain", "drain"),
        ("SurgeThenDrain", "recreate"),
        ("RecreatePod", "drain"),  # its first step: the same moment as "start"
        ("RecreatePod", "recreate"),
    ],
)
async def test_a_manager_killed_mid_update_is_finished_by_the_next_one(
    world: World, strategy: str, moment: str
) -> None:
    lowest = LOWEST[strategy]
    await world.start_manager("manager-a")
    await world.create_service(RUNTIME, service_body(strategy))
    await eventually(
        lambda: world.converged(OLD_IMAGE), timeout=120, what=f"{WANTED} Instances Ready"
    )
    old_revision = await world.assert_converged(OLD_IMAGE)
    first = {r.uid for r in world.pod_log.records.values()}
    assert len(first) == WANTED

    world.pod_log.arm()
    await world.set_image(NEW_IMAGE)
    wanted = set(wanted_pod_names())
    caught: dict[str, Any] = {}

    async def mid_update() -> bool:
        """An Update in flight, and for SurgeThenDrain a surge pod made for it."""
        rows = await world.rows()
        updates = [r for r in rows if (r.get("operation") or {}).get("type") == "Update"]
        steps = MOMENT_STEPS[moment]
        if steps is not None:
            updates = [r for r in updates if r["operation"].get("step") in steps]
        if not updates:
            return False
        pods = world.pod_log.pods.store.list()
        surges = [p for p in pods if p["metadata"]["name"] not in wanted and live(p)]
        if strategy == "SurgeThenDrain" and not surges:
            return False
        caught["operations"] = [
            (r["index"], r["operation"].get("step"), r["operation"].get("surgeIndex"))
            for r in rows
            if r.get("operation")
        ]
        caught["pods"] = sorted(
            (p["metadata"]["name"], label(p, LABEL_INCARNATION), pod_ready(p), live(p))
            for p in pods
        )
        return True

    await eventually(mid_update, timeout=60, what="an Update in flight", interval=0.02)
    world.kill_manager()
    after_kill = await world.pods()
    revisions = {revision_of(p) for p in after_kill}
    assert old_revision in revisions, (revisions, caught)  # not all of it was done
    print(f"killed mid-update ({strategy}, {moment}):", json.dumps(caught, default=str))

    await world.start_manager("manager-b")
    await eventually(
        lambda: world.converged(NEW_IMAGE),
        timeout=180,
        what=f"{WANTED} Instances on the new revision",
    )
    new_revision = await world.assert_converged(NEW_IMAGE)
    assert new_revision != old_revision

    log = world.pod_log
    assert log.duplicates() == {}
    by_name: dict[str, list[PodRecord]] = defaultdict(list)
    for record in log.records.values():
        by_name[record.name].append(record)
    for name in wanted:  # each Instance: its first pod, then one on the new revision
        seen = by_name[name]
        assert [r.revision for r in seen] == [old_revision, new_revision], (name, seen)
        assert [r.image for r in seen] == [OLD_IMAGE, NEW_IMAGE], (name, seen)
        assert seen[1].incarnation != seen[0].incarnation, (name, seen)
    surges = [r for name, seen in by_name.items() if name not in wanted for r in seen]
    if strategy == "SurgeThenDrain":
        assert len(surges) == WANTED, surges  # one surge per Instance, none made twice
        assert {r.revision for r in surges} == {new_revision}
    else:
        assert surges == []
    assert log.samples > 0
    assert log.low is not None and log.low >= lowest, log.low_at


async def test_a_manager_killed_mid_in_place_update_is_finished_by_the_next_one(
    world: World,
) -> None:
    """InPlaceIfPossible: only the image changes, so pods are patched, never replaced; the
    node simulator restarts each patched container on the new image."""
    await world.start_manager("manager-a")
    await world.create_service(RUNTIME, service_body("InPlaceIfPossible"))
    await eventually(
        lambda: world.converged(OLD_IMAGE), timeout=120, what=f"{WANTED} Instances Ready"
    )
    old_revision = await world.assert_converged(OLD_IMAGE)
    uids = {p["metadata"]["name"]: p["metadata"]["uid"] for p in await world.pods()}

    world.pod_log.arm()
    await world.set_image(NEW_IMAGE)

    async def patching() -> bool:
        rows = await world.rows()
        return any((r.get("operation") or {}).get("type") == "Update" for r in rows)

    await eventually(patching, timeout=60, what="an in-place Update in flight", interval=0.02)
    world.kill_manager()
    await world.start_manager("manager-b")
    await eventually(
        lambda: world.converged(NEW_IMAGE),
        timeout=180,
        what=f"{WANTED} Instances on the new revision",
    )

    async def restarted() -> bool:
        pods = await world.pods()
        return all(
            pod_ready(p) and p["status"]["containerStatuses"][0]["restartCount"] == 1 for p in pods
        )

    await eventually(restarted, timeout=60, what="the patched containers restarted")
    new_revision = await world.assert_converged(NEW_IMAGE)
    assert new_revision != old_revision

    pods = await world.pods()
    assert {p["metadata"]["name"]: p["metadata"]["uid"] for p in pods} == uids  # patched
    assert len(world.pod_log.records) == WANTED  # no pod made, none replaced
    for pod in pods:
        (status,) = pod["status"]["containerStatuses"]
        assert (status["image"], status["restartCount"], status["ready"]) == (NEW_IMAGE, 1, True)
        assert status["lastState"]["terminated"]["reason"] == "Completed"
        assert label(pod, LABEL_INCARNATION) == "1"
    rows = await world.rows()
    assert [r["incarnation"] for r in rows] == [1] * WANTED
    assert world.pod_log.samples > 0  # capacity: see the test below


@pytest.mark.parametrize("sim_timings", [Timings(termination_delay=2.0)])
async def test_an_in_place_update_takes_down_at_most_max_unavailable_instances(
    world: World,
) -> None:
    """InPlaceIfPossible with maxUnavailable 1: at most one Instance down at a time while
    the kubelet (here the node simulator, whose containers take 2 s to stop) restarts each
    patched container on the new image, and complete only once they all run it."""
    await world.start_manager("manager-a")
    await world.create_service(RUNTIME, service_body("InPlaceIfPossible"))
    await eventually(
        lambda: world.converged(OLD_IMAGE), timeout=120, what=f"{WANTED} Instances Ready"
    )
    await world.assert_converged(OLD_IMAGE)
    world.pod_log.arm()
    await world.set_image(NEW_IMAGE)
    await eventually(
        lambda: world.converged(NEW_IMAGE),
        timeout=180,
        what=f"{WANTED} Instances on the new revision",
        interval=0.02,
    )
    running = {
        p["metadata"]["name"]: (
            p["status"]["containerStatuses"][0]["image"],
            p["status"]["containerStatuses"][0]["restartCount"],
        )
        for p in await world.pods()
    }

    async def settled() -> bool:  # every container restarted on the new image and Ready
        pods = await world.pods()
        return all(
            pod_ready(p)
            and p["status"]["containerStatuses"][0]["image"] == NEW_IMAGE
            and p["status"]["containerStatuses"][0]["restartCount"] == 1
            for p in pods
        )

    await eventually(settled, timeout=60, what="the patched containers restarted")
    log = world.pod_log
    failures = []
    if log.low is None or log.low < WANTED - 1:
        failures.append(f"{log.low} Instances serving at the lowest: {log.low_at}")
    if any(seen != (NEW_IMAGE, 1) for seen in running.values()):
        failures.append(f"reported complete with the containers at {running}")
    assert not failures, failures
