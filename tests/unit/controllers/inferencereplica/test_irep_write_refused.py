"""A write the API server refuses for good is visible: a Warning event on the InferenceReplica,
condition WriteRefused, a WARNING line per pass, and the workqueue's back-off between passes.

:class:`Api` is an in-memory double of the client protocol (``KubeApi``): one
InferenceReplica and its pods, kept current in the caches the reconciler reads (as informers
would be), with a kubelet step (:meth:`Api.tick`). ``refuse`` maps (verb, resource) to the
error the API server answers.
"""

from __future__ import annotations

import asyncio
import copy
import itertools
import logging
from collections.abc import Mapping
from typing import Any

import pytest
from irep_world import instance, target
from test_irep_execute import FakeKube, executor

from omed.api.constants import READINESS_GATE_SERVING
from omed.api.inferencereplica import InferenceReplicaStatus
from omed.clock import FakeClock
from omed.controllers.inferencereplica.core import names
from omed.controllers.inferencereplica.core.actions import (
    RETRY_SOON,
    DeletePods,
    Plan,
    PodRef,
    RemoveFinalizer,
    RemoveReleaseAnnotation,
    SetServingGate,
)
from omed.controllers.inferencereplica.core.model import ObservedState, PlanSettings
from omed.controllers.inferencereplica.core.plan import plan
from omed.controllers.inferencereplica.shell.executor import Outcome
from omed.controllers.inferencereplica.shell.expectations import Expectations
from omed.controllers.inferencereplica.shell.reconciler import InferenceReplicaReconciler
from omed.controllers.refusals import (
    CONDITION_WRITE_REFUSED,
    FAILED_TEST_MESSAGE,
    MSG_WRITE_REFUSED,
    REASON_WRITE_REFUSED,
    RefusedWrite,
)
from omed.informers.transform import Obj
from omed.kube.client import Resource
from omed.kube.errors import (
    ApiError,
    BadRequest,
    Conflict,
    Forbidden,
    Invalid,
    NotFound,
    Unauthorized,
    error_from_response,
)
from omed.workqueue import Controller, Result, default_controller_rate_limiter

KEY = "prod/chat-engine"
POD0 = "chat-engine-0-default-0"
USER = "system:serviceaccount:ome:ome-controller-manager"


def forbidden(verb: str, resource: str, name: str) -> Forbidden:
    """The API server's answer to a write RBAC doesn't allow."""
    plural, _, sub = resource.partition("/")
    group = "" if plural == "pods" else "ome.io"
    message = (
        f'{plural} "{name}" is forbidden: User "{USER}" cannot {verb} resource "{plural}'
        f'{"/" + sub if sub else ""}" in API group "{group}" in the namespace "prod"'
    )
    return Forbidden(403, "Forbidden", message)


def template(image: str) -> dict[str, Any]:
    return {"spec": {"containers": [{"name": "ome-container", "image": image}]}}


def replica(
    replicas: int = 1, *, finalizer: bool = True, image: str = "ome/serving:1.0"
) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": "chat-engine",
        "namespace": "prod",
        "uid": "irep-uid",
        "generation": 1,
        "resourceVersion": "5",
    }
    if finalizer:
        meta["finalizers"] = [names.FINALIZER]
    return {
        "apiVersion": "ome.io/v1beta1",
        "kind": "InferenceReplica",
        "metadata": meta,
        "spec": {
            "component": "engine",
            "replicas": replicas,
            "runners": [{"name": "default", "template": template(image)}],
            "lifecycle": {"updateStrategy": {"type": "InPlaceIfPossible"}},
        },
    }


def _pointer(path: str) -> list[str]:
    return [p.replace("~1", "/").replace("~0", "~") for p in path.split("/")[1:]]


def json_patch(obj: dict[str, Any], ops: list[dict[str, Any]]) -> None:
    """The ops the controller sends (test, replace, add, remove), as the API server applies
    them: a failed test or a missing path is its generic 422."""
    stale = Invalid(422, "Invalid", FAILED_TEST_MESSAGE)
    for op in ops:
        *parents, last = _pointer(op["path"])
        node: Any = obj
        for part in parents:
            node = node[int(part)] if isinstance(node, list) else node.setdefault(part, {})
        key: Any = int(last) if isinstance(node, list) else last
        if op["op"] == "test":
            if isinstance(node, list) or node.get(key) != op["value"]:
                raise stale
        elif op["op"] == "remove":
            if key not in node:
                raise stale
            del node[key]
        else:
            node[key] = op["value"]


class Api:
    """One InferenceReplica and its pods; refuses the writes in ``refuse``."""

    def __init__(self, irep: dict[str, Any], expectations: Expectations) -> None:
        self.irep = copy.deepcopy(irep)
        self.pods: dict[str, dict[str, Any]] = {}
        self.refuse: dict[tuple[str, str], ApiError] = {}
        self.writes: list[tuple[str, str, str]] = []
        """(verb, resource, name) of every write sent, refused ones included."""
        self.statuses: list[dict[str, Any]] = []
        """Every status body sent, refused ones included."""
        self._expectations = expectations
        self._versions = itertools.count(10)
        self._uids = itertools.count(1)

    def _write(self, verb: str, resource: str, name: str) -> None:
        self.writes.append((verb, resource, name))
        error = self.refuse.get((verb, resource))
        if error is not None:
            raise type(error)(error.status, error.reason, error.message, error.body)

    def _bump(self, obj: dict[str, Any]) -> None:
        obj["metadata"]["resourceVersion"] = str(next(self._versions))

    def writes_of(self, verb: str, resource: str) -> int:
        return sum(1 for v, r, _ in self.writes if (v, r) == (verb, resource))

    def condition(self, kind: str) -> dict[str, Any] | None:
        for item in (self.irep.get("status") or {}).get("conditions") or ():
            if item["type"] == kind:
                return dict(item)
        return None

    def tick(self) -> None:
        """The kubelet: pods run the images their spec names; Ready follows the gate."""
        for pod in self.pods.values():
            status = pod.setdefault("status", {})
            gate = next(
                (c for c in status.get("conditions") or () if c["type"] == READINESS_GATE_SERVING),
                None,
            )
            serving = gate is not None and gate["status"] == "True"
            pod["spec"]["nodeName"] = "sim-node-0"
            status["phase"] = "Running"
            status["containerStatuses"] = [
                {"name": c["name"], "image": c["image"], "ready": True, "restartCount": 0}
                for c in pod["spec"]["containers"]
            ]
            stamp = "2026-01-01T00:00:00Z"
            status["conditions"] = [
                {"type": "ContainersReady", "status": "True", "lastTransitionTime": stamp},
                {"type": "Ready", "status": str(serving), "lastTransitionTime": stamp},
                *([gate] if gate is not None else []),
            ]
            self._bump(pod)
            self._expectations.observe(KEY, pod)

    # -- the client protocol --------------------------------------------------------------
    async def get(self, resource: Resource, name: str, namespace: str | None = None) -> Any:
        found = self.irep if resource.plural == "inferencereplicas" else self.pods.get(name)
        if found is None:
            raise NotFound(404, "NotFound", f'{resource.plural} "{name}" not found')
        return copy.deepcopy(found)

    async def list_all(
        self, resource: Resource, namespace: str | None = None, **params: Any
    ) -> list[Any]:
        return [copy.deepcopy(pod) for pod in self.pods.values()]

    async def create(
        self,
        resource: Resource,
        body: Mapping[str, Any],
        namespace: str | None = None,
        **params: Any,
    ) -> Any:
        name = body["metadata"]["name"]
        self._write("create", resource.plural, name)
        if resource.plural != "pods":  # the update revision's ControllerRevision
            return body
        pod = copy.deepcopy(dict(body))
        pod["metadata"]["uid"] = f"pod-uid-{next(self._uids)}"
        pod["status"] = {"phase": "Pending"}
        self._bump(pod)
        self.pods[name] = pod
        self._expectations.observe(KEY, pod)
        return copy.deepcopy(pod)

    async def replace_status(
        self, resource: Resource, body: Mapping[str, Any], namespace: str | None = None
    ) -> Any:
        self.statuses.append(copy.deepcopy(dict(body)))
        self._write("update", f"{resource.plural}/status", body["metadata"]["name"])
        if body["metadata"]["resourceVersion"] != self.irep["metadata"]["resourceVersion"]:
            raise Conflict(409, "Conflict", "the object has been modified")
        self.irep["status"] = copy.deepcopy(body["status"])
        self._bump(self.irep)
        return copy.deepcopy(self.irep)

    async def patch(
        self,
        resource: Resource,
        name: str,
        patch: Any,
        namespace: str | None = None,
        *,
        content_type: str = "",
        subresource: str | None = None,
        **params: Any,
    ) -> Any:
        plural = resource.plural + (f"/{subresource}" if subresource else "")
        self._write("patch", plural, name)
        if plural == "pods/status":  # a serving gate
            pod = self.pods[name]
            if pod["metadata"]["uid"] != patch["metadata"]["uid"]:
                raise Invalid(422, "Invalid", f'Pod "{name}" is invalid: metadata.uid: immutable')
            (gate,) = patch["status"]["conditions"]
            kept = [c for c in pod["status"].get("conditions") or () if c["type"] != gate["type"]]
            pod["status"]["conditions"] = [*kept, gate]
            self._bump(pod)
            self._expectations.observe(KEY, pod)
            return copy.deepcopy(pod)
        target_obj = self.pods[name] if plural == "pods" else self.irep
        if isinstance(patch, list):
            scratch = copy.deepcopy(target_obj)
            json_patch(scratch, patch)
            target_obj.clear()
            target_obj.update(scratch)
        else:  # the finalizer merge patch, guarded by the resourceVersion
            meta = patch["metadata"]
            if meta["resourceVersion"] != target_obj["metadata"]["resourceVersion"]:
                raise Conflict(409, "Conflict", "the object has been modified")
            target_obj["metadata"]["finalizers"] = meta["finalizers"]
        self._bump(target_obj)
        return copy.deepcopy(target_obj)

    async def delete(self, resource: Resource, name: str, namespace: Any = None, **kw: Any) -> Any:
        self._write("delete", resource.plural, name)
        pod = self.pods.pop(name)
        self._expectations.observe_gone(KEY, pod)
        return {}


class ReplicaCache:
    def __init__(self, api: Api) -> None:
        self.api = api

    def get(self, key: str) -> Obj | None:
        return copy.deepcopy(self.api.irep) if key == KEY else None

    def by_index(self, index: str, value: str) -> list[Obj]:
        return []


class PodCache(ReplicaCache):
    def get(self, key: str) -> Obj | None:
        return copy.deepcopy(self.api.pods.get(key.partition("/")[2]))

    def by_index(self, index: str, value: str) -> list[Obj]:
        return [copy.deepcopy(pod) for pod in self.api.pods.values()]


class Events:
    def __init__(self) -> None:
        self.seen: list[tuple[str, str, str, str, str]] = []

    def event(self, obj: Mapping[str, Any], *, type: str, reason: str, message: str) -> None:
        self.seen.append((obj["kind"], obj["metadata"]["name"], type, reason, message))

    def refused(self) -> list[str]:
        return [s[4] for s in self.seen if s[3] == REASON_WRITE_REFUSED]


class World:
    """The reconciler over :class:`Api`, with a fake clock."""

    def __init__(self, irep: dict[str, Any], *, requeues: int = 0) -> None:
        self.clock = FakeClock()
        self.expectations = Expectations(clock=self.clock)
        self.api = Api(irep, self.expectations)
        self.events = Events()
        self.run = InferenceReplicaReconciler(
            client=self.api,
            replicas=ReplicaCache(self.api),
            pods=PodCache(self.api),
            events=self.events,
            settings=PlanSettings(),
            expectations=self.expectations,
            clock=self.clock,
            requeues=lambda _key: requeues,
        )

    async def reconcile(self, seconds: float = 1.0) -> Result:
        self.clock.advance(seconds)
        return await self.run.reconcile(KEY)

    async def converge(self, passes: int = 6) -> None:
        for _ in range(passes):
            await self.reconcile()
            self.api.tick()


def warnings(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.getMessage() == MSG_WRITE_REFUSED]


def gate_message() -> str:
    error = forbidden("patch", "pods/status", POD0)
    return f'patch pods/status "{POD0}" refused by the API server (403 Forbidden): {error.message}'


async def test_a_refused_gate_patch_is_an_event_a_condition_and_a_backoff(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="omed.controllers.inferencereplica")
    world = World(replica(), requeues=3)
    world.api.refuse[("patch", "pods/status")] = forbidden("patch", "pods/status", POD0)
    await world.reconcile()  # status, then the pod
    world.api.tick()  # its containers are ready: the gate is due
    assert await world.reconcile() == Result(requeue=True)
    assert world.events.seen == [
        ("InferenceReplica", "chat-engine", "Warning", REASON_WRITE_REFUSED, gate_message())
    ]
    (line,) = warnings(caplog)
    assert line.levelname == "WARNING"
    assert line.kv == {  # type: ignore[attr-defined]
        "key": KEY,
        "verb": "patch",
        "resource": "pods/status",
        "name": POD0,
        "code": 403,
        "reason": "Forbidden",
        "error": forbidden("patch", "pods/status", POD0).message,
        "refused": 1,
        "requeues": 3,
    }

    # The next pass's status says so; the gate is refused again and the key backs off again.
    assert await world.reconcile() == Result(requeue=True)
    shown = world.api.condition(CONDITION_WRITE_REFUSED)
    assert shown is not None
    since = shown.pop("lastTransitionTime")
    assert shown == {
        "type": CONDITION_WRITE_REFUSED,
        "status": "True",
        "reason": "Forbidden",
        "message": gate_message(),
        "observedGeneration": 1,
    }
    statuses = world.api.writes_of("update", "inferencereplicas/status")
    for _ in range(3):  # it stays, with its transition time, and isn't written again
        assert await world.reconcile(60) == Result(requeue=True)
    condition = world.api.condition(CONDITION_WRITE_REFUSED)
    assert condition is not None and condition["lastTransitionTime"] == since
    assert world.api.writes_of("update", "inferencereplicas/status") == statuses
    assert world.events.refused() == [gate_message()] * 5  # one per pass: they aggregate
    assert len(warnings(caplog)) == 5

    # The Role is fixed: the gate goes through, and the pass after removes the condition.
    del world.api.refuse[("patch", "pods/status")]
    assert await world.reconcile() == Result(requeue_after=RETRY_SOON)
    await world.reconcile()
    assert world.api.condition(CONDITION_WRITE_REFUSED) is None
    assert len(world.events.refused()) == 5


async def test_a_refused_in_place_patch_is_visible_and_backs_off(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="omed.controllers.inferencereplica")
    world = World(replica())
    await world.converge()
    assert world.api.pods[POD0]["status"]["conditions"][1]["status"] == "True"  # Ready
    world.api.irep["spec"]["runners"][0]["template"] = template("ome/serving:2.0")
    world.api.irep["metadata"]["generation"] = 2
    world.api.refuse[("patch", "pods")] = forbidden("patch", "pods", POD0)
    results = [await world.reconcile() for _ in range(4)]
    assert world.api.writes_of("patch", "pods") == 4
    assert results == [Result(requeue=True)] * 4  # the back-off, not a look every second
    message = (
        f'patch pods "{POD0}" refused by the API server (403 Forbidden): '
        + forbidden("patch", "pods", POD0).message
    )
    assert world.events.refused() == [message] * 4
    condition = world.api.condition(CONDITION_WRITE_REFUSED)
    assert condition is not None and condition["message"] == message
    assert not [r for r in caplog.records if "not applied" in r.getMessage()]
    assert {r.levelname for r in warnings(caplog)} == {"WARNING"}


async def test_a_stale_in_place_patch_is_no_refusal() -> None:
    world = World(replica())
    await world.converge()
    world.api.irep["spec"]["runners"][0]["template"] = template("ome/serving:2.0")
    world.api.irep["metadata"]["generation"] = 2
    world.api.refuse[("patch", "pods")] = Invalid(422, "Invalid", FAILED_TEST_MESSAGE)
    assert await world.reconcile() == Result(requeue_after=RETRY_SOON)
    assert world.events.refused() == []


@pytest.mark.parametrize(
    ("error", "reason"),
    [
        pytest.param(forbidden("create", "pods", POD0), "Forbidden", id="403-rbac"),
        pytest.param(Unauthorized(401, "Unauthorized", "Unauthorized"), "Unauthorized", id="401"),
        pytest.param(
            BadRequest(400, "BadRequest", 'admission webhook "deny.example.dev" denied it'),
            "BadRequest",
            id="400-webhook-denied",
        ),
        pytest.param(
            Invalid(422, "Invalid", f'Pod "{POD0}" is invalid: spec.containers[0].image: Required'),
            "Invalid",
            id="422",
        ),
        pytest.param(
            error_from_response(405, {"reason": "MethodNotAllowed", "message": "not allowed"}),
            "MethodNotAllowed",
            id="405",
        ),
    ],
)
async def test_a_refused_create_is_reported_not_raised(error: ApiError, reason: str) -> None:
    world = World(replica())
    world.api.refuse[("create", "pods")] = error
    assert await world.reconcile() == Result(requeue=True)  # reported, not raised
    assert world.events.refused() == [
        f'create pods "{POD0}" refused by the API server ({error.status} {reason}): {error.message}'
    ]
    await world.reconcile()
    condition = world.api.condition(CONDITION_WRITE_REFUSED)
    assert condition is not None and condition["reason"] == reason


async def test_a_refused_status_write_is_told_by_event_and_never_carries_the_condition() -> None:
    world = World(replica())
    world.api.refuse[("update", "inferencereplicas/status")] = forbidden(
        "update", "inferencereplicas/status", "chat-engine"
    )
    for _ in range(3):
        assert await world.reconcile() == Result(requeue=True)
    assert world.api.writes_of("create", "pods") == 0  # no side effect ahead of its record
    assert world.events.refused()[0].startswith(
        'update inferencereplicas/status "chat-engine" refused by the API server (403 Forbidden)'
    )
    assert len(world.events.refused()) == 3
    assert all(
        c["type"] != CONDITION_WRITE_REFUSED
        for body in world.api.statuses
        for c in body["status"].get("conditions") or ()
    )


async def test_a_refused_finalizer_patch_still_writes_the_condition_and_touches_no_pod() -> None:
    world = World(replica(finalizer=False))
    world.api.refuse[("patch", "inferencereplicas")] = forbidden(
        "patch", "inferencereplicas", "chat-engine"
    )
    assert await world.reconcile() == Result(requeue=True)
    assert await world.reconcile() == Result(requeue=True)
    condition = world.api.condition(CONDITION_WRITE_REFUSED)
    assert condition is not None
    assert condition["message"].startswith(
        'patch inferencereplicas "chat-engine" refused by the API server (403 Forbidden): '
    )
    assert world.api.pods == {}
    del world.api.refuse[("patch", "inferencereplicas")]
    await world.converge(3)
    assert world.api.condition(CONDITION_WRITE_REFUSED) is None
    assert names.FINALIZER in world.api.irep["metadata"]["finalizers"]
    assert list(world.api.pods) == [POD0]


async def test_refusals_back_off_through_the_workqueue_rate_limiter(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Over 120 s a refused in-place patch is tried a handful of times, each attempt logged
    once at WARNING, instead of once a second at INFO; the key's back-off is forgotten once
    the write goes through."""
    world = World(replica())
    await world.converge()
    world.api.irep["spec"]["runners"][0]["template"] = template("ome/serving:2.0")
    world.api.irep["metadata"]["generation"] = 2
    world.api.refuse[("patch", "pods")] = forbidden("patch", "pods", POD0)
    caplog.set_level(logging.INFO, logger="omed.controllers.inferencereplica")
    controller = Controller(
        name="irep-write-refused-backoff",
        reconciler=world.run,
        clock=world.clock,
        rate_limiter=default_controller_rate_limiter(world.clock),
    )
    task = asyncio.create_task(controller.run())
    try:
        controller.queue.add(KEY)
        for _ in range(1200):  # 120 s in steps of 0.1 s
            for _ in range(20):
                await asyncio.sleep(0)
            world.clock.advance(0.1)
        patches = world.api.writes_of("patch", "pods")
        assert 5 <= patches <= 20  # a second apart, it would be 120
        assert len(warnings(caplog)) == patches
        assert not [r for r in caplog.records if "not applied" in r.getMessage()]
        assert controller.queue.num_requeues(KEY) == patches
        del world.api.refuse[("patch", "pods")]
        world.clock.advance(1000)
        for _ in range(50):
            await asyncio.sleep(0)
        assert world.api.writes_of("patch", "pods") == patches + 1
        assert controller.queue.num_requeues(KEY) == 0
    finally:
        await controller.shutdown(drain=False)
        await task


# -- the executor: every other write of the controller ------------------------------------


def _plan(*actions: Any) -> Plan:
    return Plan(actions=actions, rows=(), status=InferenceReplicaStatus())


def _api_pod(name: str, uid: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "uid": uid, "resourceVersion": "41"},
        "status": {"conditions": [{"type": "Ready", "status": "False"}]},
    }


async def test_a_refused_pod_delete_is_recorded_not_raised() -> None:
    kube = FakeKube()
    kube.pods[POD0] = _api_pod(POD0, "u0")
    kube.fail[("delete", POD0)] = forbidden("delete", "pods", POD0)
    run, expectations = executor(kube)
    outcome = Outcome()
    decided = _plan(DeletePods(0, "op", (PodRef(POD0, "u0"),)))
    await run.run_pod_actions(outcome, key=KEY, namespace="prod", plan=decided)
    assert outcome.errors == []
    assert [(r.verb, r.resource, r.name, r.reason) for r in outcome.write_refused] == [
        ("delete", "pods", POD0, "Forbidden")
    ]
    assert expectations.satisfied(KEY)


async def test_a_gate_patch_that_meets_a_newer_pod_is_stale_not_refused() -> None:
    kube = FakeKube()
    kube.fail[("patch-pods", POD0)] = Invalid(
        422, "Invalid", f'Pod "{POD0}" is invalid: metadata.uid: Invalid value: "u0": immutable'
    )
    run, _ = executor(kube)
    outcome = Outcome()
    pods = instance(target(1), 0)
    gate = SetServingGate(0, PodRef(pods[0].name, pods[0].uid), True, "InstanceReady")
    await run.run_pod_actions(outcome, key=KEY, namespace="prod", plan=_plan(gate))
    assert outcome.write_refused == [] and outcome.errors == [] and outcome.retry_soon


async def test_refused_finalizer_removal_and_release_annotation_are_recorded() -> None:
    kube = FakeKube()
    kube.fail[("patch-inferencereplicas", "chat-engine")] = forbidden(
        "patch", "inferencereplicas", "chat-engine"
    )
    run, _ = executor(kube)
    irep = replica()
    irep["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    deleting = target(1, deleting=True)
    outcome = await run.execute(
        key=KEY,
        irep=irep,
        target=deleting,
        plan=_plan(RemoveReleaseAnnotation("chat-engine-7f9c4d2b"), RemoveFinalizer()),
    )
    assert [(r.verb, r.resource) for r in outcome.write_refused] == [
        ("patch", "inferencereplicas"),
        ("patch", "inferencereplicas"),
    ]
    assert not outcome.retry_soon and outcome.errors == []


def test_the_condition_follows_the_refusal_the_controller_keeps() -> None:
    refusal = RefusedWrite("patch", "pods", POD0, 403, "Forbidden", "no")
    spec = target(1)
    now = FakeClock().now()
    shown = plan(
        target=spec,
        observed=ObservedState(write_refused=refusal),
        settings=PlanSettings(),
        now=now,
    ).status.condition(CONDITION_WRITE_REFUSED)
    assert shown is not None and (shown.status, shown.reason) == ("True", "Forbidden")
    assert (
        shown.message
        == 'patch pods "chat-engine-0-default-0" refused by the API server (403 Forbidden): no'
    )
    gone = plan(target=spec, observed=ObservedState(), settings=PlanSettings(), now=now)
    assert gone.status.condition(CONDITION_WRITE_REFUSED) is None
