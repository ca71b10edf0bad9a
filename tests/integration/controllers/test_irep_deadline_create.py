"""instanceReadyTimeout on a Create: real API server, node simulator, in-process controller."""

from __future__ import annotations

from typing import Any

import pytest
from test_inferencereplica import eventually, irep_body
from test_inferencereplica_updates import World, world

from omed.controllers.inferencereplica.core import names

pytestmark = pytest.mark.integration

__all__ = ["world"]

NAME = "chat-engine"


def ready_reason(row: dict[str, Any]) -> str | None:
    for c in row.get("conditions") or ():
        if c.get("type") == names.CONDITION_READY:
            return str(c.get("reason"))
    return None


async def test_a_create_not_ready_in_time_fails_and_keeps_its_pods(world: World) -> None:
    never = world.sim.inject(world.namespace, {"app": "chat"}, "NeverReady")
    irep = irep_body(NAME, replicas=2)
    irep["spec"]["lifecycle"] = {"instanceReadyTimeout": "2s"}
    await world.controller()
    await world.create(irep)

    async def failed() -> bool:
        status = await world.status()
        rows = status.get("instanceStatuses") or []
        conditions = {c["type"]: c for c in status.get("conditions") or []}
        deadline = conditions.get(names.CONDITION_PROGRESS_DEADLINE) or {}
        return (
            len(rows) == 2
            and all(r.get("operation") is None for r in rows)
            and all(ready_reason(r) == names.REASON_PROGRESS_DEADLINE for r in rows)
            and all(
                (r.get("lastFailure") or {}).get("reason") == names.REASON_PROGRESS_DEADLINE
                for r in rows
            )
            and deadline.get("status") == "True"
        )

    await eventually(failed, timeout=60, what="both Creates failed at their deadline")

    async def reported() -> bool:
        seen = [r for _k, _n, r in world.events.seen if r == names.EVENT_PROGRESS_DEADLINE]
        return len(seen) == 2

    await eventually(reported, timeout=10, what="two ProgressDeadlineExceeded events")
    pods = await world.live()
    assert sorted(p["metadata"]["name"] for p in pods) == [
        f"{NAME}-0-default-0",
        f"{NAME}-1-default-0",
    ]
    uids = {p["metadata"]["uid"] for p in pods}

    world.sim.clear_injection(never)  # the pods get Ready in place: nothing was rebuilt
    await eventually(lambda: world.on_revision(2), timeout=60, what="2 Ready Instances")

    async def cleared() -> bool:
        status = await world.status()
        types = {c["type"] for c in status.get("conditions") or []}
        return names.CONDITION_PROGRESS_DEADLINE not in types

    await eventually(cleared, timeout=30, what="the condition cleared")
    assert {p["metadata"]["uid"] for p in await world.live()} == uids
    seen = [r for _k, _n, r in world.events.seen if r == names.EVENT_PROGRESS_DEADLINE]
    assert len(seen) == 2
