"""The elector's decisions, against an in-memory Lease store with resourceVersion checks.

Time is a FakeClock: tests move it in small steps and let the elector's tasks run between
steps, so deadlines and lease expiry are exact and nothing sleeps on the wall clock.
"""

from __future__ import annotations

import asyncio
import copy
import logging
import re
import uuid
from collections.abc import Mapping
from typing import Any

import pytest

from omed.clock import FakeClock
from omed.kube.errors import AlreadyExists, Conflict, NotFound, ServerError
from omed.leaderelection import (
    LOST_MESSAGE,
    MSG_ACQUIRED,
    MSG_ATTEMPTING,
    MSG_RELEASED,
    MSG_RENEW_FAILED,
    LeaderElectionLost,
    LeaderElector,
    default_identity,
    micro_time,
)
from omed.metrics import REGISTRY

NS = "ome"
MICRO = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")


class FakeLeases:
    """Leases keyed by (namespace, name); writes check resourceVersion like the API server."""

    def __init__(self) -> None:
        self.objects: dict[tuple[str, str], dict[str, Any]] = {}
        self.version = 0
        self.calls: list[str] = []
        self.failure: BaseException | None = None
        self.hang = False

    async def _gate(self, verb: str) -> None:
        self.calls.append(verb)
        await asyncio.sleep(0)  # let concurrent candidates interleave
        if self.hang:
            await asyncio.Event().wait()
        if self.failure is not None:
            raise self.failure

    def _stored(self, body: Mapping[str, Any], namespace: str) -> dict[str, Any]:
        self.version += 1
        obj = copy.deepcopy(dict(body))
        obj["metadata"] = {**obj["metadata"], "namespace": namespace}
        obj["metadata"]["resourceVersion"] = str(self.version)
        self.objects[(namespace, obj["metadata"]["name"])] = obj
        return copy.deepcopy(obj)

    async def get(self, resource: Any, name: str, namespace: str | None = None) -> Any:
        await self._gate("get")
        assert namespace is not None
        if (namespace, name) not in self.objects:
            raise NotFound(404, "NotFound", f"leases {name!r} not found")
        return copy.deepcopy(self.objects[(namespace, name)])

    async def create(
        self, resource: Any, body: Mapping[str, Any], namespace: str | None = None
    ) -> Any:
        await self._gate("create")
        assert namespace is not None
        if (namespace, body["metadata"]["name"]) in self.objects:
            raise AlreadyExists(409, "AlreadyExists", "already exists")
        return self._stored(body, namespace)

    async def replace(
        self, resource: Any, body: Mapping[str, Any], namespace: str | None = None
    ) -> Any:
        await self._gate("replace")
        assert namespace is not None
        key = (namespace, body["metadata"]["name"])
        current = self.objects.get(key)
        if current is None:
            raise NotFound(404, "NotFound", "gone")
        wanted = body["metadata"].get("resourceVersion")
        if wanted and wanted != current["metadata"]["resourceVersion"]:
            raise Conflict(409, "Conflict", "the object has been modified")
        return self._stored(body, namespace)

    # test helpers
    def spec(self, name: str) -> dict[str, Any]:
        return dict(self.objects[(NS, name)]["spec"])

    def put_spec(self, name: str, **spec: Any) -> None:
        """Someone else writes the Lease (a new resourceVersion, a changed record)."""
        body = self.objects.get((NS, name)) or {"metadata": {"name": name}}
        self._stored({**body, "spec": spec}, NS)


async def settle() -> None:
    for _ in range(30):
        await asyncio.sleep(0)


async def advance(clock: FakeClock, seconds: float, *, step: float = 1 / 32) -> None:
    """Move the clock in small steps (exact in binary), letting every task run between them."""
    for _ in range(round(seconds / step)):
        clock.advance(step)
        await settle()


def lease_name() -> str:
    return f"lock-{uuid.uuid4().hex[:8]}"


def elector(
    store: FakeLeases, clock: FakeClock, name: str, identity: str, **kwargs: Any
) -> LeaderElector:
    options: dict[str, Any] = {
        "lease_duration": 3.0,
        "renew_deadline": 2.0,
        "retry_period": 0.5,
        "rand": lambda: 0.0,
    }
    options.update(kwargs)
    return LeaderElector(store, namespace=NS, name=name, identity=identity, clock=clock, **options)


def master_status(name: str) -> float | None:
    return REGISTRY.get_sample_value("leader_election_master_status", {"name": name})


# -- acquiring ---------------------------------------------------------------------------------


async def test_first_candidate_creates_the_lease_with_client_go_fields(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="omed.leaderelection")
    store, clock, name = FakeLeases(), FakeClock(), lease_name()
    a = elector(store, clock, name, "pod-a_1")
    assert master_status(name) == 0
    await a.acquire()
    assert a.is_leader
    assert master_status(name) == 1
    spec = store.spec(name)
    assert spec["holderIdentity"] == "pod-a_1"
    assert spec["leaseDurationSeconds"] == 3
    assert spec["leaseTransitions"] == 0
    assert spec["acquireTime"] == spec["renewTime"] == micro_time(clock.now())
    assert MICRO.match(spec["renewTime"])
    assert store.calls == ["get", "create"]
    messages = [r.getMessage() for r in caplog.records]
    assert messages.index(MSG_ATTEMPTING) < messages.index(MSG_ACQUIRED)


async def test_standby_waits_a_full_lease_duration_of_an_unchanged_record() -> None:
    store, clock, name = FakeLeases(), FakeClock(), lease_name()
    store.put_spec(
        name,
        holderIdentity="old_1",
        leaseDurationSeconds=3,
        # A renewTime far in the past must not matter: only our own observation counts.
        acquireTime="2000-01-01T00:00:00.000000Z",
        renewTime="2000-01-01T00:00:00.000000Z",
        leaseTransitions=4,
    )
    b = elector(store, clock, name, "pod-b_1")
    assert not await b.try_acquire_or_renew()
    await advance(clock, 2.95)
    assert not await b.try_acquire_or_renew()
    await advance(clock, 0.1)
    assert await b.try_acquire_or_renew()
    spec = store.spec(name)
    assert spec["holderIdentity"] == "pod-b_1"
    assert spec["leaseTransitions"] == 5
    assert spec["acquireTime"] == micro_time(clock.now())


async def test_a_remote_renew_time_in_the_future_does_not_keep_a_dead_lease() -> None:
    store, clock, name = FakeLeases(), FakeClock(), lease_name()
    store.put_spec(
        name,
        holderIdentity="old_1",
        leaseDurationSeconds=3,
        renewTime="2999-01-01T00:00:00.000000Z",
        leaseTransitions=0,
    )
    b = elector(store, clock, name, "pod-b_1")
    assert not await b.try_acquire_or_renew()
    await advance(clock, 3.05)
    assert await b.try_acquire_or_renew()


async def test_a_changed_record_restarts_the_standby_wait() -> None:
    store, clock, name = FakeLeases(), FakeClock(), lease_name()
    store.put_spec(name, holderIdentity="old_1", leaseDurationSeconds=3, leaseTransitions=0)
    b = elector(store, clock, name, "pod-b_1")
    assert not await b.try_acquire_or_renew()
    await advance(clock, 2.0)
    store.put_spec(name, holderIdentity="old_1", leaseDurationSeconds=3, renewTime="x")
    assert not await b.try_acquire_or_renew()  # sees the change at t=2
    await advance(clock, 2.0)
    assert not await b.try_acquire_or_renew()  # t=4: only 2 s since the change
    await advance(clock, 1.05)
    assert await b.try_acquire_or_renew()  # t=5.05: 3.05 s unchanged


async def test_the_holders_declared_duration_is_what_a_standby_waits() -> None:
    store, clock, name = FakeLeases(), FakeClock(), lease_name()
    store.put_spec(name, holderIdentity="old_1", leaseDurationSeconds=10, leaseTransitions=0)
    b = elector(store, clock, name, "pod-b_1")
    assert not await b.try_acquire_or_renew()
    await advance(clock, 5.0)
    assert not await b.try_acquire_or_renew()
    await advance(clock, 5.05)
    assert await b.try_acquire_or_renew()


async def test_a_candidate_named_by_the_lease_takes_it_back_at_once() -> None:
    store, clock, name = FakeLeases(), FakeClock(), lease_name()
    store.put_spec(
        name,
        holderIdentity="pod-a_1",
        leaseDurationSeconds=3,
        acquireTime="2026-01-01T00:00:00.000000Z",
        leaseTransitions=7,
    )
    a = elector(store, clock, name, "pod-a_1")
    assert await a.try_acquire_or_renew()
    spec = store.spec(name)
    assert spec["leaseTransitions"] == 7
    assert spec["acquireTime"] == "2026-01-01T00:00:00.000000Z"


async def test_two_candidates_racing_for_a_free_lease_one_wins() -> None:
    store, clock, name = FakeLeases(), FakeClock(), lease_name()
    store.put_spec(name, holderIdentity="", leaseDurationSeconds=1, leaseTransitions=2)
    a = elector(store, clock, name, "pod-a_1")
    b = elector(store, clock, name, "pod-b_1")
    results = await asyncio.gather(
        a.try_acquire_or_renew(), b.try_acquire_or_renew(), return_exceptions=True
    )
    wins = [r for r in results if r is True]
    conflicts = [r for r in results if isinstance(r, Conflict)]
    assert len(wins) == 1
    assert len(conflicts) == 1
    winner = "pod-a_1" if results[0] is True else "pod-b_1"
    assert store.spec(name)["holderIdentity"] == winner
    assert store.spec(name)["leaseTransitions"] == 3


async def test_two_candidates_creating_the_lease_one_wins() -> None:
    store, clock, name = FakeLeases(), FakeClock(), lease_name()
    a = elector(store, clock, name, "pod-a_1")
    b = elector(store, clock, name, "pod-b_1")
    results = await asyncio.gather(
        a.try_acquire_or_renew(), b.try_acquire_or_renew(), return_exceptions=True
    )
    assert sorted(type(r).__name__ for r in results) == ["AlreadyExists", "bool"]


async def test_acquire_retries_every_jittered_retry_period() -> None:
    store, clock, name = FakeLeases(), FakeClock(), lease_name()
    store.put_spec(name, holderIdentity="old_1", leaseDurationSeconds=3, leaseTransitions=0)
    b = elector(store, clock, name, "pod-b_1", rand=lambda: 1.0)  # waits 0.5 x 2.2 = 1.1 s
    task = asyncio.create_task(b.acquire())
    await settle()
    assert store.calls.count("get") == 1
    await advance(clock, 1.05)
    assert store.calls.count("get") == 1
    await advance(clock, 0.1)
    assert store.calls.count("get") == 2
    await advance(clock, 3.3)  # tries at 2.2, 3.3: the lease expired at 3.0
    await asyncio.wait_for(task, 1)
    assert b.is_leader


async def test_acquire_survives_api_errors() -> None:
    store, clock, name = FakeLeases(), FakeClock(), lease_name()
    store.failure = ServerError(503, "ServiceUnavailable", "etcd is down")
    a = elector(store, clock, name, "pod-a_1")
    task = asyncio.create_task(a.acquire())
    await advance(clock, 2.0)
    assert not task.done()
    store.failure = None
    await advance(clock, 0.6)
    await asyncio.wait_for(task, 1)
    assert a.is_leader


async def test_new_leader_callback_reports_each_observed_holder() -> None:
    store, clock, name = FakeLeases(), FakeClock(), lease_name()
    seen: list[str] = []
    store.put_spec(name, holderIdentity="old_1", leaseDurationSeconds=3, leaseTransitions=0)
    b = elector(store, clock, name, "pod-b_1", on_new_leader=seen.append)
    assert not await b.try_acquire_or_renew()
    assert not await b.try_acquire_or_renew()
    await advance(clock, 3.05)
    assert await b.try_acquire_or_renew()
    assert seen == ["old_1", "pod-b_1"]
    assert b.leader == "pod-b_1"


# -- holding ------------------------------------------------------------------------------------


async def test_leader_renews_every_retry_period_and_keeps_the_lease() -> None:
    store, clock, name = FakeLeases(), FakeClock(), lease_name()
    a = elector(store, clock, name, "pod-a_1")
    b = elector(store, clock, name, "pod-b_1")
    await a.acquire()
    acquired = store.spec(name)["acquireTime"]
    holding = asyncio.create_task(a.hold())
    await settle()
    for _ in range(20):  # 10 s, over three lease durations
        await advance(clock, 0.5)
        assert not await b.try_acquire_or_renew()
    assert store.calls.count("replace") >= 19
    spec = store.spec(name)
    assert spec["holderIdentity"] == "pod-a_1"
    assert spec["acquireTime"] == acquired
    assert spec["renewTime"] == micro_time(clock.now())
    assert a.is_leader and not holding.done()
    holding.cancel()
    with pytest.raises(asyncio.CancelledError):
        await holding
    assert not a.is_leader


async def test_leader_gives_up_at_the_renew_deadline(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="omed.leaderelection")
    store, clock, name = FakeLeases(), FakeClock(), lease_name()
    stopped: list[float] = []
    a = elector(
        store, clock, name, "pod-a_1", on_stopped_leading=lambda: stopped.append(clock.monotonic())
    )
    await a.acquire()
    holding = asyncio.create_task(a.hold())
    await settle()
    await advance(clock, 0.5)  # one renew at t=0.5
    store.failure = ServerError(503, "ServiceUnavailable", "etcd is down")
    last_renew = clock.monotonic()
    # client-go: the next renew cycle starts one retry period later (t=1.0) and has the
    # renew deadline (2 s) from its own start.
    await advance(clock, 2.4)
    assert not holding.done() and a.is_leader
    await advance(clock, 0.2)
    assert holding.done()
    with pytest.raises(LeaderElectionLost, match=f"^{LOST_MESSAGE}$"):
        await holding
    assert not a.is_leader
    assert master_status(name) == 0
    assert len(stopped) == 1
    assert last_renew + 0.5 + 2.0 <= stopped[0] <= last_renew + 0.5 + 2.0 + 0.1
    assert MSG_RENEW_FAILED in [r.getMessage() for r in caplog.records]


async def test_a_hanging_renew_is_cut_off_at_the_deadline() -> None:
    store, clock, name = FakeLeases(), FakeClock(), lease_name()
    a = elector(store, clock, name, "pod-a_1")
    await a.acquire()
    started = clock.monotonic()
    store.hang = True
    holding = asyncio.create_task(a.hold())
    await settle()
    # The cycle starts after one retry period (0.5 s); its renew hangs until the cycle's
    # deadline (2 s later) cuts it off.
    await advance(clock, 2.45)
    assert not holding.done()
    await advance(clock, 0.1)
    with pytest.raises(LeaderElectionLost):
        await asyncio.wait_for(holding, 1)
    assert clock.monotonic() - started <= 2.55 + 1e-9


async def test_the_leader_never_outlives_a_lease_after_its_last_renew() -> None:
    """Timings the start-up check allows (3 > 2.75 > 1.2 x 2) but where a client-go renew
    cycle (starting a retry period after the last success) would end past the lease: the
    leader stops one lease duration after the start of its last successful renew."""
    store, clock, name = FakeLeases(), FakeClock(), lease_name()
    a = elector(store, clock, name, "pod-a_1", renew_deadline=2.75, retry_period=2.0)
    await a.acquire()
    holding = asyncio.create_task(a.hold())
    await settle()
    await advance(clock, 2.0)  # renewed at t=2
    last_renew = clock.monotonic()
    store.failure = ServerError(503, "ServiceUnavailable", "etcd is down")
    await advance(clock, 2.9)  # client-go would hold on until t=6.75
    assert not holding.done()
    await advance(clock, 0.2)
    assert holding.done()
    with pytest.raises(LeaderElectionLost):
        await holding
    assert clock.monotonic() - last_renew <= 3.0 + 0.1


async def test_a_short_outage_within_the_deadline_keeps_leadership() -> None:
    store, clock, name = FakeLeases(), FakeClock(), lease_name()
    a = elector(store, clock, name, "pod-a_1")
    await a.acquire()
    holding = asyncio.create_task(a.hold())
    await settle()
    await advance(clock, 0.5)  # renewed at t=0.5: the deadline is t=2.5
    store.failure = ServerError(500, "InternalError", "blip")
    await advance(clock, 1.25)  # the tries at t=1.0 and t=1.5 fail
    store.failure = None  # the try at t=2.0 succeeds
    await advance(clock, 5.0)
    assert a.is_leader and not holding.done()
    holding.cancel()
    with pytest.raises(asyncio.CancelledError):
        await holding


async def test_leader_stops_at_once_when_someone_else_holds_the_lease() -> None:
    store, clock, name = FakeLeases(), FakeClock(), lease_name()
    a = elector(store, clock, name, "pod-a_1")
    await a.acquire()
    holding = asyncio.create_task(a.hold())
    await settle()
    await advance(clock, 0.5)
    store.put_spec(name, holderIdentity="intruder_1", leaseDurationSeconds=3, leaseTransitions=1)
    await advance(clock, 0.55)
    assert holding.done()
    with pytest.raises(LeaderElectionLost):
        await holding
    assert store.spec(name)["holderIdentity"] == "intruder_1"


async def test_hold_needs_leadership() -> None:
    a = elector(FakeLeases(), FakeClock(), lease_name(), "pod-a_1")
    with pytest.raises(RuntimeError):
        await a.hold()


# -- releasing ----------------------------------------------------------------------------------


async def test_release_hands_the_lease_to_a_standby_at_its_next_try(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="omed.leaderelection")
    store, clock, name = FakeLeases(), FakeClock(), lease_name()
    a = elector(store, clock, name, "pod-a_1")
    b = elector(store, clock, name, "pod-b_1")
    await a.acquire()
    assert not await b.try_acquire_or_renew()
    holding = asyncio.create_task(a.hold())
    await settle()
    await advance(clock, 1.0)
    assert await a.release()
    await asyncio.wait_for(holding, 1)  # hold returns normally after a release
    assert not a.is_leader
    assert master_status(name) == 0
    spec = store.spec(name)
    assert spec["holderIdentity"] == ""
    assert spec["leaseDurationSeconds"] == 1
    assert spec["leaseTransitions"] == 0
    assert spec["renewTime"] == micro_time(clock.now())
    assert MSG_RELEASED in [r.getMessage() for r in caplog.records]
    assert await b.try_acquire_or_renew()  # no wait: the holder is empty
    assert store.spec(name)["leaseTransitions"] == 1


class HeldWrites(FakeLeases):
    """A store whose replace waits on :attr:`gate` while it is set to an Event."""

    def __init__(self) -> None:
        super().__init__()
        self.gate: asyncio.Event | None = None

    async def replace(
        self, resource: Any, body: Mapping[str, Any], namespace: str | None = None
    ) -> Any:
        if self.gate is not None:
            await self.gate.wait()
        return await super().replace(resource, body, namespace)


async def test_a_renew_waiting_while_the_lease_is_released_does_not_take_it_back() -> None:
    store, clock, name = HeldWrites(), FakeClock(), lease_name()
    a = elector(store, clock, name, "pod-a_1")
    await a.acquire()
    holding = asyncio.create_task(a.hold())
    await settle()
    store.gate = asyncio.Event()
    releasing = asyncio.create_task(a.release())  # holds the lock, its write held
    await settle()
    await advance(clock, 1.0)  # the renew is due: it waits for the lock
    store.gate.set()
    assert await asyncio.wait_for(releasing, 1)
    await asyncio.wait_for(holding, 1)
    await settle()
    assert store.spec(name)["holderIdentity"] == ""
    assert not a.is_leader


async def test_release_never_clobbers_someone_elses_lease() -> None:
    store, clock, name = FakeLeases(), FakeClock(), lease_name()
    a = elector(store, clock, name, "pod-a_1")
    await a.acquire()
    store.put_spec(name, holderIdentity="pod-b_1", leaseDurationSeconds=3, leaseTransitions=1)
    assert await a.release()
    assert store.spec(name)["holderIdentity"] == "pod-b_1"


async def test_release_after_an_unseen_renew_still_releases() -> None:
    store, clock, name = FakeLeases(), FakeClock(), lease_name()
    a = elector(store, clock, name, "pod-a_1")
    await a.acquire()
    # Our own renew landed but its answer was lost: the resourceVersion we hold is stale.
    store.put_spec(name, **{**store.spec(name), "renewTime": "later"})
    assert await a.release()
    assert store.spec(name)["holderIdentity"] == ""


async def test_release_without_leadership_writes_nothing() -> None:
    store, clock, name = FakeLeases(), FakeClock(), lease_name()
    a = elector(store, clock, name, "pod-a_1")
    assert await a.release()
    assert store.calls == []


async def test_release_failure_is_reported() -> None:
    store, clock, name = FakeLeases(), FakeClock(), lease_name()
    a = elector(store, clock, name, "pod-a_1")
    await a.acquire()
    store.failure = ServerError(503, "ServiceUnavailable", "down")
    assert not await a.release()
    assert not a.is_leader


# -- run -------------------------------------------------------------------------------------------


async def test_run_starts_the_work_and_raises_when_leadership_is_lost() -> None:
    store, clock, name = FakeLeases(), FakeClock(), lease_name()
    a = elector(store, clock, name, "pod-a_1")
    started = asyncio.Event()
    cancelled = asyncio.Event()

    async def work() -> None:
        started.set()
        try:
            await asyncio.Event().wait()
        finally:
            cancelled.set()

    running = asyncio.create_task(a.run(work))
    await settle()
    assert started.is_set() and a.is_leader
    store.failure = ServerError(503, "ServiceUnavailable", "down")
    await advance(clock, 3.0)
    with pytest.raises(LeaderElectionLost, match=LOST_MESSAGE):
        await asyncio.wait_for(running, 1)
    assert cancelled.is_set()


async def test_run_propagates_a_failure_of_the_work() -> None:
    store, clock, name = FakeLeases(), FakeClock(), lease_name()
    a = elector(store, clock, name, "pod-a_1")

    async def work() -> None:
        raise RuntimeError("controllers failed")

    with pytest.raises(RuntimeError, match="controllers failed"):
        await asyncio.wait_for(a.run(work), 1)
    assert not a.is_leader


# -- configuration ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("lease", "renew", "retry"),
    [(2.0, 2.0, 0.5), (2.0, 3.0, 0.5), (0.0, -1.0, 0.5), (3.0, 2.0, 0.0)],
)
def test_invalid_timing_is_refused(lease: float, renew: float, retry: float) -> None:
    with pytest.raises(ValueError):
        LeaderElector(
            FakeLeases(),
            namespace=NS,
            lease_duration=lease,
            renew_deadline=renew,
            retry_period=retry,
        )


def test_default_identity_is_pod_name_and_uuid(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("POD_NAME", "ome-controller-manager-7c9d5b8f4-kx2mq")
    identity = default_identity()
    pod, _, suffix = identity.rpartition("_")
    assert pod == "ome-controller-manager-7c9d5b8f4-kx2mq"
    assert str(uuid.UUID(suffix)) == suffix
    assert default_identity() != identity


def test_default_lease_name_and_whole_second_duration() -> None:
    a = LeaderElector(FakeLeases(), namespace=NS, lease_duration=2.5, renew_deadline=2.0)
    assert a.name == "ome-controller-manager-leader-lock"
    assert "_" in a.identity


async def test_fractional_lease_duration_is_rounded_up_for_safety() -> None:
    store, clock, name = FakeLeases(), FakeClock(), lease_name()
    a = elector(store, clock, name, "pod-a_1", lease_duration=2.5, renew_deadline=2.2)
    await a.acquire()
    assert store.spec(name)["leaseDurationSeconds"] == 3


# -- the write fence ---------------------------------------------------------------------------


async def test_writes_pass_the_fence_only_within_a_renew_deadline_of_the_last_renew(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Lease 3 s, renew deadline 2 s: a standby may act 3 s after the last renew began; a
    write may leave only until 2 s after it, keeping the 1 s margin for its trip."""
    from omed.leaderelection import MSG_FENCED, WriteFenced

    caplog.set_level(logging.INFO, logger="omed.leaderelection")
    store, clock, name = FakeLeases(), FakeClock(), lease_name()
    a = elector(store, clock, name, "pod-a_1")
    with pytest.raises(WriteFenced):
        a.check_fence()  # not leading yet
    assert not [r for r in caplog.records if r.getMessage() == MSG_FENCED]  # nothing to say
    await a.acquire()
    renewed = a.last_renew
    assert a.fence_margin == 1.0
    a.check_fence()
    clock.advance(2.0 - 1 / 32)
    assert a.may_write()
    a.check_fence()
    clock.advance(1 / 32)  # exactly one renew deadline after the renew began
    assert not a.may_write()
    with pytest.raises(WriteFenced, match="can't be sure it still holds the Lease"):
        a.check_fence()
    with pytest.raises(WriteFenced):
        a.check_fence()
    fenced = [r for r in caplog.records if r.getMessage() == MSG_FENCED]
    assert len(fenced) == 1  # once per renew, not once per write
    assert fenced[0].kv["sinceRenew"] == "2.000s"  # type: ignore[attr-defined]
    assert a.is_leader  # the fence refuses writes; the renew loop decides about leadership
    holding = asyncio.create_task(a.hold())
    await settle()
    await advance(clock, 0.5)  # the renew loop's next try succeeds, 2.5 s after the last
    assert a.last_renew > renewed
    a.check_fence()  # and opens the fence again
    holding.cancel()
    with pytest.raises(asyncio.CancelledError):
        await holding


async def test_a_leader_that_stalled_past_its_lease_refuses_every_write_at_once() -> None:
    """The loop didn't run for longer than the lease: on resuming, the writes queued behind
    the stall are refused before the renew loop has even looked at the clock."""
    from omed.leaderelection import WriteFenced

    store, clock, name = FakeLeases(), FakeClock(), lease_name()
    a = elector(store, clock, name, "pod-a_1")
    b = elector(store, clock, name, "pod-b_1")
    await a.acquire()
    holding = asyncio.create_task(a.hold())
    await settle()
    await advance(clock, 0.5)  # renewed
    assert await b.try_acquire_or_renew() is False  # b observes the record, starts its wait
    clock.advance(8.0)  # the stall: no task of a's runs; b's wait ends meanwhile
    assert await b.try_acquire_or_renew()  # b takes over
    refused = 0
    for _ in range(16):  # queued writes, woken together with the renew loop
        try:
            a.check_fence()
        except WriteFenced:
            refused += 1
    assert refused == 16
    with pytest.raises(LeaderElectionLost):
        await asyncio.wait_for(holding, 1)
    assert not a.is_leader
