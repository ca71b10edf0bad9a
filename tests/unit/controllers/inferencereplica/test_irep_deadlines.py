"""instanceReadyTimeout on Create operations, in the pure planner (a fake clock)."""

from __future__ import annotations

import dataclasses
import datetime as dt

from test_irep_update import UpdateWorld, events, spec

from omed.controllers.inferencereplica.core import names
from omed.controllers.inferencereplica.core.actions import CreatePods, DeletePods, WriteStatus

NEVER = "ome/serving:never-ready"


def ready_reason(world: UpdateWorld, index: int) -> str | None:
    row = world.rows[index]
    (ready,) = [c for c in row.conditions or () if c.type == names.CONDITION_READY]
    return ready.reason


def test_a_create_not_ready_in_time_fails_with_an_event_and_a_condition() -> None:
    world = UpdateWorld(spec(2, image=NEVER, ready_timeout=30.0))
    first = world.plan()
    ops = [r.operation for r in first.rows if r.operation]
    assert [op.type for op in ops if op] == ["Create", "Create"]
    assert all(op and op.deadline == world.now + dt.timedelta(seconds=30) for op in ops)
    assert first.requeue_after is not None
    world.apply(first)
    world.tick()
    plans = world.run(28)
    assert all(r.operation is not None for r in world.rows.values())
    assert not events(plans, names.EVENT_PROGRESS_DEADLINE)
    plans = world.run(3)
    failed = events(plans, names.EVENT_PROGRESS_DEADLINE)
    assert len(failed) == 2 and all(e.type == "Warning" for e in failed)
    assert "its Create operation failed" in failed[0].message
    for index in (0, 1):
        row = world.rows[index]
        assert row.operation is None and row.pod_count == 1  # the pods are kept
        assert ready_reason(world, index) == names.REASON_PROGRESS_DEADLINE
        assert row.last_failure is not None
        assert row.last_failure.reason == names.REASON_PROGRESS_DEADLINE
        assert row.last_failure.pod == f"chat-engine-{index}-default-0"
    condition = world.status.condition(names.CONDITION_PROGRESS_DEADLINE)
    assert condition is not None and condition.status == "True"
    assert condition.message == (
        "Instance(s) 0, 1 of engine were not Ready within instanceReadyTimeout: their Create "
        "operation failed; their pods are kept"
    )

    # stable: no new operation, no pod action, nothing to write, no second event
    plans = world.run(20)
    assert not events(plans, names.EVENT_PROGRESS_DEADLINE)
    assert not any(p.of_type(CreatePods) or p.of_type(DeletePods) for p in plans)
    assert not any(p.of_type(WriteStatus) for p in plans)

    # the pods get Ready after all: the marker and the condition go
    world.images = {n: (("ome-container", "ome/serving:1.0"),) for n in world.images}
    world.run(3)
    assert all(r.phase == "Ready" for r in world.rows.values())
    assert ready_reason(world, 0) == names.INSTANCE_READY
    assert world.status.condition(names.CONDITION_PROGRESS_DEADLINE) is None


def test_a_create_without_a_timeout_waits() -> None:
    world = UpdateWorld(spec(1, image=NEVER))
    first = world.plan()
    assert all(r.operation and r.operation.deadline is None for r in first.rows)
    world.apply(first)
    world.tick()
    plans = world.run(300)
    assert not events(plans, names.EVENT_PROGRESS_DEADLINE)
    assert world.rows[0].operation is not None


def test_a_paused_create_fails_when_it_resumes() -> None:
    world = UpdateWorld(spec(1, image=NEVER, ready_timeout=10.0))
    world.run(2)
    world.spec = dataclasses.replace(world.spec, paused=True)
    plans = world.run(30)
    assert not events(plans, names.EVENT_PROGRESS_DEADLINE)
    assert world.rows[0].operation is not None
    world.spec = dataclasses.replace(world.spec, paused=False)
    plans = world.run(1)
    assert len(events(plans, names.EVENT_PROGRESS_DEADLINE)) == 1
    assert world.rows[0].operation is None


def test_an_instance_whose_create_failed_still_moves_to_a_new_revision() -> None:
    world = UpdateWorld(spec(1, image=NEVER, ready_timeout=5.0, strategy="RecreatePod"))
    world.run(10)
    assert ready_reason(world, 0) == names.REASON_PROGRESS_DEADLINE
    world.spec = spec(1, image="ome/serving:2.0", ready_timeout=5.0, strategy="RecreatePod")
    world.run(10)
    assert world.rows[0].phase == "Ready" and world.rows[0].incarnation == 2
    assert world.status.condition(names.CONDITION_PROGRESS_DEADLINE) is None
