"""Expectations: writes in flight hold a key back until the cache shows them, or they expire."""

from __future__ import annotations

from typing import Any

from omed.clock import FakeClock
from omed.controllers.inferencereplica.expectations import Expectations


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
