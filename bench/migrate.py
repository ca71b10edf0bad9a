"""Controller overhead of a migration of single-pod Instances, through the manager; print JSON.

    .venv/bin/python bench/migrate.py                  # 20 migrations
    .venv/bin/python bench/migrate.py --migrations 5   # a quick run

A fresh local control plane, omed installed with the real ``helm`` as an operator installs it
(the same manager, chart values and node simulator process as ``bench/converge.py``: one
replica of the chart's Deployment under the chart's ServiceAccount, ``--leader-elect=false``
appended so no Lease renewal is in the counts; the chart's ``requeue`` of 5s/3s and its caps,
the rate cap raised to :data:`RATE_CAP` so twenty moves fit one window). One InferenceService,
an engine of four single-pod, one-GPU Instances whose runtime declares a port (so the traffic
Service ``bench-engine`` and its EndpointSlices exist), on six simulated nodes.

Each migration, one after the other: the lowest Ready Instance is asked to leave its node, by
the annotation upstream's ``kubectl ome migration start`` writes (a merge patch of the
InferenceService). Watches (pods, the InferenceReplica) time-stamp, on the bench's monotonic
clock:

* ``requested``: the patch's answer (the request is stored);
* the surge pod's create, its binding (``spec.nodeName``), ContainersReady, Ready;
* the source pod's deletionTimestamp and its DELETED event;
* ``completed``: the record's phase Completed.

``kubelet`` is the simulated kubelet's share: binding to ContainersReady of the surge, plus
deletionTimestamp to gone of the source. ``overhead = (completed - requested) - kubelet``:
the controller's own time (and the scheduler's binding and the EndpointSlice controller's
slice updates, which a controller can't skip). Goal: median at most 1 s.

Writes per migration: the manager's ``rest_client_requests_total`` (POST, PUT, PATCH, DELETE)
from before the request until it has written nothing for :data:`QUIET` seconds after
Completed, the Event recorder's writes (one per Event: MigrationRequestAccepted,
MigrationCompleted) counted apart, against :func:`min_writes`.
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import json
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from converge import (
    NAMESPACE,
    NODE_PREFIX,
    QPS,
    WORKERS,
    Manager,
    admitted,
    apiserver_metrics,
    chart_values,
    event_writes,
    run_and_print,
    server_writes,
    start_simulator,
    stop_process,
    until,
    writes_of,
)

from omed.events import DEFAULT_COMPONENT
from omed.informers import Handlers, InformerFactory
from omed.informers.transform import Obj, identity
from omed.kube.client import MERGE_PATCH, KubeClient, load_config
from omed.kube.resources import (
    EVENTS,
    INFERENCE_REPLICAS,
    INFERENCE_SERVICES,
    NAMESPACES,
    NODES,
    PODS,
    SERVING_RUNTIMES,
)
from omed.statuscodec import decode_status
from omed_devcluster.controlplane import ControlPlane
from omed_devcluster.install import OmeInstall

SERVICE = "bench"
ENGINE = f"{SERVICE}-engine"
INSTANCES = 4
NODE_COUNT = 6
RATE_CAP = 1000
QUIET = 2.0
"""Seconds without a manager write that end a migration's write count."""

RUNTIME = {
    "apiVersion": "ome.io/v1beta1",
    "kind": "ServingRuntime",
    "metadata": {"name": "srt-bench"},
    "spec": {
        "supportedModelFormats": [{"name": "safetensors"}],
        "engineConfig": {
            "runner": {
                "name": "ome-container",
                "image": "ome/srt:1.0",
                "ports": [{"name": "http", "containerPort": 8080}],
                "resources": {"limits": {"nvidia.com/gpu": "1"}},
            }
        },
    },
}


def values() -> dict[str, Any]:
    """converge's chart values, the rate cap raised and a ready timeout set."""
    out = copy.deepcopy(chart_values(WORKERS))
    lifecycle = out["ome"]["controller"]["lifecycle"]
    lifecycle["instanceReadyTimeout"] = "10m"
    lifecycle["audit"] = {
        "maxInFlightMigrations": 3,
        "maxMigrationsPerWindow": RATE_CAP,
        "window": "1h",
    }
    return out


def min_writes() -> dict[str, int]:
    """The fewest controller writes one single-pod migration needs (docs/migrations.md,
    "Writes per migration"): the InferenceReplica's status once per phase (Accepted, the
    phase every request is first seen in; SurgePending, with the record and both rows'
    operations before the surge pod exists; SurgeReady, the surge serving before the source
    is touched; Draining, before the source's gate goes False; Completed, as the source's row
    goes); the surge pod's create and its gate True; the source's gate False and its delete;
    the InferenceService patch that removes the consumed request; the audit ConfigMap's
    Started row before anything acts, the same row with the surge's index at allocation (as
    upstream's ledger names the surge while the move is in flight) and the ended row. Events
    (MigrationRequestAccepted, InstanceReady, MigrationCompleted) are counted apart."""
    return {"status": 5, "pods": 4, "inferenceservice": 1, "audit": 3}


def request_body(instance: int, node: str) -> str:
    return json.dumps(
        {
            "schemaVersion": "v1",
            "component": "engine",
            "instance": instance,
            "from_node": node,
            "reason": "bench",
            "requested_at": "2026-09-28T10:12:04Z",
            "requested_by": "kubectl-ome",
        },
        separators=(",", ":"),
    )


def _condition(pod: Obj, kind: str) -> bool:
    return any(
        c.get("type") == kind and c.get("status") == "True"
        for c in (pod.get("status") or {}).get("conditions") or ()
    )


@dataclass
class Watch:
    """Monotonic times of what the watches showed, per pod uid and per migration."""

    pods: dict[str, dict[str, float]] = field(default_factory=dict)
    index: dict[str, int] = field(default_factory=dict)
    completed: dict[str, float] = field(default_factory=dict)
    records: dict[str, dict[str, Any]] = field(default_factory=dict)
    rows: dict[int, dict[str, Any]] = field(default_factory=dict)

    def pod(self, pod: Obj, *, gone: bool = False) -> None:
        now = time.monotonic()
        meta = pod["metadata"]
        seen = self.pods.setdefault(meta["uid"], {"created": now})
        self.index[meta["uid"]] = int(meta["labels"].get("ome.io/instance-index", -1))
        if (pod.get("spec") or {}).get("nodeName"):
            seen.setdefault("bound", now)
        if _condition(pod, "ContainersReady"):
            seen.setdefault("containers_ready", now)
        if _condition(pod, "Ready"):
            seen.setdefault("ready", now)
        if meta.get("deletionTimestamp"):
            seen.setdefault("deleting", now)
        if gone:
            seen.setdefault("gone", now)

    def replica(self, obj: Obj) -> None:
        now = time.monotonic()
        status = obj.get("status") or {}
        for record in status.get("migrations") or ():
            uuid = record.get("requestUUID")
            self.records[uuid] = record
            if record.get("phase") == "Completed":
                self.completed.setdefault(uuid, now)
        try:
            self.rows = {row["index"]: row for row in decode_status(status, max_rows=100)}
        except Exception:  # a status the bench can't read just counts no rows
            self.rows = {}


async def quiet_writes(manager: Manager) -> int:
    """The manager's write count once it has stayed the same for :data:`QUIET` seconds."""
    last = writes_of(manager.metrics().by("rest_client_requests_total", "method"))
    since = time.monotonic()
    while time.monotonic() - since < QUIET:
        await asyncio.sleep(0.25)
        now = writes_of(manager.metrics().by("rest_client_requests_total", "method"))
        if now != last:
            last, since = now, time.monotonic()
    return last


async def event_reasons(client: KubeClient) -> dict[str, int]:
    """The manager's Event writes by reason (a POST per Event, a PATCH per repeat)."""
    counts: dict[str, int] = {}
    for event in await client.list_all(EVENTS, NAMESPACE):
        if (event.get("source") or {}).get("component") == DEFAULT_COMPONENT:
            reason = str(event.get("reason"))
            counts[reason] = counts.get(reason, 0) + int(event.get("count") or 1)
    return counts


async def one_migration(
    client: KubeClient, manager: Manager, watch: Watch, number: int, plane: ControlPlane
) -> dict[str, Any]:
    ready = sorted(
        i
        for i, row in watch.rows.items()
        if row.get("phase") == "Ready" and not row.get("operation")
    )
    source_index = ready[0]
    pods = await client.list_all(
        PODS, NAMESPACE, labelSelector=f"ome.io/instance-index={source_index}"
    )
    (source,) = [p for p in pods if not p["metadata"].get("deletionTimestamp")]
    node = source["spec"]["nodeName"]
    uuid = f"00000000-0000-4000-8000-{number:012d}"
    writes_before = await quiet_writes(manager)
    events_before = await event_writes(client)
    reasons_before = await event_reasons(client)
    server_before = await asyncio.to_thread(apiserver_metrics, plane)
    known = set(watch.pods)
    await client.patch(
        INFERENCE_SERVICES,
        SERVICE,
        {
            "metadata": {
                "annotations": {
                    f"ome.io/migration-request-v1-{uuid}": request_body(source_index, node)
                }
            }
        },
        NAMESPACE,
        content_type=MERGE_PATCH,
    )
    requested = time.monotonic()
    await until(lambda: uuid in watch.completed, timeout=120, what=f"migration {number}")
    completed = watch.completed[uuid]
    record = watch.records[uuid]
    surge_index = int(record["surgeInstance"])
    writes_after = await quiet_writes(manager)
    events = await event_writes(client) - events_before
    reasons = {
        reason: n - reasons_before.get(reason, 0)
        for reason, n in (await event_reasons(client)).items()
        if n != reasons_before.get(reason, 0)
    }
    server = server_writes(await asyncio.to_thread(apiserver_metrics, plane), server_before)
    source_uid = source["metadata"]["uid"]
    (surge_uid,) = [
        uid for uid in watch.pods if uid not in known and watch.index.get(uid) == surge_index
    ]
    surge, gone = watch.pods[surge_uid], watch.pods[source_uid]
    kubelet_surge = surge["containers_ready"] - surge["bound"]
    kubelet_source = gone["gone"] - gone["deleting"]
    total = completed - requested
    writes = writes_after - writes_before
    return {
        "total": total,
        "kubelet_surge": kubelet_surge,
        "kubelet_source": kubelet_source,
        "overhead": total - kubelet_surge - kubelet_source,
        "to_surge_create": surge["created"] - requested,
        "surge_containers_ready_to_ready": surge["ready"] - surge["containers_ready"],
        "surge_ready_to_source_deleting": gone["deleting"] - surge["ready"],
        "source_gone_to_completed": completed - gone["gone"],
        "controller_writes": writes - events,
        "event_writes": events,
        "event_reasons": reasons,
        "server_writes": {k: v for k, v in server.items() if not k.startswith("PUT leases")},
    }


def _stats(values: list[float]) -> dict[str, float]:
    return {
        "median": round(statistics.median(values), 3),
        "min": round(min(values), 3),
        "max": round(max(values), 3),
    }


async def run(args: argparse.Namespace, plane: ControlPlane, workdir: Path) -> dict[str, Any]:
    kubeconfig = str(plane.kubeconfig_path)
    install = OmeInstall(plane, workdir=workdir / "install", namespace="ome")
    simulator = None
    manager: Manager | None = None
    async with KubeClient(await load_config(kubeconfig), qps=500, burst=1000) as client:
        factory = InformerFactory(client)
        try:
            await asyncio.to_thread(install.install_crds)
            await asyncio.to_thread(install.install, values())
            await client.create(NAMESPACES, {"metadata": {"name": NAMESPACE}})
            await client.create(SERVING_RUNTIMES, RUNTIME, NAMESPACE)
            simulator = start_simulator(
                kubeconfig=kubeconfig,
                nodes=NODE_COUNT,
                gpus=8,
                pods_per_node=110,
                log_path=workdir / "simulator.log",
            )

            async def nodes_up() -> bool:
                listed = await client.list_page(
                    NODES, labelSelector=f"sim.omed.dev/pool={NODE_PREFIX}"
                )
                return len(listed.get("items") or []) == NODE_COUNT

            await until(nodes_up, timeout=120, what="the simulated nodes")
            manager = await asyncio.to_thread(Manager, install, log_path=workdir / "manager.log")
            await until(manager.ready, timeout=180, what="the manager's /readyz")
            await until(lambda: admitted(client, manager), timeout=60, what="the webhook")

            watch = Watch()
            pods = factory.informer(PODS, namespace=NAMESPACE, transform=identity)
            pods.add_event_handler(
                Handlers(
                    on_add=watch.pod,
                    on_update=lambda _o, n: watch.pod(n),
                    on_delete=lambda o: watch.pod(o, gone=True),
                )
            )
            replicas = factory.informer(INFERENCE_REPLICAS, namespace=NAMESPACE, transform=identity)
            replicas.add_event_handler(
                Handlers(on_add=watch.replica, on_update=lambda _o, n: watch.replica(n))
            )
            factory.start()
            await factory.wait_for_cache_sync(timeout=30)
            await client.create(
                INFERENCE_SERVICES,
                {
                    "apiVersion": "ome.io/v1beta1",
                    "kind": "InferenceService",
                    "metadata": {"name": SERVICE},
                    "spec": {
                        "deploymentMode": "OMENative",
                        "model": {"name": "llama-3-2-1b-instruct"},
                        "runtime": {"name": "srt-bench"},
                        "engine": {"minReplicas": INSTANCES, "maxReplicas": INSTANCES},
                    },
                },
                NAMESPACE,
            )

            def settled() -> bool:
                manager.check()
                rows = watch.rows
                return len(rows) == INSTANCES and all(
                    r.get("phase") == "Ready" and not r.get("operation") for r in rows.values()
                )

            await until(settled, timeout=180, what="four Ready Instances")
            results = []
            for number in range(args.migrations):
                await until(settled, timeout=60, what="four Ready Instances")
                results.append(await one_migration(client, manager, watch, number, plane))
            counts = ("controller_writes", "event_writes", "event_reasons", "server_writes")
            keys = [k for k in results[0] if k not in counts]
            floor = min_writes()
            return {
                "migrations": len(results),
                "instances": INSTANCES,
                "seconds": {key: _stats([r[key] for r in results]) for key in keys},
                "goal_overhead_median_seconds": 1.0,
                "controller_writes_per_migration": _stats(
                    [float(r["controller_writes"]) for r in results]
                ),
                "event_writes_per_migration": _stats([float(r["event_writes"]) for r in results]),
                "event_writes_by_reason": {
                    reason: sum(r["event_reasons"].get(reason, 0) for r in results)
                    for reason in sorted({k for r in results for k in r["event_reasons"]})
                },
                "min_controller_writes": {**floor, "total": sum(floor.values())},
                "each": [
                    {k: round(v, 3) if isinstance(v, float) else v for k, v in r.items()}
                    for r in results
                ],
            }
        finally:
            await factory.stop()
            if manager is not None:
                await asyncio.to_thread(manager.stop)
            stop_process(simulator)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--migrations", type=int, default=20)
    parser.add_argument("--keep-logs", action="store_true", help="keep the manager's log")
    args = parser.parse_args()
    run_and_print(
        benchmark="migrate",
        run_on=lambda plane, workdir: run(args, plane, workdir),
        flags={"kube_api_qps": QPS, "workers_per_controller": WORKERS, "leader_elect": False},
        keep_logs=args.keep_logs,
    )


if __name__ == "__main__":
    main()
