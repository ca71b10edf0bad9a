"""The holds and guards of a migration under the chart's manager, one test each: a Failed
source deferring the move, the serial turn of a second request, a record parked on a source
pod whose kubelet never confirms its delete (and the in-flight cap it fills), a source pinned
to the node it leaves, a surge create refused by a quota for a while, and the automatic
relocation budget running out (docs/migrations.md, "Messages and events").

Each test serves two single-pod Instances of ``chat``'s engine as
:mod:`test_migration_failures` does, writes requests exactly as upstream's CLI does, and reads
the record, the events on the InferenceService and the audit ConfigMap.
"""

from __future__ import annotations

import asyncio
from typing import Any

import _support as support
import pytest
from _support import eventually
from test_migration import ENGINE, World, world
from test_migration_failures import (
    CAPS,
    FIRST,
    SECOND,
    audit_row,
    ended,
    engine_service,
    node_of,
    record_of,
    request,
    restored,
    serve_two,
    warning,
)
from test_routing_endpoints import RUNTIME

from omed.controllers.inferencereplica.core import names
from omed.kube.client import Resource

pytestmark = [pytest.mark.integration, pytest.mark.slow]
__all__ = ["world"]

QUOTAS = Resource("", "v1", "resourcequotas", "ResourceQuota")


async def row_of(world: World, index: int) -> dict[str, Any]:
    return (await world.rows()).get(index) or {}


async def one_event(world: World, reason: str) -> dict[str, Any]:
    """The one event of ``reason``, recorded once (no repeat count, no series)."""
    events = await eventually(lambda: world.events(reason), timeout=30, what=f"a {reason} event")
    (event,) = events
    assert (event.get("count") or 1) == 1 and not event.get("series"), event
    return dict(event)


async def phase_is(world: World, uuid: str, phase: str) -> dict[str, Any]:
    async def check() -> dict[str, Any] | None:
        world.check_manager()
        record = await record_of(world, uuid)
        return record if record is not None and record.get("phase") == phase else None

    found: dict[str, Any] = await eventually(check, timeout=90, what=f"record {uuid} {phase}")
    return found


async def test_a_failed_source_defers_the_move_with_one_event_per_cause(
    world: World, manager_config: Any
) -> None:
    """Instance 1's pod crash-loops on the revision it runs: its repair rebuilds it once, the
    rebuilt pod crashes again, and with no retry ladder configured the repair parks for good.
    A move of Instance 1 waits for it, Accepted, its record and one Warning MigrationDeferred
    naming the failure and what holds the repair; further passes add no event. Once the crash
    stops the Instance is Ready in place and the same request completes."""
    await serve_two(world, manager_config, instanceReadyTimeout="10m")
    assert world.simulator is not None
    crash = world.simulator.inject(
        world.namespace, f"{ENGINE}-1-default-0", "CrashLoopBackOff", crash_after=0.05
    )

    async def parked() -> dict[str, Any] | None:
        world.check_manager()
        row = await row_of(world, 1)
        op = row.get("operation") or {}
        return row if op.get("step") == names.STEP_REPAIR_PARKED_NO_LADDER else None

    row = await eventually(parked, timeout=60, what="Instance 1's repair parked for good")
    assert row["phase"] == "Failed"
    await request(world, FIRST)

    async def deferred() -> dict[str, Any] | None:
        world.check_manager()
        record = await record_of(world, FIRST)
        message = (record or {}).get("message") or ""
        return record if message.startswith("waiting for source") else None

    record = await eventually(deferred, timeout=30, what="the move deferred")
    row = await row_of(world, 1)
    failure = row["lastFailure"]
    assert (failure["pod"], failure["container"]) == (f"{ENGINE}-1-default-0", "ome-container")
    message = (
        f"waiting for source component=engine instance=1, Failed on its running revision "
        f"{row['runningRevision']} (pod {ENGINE}-1-default-0 container ome-container stuck "
        f"({failure['reason']})), to be Ready again: its repair is parked and no retry ladder "
        "is configured to re-arm it; reset the Instance or publish a corrected revision"
    )
    assert (record["phase"], record["message"]) == ("Accepted", message)
    assert record.get("surgeInstance") is None
    event = await one_event(world, "MigrationDeferred")
    assert (event["type"], event["message"]) == ("Warning", message)
    await asyncio.sleep(12)  # two more passes at the 5 s requeue: the same cause, no event
    assert (await record_of(world, FIRST) or {}).get("message") == message
    await one_event(world, "MigrationDeferred")

    world.simulator.clear_injection(crash)
    done = await ended(world, FIRST)
    assert (done["phase"], done["message"]) == ("Completed", "migrated to instance=2")
    await eventually(lambda: world.serving([0, 2]), timeout=60, what="0 and 2 serving")
    await one_event(world, "MigrationDeferred")


async def test_a_second_request_waits_its_turn_while_the_first_is_in_flight(
    world: World, manager_config: Any
) -> None:
    """One migration in flight at a time (``maxInFlightMigrations: 1``): while Instance 1's
    surge is not ready, a request to move Instance 0 stays Accepted with no surge and no
    refusal; once the first completes, it moves, to the lowest free index."""
    await serve_two(
        world,
        manager_config,
        instanceReadyTimeout="10m",
        audit={**CAPS, "maxInFlightMigrations": 1},
    )
    assert world.simulator is not None
    hold = world.simulator.inject(world.namespace, {"ome.io/instance-index": "2"}, "NeverReady")
    await request(world, FIRST)
    first = await phase_is(world, FIRST, "SurgePending")
    assert (first["surgeInstance"], first["message"]) == (
        2,
        "surge allocated; waiting for surge pods",
    )
    await request(world, SECOND, instance=0)
    await phase_is(world, SECOND, "Accepted")
    await asyncio.sleep(12)  # two more passes at the 5 s requeue
    second = await record_of(world, SECOND)
    assert second is not None and second["phase"] == "Accepted", second
    assert second.get("surgeInstance") is None and second.get("allocatedAt") is None
    assert not await world.events("RateLimited")
    assert not await world.events("MigrationRequestRejected")

    world.simulator.clear_injection(hold)
    first = await ended(world, FIRST)
    assert (first["phase"], first["message"]) == ("Completed", "migrated to instance=2")
    second = await ended(world, SECOND)
    assert (second["phase"], second["message"]) == ("Completed", "migrated to instance=1")
    assert second["allocatedAt"] >= first["completedAt"]
    await eventually(lambda: world.serving([1, 2]), timeout=60, what="1 and 2 serving")


async def test_a_drain_the_kubelet_never_confirms_parks_and_fills_the_in_flight_cap(
    world: World, manager_config: Any
) -> None:
    """Instance 1's node ignores pod deletions: past its 1 s deletion deadline the source pod
    is still Terminating, so the Draining record parks (its message names the pod, a Warning
    MigrationParked says the surge keeps serving). The parked record is in flight: with
    ``maxInFlightMigrations: 1`` a request to move Instance 0 is refused at the cap. Once the
    kubelet confirms the delete, the parked move completes."""
    await serve_two(
        world,
        manager_config,
        service=engine_service(terminationGracePeriodSeconds=1),
        instanceReadyTimeout="10m",
        audit={**CAPS, "maxInFlightMigrations": 1},
    )
    assert world.simulator is not None
    node = await node_of(world, 1)
    world.simulator.ignore_deletions(node)
    await request(world, FIRST)
    pod = f"{ENGINE}-1-default-0"
    message = f"source drain parked: Terminating past their deletion deadline: {pod}"

    async def parked() -> dict[str, Any] | None:
        world.check_manager()
        record = await record_of(world, FIRST)
        if record is not None and record.get("phase") in ("Completed", "Failed"):
            raise AssertionError(f"the record ended unparked: {record}")
        return record if record is not None and record.get("message") == message else None

    record = await eventually(parked, timeout=90, what="the record parked")
    assert (record["phase"], record["surgeInstance"]) == ("Draining", 2)
    event = await one_event(world, "MigrationParked")
    assert (event["type"], event["message"]) == (
        "Warning",
        f"OMENative migration uuid={FIRST} parked: {message}; surge instance=2 keeps serving",
    )
    (source,) = [p for p in await world.pods() if p["metadata"]["name"] == pod]
    assert source["metadata"].get("deletionTimestamp")

    await request(world, SECOND, instance=0)
    refused = await ended(world, SECOND)
    cap = "in-flight migration cap reached (1/1)"
    assert (refused["phase"], refused["message"]) == ("Failed", cap)
    assert refused.get("surgeInstance") is None
    rejected = f"OMENative migration uuid={SECOND} rejected: {cap}"
    assert await warning(world, "RateLimited") == rejected
    assert await warning(world, "MigrationRequestRejected") == rejected
    assert (await audit_row(world, SECOND))["outcome"] == cap
    assert (await record_of(world, FIRST) or {}).get("message") == message

    world.simulator.ignore_deletions(node, False)
    done = await ended(world, FIRST)
    assert (done["phase"], done["message"]) == ("Completed", "migrated to instance=2")
    await eventually(lambda: world.serving([0, 2]), timeout=60, what="0 and 2 serving")
    await one_event(world, "MigrationParked")


async def test_a_source_pinned_to_its_node_fails_with_a_node_affinity_conflict(
    world: World, manager_config: Any
) -> None:
    """The engine's required node affinity pins both Instances to one node: the surge's
    ``NotIn`` that node could never schedule, so the move fails before any surge, with a
    Warning MigrationNodeAffinityConflict."""
    node = f"{world.namespace}-n-0"
    pin = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {
                        "matchExpressions": [
                            {"key": "kubernetes.io/hostname", "operator": "In", "values": [node]}
                        ]
                    }
                ]
            }
        }
    }
    await serve_two(
        world, manager_config, service=engine_service(affinity=pin), instanceReadyTimeout="10m"
    )
    assert await node_of(world, 1) == node
    await request(world, FIRST)
    record = await ended(world, FIRST)
    message = (
        f"source PodSpec NodeAffinity requires kubernetes.io/hostname={node}; overlay's "
        f"NotIn[{node}] would make scheduling impossible"
    )
    assert (record["phase"], record["message"]) == ("Failed", message)
    assert record.get("surgeInstance") is None
    assert await warning(world, "MigrationNodeAffinityConflict") == (
        f"OMENative migration uuid={FIRST} rejected: {message}"
    )
    assert (await audit_row(world, FIRST))["outcome"] == message
    await restored(world)
    assert not [p for p in await world.pods() if p["metadata"]["name"] == f"{ENGINE}-2-default-0"]


async def test_a_surge_create_over_quota_waits_with_one_event_then_completes(
    world: World, manager_config: Any
) -> None:
    """A ResourceQuota of two pods, both used: the surge's create is refused (403, exceeded
    quota), a transient refusal, so the record stays SurgePending, the surge's row waits on
    QuotaExceeded, one Warning MigrationSurgeCreateBlocked says so and the create is retried;
    once the quota goes, the move completes."""
    await serve_two(world, manager_config, instanceReadyTimeout="10m")
    quota = f"omed-test-two-pods-{world.namespace}"
    created = await world.kube.create(
        QUOTAS,
        {
            "apiVersion": "v1",
            "kind": "ResourceQuota",
            "metadata": {"name": quota},
            "spec": {"hard": {"pods": "2"}},
        },
        world.namespace,
    )
    # the control plane runs no quota controller: the test writes the usage it would
    created["status"] = {"hard": {"pods": "2"}, "used": {"pods": "2"}}
    await world.kube.replace_status(QUOTAS, created, world.namespace)
    await request(world, FIRST)
    pod = f"{ENGINE}-2-default-0"
    event = await one_event(world, "MigrationSurgeCreateBlocked")
    assert (event["type"], event["message"]) == (
        "Warning",
        f"OMENative migration uuid={FIRST} waiting to create surge pod {pod} before its deadline",
    )
    record = await record_of(world, FIRST)
    assert record is not None
    assert (record["phase"], record["surgeInstance"]) == ("SurgePending", 2)
    assert not [p for p in await world.pods() if p["metadata"]["name"] == pod]
    assert (await row_of(world, 2))["operation"]["waiting"] == "QuotaExceeded"
    await asyncio.sleep(12)  # the create retried over two more passes: the same cause, no event
    await one_event(world, "MigrationSurgeCreateBlocked")

    await world.kube.delete(QUOTAS, quota, world.namespace)
    done = await ended(world, FIRST)
    assert (done["phase"], done["message"]) == ("Completed", "migrated to instance=2")
    await eventually(lambda: world.serving([0, 2]), timeout=60, what="0 and 2 serving")
    assert not await world.events("MigrationRequestRejected")
    await one_event(world, "MigrationSurgeCreateBlocked")


async def test_the_relocation_budget_runs_out_after_its_last_attempt(
    world: World, manager_config: Any
) -> None:
    """``autoMigrate.maxAttempts: 1``: Instance 1 crash-loops wherever it lands. Its first
    Create is relocated off its node, the last slot, so a Warning AutoMigrationCapReached
    follows the AutoMigrationTriggered; its next incarnation fails too and is not relocated
    again: one Relocated record, one of each event."""
    await manager_config(
        lifecycle={
            **support.lifecycle(scale_up_pod_batch_size=50),
            "instanceReadyTimeout": "10m",
            "stuckPodGracePeriod": "3s",
            "autoMigrate": {"maxAttempts": 1},
            "audit": CAPS,
        }
    )
    await world.start_manager("manager-a")
    assert world.simulator is not None
    world.simulator.inject(
        world.namespace, {"ome.io/instance-index": "1"}, "CrashLoopBackOff", crash_after=0.05
    )
    await world.create_service(RUNTIME, engine_service())

    async def relocated() -> dict[str, Any] | None:
        world.check_manager()
        status = (await world.replica()).get("status") or {}
        records = [r for r in status.get("migrations") or () if r.get("phase") == "Relocated"]
        return dict(records[0]) if records else None

    record = await eventually(relocated, timeout=90, what="a relocation", interval=0.2)
    node = record["fromNode"]
    assert (record["trigger"], record["attempt"], record["sourceInstance"]) == ("Auto", 1, 1)
    triggered = await one_event(world, "AutoMigrationTriggered")
    assert (triggered["type"], triggered["message"]) == (
        "Normal",
        f"OMENative component=engine instance=1 relocation directive recorded: attempt 1/1, "
        f"rebuild steered off node {node} (uuid={record['requestUUID']})",
    )
    capped = await one_event(world, "AutoMigrationCapReached")
    assert (capped["type"], capped["message"]) == (
        "Warning",
        "OMENative component=engine instance=1 relocation budget exhausted (1/1 attempts); "
        "further expiries dispose terminal without relocation",
    )

    async def failed_again() -> dict[str, Any] | None:
        world.check_manager()
        row = await row_of(world, 1)
        return row if row.get("incarnation") == 2 and row.get("phase") == "Failed" else None

    row = await eventually(failed_again, timeout=60, what="incarnation 2 Failed")
    (pod,) = [p for p in await world.pods() if p["metadata"]["name"] == f"{ENGINE}-1-default-0"]
    assert pod["metadata"]["labels"]["ome.io/instance-incarnation"] == "2"
    assert pod["spec"]["nodeName"] != node
    await asyncio.sleep(8)  # past the stuck-pod grace again: no second relocation
    status = (await world.replica()).get("status") or {}
    assert [r["requestUUID"] for r in status["migrations"] if r["phase"] == "Relocated"] == [
        record["requestUUID"]
    ]
    await one_event(world, "AutoMigrationTriggered")
    await one_event(world, "AutoMigrationCapReached")
    assert (await row_of(world, 0))["phase"] == "Ready"
    assert row["lastFailure"]["pod"] == f"{ENGINE}-1-default-0"
