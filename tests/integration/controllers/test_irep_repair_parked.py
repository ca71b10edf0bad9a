"""A parked crash-loop repair against the real API server and the node simulator.

A revision that ran (both Instances Ready on it); then Instance 0's pod crash-loops (a
simulator injection by pod name, so the rebuilt pod crash-loops too). The repair rebuilds
it once; the rebuilt pod crashes again before it is Ready, so the repair parks: the row's
operation stays at ``RepairParked`` with a Warning ``InstanceRepairParked``, and the
component's short ``updateRetry`` ladder (1 s, 2 s, 4 s; 3 re-arms) re-arms it, until every
re-arm is spent (``RepairParkedRetriesSpent``). Once the crash stops, the Instance gets
Ready in place and the parked repair ends. Instance 1 serves throughout.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from test_inferencereplica import eventually
from test_inferencereplica_updates import NAME, World, body, start, world

from omed.controllers.inferencereplica.core import names

pytestmark = pytest.mark.integration

__all__ = ["world"]

POD0 = f"{NAME}-0-default-0"


async def row(world: World, index: int) -> dict[str, Any]:
    rows = (await world.status()).get("instanceStatuses") or []
    return next((r for r in rows if r.get("index") == index), {})


def reasons(world: World) -> list[str]:
    return [reason for _kind, _name, reason in world.events.seen]


async def test_a_crash_loop_repair_that_crashes_again_is_parked_and_re_armed(
    world: World,
) -> None:
    revision = await start(world, body(2), 2)
    first = (await row(world, 0))["incarnation"]
    # crash before the 0.2 s the simulator takes to turn a container ready: never Ready
    crash = world.sim.inject(world.namespace, POD0, "CrashLoopBackOff", crash_after=0.05)

    seen: dict[str, dict[str, Any]] = {}

    def at_step(step: str) -> Callable[[], Awaitable[bool]]:
        async def check() -> bool:
            current = await row(world, 0)
            if (current.get("operation") or {}).get("step") != step:
                return False
            seen[step] = current  # the row as it was then: the ladder moves on within 1 s
            return True

        return check

    await eventually(
        at_step(names.STEP_REPAIR_PARKED), timeout=60, what="the repair parked", interval=0.05
    )
    parked_row = seen[names.STEP_REPAIR_PARKED]
    op = parked_row["operation"]
    assert op["type"] == "Restart" and op["reason"] == names.OperationReason.CRASH_LOOP
    assert op.get("lastProgressAt") and not op.get("deadline")
    assert not op.get("retryCount")  # parked before any re-arm
    assert parked_row["incarnation"] == first + 1  # rebuilt once, then crashed again
    assert parked_row["phase"] == "Failed"
    failure = parked_row["lastFailure"]
    assert failure["pod"] == POD0 and failure["container"] == "ome-container"
    assert failure["reason"] in ("Error", "CrashLoopBackOff"), failure
    assert names.EVENT_REPAIR_PARKED in reasons(world)
    assert (await row(world, 1))["phase"] == "Ready"  # the other Instance keeps serving

    async def re_armed() -> bool:
        op = (await row(world, 0)).get("operation") or {}
        return (op.get("retryCount") or 0) >= 1

    await eventually(re_armed, timeout=30, what="the ladder re-arming the repair")

    async def told_twice() -> bool:  # the repair, a re-arm: recorded after the row that says so
        return reasons(world).count(names.EVENT_INSTANCE_RESTARTED) >= 2

    await eventually(told_twice, timeout=10, what="InstanceRecreated for the repair and a re-arm")

    await eventually(at_step(names.STEP_REPAIR_PARKED_SPENT), timeout=90, what="every re-arm spent")
    op = seen[names.STEP_REPAIR_PARKED_SPENT]["operation"]
    assert op["retryCount"] == 3  # maxAttempts of the ladder
    assert (await row(world, 0))["incarnation"] == first + 4  # the repair and 3 re-arms
    assert reasons(world).count(names.EVENT_REPAIR_PARKED) == 4
    assert (await row(world, 1))["phase"] == "Ready"

    world.sim.clear_injection(crash)

    async def recovered() -> bool:
        current = await row(world, 0)
        return current.get("phase") == "Ready" and not current.get("operation")

    await eventually(recovered, timeout=60, what="Instance 0 Ready in place, repair ended")
    assert (await row(world, 0))["incarnation"] == first + 4  # not rebuilt again
    assert (await world.status())["updateRevision"] == revision
    assert world.watch.routed_deletions == []
