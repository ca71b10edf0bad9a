"""The waits and failures of a migration under the chart's manager, one test each, with the
record messages and events an OME operator reads (docs/migrations.md, "Messages and events").

Each test serves two single-pod Instances of ``chat``'s engine (the traffic Service
``chat-engine`` and its slices exist), writes one request exactly as upstream's CLI does
(:meth:`test_migration.World.send`) to move Instance 1, and reads the record, the events
on the InferenceService and the audit ConfigMap. Instance 1's surge is Instance 2, so a
failing surge is played by the node simulator failing the pods of Instance 2.
"""

from __future__ import annotations

import json
from typing import Any

import _support as support
import pytest
from _support import eventually
from test_migration import ENGINE, SERVICE, World, world
from test_routing_endpoints import RUNTIME

from omed.kube.resources import CONFIGMAPS, INFERENCE_REPLICAS, PODS

pytestmark = [pytest.mark.integration, pytest.mark.slow]
__all__ = ["world"]

CAPS = {"maxInFlightMigrations": 3, "maxMigrationsPerWindow": 10, "window": "1h"}
HELD = "waiting for migration capacity policy (no lifecycle.audit configured)"
RECREATE = {"lifecycle": {"updateStrategy": {"type": "RecreatePod"}}}
"""One Instance at a time, the highest index first: Instance 1 updates before Instance 0."""
FIRST = "3f2a9c1e-5b7d-4e21-9a0c-1d2e3f405162"
SECOND = "7c9e6679-7425-40de-944b-e07fc1f90ae7"


async def serve_two(
    world: World, manager_config: Any, *, service: dict[str, Any] | None = None, **lifecycle: Any
) -> None:
    """The manager under ``lifecycle`` (beside the chart-like base; a key set to None is left
    out), two Instances serving (``service``: the InferenceService, else
    :func:`engine_service`'s)."""
    merged = {**support.lifecycle(scale_up_pod_batch_size=50), "audit": CAPS, **lifecycle}
    await manager_config(lifecycle={k: v for k, v in merged.items() if v is not None})
    await world.start_manager("manager-a")
    await world.create_service(RUNTIME, service or engine_service())
    await eventually(lambda: world.serving([0, 1]), timeout=120, what="2 ready endpoints")


def engine_service(**engine: Any) -> dict[str, Any]:
    return support.inference_service(
        SERVICE, runtime="srt-engine", engine={"minReplicas": 2, "maxReplicas": 2, **engine}
    )


async def pod_of(world: World, index: int) -> dict[str, Any]:
    (pod,) = [
        p
        for p in await world.pods()
        if p["metadata"]["labels"]["ome.io/instance-index"] == str(index)
    ]
    return dict(pod)


async def node_of(world: World, index: int) -> str:
    return str((await pod_of(world, index))["spec"]["nodeName"])


def other_node(world: World, node: str) -> str:
    """A simulated node other than ``node``."""
    return next(n for n in (f"{world.namespace}-n-{i}" for i in range(3)) if n != node)


async def request(
    world: World, uuid: str, *, instance: int = 1, from_node: str | None = None
) -> None:
    node = from_node or await node_of(world, instance)
    await world.send(uuid, instance=instance, from_node=node, reason="failure table")


async def record_of(world: World, uuid: str) -> dict[str, Any] | None:
    status = (await world.replica()).get("status") or {}
    for record in status.get("migrations") or ():
        if record.get("requestUUID") == uuid:
            return dict(record)
    return None


async def ended(world: World, uuid: str) -> dict[str, Any]:
    """The record once it is Failed or Completed."""

    async def terminal() -> dict[str, Any] | None:
        world.check_manager()
        record = await record_of(world, uuid)
        if record is not None and record.get("phase") in ("Failed", "Completed"):
            return record
        return None

    found: dict[str, Any] = await eventually(terminal, timeout=90, what=f"record {uuid} ended")
    return found


async def warning(world: World, reason: str) -> str:
    """The one Warning of ``reason``; the recorder writes events after the status write that
    ended the record, so it is waited for."""
    events = await eventually(lambda: world.events(reason), timeout=30, what=f"a {reason} event")
    (event,) = events
    assert event["type"] == "Warning", event
    return str(event["message"])


async def audit_row(world: World, uuid: str) -> dict[str, Any]:
    ledger = await world.kube.get(CONFIGMAPS, f"{SERVICE}-ome-migration-audit", world.namespace)
    (row,) = [
        r for r in json.loads(ledger["data"]["history.json"])["entries"] if r["requestUUID"] == uuid
    ]
    return dict(row)


async def restored(world: World) -> None:
    """Instance 1 serves as it was, the surge gone: Instances 0 and 1 only."""
    await eventually(lambda: world.serving([0, 1]), timeout=90, what="0 and 1 serving again")


async def test_no_ready_timeout_expires_the_request_in_accepted(
    world: World, manager_config: Any
) -> None:
    """Without instanceReadyTimeout the deadline is the accept time (upstream's documented
    bug): the next pass fails the record, with no surge to tear down."""
    await serve_two(world, manager_config)
    await request(world, FIRST)
    record = await ended(world, FIRST)
    message = "deadline exceeded in phase Accepted: surge never allocated"
    assert (record["phase"], record["message"]) == ("Failed", message)
    assert record.get("surgeInstance") is None
    assert await warning(world, "MigrationExpired") == (
        f"OMENative migration uuid={FIRST} expired: {message}"
    )
    assert (await audit_row(world, FIRST))["outcome"] == message
    await restored(world)


async def test_a_surge_that_never_gets_ready_expires_in_surge_pending(
    world: World, manager_config: Any
) -> None:
    """A deadline of 15 s (the Instances' own Creates come up well within it)."""
    await serve_two(world, manager_config, instanceReadyTimeout="15s")
    assert world.simulator is not None
    world.simulator.inject(world.namespace, {"ome.io/instance-index": "2"}, "NeverReady")
    await request(world, FIRST)
    record = await ended(world, FIRST)
    message = "deadline exceeded in phase SurgePending: surge pods never became ready"
    assert (record["phase"], record["message"], record["surgeInstance"]) == (
        "Failed",
        message,
        2,
    )
    assert await warning(world, "MigrationExpired") == (
        f"OMENative migration uuid={FIRST} expired: {message}; tearing down surge instance=2"
    )
    assert (await audit_row(world, FIRST))["outcome"] == message
    await restored(world)
    assert not [p for p in await world.pods() if p["metadata"]["name"] == f"{ENGINE}-2-default-0"]


async def test_a_wedged_surge_fails_the_move_past_the_stuck_pod_grace(
    world: World, manager_config: Any
) -> None:
    await serve_two(world, manager_config, instanceReadyTimeout="10m", stuckPodGracePeriod="3s")
    assert world.simulator is not None
    world.simulator.inject(
        world.namespace, {"ome.io/instance-index": "2"}, "CrashLoopBackOff", crash_after=0.05
    )
    await request(world, FIRST)
    record = await ended(world, FIRST)
    message = f"surge pod {ENGINE}-2-default-0 wedged in CrashLoopBackOff past the stuck-pod grace"
    assert (record["phase"], record["message"]) == ("Failed", message)
    assert await warning(world, "MigrationSurgeWedged") == (
        f"OMENative migration uuid={FIRST} failed: {message}; tearing down surge instance=2"
    )
    assert (await audit_row(world, FIRST))["outcome"] == message
    await restored(world)


async def test_the_rate_cap_fails_a_request_past_it(world: World, manager_config: Any) -> None:
    """One migration per hour: the first completes, the second is refused at the cap."""
    await serve_two(
        world,
        manager_config,
        instanceReadyTimeout="10m",
        audit={**CAPS, "maxMigrationsPerWindow": 1},
    )
    await request(world, FIRST)
    first = await ended(world, FIRST)
    assert (first["phase"], first["message"]) == ("Completed", "migrated to instance=2")
    await eventually(lambda: world.serving([0, 2]), timeout=60, what="0 and 2 serving")
    await request(world, SECOND, instance=0)
    record = await ended(world, SECOND)
    message = "migration rate cap reached (1/1 in the last 1h0m0s)"
    assert (record["phase"], record["message"]) == ("Failed", message)
    rejected = f"OMENative migration uuid={SECOND} rejected: {message}"
    assert await warning(world, "RateLimited") == rejected
    assert await warning(world, "MigrationRequestRejected") == rejected
    assert (await audit_row(world, SECOND))["outcome"] == message
    await eventually(lambda: world.serving([0, 2]), timeout=30, what="0 and 2 serving on")


async def test_mode_never_answers_with_a_born_terminal_failed_record(
    world: World, manager_config: Any
) -> None:
    """The mode changed on the running component applies at once, without a rollout."""
    await serve_two(world, manager_config, instanceReadyTimeout="10m")
    never = {"spec": {"engine": {"lifecycle": {"migrationPolicy": {"mode": "Never"}}}}}
    await world.patch_service(SERVICE, never)

    async def mode_never() -> bool:
        spec = (await world.replica()).get("spec") or {}
        return "Never" in json.dumps(spec)

    await eventually(mode_never, timeout=30, what="the replica's mode Never")
    await request(world, FIRST)
    record = await ended(world, FIRST)
    message = "migrations disabled by MigrationPolicy Mode=Never"
    assert (record["phase"], record["message"], record["trigger"]) == ("Failed", message, "Manual")
    assert record["startedAt"] == record["completedAt"] == record["deadline"]
    assert await warning(world, "MigrationRequestRejected") == (
        f"OMENative migration uuid={FIRST} rejected: {message}"
    )
    assert (await audit_row(world, FIRST))["phase"] == "Failed"
    await restored(world)


async def test_a_source_that_moved_is_migrated_off_the_node_it_occupies(
    world: World, manager_config: Any
) -> None:
    """A request naming a node the source doesn't occupy (it moved after the request was
    written): a Normal MigrationFromNodeMismatch, and the move goes on from the node it
    occupies, the record's fromNode following it."""
    await serve_two(world, manager_config, instanceReadyTimeout="10m")
    actual = await node_of(world, 1)
    other = other_node(world, actual)
    await request(world, FIRST, from_node=other)
    record = await ended(world, FIRST)
    assert (record["phase"], record["message"], record["fromNode"]) == (
        "Completed",
        "migrated to instance=2",
        actual,
    )
    (event,) = await world.events("MigrationFromNodeMismatch")
    assert (event["type"], event["message"]) == (
        "Normal",
        f"request.FromNode={other} does not match observed source node={actual}; "
        f"component=engine instance=1 leaves {actual}",
    )
    assert await node_of(world, 2) != actual


async def test_a_source_on_two_nodes_fails_the_move(world: World, manager_config: Any) -> None:
    """A leftover pod of Instance 1 (its own pod's labels and owner, another name) runs on a
    second node: the single-pod source names no one node to leave. The move fails before any
    surge, with a Warning MigrationFromNodeMismatch."""
    await serve_two(world, manager_config, instanceReadyTimeout="10m")
    own = await pod_of(world, 1)
    node = own["spec"]["nodeName"]
    other = other_node(world, node)
    meta = own["metadata"]
    leftover = f"{meta['name']}-leftover"
    await world.kube.create(
        PODS,
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": leftover,
                "labels": meta["labels"],
                "ownerReferences": meta["ownerReferences"],
            },
            "spec": {
                "nodeName": other,
                "containers": [
                    {"name": c["name"], "image": c["image"]} for c in own["spec"]["containers"]
                ],
            },
        },
        world.namespace,
    )
    await request(world, FIRST, from_node=node)
    record = await ended(world, FIRST)
    message = f"source pods span multiple nodes ({', '.join(sorted([node, other]))})"
    assert (record["phase"], record["message"]) == ("Failed", message)
    assert record.get("surgeInstance") is None
    assert await warning(world, "MigrationFromNodeMismatch") == (
        f"OMENative migration uuid={FIRST} rejected: {message}"
    )
    assert (await audit_row(world, FIRST))["outcome"] == message
    await world.kube.delete(PODS, leftover, world.namespace, grace_period_seconds=0)
    await restored(world)


async def test_a_source_whose_pod_is_gone_fails_the_move(world: World, manager_config: Any) -> None:
    """The request waits (no caps: held) when Instance 1's pod goes while no manager runs
    (kill -9, the pod deleted, a new manager): the new manager's first look finds the row
    still Ready and no pod, so the source has no node to leave. The move fails with a Warning
    MigrationFromNodeMismatch; the Instance is rebuilt as any lost pod is. (A manager that
    watches the pod go sees it Terminating first, a wait, and its row leaves Ready.)"""
    await serve_two(world, manager_config, instanceReadyTimeout="10m", audit=None)
    own = await pod_of(world, 1)
    await request(world, FIRST)

    async def held() -> bool:
        world.check_manager()
        record = await record_of(world, FIRST)
        return record is not None and record.get("message") == HELD

    await eventually(held, timeout=60, what="the request held")
    world.kill_manager()
    meta = own["metadata"]
    await world.kube.delete(
        PODS, meta["name"], world.namespace, grace_period_seconds=0, uid=meta["uid"]
    )

    async def gone() -> bool:
        return all(p["metadata"]["uid"] != meta["uid"] for p in await world.pods())

    await eventually(gone, timeout=30, what="Instance 1's pod gone")
    await world.start_manager("manager-b")
    record = await ended(world, FIRST)
    message = "source instance has no live pods"
    assert (record["phase"], record["message"]) == ("Failed", message)
    assert record.get("surgeInstance") is None
    assert await warning(world, "MigrationFromNodeMismatch") == (
        f"OMENative migration uuid={FIRST} rejected: {message}"
    )
    assert (await audit_row(world, FIRST))["outcome"] == message
    await restored(world)
    assert (await pod_of(world, 1))["metadata"]["uid"] != meta["uid"]


async def retry_block(world: World, state: str) -> dict[str, Any]:
    """The replica's one retry block, once it is in ``state``."""

    async def found() -> dict[str, Any] | None:
        world.check_manager()
        replica = await world.kube.get(INFERENCE_REPLICAS, ENGINE, world.namespace)
        blocks = (replica.get("status") or {}).get("retryBlocks") or []
        return dict(blocks[0]) if len(blocks) == 1 and blocks[0]["state"] == state else None

    block: dict[str, Any] = await eventually(found, timeout=120, what=f"a {state} retry block")
    return block


async def test_a_source_on_a_held_revision_is_rejected(world: World, manager_config: Any) -> None:
    """An update to ome/srt:2.0 (one attempt allowed): Instance 1 serves it, Instance 0
    can't pull it, so the revision is Held. A move of Instance 1, Ready on that revision,
    would rebuild it elsewhere: it is rejected."""
    retries = {"maxAttempts": 1, "initialDelay": "1s", "maxDelay": "2s", "multiplier": 2}
    await serve_two(
        world,
        manager_config,
        service=engine_service(**RECREATE),
        instanceReadyTimeout="10m",
        updateRetry=retries,
    )
    assert world.simulator is not None
    world.simulator.inject(
        world.namespace,
        {"ome.io/instance-index": "0", "ome.io/instance-incarnation": "2"},
        "ErrImagePull",
    )
    await world.patch_service(SERVICE, {"spec": {"engine": {"runner": {"image": "ome/srt:2.0"}}}})
    block = await retry_block(world, "Held")
    revision = block["targetRevision"]
    rows = await world.rows()
    assert (rows[1]["phase"], rows[1]["runningRevision"]) == ("Ready", revision)
    await request(world, FIRST)
    record = await ended(world, FIRST)
    message = (
        f"source component=engine instance=1 runs revision {revision}, which is held after its "
        "attempts (retry block Held after 1 failed attempt(s): ImagePullBackOff); the move "
        "would rebuild that revision elsewhere; correct or release the revision, then request "
        "the move again"
    )
    assert (record["phase"], record["message"]) == ("Failed", message)
    assert record.get("surgeInstance") is None
    assert await warning(world, "MigrationRequestRejected") == (
        f"OMENative migration uuid={FIRST} rejected: {message}"
    )
    assert (await audit_row(world, FIRST))["outcome"] == message
    assert not [p for p in await world.pods() if p["metadata"]["name"] == f"{ENGINE}-2-default-0"]


async def test_a_source_failed_on_a_revision_that_never_started_is_rejected(
    world: World, manager_config: Any
) -> None:
    """An update to ome/srt:2.0 whose first Instance, Instance 1, crash-loops before it is
    ever Ready: the revision never ran, so it backs off (for minutes), Instance 1 Failed on
    it. A move of Instance 1 could only wait until its deadline: it is rejected."""
    retries = {"maxAttempts": 3, "initialDelay": "10m", "maxDelay": "10m", "multiplier": 2}
    await serve_two(
        world,
        manager_config,
        service=engine_service(**RECREATE),
        instanceReadyTimeout="10m",
        updateRetry=retries,
    )
    assert world.simulator is not None
    world.simulator.inject(
        world.namespace,
        {"ome.io/instance-index": "1", "ome.io/instance-incarnation": "2"},
        "CrashLoopBackOff",
        crash_after=0.05,
    )
    await world.patch_service(SERVICE, {"spec": {"engine": {"runner": {"image": "ome/srt:2.0"}}}})
    block = await retry_block(world, "Backoff")
    revision = block["targetRevision"]

    async def failed_on_it() -> bool:
        row = (await world.rows()).get(1) or {}
        return row.get("phase") == "Failed" and row.get("targetRevision") == revision

    await eventually(failed_on_it, timeout=60, what="Instance 1 Failed on the new revision")
    assert (await world.rows())[1]["runningRevision"] != revision
    await request(world, FIRST)
    record = await ended(world, FIRST)
    message = (
        f"source component=engine instance=1 is Failed on revision {revision}, which has not "
        "started (retry block Backoff after 1 failed attempt(s): CrashLoopBackOff); correct or "
        "release the revision, then request the move again"
    )
    assert (record["phase"], record["message"]) == ("Failed", message)
    assert record.get("surgeInstance") is None
    assert await warning(world, "MigrationRequestRejected") == (
        f"OMENative migration uuid={FIRST} rejected: {message}"
    )
    assert not await world.events("MigrationDeferred")
    assert (await audit_row(world, FIRST))["outcome"] == message
