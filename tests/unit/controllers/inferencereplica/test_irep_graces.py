"""stuckPodGracePeriod and unschedulableGracePeriod in the pure planner (a fake clock).

The world here is :class:`test_irep_update.UpdateWorld` with stalls as :mod:`.observe` reads
them off a pod: an image containing ``bad-image`` can't be pulled (ImagePullBackOff), one
containing ``create-error`` meets CreateContainerError, one containing ``run-error``
RunContainerError, and one containing ``no-fit`` is never scheduled (PodScheduled False,
Unschedulable); each stall is measured from the pod's creation, as the kubelet and the
scheduler report it.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from irep_world import NOW
from test_irep_update import UpdateWorld, converged, events, spec

from omed.config.lifecycle import LifecycleConfig
from omed.controllers.inferencereplica.core import names
from omed.controllers.inferencereplica.core.actions import CreatePods, DeletePods, Plan, WriteStatus
from omed.controllers.inferencereplica.core.model import ContainerFailure, PodStall, ReplicaTarget
from omed.controllers.inferencereplica.core.observe import pod_view

MESSAGE = "0/2 nodes are available: 2 Insufficient nvidia.com/gpu."
STUCK_IMAGES = {"bad-image": "ImagePullBackOff", "create-error": "CreateContainerError"}
STUCK_IMAGES["run-error"] = "RunContainerError"


def graced(
    target: ReplicaTarget, *, stuck: float | None = None, unschedulable: float | None = None
) -> ReplicaTarget:
    return dataclasses.replace(
        target,
        fleet=LifecycleConfig(
            stuck_pod_grace_period=stuck, unschedulable_grace_period=unschedulable
        ),
    )


@dataclasses.dataclass
class GraceWorld(UpdateWorld):
    born: dict[str, dt.datetime] = dataclasses.field(default_factory=dict)
    """Pod name -> its creationTimestamp."""
    stick_new: str | None = None
    """A waiting reason every pod created from now on is stuck in, whatever its image."""
    stuck: dict[str, str] = dataclasses.field(default_factory=dict)
    """Pod name -> the reason ``stick_new`` gave it."""

    def apply(self, decided: Plan, *, status_fails: bool = False) -> None:
        before = set(self.pods)
        super().apply(decided, status_fails=status_fails)
        for name in set(self.pods) - before:
            self.born[name] = self.now
            if self.stick_new is not None:
                self.stuck[name] = self.stick_new
        self._stalls()

    def tick(self, seconds: float = 1.0) -> None:
        super().tick(seconds)
        self._stalls()

    def _stalls(self) -> None:
        for name, item in list(self.pods.items()):
            images = " ".join(image for _, image in self.images.get(name, ()))
            born = self.born.get(name, NOW)
            if "no-fit" in images:
                self.pods[name] = dataclasses.replace(
                    item,
                    node=None,
                    phase="Pending",
                    ready=False,
                    containers_ready=False,
                    ready_since=None,
                    unschedulable=True,
                    stall=PodStall("Unschedulable", "Unschedulable", born, message=MESSAGE),
                )
                continue
            reason = next((r for marker, r in STUCK_IMAGES.items() if marker in images), None)
            reason = self.stuck.get(name, reason)
            if reason is None:
                continue
            self.pods[name] = dataclasses.replace(
                item,
                ready=False,
                containers_ready=False,
                ready_since=None,
                failing=True,
                failure=ContainerFailure("ome-container", reason),
                stall=PodStall("Stuck", reason, born, container="ome-container"),
            )


def world_of(target: ReplicaTarget) -> GraceWorld:
    return GraceWorld(target)


def ready_reason(world: UpdateWorld, index: int) -> str | None:
    (ready,) = [c for c in world.rows[index].conditions or () if c.type == names.CONDITION_READY]
    return ready.reason


def grace_events(plans: list[Plan]) -> list[Any]:
    return events(plans, names.EVENT_STUCK_POD_GRACE) + events(
        plans, names.EVENT_UNSCHEDULABLE_GRACE
    )


# -- Create -----------------------------------------------------------------------------------


def test_a_create_stuck_in_image_pull_fails_at_the_grace_not_at_the_deadline() -> None:
    world = world_of(
        graced(
            spec(1, image="ome/bad-image:1", ready_timeout=1800.0, strategy="RecreatePod"),
            stuck=5.0,
        )
    )
    first = world.plan()
    world.apply(first)
    created = world.born["chat-engine-0-default-0"]
    world.tick()
    plans = world.run(4)  # up to 4 s after the pod's creation
    assert not grace_events(plans)
    assert world.rows[0].operation is not None
    waits = [p.requeue_after for p in plans[1:]]
    assert waits and all(w is not None and w <= 5.0 for w in waits)  # woken at the grace's end
    assert world.now - created == dt.timedelta(seconds=5)
    failed = world.plan()  # 5 s: the grace has run out
    (event,) = events([failed], names.EVENT_STUCK_POD_GRACE)
    assert event.type == "Warning"
    assert event.message == (
        f"Instance 0 of engine was not Ready on {world.spec.update_revision}: pod "
        "chat-engine-0-default-0 wedged in ImagePullBackOff past the stuck-pod grace "
        "(stuckPodGracePeriod 5s); its Create operation failed"
    )
    assert not events([failed], names.EVENT_PROGRESS_DEADLINE)
    (row,) = failed.rows
    assert row.operation is None and row.pod_count == 1  # the pods are kept
    (ready,) = [c for c in row.conditions or () if c.type == names.CONDITION_READY]
    assert ready.reason == names.REASON_STUCK_POD_GRACE
    assert ready.message is not None and "wedged in ImagePullBackOff" in ready.message
    assert row.last_failure is not None
    assert (row.last_failure.pod, row.last_failure.reason) == (
        "chat-engine-0-default-0",
        "ImagePullBackOff",
    )
    condition = failed.status.condition(names.CONDITION_STUCK_POD_GRACE)
    assert condition is not None and condition.status == "True"
    assert condition.message == (
        "Instance(s) 0 of engine had a pod that couldn't come up within stuckPodGracePeriod: "
        "their Create operation failed; their pods are kept"
    )
    assert failed.status.condition(names.CONDITION_PROGRESS_DEADLINE) is None

    # An image that can't be pulled is the revision's fault: the retry ladder takes over.
    world.apply(failed)
    world.tick()
    plans = world.run(3)
    assert len(events(plans, names.EVENT_UPDATE_STARTED)) == 1
    (ladder,) = events(plans, names.EVENT_UPDATE_FAILED)
    assert ladder.message.endswith("Backoff after 1 failed attempt(s): ImagePullBackOff")


def test_without_a_grace_a_stuck_create_waits_for_its_deadline() -> None:
    world = world_of(spec(1, image="ome/bad-image:1", ready_timeout=30.0, strategy="RecreatePod"))
    plans = world.run(29)
    assert not grace_events(plans)
    assert world.rows[0].operation is not None
    plans = world.run(3)
    assert len(events(plans, names.EVENT_PROGRESS_DEADLINE)) == 1
    assert not grace_events(plans)


def test_a_create_on_an_unschedulable_pod_shows_the_token_then_fails_at_its_grace() -> None:
    world = world_of(
        graced(spec(1, image="ome/no-fit:1", ready_timeout=1800.0), unschedulable=10.0)
    )
    plans = world.run(10)
    assert not grace_events(plans)
    row = world.rows[0]
    assert row.operation is not None and row.operation.waiting == names.WAITING_UNSCHEDULABLE
    assert row.last_failure is not None and row.last_failure.reason == "Unschedulable"
    plans = world.run(2)
    (event,) = events(plans, names.EVENT_UNSCHEDULABLE_GRACE)
    assert event.message.endswith(
        "pod chat-engine-0-default-0 unschedulable past the unschedulable grace "
        f"(unschedulableGracePeriod 10s): {MESSAGE}; its Create operation failed"
    )
    row = world.rows[0]
    assert row.operation is None and row.pod_count == 1
    assert ready_reason(world, 0) == names.REASON_UNSCHEDULABLE_GRACE
    assert row.last_failure is not None and row.last_failure.reason == "Unschedulable"
    assert world.status.condition(names.CONDITION_UNSCHEDULABLE_GRACE) is not None

    # stable: no new operation, no pod action, no write, no second event
    plans = world.run(20)
    assert not grace_events(plans)
    assert not any(p.of_type(CreatePods) or p.of_type(DeletePods) for p in plans)
    assert not any(p.of_type(WriteStatus) for p in plans)

    # room appears: the pod schedules and gets Ready in place; the marks go
    world.images = {n: (("ome-container", "ome/serving:1.0"),) for n in world.images}
    world.pods = {
        n: dataclasses.replace(p, unschedulable=False, stall=None) for n, p in world.pods.items()
    }
    world.run(3)
    assert world.rows[0].phase == "Ready"
    assert ready_reason(world, 0) == names.INSTANCE_READY
    assert world.status.condition(names.CONDITION_UNSCHEDULABLE_GRACE) is None


def test_a_stall_older_than_the_attempt_is_measured_from_the_attempts_start() -> None:
    # A pod stalled long before a Create started (a missing sibling is being created) gets
    # the whole grace from the Create's start, not none.
    target = graced(
        spec(1, image="ome/bad-image:1", runners=(("leader", 1), ("worker", 1))), stuck=5.0
    )
    world = world_of(target)
    world.run(1)
    world.born = {name: NOW - dt.timedelta(hours=1) for name in world.born}
    del world.pods["chat-engine-0-worker-0"]  # the worker goes: a new Create (PodsMissing)
    world.rows = {}
    start = world.now
    plans = world.run(5)
    assert not grace_events(plans)
    assert world.now - start == dt.timedelta(seconds=5)
    assert len(events(world.run(1), names.EVENT_STUCK_POD_GRACE)) == 1


def test_a_paused_create_fails_at_its_grace_only_when_it_resumes() -> None:
    world = world_of(graced(spec(1, image="ome/bad-image:1"), stuck=3.0))
    world.run(1)
    world.spec = dataclasses.replace(world.spec, paused=True)
    plans = world.run(10)
    assert not grace_events(plans)
    assert world.rows[0].operation is not None
    world.spec = dataclasses.replace(world.spec, paused=False)
    assert len(events(world.run(1), names.EVENT_STUCK_POD_GRACE)) == 1
    assert world.rows[0].operation is None


# -- Update -----------------------------------------------------------------------------------


def test_an_update_stuck_past_the_grace_moves_the_retry_ladder_with_the_pods_reason() -> None:
    # CreateContainerError is no revision failure by itself (retry.REVISION_FAILURES): without
    # a grace, the Update would wait for instanceReadyTimeout.
    world = converged(1, strategy="RecreatePod")
    world = GraceWorld(
        world.spec,
        pods=world.pods,
        rows=world.rows,
        status=world.status,
        now=world.now,
        images=world.images,
    )
    world.spec = graced(
        spec(1, image="ome/create-error:2", strategy="RecreatePod", ready_timeout=1800.0),
        stuck=4.0,
    )
    plans = world.run(6)
    assert not grace_events(plans)
    assert world.rows[0].operation is not None and world.rows[0].operation.type == "Update"
    plans = world.run(5)
    (event,) = events(plans, names.EVENT_STUCK_POD_GRACE)
    assert "wedged in CreateContainerError" in event.message
    assert "its Update operation failed" in event.message
    (failed,) = events(plans, names.EVENT_UPDATE_FAILED)
    assert "Backoff after 1 failed attempt(s): CreateContainerError" in failed.message
    (block,) = world.status.retry_blocks or ()
    assert (block.state, block.reason) == ("Backoff", "CreateContainerError")
    assert not events(plans, names.EVENT_PROGRESS_DEADLINE)


def test_a_surge_that_never_schedules_is_aborted_at_the_grace_and_the_instance_keeps_serving() -> (
    None
):
    world = converged(2)
    old = world.spec.update_revision
    world = GraceWorld(
        world.spec,
        pods=world.pods,
        rows=world.rows,
        status=world.status,
        now=world.now,
        images=world.images,
    )
    world.spec = graced(spec(2, image="ome/no-fit:2", ready_timeout=1800.0), unschedulable=6.0)
    plans = world.run(5)
    surges = [r for r in world.rows.values() if r.index >= 2]
    assert surges and surges[0].phase == "Pending"
    updating = [r for r in world.rows.values() if r.operation and r.operation.type == "Update"]
    assert updating and updating[0].operation is not None
    assert updating[0].operation.waiting == names.WAITING_UNSCHEDULABLE
    plans = world.run(8)
    (event,) = events(plans, names.EVENT_UNSCHEDULABLE_GRACE)
    assert "its Update operation failed" in event.message
    (block,) = world.status.retry_blocks or ()
    assert (block.state, block.reason) == ("Backoff", "Unschedulable")
    assert world.serving() == 2
    assert {item.revision for item in world.live() if item.index < 2} == {old}
    assert all(item.index < 2 for item in world.live())  # the surge is gone


def test_an_update_without_a_grace_waits_on_an_unschedulable_surge() -> None:
    world = converged(1)
    world = GraceWorld(
        world.spec,
        pods=world.pods,
        rows=world.rows,
        status=world.status,
        now=world.now,
        images=world.images,
    )
    world.spec = spec(1, image="ome/no-fit:2")
    plans = world.run(60)
    assert not grace_events(plans) and not world.status.retry_blocks
    assert any(r.operation and r.operation.type == "Update" for r in world.rows.values())


# -- Restart ----------------------------------------------------------------------------------


def test_a_restart_whose_rebuilt_pod_cant_run_ends_at_the_grace() -> None:
    world = converged(1)
    world = GraceWorld(
        world.spec,
        pods=world.pods,
        rows=world.rows,
        status=world.status,
        now=world.now,
        images=world.images,
    )
    world.spec = graced(spec(1, recreate_on_restart=True, ready_timeout=1800.0), stuck=5.0)
    name = "chat-engine-0-default-0"
    world.pods[name] = dataclasses.replace(world.pods[name], restarts=1)
    world.stick_new = "RunContainerError"  # the rebuilt incarnation's container can't start
    plans = world.run(4)
    assert world.rows[0].operation is not None and world.rows[0].operation.type == "Restart"
    assert world.rows[0].incarnation == 2 and not grace_events(plans)
    plans = world.run(6)
    (event,) = events(plans, names.EVENT_STUCK_POD_GRACE)
    assert "wedged in RunContainerError" in event.message
    assert "its Restart operation failed" in event.message
    assert world.rows[0].operation is None
    assert not events(plans, names.EVENT_REPAIR_PARKED)  # not a crash: nothing to park on
    plans = world.run(10)  # the pod stays; nothing restarts it again
    assert not any(p.of_type(CreatePods) or p.of_type(DeletePods) for p in plans)


# -- observation: the clock lives on the pod ------------------------------------------------------


def pod_json(**status: Any) -> dict[str, Any]:
    return {
        "metadata": {
            "name": "chat-engine-0-default-0",
            "uid": "u1",
            "creationTimestamp": "2026-09-14T20:00:00Z",
            "labels": {"ome.io/instance-index": "0"},
        },
        "spec": {"containers": [{"name": "ome-container", "image": "ome/x:1"}]},
        "status": status,
    }


def test_a_stuck_pod_is_measured_from_its_creation_or_from_when_it_stopped_being_ready() -> None:
    waiting = [{"name": "ome-container", "state": {"waiting": {"reason": "ErrImagePull"}}}]
    never_ready = pod_view(
        pod_json(
            containerStatuses=waiting,
            conditions=[
                {
                    "type": "ContainersReady",
                    "status": "False",
                    "lastTransitionTime": "2026-09-14T19:59:59Z",
                }
            ],
        ),
        replica="chat-engine",
    )
    assert never_ready.stall == PodStall(
        "Stuck",
        "ImagePullBackOff",
        dt.datetime(2026, 9, 14, 20, 0, tzinfo=dt.UTC),
        container="ome-container",
    )
    broke_later = pod_view(
        pod_json(
            containerStatuses=waiting,
            conditions=[
                {
                    "type": "ContainersReady",
                    "status": "False",
                    "lastTransitionTime": "2026-09-14T20:07:00Z",
                }
            ],
        ),
        replica="chat-engine",
    )
    assert broke_later.stall is not None
    assert broke_later.stall.since == dt.datetime(2026, 9, 14, 20, 7, tzinfo=dt.UTC)
    running = pod_view(
        pod_json(containerStatuses=[{"name": "ome-container", "state": {"running": {}}}]),
        replica="chat-engine",
    )
    assert running.stall is None
    for reason in ("ContainerCreating", "PodInitializing"):  # waits that resolve by themselves
        item = [{"name": "ome-container", "state": {"waiting": {"reason": reason}}}]
        assert pod_view(pod_json(containerStatuses=item), replica="chat-engine").stall is None
    init = pod_view(
        pod_json(
            initContainerStatuses=[
                {"name": "fetch", "state": {"waiting": {"reason": "CreateContainerConfigError"}}}
            ],
            containerStatuses=[
                {"name": "ome-container", "state": {"waiting": {"reason": "PodInitializing"}}}
            ],
        ),
        replica="chat-engine",
    )
    assert init.stall is not None
    assert (init.stall.reason, init.stall.container) == ("CreateContainerConfigError", "fetch")


def test_an_unschedulable_pod_is_measured_from_its_podscheduled_transition() -> None:
    item = pod_view(
        pod_json(
            phase="Pending",
            conditions=[
                {
                    "type": "PodScheduled",
                    "status": "False",
                    "reason": "Unschedulable",
                    "message": MESSAGE,
                    "lastTransitionTime": "2026-09-14T20:03:00Z",
                }
            ],
        ),
        replica="chat-engine",
    )
    assert item.unschedulable
    assert item.stall == PodStall(
        "Unschedulable",
        "Unschedulable",
        dt.datetime(2026, 9, 14, 20, 3, tzinfo=dt.UTC),
        message=MESSAGE,
    )
    unstamped = pod_json(
        conditions=[{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]
    )
    assert pod_view(unstamped, replica="chat-engine").stall is None  # no time, no duration


# -- properties -------------------------------------------------------------------------------


@settings(max_examples=80, deadline=None)
@given(
    kind=st.sampled_from(["bad-image", "create-error", "no-fit"]),
    grace=st.integers(1, 40),
    steps=st.lists(st.floats(0.2, 9.0), min_size=1, max_size=40),
    restart_at=st.integers(0, 40),
)
def test_a_grace_fails_an_attempt_never_early_and_at_the_first_pass_past_its_end(
    kind: str, grace: int, steps: list[float], restart_at: int
) -> None:
    """Over arbitrary pass timings (and a new leader at any pass, which starts from the rows
    and pods alone): no grace event before the pod's grace has run out; the first pass at or
    past its end fails the Create, once; a pass inside the grace is requeued no later than
    its end."""
    graces = {"stuck": float(grace)} if kind != "no-fit" else {"unschedulable": float(grace)}
    world = world_of(graced(spec(1, image=f"ome/{kind}:1", ready_timeout=3600.0), **graces))
    world.apply(world.plan())
    end = world.born["chat-engine-0-default-0"] + dt.timedelta(seconds=grace)
    failures = 0
    for number, seconds in enumerate(steps):
        world.tick(seconds)
        if number == restart_at:  # a new leader: nothing but what the cluster stores
            world = GraceWorld(
                world.spec,
                pods=dict(world.pods),
                rows=dict(world.rows),
                status=world.status,
                now=world.now,
                images=dict(world.images),
                born=dict(world.born),
            )
        decided = world.plan()
        found = [  # the Create's own failure (a retry's Update may follow it)
            e for e in grace_events([decided]) if "its Create operation failed" in e.message
        ]
        if world.now < end:
            assert not found, (world.now, end)
            assert decided.requeue_after is not None
            assert decided.requeue_after <= (end - world.now).total_seconds() + 1e-6
        elif failures == 0:
            assert len(found) == 1
        failures += len(found)
        world.apply(decided)
    assert failures <= 1
    assert (failures == 1) == (world.now >= end)
