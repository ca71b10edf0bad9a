"""Planner: the scale-down wave, with the numbers of a 10% batch of 20 Instances."""

from __future__ import annotations

import dataclasses

from irep_world import World, instance, pod, settings, target

from omed.config import Percent
from omed.controllers.inferencereplica.core import names
from omed.controllers.inferencereplica.core.actions import DeletePods, SetServingGate, WriteStatus


def ready_world(replicas: int, now_wanted: int, **kw: object) -> World:
    spec = target(replicas, **kw)  # type: ignore[arg-type]
    world = World(spec).add(p for i in range(replicas) for p in instance(spec, i))
    world.apply(world.plan())
    world.spec = dataclasses.replace(spec, replicas=now_wanted)
    return world


def test_gates_go_false_first_and_nothing_is_deleted_while_ready() -> None:
    world = ready_world(4, 2)
    decided = world.plan()
    gates = decided.of_type(SetServingGate)
    assert sorted(g.pod.name for g in gates) == [
        "chat-engine-2-default-0",
        "chat-engine-3-default-0",
    ]
    assert all(g.serving is False for g in gates)
    assert not decided.of_type(DeletePods)
    rows = {r.index: r for r in decided.of_type(WriteStatus)[0].rows}
    for index in (2, 3):
        op = rows[index].operation
        assert op is not None and op.type == "Delete" and op.step == names.STEP_DRAIN
        assert op.reason == names.OperationReason.SCALE_DOWN
        assert rows[index].phase == "Deleting"


def test_pods_are_deleted_once_ready_is_observed_false() -> None:
    world = ready_world(4, 2)
    world.step()  # gates False; the kubelet turns Ready False
    decided = world.plan()
    deletes = decided.of_type(DeletePods)
    assert sorted(d.index for d in deletes) == [2, 3]
    rows = {r.index: r for r in decided.of_type(WriteStatus)[0].rows}
    assert rows[2].operation is not None and rows[2].operation.step == names.STEP_DELETE_PODS


def test_a_pod_whose_ready_is_still_true_is_not_deleted_even_with_its_gate_false() -> None:
    world = ready_world(2, 1)
    world.apply(world.plan())  # gate False, but the kubelet hasn't caught up
    assert world.pods["chat-engine-1-default-0"].ready
    assert not world.plan().of_type(DeletePods)


def test_all_pods_of_a_multi_pod_instance_are_deleted_together() -> None:
    world = ready_world(2, 1, runners=[("leader", 1), ("worker", 2)])
    world.step()
    # one worker still Ready: the whole Instance waits
    name = "chat-engine-1-worker-1"
    world.pods[name] = dataclasses.replace(world.pods[name], ready=True)
    assert not world.plan().of_type(DeletePods)
    world.pods[name] = dataclasses.replace(world.pods[name], ready=False)
    deletes = world.plan().of_type(DeletePods)
    assert [sorted(p.name for p in d.pods) for d in deletes] == [
        ["chat-engine-1-leader-0", "chat-engine-1-worker-0", "chat-engine-1-worker-1"]
    ]


def test_a_batch_ends_when_its_pods_are_gone_and_the_rows_go_with_them() -> None:
    world = ready_world(4, 2)
    for _ in range(4):
        world.step()
    assert sorted(world.rows) == [0, 1]
    assert len(world.live()) == 2
    decided = world.plan()
    assert decided.wave_log is None
    assert decided.requeue_after is None


def test_ten_percent_of_twenty_deletes_two_instances_per_wave() -> None:
    world = ready_world(20, 2)
    decided = world.plan(settings(down="10%"))
    wave = decided.wave_log
    assert wave is not None
    assert wave.pod_footprint == 20
    assert wave.pod_budget == 2
    assert wave.started_instances == (18, 19)  # highest indexes first
    assert len(wave.deferred_instances) == 16
    assert wave.log_values() == {
        "configuredPodBudget": "10%",
        "podBudget": 2,
        "podFootprint": 20,
        "activeInstances": 2,
        "deferredInstances": 16,
    }


def test_the_next_batch_starts_only_when_the_current_one_is_done() -> None:
    world = ready_world(20, 2)
    config = settings(down="10%")
    started: list[tuple[int, ...]] = []
    for _ in range(60):
        before = world.observed()
        decided = world.step(config)
        wave = decided.wave_log
        if wave is not None and wave.started_instances:
            ending = set(wave.active_instances) - set(wave.started_instances)
            assert all(not before.pods_of(i) for i in ending)  # the previous batch is done
            started.append(wave.started_instances)
    assert sorted(world.rows) == [0, 1]
    # 10% of a shrinking footprint (live pods + 1 per ending cleanup), rounded up
    assert [len(batch) for batch in started] == [2] * 6 + [1] * 6


def test_the_budget_is_resolved_on_every_pass() -> None:
    world = ready_world(20, 0)
    config = settings(down="10%")
    budgets = []
    for _ in range(40):
        decided = world.step(config)
        if decided.wave_log is not None:
            budgets.append((decided.wave_log.pod_footprint, decided.wave_log.pod_budget))
    assert budgets[0] == (20, 2)
    assert (5, 1) in budgets
    assert all(budget == max(1, -(-footprint // 10)) for footprint, budget in budgets)


def test_terminating_pods_count_in_the_cost_and_the_footprint() -> None:
    spec = target(1, runners=[("leader", 1), ("worker", 3)])
    world = World(spec)
    world.add(instance(spec, 0))
    world.add(instance(spec, 1, ready=False, serving=False))
    world.pods["chat-engine-1-worker-2"] = dataclasses.replace(
        world.pods["chat-engine-1-worker-2"], terminating=True
    )
    wave = world.plan(settings(down=2)).wave_log
    assert wave is not None
    assert wave.pod_footprint == 8
    assert wave.started_instances == (1,)  # 4 pods > 2: the first proceeds alone


def test_an_instance_whose_pods_are_gone_but_cleanup_runs_costs_one() -> None:
    world = ready_world(3, 1)
    world.step()  # gates False, Ready False
    world.apply(world.plan())  # pods deleted (Terminating) ...
    for name in ("chat-engine-1-default-0", "chat-engine-2-default-0"):
        assert world.pods[name].terminating
        del world.pods[name]  # ... and gone, while their rows still hold the Delete
    wave = world.plan(settings(down="100%")).wave_log
    assert wave is not None
    assert wave.pod_footprint == 1 + 1 + 1  # instance 0's pod + two cleanups


def test_widening_mid_flight_finishes_the_owned_deletes_first() -> None:
    world = ready_world(10, 8)
    world.step(settings(down=1))  # the wave owns instance 9 only
    world.spec = dataclasses.replace(world.spec, replicas=2)
    decided = world.plan(settings(down=100))
    assert decided.wave_log is not None
    assert decided.wave_log.active_instances == (9,)
    assert decided.wave_log.started_instances == ()
    assert decided.wave_log.deferred_instances == (2, 3, 4, 5, 6, 7, 8)
    world.apply(decided)  # 9's pod deleted
    world.tick()  # ... and gone
    after = world.plan(settings(down=100)).wave_log  # 9's Delete ends: the next batch starts
    assert after is not None
    assert after.active_instances == (2, 3, 4, 5, 6, 7, 8, 9)
    assert after.started_instances == (2, 3, 4, 5, 6, 7, 8)


def test_no_batch_size_deletes_everything_in_one_wave() -> None:
    world = ready_world(20, 2)
    wave = world.plan(settings()).wave_log
    assert wave is not None
    assert wave.pod_budget is None
    assert len(wave.started_instances) == 18
    assert wave.deferred_instances == ()


def test_deletes_in_flight_requeue_at_the_interval_or_not_at_all() -> None:
    world = ready_world(4, 2)
    assert world.plan(settings(interval=5.0)).requeue_after == 5.0
    assert world.plan(settings(interval=None)).requeue_after is None


def test_a_delete_resumes_after_a_crash_at_every_step() -> None:
    world = ready_world(2, 1)
    first = world.plan()
    world.apply(first)  # Drain recorded, gate False sent
    op_id = world.rows[1].operation.id  # type: ignore[union-attr]
    world.pods["chat-engine-1-default-0"] = dataclasses.replace(
        world.pods["chat-engine-1-default-0"], serving=True
    )  # ... as if the gate write never happened
    again = world.plan()
    assert [g.serving for g in again.of_type(SetServingGate)] == [False]
    assert not again.of_type(DeletePods)
    world.apply(again)
    world.tick()
    third = world.plan()  # step DeletePods recorded and delete sent
    world.apply(third, status_fails=True)  # ... killed before it stored: nothing deleted
    assert "chat-engine-1-default-0" not in world.deleted
    fourth = world.plan()
    assert [d.operation_id for d in fourth.of_type(DeletePods)] == [op_id]
    world.apply(fourth)
    world.tick()
    assert world.plan().rows[-1].index == 0


def test_a_pod_never_ready_is_deleted_without_waiting() -> None:
    spec = target(2)
    world = World(spec).add(instance(spec, 0)).add([pod(spec, 1, ready=False, node=None)])
    world.spec = dataclasses.replace(spec, replicas=1)
    decided = world.plan()
    assert not decided.of_type(SetServingGate)
    assert [d.index for d in decided.of_type(DeletePods)] == [1]


def test_a_pending_row_of_an_unwanted_instance_is_simply_dropped() -> None:
    world = World(target(5))
    world.apply(world.plan(settings(up=1)))  # 0 creating, 1..4 Pending rows
    world.spec = dataclasses.replace(world.spec, replicas=1)
    decided = world.plan(settings(up=1))
    assert [r.index for r in decided.rows] == [0]
    assert decided.wave_log is None


def test_a_create_in_flight_of_an_unwanted_instance_is_replaced_by_a_delete() -> None:
    world = World(target(2))
    world.step()
    world.spec = dataclasses.replace(world.spec, replicas=1)
    rows = {r.index: r for r in world.plan().rows}
    assert rows[1].operation is not None and rows[1].operation.type == "Delete"


def test_percent_type_is_reported_as_configured() -> None:
    world = ready_world(4, 0)
    wave = world.plan(settings(down=Percent(50))).wave_log
    assert wave is not None
    assert wave.log_values()["configuredPodBudget"] == "50%"
