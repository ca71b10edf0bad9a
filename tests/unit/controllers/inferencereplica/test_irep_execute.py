"""The executor's order and guards, against a recording fake of the API client."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from irep_world import World, instance, target

from omed.clock import FakeClock
from omed.controllers.inferencereplica.core import names
from omed.controllers.inferencereplica.core.actions import DeletePods, Plan, PodRef, SetServingGate
from omed.controllers.inferencereplica.shell.executor import Executor, Outcome
from omed.controllers.inferencereplica.shell.expectations import Expectations
from omed.kube.client import Resource
from omed.kube.errors import AlreadyExists, Conflict, NotFound

IREP = {
    "apiVersion": "ome.io/v1beta1",
    "kind": "InferenceReplica",
    "metadata": {
        "name": "chat-engine",
        "namespace": "prod",
        "uid": "irep-uid",
        "resourceVersion": "7",
    },
    "spec": {"component": "engine", "replicas": 1, "runners": []},
}


class FakeKube:
    """Records every call; answers from ``pods`` and raises from ``fail``."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []
        self.pods: dict[str, dict[str, Any]] = {}
        self.fail: dict[tuple[str, str], Exception] = {}
        self.deletes: list[dict[str, Any]] = []
        self.patches: list[Any] = []

    def _check(self, verb: str, name: str) -> None:
        self.calls.append((verb, name))
        error = self.fail.get((verb, name))
        if error is not None:
            raise error

    async def get(self, resource: Resource, name: str, namespace: str | None = None) -> Any:
        self._check("get", name)
        if name not in self.pods:
            raise NotFound(404, "NotFound", name)
        return copy.deepcopy(self.pods[name])

    async def list_all(self, resource: Resource, namespace: str | None = None, **kw: Any) -> Any:
        self._check("list", resource.plural)
        return list(self.pods.values())

    async def create(
        self, resource: Resource, body: Mapping[str, Any], namespace: Any = None
    ) -> Any:
        self._check("create", body["metadata"]["name"])
        return body

    async def replace_status(
        self, resource: Resource, body: Mapping[str, Any], namespace: Any = None
    ) -> Any:
        self._check("status", body["metadata"]["name"])
        return {**body, "metadata": {**body["metadata"], "resourceVersion": "8"}}

    async def patch(
        self, resource: Resource, name: str, patch: Any, namespace: Any = None, **kw: Any
    ) -> Any:
        self._check("patch-" + resource.plural, name)
        self.patches.append(patch)
        return {**IREP, "metadata": {**IREP["metadata"], "resourceVersion": "9"}}

    async def delete(self, resource: Resource, name: str, namespace: Any = None, **kw: Any) -> Any:
        self._check("delete", name)
        self.deletes.append({"name": name, **kw})
        return {}


class Events:
    def __init__(self) -> None:
        self.seen: list[tuple[str, str, str]] = []

    def event(self, obj: Mapping[str, Any], *, type: str, reason: str, message: str) -> None:
        self.seen.append((obj["kind"], obj["metadata"]["name"], reason))


def executor(kube: FakeKube, events: Events | None = None) -> tuple[Executor, Expectations]:
    clock = FakeClock()
    expectations = Expectations(clock=clock)
    return (
        Executor(client=kube, events=events or Events(), expectations=expectations, clock=clock),
        expectations,
    )


def api_pod(name: str, uid: str, *, ready: str = "False", gate: str = "False") -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "uid": uid,
            "resourceVersion": "41",
            "ownerReferences": [
                {"kind": "InferenceReplica", "uid": "irep-uid", "controller": True}
            ],
        },
        "status": {
            "conditions": [
                {"type": "Ready", "status": ready},
                {"type": "ome.io/serving", "status": gate},
            ]
        },
    }


async def test_the_status_is_written_before_any_pod_is_created() -> None:
    world = World(target(2, has_finalizer=False))
    kube = FakeKube()
    run, expectations = executor(kube)
    outcome = await run.execute(
        key="prod/chat-engine", irep=IREP, target=world.spec, plan=world.plan()
    )
    verbs = [verb for verb, _ in kube.calls]
    assert verbs == ["patch-inferencereplicas", "status", "create", "create"]
    assert outcome.created == 2
    assert expectations.pending("prod/chat-engine") == (2, 0, 0)


async def test_a_conflicting_status_write_stops_the_pass_before_any_side_effect() -> None:
    world = World(target(2))
    kube = FakeKube()
    kube.fail[("status", "chat-engine")] = Conflict(409, "Conflict", "changed")
    events = Events()
    run, expectations = executor(kube, events)
    outcome = await run.execute(key="k", irep=IREP, target=world.spec, plan=world.plan())
    assert outcome.stopped == "conflict"
    assert [verb for verb, _ in kube.calls] == ["status"]
    assert expectations.satisfied("k")
    assert events.seen == []


async def test_already_exists_is_success_and_lowers_the_expectation() -> None:
    world = World(target(1))
    kube = FakeKube()
    kube.fail[("create", "chat-engine-0-default-0")] = AlreadyExists(409, "AlreadyExists", "x")
    run, expectations = executor(kube)
    outcome = await run.execute(key="k", irep=IREP, target=world.spec, plan=world.plan())
    assert not outcome.errors
    assert expectations.satisfied("k")


async def test_events_go_to_the_parent_inference_service() -> None:
    world = World(target(1))
    world.step()
    events = Events()
    run, _ = executor(FakeKube(), events)
    await run.execute(key="k", irep=IREP, target=world.spec, plan=world.plan())
    assert events.seen == [("InferenceService", "chat", names.EVENT_INSTANCE_CREATED)]


async def test_events_of_a_standalone_replica_go_on_itself() -> None:
    world = World(target(1, parent=None))
    world.step()
    events = Events()
    run, _ = executor(FakeKube(), events)
    await run.execute(key="k", irep=IREP, target=world.spec, plan=world.plan())
    assert events.seen == [("InferenceReplica", "chat-engine", names.EVENT_INSTANCE_CREATED)]


async def pod_actions(run: Executor, plan: Plan) -> Outcome:
    outcome = Outcome()
    await run.run_pod_actions(outcome, key="k", namespace="prod", plan=plan)
    return outcome


def delete_plan(*pods: tuple[str, str]) -> Plan:
    action = DeletePods(index=1, operation_id="delete-1", pods=tuple(PodRef(n, u) for n, u in pods))
    return Plan(actions=(action,), rows=(), status=World(target(1)).status)


async def test_a_delete_rereads_the_pods_and_sends_uid_and_version_preconditions() -> None:
    kube = FakeKube()
    kube.pods["p"] = api_pod("p", "u1")
    run, expectations = executor(kube)
    await pod_actions(run, delete_plan(("p", "u1")))
    assert kube.deletes == [{"name": "p", "uid": "u1", "resource_version": "41"}]
    assert expectations.pending("k") == (0, 1, 0)


async def test_an_instance_with_a_pod_still_routed_on_the_server_is_not_deleted() -> None:
    kube = FakeKube()
    kube.pods["leader"] = api_pod("leader", "u1")
    kube.pods["worker"] = api_pod("worker", "u2", ready="True")  # the cache was stale
    run, _ = executor(kube)
    outcome = await pod_actions(run, delete_plan(("leader", "u1"), ("worker", "u2")))
    assert kube.deletes == []
    assert outcome.retry_soon


async def test_a_replaced_or_vanished_pod_is_not_deleted() -> None:
    kube = FakeKube()
    kube.pods["p"] = api_pod("p", "a-newer-uid")
    run, _ = executor(kube)
    await pod_actions(run, delete_plan(("p", "u1"), ("gone", "u2")))
    assert kube.deletes == []


async def test_the_finalizer_stays_while_the_api_server_still_lists_a_pod() -> None:
    world = World(target(0, deleting=True))
    kube = FakeKube()
    kube.pods["late"] = api_pod("late", "u1")
    run, _ = executor(kube)
    outcome = await run.execute(key="k", irep=IREP, target=world.spec, plan=world.plan())
    assert outcome.retry_soon
    assert ("patch-inferencereplicas", "chat-engine") not in kube.calls
    kube.pods.clear()
    await run.execute(key="k", irep=IREP, target=world.spec, plan=world.plan())
    assert kube.patches[-1] == {"metadata": {"finalizers": None, "resourceVersion": "8"}}


async def test_gate_writes_are_expected_until_observed() -> None:
    spec = target(1)
    world = World(spec).add(instance(spec, 0, ready=False, serving=None, containers_ready=True))
    kube = FakeKube()
    run, expectations = executor(kube)
    await run.execute(key="k", irep=IREP, target=world.spec, plan=world.plan())
    assert ("patch-pods", "chat-engine-0-default-0") in kube.calls
    assert expectations.pending("k") == (0, 0, 1)
    patch = kube.patches[-1]
    assert patch["metadata"] == {"uid": "uid-chat-engine-0-default-0-1"}
    assert patch["status"]["conditions"][0]["type"] == "ome.io/serving"
    assert patch["status"]["conditions"][0]["status"] == "True"


def gate_plan(*pods: tuple[str, str]) -> Plan:
    gates = tuple(
        SetServingGate(index=1, pod=PodRef(n, u), serving=False, reason=names.GATE_DRAINING)
        for n, u in pods
    )
    return Plan(actions=gates, rows=(), status=World(target(1)).status)


def orphaned(pod: dict[str, Any]) -> dict[str, Any]:
    """``pod`` as the collector leaves it at the end of a propagationPolicy Orphan deletion."""
    del pod["metadata"]["ownerReferences"]
    return pod


async def test_a_teardown_drains_no_pod_the_collector_orphaned_behind_the_cache() -> None:
    kube = FakeKube()
    kube.pods["kept"] = orphaned(api_pod("kept", "u1", ready="True", gate="True"))
    kube.pods["ours"] = api_pod("ours", "u2", ready="True", gate="True")
    run, _ = executor(kube)
    outcome = Outcome()
    plan = gate_plan(("kept", "u1"), ("ours", "u2"))
    await run.run_pod_actions(outcome, key="k", namespace="prod", plan=plan, owner="irep-uid")
    assert [c for c in kube.calls if c[0] == "patch-pods"] == [("patch-pods", "ours")]
    assert outcome.retry_soon


async def test_a_teardown_deletes_no_pod_the_collector_orphaned_behind_the_cache() -> None:
    kube = FakeKube()
    kube.pods["kept"] = orphaned(api_pod("kept", "u1"))
    run, _ = executor(kube)
    outcome = Outcome()
    plan = delete_plan(("kept", "u1"))
    await run.run_pod_actions(outcome, key="k", namespace="prod", plan=plan, owner="irep-uid")
    assert kube.deletes == []
    assert outcome.retry_soon
    # Without an owner to confirm (a live replica's scale-down), the same pod goes.
    await pod_actions(run, plan)
    assert [d["name"] for d in kube.deletes] == ["kept"]


async def test_a_deleting_replicas_pass_confirms_its_pods_are_still_its_own() -> None:
    spec = target(1, deleting=True)
    world = World(spec).add(instance(spec, 0, ready=True, serving=True))
    plan = world.plan()
    gated = [a.pod.name for a in plan.of_type(SetServingGate)]
    assert gated, "the teardown drains the Instance first"
    kube = FakeKube()
    for name in gated:
        kube.pods[name] = orphaned(api_pod(name, f"uid-{name}-1", ready="True", gate="True"))
    run, _ = executor(kube)
    outcome = await run.execute(key="k", irep=IREP, target=world.spec, plan=plan)
    assert [c for c in kube.calls if c[0] == "patch-pods"] == []
    assert outcome.retry_soon
