"""A write the InferenceService controller needs and the API server refuses for good: a
Warning event on the InferenceService, condition WriteRefused, a WARNING line, the back-off.

:class:`Api` is an in-memory double of the client calls the controller makes, with the
caches it reads kept current (as informers would be); ``refuse`` maps (verb, resource) to
the API server's answer.
"""

from __future__ import annotations

import copy
import itertools
import logging
import types
from collections.abc import Mapping
from typing import Any, cast

import pytest

from omed.clock import FakeClock
from omed.controllers.inferenceservice.core.names import FINALIZER
from omed.controllers.inferenceservice.core.owned import ANNOTATION_SPEC_HASH
from omed.controllers.inferenceservice.shell.reconciler import InferenceServiceReconciler
from omed.controllers.refusals import (
    CONDITION_WRITE_REFUSED,
    FAILED_TEST_MESSAGE,
    MSG_WRITE_REFUSED,
    REASON_WRITE_REFUSED,
)
from omed.informers.transform import Obj
from omed.kube.client import Resource
from omed.kube.errors import ApiError, Conflict, Forbidden, Invalid, NotFound
from omed.workqueue import Result

KEY = "prod/chat"
USER = "system:serviceaccount:ome:ome-controller-manager"
RUNTIME: dict[str, Any] = {
    "metadata": {"name": "srt", "namespace": "prod"},
    "spec": {
        "deploymentMode": "OMENative",
        "engineConfig": {"runner": {"name": "ome-container", "image": "ome/srt:1"}},
    },
}


def forbidden(verb: str, resource: str, name: str) -> Forbidden:
    plural = resource.partition("/")[0]
    return Forbidden(
        403,
        "Forbidden",
        f'{plural} "{name}" is forbidden: User "{USER}" cannot {verb} resource "{resource}" '
        'in API group "ome.io" in the namespace "prod"',
    )


def refused(verb: str, resource: str, name: str) -> str:
    error = forbidden(verb, resource, name)
    return f'{verb} {resource} "{name}" refused by the API server (403 Forbidden): {error.message}'


def service(*, finalizer: bool = True) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": "chat",
        "namespace": "prod",
        "uid": "isvc-uid",
        "generation": 1,
        "resourceVersion": "5",
    }
    if finalizer:
        meta["finalizers"] = [FINALIZER]
    return {
        "apiVersion": "ome.io/v1beta1",
        "kind": "InferenceService",
        "metadata": meta,
        "spec": {"runtime": {"name": "srt"}, "engine": {}},
    }


def merged(target: Any, patch: Any) -> Any:
    """``patch`` applied to ``target`` as the API server applies a JSON merge patch."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merged(result.get(key), value)
    return result


class Api:
    """The InferenceService and its InferenceReplicas; refuses the writes in ``refuse``."""

    def __init__(self, isvc: dict[str, Any]) -> None:
        self.isvc: dict[str, Any] | None = copy.deepcopy(isvc)
        self.replicas: dict[str, dict[str, Any]] = {}
        self.refuse: dict[tuple[str, str], ApiError] = {}
        self.writes: list[tuple[str, str, str]] = []
        self._versions = itertools.count(10)

    def _write(self, verb: str, resource: str, name: str) -> None:
        self.writes.append((verb, resource, name))
        error = self.refuse.get((verb, resource))
        if error is not None:
            raise type(error)(error.status, error.reason, error.message, error.body)

    def _bump(self, obj: dict[str, Any]) -> None:
        obj["metadata"]["resourceVersion"] = str(next(self._versions))

    def condition(self, kind: str) -> dict[str, Any] | None:
        assert self.isvc is not None
        for item in (self.isvc.get("status") or {}).get("conditions") or ():
            if item["type"] == kind:
                return dict(item)
        return None

    async def create(
        self, resource: Resource, body: Mapping[str, Any], namespace: Any = None, **kw: Any
    ) -> Any:
        name = body["metadata"]["name"]
        self._write("create", resource.plural, name)
        irep = copy.deepcopy(dict(body))
        irep["metadata"].update(namespace="prod", uid=f"uid-{name}", generation=1)
        self._bump(irep)
        self.replicas[name] = irep
        return copy.deepcopy(irep)

    async def replace(
        self, resource: Resource, body: Mapping[str, Any], namespace: Any = None, **kw: Any
    ) -> Any:
        name = body["metadata"]["name"]
        self._write("update", resource.plural, name)
        self.replicas[name] = copy.deepcopy(dict(body))
        self._bump(self.replicas[name])
        return copy.deepcopy(self.replicas[name])

    async def delete(self, resource: Resource, name: str, namespace: Any = None, **kw: Any) -> Any:
        self._write("delete", resource.plural, name)
        self.replicas.pop(name, None)
        return {}

    async def patch(
        self, resource: Resource, name: str, patch: Any, namespace: Any = None, **kw: Any
    ) -> Any:
        self._write("patch", resource.plural, name)
        if resource.plural == "inferencereplicas":  # a merge patch guarded by resourceVersion
            current = self.replicas[name]
            if patch["metadata"]["resourceVersion"] != current["metadata"]["resourceVersion"]:
                raise Conflict(409, "Conflict", "the object has been modified")
            self.replicas[name] = merged(current, patch)
            self._bump(self.replicas[name])
            return copy.deepcopy(self.replicas[name])
        assert self.isvc is not None
        test, add = patch
        if test["value"] != self.isvc["metadata"]["resourceVersion"]:
            raise Invalid(422, "Invalid", FAILED_TEST_MESSAGE)
        self.isvc["metadata"]["finalizers"] = add["value"]
        self._bump(self.isvc)
        return copy.deepcopy(self.isvc)

    async def replace_status(
        self, resource: Resource, body: Mapping[str, Any], namespace: Any = None
    ) -> Any:
        self._write("update", f"{resource.plural}/status", body["metadata"]["name"])
        assert self.isvc is not None
        if body["metadata"]["resourceVersion"] != self.isvc["metadata"]["resourceVersion"]:
            raise Conflict(409, "Conflict", "the object has been modified")
        self.isvc["status"] = copy.deepcopy(body["status"])
        self._bump(self.isvc)
        return copy.deepcopy(self.isvc)

    async def list_page(self, resource: Resource, namespace: Any = None, **params: Any) -> Any:
        return {"items": [copy.deepcopy(i) for i in self.replicas.values()]}


class Store:
    def __init__(self, objects: Any) -> None:
        self.objects = objects

    def get(self, key: str) -> Obj | None:
        found = self.objects().get(key.rpartition("/")[2])
        return copy.deepcopy(found) if found is not None else None

    def by_index(self, index: str, value: str) -> list[Obj]:
        return [copy.deepcopy(o) for o in self.objects().values()]


class Events:
    def __init__(self) -> None:
        self.seen: list[tuple[str, str, str, str, str]] = []

    def event(self, obj: Mapping[str, Any], *, type: str, reason: str, message: str) -> None:
        self.seen.append((obj["kind"], obj["metadata"]["name"], type, reason, message))


class World:
    def __init__(self, isvc: dict[str, Any]) -> None:
        self.api = Api(isvc)
        self.clock = FakeClock()
        self.events = Events()

        def services() -> dict[str, Any]:
            return {"chat": self.api.isvc} if self.api.isvc is not None else {}

        async def mode() -> str | None:
            return None

        def informer(objects: Any) -> Any:
            return types.SimpleNamespace(store=Store(objects))

        self.run = InferenceServiceReconciler(
            client=cast(Any, self.api),
            services=informer(services),
            replicas=informer(lambda: self.api.replicas),
            runtimes=informer(lambda: {"srt": RUNTIME}),
            cluster_runtimes=informer(dict),
            default_mode=mode,
            clock=self.clock,
            events=self.events,
            requeues=lambda _key: 2,
        )

    async def reconcile(self, seconds: float = 10.0) -> Result:
        self.clock.advance(seconds)
        return await self.run.reconcile(KEY)


async def test_a_refused_replica_create_is_an_event_a_condition_and_a_backoff(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="omed.controllers.inferenceservice")
    world = World(service())
    world.api.refuse[("create", "inferencereplicas")] = forbidden(
        "create", "inferencereplicas", "chat-engine"
    )
    assert await world.reconcile() == Result(requeue=True)
    message = refused("create", "inferencereplicas", "chat-engine")
    assert world.events.seen == [
        ("InferenceService", "chat", "Warning", REASON_WRITE_REFUSED, message)
    ]
    (line,) = [r for r in caplog.records if r.getMessage() == MSG_WRITE_REFUSED]
    assert line.levelname == "WARNING"
    assert line.kv["resource"] == "inferencereplicas" and line.kv["requeues"] == 2  # type: ignore[attr-defined]
    condition = world.api.condition(CONDITION_WRITE_REFUSED)
    assert condition is not None
    since = condition.pop("lastTransitionTime")
    assert condition == {
        "type": CONDITION_WRITE_REFUSED,
        "status": "True",
        "reason": "Forbidden",
        "message": message,
        "observedGeneration": 1,
    }
    statuses = sum(1 for w in world.api.writes if w[1] == "inferenceservices/status")
    for _ in range(3):
        assert await world.reconcile() == Result(requeue=True)
    condition = world.api.condition(CONDITION_WRITE_REFUSED)
    assert condition is not None and condition["lastTransitionTime"] == since
    assert sum(1 for w in world.api.writes if w[1] == "inferenceservices/status") == statuses
    assert len(world.events.seen) == 4  # the same event each pass: the recorder aggregates

    del world.api.refuse[("create", "inferencereplicas")]
    assert await world.reconcile() == Result()
    assert list(world.api.replicas) == ["chat-engine"]
    assert world.api.condition(CONDITION_WRITE_REFUSED) is None


async def test_a_refused_finalizer_patch_creates_nothing_and_says_why_in_ready() -> None:
    world = World(service(finalizer=False))
    world.api.refuse[("patch", "inferenceservices")] = forbidden(
        "patch", "inferenceservices", "chat"
    )
    assert await world.reconcile() == Result(requeue=True)
    assert world.api.replicas == {}
    message = refused("patch", "inferenceservices", "chat")
    ready = world.api.condition("Ready")
    assert ready is not None and (ready["status"], ready["reason"]) == ("False", "WriteRefused")
    assert ready["message"] == message
    condition = world.api.condition(CONDITION_WRITE_REFUSED)
    assert condition is not None and condition["message"] == message
    assert [s[4] for s in world.events.seen] == [message]


async def test_a_refused_status_write_is_told_by_the_event_alone() -> None:
    world = World(service())
    world.api.refuse[("update", "inferenceservices/status")] = forbidden(
        "update", "inferenceservices/status", "chat"
    )
    assert await world.reconcile() == Result(requeue=True)
    assert [s[4] for s in world.events.seen] == [
        refused("update", "inferenceservices/status", "chat")
    ]
    assert list(world.api.replicas) == ["chat-engine"]  # the other writes still went


async def test_a_refused_replica_update_is_reported() -> None:
    world = World(service())
    await world.reconcile()
    stored = world.api.replicas["chat-engine"]["metadata"]
    stored["annotations"][ANNOTATION_SPEC_HASH] = "an-older-spec"  # the next pass updates it
    world.api.refuse[("patch", "inferencereplicas")] = forbidden(
        "patch", "inferencereplicas", "chat-engine"
    )
    assert await world.reconcile() == Result(requeue=True)
    condition = world.api.condition(CONDITION_WRITE_REFUSED)
    assert condition is not None
    assert condition["message"] == refused("patch", "inferencereplicas", "chat-engine")


async def test_refused_deletes_while_the_service_is_deleted_are_shown_and_then_cleared() -> None:
    world = World(service())
    await world.reconcile()
    assert world.api.isvc is not None
    world.api.isvc["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    world.api.refuse[("delete", "inferencereplicas")] = forbidden(
        "delete", "inferencereplicas", "chat-engine"
    )
    assert await world.reconcile() == Result(requeue=True)
    condition = world.api.condition(CONDITION_WRITE_REFUSED)
    assert condition is not None
    assert condition["message"] == refused("delete", "inferencereplicas", "chat-engine")
    del world.api.refuse[("delete", "inferencereplicas")]
    world.api.refuse[("patch", "inferenceservices")] = forbidden(
        "patch", "inferenceservices", "chat"
    )
    assert await world.reconcile() == Result(requeue_after=1.0)  # deleted; waits for it to go
    assert world.api.condition(CONDITION_WRITE_REFUSED) is None
    assert await world.reconcile() == Result(requeue=True)  # the finalizer can't be removed
    condition = world.api.condition(CONDITION_WRITE_REFUSED)
    assert condition is not None
    assert condition["message"] == refused("patch", "inferenceservices", "chat")


async def test_a_finalizer_patch_on_a_stale_read_is_not_a_refusal() -> None:
    world = World(service(finalizer=False))
    stale = Invalid(422, "Invalid", FAILED_TEST_MESSAGE)
    world.api.refuse[("patch", "inferenceservices")] = stale
    with pytest.raises(Invalid):  # retried as an error
        await world.reconcile()
    assert world.events.seen == []


async def test_a_missing_service_status_write_is_no_refusal() -> None:
    world = World(service())
    world.api.refuse[("update", "inferenceservices/status")] = NotFound(404, "NotFound", "gone")
    assert await world.reconcile() == Result()
    assert world.events.seen == []
