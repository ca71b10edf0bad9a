"""Planner: rows, summary, gates, pause, teardown and idempotence."""

from __future__ import annotations

import dataclasses
import datetime as dt

from irep_world import NOW, REVISION, World, instance, pod, settings, target

from omed.controllers.inferencereplica.core import names
from omed.controllers.inferencereplica.core.actions import (
    AddFinalizer,
    CreatePods,
    DeletePods,
    RemoveFinalizer,
    SetServingGate,
    WriteStatus,
)
from omed.controllers.inferencereplica.core.model import ContainerFailure
from omed.controllers.inferencereplica.core.names import OperationReason


def converged(replicas: int, **kw: object) -> World:
    world = World(target(replicas, **kw))  # type: ignore[arg-type]
    for _ in range(6):
        world.step()
    return world


def test_a_converged_replica_reports_every_count_and_ready() -> None:
    world = converged(4)
    status = world.status
    assert (status.replicas, status.ready_replicas, status.serving_replicas) == (4, 4, 4)
    assert (status.available_replicas, status.updated_replicas) == (4, 4)
    assert status.observed_generation == 3
    assert status.current_revision == status.update_revision == REVISION
    assert status.label_selector == "ome.io/inferenceservice=chat,component=engine"
    conditions = {c.type: c for c in status.conditions or ()}
    assert conditions["Ready"].status == "True"
    assert conditions["Progressing"].status == "False"
    assert conditions["Progressing"].reason == names.PROGRESS_COMPLETE
    row = world.rows[2]
    assert (row.phase, row.incarnation, row.pod_count) == ("Ready", 1, 1)
    assert (row.serving_pod_count, row.available_pod_count, row.admitted) == (1, 1, True)
    assert row.ready_since is not None
    assert row.operation is None


def test_an_idle_pass_writes_nothing_and_acts_on_nothing() -> None:
    world = converged(3)
    world.now += dt.timedelta(hours=1)
    assert world.plan().actions == ()


def test_multi_pod_instances_converge_with_all_pod_ready_gates() -> None:
    world = converged(2, runners=[("leader", 1), ("worker", 2)])
    assert len(world.live()) == 6
    assert all(p.serving and p.ready for p in world.live())
    assert world.status.ready_replicas == 2
    assert world.rows[1].pod_count == 3


def test_all_pod_ready_holds_every_gate_until_every_pod_is_containers_ready() -> None:
    spec = target(1, runners=[("leader", 1), ("worker", 1)])
    world = World(spec).add(
        [
            pod(spec, 0, "leader", ready=False, serving=None, containers_ready=True),
            pod(spec, 0, "worker", ready=False, serving=None, containers_ready=False),
        ]
    )
    assert not world.plan().of_type(SetServingGate)
    world.pods["chat-engine-0-worker-0"] = dataclasses.replace(
        world.pods["chat-engine-0-worker-0"], containers_ready=True
    )
    gates = world.plan().of_type(SetServingGate)
    assert sorted(g.pod.name for g in gates) == ["chat-engine-0-leader-0", "chat-engine-0-worker-0"]
    assert all(g.serving for g in gates)


def test_all_pod_ready_takes_every_gate_back_when_one_pod_stops_being_ready() -> None:
    spec = target(1, runners=[("leader", 1), ("worker", 1)])
    world = World(spec).add(instance(spec, 0))
    name = "chat-engine-0-worker-0"
    world.pods[name] = dataclasses.replace(world.pods[name], containers_ready=False, ready=False)
    gates = world.plan().of_type(SetServingGate)
    assert sorted((g.pod.name, g.serving) for g in gates) == [
        ("chat-engine-0-leader-0", False),
        ("chat-engine-0-worker-0", False),
    ]


def test_ready_policy_none_gates_each_pod_on_its_own() -> None:
    spec = target(1, runners=[("leader", 1), ("worker", 1)], ready_policy="None")
    world = World(spec).add(
        [
            pod(spec, 0, "leader", ready=False, serving=None, containers_ready=True),
            pod(spec, 0, "worker", ready=False, serving=None, containers_ready=False),
        ]
    )
    gates = world.plan().of_type(SetServingGate)
    assert [(g.pod.name, g.serving) for g in gates] == [("chat-engine-0-leader-0", True)]


def test_a_paused_replica_gets_no_pod_action_but_its_status_is_kept_current() -> None:
    spec = target(4, paused=True)
    world = World(spec).add(instance(spec, 0)).add(instance(spec, 5))
    decided = world.plan()
    assert not [a for a in decided.actions if isinstance(a, CreatePods | DeletePods)]
    assert not decided.of_type(SetServingGate)
    write = decided.of_type(WriteStatus)[0]
    assert [r.index for r in write.rows] == [0, 1, 2, 5]  # 5 is kept: a scale-up fills 1, 2
    assert all(r.operation is None for r in write.rows)
    progressing = {c.type: c for c in write.status.conditions or ()}["Progressing"]
    assert progressing.reason == names.PROGRESS_PAUSED


def test_a_paused_replica_holds_a_delete_in_flight_where_it_is() -> None:
    world = World(target(2))
    for _ in range(4):
        world.step()
    world.spec = dataclasses.replace(world.spec, replicas=1)
    world.step()  # gate False recorded under a Delete, Ready False
    world.spec = dataclasses.replace(world.spec, paused=True)
    decided = world.plan()
    assert not decided.of_type(DeletePods)
    assert decided.rows[1].operation is not None
    assert decided.rows[1].operation.step == names.STEP_DRAIN


def test_teardown_drains_then_deletes_then_removes_the_finalizer() -> None:
    world = converged(3)
    world.spec = dataclasses.replace(world.spec, deleting=True)
    first = world.plan()
    assert len(first.of_type(SetServingGate)) == 3
    assert not first.of_type(DeletePods)
    assert all(r.operation and r.operation.reason == OperationReason.TEARDOWN for r in first.rows)
    for _ in range(5):
        decided = world.step()
        if decided.of_type(RemoveFinalizer):
            break
    else:
        raise AssertionError("the finalizer was never released")
    assert not world.pods
    assert decided.rows == ()


def test_teardown_overrides_a_pause() -> None:
    world = converged(1)
    world.spec = dataclasses.replace(world.spec, deleting=True, paused=True)
    assert world.plan().of_type(SetServingGate)


def test_teardown_is_paced_by_the_scale_down_budget() -> None:
    world = converged(10)
    world.spec = dataclasses.replace(world.spec, deleting=True)
    wave = world.plan(settings(down=3)).wave_log
    assert wave is not None
    assert wave.started_instances == (7, 8, 9)


def test_no_finalizer_is_added_to_a_replica_being_deleted() -> None:
    world = World(target(1, deleting=True, has_finalizer=False))
    decided = world.plan()
    assert not decided.of_type(AddFinalizer)
    assert not decided.of_type(RemoveFinalizer)


def test_the_finalizer_waits_for_stray_pods() -> None:
    world = World(target(0, deleting=True))
    stray = dataclasses.replace(pod(world.spec, 0, ready=False), index=-1, name="odd")
    decided = world.plan()
    assert decided.of_type(RemoveFinalizer)
    observed = dataclasses.replace(world.observed(), stray_pods=(stray,))
    from omed.controllers.inferencereplica.core.plan import plan

    decided = plan(target=world.spec, observed=observed, settings=settings(), now=NOW)
    assert not decided.of_type(RemoveFinalizer)
    assert [d.pods[0].name for d in decided.of_type(DeletePods)] == ["odd"]


def test_a_crash_looping_pod_makes_the_instance_failed_with_its_last_failure() -> None:
    spec = target(1)
    failure = ContainerFailure("ome-container", "Error", 1, NOW - dt.timedelta(seconds=30))
    crashing = dataclasses.replace(
        pod(spec, 0, ready=False, serving=False), failing=True, failure=failure
    )
    world = World(spec).add([crashing])
    row = world.plan().rows[0]
    assert row.phase == "Failed"
    assert row.running_revision is None
    assert row.last_failure is not None
    assert (row.last_failure.pod, row.last_failure.reason) == ("chat-engine-0-default-0", "Error")
    assert row.last_failure.exit_code == 1
    assert row.last_failure.time == NOW - dt.timedelta(seconds=30)


def test_the_last_failure_stays_after_recovery_and_its_time_does_not_move() -> None:
    spec = target(1)
    failure = ContainerFailure("ome-container", "ImagePullBackOff")
    world = World(spec).add([dataclasses.replace(pod(spec, 0), failing=True, failure=failure)])
    world.apply(world.plan())
    first = world.rows[0].last_failure
    world.now += dt.timedelta(minutes=1)
    assert world.plan().rows[0].last_failure == first
    world.pods["chat-engine-0-default-0"] = pod(spec, 0)
    assert world.plan().rows[0].last_failure == first


def test_min_ready_seconds_delays_availability_and_requeues_for_it() -> None:
    spec = target(1, min_ready_seconds=30)
    fresh = dataclasses.replace(pod(spec, 0), ready_since=NOW - dt.timedelta(seconds=10))
    world = World(spec).add([fresh])
    decided = world.plan()
    assert decided.rows[0].available_pod_count == 0
    assert decided.status.available_replicas == 0
    assert decided.requeue_after == 20.0


def test_unbound_pods_show_pending_and_not_admitted() -> None:
    spec = target(1)
    world = World(spec).add([pod(spec, 0, ready=False, node=None)])
    row = world.plan().rows[0]
    assert (row.phase, row.admitted) == ("Pending", False)


def test_the_ready_condition_time_moves_only_when_it_flips() -> None:
    world = converged(1)
    before = {c.type: c for c in world.status.conditions or ()}["Ready"]
    world.now += dt.timedelta(minutes=3)
    world.spec = dataclasses.replace(world.spec, replicas=2, generation=4)
    decided = world.plan()
    after = {c.type: c for c in decided.status.conditions or ()}["Ready"]
    assert after.status == "False"
    assert after.last_transition_time == world.now.replace(microsecond=0)
    assert before.last_transition_time != after.last_transition_time


def test_an_instance_wanted_again_during_its_delete_comes_back_as_a_new_incarnation() -> None:
    world = converged(2)
    world.spec = dataclasses.replace(world.spec, replicas=1)
    world.step()
    world.spec = dataclasses.replace(world.spec, replicas=2)
    for _ in range(6):
        world.step()
    assert world.rows[1].incarnation == 2
    assert world.rows[1].phase == "Ready"
    assert world.pods["chat-engine-1-default-0"].incarnation == 2
