"""One leader over a growing fleet on a real API server: memory, cold start, no-op cost,
steady writes, relist and webhook latency at each size; prints JSON and writes a PNG.

    .venv/bin/python bench/scale.py --instances 1000,2000,5000,10000 [--plot scale.png]
    .venv/bin/python bench/scale.py --quick          # 200,400 Instances, short windows

A fresh local control plane (etcd, kube-apiserver, kube-controller-manager: its EndpointSlice
and garbage collector controllers see every object; kube-scheduler), omed installed with the
real ``helm`` (``bench/converge.py``'s chart values) and the manager run as the chart's
Deployment runs it (``converge.Manager``: the rendered arguments, the chart's ServiceAccount
token, ConfigMap and certificate; ``--leader-elect=false`` appended, so a start is a new
leader's cold start at once).

1. **Seed.** One InferenceService of ``--engines`` Instances is created in
   namespace ``scale-seed`` (each Instance one pod, or with ``--workers W`` a leader and
   ``W`` workers, so 100,000 pods fit in 10,000 Instances) and converged by the manager
   itself; the node simulator (``omed_devcluster.simulator``, for that namespace only) binds
   and runs its pods, so
   they carry the status a kubelet writes and the manager's readiness gate. The manager is
   stopped and every object of that namespace whose name holds the service's name is read
   back (InferenceService, InferenceReplica, ControllerRevision, pods, Services,
   Endpoints, EndpointSlices): what omed and the cluster's own controllers made for it.
2. **Fill.** For each size, the seed's objects are cloned into namespace ``scale`` until it
   holds ``N / engines`` InferenceServices: the service name and namespace replaced, every
   uid replaced by a fresh one, and the revision hash (which covers the InferenceReplica's
   uid) recomputed with omed's own :func:`replica_target`; written straight into etcd in
   transactions of 100 (JSON, which the API server reads back), as ``bench/relist.py``
   does. The nodes stay alive (the simulator renews them) but nothing plays the cloned pods'
   kubelet: their status stays the seed's, Ready. Then one manager runs until it has
   stopped writing (``settle``): a clone may differ from what omed would write in an
   annotation that hashes the name (the wanted-spec digest); those writes are counted
   (``settle_writes``) and not part of any figure.
3. **Measure** (a new manager process per size):

   * ``cold_start``: from the process's start, the seconds until ``/readyz`` answers 200
     (every cache synced and the leader running), and until the InferenceService and
     InferenceReplica controllers have each counted as many reconciles as there are
     objects of their kind (``controller_runtime_reconcile_total``: every object reconciled
     once); meanwhile ``bench/loadgen`` sends InferenceService CREATE reviews to the
     manager's webhook port at ``--rate`` a second, open loop (``webhook_p99_ms``);
   * ``rss_mib_after_sync``: the manager's VmRSS once every object was reconciled and the
     manager is idle; ``rss_bytes_per_pod`` divides it, without the RSS of the same manager
     over an empty fleet (the first measurement's ``rss_mib_empty``), by the pods;
   * ``steady``: every write the manager's client counts (``rest_client_requests_total``,
     POST/PUT/PATCH/DELETE) in ``--steady`` seconds after that (goal: 0);
   * ``noop``: an annotation on every InferenceReplica from the bench's own client (one
     watch event each: the InferenceReplica controller reconciles it and its parent's
     controller reconciles the InferenceService, and neither writes); the manager's CPU
     time over that pass, less its idle rate, divided by the reconciles
     (``converge.resync``'s method; it includes decoding the events and admitting the
     patches in the webhook);
   * ``relist``: the product's pod cache over the namespace, in the bench process, through a
     forced ``ERROR`` 410 (``bench/relist.py``'s :func:`measure`, by watch-list and by paged
     LIST; tracemalloc's figures), and how many pages the API server answers a LIST at a
     resourceVersion with ``limit=500`` (``list_pages``: why a paged relist can hold the
     whole list at once).

The manager's CPU seconds and RSS are its own (``/proc``); wall times depend on the machine's
load, which is reported (the load average before and after each size).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import os
import socket
import sys
import time
import tracemalloc
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import orjson
import relist
import webhook
from converge import (
    MANAGER_NAMESPACE,
    NODE_PREFIX,
    RUNTIME,
    Manager,
    Metrics,
    admitted,
    bounded,
    chart_values,
    idle,
    run_and_print,
    service_body,
    start_simulator,
    stop_process,
    until,
    writes_of,
)
from converge import NAMESPACE as SIMULATED_NAMESPACE
from hostile_status import Load
from webhook import ISVC_PATH

from omed.controllers.inferencereplica.core.observe import replica_target
from omed.kube.client import KubeClient, load_config
from omed.kube.resources import (
    INFERENCE_REPLICAS,
    INFERENCE_SERVICES,
    NAMESPACES,
    NODES,
    PODS,
    SERVING_RUNTIMES,
)
from omed_devcluster.controlplane import ControlPlane
from omed_devcluster.install import OmeInstall

SEED_NAMESPACE = SIMULATED_NAMESPACE  # the namespace the node simulator plays
NAMESPACE = "scale"
SEED = "zzseed"
TXN_OPS = 100
GOALS = {
    "rss_mib_max": 1536,
    "cold_start_reconciled_s_max": 120,
    "steady_writes": 0,
    "webhook_p99_ms_max": 20,
    "bytes_per_pod_max": 3072,
}
"""The single-leader goals (at 10,000 Instances; per pod at every size)."""

# etcd key prefix -> API path (namespaced, ``{ns}``) of what the seed leaves behind.
KINDS: dict[str, tuple[str, str, str]] = {
    "/registry/ome.io/inferenceservices": (
        "/apis/ome.io/v1beta1/namespaces/{ns}/inferenceservices",
        "ome.io/v1beta1",
        "InferenceService",
    ),
    "/registry/ome.io/inferencereplicas": (
        "/apis/ome.io/v1beta1/namespaces/{ns}/inferencereplicas",
        "ome.io/v1beta1",
        "InferenceReplica",
    ),
    "/registry/controllerrevisions": (
        "/apis/apps/v1/namespaces/{ns}/controllerrevisions",
        "apps/v1",
        "ControllerRevision",
    ),
    "/registry/pods": ("/api/v1/namespaces/{ns}/pods", "v1", "Pod"),
    "/registry/services/specs": ("/api/v1/namespaces/{ns}/services", "v1", "Service"),
    "/registry/services/endpoints": ("/api/v1/namespaces/{ns}/endpoints", "v1", "Endpoints"),
    "/registry/endpointslices": (
        "/apis/discovery.k8s.io/v1/namespaces/{ns}/endpointslices",
        "discovery.k8s.io/v1",
        "EndpointSlice",
    ),
    "/registry/poddisruptionbudgets": (
        "/apis/policy/v1/namespaces/{ns}/poddisruptionbudgets",
        "policy/v1",
        "PodDisruptionBudget",
    ),
}


def runtime_body(workers: int) -> dict[str, Any]:
    """The bench's ServingRuntime: ``bench/converge.py``'s one-pod engine, or with ``workers``
    a leader running that runner and ``workers`` workers of the same image (one GPU each)."""
    if not workers:
        return RUNTIME
    runner = RUNTIME["spec"]["engineConfig"]["runner"]
    worker = {**runner, "args": ["--worker"]}
    spec = {
        **RUNTIME["spec"],
        "engineConfig": {
            "leader": {"runner": runner},
            "worker": {"size": workers, "runner": worker},
        },
    }
    return {**RUNTIME, "spec": spec}


OWNERS_FIRST = [
    "/registry/ome.io/inferenceservices",
    "/registry/ome.io/inferencereplicas",
    "/registry/controllerrevisions",
    "/registry/poddisruptionbudgets",
    "/registry/services/specs",
    "/registry/services/endpoints",
    "/registry/endpointslices",
    "/registry/pods",
]
"""The order a clone's objects are written in: every owner before what it owns. A clone spans
several etcd transactions, and the garbage collector deletes an object whose owner it can't
find: a replica written before its InferenceService would be torn down."""


def admitted_review(uid: str) -> bytes:
    """``bench/webhook.py``'s CREATE review of a realistic InferenceService (with a migration
    request in upstream's wire format), which the webhook validates in full and allows."""
    return webhook.review_body(uid)


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


# -- seed ----------------------------------------------------------------------------------------


def seed_objects(plane: ControlPlane) -> tuple[list[tuple[str, dict[str, Any]]], list[str]]:
    """(etcd prefix, object) for every stored object of the seed namespace named after the
    seed service; and the prefixes found there that the bench does not know (reported)."""
    keys = plane._etcd_post(
        "/v3/kv/range",
        {"key": b64("/registry/"), "range_end": b64("/registry0"), "keys_only": True},
    ).get("kvs", [])
    marker = f"/{SEED_NAMESPACE}/"
    found: dict[str, set[str]] = {}
    unknown = set()
    for kv in keys:
        key = base64.b64decode(kv["key"]).decode()
        if marker not in key:
            continue
        prefix, _, name = key.partition(marker)
        if SEED not in name:
            continue
        if prefix not in KINDS:
            unknown.add(prefix)
            continue
        found.setdefault(prefix, set()).add(name)
    out = []
    for prefix, names in sorted(found.items(), key=lambda item: OWNERS_FIRST.index(item[0])):
        path, api_version, kind = KINDS[prefix]
        listed = plane.get_json(path.format(ns=SEED_NAMESPACE))
        for item in listed.get("items") or ():
            if item["metadata"]["name"] in names:
                item["apiVersion"], item["kind"] = api_version, kind
                out.append((prefix, item))
    return out, sorted(unknown)


class Cloner:
    """The seed's objects as text, with the service name, namespace, uids and revision hash
    replaced per clone."""

    def __init__(self, seed: list[tuple[str, dict[str, Any]]]) -> None:
        self.seed = []
        uids = []
        for prefix, obj in seed:
            md = obj["metadata"]
            md.pop("resourceVersion", None)
            uids.append(md["uid"])
            self.seed.append((prefix, orjson.dumps(obj).decode()))
        self.uids = uids
        irep = next(o for p, o in seed if o["kind"] == "InferenceReplica")
        self.seed_hash = replica_target(irep).update_revision[-8:]
        self.kinds = sorted({o["kind"] for _, o in seed})
        self.pods = sum(1 for _, o in seed if o["kind"] == "Pod")

    def clone(self, index: int) -> list[tuple[str, bytes]]:
        name = f"s{index:05d}"
        texts = []
        for prefix, seed_text in self.seed:
            text = seed_text.replace(SEED, name)
            text = text.replace(f'"{SEED_NAMESPACE}"', f'"{NAMESPACE}"')
            text = text.replace(f"{SEED_NAMESPACE}.", f"{NAMESPACE}.")
            text = text.replace(f"/{SEED_NAMESPACE}/", f"/{NAMESPACE}/")
            for uid in self.uids:
                text = text.replace(uid, str(uuid.uuid5(uuid.NAMESPACE_OID, f"{uid}/{index}")))
            texts.append((prefix, text))
        irep = next(orjson.loads(t) for p, t in texts if "inferencereplicas" in p)
        new_hash = replica_target(irep).update_revision[-8:]
        out = []
        for prefix, text in texts:
            obj = orjson.loads(text.replace(self.seed_hash, new_hash))
            key = f"{prefix}/{NAMESPACE}/{obj['metadata']['name']}"
            out.append((key, orjson.dumps(obj)))
        return out


def fill(plane: ControlPlane, cloner: Cloner, start: int, stop: int) -> float:
    """Clones ``start`` to ``stop`` (exclusive) straight into etcd; seconds taken."""
    began = time.monotonic()
    batch: list[dict[str, Any]] = []

    def flush() -> None:
        if batch:
            plane._etcd_post("/v3/kv/txn", {"success": batch})
            batch.clear()

    for index in range(start, stop):
        for key, value in cloner.clone(index):
            batch.append(
                {
                    "requestPut": {
                        "key": base64.b64encode(key.encode()).decode(),
                        "value": base64.b64encode(value).decode(),
                    }
                }
            )
            if len(batch) >= TXN_OPS:
                flush()
    flush()
    return time.monotonic() - began


# -- measurements ----------------------------------------------------------------------------


def metrics(manager: Manager) -> Metrics:
    """One scrape, retried: a manager busy with a large fleet can miss the 5 s timeout."""
    for _ in range(11):
        try:
            return manager.metrics()
        except RuntimeError:
            manager.check()
            time.sleep(1.0)
    return manager.metrics()


def reconciles(manager: Manager) -> dict[str, float]:
    return metrics(manager).by("controller_runtime_reconcile_total", "controller")


async def quiet_writes(manager: Manager, *, hold: float, timeout: float) -> int:
    """Until the manager's write count holds still for ``hold`` seconds; its writes so far."""
    seen: list[tuple[float, int]] = []

    def still() -> bool:
        now = writes_of(metrics(manager).by("rest_client_requests_total", "method"))
        seen.append((time.monotonic(), now))
        recent = [c for at, c in seen if at >= seen[-1][0] - hold]
        return seen[-1][0] - seen[0][0] >= hold and len(set(recent)) == 1

    await until(still, timeout=timeout, what="the manager's writes to stop", interval=1.0)
    return seen[-1][1]


async def cold_start(
    install: OmeInstall,
    workdir: Path,
    load: Load | None,
    *,
    services: int,
    rate: float,
    tag: str,
    load_seconds: float = 30.0,
) -> tuple[Manager, dict[str, Any]]:
    began = time.monotonic()
    manager = await asyncio.to_thread(Manager, install, log_path=workdir / f"manager-{tag}.log")
    started = time.monotonic()
    loading = None
    if load is not None:
        load.argv = [a for a in load.argv if not a.startswith(("-pid=", "-url="))] + [
            f"-pid={manager.proc.pid}",
            f"-url=https://127.0.0.1:{manager.webhook_port}{ISVC_PATH}",
        ]
        await until(
            lambda: _accepts(manager.webhook_port),
            timeout=300,
            what="the webhook port",
            interval=0.05,
        )
        loading = asyncio.create_task(load.run(rate=rate, seconds=load_seconds))
    synced = await until(manager.ready, timeout=900, what="the manager's /readyz", interval=0.2)

    def all_reconciled() -> bool:
        counts = reconciles(manager)
        return (
            counts.get("inferenceservice", 0) >= services
            and counts.get("inferencereplica", 0) >= services
        )

    reconciled = await until(all_reconciled, timeout=1800, what="every object reconciled")
    cpu = manager.cpu_seconds()
    webhook = await loading if loading is not None else None
    return manager, {
        "spawn_s": round(started - began, 2),
        "caches_synced_s": round(synced - started, 2),
        "every_object_reconciled_s": round(reconciled - started, 2),
        "manager_cpu_s_until_reconciled": round(cpu, 2),
        "webhook": webhook,
    }


def _accepts(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
    except OSError:
        return False
    return True


async def noop_pass(client: KubeClient, manager: Manager, *, idle_rate: float) -> dict[str, Any]:
    replicas = await client.list_all(INFERENCE_REPLICAS, NAMESPACE)
    before, cpu_before, start = reconciles(manager), manager.cpu_seconds(), time.monotonic()
    writes_before = writes_of(metrics(manager).by("rest_client_requests_total", "method"))
    stamp = str(time.time_ns())
    await bounded(
        [
            client.patch(
                INFERENCE_REPLICAS,
                irep["metadata"]["name"],
                {"metadata": {"annotations": {"bench.omed.dev/resync": stamp}}},
                NAMESPACE,
            )
            for irep in replicas
        ],
        50,
    )
    expected = 2 * len(replicas)
    total = sum(before.values())
    seen: list[float] = []

    def settled() -> bool:
        now = sum(reconciles(manager).values())
        seen.append(now)
        return now - total >= expected and len(seen) > 8 and len(set(seen[-8:])) == 1

    done = await until(settled, timeout=900, what="the no-op pass's reconciles")
    cpu = manager.cpu_seconds() - cpu_before
    elapsed = done - start
    count = round(sum(reconciles(manager).values()) - total)
    writes = writes_of(metrics(manager).by("rest_client_requests_total", "method"))
    return {
        "objects_touched": len(replicas),
        "reconciles": count,
        "writes": writes - writes_before,
        "manager_cpu_s": round(cpu, 3),
        "cpu_ms_per_reconcile": round(1000 * (cpu - idle_rate * elapsed) / max(count, 1), 3),
        "cpu_ms_per_reconcile_raw": round(1000 * cpu / max(count, 1), 3),
    }


async def list_pages(client: KubeClient, *, resource_version: str) -> dict[str, Any]:
    """Pages and items the API server answers a ``limit=500`` LIST of the pods at
    ``resource_version`` with (``""``: a consistent read)."""
    pages = items = 0
    token = None
    biggest = 0
    while True:
        params: dict[str, Any] = {"limit": 500, "_continue": token}
        if token is None and resource_version:
            params["resourceVersion"] = resource_version
        page = await client.list_page(PODS, NAMESPACE, **params)
        pages += 1
        count = len(page.get("items") or ())
        items += count
        biggest = max(biggest, count)
        token = (page.get("metadata") or {}).get("continue")
        if not token:
            return {"pages": pages, "items": items, "largest_page": biggest}


async def _unpaged(client: KubeClient) -> dict[str, Any]:
    """The ``resourceVersion=0`` LIST, which the API server answers from its cache in one
    page whatever the limit: at 100,000 pods a response of about half a gigabyte, which can
    outlast the client's timeout; that is a figure too, not the end of the run."""
    try:
        return await list_pages(client, resource_version="0")
    except TimeoutError:
        return {"error": "timed out (the client's request timeout)"}


async def relist_figures(client: KubeClient, pods: int) -> dict[str, Any]:
    relist.NAMESPACE = NAMESPACE  # the pod cache of relist.measure over this namespace
    current = (await client.list_page(PODS, NAMESPACE, limit=1))["metadata"]["resourceVersion"]
    pages = {
        "at_resource_version": await list_pages(client, resource_version=current),
        "consistent": await list_pages(client, resource_version=""),
        "at_0": await _unpaged(client),
    }
    tracemalloc.start()
    try:
        streamed = await relist.measure(client, pods, watch_list=True)
        paged = await relist.measure(client, pods, watch_list=False)
    finally:
        tracemalloc.stop()
    keep = (
        "steady_cache_bytes",
        "steady_cache_bytes_per_pod",
        "relist_peak_over_steady",
        "relist_s",
        "first_fill_peak_over_steady",
    )
    return {
        "watch_list": {k: streamed[k] for k in keep},
        "paged_list": {k: paged[k] for k in keep},
        "list_pages": pages,
    }


async def measure_size(  # noqa: PLR0917 - the run's context, passed on
    args: argparse.Namespace,
    client: KubeClient,
    plane: ControlPlane,
    install: OmeInstall,
    workdir: Path,
    load: Load,
    *,
    services: int,
    pods: int,
) -> dict[str, Any]:
    load_before = os.getloadavg()
    manager, started = await cold_start(
        install,
        workdir,
        load,
        services=services,
        rate=args.rate,
        tag=str(services),
        load_seconds=args.webhook_seconds,
    )
    try:
        await quiet_writes(manager, hold=5.0, timeout=600)
        rss = manager.rss_kib()
        steady = await idle(manager, seconds=args.steady)
        noop = await noop_pass(client, manager, idle_rate=steady["manager_cpu_per_second"])
        steady["manager_cpu_per_second"] = round(steady["manager_cpu_per_second"], 4)
    finally:
        await asyncio.to_thread(manager.stop)
    print(
        json.dumps(
            {"cold_start": started, "rss_kib": rss, "steady": steady, "noop": noop}, default=str
        ),
        file=sys.stderr,
        flush=True,
    )  # kept if a relist fails
    relisted = await relist_figures(client, pods)
    webhook = started.pop("webhook") or {}
    out = {
        "instances": services * args.engines,
        "inferenceservices": services,
        "pods": pods,
        "cold_start": started,
        "webhook_p99_ms": webhook.get("p99_ms"),
        "webhook": webhook,
        "rss_mib_after_sync": round(rss / 1024, 1),
        "steady": steady,
        "noop": noop,
        "relist": relisted,
        "load_average_1m": {"before": load_before[0], "after": os.getloadavg()[0]},
    }
    return out


async def seed(
    args: argparse.Namespace, client: KubeClient, install: OmeInstall, workdir: Path
) -> dict[str, Any]:
    """Converge the one seed InferenceService with the manager itself."""
    manager = await asyncio.to_thread(Manager, install, log_path=workdir / "manager-seed.log")
    try:
        await until(manager.ready, timeout=300, what="the manager's /readyz")
        await until(lambda: admitted(client, manager), timeout=60, what="admission")
        await client.create(INFERENCE_SERVICES, service_body(SEED, args.engines), SEED_NAMESPACE)

        async def ready() -> bool:
            isvc = await client.get(INFERENCE_SERVICES, SEED, SEED_NAMESPACE)
            conditions = (isvc.get("status") or {}).get("conditions") or ()
            return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)

        await until(ready, timeout=300, what="the seed InferenceService Ready", interval=1.0)
        writes = await quiet_writes(manager, hold=5.0, timeout=300)
    finally:
        await asyncio.to_thread(manager.stop)
    return {"seed_writes": writes}


def renice_control_plane(plane: ControlPlane, nice: int) -> int:
    """Lower the priority of every thread of the control plane's processes (etcd, the API
    server, kube-controller-manager, kube-scheduler) to the niceness ``nice``; the number of
    threads reniced.

    On a cluster these run on the control plane's own nodes; here they share the manager's
    two cores. Reniced, they still do all their work, but a runnable manager or webhook
    thread goes first: what the webhook's latency is when the cores are the manager's own.
    A figure taken this way is a different configuration and is reported as such
    (``control_plane_nice`` in the output's flags)."""
    assert plane.dir is not None
    count = 0
    for pid_file in plane.dir.glob("*.pid"):
        if pid_file.name == "owner.pid":
            continue
        pid = int(pid_file.read_text().strip())
        for task in Path(f"/proc/{pid}/task").iterdir():
            tid = int(task.name)
            os.setpriority(os.PRIO_PROCESS, tid, nice)
            count += 1
    return count


async def run(args: argparse.Namespace, plane: ControlPlane, workdir: Path) -> dict[str, Any]:
    sizes = [int(x) for x in args.instances.split(",")]
    install = OmeInstall(plane, workdir=workdir / "install", namespace=MANAGER_NAMESPACE)
    simulator = None
    async with KubeClient(
        await load_config(str(plane.kubeconfig_path)), qps=3000, burst=3000
    ) as client:
        try:
            await asyncio.to_thread(install.install_crds)
            await asyncio.to_thread(install.install, chart_values(4))
            for ns in (SEED_NAMESPACE, NAMESPACE):
                await client.create(NAMESPACES, {"metadata": {"name": ns}})
                await client.create(SERVING_RUNTIMES, runtime_body(args.workers), ns)
            simulator = start_simulator(
                kubeconfig=str(plane.kubeconfig_path),
                nodes=args.nodes,
                gpus=args.engines * (1 + args.workers),
                pods_per_node=max(110, args.engines * (1 + args.workers)),
                log_path=workdir / "simulator.log",
            )
            # The simulator plays only the seed namespace: its flag names it.
            await until(
                lambda: _nodes_up(client, args.nodes), timeout=120, what="the simulated nodes"
            )
            seeded = await seed(args, client, install, workdir)
            objects, unknown = seed_objects(plane)
            cloner = Cloner(objects)
            secret_name = next(v for k, v, _ in install.spec.env if k == "SECRET_NAME" and v)
            secret = plane.request_json(
                "GET", f"/api/v1/namespaces/{MANAGER_NAMESPACE}/secrets/{secret_name}"
            )
            ca = workdir / "ca.crt"
            ca.write_bytes(base64.b64decode(secret["data"]["ca.crt"]))
            bodies = workdir / "bodies.jsonl"
            bodies.write_bytes(b"\n".join(admitted_review(f"uid-{i}") for i in range(256)) + b"\n")
            load = Load(
                port=0,
                ca=ca,
                server_name=f"{install.webhook_service}.{MANAGER_NAMESPACE}.svc",
                bodies=bodies,
                pid=0,
            )
            results: list[dict[str, Any]] = []
            have = 0
            for instances in sizes:
                services = max(1, instances // args.engines)
                filled_s = await asyncio.to_thread(fill, plane, cloner, have, services)
                have = services
                # The API server's watch cache replays etcd's writes; a manager that starts
                # before it caught up would wait on "too large resource version".
                relist.NAMESPACE = NAMESPACE
                await relist.cache_caught_up(client)
                settle_manager, _ = await cold_start(
                    install, workdir, None, services=services, rate=0, tag=f"settle-{services}"
                )
                try:
                    settle_writes = await quiet_writes(settle_manager, hold=5.0, timeout=900)
                finally:
                    await asyncio.to_thread(settle_manager.stop)
                pods = len(
                    await client.list_all(PODS, NAMESPACE, labelSelector="ome.io/managed-by")
                )
                if args.control_plane_nice:
                    reniced = renice_control_plane(plane, args.control_plane_nice)
                    print(f"reniced {reniced} control-plane threads", file=sys.stderr)
                result = await measure_size(
                    args,
                    client,
                    plane,
                    install,
                    workdir,
                    load,
                    services=services,
                    pods=pods,
                )
                result["fill_s"] = round(filled_s, 1)
                result["settle_writes"] = settle_writes
                if results:
                    # The RSS one more pod adds: the slope from the smallest size.
                    first = results[0]
                    result["rss_bytes_per_added_pod"] = round(
                        (result["rss_mib_after_sync"] - first["rss_mib_after_sync"])
                        * 1024
                        * 1024
                        / max(1, pods - first["pods"])
                    )
                results.append(result)
                print(json.dumps(result), file=sys.stderr, flush=True)
            return {
                "seed": {
                    **seeded,
                    "kinds": cloner.kinds,
                    "pods_per_service": cloner.pods,
                    "objects_per_service": len(cloner.seed),
                    "unknown_prefixes": unknown,
                },
                "sizes": results,
                "goals": GOALS,
            }
        finally:
            stop_process(simulator)


async def _nodes_up(client: KubeClient, count: int) -> bool:
    listed = await client.list_page(NODES, labelSelector=f"sim.omed.dev/pool={NODE_PREFIX}")
    return len(listed.get("items") or []) == count


def plot(results: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sizes = results["sizes"]
    xs = [s["instances"] for s in sizes]
    figures = [
        ("manager RSS after sync (MiB)", [s["rss_mib_after_sync"] for s in sizes]),
        ("caches synced (s)", [s["cold_start"]["caches_synced_s"] for s in sizes]),
        (
            "every object reconciled (s)",
            [s["cold_start"]["every_object_reconciled_s"] for s in sizes],
        ),
        ("no-op CPU per reconcile (ms)", [s["noop"]["cpu_ms_per_reconcile"] for s in sizes]),
        ("writes in steady state", [s["steady"]["writes"] for s in sizes]),
        (
            "relist peak / steady (watch-list)",
            [s["relist"]["watch_list"]["relist_peak_over_steady"] for s in sizes],
        ),
        ("relist time (s, watch-list)", [s["relist"]["watch_list"]["relist_s"] for s in sizes]),
        ("webhook p99 during cold start (ms)", [s["webhook_p99_ms"] or 0 for s in sizes]),
    ]
    fig, axes = plt.subplots(2, 4, figsize=(16, 7))
    for ax, (title, ys) in zip(axes.flat, figures, strict=True):
        ax.plot(xs, ys, marker="o")
        ax.set_title(title, fontsize=9)
        ax.set_xlabel("Instances")
        ax.grid(True, alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--instances", default="1000,2000", help="sizes, comma-separated")
    parser.add_argument("--engines", type=int, default=10, help="Instances a service")
    parser.add_argument(
        "--workers", type=int, default=0, help="workers of each Instance's leader (0: one pod)"
    )
    parser.add_argument("--nodes", type=int, default=2)
    parser.add_argument("--rate", type=float, default=100.0, help="webhook requests a second")
    parser.add_argument(
        "--webhook-seconds", type=float, default=30.0, help="seconds of webhook load from the start"
    )
    parser.add_argument("--steady", type=float, default=60.0, help="seconds of steady state")
    parser.add_argument(
        "--control-plane-nice",
        type=int,
        default=0,
        help="run the control plane's processes at this niceness during each measurement "
        "(0: as they start; a different configuration, named in the output)",
    )
    parser.add_argument("--plot", type=Path, default=Path("scale.png"))
    parser.add_argument("--quick", action="store_true", help="200,400 Instances, 10 s windows")
    parser.add_argument("--keep-logs", action="store_true")
    args = parser.parse_args()
    if args.quick:
        args.instances, args.steady = "200,400", 10.0
    holder: dict[str, Any] = {}

    async def run_on(plane: ControlPlane, workdir: Path) -> dict[str, Any]:
        holder.update(await run(args, plane, workdir))
        return holder

    run_and_print(
        benchmark="scale",
        run_on=run_on,
        flags={
            "instances": args.instances,
            "engines": args.engines,
            "workers": args.workers,
            "rate": args.rate,
            "control_plane_nice": args.control_plane_nice,
        },
        keep_logs=args.keep_logs,
    )
    try:
        plot(holder, args.plot)
        print(f"plot written to {args.plot}", file=sys.stderr)
    except ImportError:
        print("matplotlib is not installed: no plot", file=sys.stderr)


if __name__ == "__main__":
    main()
