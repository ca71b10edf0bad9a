"""``kubectl ome migration drain-node`` through the real kubectl, under the chart's manager:
a node holding four Instances of two services, caps of two in flight.

The chart's manager (its ServiceAccount, RBAC and ConfigMap, ``maxInFlightMigrations: 2``)
serves ``chat`` and ``web``, each an engine of two single-pod Instances whose runtime declares
a port (so each has a traffic Service and EndpointSlices, kept by the real
kube-controller-manager). The other two nodes are cordoned while the four pods are scheduled,
so all four land on one node; then that node is cordoned instead, as an operator does before
maintenance.

1. ``--dry-run``: four Instances planned, nothing sent; with one service paused, its two
   refused (exit 3); without ``--yes`` and a terminal, nothing sent (exit 1).
2. A run while the manager only stands by (the test holds the leader Lease, so nothing takes
   a request) and ``--timeout 0s``: it sends what the caps allow, one request per service,
   and stops following (exit 1, TimedOut); the requests stay on the services. A second such
   run follows those two by their IDs, sends nothing more, and Ctrl-C ends it with the
   report (exit 1, Interrupted).
3. The manager leads; the same command again picks up the two requests by their IDs (rows
   ``resumed``), sends the other two as the first end, and follows all four to Completed
   (exit 0). Sampled all along: never more than two migrations in flight, never two of one
   service, and the ready endpoints of each service never below two.
4. The node is empty of OMENative pods; a third run lists nothing and sends nothing (exit 0).
5. A service whose engine's mode is Never, scheduled onto a node: listed and skipped.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import signal
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import _support as support
import pytest
from _support import eventually
from test_kubectl_ome_migration import env
from test_kubectl_ome_plan import release_lease, standby
from test_routing_endpoints import RUNTIME, ready_uids

from omed.api.constants import TERMINAL_MIGRATION_PHASES
from omed.cli import drain_node as drain
from omed.cli import kubectl_ome_drain as drain_io
from omed.cli import migration_start as core
from omed.informers import Handlers, InformerFactory
from omed.informers.endpoints import LABEL_SERVICE_NAME
from omed.informers.transform import Obj, identity
from omed.kube.client import KubeClient
from omed.kube.errors import NotFound
from omed.kube.resources import ENDPOINT_SLICES, INFERENCE_REPLICAS, INFERENCE_SERVICES, NODES
from omed.statuscodec import decode_status

pytestmark = [pytest.mark.integration, pytest.mark.slow]

SERVICES = ("chat", "web")
PREFIX = "ome.io/migration-request-v1-"


class Capacity:
    """The ready endpoints of each service's traffic Service, at every slice version (the
    fewest since :meth:`arm`)."""

    def __init__(self, kube: KubeClient, namespace: str) -> None:
        self.factory = InformerFactory(kube)
        self.slices = self.factory.informer(
            ENDPOINT_SLICES, namespace=namespace, transform=identity
        )
        self.slices.add_event_handler(
            Handlers(
                on_add=self._sample,
                on_update=lambda _o, n: self._sample(n),
                on_delete=self._sample,
            )
        )
        self.low: dict[str, int] = {}
        self.samples = 0
        self.armed = False

    def ready(self) -> dict[str, int]:
        found: dict[str, set[str]] = {f"{s}-engine": set() for s in SERVICES}
        for slice_ in self.slices.store.list():
            service = ((slice_.get("metadata") or {}).get("labels") or {}).get(LABEL_SERVICE_NAME)
            if service in found:
                found[service] |= ready_uids(slice_)
        return {name: len(uids) for name, uids in found.items()}

    def arm(self) -> None:
        self.low, self.samples, self.armed = self.ready(), 0, True

    def _sample(self, _: Obj) -> None:
        if self.armed:
            self.samples += 1
            for name, count in self.ready().items():
                self.low[name] = min(self.low.get(name, count), count)


class World(support.ManagerWorld):
    def __init__(self, *, kube: KubeClient, namespace: str, managers: Any) -> None:
        super().__init__(kube=kube, namespace=namespace, managers=managers)
        self.capacity = Capacity(kube, namespace)

    async def replica(self, service: str) -> dict[str, Any]:
        try:
            return dict(
                await self.kube.get(INFERENCE_REPLICAS, f"{service}-engine", self.namespace)
            )
        except NotFound:
            return {}

    async def in_flight(self) -> dict[str, int]:
        """Per service: the migrations in flight, requests waiting on it and records not
        ended, each request ID once."""
        counts = {}
        for service in SERVICES:
            isvc = await self.kube.get(INFERENCE_SERVICES, service, self.namespace)
            annotations = isvc["metadata"].get("annotations") or {}
            waiting = {k[len(PREFIX) :] for k in annotations if k.startswith(PREFIX)}
            records = ((await self.replica(service)).get("status") or {}).get("migrations") or []
            active = {
                r["requestUUID"] for r in records if r.get("phase") not in TERMINAL_MIGRATION_PHASES
            }
            counts[service] = len(waiting | active)
        return counts

    async def requests(self) -> dict[str, list[str]]:
        found = {}
        for service in SERVICES:
            isvc = await self.kube.get(INFERENCE_SERVICES, service, self.namespace)
            annotations = isvc["metadata"].get("annotations") or {}
            found[service] = sorted(k[len(PREFIX) :] for k in annotations if k.startswith(PREFIX))
        return found

    async def serving(self, service: str, count: int) -> bool:
        self.check_manager()
        status = (await self.replica(service)).get("status") or {}
        rows = decode_status(status, max_rows=100)
        if len(rows) != count or not all(
            r.get("phase") == "Ready" and not r.get("operation") for r in rows
        ):
            return False
        return self.capacity.ready()[f"{service}-engine"] == count

    async def omenative_pods_on(self, node: str) -> list[str]:
        return sorted(
            p["metadata"]["name"]
            for p in await self.pods()
            if p["spec"].get("nodeName") == node
            and (p["metadata"].get("labels") or {}).get("ome.io/managed-by") == "OMENative"
        )


@pytest.fixture
async def world(
    kube: KubeClient, namespace: str, managers: Any, manager_config: Any
) -> AsyncIterator[World]:
    await manager_config(
        lifecycle={
            **support.lifecycle(scale_up_pod_batch_size=50),
            "instanceReadyTimeout": "10m",
            "audit": {"maxInFlightMigrations": 2, "maxMigrationsPerWindow": 10, "window": "1h"},
        }
    )
    world = World(kube=kube, namespace=namespace, managers=managers)
    world.capacity.factory.start()
    try:
        assert await world.capacity.factory.wait_for_cache_sync(timeout=30)
        async with world.running(nodes=3):
            yield world
    finally:
        await world.capacity.factory.stop()


async def cordon(world: World, node: str, *, on: bool) -> None:
    await world.kube.patch(NODES, node, {"spec": {"unschedulable": True if on else None}})


async def kubectl(
    control_plane: Any,
    kubeconfig: str,
    *args: str,
    timeout: float = 400,
    after_preview: Callable[[asyncio.subprocess.Process], Awaitable[None]] | None = None,
) -> tuple[int, str, str]:
    """The real kubectl with the virtualenv's ``kubectl-ome`` on its PATH (no terminal);
    ``after_preview`` runs once the preview's last line is on stderr."""
    proc = await asyncio.create_subprocess_exec(
        str(control_plane.binaries.kubectl),
        *args,
        "--kubeconfig",
        kubeconfig,
        env=env(),
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    assert proc.stderr is not None
    err = b""
    if after_preview is not None:
        while core.WARN_CAS.encode() not in err:
            line = await asyncio.wait_for(proc.stderr.readline(), timeout=60)
            assert line, err.decode()
            err += line
        await after_preview(proc)
    out, rest = await asyncio.wait_for(proc.communicate(), timeout=timeout)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), (err + rest).decode()


def states(report: dict[str, Any]) -> dict[str, str]:
    return {
        f"{i['service']}/{i['component']}/{i['instance']}": i["state"] for i in report["instances"]
    }


async def test_a_node_of_four_instances_drains_two_at_a_time_without_a_dip(
    world: World, control_plane: Any, kubeconfig: str
) -> None:
    ns = world.namespace
    assert world.simulator is not None
    node, *others = sorted(world.simulator.node_names)
    for other in others:
        await cordon(world, other, on=True)
    await world.start_manager("manager-a")
    await world.create_service(
        RUNTIME,
        support.inference_service(
            "chat", runtime="srt-engine", engine={"minReplicas": 2, "maxReplicas": 2}
        ),
    )
    await world.kube.create(
        INFERENCE_SERVICES,
        support.inference_service(
            "web", runtime="srt-engine", engine={"minReplicas": 2, "maxReplicas": 2}
        ),
        ns,
    )
    for service in SERVICES:
        await eventually(
            functools.partial(world.serving, service, 2), timeout=120, what=f"{service} serving"
        )
    assert len(await world.omenative_pods_on(node)) == 4
    for other in others:
        await cordon(world, other, on=False)
    await cordon(world, node, on=True)
    base = [
        "ome", "migration", "drain-node", node, "-n", ns,
        "--ome-namespace", world.managers.namespace, "-o", "json",
    ]  # fmt: skip

    # 1. The dry run: four planned, nothing sent.
    code, out, err = await kubectl(control_plane, kubeconfig, *base, "--dry-run")
    assert code == 0, err
    report = json.loads(out)
    assert states(report) == {
        "chat/engine/0": "Planned",
        "chat/engine/1": "Planned",
        "web/engine/0": "Planned",
        "web/engine/1": "Planned",
    }
    assert report["caps"]["maxInFlightMigrations"] == 2
    assert drain.PREVIEW_TITLE in err
    assert await world.requests() == {"chat": [], "web": []}
    # A paused service: its Instances are refused (migration start's precondition), the
    # other's planned; exit 3.
    paused = {"metadata": {"annotations": {"ome.io/rollout-paused": "true"}}}
    await world.patch_service("chat", paused)
    code, out, err = await kubectl(control_plane, kubeconfig, *base, "--dry-run=client")
    assert code == 3, err
    assert (
        err.splitlines()[-1] == f"error: node {node} not drained: 2 Refused (the report says why)"
    )
    refused = json.loads(out)
    assert states(refused) == {
        "chat/engine/0": "Refused",
        "chat/engine/1": "Refused",
        "web/engine/0": "Planned",
        "web/engine/1": "Planned",
    }
    assert refused["instances"][0]["detail"] == "the service is paused"
    await world.patch_service(
        "chat", {"metadata": {"annotations": {"ome.io/rollout-paused": None}}}
    )
    # Without a terminal and without --yes: refused, nothing sent.
    code, out, err = await kubectl(control_plane, kubeconfig, *base)
    assert (code, out, err.splitlines()[-1]) == (
        1,
        "",
        "error: action not confirmed; noninteractive input requires --yes",
    )

    # 2. Nothing takes the requests (the Lease is the test's); the run stops at once.
    await standby(world, "manager-b")
    code, out, err = await kubectl(control_plane, kubeconfig, *base, "--yes", "--timeout", "0s")
    assert code == 1, err
    first = json.loads(out)
    assert set(states(first).values()) == {"TimedOut"}
    sent = {i["service"]: i["requestID"] for i in first["instances"] if i["instance"] == 0}
    assert await world.requests() == {"chat": [sent["chat"]], "web": [sent["web"]]}
    assert first["peakInFlight"] == 2
    isvc = await world.kube.get(INFERENCE_SERVICES, "chat", ns)
    body = json.loads(isvc["metadata"]["annotations"][PREFIX + sent["chat"]])
    assert list(body) == [  # migration start's body: upstream's fields, in Go struct order
        "schemaVersion",
        "component",
        "instance",
        "from_node",
        "reason",
        "requested_at",
        "requested_by",
    ]
    assert (body["component"], body["instance"], body["from_node"]) == ("engine", 0, node)
    assert (body["reason"], body["requested_by"]) == (f"drain-node {node}", "kubectl-ome")

    # Again, still nothing taking them: both followed by their IDs, nothing more sent (one per
    # component); Ctrl-C ends it with the report.
    async def interrupt(proc: asyncio.subprocess.Process) -> None:
        await asyncio.sleep(3 * drain_io.POLL_SECONDS)
        proc.send_signal(signal.SIGINT)

    code, out, err = await kubectl(
        control_plane, kubeconfig, *base, "--yes", after_preview=interrupt
    )
    assert code == 1, err
    assert err.splitlines()[-1] == (
        f"error: node {node} not drained: 4 Interrupted (the report says why)"
    )
    interrupted = json.loads(out)
    assert set(states(interrupted).values()) == {"Interrupted"}
    assert {i["service"]: i["requestID"] for i in interrupted["instances"] if i["resumed"]} == sent
    assert await world.requests() == {"chat": [sent["chat"]], "web": [sent["web"]]}

    # 3. The manager leads; the same command follows what it sent and sends the rest.
    world.capacity.arm()
    peak: dict[str, int] = {}
    totals: list[int] = []

    async def sample() -> None:
        while True:
            counts = await world.in_flight()
            totals.append(sum(counts.values()))
            for service, count in counts.items():
                peak[service] = max(peak.get(service, 0), count)
            await asyncio.sleep(0.3)

    sampler = asyncio.create_task(sample())
    try:
        code, out, err = await kubectl(
            control_plane,
            kubeconfig,
            *base,
            "--yes",
            "--timeout",
            "5m",
            after_preview=lambda _: release_lease(world),
        )
    finally:
        sampler.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await sampler
    assert code == 0, err
    second = json.loads(out)
    assert set(states(second).values()) == {"Completed"}, out
    by_key = {(i["service"], i["instance"]): i for i in second["instances"]}
    for service in SERVICES:
        assert by_key[(service, 0)]["resumed"] is True
        assert by_key[(service, 0)]["requestID"] == sent[service]
        assert by_key[(service, 1)]["resumed"] is False
    assert second["peakInFlight"] <= 2
    assert totals and max(totals) == 2, totals  # two at once, never three
    assert peak == {"chat": 1, "web": 1}
    for service in SERVICES:
        status = (await world.replica(service)).get("status") or {}
        records = status.get("migrations") or []
        assert sorted(r["phase"] for r in records) == ["Completed", "Completed"]
        assert all(r["fromNode"] == node for r in records)
    assert world.capacity.samples > 0
    assert world.capacity.low == {"chat-engine": 2, "web-engine": 2}, world.capacity.low

    # 4. The node is empty; a second run is a no-op.
    await eventually(lambda: _empty(world, node), timeout=60, what=f"no OMENative pod on {node}")
    code, out, err = await kubectl(control_plane, kubeconfig, *base, "--yes")
    assert code == 0, err
    again = json.loads(out)
    assert (again["instances"], again["exitCode"]) == ([], 0)
    assert await world.requests() == {"chat": [], "web": []}
    for service in SERVICES:
        records = ((await world.replica(service)).get("status") or {}).get("migrations") or []
        assert len(records) == 2
    code, out, _ = await kubectl(control_plane, kubeconfig, *base[:-2])
    assert (code, out) == (0, f"No OMENative Instances on node {node}.\n")

    # 5. Mode Never: listed, skipped, with the reason.
    await cordon(world, node, on=False)
    pinned = {
        "minReplicas": 1,
        "maxReplicas": 1,
        "lifecycle": {"migrationPolicy": {"mode": "Never"}},
    }
    await world.kube.create(
        INFERENCE_SERVICES,
        support.inference_service("pin", runtime="srt-engine", engine=pinned),
        ns,
    )

    async def pin_placed() -> str | None:
        for pod in await world.pods():
            labels = pod["metadata"].get("labels") or {}
            if labels.get("ome.io/inferenceservice") == "pin" and pod["spec"].get("nodeName"):
                return str(pod["spec"]["nodeName"])
        return None

    await eventually(pin_placed, timeout=60, what="pin's pod scheduled")
    pin_node = await pin_placed()
    assert pin_node is not None
    await eventually(lambda: _pin_ready(world), timeout=60, what="pin Ready")
    argv = [*base, "--yes"]
    argv[3] = pin_node
    code, out, err = await kubectl(control_plane, kubeconfig, *argv, "--dry-run=client")
    assert code == 0, err
    listed = {f"{i['service']}/{i['instance']}": i for i in json.loads(out)["instances"]}
    assert listed["pin/0"]["state"] == "Skipped"
    assert listed["pin/0"]["detail"] == "migrations disabled by MigrationPolicy Mode=Never"
    assert listed["pin/0"]["requestID"] is None


async def _empty(world: World, node: str) -> bool:
    return await world.omenative_pods_on(node) == []


async def _pin_ready(world: World) -> bool:
    replica = await world.replica("pin")
    rows = decode_status(replica.get("status") or {}, max_rows=10)
    return [r.get("phase") for r in rows] == ["Ready"]
