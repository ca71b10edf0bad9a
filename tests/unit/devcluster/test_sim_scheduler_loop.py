"""The simulated scheduler's loop keeps scheduling when writes fail on the way: a binding
whose connection drops or times out is retried, and a pass that fails otherwise is run
again with its pods (before, the loop's task died and no pod was ever bound again)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import aiohttp
import pytest
from test_sim_scheduling import node

from omed.clock import RealClock
from omed.devcluster.sim.context import SimContext
from omed.devcluster.sim.scheduler_loop import Scheduler
from omed.devcluster.simulator import Timings


class FlakyClient:
    """Answers bindings; the first ``failures`` requests raise ``error`` instead."""

    def __init__(self, error: BaseException, failures: int) -> None:
        self.error = error
        self.failures = failures
        self.bound: list[str] = []

    async def request(self, method: str, path: str, **kw: Any) -> Any:
        if self.failures > 0:
            self.failures -= 1
            raise self.error
        self.bound.append(path)
        return {}

    async def patch(self, *args: Any, **kw: Any) -> Any:
        if self.failures > 0:
            self.failures -= 1
            raise self.error
        return {}


async def until(check: Callable[[], bool], *, loop: asyncio.Task[None]) -> None:
    """Poll ``check`` for up to 5 s while the scheduler's loop must stay alive."""
    for _ in range(250):
        if check():
            return
        assert not loop.done(), f"the scheduler loop ended: {loop.exception()!r}"
        await asyncio.sleep(0.02)
    raise AssertionError("timed out")


def pending(name: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}"},
        "spec": {"containers": [{"name": "c", "image": "ome/serving:1.0"}]},
        "status": {"phase": "Pending"},
    }


@pytest.mark.parametrize(
    "error",
    [
        aiohttp.ServerDisconnectedError(),
        aiohttp.ClientConnectionError("connection reset"),
        TimeoutError(),
    ],
    ids=["disconnected", "reset", "timeout"],
)
async def test_a_binding_lost_on_the_way_is_retried(error: BaseException) -> None:
    client = FlakyClient(error, failures=2)
    ctx = SimContext(client, clock=RealClock(), timings=Timings(), concurrency=4)  # type: ignore[arg-type]
    ctx.cluster.set_node(node(0))
    scheduler = Scheduler(ctx, scheduler_names=frozenset({"default-scheduler"}))
    for name in ("a", "b"):
        ctx.pods[f"ns/{name}"] = pending(name)
        scheduler.observe(f"ns/{name}", ctx.pods[f"ns/{name}"])
    loop = asyncio.create_task(scheduler.run())
    try:
        await until(lambda: len(client.bound) == 2, loop=loop)
    finally:
        loop.cancel()
    assert sorted(client.bound) == [
        "/api/v1/namespaces/ns/pods/a/binding",
        "/api/v1/namespaces/ns/pods/b/binding",
    ]
    assert ctx.stats.errors == 2


async def test_a_failed_status_write_does_not_stop_the_loop() -> None:
    # No node fits: the pass marks the pod Unschedulable, and that write fails.
    client = FlakyClient(aiohttp.ServerDisconnectedError(), failures=1)
    ctx = SimContext(client, clock=RealClock(), timings=Timings(), concurrency=4)  # type: ignore[arg-type]
    scheduler = Scheduler(ctx, scheduler_names=frozenset({"default-scheduler"}))
    ctx.pods["ns/a"] = pending("a")
    scheduler.observe("ns/a", ctx.pods["ns/a"])
    loop = asyncio.create_task(scheduler.run())
    try:
        await until(lambda: ctx.stats.errors == 1, loop=loop)
        ctx.cluster.set_node(node(0))  # capacity arrives: the pod must still get bound
        scheduler.retry()
        await until(lambda: bool(client.bound), loop=loop)
    finally:
        loop.cancel()
    assert client.bound == ["/api/v1/namespaces/ns/pods/a/binding"]
