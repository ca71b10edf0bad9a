"""Updates in the pure planner: strategies, partition, maxUnavailable/maxSurge, pause, resume.

The world here extends :class:`irep_world.World`: pods carry their images (from the bodies
the plan creates), in-place patches apply as a kubelet applies them (the old container
stays Ready for :attr:`UpdateWorld.stop_ticks` ticks, exits, and the new one starts on the
new image a tick later), and a pod whose image contains ``bad-image`` never starts
(ImagePullBackOff), as the node simulator does.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from typing import Any

from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st
from irep_world import World

from omed.controllers.inferencereplica.core import names
from omed.controllers.inferencereplica.core.actions import (
    CreatePods,
    DeletePods,
    PatchPodImages,
    Plan,
    RecordEvent,
    SetServingGate,
)
from omed.controllers.inferencereplica.core.model import (
    ContainerFailure,
    ParentRef,
    PodView,
    ReplicaTarget,
    RunnerShape,
)
from omed.controllers.inferencereplica.core.podtemplate import revision_of
from omed.controllers.inferencereplica.core.policy import RetryPolicy, UpdatePolicy


def template(image: str = "ome/serving:1.0", *, cpu: str | None = None) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "ome-container", "image": image}
    if cpu is not None:
        container["resources"] = {"requests": {"cpu": cpu}}
    return {"spec": {"containers": [container]}}


def spec(
    replicas: int = 4,
    *,
    image: str = "ome/serving:1.0",
    cpu: str | None = None,
    runners: tuple[tuple[str, int], ...] = (("default", 1),),
    paused: bool = False,
    release: str | None = None,
    **policy: Any,
) -> ReplicaTarget:
    shapes = tuple(RunnerShape(name, size, template(image, cpu=cpu)) for name, size in runners)
    return ReplicaTarget(
        namespace="prod",
        name="chat-engine",
        uid="irep-uid",
        generation=3,
        isvc="chat",
        component="engine",
        parent=ParentRef("chat", "isvc-uid"),
        replicas=replicas,
        runners=shapes,
        update_revision=revision_of(isvc="chat", component="engine", runners=shapes),
        paused=paused,
        update=UpdatePolicy(**policy),
        release_held=release,
    )


@dataclasses.dataclass
class UpdateWorld(World):
    """A World whose pods have images; ``bad-image`` pods fail to pull."""

    images: dict[str, tuple[tuple[str, str], ...]] = dataclasses.field(default_factory=dict)
    stop_ticks: int = 2
    """Ticks an in-place patched pod's old container keeps running (and Ready)."""
    restarting: dict[str, int] = dataclasses.field(default_factory=dict)
    """Pod name -> ticks left of its old container; at -1 the new one is being pulled."""

    def apply(self, decided: Plan, *, status_fails: bool = False) -> None:
        for create in decided.of_type(CreatePods):
            for item in create.pods:
                if item.name not in self.pods:
                    containers = item.body["spec"]["containers"]
                    self.images[item.name] = tuple((c["name"], c["image"]) for c in containers)
        super().apply(decided, status_fails=status_fails)
        if status_fails:
            return
        for patch in decided.of_type(PatchPodImages):
            current = self.pods[patch.pod.name]
            assert current.uid == patch.pod.uid
            images = list(self.images[current.name])
            for position, name, image in patch.containers:
                assert images[position][0] == name
                images[position] = (name, image)
            self.images[current.name] = tuple(images)
            self.pods[current.name] = dataclasses.replace(
                current, revision=patch.revision, runs_spec_images=False
            )  # the old container still runs, Ready, until the kubelet has stopped it
            self.restarting.setdefault(current.name, self.stop_ticks)
        for pod_name, pod in self.pods.items():
            self.pods[pod_name] = dataclasses.replace(pod, images=self.images.get(pod_name, ()))

    def tick(self, seconds: float = 1.0) -> None:
        super().tick(seconds)
        for name, left in list(self.restarting.items()):
            item = self.pods.get(name)
            if item is None or item.terminating:
                self.restarting.pop(name)
            elif left > 0:  # the old container runs on
                self.restarting[name] = left - 1
            elif left == 0 or any("bad-image" in i for _, i in self.images.get(name, ())):
                self.restarting[name] = -1  # it exited; the new image is pulled
                self.pods[name] = dataclasses.replace(
                    item, ready=False, containers_ready=False, ready_since=None
                )
            else:  # the new container runs; Ready from the next tick
                self.restarting.pop(name)
                self.pods[name] = dataclasses.replace(
                    item, ready=False, containers_ready=False, ready_since=None,
                    runs_spec_images=True,
                )  # fmt: skip
        for name, item in list(self.pods.items()):
            if any("never-ready" in image for _, image in self.images.get(name, ())):
                self.pods[name] = dataclasses.replace(
                    item, ready=False, containers_ready=False, ready_since=None
                )
            if any("bad-image" in image for _, image in self.images.get(name, ())):
                self.pods[name] = dataclasses.replace(
                    item,
                    ready=False,
                    containers_ready=False,
                    ready_since=None,
                    failing=True,
                    failure=ContainerFailure("ome-container", "ImagePullBackOff"),
                )

    def serving(self) -> int:
        """Instances (any index) whose every pod is Ready: what Services route to."""
        by_index: dict[int, list[PodView]] = {}
        for item in self.pods.values():
            by_index.setdefault(item.index, []).append(item)
        per = self.spec.pods_per_instance
        return sum(
            1
            for pods in by_index.values()
            if len(pods) == per and all(p.ready and not p.terminating for p in pods)
        )

    def run(self, passes: int = 60, seconds: float = 1.0) -> list[Plan]:
        plans = []
        for _ in range(passes):
            decided = self.plan()
            plans.append(decided)
            self.apply(decided)
            self.tick(seconds)
        return plans


def converged(replicas: int = 4, **kw: Any) -> UpdateWorld:
    world = UpdateWorld(spec(replicas, **kw))
    world.run(12)
    assert world.serving() == replicas
    assert all(row.phase == "Ready" and row.operation is None for row in world.rows.values())
    return world


def revisions(world: UpdateWorld) -> dict[int, str | None]:
    return {item.index: item.revision for item in world.live()}


def gates_off(decided: Plan) -> list[SetServingGate]:
    return [g for g in decided.of_type(SetServingGate) if not g.serving]


def events(plans: list[Plan], reason: str) -> list[RecordEvent]:
    return [e for p in plans for e in p.of_type(RecordEvent) if e.reason == reason]


# -- RecreatePod ---------------------------------------------------------------------------------


def test_recreate_pod_moves_one_instance_at_a_time_to_a_new_incarnation() -> None:
    world = converged(4, strategy="RecreatePod")
    old = world.spec.update_revision
    world.spec = spec(4, image="ome/serving:2.0", strategy="RecreatePod")
    new = world.spec.update_revision
    assert new != old and new.startswith("chat-engine-")
    plans = []
    for _ in range(80):
        decided = world.plan()
        plans.append(decided)
        updating = [r for r in decided.rows if r.operation and r.operation.type == "Update"]
        assert len(updating) <= 1  # maxUnavailable 1 by default outside SurgeThenDrain
        world.apply(decided)
        world.tick()
    assert set(revisions(world).values()) == {new}
    assert {row.incarnation for row in world.rows.values()} == {2}
    assert all(row.running_revision == new for row in world.rows.values())
    assert world.status.current_revision == new and world.status.updated_replicas == 4
    assert len(events(plans, names.EVENT_UPDATE_STARTED)) == 4
    assert len(events(plans, names.EVENT_UPDATE_COMPLETED)) == 4


def test_the_update_operation_is_recorded_before_its_first_pod_action() -> None:
    world = converged(2, strategy="RecreatePod")
    world.spec = spec(2, image="ome/serving:2.0", strategy="RecreatePod")
    decided = world.plan()
    ops = {r.index: r.operation for r in decided.rows if r.operation}
    assert [op.type for op in ops.values()] == ["Update"]
    (index,) = ops
    assert ops[index].step == names.STEP_DRAIN
    assert ops[index].target_revision == world.spec.update_revision
    assert all(g.index == index and not g.serving for g in gates_off(decided))


def test_partition_keeps_lower_indexes_on_the_old_revision() -> None:
    world = converged(4, strategy="RecreatePod")
    old = world.spec.update_revision
    world.spec = spec(4, image="ome/serving:2.0", strategy="RecreatePod", partition=2)
    world.run(60)
    assert revisions(world) == {0: old, 1: old, 2: world.spec.update_revision,
                                3: world.spec.update_revision}  # fmt: skip
    assert world.status.updated_replicas == 2


def test_max_unavailable_as_a_count_and_a_percentage() -> None:
    for value, expected in ((2, 2), ("50%", 2), ("25%", 1), (0, 1)):
        world = converged(4, strategy="RecreatePod")
        world.spec = spec(4, image="ome/serving:2.0", strategy="RecreatePod", max_unavailable=value)
        decided = world.plan()
        started = [r.index for r in decided.rows if r.operation and r.operation.type == "Update"]
        assert started == [2, 3][-expected:], value  # highest index first


def test_a_not_ready_instance_is_updated_first() -> None:
    world = converged(3, strategy="RecreatePod")
    name = "chat-engine-0-default-0"
    world.pods[name] = dataclasses.replace(world.pods[name], ready=False, containers_ready=False)
    world.spec = spec(3, image="ome/serving:2.0", strategy="RecreatePod")
    decided = world.plan()
    started = [r.index for r in decided.rows if r.operation and r.operation.type == "Update"]
    assert started == [0]  # it is the one unavailable Instance maxUnavailable allows


def test_a_paused_replica_waits() -> None:
    world = converged(2, strategy="RecreatePod")
    world.spec = spec(2, image="ome/serving:2.0", strategy="RecreatePod", paused=True)
    plans = world.run(5)
    assert not any(p.of_type(CreatePods) or p.of_type(DeletePods) for p in plans)
    assert all(r.operation is None for r in world.rows.values())
    progressing = world.status.condition(names.CONDITION_PROGRESSING)
    assert progressing is not None and progressing.reason == names.PROGRESS_PAUSED


# -- SurgeThenDrain ------------------------------------------------------------------------------


def test_surge_then_drain_is_the_default_and_records_the_surge_index() -> None:
    world = converged(2)
    world.spec = spec(2, image="ome/serving:2.0")
    decided = world.plan()
    (row,) = [r for r in decided.rows if r.operation]
    assert row.operation is not None and row.operation.surge_index == 2
    assert row.operation.step == names.STEP_SURGE_CREATE
    (create,) = decided.of_type(CreatePods)
    assert create.index == 2 and [p.name for p in create.pods] == ["chat-engine-2-default-0"]
    assert not decided.of_type(DeletePods) and not gates_off(decided)


def test_surge_then_drain_completes_and_removes_every_surge() -> None:
    world = converged(3)
    world.spec = spec(3, image="ome/serving:2.0")
    plans = world.run(120)
    assert sorted(revisions(world)) == [0, 1, 2]
    assert set(revisions(world).values()) == {world.spec.update_revision}
    assert sorted(world.rows) == [0, 1, 2]
    assert len(events(plans, names.EVENT_UPDATE_COMPLETED)) == 3


@hsettings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    replicas=st.integers(1, 4),
    surge=st.one_of(st.integers(1, 3), st.sampled_from(["25%", "50%", "100%"])),
    runners=st.sampled_from([(("default", 1),), (("leader", 1), ("worker", 2))]),
    crash_every=st.sampled_from([0, 2, 3, 5]),
)
def test_surge_then_drain_never_serves_fewer_instances_than_wanted(
    replicas: int, surge: int | str, runners: tuple[tuple[str, int], ...], crash_every: int
) -> None:
    world = UpdateWorld(spec(replicas, runners=runners))
    world.run(15)
    assert world.serving() == replicas
    world.spec = spec(replicas, image="ome/serving:2.0", runners=runners, max_surge=surge)
    for n in range(150):
        decided = world.plan()
        if crash_every and n % crash_every == 0:
            world.apply(decided, status_fails=True)  # a lost pass: nothing happens
        else:
            world.apply(decided)
        assert world.serving() >= replicas, n
        world.tick()
        assert world.serving() >= replicas, n
    assert set(revisions(world).values()) == {world.spec.update_revision}
    assert len(world.live()) == replicas * world.spec.pods_per_instance


def test_a_lost_pass_resumes_without_a_second_surge() -> None:
    world = converged(2)
    world.spec = spec(2, image="ome/serving:2.0")
    first = world.plan()
    world.apply(first)  # status stored and pods created, then the manager dies
    again = world.plan()  # a new manager, same time, pods not yet observed Ready
    surges = {r.operation.surge_index for r in again.rows if r.operation}
    assert surges == {2}
    assert [c.index for c in again.of_type(CreatePods)] in ([], [2])


# -- in place ------------------------------------------------------------------------------------


def test_in_place_if_possible_patches_images_and_keeps_the_pods() -> None:
    world = converged(2, strategy="InPlaceIfPossible")
    uids = {item.name: item.uid for item in world.live()}
    world.spec = spec(2, image="ome/serving:2.0", strategy="InPlaceIfPossible")
    plans = world.run(30)
    assert not any(p.of_type(DeletePods) or p.of_type(CreatePods) for p in plans)
    patches = [patch for p in plans for patch in p.of_type(PatchPodImages)]
    assert {patch.containers for patch in patches} == {((0, "ome-container", "ome/serving:2.0"),)}
    assert {item.name: item.uid for item in world.live()} == uids
    assert set(revisions(world).values()) == {world.spec.update_revision}
    assert all(images == (("ome-container", "ome/serving:2.0"),)
               for images in world.images.values())  # fmt: skip


def down_or_restarting(world: UpdateWorld) -> set[int]:
    """Wanted Instances not serving now or about to stop (patched, old container still up)."""
    return {
        item.index
        for item in world.pods.values()
        if item.index < world.spec.replicas
        and (not item.ready or item.terminating or not item.runs_spec_images)
    }


def test_an_in_place_update_waits_for_the_new_containers_not_the_old_ones() -> None:
    """The pod keeps the old, Ready container for a while after its patch: the Update isn't
    done, and no other Instance is patched, until the container runs the new image and the
    pod is Ready again; the row says Updating meanwhile, and runningRevision stays old."""
    world = converged(4, strategy="InPlaceIfPossible")
    old = world.spec.update_revision
    world.stop_ticks = 4
    world.spec = spec(4, image="ome/serving:2.0", strategy="InPlaceIfPossible")
    new = world.spec.update_revision
    plans = []
    for _ in range(80):
        seen = list(world.pods.values())  # what this pass plans from
        decided = world.plan()
        plans.append(decided)
        world.apply(decided)
        assert len(down_or_restarting(world)) <= 1, world.pods  # maxUnavailable 1
        for row in decided.rows:
            if any(not p.runs_spec_images for p in seen if p.index == row.index):
                assert row.operation is not None and row.operation.type == "Update", row
                assert row.phase == "Updating" and row.running_revision == old, row
        world.tick()
    patched = [patch.pod.name for p in plans for patch in p.of_type(PatchPodImages)]
    assert sorted(set(patched)) == sorted(f"chat-engine-{i}-default-0" for i in range(4))
    assert all(item.runs_spec_images and item.ready for item in world.live())
    assert all(row.running_revision == new and row.phase == "Ready" for row in world.rows.values())
    assert world.status.current_revision == new
    assert len(events(plans, names.EVENT_UPDATE_COMPLETED)) == 4


def test_an_in_place_update_completes_only_after_the_restart() -> None:
    world = converged(1, strategy="InPlaceIfPossible")
    world.stop_ticks = 3
    world.spec = spec(1, image="ome/serving:2.0", strategy="InPlaceIfPossible")
    plans = world.run(3)  # patched; the old container is still up, Ready
    (item,) = world.live()
    assert item.ready and not item.runs_spec_images and item.revision == world.spec.update_revision
    (row,) = world.rows.values()
    assert row.operation is not None and row.operation.step == names.STEP_WAIT_READY
    assert events(plans, names.EVENT_UPDATE_COMPLETED) == []
    again = UpdateWorld(world.spec, pods=dict(world.pods), rows=dict(world.rows))
    again.status = world.status  # a new manager, same pods and rows: still waiting
    (row,) = again.plan().rows
    assert row.operation is not None and row.operation.step == names.STEP_WAIT_READY
    plans = world.run(8)
    assert len(events(plans, names.EVENT_UPDATE_COMPLETED)) == 1
    (row,) = world.rows.values()
    assert row.operation is None and row.phase == "Ready"


def test_max_unavailable_counts_in_place_instances_until_their_containers_restarted() -> None:
    world = converged(4, strategy="InPlaceIfPossible", max_unavailable=2)
    world.stop_ticks = 3
    world.spec = spec(4, image="ome/serving:2.0", strategy="InPlaceIfPossible", max_unavailable=2)
    most = 0
    for _ in range(60):
        world.apply(world.plan())
        most = max(most, len(down_or_restarting(world)))
        assert most <= 2, world.pods
        world.tick()
    assert most == 2
    assert all(item.runs_spec_images and item.ready for item in world.live())


def test_in_place_if_possible_recreates_when_more_than_images_changed() -> None:
    world = converged(2, strategy="InPlaceIfPossible")
    world.spec = spec(2, cpu="2", strategy="InPlaceIfPossible")
    decided = world.plan()
    (row,) = [r for r in decided.rows if r.operation]
    assert row.operation is not None and row.operation.step == names.STEP_DRAIN
    assert not decided.of_type(PatchPodImages)


def test_in_place_only_refuses_other_changes_with_a_condition() -> None:
    world = converged(2, strategy="InPlaceOnly")
    world.spec = spec(2, cpu="2", strategy="InPlaceOnly")
    plans = world.run(5)
    assert not any(p.of_type(DeletePods) or p.of_type(PatchPodImages) for p in plans)
    assert all(r.operation is None for r in world.rows.values())
    blocked = world.status.condition(names.CONDITION_UPDATE_BLOCKED)
    assert blocked is not None and blocked.status == "True"
    assert blocked.reason == names.BLOCKED_IN_PLACE_IMPOSSIBLE
    assert "beyond container images" in (blocked.message or "")
    stable = blocked.last_transition_time
    world.now += dt.timedelta(minutes=1)
    again = world.plan().status.condition(names.CONDITION_UPDATE_BLOCKED)
    assert again is not None and again.last_transition_time == stable


def test_retry_policy_defaults() -> None:
    policy = RetryPolicy()
    assert (policy.max_attempts, policy.initial_delay, policy.max_delay) == (3, 10.0, 300.0)
    assert [policy.delay_after(n) for n in (1, 2, 3, 9)] == [10.0, 20.0, 40.0, 300.0]


@given(
    multiplier=st.floats(min_value=1.0, allow_infinity=False, allow_nan=False),
    attempts=st.integers(min_value=0, max_value=10_000),
)
def test_retry_delay_is_capped_for_any_multiplier_the_api_admits(
    multiplier: float, attempts: int
) -> None:
    policy = RetryPolicy(initial_delay=10.0, max_delay=300.0, multiplier=multiplier)
    assert 10.0 <= policy.delay_after(attempts) <= 300.0
    assert RetryPolicy(multiplier=1e200).delay_after(3) == 300.0  # overflowed before


def test_scaling_during_a_surge_then_drain_update_ends_with_the_wanted_instances() -> None:
    for replicas in (1, 5):
        world = converged(3)
        world.spec = spec(3, image="ome/serving:2.0")
        world.run(3)  # the first surge is up
        assert any(r.operation and r.operation.surge_index for r in world.rows.values())
        world.spec = spec(replicas, image="ome/serving:2.0")
        world.run(150)
        assert sorted(revisions(world)) == list(range(replicas)), replicas
        assert set(revisions(world).values()) == {world.spec.update_revision}
        assert sorted(world.rows) == list(range(replicas))
        assert all(r.operation is None for r in world.rows.values())
