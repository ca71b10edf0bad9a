"""Convergence of many OMENative InferenceServices through the manager process; print JSON.

    .venv/bin/python bench/converge.py                 # the full run: 200 services x 4
    .venv/bin/python bench/converge.py --services 20   # a quick run

A fresh local control plane (etcd, kube-apiserver, kube-controller-manager, kube-scheduler),
omed installed with the real ``helm`` as an operator installs it (:mod:`omed_devcluster.install`:
the ``ome-crd`` chart, then ``ome-resources`` into namespace ``ome`` with the bench's values
over the chart's, :data:`CHART_ENTRIES` and the limiter and worker counts among them), simulated
GPU nodes (``python -m omed_devcluster.simulator`` as its own process, playing their kubelets
for pods in the bench namespace; kube-scheduler binds the pods; 25 nodes x 32 GPUs by default)
and one manager replica run as the chart's Deployment runs it (``python -m omed`` with the
rendered container's arguments and environment, the chart's ConfigMap, the token of its
ServiceAccount, never the admin's, and its webhook certificate; as production runs it:
``--kube-api-qps 100 --kube-api-burst 200``, 4 workers per controller). Its webhook is
published as an endpoint of the chart's Service, so every InferenceService and
InferenceReplica create and update (not their status writes) is admitted by the manager
itself, as in a cluster; the clock starts once a dry-run create passes admission. One flag
the chart has no value for is appended after its arguments: ``--leader-elect=false``
(:data:`MANAGER_EXTRA_ARGS`), so no Lease renewal is in the write counts. Then:

1. **Converge.** ``--services`` InferenceServices, each an engine of ``--engines``
   single-pod, one-GPU Instances, are created at once; the clock runs from the first create
   until the last one shows ``Ready`` True (seen through a watch, not a poll, so the bench
   doesn't load the API server while it measures).
2. **Writes.** ``rest_client_requests_total`` from the manager's ``/metrics``, by method,
   from the first create until the manager has stopped writing (its write count unchanged
   for 5 s: the Event recorder writes on after the last Ready). The Event recorder has its
   own client and limiter; its writes are counted from the Events themselves (one POST per
   Event, one PATCH per repeat: the sum of their ``count``) and taken out, leaving the
   controllers' client, whose limiter bounds convergence. Leader election is off (the one
   flag added to the chart's), so no Lease renewal is in the counts (with it on, as the
   chart runs it, the Lease adds one PUT per retry period on a third client with its own
   limiter).
3. **The bound.** The fewest writes the controllers must make for one InferenceService of
   E single-pod Instances (:func:`min_writes`): its finalizer and one status write (Ready),
   the InferenceReplica's create (with its finalizer on) and two status writes (the Create
   operations recorded before the first pod, the Ready rows at the end), and per Instance
   one pod create and one readiness-gate patch: ``5 + 2E``. The limiter lets ``burst`` requests
   through at once and then ``qps`` a second, so no manager with these flags converges faster
   than ``(minimum writes - burst) / qps`` (``bound_seconds``, ``ratio_to_bound``). The goal
   is stated against the plain bound, the minimum writes divided by QPS without the burst
   (``issue_bound_seconds``, ``ratio_to_issue_bound``): within 1.3x of it. Both are
   printed.
4. **Idle.** Every write the manager makes during ``--idle`` seconds once it has stopped
   writing after convergence (goal: 0).
5. **CPU per no-op reconcile.** Every InferenceReplica gets an annotation from the bench's
   own client (one watch event each; the InferenceReplica controller reconciles it and
   enqueues nothing else, and the InferenceService controller reconciles its parent). The
   manager's CPU time (utime + stime of ``/proc/<pid>/stat``) over that resync, divided by
   the reconciles it counted in ``controller_runtime_reconcile_total``; the idle CPU rate
   measured in step 4 is taken out. It includes decoding the watch events and the informer
   work, and the manager's webhook admitting each annotation patch, which a timer resync
   from the cache (controller-runtime's) would not have. The resync must write nothing.

Everything started is stopped in ``finally`` blocks (and dies with the bench on kill -9).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import re
import shutil
import signal
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections import defaultdict
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from omed.events import DEFAULT_COMPONENT
from omed.informers import Handlers, InformerFactory
from omed.informers.transform import Obj
from omed.kube.client import KubeClient, load_config
from omed.kube.errors import ServerError
from omed.kube.resources import (
    EVENTS,
    INFERENCE_REPLICAS,
    INFERENCE_SERVICES,
    NAMESPACES,
    NODES,
    SERVING_RUNTIMES,
)
from omed.statuscodec import decode_status
from omed_devcluster.binaries import ensure_binaries
from omed_devcluster.controlplane import ControlPlane, die_with_parent, free_port
from omed_devcluster.install import OmeInstall

ROOT = Path(__file__).resolve().parent.parent
MANAGER_NAMESPACE = "ome"
MANAGER_POD = "ome-controller-manager-bench"
"""The replica's pod name (``POD_NAME``, and the name of its webhook's EndpointSlice)."""
NAMESPACE = "bench"
NODE_PREFIX = "bench-gpu"
QPS, BURST, WORKERS = 100, 200, 4
"""The manager's limiter and workers, as chart values (``--workers`` changes the workers, for
a diagnostic run)."""
MANAGER_EXTRA_ARGS = ("--leader-elect=false",)
"""After the chart's arguments (the last occurrence wins): the chart always passes
``--leader-elect`` and has no value to turn it off."""
WRITE_METHODS = ("POST", "PUT", "PATCH", "DELETE")
POLL = 0.25
CHART_ENTRIES = {
    "omenativeStatus": {"instanceStatusEncoding": "ColumnarV2", "maxDecodedInstances": 20000},
    "eventRecorder": {"burstSize": 400, "refillInterval": "5s"},
    "lifecycle": {
        "scaleUpPodBatchSize": 50,
        "scaleDownPodBatchSize": "10%",
        "scaleDownRequeueInterval": "5s",
        "requeue": {"operation": "5s", "gate": "3s"},
    },
    "deploy": {"defaultDeploymentMode": "OMENative"},
}
"""The chart's ``inferenceservice-config`` entries, as ``ome.controller`` values (the
chart writes each as one JSON document of its ConfigMap)."""


def chart_values(workers: int) -> dict[str, Any]:
    """The ``ome-resources`` values the bench installs with, over the chart's own."""
    return {
        "ome": {
            "controller": {
                "kubeAPIQPS": QPS,
                "kubeAPIBurst": BURST,
                "inferenceServiceMaxConcurrentReconciles": workers,
                "inferenceReplicaMaxConcurrentReconciles": workers,
                **CHART_ENTRIES,
            }
        }
    }


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
                "args": ["--port", "8080"],
                "resources": {"limits": {"nvidia.com/gpu": "1"}},
            }
        },
    },
}


def min_writes(engines: int) -> int:
    """The fewest controller writes for one InferenceService of ``engines`` Instances."""
    service = 1 + 1  # finalizer, status (Ready)
    replica = 1 + 2  # create (finalizer included), status (operations recorded; Ready rows)
    pods = 2 * engines  # create, readiness gate
    return service + replica + pods


def service_body(name: str, engines: int) -> dict[str, Any]:
    return {
        "apiVersion": "ome.io/v1beta1",
        "kind": "InferenceService",
        "metadata": {"name": name},
        "spec": {
            "deploymentMode": "OMENative",
            "model": {"name": "llama-3-2-1b-instruct"},
            "runtime": {"name": "srt-bench"},
            "engine": {"minReplicas": engines, "maxReplicas": engines},
        },
    }


def ready(obj: dict[str, Any]) -> bool:
    conditions = (obj.get("status") or {}).get("conditions") or ()
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


class StatusTrace:
    """What each status write carried, from the watch: an InferenceService's by its Ready
    condition, an InferenceReplica's by its rows' phases and operations (``2 Ready, 2
    Creating/Create``). Every version a watch delivers whose ``status`` changed is one write
    (the manager writes ``status`` only through the status subresource)."""

    def __init__(self) -> None:
        self.isvc: dict[str, int] = defaultdict(int)
        self.irep: dict[str, int] = defaultdict(int)
        self.irep_writes_per_object: dict[str, int] = defaultdict(int)

    @staticmethod
    def _rows(status: Mapping[str, Any]) -> str:
        kinds: dict[str, int] = defaultdict(int)
        for row in decode_status(status, max_rows=1_000_000):
            operation = row.get("operation") or {}
            kind = row.get("phase", "-")
            if operation:
                kind += f"/{operation.get('type')}:{operation.get('step')}"
            kinds[kind] += 1
        return ", ".join(f"{n} {k}" for k, n in sorted(kinds.items())) or "no rows"

    def isvc_update(self, old: Obj, new: Obj) -> None:
        if old.get("status") != new.get("status"):
            first = "first " if not old.get("status") else ""
            self.isvc[f"{first}Ready={ready(new)}"] += 1

    def irep_update(self, old: Obj, new: Obj) -> None:
        status = new.get("status") or {}
        if old.get("status") != status:
            self.irep[self._rows(status)] += 1
            self.irep_writes_per_object[new["metadata"]["name"]] += 1

    def report(self) -> dict[str, Any]:
        per_object: dict[int, int] = defaultdict(int)
        for count in self.irep_writes_per_object.values():
            per_object[count] += 1
        return {
            "inferenceservice_status_writes": dict(self.isvc),
            "inferencereplica_status_writes": dict(
                sorted(self.irep.items(), key=lambda item: -item[1])
            ),
            "inferencereplicas_by_status_writes": {
                str(count): n for count, n in sorted(per_object.items())
            },
        }


# -- the manager process -----------------------------------------------------------------------

_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$")
_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


@dataclass(frozen=True)
class Sample:
    name: str
    labels: dict[str, str]
    value: float


class Metrics:
    """One scrape of a Prometheus text page."""

    def __init__(self, text: str) -> None:
        self.samples: list[Sample] = []
        for line in text.splitlines():
            match = _SAMPLE.match(line)
            if match is None or line.startswith("#"):
                continue
            labels = dict(_LABEL.findall(match.group(2) or ""))
            self.samples.append(Sample(match.group(1), labels, float(match.group(3))))

    def by(self, name: str, label: str) -> dict[str, float]:
        """``name`` summed by the value of ``label``."""
        out: dict[str, float] = defaultdict(float)
        for sample in self.samples:
            if sample.name == name:
                out[sample.labels.get(label, "")] += sample.value
        return dict(out)

    def total(self, name: str) -> float:
        return sum(s.value for s in self.samples if s.name == name)


def delta(after: dict[str, float], before: dict[str, float]) -> dict[str, int]:
    return {
        key: round(after.get(key, 0) - before.get(key, 0))
        for key in sorted(set(after) | set(before))
        if round(after.get(key, 0) - before.get(key, 0))
    }


def writes_of(by_method: Mapping[str, float]) -> int:
    return round(sum(by_method.get(method, 0) for method in WRITE_METHODS))


def process_cpu_seconds(pid: int) -> float:
    """utime + stime of a process (fields 14 and 15 of /proc/<pid>/stat); 0 once it's gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0.0
    fields = stat.rpartition(")")[2].split()
    ticks = int(fields[11]) + int(fields[12])
    return ticks / os.sysconf("SC_CLK_TCK")


def pid_of(plane: ControlPlane, child: str) -> int:
    """The pid of the control plane's ``etcd`` or ``apiserver`` (from its pid file)."""
    if plane.dir is None:
        raise RuntimeError("the control plane isn't started")
    return int((plane.dir / f"{child}.pid").read_text())


class Manager:
    """One replica of the chart's Deployment (:meth:`OmeInstall.manager_command`: ``python -m
    omed`` with the rendered arguments, then :data:`MANAGER_EXTRA_ARGS`), its webhook an
    endpoint of the chart's Service while it runs; its metrics and CPU time."""

    def __init__(self, install: OmeInstall, *, log_path: Path, profile: Path | None = None) -> None:
        self.install = install
        self.metrics_port, self.health_port = free_port(), free_port()
        webhook_port = self.webhook_port = free_port()
        argv, env = install.manager_command(
            MANAGER_POD,
            metrics_port=self.metrics_port,
            health_port=self.health_port,
            webhook_port=webhook_port,
            python=sys.executable,
            extra=MANAGER_EXTRA_ARGS,
        )
        self.args = argv[3:]
        if profile is not None:
            # --profile-manager: cProfile writes its file when the manager exits on SIGTERM.
            argv = [argv[0], "-m", "cProfile", "-o", str(profile), *argv[1:]]
        self.log_path = log_path
        with log_path.open("wb") as log:
            self.proc = subprocess.Popen(
                argv,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env,
                cwd=ROOT,
                preexec_fn=die_with_parent,  # noqa: PLW1509 - only prctl, async-signal-safe
            )
        try:
            install.publish_endpoint(MANAGER_POD, webhook_port)
        except BaseException:
            self.proc.kill()
            self.proc.wait(timeout=10)
            raise

    def _get(self, port: int, path: str) -> tuple[int, str] | None:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as answer:
                return answer.status, answer.read().decode()
        except urllib.error.HTTPError as err:
            return err.code, ""
        except OSError:
            return None

    def check(self) -> None:
        if self.proc.poll() is not None:
            tail = self.log_path.read_text(errors="replace").splitlines()[-30:]
            raise RuntimeError(f"the manager exited ({self.proc.returncode}):\n" + "\n".join(tail))

    def ready(self) -> bool:
        self.check()
        answer = self._get(self.health_port, "/readyz")
        return answer is not None and answer[0] == 200

    def metrics(self) -> Metrics:
        self.check()
        answer = self._get(self.metrics_port, "/metrics")
        if answer is None or answer[0] != 200:
            raise RuntimeError(f"GET /metrics failed: {answer}")
        return Metrics(answer[1])

    def cpu_seconds(self) -> float:
        return process_cpu_seconds(self.proc.pid)

    def rss_kib(self) -> int:
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
        return 0

    def stop(self) -> None:
        """SIGTERM (SIGKILL after 30 s), then withdraw its webhook endpoint."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        self.install.withdraw_endpoint(MANAGER_POD)


def start_simulator(
    *, kubeconfig: str, nodes: int, gpus: int, pods_per_node: int, log_path: Path
) -> subprocess.Popen[bytes]:
    args = [
        sys.executable,
        "-m",
        "omed_devcluster.simulator",
        f"--kubeconfig={kubeconfig}",
        f"--nodes={nodes}",
        f"--gpus-per-node={gpus}",
        f"--pods-per-node={pods_per_node}",
        f"--node-prefix={NODE_PREFIX}",
        f"--namespace={NAMESPACE}",
    ]
    with log_path.open("wb") as log:
        return subprocess.Popen(
            args,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            cwd=ROOT,
            preexec_fn=die_with_parent,  # noqa: PLW1509 - only prctl, async-signal-safe
        )


def stop_process(proc: subprocess.Popen[bytes] | None) -> None:
    if proc is None or proc.poll() is not None:
        return
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=10)


async def until(
    check: Callable[[], Any], *, timeout: float, what: str, interval: float = POLL
) -> float:
    """Poll ``check`` (sync or async) until truthy; return the monotonic time it held."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if isinstance(value, Awaitable):
            value = await value
        if value:
            return time.monotonic()
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:g}s waiting for {what}")
        await asyncio.sleep(interval)


async def bounded(coros: list[Awaitable[Any]], limit: int) -> None:
    gate = asyncio.Semaphore(limit)

    async def one(coro: Awaitable[Any]) -> None:
        async with gate:
            await coro

    await asyncio.gather(*(one(c) for c in coros))


async def event_writes(client: KubeClient) -> int:
    """Writes of the manager's Event recorder: a POST per Event, a PATCH per repeat."""
    events = await client.list_all(EVENTS, NAMESPACE)
    return sum(
        int(e.get("count") or 1)
        for e in events
        if (e.get("source") or {}).get("component") == DEFAULT_COMPONENT
    )


async def admitted(client: KubeClient, manager: Manager) -> bool:
    """Whether a dry-run InferenceService create passes the chart's webhooks (served by the
    manager through its EndpointSlice); nothing is stored, and the manager writes nothing."""
    manager.check()
    try:
        await client.create(
            INFERENCE_SERVICES, service_body("admission-probe", 1), NAMESPACE, dryRun="All"
        )
    except ServerError:  # "failed calling webhook": the endpoint isn't reachable yet
        return False
    return True


# -- the phases ----------------------------------------------------------------------------------


def apiserver_metrics(plane: ControlPlane) -> Metrics:
    """The API server's own ``/metrics`` (admin client certificate)."""
    assert plane.ca_path and plane.client_cert_path and plane.client_key_path
    context = ssl.create_default_context(cafile=str(plane.ca_path))
    context.load_cert_chain(str(plane.client_cert_path), str(plane.client_key_path))
    with urllib.request.urlopen(plane.url + "/metrics", timeout=30, context=context) as answer:
        return Metrics(answer.read().decode())


def server_writes(after: Metrics, before: Metrics) -> dict[str, int]:
    """Writes the API server served, by ``VERB resource[/subresource]`` (every client); those
    it refused get their code appended, ``PUT inferenceservices/status (409)``."""

    def by_target(metrics: Metrics) -> dict[str, float]:
        out: dict[str, float] = defaultdict(float)
        for sample in metrics.samples:
            verb = sample.labels.get("verb", "")
            if sample.name == "apiserver_request_total" and verb in (*WRITE_METHODS, "APPLY"):
                target = sample.labels.get("resource", "")
                if sample.labels.get("subresource"):
                    target += "/" + sample.labels["subresource"]
                code = sample.labels.get("code", "")
                suffix = "" if code.startswith("2") else f" ({code})"
                out[f"{verb} {target}{suffix}"] += sample.value
        return out

    return delta(by_target(after), by_target(before))


@dataclass
class Window:
    """What the manager (and the API server) had done by one point in time."""

    at: float
    metrics: Metrics
    cpu: float
    events: int
    server: Metrics
    processes: dict[str, float]

    @classmethod
    async def take(
        cls, client: KubeClient, manager: Manager, plane: ControlPlane, pids: Mapping[str, int]
    ) -> Window:
        events = await event_writes(client)
        server = await asyncio.to_thread(apiserver_metrics, plane)
        processes = {name: process_cpu_seconds(pid) for name, pid in pids.items()}
        return cls(
            time.monotonic(), manager.metrics(), manager.cpu_seconds(), events, server, processes
        )

    def process_cpu(self, before: Window) -> dict[str, float]:
        return {
            name: round(seconds - before.processes.get(name, 0.0), 1)
            for name, seconds in self.processes.items()
        }

    def requests(self, before: Window) -> dict[str, int]:
        return delta(
            self.metrics.by("rest_client_requests_total", "method"),
            before.metrics.by("rest_client_requests_total", "method"),
        )

    def reconciles(self, before: Window) -> dict[str, int]:
        return delta(
            self.metrics.by("controller_runtime_reconcile_total", "controller"),
            before.metrics.by("controller_runtime_reconcile_total", "controller"),
        )

    def counter(self, before: Window, name: str) -> float:
        return self.metrics.total(name) - before.metrics.total(name)


async def converge(
    client: KubeClient,
    manager: Manager,
    plane: ControlPlane,
    *,
    services: int,
    engines: int,
    timeout: float,
    pids: Mapping[str, int],
) -> dict[str, Any]:
    names = [f"svc-{i:04d}" for i in range(services)]
    # A watch, not a poll: every InferenceService's first Ready version, when it arrives,
    # without loading the API server with lists while it serves the manager.
    ready_at: dict[str, float] = {}

    def seen(isvc: Obj) -> None:
        name = isvc["metadata"]["name"]
        if name not in ready_at and ready(isvc):
            ready_at[name] = time.monotonic()

    trace = StatusTrace()

    def updated(old: Obj, new: Obj) -> None:
        seen(new)
        trace.isvc_update(old, new)

    informers = InformerFactory(client)
    informers.informer(INFERENCE_SERVICES, namespace=NAMESPACE).add_event_handler(
        Handlers(on_add=seen, on_update=updated)
    )
    informers.informer(INFERENCE_REPLICAS, namespace=NAMESPACE).add_event_handler(
        Handlers(on_update=trace.irep_update)
    )
    informers.start()
    try:
        if not await informers.wait_for_cache_sync(timeout=60):
            raise RuntimeError("the bench's InferenceService informer didn't sync")
        result = await _converge(
            client,
            manager,
            plane,
            names=names,
            engines=engines,
            timeout=timeout,
            ready_at=ready_at,
            pids=pids,
        )
        result["status_writes_seen"] = trace.report()
        return result
    finally:
        await informers.stop()


async def _converge(
    client: KubeClient,
    manager: Manager,
    plane: ControlPlane,
    *,
    names: list[str],
    engines: int,
    timeout: float,
    ready_at: dict[str, float],
    pids: Mapping[str, int],
) -> dict[str, Any]:
    services = len(names)
    before = await Window.take(client, manager, plane, pids)
    start = time.monotonic()
    await bounded(
        [client.create(INFERENCE_SERVICES, service_body(n, engines), NAMESPACE) for n in names], 50
    )
    created = time.monotonic()

    def all_ready() -> bool:
        manager.check()
        return len(ready_at) == services

    done = await until(all_ready, timeout=timeout, what=f"{services} InferenceServices Ready")
    done = max(ready_at.values())
    at_ready = await Window.take(client, manager, plane, pids)

    # The Event recorder writes on after the last Ready; wait until the manager writes
    # nothing more (its write count unchanged for 5 s), so the counts below are complete.
    writes_seen: list[tuple[float, int]] = []

    def quiet() -> bool:
        now = writes_of(manager.metrics().by("rest_client_requests_total", "method"))
        writes_seen.append((time.monotonic(), now))
        last = [count for _, count in writes_seen[-6:]]
        return len(last) == 6 and len(set(last)) == 1

    await until(quiet, timeout=1800, what="the manager's writes to stop", interval=1.0)
    last_write = next(
        (at for at, count in reversed(writes_seen) if count != writes_seen[-1][1]), done
    )
    settled = await Window.take(client, manager, plane, pids)

    seconds = done - start
    instances = services * engines
    requests = settled.requests(before)
    writes = writes_of(requests)
    events = settled.events - before.events
    controller_writes = writes - events
    minimum = services * min_writes(engines)
    bound = max(0.0, minimum - BURST) / QPS
    times = sorted(t - start for t in ready_at.values())
    return {
        "services": services,
        "instances": instances,
        "seconds": round(seconds, 2),
        "create_seconds": round(created - start, 2),
        "ready_seconds_p50": round(times[len(times) // 2], 2),
        "ready_seconds_p90": round(times[min(len(times) - 1, math.ceil(len(times) * 0.9) - 1)], 2),
        "ready_seconds_first": round(times[0], 2),
        "bound_seconds": round(bound, 2),
        "ratio_to_bound": round(seconds / bound, 2) if bound else None,
        "issue_bound_seconds": round(minimum / QPS, 2),
        "ratio_to_issue_bound": round(seconds / (minimum / QPS), 2) if minimum else None,
        "requests_by_method": requests,
        "requests_by_method_until_ready": at_ready.requests(before),
        "writes_after_ready": writes_of(settled.requests(at_ready)),
        "writes_stopped_seconds_after_ready": round(max(0.0, last_write - done), 1),
        "writes_total": writes,
        "event_writes": events,
        "events_dropped": round(settled.counter(before, "omed_events_dropped_total")),
        "controller_writes": controller_writes,
        "controller_writes_per_instance": round(controller_writes / instances, 2),
        "minimum_writes": minimum,
        "minimum_writes_per_instance": round(minimum / instances, 2),
        "bound_of_controller_writes_made_seconds": round(
            max(0.0, controller_writes - BURST) / QPS, 2
        ),
        "api_server_writes_by_target": server_writes(settled.server, before.server),
        "request_seconds_mean_until_ready": round(
            at_ready.counter(before, "rest_client_request_duration_seconds_sum")
            / max(1.0, at_ready.counter(before, "rest_client_request_duration_seconds_count")),
            3,
        ),
        "limiter_wait_seconds_until_ready": round(
            at_ready.counter(before, "rest_client_rate_limiter_duration_seconds_sum"), 1
        ),
        "reconciles_until_ready": at_ready.reconciles(before),
        "manager_cpu_seconds_until_ready": round(at_ready.cpu - before.cpu, 1),
        "cpu_seconds_until_ready_by_process": at_ready.process_cpu(before),
        "manager_rss_kib": manager.rss_kib(),
    }


async def idle(manager: Manager, *, seconds: float) -> dict[str, Any]:
    before, cpu_before, start = manager.metrics(), manager.cpu_seconds(), time.monotonic()
    await asyncio.sleep(seconds)  # the measurement window itself, not a synchronisation
    after, cpu_after, elapsed = manager.metrics(), manager.cpu_seconds(), time.monotonic() - start
    requests = delta(
        after.by("rest_client_requests_total", "method"),
        before.by("rest_client_requests_total", "method"),
    )
    return {
        "seconds": round(elapsed, 1),
        "writes": writes_of(requests),
        "requests_by_method": requests,
        "reconciles": delta(
            after.by("controller_runtime_reconcile_total", "controller"),
            before.by("controller_runtime_reconcile_total", "controller"),
        ),
        "manager_cpu_seconds": round(cpu_after - cpu_before, 2),
        "manager_cpu_per_second": (cpu_after - cpu_before) / elapsed,
    }


async def resync(client: KubeClient, manager: Manager, *, idle_cpu_rate: float) -> dict[str, Any]:
    replicas = await client.list_all(INFERENCE_REPLICAS, NAMESPACE)
    before, cpu_before, start = manager.metrics(), manager.cpu_seconds(), time.monotonic()
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
    expected = 2 * len(replicas)  # one InferenceReplica and one InferenceService reconcile each
    total = before.total("controller_runtime_reconcile_total")
    seen: list[float] = []

    def settled() -> bool:
        # Done when every expected reconcile ran and the count held still for 2 s.
        now = manager.metrics().total("controller_runtime_reconcile_total")
        seen.append(now)
        window = seen[-int(2.0 / POLL) - 1 :]
        return now - total >= expected and len(window) > 2.0 / POLL and len(set(window)) == 1

    done = await until(settled, timeout=300, what="the resync's reconciles")
    after, cpu_after = manager.metrics(), manager.cpu_seconds()
    elapsed = done - start
    reconciles = round(after.total("controller_runtime_reconcile_total") - total)
    cpu = cpu_after - cpu_before
    idle_share = idle_cpu_rate * elapsed
    requests = delta(
        after.by("rest_client_requests_total", "method"),
        before.by("rest_client_requests_total", "method"),
    )
    return {
        "objects_touched": len(replicas),
        "reconciles": reconciles,
        "reconciles_by_controller": delta(
            after.by("controller_runtime_reconcile_total", "controller"),
            before.by("controller_runtime_reconcile_total", "controller"),
        ),
        "writes": writes_of(requests),
        "window_seconds": round(elapsed, 1),
        "manager_cpu_seconds": round(cpu, 3),
        "idle_cpu_in_window_seconds": round(idle_share, 3),
        "cpu_ms_per_noop_reconcile": round(1000 * (cpu - idle_share) / max(reconciles, 1), 3),
        "cpu_ms_per_noop_reconcile_raw": round(1000 * cpu / max(reconciles, 1), 3),
    }


async def run(args: argparse.Namespace, plane: ControlPlane, workdir: Path) -> dict[str, Any]:
    kubeconfig = str(plane.kubeconfig_path)
    pods = args.services * args.engines
    if pods > args.nodes * args.gpus_per_node:
        raise SystemExit(f"{pods} one-GPU pods don't fit {args.nodes} x {args.gpus_per_node} GPUs")
    pods_per_node = max(110, 2 * args.gpus_per_node)
    simulator: subprocess.Popen[bytes] | None = None
    manager: Manager | None = None
    install = OmeInstall(plane, workdir=workdir / "install", namespace=MANAGER_NAMESPACE)
    async with KubeClient(await load_config(kubeconfig), qps=2000, burst=4000) as client:
        try:
            install_began = time.monotonic()
            await asyncio.to_thread(install.install_crds)
            await asyncio.to_thread(install.install, chart_values(args.workers))
            install_seconds = time.monotonic() - install_began
            await client.create(NAMESPACES, {"metadata": {"name": NAMESPACE}})
            await client.create(SERVING_RUNTIMES, RUNTIME, NAMESPACE)
            simulator = start_simulator(
                kubeconfig=kubeconfig,
                nodes=args.nodes,
                gpus=args.gpus_per_node,
                pods_per_node=pods_per_node,
                log_path=workdir / "simulator.log",
            )

            async def nodes_up() -> bool:
                if simulator is not None and simulator.poll() is not None:
                    raise RuntimeError("the node simulator exited")
                listed = await client.list_page(
                    NODES, labelSelector=f"sim.omed.dev/pool={NODE_PREFIX}"
                )
                return bool(len(listed.get("items") or []) == args.nodes)

            await until(nodes_up, timeout=120, what="the simulated nodes")
            manager = await asyncio.to_thread(
                Manager, install, log_path=workdir / "manager.log", profile=args.profile_manager
            )
            await until(manager.ready, timeout=180, what="the manager's /readyz")
            await until(
                lambda: admitted(client, manager),
                timeout=60,
                what="the API server to reach the manager's webhook",
            )
            converged = await converge(
                client,
                manager,
                plane,
                services=args.services,
                engines=args.engines,
                timeout=args.timeout,
                pids={
                    "manager": manager.proc.pid,
                    "apiserver": pid_of(plane, "apiserver"),
                    "etcd": pid_of(plane, "etcd"),
                    "scheduler": pid_of(plane, "scheduler"),
                    "controller_manager": pid_of(plane, "controller-manager"),
                    "simulator": simulator.pid,
                    "bench": os.getpid(),
                },
            )
            quiet = await idle(manager, seconds=args.idle)
            noop = await resync(client, manager, idle_cpu_rate=quiet["manager_cpu_per_second"])
            quiet["manager_cpu_per_second"] = round(quiet["manager_cpu_per_second"], 4)
            return {
                "manager": {
                    "user": install.user,
                    "configmap": f"{MANAGER_NAMESPACE}/{install.configmap_name()}",
                    "args": manager.args,
                    "install_seconds": round(install_seconds, 1),
                },
                "converge": converged,
                "idle": quiet,
                "noop_resync": noop,
                "simulator": {
                    "nodes": args.nodes,
                    "gpus_per_node": args.gpus_per_node,
                    "pods_per_node": pods_per_node,
                },
            }
        finally:
            if manager is not None:
                await asyncio.to_thread(manager.stop)
            stop_process(simulator)


def add_fleet_arguments(parser: argparse.ArgumentParser) -> None:
    """The fleet's flags, shared with ``converge_floor.py``."""
    parser.add_argument("--services", type=int, default=200)
    parser.add_argument("--engines", type=int, default=4, help="engine Instances per service")
    parser.add_argument("--nodes", type=int, default=25)
    parser.add_argument("--gpus-per-node", type=int, default=32)
    parser.add_argument("--timeout", type=float, default=1800.0, help="seconds to converge")


def run_and_print(
    *,
    benchmark: str,
    run_on: Callable[[ControlPlane, Path], Coroutine[Any, Any, dict[str, Any]]],
    flags: dict[str, Any],
    keep_logs: bool = False,
) -> None:
    """Run ``run_on`` against a fresh control plane and a work directory, both removed after
    (the directory kept with ``keep_logs``), and print its results as JSON with the machine's
    facts; shared with ``converge_floor.py``."""
    binaries = ensure_binaries()
    plane = ControlPlane(binaries)
    plane.start()
    workdir = Path(tempfile.mkdtemp(prefix=f"omed-bench-{benchmark.replace('_', '-')}-"))
    try:
        load_before = os.getloadavg()
        results = asyncio.run(run_on(plane, workdir))
        load_after = os.getloadavg()
    finally:
        plane.stop()
        if keep_logs:
            print(f"logs kept in {workdir}", file=sys.stderr)
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    print(
        json.dumps(
            {
                "benchmark": benchmark,
                "kubernetes": binaries.kubernetes_version,
                "cpus": os.cpu_count(),
                "python": sys.version.split()[0],
                "load_average_1m": {"before": load_before[0], "after": load_after[0]},
                "flags": flags,
                **results,
            },
            indent=2,
        )
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_fleet_arguments(parser)
    parser.add_argument(
        "--workers", type=int, default=WORKERS, help="workers per controller (diagnostics)"
    )
    parser.add_argument("--idle", type=float, default=60.0, help="seconds of idle measurement")
    parser.add_argument("--keep-logs", action="store_true", help="keep the manager's log")
    parser.add_argument(
        "--profile-manager",
        type=Path,
        metavar="FILE",
        help="run the manager under cProfile and write its profile to FILE (slows it down)",
    )
    args = parser.parse_args()
    run_and_print(
        benchmark="converge",
        run_on=lambda plane, workdir: run(args, plane, workdir),
        flags={
            "kube_api_qps": QPS,
            "kube_api_burst": BURST,
            "workers_per_controller": args.workers,
            "leader_elect": False,
        },
        keep_logs=args.keep_logs,
    )


if __name__ == "__main__":
    main()
