"""restartPolicy RecreateInstanceOnPodRestart in the pure planner."""

from __future__ import annotations

import dataclasses

from test_irep_update import converged, events, spec

from omed.controllers.inferencereplica import names
from omed.controllers.inferencereplica.actions import CreatePods, DeletePods


def test_a_container_restart_recreates_the_whole_instance_as_a_new_incarnation() -> None:
    world = converged(2, runners=(("leader", 1), ("worker", 2)))
    world.spec = spec(2, runners=(("leader", 1), ("worker", 2)), recreate_on_restart=True)
    name = "chat-engine-1-worker-1"
    world.pods[name] = dataclasses.replace(world.pods[name], restarts=1)
    first = world.plan()
    (row,) = [r for r in first.rows if r.operation]
    assert row.index == 1 and row.operation is not None
    assert (row.operation.type, row.operation.step) == ("Restart", names.STEP_DRAIN)
    assert row.operation.reason == names.OP_REASON_POD_RESTARTED
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
