"""The fleet-wide ``lifecycle`` settings reach a running manager through the config cache.

The chart's manager (its ServiceAccount, arguments and ConfigMap; ``--config-cache-ttl`` set
short, as the chart's ``configCacheTTL`` value would set it) runs an InferenceService whose
engine pods never become Ready, so each Create operation keeps its deadline in the row. An
operator edits ``instanceReadyTimeout`` in the ``lifecycle`` entry of
``inferenceservice-config``: once the cache TTL has passed, the next Create's deadline is the
new timeout, while the Create already running keeps the deadline it was given. An invalid
key is then ignored with one ERROR line naming it, and the manager goes on.
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
from omed.kube.resources import INFERENCE_REPLICAS
from omed.statuscodec import decode_status

pytestmark = [pytest.mark.integration]

SERVICE = "chat"
ENGINE = f"{SERVICE}-engine"
TTL = 2.0
RUNTIME = support.serving_runtime(
    "srt-engine",
    engineConfig={"runner": {"name": "ome-container", "image": "ome/srt:1.0"}},
)


@pytest.fixture
async def world(
    kube: KubeClient, namespace: str, managers: Any, manager_config: Any
) -> AsyncIterator[support.ManagerWorld]:
    await manager_config(
        lifecycle={
            **support.lifecycle(scale_up_pod_batch_size=50),
            "instanceReadyTimeout": "30m",
        }
    )
    world = support.ManagerWorld(kube=kube, namespace=namespace, managers=managers)
    async with world.running(nodes=1):
        assert world.simulator is not None
        world.simulator.inject(namespace, {"component": "engine"}, "NeverReady")
        yield world


async def create_timeouts(world: support.ManagerWorld) -> dict[int, float]:
    """index -> seconds from the start of its Create operation to its deadline."""
    try:
        irep = await world.kube.get(INFERENCE_REPLICAS, ENGINE, world.namespace)
    except NotFound:
        return {}  # not projected yet
    found: dict[int, float] = {}
    for row in decode_status(irep.get("status") or {}, max_rows=100):
        op = row.get("operation") or {}
        if op.get("type") == "Create" and op.get("deadline"):
            span = dt.datetime.fromisoformat(op["deadline"]) - dt.datetime.fromisoformat(
                op["startedAt"]
            )
            found[int(row["index"])] = span.total_seconds()
    return found


async def test_an_edit_of_instance_ready_timeout_reaches_the_next_create(
    world: support.ManagerWorld, manager_config: Any
) -> None:
    manager = await world.start_manager("manager-a", f"--config-cache-ttl={TTL:g}s")
    body = support.inference_service(
        SERVICE, runtime="srt-engine", engine={"minReplicas": 1, "maxReplicas": 1}
    )
    await world.create_service(RUNTIME, body)

    async def first() -> bool:
        return (await create_timeouts(world)).get(0) is not None

    await eventually(first, timeout=60, what="Instance 0's Create with a deadline")
    assert await create_timeouts(world) == {0: 1800.0}

    await manager_config(
        lifecycle={
            **support.lifecycle(scale_up_pod_batch_size=50),
            "instanceReadyTimeout": "7m",
        }
    )
    await asyncio.sleep(TTL + 0.5)  # the cache's bound on how stale a read may be
    scale = {"spec": {"engine": {"minReplicas": 2, "maxReplicas": 2}}}
    await world.patch_service(SERVICE, scale)

    async def second() -> bool:
        return (await create_timeouts(world)).get(1) is not None

    await eventually(second, timeout=60, what="Instance 1's Create with a deadline")
    assert await create_timeouts(world) == {0: 1800.0, 1: 420.0}

    await manager_config(
        lifecycle={
            **support.lifecycle(scale_up_pod_batch_size=50),
            "instanceReadyTimeout": "7m",
            "stuckPodGracePeriod": 60,
        }
    )
    await asyncio.sleep(TTL + 0.5)
    await world.patch_service(SERVICE, {"spec": {"engine": {"minReplicas": 3, "maxReplicas": 3}}})
    line = await manager.wait_log(names.LogLine.LIFECYCLE_INVALID, timeout=30)
    assert "lifecycle.stuckPodGracePeriod 60 must be a duration string" in line

    async def third() -> bool:
        return (await create_timeouts(world)).get(2) is not None

    await eventually(third, timeout=60, what="Instance 2's Create with a deadline")
    assert (await create_timeouts(world))[2] == 420.0  # the valid key still applies
    assert len(manager.log_lines(names.LogLine.LIFECYCLE_INVALID)) == 1
    assert manager.running()
