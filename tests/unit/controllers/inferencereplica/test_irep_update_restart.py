"""restartPolicy RecreateInstanceOnPodRestart in the pure planner."""

from __future__ import annotations

import dataclasses

from test_irep_update import converged, events, spec

from omed.config import LifecycleScaleConfig, Percent
from omed.controllers.inferencereplica.core import names
from omed.controllers.inferencereplica.core.actions import CreatePods, DeletePods
from omed.controllers.inferencereplica.core.model import ContainerFailure, PlanSettings, PodView
from omed.controllers.inferencereplica.core.names import OperationReason


def test_a_container_restart_recreates_the_whole_instance_as_a_new_incarnation() -> None:
    world = converged(2, runners=(("leader", 1), ("worker", 2)))
    world.spec = spec(2, runners=(("leader", 1), ("worker", 2)), recreate_on_restart=True)
    name = "chat-engine-1-worker-1"
    world.pods[name] = dataclasses.replace(world.pods[name], restarts=1)
    first = world.plan()
    (row,) = [r for r in first.rows if r.operation]
    assert row.index == 1 and row.operation is not None
    assert (row.operation.type, row.operation.step) == ("Restart", names.STEP_DRAIN)
    assert row.operation.reason == OperationReason.POD_RESTARTED
    plans = [first]
    world.apply(first)
    world.tick()
    plans += world.run(30)
    deleted = {ref.name for p in plans for d in p.of_type(DeletePods) for ref in d.pods}
    assert deleted == {"chat-engine-1-leader-0", "chat-engine-1-worker-0", name}
    assert {r.index: r.incarnation for r in world.rows.values()} == {0: 1, 1: 2}
    assert all(r.operation is None and r.phase == "Ready" for r in world.rows.values())
    assert len(events(plans, names.EVENT_INSTANCE_RESTARTED)) == 1
    assert world.serving() == 2


def test_restarts_are_ignored_without_the_policy() -> None:
    world = converged(1)
    name = "chat-engine-0-default-0"
    world.pods[name] = dataclasses.replace(world.pods[name], restarts=3)
    plans = world.run(5)
    assert not any(p.of_type(DeletePods) or p.of_type(CreatePods) for p in plans)


def test_recreations_are_paced_by_the_repair_batch_size() -> None:
    for batch, expected in ((None, 1), (2, 2), ("100%", 3)):
        world = converged(3)
        world.spec = spec(3, recreate_on_restart=True, repair_batch_size=batch)
        for item in list(world.pods.values()):
            world.pods[item.name] = dataclasses.replace(item, restarts=1)
        decided = world.plan()
        restarting = [r for r in decided.rows if r.operation and r.operation.type == "Restart"]
        assert len(restarting) == expected, batch


def test_the_configmaps_repair_batch_size_paces_components_that_set_none() -> None:
    # The lifecycle entry's repairBatchSize (read at start) is the manager-wide pace; a
    # component's own lifecycle.repairBatchSize wins; with neither, one at a time.
    for own, manager_wide, expected in (
        (None, 2, 2),
        (None, Percent(100), 3),
        (1, Percent(100), 1),
        (None, None, 1),
    ):
        world = converged(3)
        world.spec = spec(3, recreate_on_restart=True, repair_batch_size=own)
        for item in list(world.pods.values()):
            world.pods[item.name] = dataclasses.replace(item, restarts=1)
        decided = world.plan(PlanSettings(repair_batch_size=manager_wide))
        restarting = [r for r in decided.rows if r.operation and r.operation.type == "Restart"]
        assert len(restarting) == expected, (own, manager_wide)


def test_plan_settings_take_the_repair_batch_size_from_the_lifecycle_entry() -> None:
    config = LifecycleScaleConfig.model_validate({"repairBatchSize": "10%"})
    assert PlanSettings.from_config(config).repair_batch_size == Percent(10)


def crash(item: PodView) -> PodView:
    return dataclasses.replace(
        item,
        ready=False,
        containers_ready=False,
        failing=True,
        failure=ContainerFailure("ome-container", "Error", 1),
    )


def test_a_crash_loop_on_a_revision_that_ran_is_repaired_as_a_new_incarnation() -> None:
    world = converged(2)
    name = "chat-engine-0-default-0"
    world.pods[name] = crash(world.pods[name])
    decided = world.plan()
    (row,) = [r for r in decided.rows if r.operation]
    assert row.index == 0 and row.operation is not None
    assert (row.operation.type, row.operation.reason) == (
        "Restart",
        OperationReason.CRASH_LOOP,
    )
    world.apply(decided)
    world.tick()
    world.run(20)
    assert {r.index: r.incarnation for r in world.rows.values()} == {0: 2, 1: 1}
    assert world.serving() == 2


def test_a_crash_loop_on_a_revision_that_never_ran_is_not_repaired() -> None:
    world = converged(1)
    name = "chat-engine-0-default-0"
    world.pods[name] = crash(world.pods[name])
    world.rows = {i: r.model_copy(update={"running_revision": None}) for i, r in world.rows.items()}
    world.pods[name] = dataclasses.replace(world.pods[name], revision="chat-engine-aaaaaaaa")
    world.spec = dataclasses.replace(world.spec, update_revision="chat-engine-aaaaaaaa")
    decided = world.plan()
    assert not [r for r in decided.rows if r.operation and r.operation.type == "Restart"]


def test_a_paused_replica_holds_operations_on_the_paused_token() -> None:
    world = converged(2, strategy="RecreatePod")
    world.spec = spec(2, image="ome/serving:2.0", strategy="RecreatePod")
    world.run(2)
    world.spec = spec(2, image="ome/serving:2.0", strategy="RecreatePod", paused=True)
    world.run(2)
    (row,) = [r for r in world.rows.values() if r.operation]
    assert row.operation is not None and row.operation.waiting == names.WAITING_PAUSED
    assert row.last_failure is not None and row.last_failure.reason == names.WAITING_PAUSED
    stamp = row.last_failure.time
    world.run(2)
    (again,) = [r for r in world.rows.values() if r.operation]
    assert again.last_failure is not None and again.last_failure.time == stamp
    world.spec = spec(2, image="ome/serving:2.0", strategy="RecreatePod")
    world.run(1)
    assert all(r.operation is None or r.operation.waiting is None for r in world.rows.values())
