"""Waiting tokens end to end: real API server (ResourceQuota admission on), node simulator,
in-process controller. Each hold shows in the row's operation.waiting and lastFailure, and
is cleared when its cause goes."""

from __future__ import annotations

import contextlib
import copy
from typing import Any

import pytest
from test_inferencereplica import eventually, irep_body
from test_inferencereplica_updates import World, world

from omed.controllers.inferencereplica import names
from omed.kube.client import Resource
from omed.kube.errors import NotFound

pytestmark = pytest.mark.integration

__all__ = ["world"]

NAME = "chat-engine"
POD0 = f"{NAME}-0-default-0"
RESOURCE_QUOTAS = Resource("", "v1", "resourcequotas", "ResourceQuota")


async def row0(world: World) -> dict[str, Any]:
    rows = (await world.status()).get("instanceStatuses") or []
    return next((r for r in rows if r.get("index") == 0), {})


async def held_on(world: World, token: str) -> bool:
    row = await row0(world)
    op = row.get("operation") or {}
    failure = row.get("lastFailure") or {}
    return op.get("waiting") == token and failure.get("reason") == token


async def not_held(world: World) -> bool:
    row = await row0(world)
    return bool(row) and not (row.get("operation") or {}).get("waiting")


async def test_an_unschedulable_pod_holds_its_create_until_a_node_fits(world: World) -> None:
    irep = copy.deepcopy(irep_body(NAME, replicas=1))  # TEMPLATE is shared: don't change it
    container = irep["spec"]["runners"][0]["template"]["spec"]["containers"][0]
    container["resources"] = {"limits": {"nvidia.com/gpu": "16"}}
    await world.controller()
    await world.create(irep)
    await eventually(
        lambda: held_on(world, names.WAITING_UNSCHEDULABLE), what="the Create held Unschedulable"
    )
    row = await row0(world)
    assert row["operation"]["type"] == "Create" and row["lastFailure"]["pod"] == POD0
    await world.sim.add_node(gpus=16)
    await eventually(lambda: world.converged(NAME, 1), timeout=60, what="1 Ready Instance")
    await eventually(lambda: not_held(world), timeout=10, what="the hold cleared")


async def test_a_pod_on_a_lost_node_holds_its_create_on_node_unknown(world: World) -> None:
    never = world.sim.inject(world.namespace, {"app": "chat"}, "NeverReady")
    await world.controller()
    await world.create(irep_body(NAME, replicas=1))

    async def bound() -> str | None:
        pods = await world.live()
        return pods[0]["spec"].get("nodeName") if pods else None

    await eventually(lambda: _truthy(bound()), what="the pod bound")
    node = await bound()
    assert node is not None
    await world.sim.set_node_ready(node, False)
    await eventually(
        lambda: held_on(world, names.WAITING_NODE_UNKNOWN), what="the Create held NodeUnknown"
    )
    await world.sim.set_node_ready(node, True)
    await eventually(lambda: not_held(world), what="the hold cleared")
    world.sim.clear_injection(never)
    await eventually(lambda: world.converged(NAME, 1), timeout=60, what="1 Ready Instance")


async def _truthy(value: Any) -> bool:
    return bool(await value)


async def test_a_create_refused_by_quota_holds_on_quota_exceeded(world: World) -> None:
    quota = {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": "no-pods"},
        "spec": {"hard": {"pods": "0"}},
    }
    created = await world.kube.create(RESOURCE_QUOTAS, quota, world.namespace)
    # no kube-controller-manager here: the test writes the usage the quota controller would
    created["status"] = {"hard": {"pods": "0"}, "used": {"pods": "0"}}
    await world.kube.replace_status(RESOURCE_QUOTAS, created, world.namespace)
    await world.controller()
    await world.create(irep_body(NAME, replicas=1))
    await eventually(lambda: held_on(world, names.WAITING_QUOTA), what="the Create held")
    row = await row0(world)
    assert row["operation"]["step"] == names.STEP_CREATE_PODS
    assert row["lastFailure"]["pod"] == POD0 and row["podCount"] == 0
    assert not world.watch.uids  # no pod was ever created
    with contextlib.suppress(NotFound):
        await world.kube.delete(RESOURCE_QUOTAS, "no-pods", world.namespace)
    await eventually(lambda: world.converged(NAME, 1), timeout=60, what="1 Ready Instance")
    await eventually(lambda: not_held(world), timeout=10, what="the hold cleared")
