"""Waiting tokens: Unschedulable, NodeUnknown, QuotaExceeded, AdmissionUnavailable, in the
pure planner (a fake clock) and in the reconciler (a refused create is a hold, not an error)."""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Mapping
from typing import Any

from irep_world import settings
from test_irep_execute import FakeKube
from test_irep_reconciler import IREP, KEY, Cache, reconciler
from test_irep_update import UpdateWorld, converged, spec

from omed.controllers.inferencereplica.core import names
from omed.controllers.inferencereplica.core.actions import (
    REFUSED_RETRY,
    RETRY_SOON,
    CreatePods,
    Plan,
)
from omed.controllers.inferencereplica.core.memory import EMPTY
from omed.controllers.inferencereplica.core.model import CreateRefusal, ObservedState
from omed.controllers.inferencereplica.core.observe import pod_view
from omed.controllers.inferencereplica.core.plan import plan
from omed.controllers.inferencereplica.core.status import decode_rows_from_status
from omed.controllers.inferencereplica.core.waiting import refusal_token
from omed.kube.errors import Forbidden, ServerError
from omed.kube.resources import Resource
from omed.workqueue import Result

POD0 = "chat-engine-0-default-0"
QUOTA = (
    f'pods "{POD0}" is forbidden: exceeded quota: q, requested: pods=1, used: pods=0, '
    "limited: pods=0"
)
WEBHOOK = (
    'Internal error occurred: failed calling webhook "pods.example.dev": failed to call '
    "webhook: connection refused"
)


@dataclasses.dataclass
class HoldWorld(UpdateWorld):
    """Pods of ``unschedulable`` indexes never bind; ``lost`` indexes sit on a dead node;
    creations of ``refused`` indexes are refused with that refusal."""

    unschedulable: set[int] = dataclasses.field(default_factory=set)
    lost: set[int] = dataclasses.field(default_factory=set)
    refusals: dict[int, CreateRefusal] = dataclasses.field(default_factory=dict)
    refused_now: dict[int, CreateRefusal] = dataclasses.field(default_factory=dict)

    def observed(self) -> ObservedState:
        return dataclasses.replace(super().observed(), refused=dict(self.refused_now))

    def apply(self, decided: Plan, *, status_fails: bool = False) -> None:
        kept = [c for c in decided.of_type(CreatePods) if c.index not in self.refusals]
        for create in decided.of_type(CreatePods):
            if create.index in self.refusals:
                self.refused_now[create.index] = self.refusals[create.index]
            else:
                self.refused_now.pop(create.index, None)
        others = tuple(a for a in decided.actions if not isinstance(a, CreatePods))
        super().apply(dataclasses.replace(decided, actions=(*others, *kept)), status_fails=False)

    def tick(self, seconds: float = 1.0) -> None:
        stuck = {  # a dead kubelet never confirms a deletion
            n: p for n, p in self.pods.items() if p.index in self.lost and p.terminating
        }
        super().tick(seconds)
        self.pods.update(stuck)
        for name, item in list(self.pods.items()):
            if item.index in self.unschedulable:
                self.pods[name] = dataclasses.replace(
                    item, node=None, phase="Pending", ready=False, containers_ready=False,
                    ready_since=None, unschedulable=True,
                )  # fmt: skip
            elif item.index in self.lost:
                self.pods[name] = dataclasses.replace(
                    item, ready=False, containers_ready=False, ready_since=None, node_lost=True
                )


def row_op(world: UpdateWorld, index: int) -> Any:
    return world.rows[index].operation


def test_an_unschedulable_pod_holds_its_create_until_it_is_scheduled() -> None:
    world = HoldWorld(spec(2), unschedulable={1})
    world.run(3)
    op = row_op(world, 1)
    assert op is not None and op.type == "Create" and op.waiting == names.WAITING_UNSCHEDULABLE
    failure = world.rows[1].last_failure
    assert failure is not None and failure.reason == names.WAITING_UNSCHEDULABLE
    assert failure.pod == "chat-engine-1-default-0"
    stamp = failure.time
    world.run(5)
    assert world.rows[1].last_failure == failure and stamp is not None  # time kept
    assert world.rows[0].operation is None and world.rows[0].phase == "Ready"
    world.unschedulable = set()
    world.run(3)
    assert row_op(world, 1) is None and world.rows[1].phase == "Ready"


def test_a_lost_node_holds_an_update_on_node_unknown() -> None:
    world = converged(2, strategy="RecreatePod")
    held = HoldWorld(world.spec, pods=world.pods, rows=world.rows, status=world.status)
    held.now, held.images = world.now, world.images
    held.spec = spec(2, image="ome/serving:2.0", strategy="RecreatePod")
    held.lost = {0, 1}
    held.tick()
    held.run(3)
    ops = [r.operation for r in held.rows.values() if r.operation]
    assert ops and all(op.waiting == names.WAITING_NODE_UNKNOWN for op in ops)
    held.lost = set()
    for name, item in list(held.pods.items()):
        held.pods[name] = dataclasses.replace(item, node_lost=False)
    held.run(30)
    assert all(r.operation is None and r.phase == "Ready" for r in held.rows.values())


def test_a_refused_create_holds_the_operation_on_its_token() -> None:
    refusal = CreateRefusal(names.WAITING_QUOTA, POD0, QUOTA)
    world = HoldWorld(spec(1), refusals={0: refusal})
    world.run(3)
    op = row_op(world, 0)
    assert op is not None and op.type == "Create" and op.waiting == names.WAITING_QUOTA
    assert op.step == names.STEP_CREATE_PODS
    failure = world.rows[0].last_failure
    assert failure is not None and (failure.pod, failure.reason) == (POD0, names.WAITING_QUOTA)
    world.refusals = {}
    world.run(3)
    assert row_op(world, 0) is None and world.rows[0].phase == "Ready"


def test_a_refusal_without_missing_pods_holds_nothing() -> None:
    world = converged(1)
    decided = plan(
        target=world.spec,
        observed=dataclasses.replace(
            world.observed(), refused={0: CreateRefusal(names.WAITING_QUOTA, POD0)}
        ),
        settings=settings(),
        now=world.now,
    )
    assert all(row.operation is None for row in decided.rows)


def test_refusals_are_classified_by_status_and_message() -> None:
    assert refusal_token(403, QUOTA) == names.WAITING_QUOTA
    assert refusal_token(500, WEBHOOK) == names.WAITING_ADMISSION
    assert refusal_token(403, 'pods "x" is forbidden: User cannot create') is None
    assert refusal_token(500, "etcdserver: request timed out") is None


def test_pod_facts_read_unschedulable_and_lost_nodes() -> None:
    base: dict[str, Any] = {
        "metadata": {"name": POD0, "uid": "u", "labels": {"ome.io/instance-index": "0"}},
        "spec": {},
    }
    pending = copy.deepcopy(base)
    pending["status"] = {
        "phase": "Pending",
        "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}],
    }
    assert pod_view(pending, replica="chat-engine").unschedulable
    lost = copy.deepcopy(base)
    lost["spec"]["nodeName"] = "n1"
    lost["status"] = {
        "phase": "Running",
        "conditions": [{"type": "Ready", "status": "False", "reason": "NodeNotReady"}],
    }
    view = pod_view(lost, replica="chat-engine")
    assert view.node_lost and not view.unschedulable
    assert not pod_view(base, replica="chat-engine").node_lost


class StatusKube(FakeKube):
    """A FakeKube that remembers the last status written (to feed the next pass)."""

    def __init__(self) -> None:
        super().__init__()
        self.written: dict[str, Any] | None = None
        self.last: dict[str, Any] | None = None
        self.version = 10

    async def replace_status(
        self, resource: Resource, body: Mapping[str, Any], namespace: Any = None
    ) -> Any:
        self._check("status", body["metadata"]["name"])
        self.version += 1
        result = {**body, "metadata": {**body["metadata"], "resourceVersion": str(self.version)}}
        self.written = copy.deepcopy(result)
        return result


async def test_a_refused_create_is_a_hold_recorded_in_the_next_pass() -> None:
    kube = StatusKube()
    irep = copy.deepcopy(IREP)
    irep["spec"]["replicas"] = 1
    run, _, _ = reconciler(kube, irep)
    kube.fail[("create", POD0)] = Forbidden(403, "Forbidden", QUOTA)
    assert await run.reconcile(KEY) == Result(requeue_after=RETRY_SOON)  # no error raised

    async def again() -> Result:
        if kube.written is not None:  # the next pass sees the last status written
            run._replicas = Cache(kube.written)
            kube.last, kube.written = kube.written, None
        return await run.reconcile(KEY)

    assert await again() == Result(requeue_after=REFUSED_RETRY)
    assert kube.written is not None
    (row,) = decode_rows_from_status(kube.written["status"])
    assert row.operation is not None and row.operation.waiting == names.WAITING_QUOTA
    assert row.last_failure is not None and row.last_failure.pod == POD0

    kube.fail[("create", POD0)] = ServerError(500, "InternalError", WEBHOOK)
    assert await again() == Result(requeue_after=RETRY_SOON)  # a new token: look again soon
    await again()
    assert kube.written is not None
    (row,) = decode_rows_from_status(kube.written["status"])
    assert row.operation is not None and row.operation.waiting == names.WAITING_ADMISSION

    del kube.fail[("create", POD0)]
    kube.calls.clear()
    await again()
    assert ("create", POD0) in kube.calls
    # The create went through: nothing holds it any more.
    assert not run.memory.get(KEY, EMPTY).refused
