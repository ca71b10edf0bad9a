"""Expectations: writes in flight hold a key back until the cache shows them, or they expire."""

from __future__ import annotations

from typing import Any

from test_irep_execute import Events, FakeKube

from omed.api.inferencereplica import InferenceReplicaStatus
from omed.clock import FakeClock
from omed.controllers.inferencereplica.core.actions import CreatePods, Plan, PodToCreate
from omed.controllers.inferencereplica.shell.executor import Executor, Outcome
from omed.controllers.inferencereplica.shell.expectations import Expectations


def pod(name: str, uid: str, *, deleting: bool = False, gate: str | None = None) -> Any:
    meta: dict[str, Any] = {"name": name, "uid": uid}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    conditions = [] if gate is None else [{"type": "ome.io/serving", "status": gate}]
    return {"metadata": meta, "status": {"conditions": conditions}}


def test_creations_are_met_by_the_pods_appearing() -> None:
    exp = Expectations(clock=FakeClock())
    exp.expect_creations("k", ["a", "b"])
    assert not exp.satisfied("k")
    exp.observe("k", pod("a", "1"))
    assert not exp.satisfied("k")
    exp.observe("k", pod("b", "2"))
    assert exp.satisfied("k")


def test_deletions_are_met_by_a_deletion_timestamp_or_the_pod_going() -> None:
    exp = Expectations(clock=FakeClock())
    exp.expect_deletion("k", "1")
    exp.expect_deletion("k", "2")
    exp.observe("k", pod("a", "1", deleting=True))
    exp.observe_gone("k", pod("b", "2"))
    assert exp.satisfied("k")


def test_gate_writes_are_met_only_by_the_value_written() -> None:
    exp = Expectations(clock=FakeClock())
    exp.expect_gate("k", "1", False)
    exp.observe("k", pod("a", "1", gate="True"))
    assert not exp.satisfied("k")
    exp.observe("k", pod("a", "1", gate="False"))
    assert exp.satisfied("k")


def test_a_failed_write_is_not_waited_for() -> None:
    exp = Expectations(clock=FakeClock())
    exp.expect_creations("k", ["a"])
    exp.expect_deletion("k", "1")
    exp.expect_gate("k", "2", True)
    exp.creation_failed("k", "a")
    exp.deletion_failed("k", "1")
    exp.gate_failed("k", "2")
    assert exp.satisfied("k")


def test_unobserved_writes_expire() -> None:
    clock = FakeClock()
    exp = Expectations(clock=clock, timeout=30)
    exp.expect_creations("k", ["a"])
    clock.advance(10)
    assert not exp.satisfied("k")
    assert exp.remaining("k") == 20
    clock.advance(20)
    assert exp.satisfied("k")
    assert exp.pending("k") == (0, 0, 0)


def test_keys_are_independent() -> None:
    exp = Expectations(clock=FakeClock())
    exp.expect_creations("a", ["x"])
    assert exp.satisfied("b")
    exp.forget("a")
    assert exp.satisfied("a")


def test_a_cache_still_at_a_version_the_controller_wrote_over_is_not_current() -> None:
    clock = FakeClock()
    exp = Expectations(clock=clock, timeout=30)
    assert exp.replica_current("k", "5")
    exp.expect_replica_past("k", ["5", "6"])  # finalizer patch on 5, status write on 6
    assert not exp.replica_current("k", "5")
    assert not exp.replica_current("k", "6")
    assert exp.replica_current("k", "7")
    assert exp.replica_current("k", "5")  # cleared once caught up
    exp.expect_replica_past("k", ["7"])
    clock.advance(30)
    assert exp.replica_current("k", "7")  # expired


def test_each_expectation_expires_on_its_own_clock_not_the_oldest_writes() -> None:
    """A long pass (a wave of writes paced by the client's limiter) records writes over tens
    of seconds: the last one must still hold the key for the whole timeout."""
    clock = FakeClock()
    exp = Expectations(clock=clock, timeout=60)
    exp.expect_creations("k", ["a"])
    clock.advance(50)
    exp.expect_deletion("k", "1")
    exp.expect_gate("k", "2", False)
    clock.advance(15)  # 65 s after the first write, 15 s after the others
    assert not exp.satisfied("k")
    assert exp.pending("k") == (0, 1, 1)  # the first one expired alone
    assert exp.remaining("k") == 45
    clock.advance(45)
    assert exp.satisfied("k")


def test_an_answered_write_counts_from_its_answer() -> None:
    """Expected before it is sent, a write may wait in the client's limiter: its deadline
    starts again when the API server answers it."""
    clock = FakeClock()
    exp = Expectations(clock=clock, timeout=60)
    exp.expect_creations("k", ["a", "b"])
    exp.expect_deletion("k", "1")
    exp.expect_gate("k", "2", True)
    clock.advance(40)
    exp.sent("k", creation="b")
    exp.sent("k", deletion="1")
    exp.sent("k", gate="2")
    exp.sent("k", creation="gone")  # observed already, or never expected: nothing to do
    clock.advance(30)
    assert not exp.satisfied("k")
    assert exp.pending("k") == (1, 1, 1)  # "a" expired; the answered ones hold
    exp.observe("k", pod("b", "x"))
    clock.advance(30)
    assert exp.satisfied("k")


async def test_a_pass_whose_writes_wait_in_the_limiter_holds_the_key_from_the_last_answer() -> None:
    """The executor expects every pod of a wave before it sends any; a limiter that lets one
    create through every 25 s answers the last 50 s after the first. The key must wait for
    that one's whole timeout, not the first's."""
    clock = FakeClock()
    exp = Expectations(clock=clock, timeout=60)

    class SlowKube(FakeKube):
        async def create(self, resource: Any, body: Any, namespace: Any = None) -> Any:
            clock.advance(25)  # the limiter's wait, then the answer
            return await super().create(resource, body, namespace)

    executor = Executor(client=SlowKube(), events=Events(), expectations=exp, clock=clock)
    bodies = [PodToCreate(f"p-{i}", {"metadata": {"name": f"p-{i}"}}) for i in range(3)]
    creates = tuple(
        CreatePods(index=i, operation_id=f"op-{i}", pods=(body,)) for i, body in enumerate(bodies)
    )
    plan = Plan(actions=creates, rows=(), status=InferenceReplicaStatus())
    outcome = Outcome()
    await executor.run_pod_actions(outcome, key="k", namespace="prod", plan=plan)
    assert (outcome.created, outcome.errors) == (3, [])
    assert clock.monotonic() == 1075  # three answers, 25 s apart
    clock.advance(30)  # 105 s after the expectations, 30 s after the last answer
    assert not exp.satisfied("k")
    assert exp.pending("k") == (2, 0, 0)  # answered at 50 s and 75 s: held 60 s from there
    clock.advance(20)
    assert not exp.satisfied("k")
    assert exp.pending("k") == (1, 0, 0)
    assert exp.remaining("k") == 10
    clock.advance(10)
    assert exp.satisfied("k")
