"""Planner: creating Instances, in batches, durably."""

from __future__ import annotations

from irep_world import NOW, REVISION, World, instance, settings, target

from omed.controllers.inferencereplica.core import names
from omed.controllers.inferencereplica.core.actions import (
    AddFinalizer,
    CreatePods,
    DeletePods,
    RecordEvent,
    SetServingGate,
    WriteStatus,
)
from omed.controllers.inferencereplica.core.operations import pass_stamp


def created_indexes(world: World, config: object = None) -> list[int]:
    decided = world.plan(config)  # type: ignore[arg-type]
    return [c.index for c in decided.of_type(CreatePods)]


def test_a_new_replica_creates_every_instance_in_one_pass_without_a_batch_size() -> None:
    world = World(target(4))
    decided = world.plan()
    creates = decided.of_type(CreatePods)
    assert [c.index for c in creates] == [0, 1, 2, 3]
    assert [p.name for c in creates for p in c.pods] == [
        f"chat-engine-{i}-default-0" for i in range(4)
    ]


def test_the_create_operation_is_in_the_status_written_before_the_pods() -> None:
    world = World(target(2))
    decided = world.plan()
    kinds = [type(a) for a in decided.actions]
    assert kinds.index(WriteStatus) < kinds.index(CreatePods)
    write = decided.of_type(WriteStatus)[0]
    for create in decided.of_type(CreatePods):
        row = next(r for r in write.rows if r.index == create.index)
        assert row.operation is not None
        assert row.operation.type == "Create"
        assert row.operation.step == names.STEP_CREATE_PODS
        assert row.operation.id == create.operation_id
        assert row.operation.started_at == NOW
        assert row.operation.target_revision == REVISION
        assert row.phase == "Pending"
        assert row.incarnation == 1


def test_pods_carry_labels_owner_gate_and_operation() -> None:
    world = World(target(1))
    body = world.plan().of_type(CreatePods)[0].pods[0].body
    meta = body["metadata"]
    assert meta["name"] == "chat-engine-0-default-0"
    assert meta["labels"] == {
        "ome.io/inferenceservice": "chat",
        "component": "engine",
        "ome.io/instance-index": "0",
        "ome.io/instance-incarnation": "1",
        "ome.io/runner": "default",
        "ome.io/pod-ordinal": "0",
        "ome.io/managed-by": "OMENative",
        "ome.io/revision-hash": REVISION[-8:],
    }
    assert body["spec"]["hostname"] == "chat-engine-0-default-0"
    assert body["spec"]["subdomain"] == "chat-engine-headless"
    assert body["spec"]["containers"][0]["env"] == [
        {"name": "OME_INFERENCESERVICE_NAME", "value": "chat"},
        {"name": "OME_COMPONENT", "value": "engine"},
        {"name": "OME_COMPONENT_REPLICAS", "value": "1"},
        {"name": "OME_INSTANCE_INDEX", "value": "0"},
        {"name": "OME_RUNNER", "value": "default"},
        {"name": "OME_RUNNER_SIZE", "value": "1"},
        {"name": "OME_RUNNER_INDEX", "value": "0"},
        {"name": "OME_INSTANCE_SUBDOMAIN", "value": "chat-engine-0"},
    ]
    assert meta["ownerReferences"] == [
        {
            "apiVersion": "ome.io/v1beta1",
            "kind": "InferenceReplica",
            "name": "chat-engine",
            "uid": "irep-uid",
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    assert body["spec"]["readinessGates"] == [{"conditionType": "ome.io/serving"}]
    assert body["spec"]["containers"][0]["image"] == "ome/serving:1.0"
    assert meta["annotations"][names.ANNOTATION_OPERATION_ID].startswith("create-0-1-")


def test_a_standalone_replica_labels_its_pods_with_its_own_name() -> None:
    world = World(target(1, parent=None))
    body = world.plan().of_type(CreatePods)[0].pods[0].body
    assert body["metadata"]["labels"]["ome.io/inferenceservice"] == "chat-engine"


def test_a_multi_pod_instance_gets_the_gang_env_and_pod_group() -> None:
    world = World(target(2, runners=[("worker", 2), ("leader", 1)]))
    pods = {p.name: p.body for p in world.plan().of_type(CreatePods)[1].pods}
    worker = pods["chat-engine-1-worker-1"]
    env = {e["name"]: e["value"] for e in worker["spec"]["containers"][0]["env"]}
    assert env["OME_LEADER_ADDRESS"] == "chat-engine-1-leader-0.chat-engine-headless"
    assert env["OME_INSTANCE_POD_RANK"] == "2"
    assert env["OME_INSTANCE_POD_COUNT"] == "3"
    assert env["OME_RUNNER_INDEX"] == "1"
    assert env["OME_RUNNER_SIZE"] == "2"
    assert env["OME_INSTANCE_SUBDOMAIN"] == "chat-engine-1"
    leader_env = pods["chat-engine-1-leader-0"]["spec"]["containers"][0]["env"]
    assert {"name": "OME_INSTANCE_POD_RANK", "value": "0"} in leader_env
    assert worker["metadata"]["labels"]["scheduling.x-k8s.io/pod-group"] == "chat-engine-1"
    assert worker["metadata"]["labels"]["ome.io/runner"] == "worker"


def test_a_leader_and_its_workers_are_created_together_leader_first() -> None:
    world = World(target(2, runners=[("worker", 2), ("leader", 1)]))
    creates = world.plan().of_type(CreatePods)
    assert [p.name for p in creates[0].pods] == [
        "chat-engine-0-leader-0",
        "chat-engine-0-worker-0",
        "chat-engine-0-worker-1",
    ]


def test_scale_up_creates_at_most_the_budget_per_pass_and_requeues() -> None:
    spec = target(20)
    world = World(spec).add(p for i in range(4) for p in instance(spec, i))
    decided = world.plan(settings(up=5))
    assert [c.index for c in decided.of_type(CreatePods)] == [4, 5, 6, 7, 8]
    assert decided.requeue_after == 1.0
    deferred = [r for r in decided.rows if r.index >= 9]
    assert all(r.phase == "Pending" and r.operation is None for r in deferred)
    assert len(deferred) == 11


def test_scale_up_batches_are_whole_instances_and_the_first_may_exceed() -> None:
    spec = target(4, runners=[("leader", 1), ("worker", 3)])
    world = World(spec)
    decided = world.plan(settings(up=2))
    assert [c.index for c in decided.of_type(CreatePods)] == [0]  # 4 pods > 2, alone
    assert len(decided.of_type(CreatePods)[0].pods) == 4


def test_scale_up_percentage_resolves_against_the_wanted_footprint() -> None:
    spec = target(20)
    world = World(spec).add(p for i in range(4) for p in instance(spec, i))
    # 10% of max(4 pods now, 20 wanted) = 2
    assert created_indexes(world, settings(up="10%")) == [4, 5]


def test_scale_up_passes_run_until_every_instance_exists() -> None:
    spec = target(20)
    world = World(spec).add(p for i in range(4) for p in instance(spec, i))
    passes: list[list[str]] = []
    for _ in range(30):
        decided = world.step(settings(up=5))
        created = [p.name for c in decided.of_type(CreatePods) for p in c.pods]
        if created:
            passes.append(created)
    assert [len(p) for p in passes] == [5, 5, 5, 1]
    assert len(world.live()) == 20
    assert all(r.phase == "Ready" and r.operation is None for r in world.rows.values())


def test_one_pass_gives_its_operations_one_stamp() -> None:
    world = World(target(3))
    ids = [c.operation_id for c in world.plan().of_type(CreatePods)]
    assert len({pass_stamp(i) for i in ids}) == 1
    assert len(set(ids)) == 3


def test_a_create_resumes_after_a_crash_with_only_the_missing_pods() -> None:
    spec = target(1, runners=[("leader", 1), ("worker", 2)])
    world = World(spec)
    first = world.plan()
    world.apply(first)  # status written, leader and worker-0 created, then the crash:
    del world.pods["chat-engine-0-worker-1"]
    resumed = world.plan()
    creates = resumed.of_type(CreatePods)
    assert [p.name for c in creates for p in c.pods] == ["chat-engine-0-worker-1"]
    assert creates[0].operation_id == first.of_type(CreatePods)[0].operation_id
    row = resumed.rows[0]  # the same operation, still creating
    assert row.operation == world.rows[0].operation


def test_a_create_recorded_but_never_sent_is_sent_by_the_next_manager() -> None:
    world = World(target(2))
    first = world.plan()
    world.apply(first)
    world.pods.clear()  # killed after the status write, before any create
    again = world.plan()
    assert [c.operation_id for c in again.of_type(CreatePods)] == [
        c.operation_id for c in first.of_type(CreatePods)
    ]


def test_resumed_creates_go_before_new_instances_in_the_budget() -> None:
    spec = target(6)
    world = World(spec)
    world.apply(world.plan(settings(up=2)))  # ops for 0 and 1 recorded
    world.pods.clear()  # ... but no pod made it
    world.spec = target(6)
    decided = world.plan(settings(up=2))
    assert [c.index for c in decided.of_type(CreatePods)] == [0, 1]


def test_create_moves_to_wait_ready_then_ends_when_ready_with_events() -> None:
    world = World(target(1))
    world.step()
    decided = world.step()  # pods observed: InstanceCreated; gate set True
    row = decided.of_type(WriteStatus)[0].rows[0]
    assert row.operation is not None and row.operation.step == names.STEP_WAIT_READY
    reasons = [e.reason for e in decided.of_type(RecordEvent)]
    assert reasons == [names.EVENT_INSTANCE_CREATED]
    assert [g.serving for g in decided.of_type(SetServingGate)] == [True]
    done = world.step()  # pod Ready
    row = done.of_type(WriteStatus)[0].rows[0]
    assert row.operation is None
    assert row.phase == "Ready"
    assert row.running_revision == REVISION
    assert [e.reason for e in done.of_type(RecordEvent)] == [names.EVENT_INSTANCE_READY]


def test_the_finalizer_is_added_before_anything_else() -> None:
    world = World(target(1, has_finalizer=False))
    decided = world.plan()
    assert isinstance(decided.actions[0], AddFinalizer)


def test_a_missing_pod_of_an_existing_instance_is_recreated_under_a_create() -> None:
    spec = target(2, runners=[("leader", 1), ("worker", 1)])
    world = World(spec).add(instance(spec, 0)).add(instance(spec, 1))
    world.apply(world.plan())
    del world.pods["chat-engine-1-worker-0"]
    decided = world.plan()
    create = decided.of_type(CreatePods)[0]
    assert [p.name for p in create.pods] == ["chat-engine-1-worker-0"]
    row = next(r for r in decided.of_type(WriteStatus)[0].rows if r.index == 1)
    assert row.operation is not None
    assert row.operation.reason == names.OperationReason.PODS_MISSING


def test_a_terminating_pod_blocks_its_name_until_gone() -> None:
    spec = target(1)
    world = World(spec).add(instance(spec, 0, ready=False, serving=False, terminating=True))
    assert not world.plan().of_type(CreatePods)


def test_recreating_a_missing_pod_is_not_reported_as_a_new_instance() -> None:
    spec = target(1, runners=[("leader", 1), ("worker", 1)])
    world = World(spec).add(instance(spec, 0))
    world.apply(world.plan())
    del world.pods["chat-engine-0-worker-0"]
    world.step()  # the worker is created again under a PodsMissing Create
    decided = world.plan()
    row = decided.of_type(WriteStatus)[0].rows[0]  # the Create moved on: all pods exist
    assert row.operation is not None and row.operation.step == names.STEP_WAIT_READY
    reasons = [e.reason for e in decided.of_type(RecordEvent)]
    assert names.EVENT_INSTANCE_CREATED not in reasons


def test_a_worker_count_change_alone_rebuilds_no_instance() -> None:
    # The count is not in the revision (as upstream's): no rollout. A larger count adds the
    # missing workers to the Instance; a smaller one leaves the extra worker running.
    for count, added in ((1, []), (3, ["chat-engine-0-worker-2"])):
        world = World(target(1, runners=[("leader", 1), ("worker", 2)]))
        for _ in range(10):
            world.step()
        before = sorted(world.pods)
        assert len(before) == 3 and world.rows[0].phase == "Ready"
        world.spec = target(1, runners=[("leader", 1), ("worker", count)])
        for _ in range(5):
            assert not world.step().of_type(DeletePods)
        assert sorted(world.pods) == sorted([*before, *added])
