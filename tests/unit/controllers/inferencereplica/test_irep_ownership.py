"""Pods whose ownership the garbage collector or a user decided: adoption of the pods an
Orphan deletion left, no drain under an Orphan deletion, and the fresh reads that stand
between a stale cache and draining a pod that is no longer an earlier replica's."""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Mapping
from typing import Any

from irep_world import World, instance, target

from omed.api.constants import LABEL_COMPONENT, LABEL_INFERENCE_SERVICE, LABEL_INSTANCE_INDEX
from omed.clock import FakeClock
from omed.controllers.inferencereplica.core import names, orphans
from omed.controllers.inferencereplica.core.actions import RETRY_SOON, RemoveFinalizer
from omed.controllers.inferencereplica.core.model import PlanSettings
from omed.controllers.inferencereplica.core.observe import replica_target
from omed.controllers.inferencereplica.shell.expectations import Expectations
from omed.controllers.inferencereplica.shell.reconciler import InferenceReplicaReconciler
from omed.informers import INFERENCE_SERVICE, NAMESPACE, OWNER_UID
from omed.informers.transform import Obj
from omed.kube.client import Resource
from omed.kube.errors import AlreadyExists, Conflict, Forbidden, NotFound
from omed.workqueue import Result

KEY = "prod/chat-engine"
TEMPLATE = {"spec": {"containers": [{"name": "ome-container", "image": "ome/serving:1.0"}]}}
DELETED = "2026-09-14T20:00:00Z"


def replica(*, finalizers: tuple[str, ...] = (names.FINALIZER,), **meta: Any) -> dict[str, Any]:
    return {
        "apiVersion": "ome.io/v1beta1",
        "kind": "InferenceReplica",
        "metadata": {
            "name": "chat-engine",
            "namespace": "prod",
            "uid": "irep-uid",
            "generation": 1,
            "resourceVersion": "5",
            "finalizers": list(finalizers),
            **meta,
        },
        "spec": {
            "component": "engine",
            "replicas": 2,
            "runners": [{"name": "default", "template": TEMPLATE}],
        },
    }


def api_pod(
    name: str,
    *,
    index: str | None = "0",
    owner: Mapping[str, Any] | None = None,
    isvc: str = "chat-engine",
    component: str = "engine",
    terminating: bool = False,
    ready: bool = True,
) -> dict[str, Any]:
    labels = {LABEL_INFERENCE_SERVICE: isvc, LABEL_COMPONENT: component}
    if index is not None:
        labels[LABEL_INSTANCE_INDEX] = index
    meta: dict[str, Any] = {
        "name": name,
        "namespace": "prod",
        "uid": f"uid-{name}",
        "resourceVersion": "41",
        "labels": labels,
    }
    if owner is not None:
        meta["ownerReferences"] = [dict(owner)]
    if terminating:
        meta["deletionTimestamp"] = DELETED
    status = "True" if ready else "False"
    conditions = [{"type": "Ready", "status": status}, {"type": "ome.io/serving", "status": status}]
    return {"metadata": meta, "status": {"conditions": conditions}}


def owned_by(uid: str, *, kind: str = "InferenceReplica") -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": kind, "name": "chat-engine", "uid": uid, "controller": True}


class Api:
    """The API server's side: one InferenceReplica (or none) and pods; records every call."""

    def __init__(self, irep: dict[str, Any] | None, pods: list[dict[str, Any]]) -> None:
        self.irep = copy.deepcopy(irep)
        self.pods = {p["metadata"]["name"]: copy.deepcopy(p) for p in pods}
        self.calls: list[tuple[str, str, str]] = []
        self.patches: list[tuple[str, Any]] = []
        self.fail: dict[tuple[str, str], Exception] = {}

    def _call(self, verb: str, resource: Resource, name: str) -> None:
        self.calls.append((verb, resource.plural, name))
        error = self.fail.get((verb, name))
        if error is not None:
            raise error

    async def get(self, resource: Resource, name: str, namespace: str | None = None) -> Any:
        self._call("get", resource, name)
        found = self.irep if resource.plural == "inferencereplicas" else self.pods.get(name)
        if found is None:
            raise NotFound(404, "NotFound", name)
        return copy.deepcopy(found)

    async def list_all(self, resource: Resource, namespace: str | None = None, **kw: Any) -> Any:
        self._call("list", resource, str(kw.get("labelSelector")))
        return [copy.deepcopy(p) for p in self.pods.values()]

    async def create(
        self, resource: Resource, body: Mapping[str, Any], namespace: Any = None
    ) -> Any:
        self._call("create", resource, body["metadata"]["name"])
        return body

    async def replace_status(
        self, resource: Resource, body: Mapping[str, Any], namespace: Any = None
    ) -> Any:
        self._call("status", resource, body["metadata"]["name"])
        return {**body, "metadata": {**body["metadata"], "resourceVersion": "8"}}

    async def patch(
        self, resource: Resource, name: str, patch: Any, namespace: Any = None, **kw: Any
    ) -> Any:
        plural = resource.plural + ("/" + kw["subresource"] if kw.get("subresource") else "")
        self.calls.append(("patch", plural, name))
        error = self.fail.get(("patch", name))
        if error is not None:
            raise error
        self.patches.append((name, patch))
        if resource.plural != "inferencereplicas" or self.irep is None:
            return {}
        return {**self.irep, "metadata": {**self.irep["metadata"], "resourceVersion": "9"}}

    async def delete(self, resource: Resource, name: str, namespace: Any = None, **kw: Any) -> Any:
        self._call("delete", resource, name)
        return {}


class PodCache:
    """The product's pod cache with its indexes (namespace, owner uid, InferenceService)."""

    def __init__(self, pods: list[dict[str, Any]]) -> None:
        self.pods = {f"prod/{p['metadata']['name']}": p for p in pods}

    def get(self, key: str) -> Obj | None:
        return self.pods.get(key)

    def by_index(self, index: str, value: str) -> list[Obj]:
        found = []
        for pod in self.pods.values():
            meta = pod["metadata"]
            if index == NAMESPACE:
                keys = [meta["namespace"]]
            elif index == OWNER_UID:
                keys = [ref["uid"] for ref in meta.get("ownerReferences") or ()]
            elif index == INFERENCE_SERVICE:
                keys = [f"{meta['namespace']}/{meta['labels'][LABEL_INFERENCE_SERVICE]}"]
            else:
                raise AssertionError(index)
            if value in keys:
                found.append(pod)
        return found


class Replicas:
    def __init__(self, irep: dict[str, Any] | None) -> None:
        self.irep = irep

    def get(self, key: str) -> Obj | None:
        return self.irep if self.irep is not None and key == KEY else None

    def by_index(self, index: str, value: str) -> list[Obj]:
        return []


class Events:
    def __init__(self) -> None:
        self.seen: list[tuple[str, str, str, str]] = []

    def event(self, obj: Mapping[str, Any], *, type: str, reason: str, message: str) -> None:
        self.seen.append((obj["metadata"]["name"], type, reason, message))


def reconciler(
    api: Api, cached: dict[str, Any] | None, pods: list[dict[str, Any]]
) -> tuple[InferenceReplicaReconciler, Expectations, Events]:
    clock = FakeClock()
    expectations = Expectations(clock=clock)
    events = Events()
    run = InferenceReplicaReconciler(
        client=api,
        replicas=Replicas(cached),
        pods=PodCache(pods),
        events=events,
        settings=PlanSettings(),
        expectations=expectations,
        clock=clock,
    )
    return run, expectations, events


def pod_writes(api: Api) -> list[tuple[str, str, str]]:
    return [c for c in api.calls if c[0] in ("patch", "create", "delete") and "pods" in c[1]]


# -- which pods are adoptable (pure) ------------------------------------------------------------


def test_only_unowned_live_pods_named_and_labelled_as_the_replicas_are_adoptable() -> None:
    spec = replica_target(replica())
    pods = [
        api_pod("chat-engine-0-default-0"),
        api_pod("chat-engine-1-default-0", index="1"),
        api_pod("chat-engine-2-default-0", index="2", terminating=True),
        api_pod("chat-engine-3-default-0", index="3", owner=owned_by("other-uid")),
        api_pod("chat-engine-4-default-0", index="4", owner=owned_by("rs", kind="ReplicaSet")),
        api_pod("chat-engine-5-default-0", index="5", component="decoder"),
        api_pod("chat-engine-6-default-0", index="6", isvc="chat"),
        api_pod("chat-engine-7-default-0", index="8"),  # the name and the label disagree
        api_pod("chat-engine-9-default-0", index=None),
        api_pod("chat-engine-x-0-default-0"),  # another replica's name
    ]
    adoptable = orphans.adoptable(spec, pods)
    assert [p["metadata"]["name"] for p in adoptable] == [
        "chat-engine-0-default-0",
        "chat-engine-1-default-0",
    ]


def test_a_pod_whose_owner_reference_is_not_a_controller_is_adoptable_and_keeps_it() -> None:
    spec = replica_target(replica())
    other = {"apiVersion": "v1", "kind": "ConfigMap", "name": "cm", "uid": "cm-uid"}
    pod = api_pod("chat-engine-0-default-0", owner=other)
    assert orphans.adoptable(spec, [pod]) == [pod]
    patch = orphans.adoption_patch(spec, pod)
    assert patch == {
        "metadata": {
            "ownerReferences": [
                {
                    "apiVersion": "ome.io/v1beta1",
                    "kind": "InferenceReplica",
                    "name": "chat-engine",
                    "uid": "irep-uid",
                    "controller": True,
                    "blockOwnerDeletion": True,
                },
                other,
            ],
            "uid": "uid-chat-engine-0-default-0",
            "resourceVersion": "41",
        }
    }


def test_an_unowned_pod_maps_to_the_replicas_that_could_adopt_it() -> None:
    pod = api_pod("chat-engine-0-default-0", isvc="chat")
    assert orphans.candidate_keys(pod) == ("prod/chat-engine", "prod/chat")
    assert orphans.candidate_keys({"metadata": {"name": "x"}}) == ()


# -- propagationPolicy: Orphan (pure) -----------------------------------------------------------


def test_the_orphan_finalizer_marks_the_target_only_while_it_is_deleted() -> None:
    kept = replica_target(replica(finalizers=(names.FINALIZER, "orphan")))
    assert not kept.orphaning
    deleted = replica_target(
        replica(finalizers=(names.FINALIZER, "orphan"), deletionTimestamp=DELETED)
    )
    assert deleted.orphaning and deleted.deleting
    background = replica_target(replica(deletionTimestamp=DELETED))
    assert background.deleting and not background.orphaning


def test_an_orphan_deletion_drains_nothing_and_only_lets_the_finalizer_go() -> None:
    world = World(target(3))
    for _ in range(6):
        world.step()
    assert len(world.live()) == 3
    world.spec = dataclasses.replace(world.spec, deleting=True, orphaning=True)
    decided = world.plan()
    assert decided.actions == (RemoveFinalizer(),)
    assert decided.rows == tuple(world.rows[i] for i in range(3))
    world.spec = dataclasses.replace(world.spec, has_finalizer=False)
    assert world.plan().actions == ()


def test_an_orphan_deletion_mid_scale_down_leaves_the_wave_where_it_stands() -> None:
    world = World(target(1))
    world.add(instance(world.spec, 0)).add(instance(world.spec, 1))
    world.step()  # the Delete of Instance 1 is recorded
    assert world.rows[1].operation is not None
    world.spec = dataclasses.replace(world.spec, deleting=True, orphaning=True)
    assert world.plan().actions == (RemoveFinalizer(),)


# -- the reconciler: adoption -------------------------------------------------------------------


async def test_a_replica_adopts_the_pods_no_controller_owns_before_it_plans() -> None:
    irep = replica()
    pods = [
        api_pod("chat-engine-0-default-0"),
        api_pod("chat-engine-1-default-0", index="1"),
        api_pod("chat-engine-2-default-0", index="2", owner=owned_by("rs", kind="ReplicaSet")),
    ]
    api = Api(irep, pods)
    run, _, events = reconciler(api, irep, pods)
    assert await run.reconcile(KEY) == Result(requeue_after=RETRY_SOON)
    assert api.calls == [
        ("get", "inferencereplicas", "chat-engine"),
        ("patch", "pods", "chat-engine-0-default-0"),
        ("patch", "pods", "chat-engine-1-default-0"),
    ]
    refs = [patch["metadata"]["ownerReferences"][0]["uid"] for _, patch in api.patches]
    assert refs == ["irep-uid", "irep-uid"]
    assert events.seen == [
        (
            "chat-engine",
            "Normal",
            names.EVENT_PODS_ADOPTED,
            "Adopted 2 pod(s) that no controller owned: "
            "chat-engine-0-default-0, chat-engine-1-default-0",
        )
    ]


async def test_a_paused_or_deleted_replica_adopts_nothing() -> None:
    pods = [api_pod("chat-engine-0-default-0")]
    paused = replica()
    paused["spec"]["paused"] = True
    deleted = replica(deletionTimestamp=DELETED)
    for irep in (paused, deleted):
        api = Api(irep, pods)
        run, _, _ = reconciler(api, irep, pods)
        await run.reconcile(KEY)
        assert pod_writes(api) == []


async def test_a_fresh_read_showing_the_replica_deleted_or_replaced_stops_the_adoption() -> None:
    pods = [api_pod("chat-engine-0-default-0")]
    for fresh in (
        replica(deletionTimestamp=DELETED),
        replica(uid="another-uid"),
        None,
    ):
        api = Api(fresh, pods)
        run, _, events = reconciler(api, replica(), pods)
        api.irep = fresh
        await run.reconcile(KEY)
        assert ("patch", "pods", "chat-engine-0-default-0") not in api.calls
        assert events.seen == []


async def test_a_replica_without_the_finalizer_puts_it_on_before_it_adopts() -> None:
    irep = replica(finalizers=())
    pods = [api_pod("chat-engine-0-default-0")]
    api = Api(irep, pods)
    run, _, _ = reconciler(api, irep, pods)
    await run.reconcile(KEY)
    assert api.calls == [("patch", "inferencereplicas", "chat-engine")]
    (_, patch) = api.patches[0]
    assert patch["metadata"]["finalizers"] == [names.FINALIZER]


async def test_an_adoption_that_meets_a_changed_pod_looks_again_soon() -> None:
    irep = replica()
    pods = [api_pod("chat-engine-0-default-0")]
    api = Api(irep, pods)
    api.fail[("patch", "chat-engine-0-default-0")] = Conflict(409, "Conflict", "modified")
    run, _, events = reconciler(api, irep, pods)
    assert await run.reconcile(KEY) == Result(requeue_after=RETRY_SOON)
    assert events.seen == []


async def test_a_refused_adoption_is_reported_and_backs_off() -> None:
    irep = replica()
    pods = [api_pod("chat-engine-0-default-0")]
    api = Api(irep, pods)
    api.fail[("patch", "chat-engine-0-default-0")] = Forbidden(403, "Forbidden", "no")
    api.fail[("create", "chat-engine-0-default-0")] = AlreadyExists(409, "AlreadyExists", "x")
    run, _, events = reconciler(api, irep, pods)
    assert await run.reconcile(KEY) == Result(requeue=True)
    assert [e[2] for e in events.seen] == ["WriteRefused"]
    assert 'patch pods "chat-engine-0-default-0" refused' in events.seen[0][3]


# -- the reconciler: Orphan deletion ------------------------------------------------------------


async def test_an_orphan_deletion_waits_for_no_cache_and_lets_go_once_the_pods_are_unowned() -> (
    None
):
    irep = replica(finalizers=(names.FINALIZER, "orphan"), deletionTimestamp=DELETED)
    owned = [api_pod("chat-engine-0-default-0", owner=owned_by("irep-uid"))]
    api = Api(irep, owned)
    run, expectations, _ = reconciler(api, irep, owned)
    expectations.expect_creations(KEY, ["chat-engine-1-default-0"])  # never to be seen
    assert await run.reconcile(KEY) == Result(requeue_after=RETRY_SOON)
    assert api.calls == [("list", "pods", "ome.io/inferenceservice=chat-engine,component=engine")]
    api.pods = {n: api_pod(n) for n in api.pods}  # the collector took the references off
    assert await run.reconcile(KEY) == Result()
    assert api.calls[-1] == ("patch", "inferencereplicas", "chat-engine")
    assert [c for c in api.calls if c[0] in ("status", "delete", "create")] == []
    assert pod_writes(api) == []


# -- the reconciler: pods of an earlier or gone replica -----------------------------------------


async def test_pods_of_a_gone_replica_are_drained_only_while_the_api_server_shows_them_its() -> (
    None
):
    cached = [api_pod("chat-engine-0-default-0", owner=owned_by("old-uid"))]
    # The collector orphaned it meanwhile (the cache is behind): left alone.
    api = Api(None, [api_pod("chat-engine-0-default-0")])
    run, _, _ = reconciler(api, None, cached)
    assert await run.reconcile(KEY) == Result(requeue_after=RETRY_SOON)
    assert pod_writes(api) == []
    # Still the gone replica's (the collector lags): drained, gate first.
    api = Api(None, cached)
    run, _, _ = reconciler(api, None, cached)
    assert await run.reconcile(KEY) == Result(requeue_after=RETRY_SOON)
    assert pod_writes(api) == [("patch", "pods/status", "chat-engine-0-default-0")]


async def test_names_held_by_an_earlier_replicas_pods_are_freed_only_when_a_read_confirms() -> None:
    irep = replica()
    irep["spec"]["replicas"] = 1
    cached = [api_pod("chat-engine-0-default-0", owner=owned_by("old-uid"))]
    for fresh, drained in (
        (api_pod("chat-engine-0-default-0"), False),  # orphaned since: adopted next pass
        (cached[0], True),  # still the earlier replica's: drained
    ):
        api = Api(irep, [fresh])
        api.fail[("create", "chat-engine-0-default-0")] = AlreadyExists(409, "AlreadyExists", "x")
        run, _, _ = reconciler(api, irep, cached)
        assert await run.reconcile(KEY) == Result(requeue_after=RETRY_SOON)
        gate = ("patch", "pods/status", "chat-engine-0-default-0")
        assert (gate in api.calls) is drained
