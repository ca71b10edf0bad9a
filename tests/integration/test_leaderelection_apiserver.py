"""Leader election against the real API server: one leader among candidates, takeover after
the lease duration when a leader vanishes, takeover within about a retry period after a
release, and a leader that loses the API server gives up at its renew deadline.

Each candidate has its own API client (its own connections and rate limiter), as separate
manager processes would. Timings are short: lease 3 s, renew deadline 2 s, retry 0.5 s. The
test that stops the API server comes last and starts it again before it ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest

from omed.kube.client import KubeClient, load_config
from omed.kube.resources import LEASES, NAMESPACES
from omed.leaderelection import LOST_MESSAGE, LeaderElectionLost, LeaderElector

pytestmark = pytest.mark.integration

LEASE, RENEW, RETRY = 3.0, 2.0, 0.5
MICRO = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")

Factory = Callable[..., Awaitable[LeaderElector]]


@pytest.fixture
async def candidate(kubeconfig: str, namespace: str) -> AsyncIterator[Factory]:
    """Make candidates for one Lease in the test's namespace, each with its own client."""
    clients: list[KubeClient] = []

    async def make(identity: str, name: str = "lock", **kwargs: Any) -> LeaderElector:
        client = KubeClient(await load_config(kubeconfig), qps=100, burst=200, timeout=5)
        clients.append(client)
        return LeaderElector(
            client,
            namespace=namespace,
            name=name,
            identity=identity,
            lease_duration=LEASE,
            renew_deadline=RENEW,
            retry_period=RETRY,
            **kwargs,
        )

    yield make
    for client in clients:
        await client.close()


async def wait_until(check: Callable[[], bool], *, timeout: float, what: str) -> float:
    """Poll ``check`` every 20 ms; return the seconds it took, fail after ``timeout``."""
    began = time.monotonic()
    while not check():
        if time.monotonic() - began > timeout:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        await asyncio.sleep(0.02)
    return time.monotonic() - began


async def cancel(*tasks: asyncio.Task[Any]) -> None:
    for task in tasks:
        task.cancel()
    for task in tasks:
        with contextlib.suppress(asyncio.CancelledError, LeaderElectionLost):
            await task


async def elect(
    a: LeaderElector, b: LeaderElector
) -> tuple[LeaderElector, LeaderElector, asyncio.Task[None], asyncio.Task[None]]:
    """Start both candidates; return (leader, standby, leader's hold, standby's acquire)."""
    tasks = {a: asyncio.create_task(a.acquire()), b: asyncio.create_task(b.acquire())}
    done, _ = await asyncio.wait(tasks.values(), return_when=asyncio.FIRST_COMPLETED, timeout=15)
    assert done, "nobody acquired the Lease"
    leader = a if tasks[a] in done else b
    standby = b if leader is a else a
    await tasks[leader]
    return leader, standby, asyncio.create_task(leader.hold()), tasks[standby]


async def test_two_candidates_elect_exactly_one_leader(
    candidate: Factory, kube: Any, namespace: str
) -> None:
    name = "ome-controller-manager-leader-lock"
    a, b = await candidate("pod-a_1", name), await candidate("pod-b_1", name)
    leader, standby, holding, waiting = await elect(a, b)
    try:
        lease = await kube.get(LEASES, name, namespace)
        spec = lease["spec"]
        assert spec["holderIdentity"] == leader.identity
        assert spec["leaseDurationSeconds"] == 3
        assert spec["leaseTransitions"] == 0
        assert MICRO.match(spec["acquireTime"]) and MICRO.match(spec["renewTime"])
        first_renew = spec["renewTime"]
        # Over two lease durations the leader keeps renewing and the standby never leads.
        began = time.monotonic()
        while time.monotonic() - began < 2 * LEASE:
            assert leader.is_leader and not standby.is_leader
            assert not holding.done() and not waiting.done()
            await asyncio.sleep(0.1)
        lease = await kube.get(LEASES, name, namespace)
        assert lease["spec"]["holderIdentity"] == leader.identity
        assert lease["spec"]["renewTime"] > first_renew
        assert lease["spec"]["acquireTime"] == spec["acquireTime"]
        assert standby.leader == leader.identity
    finally:
        await cancel(holding, waiting)


async def test_a_vanished_leader_is_replaced_after_about_the_lease_duration(
    candidate: Factory, kube: Any, namespace: str
) -> None:
    a, b = await candidate("pod-a_1", "lock"), await candidate("pod-b_1", "lock")
    leader, standby, holding, waiting = await elect(a, b)
    try:
        await wait_until(lambda: standby.leader == leader.identity, timeout=5, what="observe")
        # The leader stops renewing without releasing: a crash, or a stop without release.
        await cancel(holding)
        gone = time.monotonic()
        await asyncio.wait_for(waiting, LEASE + 5)
        takeover = time.monotonic() - gone
        print(f"\n[leader election] takeover after the leader vanished: {takeover:.2f}s")
        # The standby waits a lease duration after the last renew it saw (at most one retry
        # period before the leader stopped), plus up to one jittered retry period.
        assert LEASE - RETRY - 0.2 <= takeover <= LEASE + (1 + 1.2) * RETRY + 1.0
        assert standby.is_leader and not leader.is_leader
        lease = await kube.get(LEASES, "lock", namespace)
        assert lease["spec"]["holderIdentity"] == standby.identity
        assert lease["spec"]["leaseTransitions"] == 1
    finally:
        await cancel(holding, waiting)


async def test_a_released_lease_is_taken_within_about_one_retry_period(
    candidate: Factory, kube: Any, namespace: str
) -> None:
    a, b = await candidate("pod-a_1", "lock"), await candidate("pod-b_1", "lock")
    leader, standby, holding, waiting = await elect(a, b)
    try:
        await wait_until(lambda: standby.leader == leader.identity, timeout=5, what="observe")
        assert await leader.release()
        released = time.monotonic()
        await asyncio.wait_for(holding, 2)  # hold() returns once released
        lease = await kube.get(LEASES, "lock", namespace)
        assert lease["spec"].get("holderIdentity", "") in ("", standby.identity)
        await asyncio.wait_for(waiting, 5)
        takeover = time.monotonic() - released
        print(f"\n[leader election] takeover after a release: {takeover:.2f}s")
        assert takeover <= (1 + 1.2) * RETRY + 0.5
        lease = await kube.get(LEASES, "lock", namespace)
        assert lease["spec"]["holderIdentity"] == standby.identity
        assert lease["spec"]["leaseTransitions"] == 1
        assert not leader.is_leader and standby.is_leader
    finally:
        await cancel(holding, waiting)


async def test_run_gives_the_work_to_the_leader_only(candidate: Factory) -> None:
    a, b = await candidate("pod-a_1", "lock"), await candidate("pod-b_1", "lock")
    working: list[str] = []

    def work_of(identity: str) -> Callable[[], Awaitable[None]]:
        async def work() -> None:
            working.append(identity)
            await asyncio.Event().wait()

        return work

    runs = [asyncio.create_task(e.run(work_of(e.identity))) for e in (a, b)]
    try:
        await wait_until(lambda: len(working) == 1, timeout=10, what="a leader's work")
        began = time.monotonic()
        while time.monotonic() - began < LEASE:
            assert len(working) == 1
            assert [a.is_leader, b.is_leader].count(True) == 1
            await asyncio.sleep(0.1)
    finally:
        await cancel(*runs)


# Keep last: it stops the API server (and starts it again) under the session's other tests.
async def test_a_leader_cut_off_from_the_api_server_gives_up_at_the_renew_deadline(
    candidate: Factory, control_plane: Any, kube: Any
) -> None:
    stopped: list[float] = []
    leader = await candidate("pod-a_1", on_stopped_leading=lambda: stopped.append(time.monotonic()))
    await asyncio.wait_for(leader.acquire(), 10)
    acquired = leader.last_renew
    holding = asyncio.create_task(leader.hold())
    try:
        await wait_until(
            lambda: leader.last_renew >= acquired + 2 * RETRY, timeout=5, what="two renewals"
        )
        cut = time.monotonic()
        await asyncio.to_thread(control_plane.stop_apiserver)
        with pytest.raises(LeaderElectionLost, match=f"^{LOST_MESSAGE}$"):
            await asyncio.wait_for(holding, RENEW + 10)
        print(
            f"\n[leader election] leader gave up {stopped[0] - leader.last_renew:.2f}s after its "
            f"last renew, {stopped[0] - cut:.2f}s after the API server was told to stop"
        )
        assert not leader.is_leader
        assert len(stopped) == 1
        # client-go: the failing renew cycle starts one retry period after the last success
        # and runs for the renew deadline; never past one lease after that success.
        gap = stopped[0] - leader.last_renew
        assert RETRY + RENEW - 0.01 <= gap <= min(LEASE, RETRY + RENEW + 0.5) + 0.05, gap
    finally:
        await cancel(holding)
        await asyncio.to_thread(control_plane.start_apiserver)

    async def answers() -> bool:
        try:
            await kube.get(NAMESPACES, "default")
        except Exception:
            return False
        return True

    began = time.monotonic()
    while not await answers():
        assert time.monotonic() - began < 30, "API server did not come back"
        await asyncio.sleep(0.2)
