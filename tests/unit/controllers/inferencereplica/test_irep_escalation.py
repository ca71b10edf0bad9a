"""The force-delete escalation, node facts and the teardown deadline, decided purely: when a
pod stuck Terminating is force-deleted (never on a healthy node, never early), the once-only
finalizer report, NodeUnknown from node state, and the finalizer lifted at the deadline."""

from __future__ import annotations

import dataclasses
import datetime as dt

from hypothesis import given
from hypothesis import strategies as st
from irep_world import NOW, pod, target

from omed.api.inferencereplica import InferenceReplicaStatus
from omed.config.lifecycle import ForceDeleteConfig, LifecycleConfig, TeardownConfig
from omed.controllers.inferencereplica.core import names
from omed.controllers.inferencereplica.core.actions import (
    ForceDeletePod,
    Plan,
    RecordEvent,
    RemoveFinalizer,
)
from omed.controllers.inferencereplica.core.escalation import escalate, judge
from omed.controllers.inferencereplica.core.memory import KeyMemory
from omed.controllers.inferencereplica.core.model import ObservedState, PodView
from omed.controllers.inferencereplica.core.nodes import (
    NODE_GONE,
    NODE_NOT_READY,
    NODE_UNREACHABLE,
    NodeView,
    node_state,
    node_view,
    with_node_facts,
)

SPEC = target(1)
SLACK, THRESHOLD = 30.0, 300.0
CONFIG = LifecycleConfig(
    force_delete=ForceDeleteConfig(overdueSlack="30s", nodeUnreachableThreshold="5m")
)


def stuck(*, deleted_ago: float, finalizers: tuple[str, ...] = (), node: str = "n1") -> PodView:
    return dataclasses.replace(
        pod(SPEC, 0, ready=False, serving=False, terminating=True, node=node),
        deleted_at=NOW - dt.timedelta(seconds=deleted_ago),
        finalizers=finalizers,
    )


def down(name: str = "n1", *, ago: float, tainted: bool = True) -> NodeView:
    since = NOW - dt.timedelta(seconds=ago)
    return NodeView(
        name,
        ready=False,
        not_ready_since=since,
        unreachable=tainted,
        unreachable_since=since if tainted else None,
    )


HEALTHY = NodeView("n1")


def empty_plan() -> Plan:
    return Plan(actions=(), rows=(), status=InferenceReplicaStatus())


def run(
    pods: list[PodView],
    nodes: dict[str, NodeView] | None,
    *,
    fleet: LifecycleConfig = CONFIG,
    memory: KeyMemory | None = None,
    now: dt.datetime = NOW,
    deleting: bool = False,
) -> tuple[Plan, KeyMemory]:
    spec = dataclasses.replace(
        SPEC, fleet=fleet, deleting=deleting, deleted_at=NOW - dt.timedelta(minutes=10)
    )
    observed = ObservedState(pods={0: tuple(pods)}, nodes=nodes)
    return escalate(
        empty_plan(), target=spec, observed=observed, memory=memory or KeyMemory(), now=now
    )


def test_a_pod_on_a_node_lost_past_slack_and_threshold_is_force_deleted() -> None:
    decided, _ = run([stuck(deleted_ago=60)], {"n1": down(ago=THRESHOLD + 1)})
    (action,) = decided.of_type(ForceDeletePod)
    assert action.cause == NODE_UNREACHABLE and action.node == "n1"
    assert action.event.reason == names.EVENT_POD_FORCE_DELETED
    assert (
        "force-deleted pod chat-engine-0-default-0 (Instance 0 of engine)" in action.event.message
    )


def test_not_before_the_threshold_a_requeue_at_it_instead() -> None:
    decided, _ = run([stuck(deleted_ago=60)], {"n1": down(ago=THRESHOLD - 10)})
    assert not decided.of_type(ForceDeletePod)
    assert decided.requeue_after == 10.0


def test_a_gone_node_needs_only_the_slack() -> None:
    early, _ = run([stuck(deleted_ago=SLACK - 5)], {})
    assert not early.of_type(ForceDeletePod) and early.requeue_after == 5.0
    late, _ = run([stuck(deleted_ago=SLACK + 1)], {})
    assert [a.cause for a in late.of_type(ForceDeletePod)] == [NODE_GONE]


def test_without_a_node_cache_nothing_is_judged_and_unconfigured_is_never() -> None:
    assert not run([stuck(deleted_ago=3600)], None)[0].of_type(ForceDeletePod)
    bare = LifecycleConfig()
    assert not run([stuck(deleted_ago=3600)], {}, fleet=bare)[0].of_type(ForceDeletePod)


def test_not_ready_alone_needs_the_threshold_configured() -> None:
    only_slack = LifecycleConfig(force_delete=ForceDeleteConfig(overdueSlack="30s"))
    nodes = {"n1": down(ago=3600, tainted=False)}
    assert not run([stuck(deleted_ago=3600)], nodes, fleet=only_slack)[0].of_type(ForceDeletePod)
    decided, _ = run([stuck(deleted_ago=3600)], nodes)
    assert [a.cause for a in decided.of_type(ForceDeletePod)] == [NODE_NOT_READY]


def test_a_pod_with_finalizers_is_reported_once_and_kept() -> None:
    pods = [stuck(deleted_ago=60, finalizers=("example.com/hold",))]
    nodes = {"n1": down(ago=THRESHOLD + 1)}
    first, memory = run(pods, nodes)
    assert not first.of_type(ForceDeletePod)
    (event,) = first.of_type(RecordEvent)
    assert event.reason == names.EVENT_POD_DELETE_BLOCKED and "example.com/hold" in event.message
    again, memory = run(pods, nodes, memory=memory)
    assert not again.of_type(RecordEvent)
    _, memory = run([], nodes, memory=memory)
    assert not memory.escalations_reported  # forgotten with the pod


times = st.integers(min_value=0, max_value=7200).map(float)  # whole seconds, as timestamps are
configs = st.tuples(st.none() | times, st.none() | times)
states = st.sampled_from(["healthy", "gone", "tainted", "notready", "tainted-untimed"])


@given(deleted_ago=times, down_ago=times, config=configs, state=states, fin=st.booleans())
def test_never_on_a_healthy_node_never_before_slack_and_threshold(
    deleted_ago: float,
    down_ago: float,
    config: tuple[float | None, float | None],
    state: str,
    fin: bool,
) -> None:
    slack, threshold = config
    nodes: dict[str, NodeView] = {
        "healthy": {"n1": HEALTHY},
        "gone": {},
        "tainted": {"n1": down(ago=down_ago)},
        "notready": {"n1": down(ago=down_ago, tainted=False)},
        "tainted-untimed": {"n1": NodeView("n1", unreachable=True)},
    }[state]
    item = stuck(deleted_ago=deleted_ago, finalizers=("f",) if fin else ())
    verdict = judge(
        item, node_state(item, nodes), overdue_slack=slack, threshold=threshold, now=NOW
    )
    if not verdict.due:
        return
    assert state not in ("healthy", "tainted-untimed") and not fin
    assert deleted_ago >= (slack or 0)
    if state != "gone":
        assert down_ago >= (threshold or 0)
    if state == "notready":
        assert threshold is not None


def test_node_unknown_comes_from_node_state_too() -> None:
    live = pod(SPEC, 0, ready=False, node="n1")
    for nodes, lost in (
        ({"n1": HEALTHY}, False),
        ({"n1": down(ago=1)}, True),
        ({}, True),
        (None, False),
    ):
        observed = with_node_facts(ObservedState(pods={0: (live,)}, nodes=nodes))
        assert observed.pods[0][0].node_lost is lost, nodes


def test_node_view_reads_the_ready_condition_and_the_unreachable_taints() -> None:
    node = {
        "metadata": {"name": "n1", "uid": "u"},
        "spec": {
            "taints": [
                {"key": "node.kubernetes.io/unreachable", "effect": "NoSchedule"},
                {
                    "key": "node.kubernetes.io/unreachable",
                    "effect": "NoExecute",
                    "timeAdded": "2026-09-14T19:58:00Z",
                },
            ]
        },
        "status": {
            "conditions": [
                {"type": "Ready", "status": "Unknown", "lastTransitionTime": "2026-09-14T19:57:00Z"}
            ]
        },
    }
    view = node_view(node)
    assert not view.ready and view.unreachable and not view.healthy
    assert view.down_since == NOW - dt.timedelta(minutes=3)
    assert node_view(
        {
            "metadata": {"name": "n2"},
            "status": {"conditions": [{"type": "Ready", "status": "True"}]},
        }
    ).healthy


TEARDOWN = LifecycleConfig(teardown=TeardownConfig(deadline="30m"))


def test_a_blocked_teardown_is_told_once_then_the_deadline_lifts_the_finalizer() -> None:
    held = stuck(deleted_ago=120, finalizers=("example.com/hold",))
    first, memory = run([held], {"n1": HEALTHY}, fleet=TEARDOWN, deleting=True)
    (event,) = first.of_type(RecordEvent)
    assert event.reason == names.EVENT_TEARDOWN_BLOCKED
    assert "chat-engine-0-default-0 (finalizers example.com/hold)" in event.message
    assert "is lifted at 2026-09-14T20:20:00Z (teardown.deadline 30m0s)" in event.message
    assert first.requeue_after == 1200.0 and not first.of_type(RemoveFinalizer)
    again, memory = run([held], {"n1": HEALTHY}, fleet=TEARDOWN, deleting=True, memory=memory)
    assert not again.of_type(RecordEvent)
    late = NOW + dt.timedelta(minutes=20)
    lifted, _ = run([held], {"n1": HEALTHY}, fleet=TEARDOWN, deleting=True, memory=memory, now=late)
    (remove,) = lifted.of_type(RemoveFinalizer)
    assert remove.lifted
    (exceeded,) = lifted.of_type(RecordEvent)
    assert exceeded.reason == names.EVENT_TEARDOWN_DEADLINE
    assert "pods left: chat-engine-0-default-0" in exceeded.message
    assert "within teardown.deadline (30m0s)" in exceeded.message


def test_no_deadline_no_lift() -> None:
    held = stuck(deleted_ago=99999, finalizers=("f",))
    decided, _ = run(
        [held],
        {"n1": HEALTHY},
        fleet=LifecycleConfig(),
        deleting=True,
        now=NOW + dt.timedelta(days=9),
    )
    assert not decided.of_type(RemoveFinalizer) and not decided.of_type(RecordEvent)
