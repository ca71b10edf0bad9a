"""PodGroups of multi-pod Instances, in the pure planner: the PodGroup before the pods, its
spec and timeout clamp, patches, resets, leftovers within the scale-down budget, the teardown,
the waiting token, the condition without the CRD, and the gang events."""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

import pytest
from irep_world import NOW, World, instance, settings, target

from omed.config.lifecycle import GangScheduleTimeoutConfig, LifecycleConfig
from omed.controllers.inferencereplica.core import names, podgroups
from omed.controllers.inferencereplica.core.actions import (
    CreatePods,
    Plan,
    RecordEvent,
    RemoveFinalizer,
    WriteStatus,
)
from omed.controllers.inferencereplica.core.model import ObservedState, PlanSettings, ReplicaTarget
from omed.controllers.inferencereplica.core.podgroupactions import (
    CreatePodGroup,
    DeletePodGroup,
    UpdatePodGroup,
)
from omed.controllers.inferencereplica.core.policy import UpdatePolicy

GANG = (("leader", 1), ("worker", 2))


def clamp(low: float | None, high: float | None) -> LifecycleConfig:
    """The ``gangScheduleTimeout`` entry, as the ConfigMap writes it (seconds as "60s")."""
    return LifecycleConfig(
        gang_schedule_timeout=GangScheduleTimeoutConfig.model_validate(
            {k: f"{v:g}s" for k, v in (("min", low), ("max", high)) if v is not None}
        )
    )


CLAMP = clamp(60, 600)


def gang(replicas: int = 2, *, timeout: float | None = 1800, **kw: Any) -> ReplicaTarget:
    spec = target(replicas, runners=GANG, **kw)
    return dataclasses.replace(spec, update=UpdatePolicy(ready_timeout=timeout), fleet=CLAMP)


def enabled(**kw: Any) -> PlanSettings:
    return dataclasses.replace(settings(**kw), pod_groups=True)


@dataclasses.dataclass
class GangWorld(World):
    """A World whose cache also holds PodGroups (as the API server would store them)."""

    groups: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)
    made: int = 0

    def observed(self) -> ObservedState:
        return dataclasses.replace(
            super().observed(),
            pod_groups=podgroups.views(self.groups.values(), uid=self.spec.uid),
        )

    def apply(self, decided: Plan, *, status_fails: bool = False) -> None:
        super().apply(decided, status_fails=status_fails)
        if status_fails:
            return
        for made in decided.of_type(CreatePodGroup):
            if made.name in self.groups:
                continue
            self.made += 1
            body = copy.deepcopy(dict(made.body))
            body["metadata"].update(uid=f"pg-{self.made}", resourceVersion=str(self.made))
            self.groups[made.name] = body
        for patched in decided.of_type(UpdatePodGroup):
            body = self.groups[patched.name]
            assert (
                body["metadata"]["resourceVersion"] == patched.patch["metadata"]["resourceVersion"]
            )
            body["metadata"]["labels"].update(patched.patch["metadata"].get("labels") or {})
            for key, value in (patched.patch.get("spec") or {}).items():
                if value is None:
                    body["spec"].pop(key, None)
                else:
                    body["spec"][key] = value
        for gone in decided.of_type(DeletePodGroup):
            assert self.groups[gone.name]["metadata"]["uid"] == gone.uid
            del self.groups[gone.name]


def events(decided: Plan, reason: str) -> list[RecordEvent]:
    return [event for event in decided.of_type(RecordEvent) if event.reason == reason]


def row_waiting(decided: Plan, index: int) -> str | None:
    row = next(row for row in decided.rows if row.index == index)
    return row.operation.waiting if row.operation is not None else None


# -- the Warning events' messages ------------------------------------------------------------


@pytest.mark.parametrize(
    ("warning", "fields", "message"),
    [
        (
            names.MAYBE_NO_GANG_SCHEDULER,
            {"component": "engine", "scheduler": 'default"scheduler'},
            "OMENative component=engine created scheduler-plugins PodGroup objects but pod "
            'template\'s spec.schedulerName is "default\\"scheduler" (default kube-scheduler '
            "does not enforce PodGroup gang); set runtime.spec.schedulerName to a gang-aware "
            "scheduler (e.g. scheduler-plugins-scheduler) or install scheduler-plugins as a "
            "plugin in the default scheduler",
        ),
        (
            names.POD_GROUP_RESET,
            {"component": "engine", "name": "chat-engine-0", "reason": "its phase is Failed"},
            "OMENative component=engine: deleting PodGroup chat-engine-0 so the gang can be "
            "admitted again (its phase is Failed)",
        ),
        (
            names.GANG_SPLIT_RISK,
            {"component": "engine"},
            "OMENative component=engine is a multi-node gang but its worker pods have no "
            "co-location podAffinity: the gang may be scheduled across separate "
            "network/NVLink/TPU topology domains, breaking the tightly-coupled collectives a "
            "multi-node runtime needs (NCCL/RCCL/NIXL all-reduce, multi-host TPU sessions). "
            "Declare a required worker podAffinity that keeps the gang in one topology domain.",
        ),
        (
            names.POD_GROUP_NAME_TAKEN,
            {"component": "engine", "name": "chat-engine-0", "index": 3},
            "PodGroup chat-engine-0 is controlled by another object: the pods of Instance 3 of "
            "engine wait until the name is free",
        ),
    ],
)
def test_warning_messages_are_spelled_exactly(
    warning: names.WarningEvent, fields: dict[str, object], message: str
) -> None:
    assert warning.message(**fields) == message


# -- the timeout clamp ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("ready", "low", "high", "expected"),
    [
        (1800, 60, 600, 600),  # the chart's 30m, clamped to 10m
        (300, 60, 600, 300),
        (30, 60, 600, 60),
        (None, 60, 600, 60),  # unset: the min
        (1800, None, None, 1800),  # no clamp: instanceReadyTimeout itself
        (90.7, None, None, 90),  # whole seconds
        (None, None, 600, None),  # nothing positive: the scheduler's default
        (None, None, None, None),
    ],
)
def test_schedule_timeout_is_instance_ready_timeout_clamped(
    ready: float | None, low: float | None, high: float | None, expected: int | None
) -> None:
    spec = dataclasses.replace(
        target(1, runners=GANG),
        update=UpdatePolicy(ready_timeout=ready),
        fleet=clamp(low, high),
    )
    assert podgroups.schedule_timeout(spec) == expected
    body = podgroups.pod_group_body(spec, 0)
    assert body["spec"].get("scheduleTimeoutSeconds") == expected


# -- the PodGroup before the pods ----------------------------------------------------------------


def test_a_gang_gets_its_pod_group_and_its_pods_only_once_the_cache_shows_it() -> None:
    world = GangWorld(gang(2))
    first = world.plan(enabled())
    made = first.of_type(CreatePodGroup)
    assert [m.name for m in made] == ["chat-engine-0", "chat-engine-1"]
    assert not first.of_type(CreatePods)  # held back
    assert {row.index for row in first.rows if row.operation} == {0, 1}  # Creates recorded
    body = made[0].body
    assert body["apiVersion"] == "scheduling.x-k8s.io/v1alpha1"
    assert body["kind"] == "PodGroup"
    assert body["metadata"]["namespace"] == "prod"
    assert body["metadata"]["labels"] == {
        "ome.io/inferenceservice": "chat",
        "component": "engine",
        "ome.io/managed-by": "OMENative",
        "ome.io/instance-index": "0",
    }
    (ref,) = body["metadata"]["ownerReferences"]
    assert (ref["kind"], ref["name"], ref["uid"], ref["controller"]) == (
        "InferenceReplica",
        "chat-engine",
        "irep-uid",
        True,
    )
    assert body["spec"] == {"minMember": 3, "scheduleTimeoutSeconds": 600}
    assert "ome.io/topology-key" not in (body["metadata"].get("annotations") or {})
    assert first.requeue_after is not None
    (warning,) = events(first, names.MAYBE_NO_GANG_SCHEDULER.reason)
    assert warning.type == "Warning"
    assert 'spec.schedulerName is ""' in warning.message
    assert events(first, names.GANG_SPLIT_RISK.reason)
    # The PodGroup writes go ahead of every pod write in the plan.
    kinds = [type(a).__name__ for a in first.actions]
    assert kinds.index("CreatePodGroup") > kinds.index("WriteStatus")

    world.apply(first)
    second = world.plan(enabled())
    assert not second.of_type(CreatePodGroup)
    created = second.of_type(CreatePods)
    assert [c.index for c in created] == [0, 1]
    labels = created[0].pods[0].body["metadata"]["labels"]
    assert labels["scheduling.x-k8s.io/pod-group"] == "chat-engine-0"
    assert not events(second, names.MAYBE_NO_GANG_SCHEDULER.reason)


def test_a_converged_gang_writes_nothing_more() -> None:
    world = GangWorld(gang(2))
    for _ in range(8):
        world.apply(world.plan(enabled()))
        world.tick()
    assert len(world.pods) == 6 and len(world.groups) == 2
    again = world.plan(enabled())
    assert not again.of_type(WriteStatus)
    assert not [a for a in again.actions if isinstance(a, CreatePodGroup | UpdatePodGroup)]
    assert not again.of_type(DeletePodGroup)


def test_a_gang_scheduler_named_silences_maybe_no_gang_scheduler() -> None:
    spec = gang(1)
    template = {"spec": {"schedulerName": "scheduler-plugins-scheduler", "containers": []}}
    runners = tuple(dataclasses.replace(r, template=template) for r in spec.runners)
    decided = GangWorld(dataclasses.replace(spec, runners=runners)).plan(enabled())
    assert decided.of_type(CreatePodGroup)
    assert not events(decided, names.MAYBE_NO_GANG_SCHEDULER.reason)


def test_a_required_worker_pod_affinity_silences_gang_split_risk() -> None:
    spec = gang(1)
    affinity = {
        "podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{"topologyKey": "rack"}]}
    }
    runners = tuple(
        dataclasses.replace(r, template={"spec": {"affinity": affinity, "containers": []}})
        if r.name == "worker"
        else r
        for r in spec.runners
    )
    decided = GangWorld(dataclasses.replace(spec, runners=runners)).plan(enabled())
    assert not events(decided, names.GANG_SPLIT_RISK.reason)


def test_single_pod_instances_get_no_pod_group() -> None:
    decided = GangWorld(target(2)).plan(enabled())
    assert not decided.of_type(CreatePodGroup)
    assert [c.index for c in decided.of_type(CreatePods)] == [0, 1]
    assert not any(c.type == names.CONDITION_GANG_UNAVAILABLE for c in decided.status.conditions)


def test_running_gangs_without_a_pod_group_get_one() -> None:
    """Instances made before the CRD was installed (or before PodGroups) get theirs."""
    spec = gang(1)
    world = GangWorld(spec).add(instance(spec, 0))
    decided = world.plan(enabled())
    assert [m.name for m in decided.of_type(CreatePodGroup)] == ["chat-engine-0"]
    assert not decided.of_type(CreatePods)


# -- drift, termination, a taken name, a Failed verdict --------------------------------------


def converged_world(spec: ReplicaTarget) -> GangWorld:
    world = GangWorld(spec)
    for _ in range(8):
        world.apply(world.plan(enabled()))
        world.tick()
    return world


def test_a_pod_group_that_no_longer_matches_is_patched() -> None:
    world = converged_world(gang(1))
    world.groups["chat-engine-0"]["spec"] = {"minMember": 2}
    world.groups["chat-engine-0"]["metadata"]["labels"]["component"] = "other"
    (patched,) = world.plan(enabled()).of_type(UpdatePodGroup)
    assert patched.name == "chat-engine-0"
    assert patched.patch == {
        "metadata": {"resourceVersion": "1", "labels": {"component": "engine"}},
        "spec": {"minMember": 3, "scheduleTimeoutSeconds": 600},
    }
    # A timeout that isn't configured any more is removed.
    world.apply(world.plan(enabled()))
    world.spec = dataclasses.replace(world.spec, update=UpdatePolicy(), fleet=LifecycleConfig())
    (patched,) = world.plan(enabled()).of_type(UpdatePodGroup)
    assert patched.patch["spec"] == {"scheduleTimeoutSeconds": None}


def test_a_terminating_pod_group_holds_the_pods_on_pod_group_terminating() -> None:
    world = GangWorld(gang(1))
    world.apply(world.plan(enabled()))
    world.groups["chat-engine-0"]["metadata"]["deletionTimestamp"] = NOW.isoformat()
    held = world.plan(enabled())
    assert not held.of_type(CreatePods)
    assert not held.of_type(CreatePodGroup) and not held.of_type(DeletePodGroup)
    assert row_waiting(held, 0) == names.WAITING_POD_GROUP_TERMINATING
    world.apply(held)
    del world.groups["chat-engine-0"]  # gone: made again, then the pods
    remade = world.plan(enabled())
    assert remade.of_type(CreatePodGroup) and not remade.of_type(CreatePods)
    assert row_waiting(remade, 0) is None  # the token is cleared


def test_a_pod_group_of_another_owner_holds_the_pods_with_a_warning() -> None:
    world = GangWorld(gang(1))
    world.apply(world.plan(enabled()))
    world.groups["chat-engine-0"]["metadata"]["ownerReferences"][0]["uid"] = "someone-else"
    held = world.plan(enabled())
    assert not held.of_type(CreatePods)
    assert not [a for a in held.actions if isinstance(a, CreatePodGroup | UpdatePodGroup)]
    (warning,) = events(held, names.POD_GROUP_NAME_TAKEN.reason)
    assert "PodGroup chat-engine-0 is controlled by another object" in warning.message


def test_a_failed_pod_group_is_reset() -> None:
    world = converged_world(gang(1))
    world.groups["chat-engine-0"]["status"] = {"phase": "Failed"}
    decided = world.plan(enabled())
    (gone,) = decided.of_type(DeletePodGroup)
    assert gone.name == "chat-engine-0"
    (warning,) = events(decided, names.POD_GROUP_RESET.reason)
    assert warning.message == (
        "OMENative component=engine: deleting PodGroup chat-engine-0 so the gang can be "
        "admitted again (its phase is Failed)"
    )
    world.apply(decided)
    assert "chat-engine-0" not in world.groups
    assert world.plan(enabled()).of_type(CreatePodGroup)  # made again


def test_a_failed_pod_group_of_a_failed_member_waits() -> None:
    world = converged_world(gang(1))
    world.groups["chat-engine-0"]["status"] = {"phase": "Failed"}
    name = "chat-engine-0-worker-1"
    world.pods[name] = dataclasses.replace(world.pods[name], phase="Failed")
    assert not world.plan(enabled()).of_type(DeletePodGroup)


# -- leftovers and teardown ----------------------------------------------------------------------


def test_scale_down_deletes_the_leftover_pod_group_once_the_pods_are_gone() -> None:
    world = converged_world(gang(2))
    world.spec = dataclasses.replace(world.spec, replicas=1)
    seen_delete = False
    for _ in range(12):
        decided = world.plan(enabled())
        dropped = decided.of_type(DeletePodGroup)
        if dropped:
            assert [d.name for d in dropped] == ["chat-engine-1"]
            assert not any(p.index == 1 for p in world.pods.values())  # pods first
            seen_delete = True
        world.apply(decided)
        world.tick()
    assert seen_delete
    assert sorted(world.groups) == ["chat-engine-0"]


@pytest.mark.parametrize(("down", "per_pass"), [(None, 4), (1, 1), (2, 2), ("30%", 3)])
def test_leftover_pod_groups_are_deleted_within_the_scale_down_budget(
    down: int | str | None, per_pass: int
) -> None:
    spec = gang(1)
    world = converged_world(gang(5))
    world.spec = spec
    for index in range(1, 5):
        for name in [n for n, p in world.pods.items() if p.index == index]:
            del world.pods[name]
        world.rows.pop(index, None)
    # Each leftover costs 1; a percentage resolves against Instance 0's 3 pods plus the 4
    # leftovers: 30% of 7, rounded up, is 3.
    decided = world.plan(enabled(down=down))
    assert len(decided.of_type(DeletePodGroup)) == per_pass
    if per_pass < 4:
        assert decided.requeue_after is not None


def test_teardown_deletes_every_pod_group_before_the_finalizer_goes() -> None:
    world = converged_world(gang(2))
    world.spec = dataclasses.replace(world.spec, deleting=True)
    removed = False
    for _ in range(20):
        decided = world.plan(enabled())
        if decided.of_type(RemoveFinalizer):
            assert not world.groups
            removed = True
            break
        world.apply(decided)
        world.tick()
    assert removed


def test_a_paused_replica_writes_no_pod_group() -> None:
    decided = GangWorld(gang(2, paused=True)).plan(enabled())
    assert not [
        a
        for a in decided.actions
        if isinstance(a, CreatePodGroup | UpdatePodGroup | DeletePodGroup)
    ]


# -- without the CRD -----------------------------------------------------------------------------


def test_without_the_crd_pods_are_created_and_the_condition_says_why() -> None:
    decided = GangWorld(gang(2)).plan(settings())
    assert not decided.of_type(CreatePodGroup)
    assert [c.index for c in decided.of_type(CreatePods)] == [0, 1]
    (cond,) = [c for c in decided.status.conditions if c.type == "GangSchedulingUnavailable"]
    assert (cond.status, cond.reason) == ("True", "PodGroupCRDNotInstalled")
    assert cond.message == (
        "scheduler-plugins scheduling.x-k8s.io/v1alpha1 PodGroup CRD is not installed; "
        "multi-pod Instances may schedule partially"
    )
    assert events(decided, names.GANG_SPLIT_RISK.reason)
    assert not events(decided, names.MAYBE_NO_GANG_SCHEDULER.reason)


def test_without_the_crd_the_condition_keeps_its_transition_time() -> None:
    world = GangWorld(gang(1))
    first = world.plan(settings())
    world.apply(first)
    world.tick(30)
    again = world.plan(settings())
    (before,) = [c for c in first.status.conditions if c.type == "GangSchedulingUnavailable"]
    (after,) = [c for c in again.status.conditions if c.type == "GangSchedulingUnavailable"]
    assert before.last_transition_time == after.last_transition_time


def test_views_read_the_cache() -> None:
    spec = gang(1)
    body = podgroups.pod_group_body(spec, 0)
    body["metadata"].update(uid="u1", resourceVersion="7", deletionTimestamp=NOW.isoformat())
    body["status"] = {"phase": "Pending"}
    (view,) = podgroups.views([body], uid="irep-uid")
    assert (view.name, view.uid, view.resource_version) == ("chat-engine-0", "u1", "7")
    assert view.ours and view.terminating
    assert (view.min_member, view.schedule_timeout, view.phase) == (3, 600, "Pending")
    (other,) = podgroups.views([body], uid="another")
    assert not other.ours
