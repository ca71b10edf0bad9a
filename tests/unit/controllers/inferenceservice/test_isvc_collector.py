"""The InferenceService controller beside the garbage collector: a deletion with
propagationPolicy Orphan deletes no replica, and a service created again adopts the replicas
it left (docs/controllers.md, "Deletion and the garbage collector")."""

from __future__ import annotations

import copy
from typing import Any

from test_isvc_write_refused import World, service

from omed.controllers.inferenceservice.core.names import DELETION_POLL, FINALIZER
from omed.kube.client import Resource
from omed.kube.errors import NotFound
from omed.workqueue import Result


def fresh_reads(world: World, *, deleting: bool = False) -> None:
    """Let the double answer the controller's fresh read of the InferenceService."""

    async def get(resource: Resource, name: str, namespace: Any = None) -> Any:
        if resource.plural != "inferenceservices" or world.api.isvc is None:
            raise NotFound(404, "NotFound", name)
        found = copy.deepcopy(world.api.isvc)
        if deleting:
            found["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
        return found

    world.api.get = get  # type: ignore[attr-defined]


def ready_reason(world: World) -> str | None:
    ready = world.api.condition("Ready")
    return None if ready is None else str(ready["reason"])


async def converged() -> World:
    world = World(service())
    fresh_reads(world)
    await world.reconcile()
    assert list(world.api.replicas) == ["chat-engine"]
    return world


def orphaned(world: World) -> dict[str, Any]:
    """What the collector does under Orphan: the replica's owner reference goes."""
    irep = world.api.replicas["chat-engine"]
    irep["metadata"].pop("ownerReferences")
    return irep


async def test_an_orphan_deletion_deletes_no_replica_and_lets_go_once_they_are_unowned() -> None:
    world = await converged()
    assert world.api.isvc is not None
    world.api.isvc["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    world.api.isvc["metadata"]["finalizers"] = [FINALIZER, "orphan"]
    assert await world.reconcile() == Result(requeue_after=DELETION_POLL)
    assert [w for w in world.api.writes if w[0] == "delete"] == []
    orphaned(world)
    assert await world.reconcile() == Result()
    assert world.api.writes[-1] == ("patch", "inferenceservices", "chat")
    assert world.api.isvc["metadata"]["finalizers"] == ["orphan"]  # the collector's to remove
    assert list(world.api.replicas) == ["chat-engine"]


async def test_a_background_deletion_still_deletes_the_replicas_itself() -> None:
    world = await converged()
    assert world.api.isvc is not None
    world.api.isvc["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    await world.reconcile()
    assert ("delete", "inferencereplicas", "chat-engine") in world.api.writes


async def test_a_service_created_again_adopts_the_replica_an_orphan_deletion_left() -> None:
    world = await converged()
    orphaned(world)
    assert world.api.isvc is not None
    world.api.isvc["metadata"]["uid"] = "isvc-uid-2"  # a new InferenceService of the name
    assert await world.reconcile() == Result()
    assert ("patch", "inferencereplicas", "chat-engine") in world.api.writes
    refs = world.api.replicas["chat-engine"]["metadata"]["ownerReferences"]
    assert [(r["uid"], r["controller"]) for r in refs] == [("isvc-uid-2", True)]
    assert ready_reason(world) != "InferenceReplicaConflict"


async def test_a_replica_that_isnt_the_services_own_is_a_conflict_not_an_adoption() -> None:
    def foreign(irep: dict[str, Any]) -> None:
        irep["metadata"]["ownerReferences"] = [
            {
                "apiVersion": "ome.io/v1beta1",
                "kind": "InferenceService",
                "name": "chat",
                "uid": "older",
                "controller": True,
            }
        ]

    def another_parent(irep: dict[str, Any]) -> None:
        irep["metadata"].pop("ownerReferences")
        irep["spec"]["parentRef"] = {"name": "other"}

    def terminating(irep: dict[str, Any]) -> None:
        irep["metadata"].pop("ownerReferences")
        irep["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"

    for change in (foreign, another_parent, terminating):
        world = await converged()
        change(world.api.replicas["chat-engine"])
        writes = len(world.api.writes)
        await world.reconcile()
        assert ("patch", "inferencereplicas", "chat-engine") not in world.api.writes[writes:]
        assert ready_reason(world) == "InferenceReplicaConflict"


async def test_a_service_a_fresh_read_shows_deleted_adopts_nothing() -> None:
    world = await converged()
    orphaned(world)
    fresh_reads(world, deleting=True)
    assert world.api.isvc is not None
    world.api.isvc["metadata"]["uid"] = "isvc-uid-2"
    assert await world.reconcile() == Result(requeue_after=DELETION_POLL)
    assert "ownerReferences" not in world.api.replicas["chat-engine"]["metadata"]
