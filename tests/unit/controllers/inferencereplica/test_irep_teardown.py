"""The teardown of a deleted InferenceReplica that can't be read, planned from its pods alone."""

from __future__ import annotations

import dataclasses
import datetime as dt
from typing import Any

import pytest
from irep_world import NOW, instance, pod, settings, target

from omed.config.lifecycle import ForceDeleteConfig, LifecycleConfig, TeardownConfig
from omed.controllers.inferencereplica.core import names
from omed.controllers.inferencereplica.core.actions import (
    DeletePods,
    ForceDeletePod,
    Plan,
    RecordEvent,
    RemoveFinalizer,
    SetServingGate,
)
from omed.controllers.inferencereplica.core.memory import KeyMemory
from omed.controllers.inferencereplica.core.model import PodView
from omed.controllers.inferencereplica.core.nodes import NodeView
from omed.controllers.inferencereplica.core.teardown import (
    escalate_from_pods,
    teardown_from_pods,
    teardown_target,
)

SPEC = target(4, runners=[("leader", 1), ("worker", 1)])


def serving_pods(count: int) -> dict[str, PodView]:
    return {p.name: p for i in range(count) for p in instance(SPEC, i)}


def apply(pods: dict[str, PodView], decided: Plan) -> None:
    """The executor, then a kubelet step: gates land, Ready follows the gate, deleted pods
    turn Terminating; Terminating pods of the pass before are gone."""
    for name in [n for n, p in pods.items() if p.terminating]:
        del pods[name]
    for gate in decided.of_type(SetServingGate):
        current = pods[gate.pod.name]
        pods[current.name] = dataclasses.replace(current, serving=gate.serving, ready=False)
    for delete in decided.of_type(DeletePods):
        for ref in delete.pods:
            current = pods[ref.name]
            assert current.uid == ref.uid and not current.routed, ref
            pods[ref.name] = dataclasses.replace(current, terminating=True)


def down(pods: dict[str, PodView]) -> set[int]:
    return {p.index for p in pods.values() if p.terminating or not p.routed}


@pytest.mark.parametrize(("budget", "most"), [(2, 1), (4, 2), ("50%", 2), (None, 4)])
def test_instances_go_in_waves_highest_first_and_no_routed_pod_is_deleted(
    budget: int | str | None, most: int
) -> None:
    pods = serving_pods(4)
    config = settings(down=budget)
    order: list[int] = []
    for _ in range(40):
        decided = teardown_from_pods(list(pods.values()), settings=config)
        if decided.of_type(RemoveFinalizer):
            break
        for delete in decided.of_type(DeletePods):
            order.append(delete.index)
        apply(pods, decided)
        assert len(down(pods)) <= most
    else:
        pytest.fail("the teardown never ended")
    assert not pods
    assert order == sorted(order, reverse=True) or most > 1
    assert sorted(order) == [0, 1, 2, 3]


def test_the_first_pass_gates_off_the_highest_instances_and_deletes_nothing() -> None:
    decided = teardown_from_pods(list(serving_pods(4).values()), settings=settings(down=2))
    assert sorted(g.pod.name for g in decided.of_type(SetServingGate)) == [
        "chat-engine-3-leader-0",
        "chat-engine-3-worker-0",
    ]
    assert all(
        g.serving is False and g.reason == "Draining" for g in decided.of_type(SetServingGate)
    )
    assert not decided.of_type(DeletePods)
    assert decided.rows == ()
    wave = decided.wave_log
    assert wave is not None
    assert (wave.pod_budget, wave.pod_footprint) == (2, 8)
    assert (wave.started_instances, wave.deferred_instances) == ((3,), (0, 1, 2))
    assert decided.requeue_after == 5.0


def test_a_pod_still_ready_after_its_gate_went_false_is_not_deleted() -> None:
    pods = [
        pod(SPEC, 0, "default", ready=True, serving=False),
        pod(SPEC, 1, "default", ready=False, serving=False),
    ]
    decided = teardown_from_pods(pods, settings=settings(down=1))
    assert [d.index for d in decided.of_type(DeletePods)] == [1]
    assert not decided.of_type(SetServingGate)


def test_no_new_batch_starts_while_a_delete_in_flight_has_a_pod() -> None:
    pods = [
        pod(SPEC, 0, "default"),
        pod(SPEC, 1, "default"),
        pod(SPEC, 2, "default", ready=False, serving=False, terminating=True),
    ]
    decided = teardown_from_pods(pods, settings=settings(down=3))
    assert decided.actions == ()
    assert decided.wave_log is not None and decided.wave_log.active_instances == (2,)


def test_instances_that_serve_nothing_are_deleted_in_their_batch_without_a_gate_write() -> None:
    pods = [pod(SPEC, i, "default", ready=False) for i in range(3)]  # never Ready, no gate
    decided = teardown_from_pods(pods, settings=settings(down=2))
    assert not decided.of_type(SetServingGate)
    assert [d.index for d in decided.of_type(DeletePods)] == [1, 2]


def test_pods_without_an_index_are_drained_one_by_one_and_hold_the_finalizer() -> None:
    stray = dataclasses.replace(pod(SPEC, 0, "default"), name="odd", uid="odd-uid", index=-1)
    decided = teardown_from_pods([stray], settings=settings(down=1))
    assert [g.pod.name for g in decided.of_type(SetServingGate)] == ["odd"]
    assert not decided.of_type(RemoveFinalizer)
    unrouted = dataclasses.replace(stray, ready=False, serving=False)
    decided = teardown_from_pods([unrouted], settings=settings(down=1))
    assert [[r.name for r in d.pods] for d in decided.of_type(DeletePods)] == [["odd"]]


def test_the_finalizer_goes_once_no_pod_is_left() -> None:
    assert teardown_from_pods([], settings=settings()).actions == (RemoveFinalizer(),)
    assert teardown_from_pods([], settings=settings(), has_finalizer=False).actions == ()


def test_an_orphan_deletion_drains_nothing_and_only_lets_the_finalizer_go() -> None:
    decided = teardown_from_pods(
        list(serving_pods(2).values()), settings=settings(), orphaning=True
    )
    assert decided.actions == (RemoveFinalizer(),)


# -- the escalation of a teardown planned from the pods --------------------------------------

DELETED = "2026-09-14T19:50:00Z"
"""Ten minutes before ``NOW``."""


def unreadable(*, spec: object, finalizers: tuple[str, ...] = (names.FINALIZER,)) -> dict[str, Any]:
    """A deleted InferenceReplica whose spec the models refuse (``spec`` as stored)."""
    return {
        "metadata": {
            "name": "chat-engine",
            "namespace": "ns",
            "uid": "u-irep",
            "deletionTimestamp": DELETED,
            "finalizers": list(finalizers),
            "ownerReferences": [
                {"kind": "InferenceService", "name": "chat", "uid": "u-isvc", "controller": True}
            ],
        },
        "spec": spec,
    }


RAW_POD = {"metadata": {"name": "chat-engine-0-default-0", "labels": {"component": "engine"}}}


def test_the_target_of_an_unreadable_replica_comes_from_its_metadata_and_pods() -> None:
    fleet = LifecycleConfig(teardown=TeardownConfig(deadline="30m"))
    found = teardown_target(unreadable(spec={"replicas": "many"}), [RAW_POD], fleet=fleet)
    assert (found.namespace, found.name, found.uid) == ("ns", "chat-engine", "u-irep")
    assert found.parent is not None and (found.parent.name, found.parent.uid) == ("chat", "u-isvc")
    assert (found.isvc, found.component) == ("chat", "engine")
    assert found.deleting and found.deleted_at == NOW - dt.timedelta(minutes=10)
    assert found.has_finalizer and not found.orphaning
    assert found.fleet == fleet and found.replicas == 0 and not found.runners
    named = teardown_target(unreadable(spec={"component": "decoder"}), [RAW_POD], fleet=fleet)
    assert named.component == "decoder"
    orphaned = teardown_target(
        unreadable(spec=None, finalizers=(names.FINALIZER, "orphan")), [], fleet=fleet
    )
    assert orphaned.orphaning and orphaned.component == ""


def stuck_pod(*, finalizers: tuple[str, ...] = (), node: str = "n1") -> PodView:
    return dataclasses.replace(
        pod(SPEC, 0, runner="leader", ready=False, serving=False, terminating=True, node=node),
        deleted_at=NOW - dt.timedelta(minutes=9),
        finalizers=finalizers,
    )


def escalated(
    pods: list[PodView],
    nodes: dict[str, NodeView] | None,
    *,
    fleet: LifecycleConfig,
    now: dt.datetime = NOW,
    memory: KeyMemory | None = None,
) -> tuple[Plan, KeyMemory]:
    found = teardown_target(unreadable(spec={"replicas": "many"}), [RAW_POD], fleet=fleet)
    decided = teardown_from_pods(pods, settings=settings())
    return escalate_from_pods(
        decided, target=found, pods=pods, nodes=nodes, memory=memory or KeyMemory(), now=now
    )


def test_a_pod_with_a_finalizer_blocks_the_teardown_until_the_deadline_lifts_it() -> None:
    held = stuck_pod(finalizers=("example.com/hold",))
    fleet = LifecycleConfig(teardown=TeardownConfig(deadline="30m"))
    first, memory = escalated([held], {"n1": NodeView("n1")}, fleet=fleet)
    (event,) = first.of_type(RecordEvent)
    assert event.reason == names.EVENT_TEARDOWN_BLOCKED
    assert "teardown of InferenceReplica ns/chat-engine is blocked by 1 pod(s)" in event.message
    assert f"{held.name} (finalizers example.com/hold)" in event.message
    assert not first.of_type(RemoveFinalizer)
    # The wave's look-again comes first; the deadline's (in 20 minutes) is never later.
    assert first.requeue_after == settings().scale_down_requeue_interval
    again, memory = escalated([held], {"n1": NodeView("n1")}, fleet=fleet, memory=memory)
    assert not again.of_type(RecordEvent)
    late = NOW + dt.timedelta(minutes=20)
    lifted, _ = escalated([held], {"n1": NodeView("n1")}, fleet=fleet, now=late, memory=memory)
    (remove,) = lifted.of_type(RemoveFinalizer)
    assert remove.lifted
    (exceeded,) = lifted.of_type(RecordEvent)
    assert exceeded.reason == names.EVENT_TEARDOWN_DEADLINE
    assert f"pods left: {held.name}" in exceeded.message


def test_a_pod_on_a_gone_node_is_force_deleted_only_where_force_delete_is_set() -> None:
    lost = stuck_pod(node="gone-node")
    forced, _ = escalated(
        [lost],
        {},
        fleet=LifecycleConfig(force_delete=ForceDeleteConfig(overdueSlack="30s")),
    )
    (force,) = forced.of_type(ForceDeletePod)
    assert force.pod.uid == lost.uid and force.node == "gone-node"
    assert "(Instance 0 of engine)" in force.event.message
    unset, _ = escalated([lost], {}, fleet=LifecycleConfig(teardown=TeardownConfig(deadline="30m")))
    assert not unset.of_type(ForceDeletePod)
    (blocked,) = unset.of_type(RecordEvent)
    assert "which is gone, and lifecycle.forceDelete is not set" in blocked.message
    nothing, _ = escalated([lost], None, fleet=LifecycleConfig(teardown=TeardownConfig()))
    assert not nothing.of_type(ForceDeletePod) and not nothing.of_type(RecordEvent)
