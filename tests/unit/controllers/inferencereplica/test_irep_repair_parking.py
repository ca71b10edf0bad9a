"""Crash-loop repairs parked and re-armed by the retry ladder, in the pure planner."""

from __future__ import annotations

import dataclasses
import datetime as dt
from typing import Any

from test_irep_update import UpdateWorld, converged, events, spec

from omed.api.inferencereplica import Operation
from omed.controllers.inferencereplica.core import names
from omed.controllers.inferencereplica.core.actions import CreatePods, DeletePods, Plan
from omed.controllers.inferencereplica.core.model import ContainerFailure
from omed.controllers.inferencereplica.core.ops import restart
from omed.controllers.inferencereplica.core.policy import RetryPolicy

LADDER = RetryPolicy(max_attempts=2, initial_delay=10.0, max_delay=300.0, multiplier=2.0)
NOW = dt.datetime(2026, 9, 14, 20, 0, tzinfo=dt.UTC)
CRASH = ContainerFailure("ome-container", "Error", 1)


@dataclasses.dataclass
class CrashWorld(UpdateWorld):
    """An UpdateWorld in which the pods of ``crashing`` indexes fail as ``failure`` says."""

    crashing: set[int] = dataclasses.field(default_factory=set)
    failure: ContainerFailure = dataclasses.field(default_factory=lambda: CRASH)

    def tick(self, seconds: float = 1.0) -> None:
        super().tick(seconds)
        for name, item in list(self.pods.items()):
            if item.index in self.crashing:
                self.pods[name] = dataclasses.replace(
                    item,
                    ready=False,
                    containers_ready=False,
                    ready_since=None,
                    failing=True,
                    failure=self.failure,
                )


def crashing_world(**policy: Any) -> CrashWorld:
    base = converged(2)
    world = CrashWorld(spec(2, **policy))
    world.pods, world.rows, world.status, world.now = base.pods, base.rows, base.status, base.now
    world.images = base.images
    world.crashing = {0}
    world.tick()
    return world


def op0(world: UpdateWorld) -> Operation | None:
    return world.rows[0].operation


def rebuilds(plans: list[Plan]) -> int:
    return sum(1 for p in plans for c in p.of_type(CreatePods) if c.index == 0)


def run_until(world: CrashWorld, step: str, limit: int = 200) -> list[Plan]:
    plans = []
    for _ in range(limit):
        plans += world.run(1)
        op = op0(world)
        if op is not None and op.step == step:
            return plans
    raise AssertionError(f"never reached {step}: {op0(world)}")


def test_a_rebuilt_instance_that_crash_loops_again_is_parked_and_re_armed_by_the_ladder() -> None:
    world = crashing_world(repair_retry=LADDER)
    plans = run_until(world, names.STEP_REPAIR_PARKED)
    assert rebuilds(plans) == 1 and world.rows[0].incarnation == 2
    op = op0(world)
    assert op is not None and op.type == "Restart" and not op.retry_count
    assert op.reason == names.OperationReason.CRASH_LOOP and op.deadline is None
    parked_at = op.last_progress_at
    assert parked_at is not None
    (parked,) = events(plans, names.EVENT_REPAIR_PARKED)
    assert parked.type == "Warning"
    assert parked.message.endswith("its repair is parked until the retry ladder re-arms it")
    assert "pod chat-engine-0-default-0 container ome-container stuck (Error)" in parked.message
    failure = world.rows[0].last_failure
    assert failure is not None and (failure.reason, failure.exit_code) == ("Error", 1)
    assert world.rows[1].phase == "Ready"  # the other Instance is left alone

    # not before initialDelay (10s): nothing is rebuilt, a requeue names the re-arm time
    decided = world.plan()
    assert decided.requeue_after is not None and decided.requeue_after <= 10
    waited = world.run(int((parked_at + dt.timedelta(seconds=10) - world.now).total_seconds()))
    assert rebuilds(waited) == 0 and not any(p.of_type(DeletePods) for p in waited)

    # re-arm 1 at +10s, parked again; re-arm 2 at +20s after that; then every retry spent
    plans = run_until(world, names.STEP_REPAIR_PARKED_SPENT)
    assert rebuilds(plans) == 2 and world.rows[0].incarnation == 4
    op = op0(world)
    assert op is not None and op.retry_count == 2
    assert restart.hold_message(op) == (
        "its repair is parked after 2 re-arm(s) with every retry spent; "
        "reset the Instance or publish a corrected revision"
    )
    assert len(events(plans, names.EVENT_REPAIR_PARKED)) == 2

    # stays parked: no pod action, nothing to write
    later = world.run(400)
    assert not any(p.of_type(CreatePods) or p.of_type(DeletePods) for p in later)
    assert op0(world) == op

    # the container recovers in place: the repair ends
    world.crashing = set()
    for name, item in list(world.pods.items()):
        world.pods[name] = dataclasses.replace(item, failing=False, failure=None)
    world.run(3)
    assert op0(world) is None and world.rows[0].phase == "Ready"


def test_without_a_ladder_the_repair_stays_parked_after_its_rebuild() -> None:
    world = crashing_world()
    plans = run_until(world, names.STEP_REPAIR_PARKED_NO_LADDER)
    assert rebuilds(plans) == 1
    assert restart.hold_message(op0(world)) == (
        "its repair is parked and no retry ladder is configured to re-arm it; "
        "reset the Instance or publish a corrected revision"
    )
    later = world.run(400)
    assert not any(p.of_type(CreatePods) or p.of_type(DeletePods) for p in later)


def test_an_image_or_config_failure_of_the_rebuild_parks_without_rebuilding() -> None:
    world = crashing_world(repair_retry=LADDER)
    plans = run_until(world, names.STEP_DRAIN)  # the repair of the crash loop starts
    world.failure = ContainerFailure("ome-container", "CreateContainerConfigError")
    plans += run_until(world, names.STEP_REPAIR_PARKED_CONFIG)
    assert rebuilds(plans) == 1
    assert restart.hold_message(op0(world)) == (
        "its repair is parked, waiting for the configuration or image the pod needs; "
        "the kubelet retries in place"
    )
    later = world.run(400)
    assert not any(p.of_type(CreatePods) or p.of_type(DeletePods) for p in later)
    # the configuration comes and the container crashes now: the ladder takes over
    world.failure = ContainerFailure("ome-container", "Error", 1)
    world.run(2)
    op = op0(world)
    assert op is not None and op.step == names.STEP_REPAIR_PARKED


def test_a_corrected_revision_ends_a_parked_repair_and_updates_the_instance() -> None:
    world = crashing_world()
    run_until(world, names.STEP_REPAIR_PARKED_NO_LADDER)
    world.crashing = set()
    world.spec = spec(2, image="ome/serving:2.0", strategy="RecreatePod")
    plans = world.run(30)
    assert len(events(plans, names.EVENT_UPDATE_STARTED)) == 2
    assert all(r.operation is None and r.phase == "Ready" for r in world.rows.values())
    assert {p.revision for p in world.live()} == {world.spec.update_revision}


def test_the_re_arm_time_follows_the_ladder() -> None:
    parked = Operation(
        type="Restart", step=names.STEP_REPAIR_PARKED, last_progress_at=NOW, retry_count=0
    )
    ladder = RetryPolicy(max_attempts=9, initial_delay=10.0, max_delay=60.0, multiplier=3.0)
    assert restart.rearm_at(parked, ladder) == NOW + dt.timedelta(seconds=10)
    second = parked.model_copy(update={"retry_count": 1})
    assert restart.rearm_at(second, ladder) == NOW + dt.timedelta(seconds=30)
    capped = parked.model_copy(update={"retry_count": 5})
    assert restart.rearm_at(capped, ladder) == NOW + dt.timedelta(seconds=60)
    assert restart.rearm_at(parked, None) is None
    spent = parked.model_copy(update={"step": names.STEP_REPAIR_PARKED_SPENT})
    assert restart.rearm_at(spent, ladder) is None
    assert restart.hold_message(Operation(type="Restart", step=names.STEP_DRAIN)) is None


def test_re_arms_are_paced_by_the_repair_batch_size() -> None:
    base = converged(3)
    world = CrashWorld(spec(3, repair_retry=LADDER, repair_batch_size=1))
    world.pods, world.rows, world.status, world.now = base.pods, base.rows, base.status, base.now
    world.images = base.images
    world.crashing = {0, 1, 2}
    for _ in range(200):
        decided = world.plan()
        active = [
            r
            for r in decided.rows
            if r.operation
            and r.operation.type == "Restart"
            and r.operation.step not in names.PARKED_STEPS
        ]
        assert len(active) <= 1
        world.apply(decided)
        world.tick()
    steps = {r.operation.step for r in world.rows.values() if r.operation}
    assert steps == {names.STEP_REPAIR_PARKED_SPENT}
