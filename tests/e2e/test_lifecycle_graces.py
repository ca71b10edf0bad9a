"""stuckPodGracePeriod and unschedulableGracePeriod fail an attempt long before its deadline.

The chart's manager (its ServiceAccount, RBAC, arguments and ConfigMap) runs with a
``lifecycle`` entry that sets ``instanceReadyTimeout: 30m`` and short graces. An engine whose
image can't be pulled (the node simulator can't pull an image containing ``bad-image``) has
its Create failed once its pod has been stuck for the stuck-pod grace, with the deadline still
half an hour away; an engine that asks for more ``nvidia.com/gpu`` than any simulated node has
is left Unschedulable by the real kube-scheduler, shows the waiting token meanwhile, and has
its Create failed once the unschedulable grace has passed since its PodScheduled transition.
"""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import AsyncIterator
from typing import Any

import _support as support
import pytest
from _support import eventually

from omed.controllers.inferencereplica.core import names
from omed.kube.client import KubeClient
from omed.kube.errors import NotFound
from omed.kube.resources import EVENTS, INFERENCE_REPLICAS, PODS
from omed.statuscodec import decode_status

pytestmark = [pytest.mark.integration]

SERVICE = "chat"
ENGINE = f"{SERVICE}-engine"
POD = f"{ENGINE}-0-default-0"
READY_TIMEOUT = 1800.0
STUCK_GRACE = 8.0
UNSCHEDULABLE_GRACE = 6.0
SLACK = 30.0
"""Seconds a failure may come after its grace ends: the pass the grace's requeue starts, on a
loaded machine; far below the deadline's 30 minutes."""


def runtime(**runner: Any) -> dict[str, Any]:
    return support.serving_runtime(
        "srt-engine", engineConfig={"runner": {"name": "ome-container", **runner}}
    )


@pytest.fixture
async def world(
    kube: KubeClient, namespace: str, managers: Any, manager_config: Any
) -> AsyncIterator[support.ManagerWorld]:
    await manager_config(
        lifecycle={
            **support.lifecycle(scale_up_pod_batch_size=50),
            "instanceReadyTimeout": "30m",
            "stuckPodGracePeriod": f"{STUCK_GRACE:g}s",
            "unschedulableGracePeriod": f"{UNSCHEDULABLE_GRACE:g}s",
        }
    )
    world = support.ManagerWorld(kube=kube, namespace=namespace, managers=managers)
    async with world.running(nodes=1):
        yield world


async def row0(world: support.ManagerWorld) -> dict[str, Any] | None:
    try:
        irep = await world.kube.get(INFERENCE_REPLICAS, ENGINE, world.namespace)
    except NotFound:
        return None
    rows = decode_status(irep.get("status") or {}, max_rows=100)
    return next((row for row in rows if row.get("index") == 0), None)


async def events(world: support.ManagerWorld, reason: str) -> list[dict[str, Any]]:
    found = await world.kube.list_all(EVENTS, world.namespace)
    return [event for event in found if event.get("reason") == reason]


def when(value: str) -> dt.datetime:
    return dt.datetime.fromisoformat(value.replace("Z", "+00:00"))


def ready_condition(row: dict[str, Any]) -> dict[str, Any]:
    return next(c for c in row.get("conditions") or () if c.get("type") == names.CONDITION_READY)


async def create_in_flight(world: support.ManagerWorld) -> dict[str, Any]:
    async def seen() -> dict[str, Any] | None:
        row = await row0(world)
        op = (row or {}).get("operation") or {}
        return op if op.get("type") == "Create" and op.get("deadline") else None

    op = await eventually(seen, timeout=60, what="Instance 0's Create with its deadline")
    assert op is not None
    return op


async def test_an_image_that_cant_be_pulled_fails_the_create_at_the_stuck_pod_grace(
    world: support.ManagerWorld,
) -> None:
    await world.start_manager("manager-a")
    service = support.inference_service(
        SERVICE, runtime="srt-engine", engine={"minReplicas": 1, "maxReplicas": 1}
    )
    await world.create_service(runtime(image="ome/bad-image:1.0"), service)
    op = await create_in_flight(world)
    started, deadline = when(op["startedAt"]), when(op["deadline"])
    assert (deadline - started).total_seconds() == READY_TIMEOUT

    async def failed() -> dict[str, Any] | None:
        found = await events(world, names.EVENT_STUCK_POD_GRACE)
        return found[0] if found else None

    event = await eventually(failed, timeout=STUCK_GRACE + SLACK + 30, what="the grace's event")
    assert event is not None
    pod = await world.kube.get(PODS, POD, world.namespace)
    born = when(pod["metadata"]["creationTimestamp"])
    at = when(event.get("firstTimestamp") or event["eventTime"])
    waited = (at - born).total_seconds()
    # Timestamps are whole seconds: the event comes no sooner than the grace, and soon after.
    assert STUCK_GRACE - 1 <= waited <= STUCK_GRACE + SLACK, (born, at)
    assert at < deadline - dt.timedelta(minutes=29)
    assert event["type"] == "Warning"
    assert event["involvedObject"]["name"] == SERVICE
    assert event["message"].startswith(f"Instance 0 of engine was not Ready on {ENGINE}-")
    assert event["message"].endswith(
        f"pod {POD} wedged in ImagePullBackOff past the stuck-pod grace "
        f"(stuckPodGracePeriod {STUCK_GRACE:g}s); its Create operation failed"
    )
    assert not await events(world, names.EVENT_PROGRESS_DEADLINE)


async def test_a_pod_no_node_fits_fails_the_create_at_the_unschedulable_grace(
    world: support.ManagerWorld,
) -> None:
    await world.start_manager("manager-a")
    service = support.inference_service(
        SERVICE, runtime="srt-engine", engine={"minReplicas": 1, "maxReplicas": 1}
    )
    too_big = {"limits": {"nvidia.com/gpu": "16"}}  # each simulated node has 8
    await world.create_service(runtime(image="ome/srt:1.0", resources=too_big), service)
    op = await create_in_flight(world)
    deadline = when(op["deadline"])
    assert (deadline - when(op["startedAt"])).total_seconds() == READY_TIMEOUT

    async def held() -> bool:
        row = await row0(world)
        op = (row or {}).get("operation") or {}
        return op.get("waiting") == names.WAITING_UNSCHEDULABLE

    await eventually(held, timeout=30, what="the Create held on Unschedulable")

    last: list[dict[str, Any] | None] = [None]

    async def failed() -> dict[str, Any] | None:
        row = last[0] = await row0(world)
        if row is None or row.get("operation") is not None:
            return None
        reason = ready_condition(row).get("reason")
        return row if reason == names.REASON_UNSCHEDULABLE_GRACE else None

    try:
        row = await eventually(
            failed, timeout=UNSCHEDULABLE_GRACE + SLACK + 30, what="the Create failed by the grace"
        )
    except AssertionError as err:
        err.add_note(f"row 0: {last[0]}\nmanager log tail:\n{world.manager.log()[-6000:]}")
        raise
    assert row is not None
    assert (row.get("lastFailure") or {}).get("reason") == "Unschedulable"
    assert (row.get("lastFailure") or {}).get("pod") == POD

    async def reported() -> list[dict[str, Any]]:  # the recorder sends it after the write
        return await events(world, names.EVENT_UNSCHEDULABLE_GRACE)

    (event,) = await eventually(reported, timeout=30, what="the grace's event")
    pod = await world.kube.get(PODS, POD, world.namespace)
    assert not pod["spec"].get("nodeName")
    scheduled = next(c for c in pod["status"]["conditions"] if c["type"] == "PodScheduled")
    assert scheduled["reason"] == "Unschedulable"
    at = when(event.get("firstTimestamp") or event["eventTime"])
    waited = (at - when(scheduled["lastTransitionTime"])).total_seconds()
    assert UNSCHEDULABLE_GRACE - 1 <= waited <= UNSCHEDULABLE_GRACE + SLACK
    assert at < deadline - dt.timedelta(minutes=29)
    assert "Insufficient nvidia.com/gpu" in event["message"]
    assert event["message"].endswith("its Create operation failed")
    irep = await world.kube.get(INFERENCE_REPLICAS, ENGINE, world.namespace)
    conditions = {c["type"]: c for c in irep["status"].get("conditions") or ()}
    assert conditions[names.CONDITION_UNSCHEDULABLE_GRACE]["status"] == "True"
    assert not await events(world, names.EVENT_PROGRESS_DEADLINE)

    # The pod is kept (the scheduler keeps trying), and nothing fails it a second time.
    await asyncio.sleep(UNSCHEDULABLE_GRACE)
    assert [p["metadata"]["uid"] for p in await world.pods()] == [pod["metadata"]["uid"]]
    assert len(await events(world, names.EVENT_UNSCHEDULABLE_GRACE)) == 1
