"""Updates and retry blocks end to end: in-process controller, real API server, node simulator.

A :class:`Serving` handler on the test's pod watch recomputes, on every pod event, how many
Instances have every pod Ready: the capacity Services route to, sampled continuously.
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import AsyncIterator
from typing import Any

import pytest
from test_inferencereplica import TEMPLATE, Cluster, eventually, irep_body, ready

from omed.api.constants import ANNOTATION_RELEASE_HELD_REVISION
from omed.controllers.inferencereplica.core import names
from omed.controllers.inferencereplica.core.names import OperationReason
from omed.controllers.inferencereplica.core.observe import pod_revision
from omed.informers import Handlers
from omed.informers.transform import Obj
from omed.kube.client import KubeClient
from omed.kube.resources import INFERENCE_REPLICAS
from omed_devcluster.simulator import NodeSimulator

pytestmark = pytest.mark.integration

NAME = "chat-engine"
FAST_RETRY = {"initialDelay": "1s", "maxDelay": "4s", "multiplier": 2}


def body(replicas: int, strategy: str | None = None, **rolling: Any) -> dict[str, Any]:
    irep = irep_body(NAME, replicas=replicas)
    lifecycle: dict[str, Any] = {"updateRetry": FAST_RETRY}
    if strategy is not None or rolling:
        lifecycle["updateStrategy"] = {"type": strategy} if strategy else {}
        if rolling:
            lifecycle["updateStrategy"]["rollingUpdate"] = rolling
    irep["spec"]["lifecycle"] = lifecycle
    return irep


def template(image: str, *, cpu: str | None = None) -> dict[str, Any]:
    changed: dict[str, Any] = copy.deepcopy(dict(TEMPLATE))
    container = changed["spec"]["containers"][0]
    container["image"] = image
    if cpu is not None:
        container["resources"] = {"requests": {"cpu": cpu}}
    return changed


class Serving:
    """The fewest Instances with every pod Ready, over every pod event since :meth:`arm`."""

    def __init__(self, world: Cluster) -> None:
        self.informer = world.watch.informer
        self.low: int | None = None
        self.samples = 0
        self.informer.add_event_handler(
            Handlers(
                on_add=self._sample,
                on_update=lambda _o, n: self._sample(n),
                on_delete=self._sample,
            )
        )

    def arm(self) -> None:
        self.low, self.samples = self.now(), 0

    def now(self) -> int:
        by_index: dict[str, list[Obj]] = {}
        for pod in self.informer.store.list():
            index = (pod["metadata"].get("labels") or {}).get("ome.io/instance-index", "")
            by_index.setdefault(index, []).append(pod)
        return sum(
            1
            for pods in by_index.values()
            if all(ready(p) and not p["metadata"].get("deletionTimestamp") for p in pods)
        )

    def _sample(self, _pod: Obj) -> None:
        if self.low is not None:
            self.samples += 1
            self.low = min(self.low, self.now())


class World(Cluster):
    def __init__(self, kube: KubeClient, namespace: str, sim: NodeSimulator) -> None:
        super().__init__(kube, namespace)
        self.sim = sim

    async def set_template(self, tmpl: dict[str, Any]) -> None:
        irep = await self.get(NAME)
        runners = irep["spec"]["runners"]
        runners[0]["template"] = tmpl
        await self.kube.patch(
            INFERENCE_REPLICAS, NAME, {"spec": {"runners": runners}}, self.namespace
        )

    async def status(self) -> dict[str, Any]:
        return dict((await self.get(NAME)).get("status") or {})

    async def live(self) -> list[dict[str, Any]]:
        return [p for p in await self.pods() if not p["metadata"].get("deletionTimestamp")]

    async def on_revision(self, replicas: int) -> bool:
        """Converged, and every pod on the update revision."""
        if not await self.converged(NAME, replicas):
            return False
        status = await self.status()
        revision = status.get("updateRevision")
        pods = await self.live()
        return all(pod_revision(p["metadata"]["labels"]) == revision for p in pods) and (
            status.get("currentRevision") == revision
        )


@pytest.fixture
async def world(kube: KubeClient, namespace: str, crds_installed: None) -> AsyncIterator[World]:
    sim = NodeSimulator(kube, nodes=3, node_prefix=f"{namespace}-n", namespaces=[namespace])
    await sim.start()
    w = World(kube, namespace, sim)
    w.watch.factory.start()
    assert await w.watch.factory.wait_for_cache_sync(timeout=30)
    try:
        yield w
    finally:
        for running in w.running:
            if running.task is not None and not running.task.done():
                await running.kill()
        await w.watch.factory.stop()
        await sim.stop()


async def start(world: World, irep: dict[str, Any], replicas: int) -> str:
    await world.controller()
    await world.create(irep)
    await eventually(lambda: world.on_revision(replicas), what=f"{replicas} Ready Instances")
    return str((await world.status())["updateRevision"])


# -- retry blocks ---------------------------------------------------------------------------------


async def test_bad_image_backs_off_is_held_released_and_corrected(world: World) -> None:
    old = await start(world, body(2), 2)
    serving = Serving(world)
    serving.arm()
    await world.set_template(template("ome/serving:bad-image"))
    seen: list[tuple[str, int]] = []

    async def held() -> bool:
        for block in (await world.status()).get("retryBlocks") or []:
            state = (block["state"], block.get("attemptsStarted", 0))
            if not seen or seen[-1] != state:
                seen.append(state)
        return bool(seen) and seen[-1][0] == "Held"

    await eventually(held, timeout=120, what="a Held retry block", interval=0.05)
    assert seen[0] == ("Backoff", 1) and seen[-1] == ("Held", 3)
    assert serving.low is not None and serving.low >= 2 and serving.samples > 0
    status = await world.status()
    (block,) = status["retryBlocks"]
    bad = status["updateRevision"]
    assert block["targetRevision"] == bad and block["reason"] == "ImagePullBackOff"
    assert block["firstFailureAt"] <= block["lastFailureAt"]
    blocked = {c["type"]: c for c in status["conditions"]}[names.CONDITION_UPDATE_BLOCKED]
    assert blocked["reason"] == names.BLOCKED_REVISION_HELD

    async def surge_gone() -> bool:  # the last attempt's surge drains after the block is Held
        rows = (await world.status()).get("instanceStatuses") or []
        return len(await world.live()) == 2 and not any(r.get("operation") for r in rows)

    await eventually(surge_gone, timeout=30, what="the failed surge drained")
    live = await world.live()
    assert all(ready(p) for p in live)
    assert {pod_revision(p["metadata"]["labels"]) for p in live} == {old}

    # release: the Held block goes, the annotation is deleted, the revision is tried again
    patch = {"metadata": {"annotations": {ANNOTATION_RELEASE_HELD_REVISION: bad}}}
    await world.kube.patch(INFERENCE_REPLICAS, NAME, patch, world.namespace)

    async def released() -> bool:
        irep = await world.get(NAME)
        annotations = irep["metadata"].get("annotations") or {}
        blocks = (irep.get("status") or {}).get("retryBlocks") or []
        return ANNOTATION_RELEASE_HELD_REVISION not in annotations and not any(
            b["state"] == "Held" for b in blocks
        )

    await eventually(released, timeout=30, what="the release", interval=0.05)
    await eventually(
        lambda: _attempt_after_release(world), timeout=30, what="a new attempt at the revision"
    )

    # a corrected template: the update completes and no block remains
    await world.set_template(template("ome/serving:2.0"))
    await eventually(lambda: world.on_revision(2), timeout=120, what="the corrected revision")
    status = await world.status()
    assert not status.get("retryBlocks")
    assert serving.low >= 2
    assert names.CONDITION_UPDATE_BLOCKED not in {c["type"] for c in status["conditions"]}


async def _attempt_after_release(world: World) -> bool:
    rows = (await world.status()).get("instanceStatuses") or []
    blocks = (await world.status()).get("retryBlocks") or []
    updating = any((r.get("operation") or {}).get("type") == "Update" for r in rows)
    return updating or any(b.get("attemptsStarted") == 1 for b in blocks)


# -- strategies -----------------------------------------------------------------------------------


async def test_surge_then_drain_never_serves_fewer_instances_than_wanted(world: World) -> None:
    old = await start(world, body(3), 3)
    serving = Serving(world)
    serving.arm()
    await world.set_template(template("ome/serving:2.0"))
    await eventually(lambda: world.on_revision(3), timeout=120, what="3 Instances on 2.0")
    assert serving.samples > 10
    assert serving.low == 3
    status = await world.status()
    assert status["updateRevision"] != old and status["updatedReplicas"] == 3
    rows = status["instanceStatuses"]
    assert [(r["index"], r["incarnation"], r["runningRevision"]) for r in rows] == [
        (i, 2, status["updateRevision"]) for i in range(3)
    ]

    async def all_reported() -> bool:  # the last one follows the status write just seen
        reasons = [reason for _kind, _name, reason in world.events.seen]
        return reasons.count(names.EVENT_UPDATE_COMPLETED) == 3

    await eventually(all_reported, timeout=10, what="3 InstanceUpdated events")
    reasons = [reason for _kind, _name, reason in world.events.seen]
    assert reasons.count(names.EVENT_UPDATE_STARTED) == 3
    assert reasons.count(names.EVENT_UPDATE_COMPLETED) == 3
    assert world.watch.routed_deletions == []


async def test_in_place_if_possible_keeps_pod_names_and_changes_only_images(world: World) -> None:
    await start(world, body(2, "InPlaceIfPossible"), 2)
    before = {p["metadata"]["name"]: p for p in await world.live()}
    await world.set_template(template("ome/serving:2.0"))
    await eventually(lambda: world.on_revision(2), timeout=60, what="2 Instances on 2.0")
    after = {p["metadata"]["name"]: p for p in await world.live()}
    assert sorted(after) == sorted(before)
    for name, pod in after.items():
        old = before[name]
        assert pod["metadata"]["uid"] == old["metadata"]["uid"]
        assert [c["image"] for c in pod["spec"]["containers"]] == ["ome/serving:2.0"]
        same_old = copy.deepcopy(old["spec"])
        for container in same_old["containers"]:
            container["image"] = "ome/serving:2.0"
        assert pod["spec"] == same_old  # nothing but the images changed
    rows = (await world.status())["instanceStatuses"]
    assert [r["incarnation"] for r in rows] == [1, 1]


async def test_in_place_only_refuses_a_resources_change_with_a_condition(world: World) -> None:
    await start(world, body(2, "InPlaceOnly"), 2)
    uids = sorted(p["metadata"]["uid"] for p in await world.live())
    await world.set_template(template("ome/serving:1.0", cpu="2"))

    async def refused() -> bool:
        conditions = {c["type"]: c for c in (await world.status()).get("conditions") or []}
        blocked = conditions.get(names.CONDITION_UPDATE_BLOCKED)
        return blocked is not None and blocked["reason"] == names.BLOCKED_IN_PLACE_IMPOSSIBLE

    await eventually(refused, timeout=30, what="UpdateBlocked InPlaceUpdateImpossible")
    await asyncio.sleep(1.0)
    assert sorted(p["metadata"]["uid"] for p in await world.live()) == uids
    rows = (await world.status())["instanceStatuses"]
    assert all(not r.get("operation") for r in rows)


@pytest.mark.parametrize("strategy", ["RecreatePod", "SurgeThenDrain"])
async def test_a_killed_controller_resumes_the_update_without_duplicate_instances(
    world: World, strategy: str
) -> None:
    await start(world, body(3, strategy), 3)
    await world.set_template(template("ome/serving:2.0"))

    async def updating() -> bool:
        rows = (await world.status()).get("instanceStatuses") or []
        return any((r.get("operation") or {}).get("type") == "Update" for r in rows)

    await eventually(updating, timeout=30, what="an Update operation", interval=0.02)
    await world.running[0].kill()
    await world.controller()
    await eventually(lambda: world.on_revision(3), timeout=120, what="3 Instances on 2.0")
    created = {name: len(uids) for name, uids in world.watch.uids.items()}
    instances = {f"{NAME}-{i}-default-0" for i in range(3)}
    assert {name: created[name] for name in instances} == dict.fromkeys(instances, 2)
    surges = sum(n for name, n in created.items() if name not in instances)
    assert surges == (3 if strategy == "SurgeThenDrain" else 0)  # one surge per Instance
    assert world.watch.routed_deletions == []


async def test_instance_ready_timeout_fails_the_attempt_and_reports_it(world: World) -> None:
    irep = body(2)
    irep["spec"]["lifecycle"]["instanceReadyTimeout"] = "2s"
    old = await start(world, irep, 2)
    serving = Serving(world)
    serving.arm()
    never = template("ome/serving:1.0")
    never["metadata"]["annotations"] = {"sim.omed.dev/fail": "NeverReady"}
    await world.set_template(never)

    async def timed_out() -> bool:
        status = await world.status()
        blocks = status.get("retryBlocks") or []
        conditions = {c["type"] for c in status.get("conditions") or []}
        return (
            any(b.get("reason") == names.REASON_PROGRESS_DEADLINE for b in blocks)
            and names.CONDITION_PROGRESS_DEADLINE in conditions
        )

    await eventually(timed_out, timeout=60, what="a ProgressDeadlineExceeded attempt")

    async def reported() -> bool:  # recorded just after the status write that stored it
        return any(r == names.EVENT_PROGRESS_DEADLINE for _k, _n, r in world.events.seen)

    await eventually(reported, timeout=10, what="the ProgressDeadlineExceeded event")
    assert serving.low is not None and serving.low >= 2
    live = await world.live()
    assert {pod_revision(p["metadata"]["labels"]) for p in live if ready(p)} == {old}


async def test_a_container_restart_recreates_the_instance_when_the_policy_asks(
    world: World,
) -> None:
    irep = body(2)
    irep["spec"]["lifecycle"]["restartPolicy"] = "RecreateInstanceOnPodRestart"
    await start(world, irep, 2)
    pod = f"{NAME}-1-default-0"
    (before,) = [p["metadata"]["uid"] for p in await world.live() if p["metadata"]["name"] == pod]
    await world.sim.restart_container(world.namespace, pod)

    async def rebuilt() -> bool:
        rows = (await world.status()).get("instanceStatuses") or []
        incarnations = {r["index"]: r.get("incarnation") for r in rows}
        return incarnations == {0: 1, 1: 2} and await world.on_revision(2)

    await eventually(rebuilt, timeout=60, what="Instance 1 rebuilt as incarnation 2")
    after = {p["metadata"]["name"]: p["metadata"]["uid"] for p in await world.live()}
    assert after[pod] != before
    reasons = [reason for _kind, _name, reason in world.events.seen]
    assert reasons.count(names.EVENT_INSTANCE_RESTARTED) == 1


async def test_a_crash_loop_on_a_revision_that_ran_is_repaired(world: World) -> None:
    await start(world, body(2), 2)
    pod = f"{NAME}-0-default-0"
    injection = world.sim.inject(world.namespace, pod, "CrashLoopBackOff", crash_after=0.2)

    async def repairing() -> bool:
        rows = (await world.status()).get("instanceStatuses") or []
        return any(
            (r.get("operation") or {}).get("reason") == OperationReason.CRASH_LOOP for r in rows
        )

    await eventually(repairing, timeout=60, what="a CrashLoopRepair operation", interval=0.05)
    world.sim.clear_injection(injection)

    async def repaired() -> bool:
        rows = (await world.status()).get("instanceStatuses") or []
        incarnations = {r["index"]: r.get("incarnation") for r in rows}
        # >= 2: a repair already under way when the injection is cleared may run once more
        return incarnations.get(0, 0) >= 2 and incarnations.get(1) == 1

    await eventually(repaired, timeout=60, what="Instance 0 rebuilt")
    await eventually(lambda: world.on_revision(2), timeout=60, what="2 Ready Instances")
    assert world.watch.routed_deletions == []
