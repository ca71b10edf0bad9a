"""A manual migration under the chart's manager, requested as upstream OME's CLI requests it.

The chart's manager (its ServiceAccount, RBAC, arguments and ConfigMap) serves an engine of
four single-pod Instances whose runtime declares a port, so the traffic Service ``chat-engine``
and its EndpointSlices (kept by the real kube-controller-manager) exist. The request is the
annotation ``ome.io/migration-request-v1-<uuid>`` with the JSON body ``kubectl ome migration
start`` writes (built here from upstream's wire format: Go struct order, empty hints left
out), merged into the InferenceService as the CLI's patch does.

Instance 3 moves off its node: the surge, Instance 4, runs elsewhere, Instance 3 is gone, and
the ready endpoints of the traffic Service never drop below four (every slice version is
sampled, as test_routing_endpoints does). The record says ``migrated to instance=4``, the
InferenceService has the MigrationRequestAccepted and MigrationCompleted events, and the
audit ConfigMap the Completed row.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import _support as support
import pytest
from _support import eventually
from test_routing_endpoints import RUNTIME, Sampler

from omed.kube.client import MERGE_PATCH, KubeClient, Resource
from omed.kube.errors import ApiError, NotFound
from omed.kube.resources import CONFIGMAPS, EVENTS, INFERENCE_REPLICAS, INFERENCE_SERVICES, PODS
from omed.statuscodec import decode_status

pytestmark = [pytest.mark.integration, pytest.mark.slow]

SERVICE = "chat"
ENGINE = f"{SERVICE}-engine"
UUID = "7c9e6679-7425-40de-944b-e07fc1f90ae7"
KEY = f"ome.io/migration-request-v1-{UUID}"


def upstream_request(*, instance: int, from_node: str, reason: str) -> str:
    """The body upstream's CLI writes: its struct's fields in order, compact, hints omitted
    when empty, ``from_node`` always there."""
    return json.dumps(
        {
            "schemaVersion": "v1",
            "component": "engine",
            "instance": instance,
            "from_node": from_node,
            "reason": reason,
            "requested_at": "2026-09-28T10:12:04Z",
            "requested_by": "kubectl-ome",
        },
        separators=(",", ":"),
    )


POLICIES = Resource(
    "admissionregistration.k8s.io",
    "v1",
    "validatingadmissionpolicies",
    "ValidatingAdmissionPolicy",
    namespaced=False,
)
BINDINGS = Resource(
    "admissionregistration.k8s.io",
    "v1",
    "validatingadmissionpolicybindings",
    "ValidatingAdmissionPolicyBinding",
    namespaced=False,
)


@contextlib.asynccontextmanager
async def admission_refuses(
    kube: KubeClient,
    namespace: str,
    *,
    name: str,
    rule: dict[str, Any],
    allowed: str,
    message: str,
    refused: Callable[[], Awaitable[bool]],
) -> AsyncIterator[None]:
    """Until the block ends, a ValidatingAdmissionPolicy refuses the requests of ``rule`` in
    ``namespace`` whose CEL ``allowed`` is false, with ``message`` (reason Invalid: a 422, as
    any admission refusal without its own reason). Ready once ``refused`` says so."""
    await kube.create(
        POLICIES,
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingAdmissionPolicy",
            "metadata": {"name": name},
            "spec": {
                "failurePolicy": "Fail",
                "matchConstraints": {
                    "resourceRules": [rule],
                    "namespaceSelector": {
                        "matchLabels": {"kubernetes.io/metadata.name": namespace}
                    },
                },
                "validations": [{"expression": allowed, "message": message}],
            },
        },
    )
    await kube.create(
        BINDINGS,
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingAdmissionPolicyBinding",
            "metadata": {"name": name},
            "spec": {"policyName": name, "validationActions": ["Deny"]},
        },
    )
    try:
        await eventually(refused, timeout=30, what=f"policy {name} to refuse")
        yield
    finally:
        for resource in (BINDINGS, POLICIES):
            with contextlib.suppress(NotFound):
                await kube.delete(resource, name)


def status_refuses(kube: KubeClient, namespace: str, phase: str) -> Any:
    """Until the block ends, the API server refuses every InferenceReplica status write in
    ``namespace`` that records a migration in ``phase``: the manager's pass that would move a
    record there gets no further than its side effects ahead of the write (audit rows), so a
    manager killed meanwhile dies with the record one phase short. Ready once a dry-run write
    of such a status is refused."""
    refusal = f"test policy: no migration record goes {phase}"

    async def refused() -> bool:
        replica = dict(await kube.get(INFERENCE_REPLICAS, ENGINE, namespace))
        status = dict(replica.get("status") or {})
        records = [dict(r) for r in status.get("migrations") or ()]
        if not records:
            return False
        records[0]["phase"] = phase
        replica["status"] = {**status, "migrations": records}
        path = INFERENCE_REPLICAS.path(namespace, ENGINE, "status")
        try:
            await kube.request("PUT", path, params={"dryRun": "All"}, body=replica)
        except ApiError as err:
            return refusal in err.message
        return False

    return admission_refuses(
        kube,
        namespace,
        name=f"omed-test-refuse-{phase.lower()}-{namespace}",
        rule={
            "apiGroups": ["ome.io"],
            "apiVersions": ["*"],
            "operations": ["UPDATE"],
            "resources": ["inferencereplicas/status"],
        },
        allowed="!has(object.status) || !has(object.status.migrations) || "
        f"!object.status.migrations.exists(m, m.phase == '{phase}')",
        message=refusal,
        refused=refused,
    )


SURGE_REFUSAL = "test policy: no pod of Instance 4"


def pods_of_4_refused(kube: KubeClient, namespace: str) -> Any:
    """Until the block ends, the API server refuses for good every pod of Instance 4 (an
    admission refusal, 422 Invalid: the same create can only fail again). Ready once a
    dry-run create of such a pod is refused."""

    async def refused() -> bool:
        probe = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "probe-4", "labels": {"ome.io/instance-index": "4"}},
            "spec": {"containers": [{"name": "c", "image": "probe"}]},
        }
        try:
            await kube.request("POST", PODS.path(namespace), params={"dryRun": "All"}, body=probe)
        except ApiError as err:
            return err.status == 422 and SURGE_REFUSAL in err.message
        return False

    return admission_refuses(
        kube,
        namespace,
        name=f"omed-test-refuse-pods-of-4-{namespace}",
        rule={
            "apiGroups": [""],
            "apiVersions": ["v1"],
            "operations": ["CREATE"],
            "resources": ["pods"],
        },
        allowed="!has(object.metadata.labels) || "
        "!('ome.io/instance-index' in object.metadata.labels) || "
        "object.metadata.labels['ome.io/instance-index'] != '4'",
        message=SURGE_REFUSAL,
        refused=refused,
    )


class World(support.ManagerWorld):
    def __init__(self, *, kube: KubeClient, namespace: str, managers: Any) -> None:
        super().__init__(kube=kube, namespace=namespace, managers=managers)
        self.sampler = Sampler(kube, namespace)

    async def replica(self) -> dict[str, Any]:
        try:
            return dict(await self.kube.get(INFERENCE_REPLICAS, ENGINE, self.namespace))
        except NotFound:
            return {}

    async def rows(self) -> dict[int, dict[str, Any]]:
        status = (await self.replica()).get("status") or {}
        return {row["index"]: row for row in decode_status(status, max_rows=100)}

    async def record(self) -> dict[str, Any] | None:
        status = (await self.replica()).get("status") or {}
        for record in status.get("migrations") or ():
            if record.get("requestUUID") == UUID:
                return dict(record)
        return None

    async def serving(self, indexes: list[int]) -> bool:
        """Exactly the Instances ``indexes``, each Ready with its pod a ready endpoint."""
        self.check_manager()
        rows = await self.rows()
        if sorted(rows) != indexes:
            return False
        if not all(r.get("phase") == "Ready" and not r.get("operation") for r in rows.values()):
            return False
        pods = await self.pods()
        if len(pods) != len(indexes) or any(p["metadata"].get("deletionTimestamp") for p in pods):
            return False
        return self.sampler.ready_now() == len(indexes)

    async def serve_four(self) -> dict[str, Any]:
        """Start the manager, serve four single-pod Instances of ``chat``'s engine, and return
        the pod of Instance 3, the one the tests move."""
        await self.start_manager("manager-a")
        body = support.inference_service(
            SERVICE, runtime="srt-engine", engine={"minReplicas": 4, "maxReplicas": 4}
        )
        await self.create_service(RUNTIME, body)
        await eventually(lambda: self.serving([0, 1, 2, 3]), timeout=120, what="4 ready endpoints")
        (source,) = [
            p for p in await self.pods() if p["metadata"]["labels"]["ome.io/instance-index"] == "3"
        ]
        found: dict[str, Any] = source
        return found

    async def send(self, uuid: str, *, instance: int, from_node: str, reason: str) -> None:
        """Merge the request into the InferenceService as upstream's CLI does."""
        body = upstream_request(instance=instance, from_node=from_node, reason=reason)
        patch = {"metadata": {"annotations": {f"ome.io/migration-request-v1-{uuid}": body}}}
        await self.kube.patch(
            INFERENCE_SERVICES, SERVICE, patch, self.namespace, content_type=MERGE_PATCH
        )

    async def events(self, reason: str) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = await self.kube.list_all(
            EVENTS, self.namespace, fieldSelector=f"reason={reason}"
        )
        return found


@pytest.fixture
async def world(
    kube: KubeClient, namespace: str, managers: Any, manager_config: Any
) -> AsyncIterator[World]:
    await manager_config(
        lifecycle={
            **support.lifecycle(scale_up_pod_batch_size=50),
            "instanceReadyTimeout": "10m",
            "audit": {"maxInFlightMigrations": 3, "maxMigrationsPerWindow": 10, "window": "1h"},
        }
    )
    world = World(kube=kube, namespace=namespace, managers=managers)
    async with world.running(world.sampler, nodes=3):
        yield world


async def test_instance_3_moves_off_its_node_without_a_dip(world: World) -> None:
    source = await world.serve_four()
    node = source["spec"]["nodeName"]

    world.sampler.arm()
    reason = f"{node} maintenance"
    request = upstream_request(instance=3, from_node=node, reason=reason)
    await world.kube.patch(
        INFERENCE_SERVICES,
        SERVICE,
        {"metadata": {"annotations": {KEY: request}}},
        world.namespace,
        content_type=MERGE_PATCH,
    )

    async def completed() -> bool:
        world.check_manager()
        record = await world.record()
        return record is not None and record.get("phase") in ("Completed", "Failed")

    await eventually(completed, timeout=180, what="the migration to end")
    record = await world.record()
    assert record is not None
    assert record["phase"] == "Completed", record
    assert record["message"] == "migrated to instance=4"
    assert (record["sourceInstance"], record["surgeInstance"]) == (3, 4)
    assert (record["trigger"], record["fromNode"], record["reason"]) == ("Manual", node, reason)
    assert "allocatedAt" in record and "completedAt" in record
    await eventually(lambda: world.serving([0, 1, 2, 4]), timeout=60, what="0, 1, 2 and 4")

    assert world.sampler.samples > 0
    assert world.sampler.low == 4, f"ready endpoints dipped to {world.sampler.low}"
    assert world.sampler.deleted_while_ready() == []
    (moved,) = [
        p for p in await world.pods() if p["metadata"]["labels"]["ome.io/instance-index"] == "4"
    ]
    assert moved["spec"]["nodeName"] != node
    required = moved["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]
    assert {"key": "kubernetes.io/hostname", "operator": "NotIn", "values": [node]} in (
        required["nodeSelectorTerms"][0]["matchExpressions"]
    )
    isvc = await world.kube.get(INFERENCE_SERVICES, SERVICE, world.namespace)
    assert KEY not in (isvc["metadata"].get("annotations") or {})

    (accepted,) = await world.events("MigrationRequestAccepted")
    assert accepted["type"] == "Normal"
    assert accepted["involvedObject"]["kind"] == "InferenceService"
    assert accepted["message"] == (
        f"OMENative component=engine instance=3 migration accepted (uuid={UUID}, "
        f"source-node={node}, surge-index=4)"
    )
    (done,) = await world.events("MigrationCompleted")
    revision = (await world.rows())[4]["runningRevision"]
    assert done["message"] == (
        f"OMENative migration uuid={UUID} complete: component=engine instance=3 -> instance=4 "
        f"(revision={revision})"
    )

    ledger = await world.kube.get(CONFIGMAPS, f"{SERVICE}-ome-migration-audit", world.namespace)
    (row,) = json.loads(ledger["data"]["history.json"])["entries"]
    assert row == {
        "requestUUID": UUID,
        "component": "engine",
        "sourceInstance": 3,
        "surgeInstance": 4,
        "phase": "Completed",
        "reason": reason,
        "fromNode": node,
        "revision": revision,
        "startedAt": "2026-09-28T10:12:04Z",
        "completedAt": row["completedAt"],
        "outcome": "migrated",
    }


GANG_RUNTIME = support.serving_runtime(
    "srt-gang",
    engineConfig={
        "leader": {"runner": {"name": "ome-container", "image": "ome/srt:1.0"}},
        "worker": {"size": 1, "runner": {"name": "ome-container", "image": "ome/srt:1.0"}},
    },
)


async def test_a_leader_and_its_workers_move_as_one_unit(world: World) -> None:
    """Instance 0, a leader and a worker, leaves the leader's node: Instance 1 comes up whole
    (leader and worker, both kept off that node) before Instance 0's pods go."""
    await world.start_manager("manager-a")
    body = support.inference_service(
        SERVICE, runtime="srt-gang", engine={"minReplicas": 1, "maxReplicas": 1}
    )
    await world.create_service(GANG_RUNTIME, body)

    async def settled(index: int) -> bool:
        world.check_manager()
        rows = await world.rows()
        if list(rows) != [index] or rows[index].get("phase") != "Ready":
            return False
        pods = [p for p in await world.pods() if not p["metadata"].get("deletionTimestamp")]
        return len(pods) == 2 and all(support.pod_ready(p) for p in pods)

    await eventually(lambda: settled(0), timeout=120, what="Instance 0 Ready")
    source = {p["metadata"]["name"]: p for p in await world.pods()}
    assert sorted(source) == [f"{ENGINE}-0-leader-0", f"{ENGINE}-0-worker-0"]
    node = source[f"{ENGINE}-0-leader-0"]["spec"]["nodeName"]
    request = upstream_request(instance=0, from_node=node, reason="gang move")
    await world.kube.patch(
        INFERENCE_SERVICES,
        SERVICE,
        {"metadata": {"annotations": {KEY: request}}},
        world.namespace,
        content_type=MERGE_PATCH,
    )
    source_gone_while_surge_unready: list[str] = []

    async def completed() -> bool:
        world.check_manager()
        pods = {p["metadata"]["name"]: p for p in await world.pods()}
        surge = [p for n, p in pods.items() if n.startswith(f"{ENGINE}-1-")]
        if any(n not in pods for n in source) and not all(support.pod_ready(p) for p in surge):
            source_gone_while_surge_unready.append(",".join(sorted(pods)))
        record = await world.record()
        return record is not None and record.get("phase") in ("Completed", "Failed")

    await eventually(completed, timeout=180, what="the gang's migration to end", interval=0.2)
    record = await world.record()
    assert record is not None
    assert (record["phase"], record["message"]) == ("Completed", "migrated to instance=1"), record
    assert source_gone_while_surge_unready == []
    await eventually(lambda: settled(1), timeout=60, what="Instance 1 Ready alone")
    moved = {p["metadata"]["name"]: p for p in await world.pods()}
    assert sorted(moved) == [f"{ENGINE}-1-leader-0", f"{ENGINE}-1-worker-0"]
    avoid = {"key": "kubernetes.io/hostname", "operator": "NotIn", "values": [node]}
    for pod in moved.values():
        assert pod["spec"]["nodeName"] != node
        terms = pod["spec"]["affinity"]["nodeAffinity"][
            "requiredDuringSchedulingIgnoredDuringExecution"
        ]["nodeSelectorTerms"]
        assert all(avoid in term["matchExpressions"] for term in terms)


async def test_a_surge_the_api_server_refuses_for_good_fails_the_move_and_keeps_the_source(
    world: World,
) -> None:
    """An admission policy refuses every pod of Instance 4 (422 Invalid, as a validating
    webhook or policy does for good): the surge's create is refused, so the record fails at
    once with the API server's words, a Warning MigrationRequestRejected says so, the audit
    row is Failed with that message as its outcome, Instance 3 serves on as it was, no pod of
    Instance 4 exists, and the ready endpoints never drop below four."""
    source = await world.serve_four()
    node = source["spec"]["nodeName"]
    world.sampler.arm()
    async with pods_of_4_refused(world.kube, world.namespace):
        await world.send(UUID, instance=3, from_node=node, reason="refused surge")

        async def failed() -> bool:
            world.check_manager()
            record = await world.record()
            return record is not None and record.get("phase") == "Failed"

        await eventually(failed, timeout=60, what="the record Failed")
        await eventually(lambda: world.serving([0, 1, 2, 3]), timeout=60, what="0 to 3 again")
    record = await world.record()
    assert record is not None and record["surgeInstance"] == 4
    prefix = f"surge pod {ENGINE}-4-default-0 rejected by the apiserver (InvalidPodSpec): "
    message = record["message"]
    assert message.startswith(prefix) and SURGE_REFUSAL in message, message
    (event,) = await world.events("MigrationRequestRejected")
    assert (event["type"], event["message"]) == (
        "Warning",
        f"OMENative migration uuid={UUID} rejected: {message}",
    )
    assert not await world.events("MigrationSurgeCreateBlocked")
    ledger = await world.kube.get(CONFIGMAPS, f"{SERVICE}-ome-migration-audit", world.namespace)
    (row,) = json.loads(ledger["data"]["history.json"])["entries"]
    assert (row["phase"], row["outcome"]) == ("Failed", message)
    rows = await world.rows()
    assert rows[3]["phase"] == "Ready" and not rows[3].get("operation")
    pods = await world.pods()
    assert source["metadata"]["uid"] in {p["metadata"]["uid"] for p in pods}
    assert not [p for p in pods if p["metadata"]["labels"]["ome.io/instance-index"] == "4"]
    assert world.sampler.low == 4, f"ready endpoints dipped to {world.sampler.low}"


async def test_a_create_stuck_on_one_node_is_relocated_with_a_record(
    world: World, manager_config: Any
) -> None:
    """Instance 1's first incarnation crash-loops wherever it lands (as on a node whose GPU is
    broken); past the stuck-pod grace its Create is relocated: a born-terminal Relocated record,
    a Normal AutoMigrationTriggered, and its next incarnation kept off that node, which comes
    up, so the record is confirmed."""
    await manager_config(
        lifecycle={
            **support.lifecycle(scale_up_pod_batch_size=50),
            "instanceReadyTimeout": "10m",
            "stuckPodGracePeriod": "3s",
            "autoMigrate": {"maxAttempts": 3},
            "audit": {"maxInFlightMigrations": 3, "maxMigrationsPerWindow": 10, "window": "1h"},
        }
    )
    await world.start_manager("manager-a")
    assert world.simulator is not None
    world.simulator.inject(
        world.namespace,
        {"ome.io/instance-index": "1", "ome.io/instance-incarnation": "1"},
        "CrashLoopBackOff",
        crash_after=0.05,  # exits before it could be ready: it never serves
    )
    body = support.inference_service(
        SERVICE, runtime="srt-engine", engine={"minReplicas": 2, "maxReplicas": 2}
    )
    await world.create_service(RUNTIME, body)
    suspect: list[str] = []

    async def relocated() -> bool:
        world.check_manager()
        if not suspect:
            pods = [
                p for p in await world.pods() if p["metadata"]["name"] == f"{ENGINE}-1-default-0"
            ]
            if pods and pods[0]["spec"].get("nodeName"):
                suspect.append(pods[0]["spec"]["nodeName"])
        status = (await world.replica()).get("status") or {}
        records = [r for r in status.get("migrations") or () if r.get("phase") == "Relocated"]
        return bool(records) and bool(records[0].get("succeeded"))

    await eventually(relocated, timeout=120, what="a confirmed relocation", interval=0.2)
    status = (await world.replica()).get("status") or {}
    (record,) = [r for r in status.get("migrations") or () if r.get("phase") == "Relocated"]
    node = record["fromNode"]
    assert suspect == [node]
    assert (record["trigger"], record["attempt"], record["reason"]) == ("Auto", 1, "AutoRecover")
    assert record["message"] == f"relocation directive recorded; rebuild steered off node {node}"
    rows = await world.rows()
    assert rows[1]["phase"] == "Ready" and rows[1]["incarnation"] == 2
    (pod,) = [p for p in await world.pods() if p["metadata"]["name"] == f"{ENGINE}-1-default-0"]
    assert pod["spec"]["nodeName"] != node
    (event,) = await world.events("AutoMigrationTriggered")
    assert event["type"] == "Normal"
    assert event["message"] == (
        f"OMENative component=engine instance=1 relocation directive recorded: attempt 1/3, "
        f"rebuild steered off node {node} (uuid={record['requestUUID']})"
    )
    ledger = await world.kube.get(CONFIGMAPS, f"{SERVICE}-ome-migration-audit", world.namespace)
    (row,) = json.loads(ledger["data"]["history.json"])["entries"]
    assert (row["reason"], row["phase"], row["outcome"], row["fromNode"]) == (
        "AutoRecover",
        "Completed",
        "relocate-recreate",
        node,
    )


async def test_a_single_pod_update_stuck_on_one_node_is_relocated_with_a_record(
    world: World, manager_config: Any
) -> None:
    """A RecreatePod update of two single-pod Instances: Instance 1 goes first and serves the
    new revision; Instance 0's new incarnation crash-loops wherever it lands. Past the
    stuck-pod grace its Update is relocated (the revision has served, so the node is the
    suspect): a Relocated record, AutoMigrationTriggered, an AutoRecover audit row with the
    new revision, no retry block charged, and its next incarnation off that node comes up on
    the new revision, which confirms the record."""
    await manager_config(
        lifecycle={
            **support.lifecycle(scale_up_pod_batch_size=50),
            "instanceReadyTimeout": "10m",
            "stuckPodGracePeriod": "3s",
            "autoMigrate": {"maxAttempts": 3},
            "audit": {"maxInFlightMigrations": 3, "maxMigrationsPerWindow": 10, "window": "1h"},
        }
    )
    await world.start_manager("manager-a")
    body = support.inference_service(
        SERVICE,
        runtime="srt-engine",
        engine={
            "minReplicas": 2,
            "maxReplicas": 2,
            "lifecycle": {"updateStrategy": {"type": "RecreatePod"}},
        },
    )
    await world.create_service(RUNTIME, body)
    await eventually(lambda: world.serving([0, 1]), timeout=120, what="2 ready endpoints")
    before = (await world.replica())["status"]["currentRevision"]
    assert world.simulator is not None
    world.simulator.inject(
        world.namespace,
        {"ome.io/instance-index": "0", "ome.io/instance-incarnation": "2"},
        "CrashLoopBackOff",
        crash_after=0.05,
    )
    suspect: list[str] = []
    await world.patch_service(SERVICE, {"spec": {"engine": {"runner": {"image": "ome/srt:2.0"}}}})

    async def relocated_and_updated() -> bool:
        world.check_manager()
        for pod in await world.pods():
            labels = pod["metadata"]["labels"]
            second = (labels["ome.io/instance-index"], labels["ome.io/instance-incarnation"])
            if second == ("0", "2") and pod["spec"].get("nodeName") and not suspect:
                suspect.append(pod["spec"]["nodeName"])
        status = (await world.replica()).get("status") or {}
        records = [r for r in status.get("migrations") or () if r.get("phase") == "Relocated"]
        if not (records and records[0].get("succeeded")):
            return False
        rows = await world.rows()
        new = status.get("updateRevision")
        return (
            sorted(rows) == [0, 1]
            and new != before
            and all(
                r.get("runningRevision") == new and not r.get("operation") for r in rows.values()
            )
        )

    await eventually(
        relocated_and_updated, timeout=180, what="a relocated, completed update", interval=0.2
    )
    status = (await world.replica())["status"]
    new = status["updateRevision"]
    assert not status.get("retryBlocks")  # the node was the suspect, not the revision
    (record,) = [r for r in status["migrations"] if r.get("phase") == "Relocated"]
    node = record["fromNode"]
    assert suspect == [node]
    assert (record["trigger"], record["sourceInstance"], record["attempt"]) == ("Auto", 0, 1)
    assert record["message"] == f"relocation directive recorded; rebuild steered off node {node}"
    rows = await world.rows()
    assert rows[0]["incarnation"] == 3 and rows[0]["phase"] == "Ready"
    (pod,) = [p for p in await world.pods() if p["metadata"]["name"] == f"{ENGINE}-0-default-0"]
    assert pod["spec"]["nodeName"] != node
    (event,) = await world.events("AutoMigrationTriggered")
    assert event["message"] == (
        f"OMENative component=engine instance=0 relocation directive recorded: attempt 1/3, "
        f"rebuild steered off node {node} (uuid={record['requestUUID']})"
    )
    ledger = await world.kube.get(CONFIGMAPS, f"{SERVICE}-ome-migration-audit", world.namespace)
    (row,) = json.loads(ledger["data"]["history.json"])["entries"]
    assert (row["reason"], row["outcome"], row["fromNode"], row["revision"]) == (
        "AutoRecover",
        "relocate-recreate",
        node,
        new,
    )


async def test_a_manager_killed_in_each_phase_moves_the_instance_once(
    world: World, manager_config: Any
) -> None:
    """kill -9 of the leader while the record is Accepted (held: no caps yet), SurgePending
    (the surge's pod not ready yet), SurgeReady, Draining (the source's kubelet not confirming
    its delete) and in the completion tail (the source's pod gone, the audit row Completed,
    the record still Draining); a new manager each time. SurgeReady and the tail last one pass
    each, so the API server holds the record there (:func:`status_refuses`: the status write
    that would move it on is refused) until the manager is killed. The move completes once
    (one MigrationCompleted, one Completed audit row), with one surge pod ever, the source's
    pod deleted once, and the ready endpoints never below four."""
    base = {**support.lifecycle(scale_up_pod_batch_size=50), "instanceReadyTimeout": "10m"}
    caps = {"maxInFlightMigrations": 3, "maxMigrationsPerWindow": 10, "window": "1h"}
    await manager_config(lifecycle=base)
    source = await world.serve_four()
    node = source["spec"]["nodeName"]
    sim = world.simulator
    assert sim is not None
    surge_hold = sim.inject(world.namespace, {"ome.io/instance-index": "4"}, "NeverReady")
    world.sampler.arm()
    surges: set[str] = set()

    async def at(phase: str, *, message: str | None = None) -> bool:
        world.check_manager()
        for pod in await world.pods():
            if pod["metadata"]["labels"]["ome.io/instance-index"] == "4":
                surges.add(pod["metadata"]["uid"])
        record = await world.record()
        if record is None or record.get("phase") != phase:
            return False
        return message is None or record.get("message") == message

    await world.kube.patch(
        INFERENCE_SERVICES,
        SERVICE,
        {
            "metadata": {
                "annotations": {
                    KEY: upstream_request(instance=3, from_node=node, reason="kill test")
                }
            }
        },
        world.namespace,
        content_type=MERGE_PATCH,
    )
    held = "waiting for migration capacity policy (no lifecycle.audit configured)"
    await eventually(lambda: at("Accepted", message=held), timeout=60, what="Accepted (held)")
    world.kill_manager()
    await manager_config(lifecycle={**base, "audit": caps})
    await world.start_manager("manager-b")
    await eventually(lambda: at("SurgePending"), timeout=60, what="SurgePending")

    async def surge_seen() -> bool:
        return await at("SurgePending") and bool(surges)  # at() records the surge's pods

    await eventually(surge_seen, timeout=30, what="the surge's pod")
    world.kill_manager()
    sim.ignore_deletions(node)
    async with status_refuses(world.kube, world.namespace, "Draining"):
        sim.clear_injection(surge_hold)
        await world.start_manager("manager-c")
        ready = "surge in rotation and available"
        await eventually(lambda: at("SurgeReady", message=ready), timeout=60, what="SurgeReady")
        world.kill_manager()
    assert (
        not [  # the refused pass touched no source pod
            p
            for p in await world.pods()
            if p["metadata"]["uid"] == source["metadata"]["uid"]
            and p["metadata"].get("deletionTimestamp")
        ]
    )
    await world.start_manager("manager-c2")

    async def source_deleting() -> bool:
        if not await at("Draining"):
            return False
        pods = [p for p in await world.pods() if p["metadata"]["uid"] == source["metadata"]["uid"]]
        return bool(pods and pods[0]["metadata"].get("deletionTimestamp"))

    await eventually(source_deleting, timeout=60, what="Draining, the source deleted")
    world.kill_manager()
    audit = f"{SERVICE}-ome-migration-audit"

    async def ledger_rows() -> list[dict[str, Any]]:
        ledger = await world.kube.get(CONFIGMAPS, audit, world.namespace)
        entries = json.loads(ledger["data"]["history.json"])["entries"]
        return [e for e in entries if e["requestUUID"] == UUID]

    async with status_refuses(world.kube, world.namespace, "Completed"):
        sim.ignore_deletions(node, False)
        await world.start_manager("manager-d")

        async def in_the_tail() -> bool:
            if not await at("Draining"):
                return False
            if any(p["metadata"]["uid"] == source["metadata"]["uid"] for p in await world.pods()):
                return False
            return [r["phase"] for r in await ledger_rows()] == ["Completed"]

        await eventually(in_the_tail, timeout=60, what="the source gone, the audit row Completed")
        world.kill_manager()
    await world.start_manager("manager-e")
    await eventually(lambda: at("Completed"), timeout=120, what="Completed")
    await eventually(lambda: world.serving([0, 1, 2, 4]), timeout=60, what="0, 1, 2 and 4")
    record = await world.record()
    assert record is not None and record["message"] == "migrated to instance=4"
    assert len(surges) == 1, surges  # one surge pod ever, never a second
    assert world.sampler.low == 4, f"ready endpoints dipped to {world.sampler.low}"
    assert world.sampler.deleted_while_ready() == []
    assert [p["metadata"]["name"] for p in await world.pods()].count(f"{ENGINE}-4-default-0") == 1
    assert [(r["phase"], r["outcome"]) for r in await ledger_rows()] == [("Completed", "migrated")]

    async def completed_event() -> bool:  # events go out after the status write that moves on
        return bool(await world.events("MigrationCompleted"))

    await eventually(completed_event, timeout=30, what="the MigrationCompleted event")
    (completed,) = await world.events("MigrationCompleted")
    assert completed.get("count", 1) == 1 and not completed.get("series")
