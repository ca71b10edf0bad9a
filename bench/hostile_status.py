"""What a huge status costs the leader, and what admission sees meanwhile; print JSON.

    .venv/bin/python bench/hostile_status.py [--instances 20000] [--rate 100]

The hostile status: a standalone, paused InferenceReplica of 20,000 Instances whose ColumnarV2
status held 20,000 identical rows of 32 conditions each (6.6 KB of columns) cost the leader
14 s of CPU and 1 GiB, and the InferenceService webhook, served by the same event loop,
answered with a p99 of 13.3 s, past the chart's 10 s webhook timeout.

A fresh local control plane; omed installed with the real ``helm`` (:mod:`omed_devcluster.install`,
the chart's ColumnarV2 block with maxDecodedInstances 20000) and one manager replica run as
the chart's Deployment runs it (``bench/converge.py``'s :class:`Manager`: the rendered
arguments and environment, the chart's ServiceAccount token, ConfigMap and certificate;
``--leader-elect=false`` appended, so it leads at once). Then three phases, each under load:
``bench/loadgen`` (Go, built on first use) sends InferenceService CREATE reviews straight to
the manager's validating webhook port over TLS (the chart's CA, its Service's DNS name) at
``--rate`` requests a second, open loop, from before the phase's write until the leader has
been quiet for :data:`QUIET` seconds; the manager's CPU time (``/proc/<pid>/stat``, utime +
stime) and RSS are sampled every :data:`SAMPLE` seconds meanwhile.

1. ``admitted``: the paused InferenceReplica is created with ``--instances`` Instances and no
   status; the leader plans every Instance and writes their rows (one ``Ready`` condition
   each), then reads its own write back.
2. ``worst_admitted``: its status is replaced (through the status subresource) with the worst
   one the bounds admit: every row its own class (a distinct incarnation) with 8 conditions
   (53 cells a row, 1,060,000 in all, under the cell bound of 1,280,000).
3. ``hostile``: that status, 20,000 identical rows of 32 conditions (refused as ``size``).

Each phase reports the leader's passes over the replica (``controller_runtime_reconcile_total``
of the InferenceReplica controller), its CPU seconds in all and per pass (a manager that
serves the webhooks on its own loop has the requests' CPU, at their idle cost measured
first, taken out: ``webhook_cpu_taken_out_seconds``), the wall time of those passes
(``controller_runtime_reconcile_time_seconds``), its RSS before, at its peak and after (and
the delta), the webhook's p50/p99/max (from each request's due time, so a stalled server pays
for its queue), and the webhook server process's own CPU and RSS (``webhook_process``;
absent on a manager that serves the webhooks on its own loop).
For the figures before a change, run this script from another checkout (``git worktree add
DIR <commit>``, with this file, ``bench/converge.py`` and ``bench/loadgen/main.go`` copied
there): the manager runs from the checkout the script is in.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import os
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import orjson
from converge import (
    MANAGER_NAMESPACE,
    NAMESPACE,
    WORKERS,
    Manager,
    admitted,
    chart_values,
    process_cpu_seconds,
    run_and_print,
    until,
)
from webhook import ISVC_PATH, build_loadgen, percentile, review_body

from omed.kube.client import KubeClient, load_config
from omed.kube.resources import EVENTS, INFERENCE_REPLICAS, NAMESPACES
from omed.statuscodec import COLUMNAR_V2, encode_columnar, encoded_size
from omed_devcluster.controlplane import ControlPlane
from omed_devcluster.hostile import ready_rows
from omed_devcluster.install import OmeInstall

REPLICA = "huge"
SAMPLE = 0.1
QUIET = 3.0
"""Seconds of (almost) no manager CPU that end a phase."""
QUIET_CPU = 0.02
"""CPU seconds per second under which the manager counts as quiet."""
PHASE_TIMEOUT = 120.0
TEMPLATE = {"spec": {"containers": [{"name": "ome-container", "image": "ome/srt:1.0"}]}}


def rss_kib(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def webhook_child(pid: int) -> int | None:
    """The manager's webhook server process, if it runs one."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if int(stat.rpartition(")")[2].split()[1]) == pid and b"webhookchild" in cmdline:
            return int(entry.name)
    return None


def replica_passes(manager: Manager) -> float:
    """Reconciles the InferenceReplica controller has finished, whatever their result."""
    return (
        manager.metrics()
        .by("controller_runtime_reconcile_total", "controller")
        .get("inferencereplica", 0.0)
    )


def reconcile_seconds(manager: Manager) -> float:
    """Wall seconds the InferenceReplica controller's reconciles have taken, in all."""
    return (
        manager.metrics()
        .by("controller_runtime_reconcile_time_seconds_sum", "controller")
        .get("inferencereplica", 0.0)
    )


class Load:
    """``bench/loadgen`` against the manager's webhook port, in a thread."""

    def __init__(self, *, port: int, ca: Path, server_name: str, bodies: Path, pid: int) -> None:
        self.argv = [
            str(build_loadgen()),
            f"-url=https://127.0.0.1:{port}{ISVC_PATH}",
            f"-ca={ca}",
            f"-servername={server_name}",
            f"-bodies={bodies}",
            "-connections=2",
            "-warmup=50",
            f"-pid={pid}",
        ]

    async def run(self, *, rate: float, seconds: float) -> dict[str, Any]:
        done = await asyncio.to_thread(
            subprocess.run,
            [*self.argv, f"-rate={rate}", f"-duration={seconds}"],
            check=True,
            capture_output=True,
        )
        report = orjson.loads(done.stdout)
        in_order = [us / 1000 for us in report["latency_us"]]
        latencies = sorted(in_order)
        # The client's own lateness (due time to the start of its send) is part of each
        # latency: on a machine whose CPUs are busy it can be much of the tail. From the send
        # on, the time is the server's (and the network's): both are given.
        lateness = [us / 1000 for us in report["lateness_us"]]
        from_send = sorted(total - late for total, late in zip(in_order, lateness, strict=True))
        slow_by_second: dict[str, int] = {}
        for index, value in enumerate(in_order):
            if value > 10.0:
                second = str(int(index / rate))
                slow_by_second[second] = slow_by_second.get(second, 0) + 1
        return {
            "server_cpu_seconds": round(report["server_cpu_ticks"] / os.sysconf("SC_CLK_TCK"), 3),
            "sent": report["sent"],
            "failed": report["failed"],
            "p50_ms": round(percentile(latencies, 0.50), 2),
            "p99_ms": round(percentile(latencies, 0.99), 2),
            "max_ms": round(latencies[-1], 2),
            "mean_ms": round(statistics.fmean(latencies), 2),
            "over_10ms": sum(1 for v in latencies if v > 10.0),
            "over_10ms_by_second": slow_by_second,
            "client_lateness_p99_ms": round(percentile(sorted(lateness), 0.99), 2),
            "from_send_p50_ms": round(percentile(from_send, 0.50), 2),
            "from_send_p99_ms": round(percentile(from_send, 0.99), 2),
            "first_error": report.get("first_error") or None,
        }


@dataclass(frozen=True)
class Idle:
    """The manager under the webhook load alone: its CPU per second (the quiet threshold is
    above it), and, when it serves the webhooks itself, their CPU per request (taken out of
    the leader's)."""

    cpu_per_second: float
    webhook_cpu_per_request: float


async def phase(
    name: str,
    *,
    manager: Manager,
    load: Load,
    rate: float,
    write: Any,
    done: Any,
    load_seconds: float,
    idle: Idle,
) -> dict[str, Any]:
    """Run ``write`` under load; sample until ``done()`` holds and the leader is quiet."""
    pid = manager.proc.pid
    child = webhook_child(pid)
    passes_before, wall_before = replica_passes(manager), reconcile_seconds(manager)
    # The load runs for the whole phase: started first, given a generous duration, and the
    # phase waits for it (its figures cover the quiet tail too, which only dilutes them).
    loading = asyncio.create_task(load.run(rate=rate, seconds=load_seconds))
    await asyncio.sleep(1.0)
    cpu_before, rss_before = process_cpu_seconds(pid), rss_kib(pid)
    child_cpu_before = process_cpu_seconds(child) if child else 0.0
    child_rss_before = rss_kib(child) if child else 0
    began = time.monotonic()
    await write()
    peak, child_peak = rss_before, child_rss_before
    quiet_since: float | None = None
    last_cpu, last_at = cpu_before, time.monotonic()
    finished = False
    while time.monotonic() - began < PHASE_TIMEOUT:
        await asyncio.sleep(SAMPLE)
        now, cpu = time.monotonic(), process_cpu_seconds(pid)
        peak = max(peak, rss_kib(pid))
        if child:
            child_peak = max(child_peak, rss_kib(child))
        rate_now = (cpu - last_cpu) / max(now - last_at, 1e-6)
        last_cpu, last_at = cpu, now
        finished = finished or bool(await done())
        if finished and rate_now < idle.cpu_per_second + QUIET_CPU:
            quiet_since = quiet_since or now
            if now - quiet_since >= QUIET:
                break
        else:
            quiet_since = None
    busy = (quiet_since or time.monotonic()) - began
    cpu = process_cpu_seconds(pid) - cpu_before
    rss_after = rss_kib(pid)
    passes = replica_passes(manager) - passes_before
    wall = reconcile_seconds(manager) - wall_before
    webhook = await loading
    # The requests answered while the leader worked, at the idle cost of each, when the
    # manager serves them itself: not the reconciles' CPU.
    webhook_share = idle.webhook_cpu_per_request * rate * (time.monotonic() - began)
    webhook_share = min(webhook_share, idle.webhook_cpu_per_request * webhook["sent"])
    cpu = max(cpu - webhook_share, 0.0)
    out: dict[str, Any] = {
        "phase": name,
        "done": finished,
        "busy_seconds": round(busy, 2),
        "passes": int(passes),
        "leader_cpu_seconds": round(cpu, 3),
        "webhook_cpu_taken_out_seconds": round(webhook_share, 3),
        "cpu_per_pass_seconds": round(cpu / passes, 3) if passes else None,
        "reconcile_wall_seconds": round(wall, 3),
        "rss_mib": {
            "before": round(rss_before / 1024, 1),
            "peak": round(peak / 1024, 1),
            "after": round(rss_after / 1024, 1),
            "delta_peak": round((peak - rss_before) / 1024, 1),
        },
        "webhook": {"rate": rate, **webhook},
    }
    if child:
        out["webhook_process"] = {
            "pid": child,
            "cpu_seconds": round(process_cpu_seconds(child) - child_cpu_before, 3),
            "rss_mib": round(child_peak / 1024, 1),
        }
    return out


async def run(args: argparse.Namespace, plane: ControlPlane, workdir: Path) -> dict[str, Any]:
    kubeconfig = str(plane.kubeconfig_path)
    install = OmeInstall(plane, workdir=workdir / "install", namespace=MANAGER_NAMESPACE)
    manager: Manager | None = None
    async with KubeClient(await load_config(kubeconfig), qps=2000, burst=4000) as client:
        try:
            await asyncio.to_thread(install.install_crds)
            await asyncio.to_thread(install.install, chart_values(WORKERS))
            await client.create(NAMESPACES, {"metadata": {"name": NAMESPACE}})
            manager = await asyncio.to_thread(Manager, install, log_path=workdir / "manager.log")
            await until(manager.ready, timeout=180, what="the manager's /readyz")
            await until(lambda: admitted(client, manager), timeout=60, what="admission")
            secret_name = next(v for k, v, _ in install.spec.env if k == "SECRET_NAME" and v)
            secret = plane.request_json(
                "GET", f"/api/v1/namespaces/{MANAGER_NAMESPACE}/secrets/{secret_name}"
            )
            ca = workdir / "ca.crt"
            ca.write_bytes(base64.b64decode(secret["data"]["ca.crt"]))
            bodies = workdir / "bodies.jsonl"
            bodies.write_bytes(b"\n".join(review_body(f"uid-{i}") for i in range(256)) + b"\n")
            child = webhook_child(manager.proc.pid)
            load = Load(
                port=manager.webhook_port,
                ca=ca,
                server_name=f"{install.webhook_service}.{MANAGER_NAMESPACE}.svc",
                bodies=bodies,
                pid=child or manager.proc.pid,
            )
            n = args.instances
            cpu_before, began = manager.cpu_seconds(), time.monotonic()
            baseline = await load.run(rate=args.rate, seconds=10)
            idle_rate = (manager.cpu_seconds() - cpu_before) / (time.monotonic() - began)
            idle = Idle(
                cpu_per_second=idle_rate,
                webhook_cpu_per_request=0.0
                if child
                else baseline["server_cpu_seconds"] / baseline["sent"],
            )

            async def create() -> None:
                body = {
                    "apiVersion": "ome.io/v1beta1",
                    "kind": "InferenceReplica",
                    "metadata": {
                        "name": REPLICA,
                        "annotations": {"ome.io/controller-write": "true"},
                    },
                    "spec": {
                        "component": "engine",
                        "replicas": n,
                        "paused": True,
                        "runners": [{"name": "default", "template": TEMPLATE}],
                    },
                }
                await client.create(INFERENCE_REPLICAS, body, NAMESPACE)

            async def rows_stored() -> bool:
                irep = await client.get(INFERENCE_REPLICAS, REPLICA, NAMESPACE)
                status = irep.get("status") or {}
                columns = status.get("instanceStatusColumns") or {}
                return (
                    columns.get("rowCount") == n or len(status.get("instanceStatuses") or []) == n
                )

            def replace_with(columns: dict[str, Any]) -> Any:
                async def write() -> None:
                    irep = await client.get(INFERENCE_REPLICAS, REPLICA, NAMESPACE)
                    irep["status"] = {
                        "replicas": 0,
                        "instanceStatusEncoding": COLUMNAR_V2,
                        "instanceStatusColumns": columns,
                    }
                    await client.replace_status(INFERENCE_REPLICAS, irep, NAMESPACE)

                return write

            async def refused() -> bool:
                return any(
                    e.get("reason") == "InstanceStatusDecodeFailed"
                    and "(size)" in str(e.get("message"))
                    for e in await client.list_all(EVENTS, NAMESPACE)
                )

            async def rewritten() -> bool:  # the leader rewrote the rows with one condition
                irep = await client.get(INFERENCE_REPLICAS, REPLICA, NAMESPACE)
                columns = (irep.get("status") or {}).get("instanceStatusColumns") or {}
                return "conditions.1.type" not in (columns.get("columns") or {}) and bool(columns)

            worst = encode_columnar(ready_rows(n, conditions=8, distinct=True))
            hostile = encode_columnar(ready_rows(n, conditions=32))
            results = [
                await phase(
                    "admitted",
                    manager=manager,
                    load=load,
                    rate=args.rate,
                    write=create,
                    done=rows_stored,
                    load_seconds=args.load_seconds,
                    idle=idle,
                )
            ]
            results.append(
                await phase(
                    "worst_admitted",
                    manager=manager,
                    load=load,
                    rate=args.rate,
                    write=replace_with(worst),
                    done=rewritten,
                    load_seconds=args.load_seconds,
                    idle=idle,
                )
            )
            results[-1]["status_bytes"] = encoded_size(worst)
            results.append(
                await phase(
                    "hostile",
                    manager=manager,
                    load=load,
                    rate=args.rate,
                    write=replace_with(hostile),
                    done=lambda: _either(refused(), rewritten()),
                    load_seconds=args.load_seconds,
                    idle=idle,
                )
            )
            results[-1]["status_bytes"] = encoded_size(hostile)
            lines = manager.log_path.read_text(errors="replace").splitlines()
            refusal = [ln for ln in lines if "Cannot decode per-Instance status" in ln]
            return {
                "instances": n,
                "webhook_in_own_process": child is not None,
                "idle_webhook": {
                    "rate": args.rate,
                    **baseline,
                    "manager_cpu_per_second": round(idle.cpu_per_second, 4),
                },
                "phases": results,
                "refusal_log_line": refusal[0].split("\t", 3)[-1] if refusal else None,
            }
        finally:
            if manager is not None:
                await asyncio.to_thread(manager.stop)


async def _either(first: Any, second: Any) -> bool:
    """``first`` or ``second`` (both awaited): the hostile status refused, or (before the
    fix) decoded and rewritten."""
    one, two = await first, await second
    return bool(one or two)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--instances", type=int, default=20000)
    parser.add_argument("--rate", type=float, default=100.0, help="webhook requests a second")
    parser.add_argument(
        "--load-seconds", type=float, default=30.0, help="seconds of webhook load per phase"
    )
    parser.add_argument("--keep-logs", action="store_true", help="keep the manager's log")
    args = parser.parse_args()
    run_and_print(
        benchmark="hostile_status",
        run_on=lambda plane, workdir: run(args, plane, workdir),
        flags={
            "instances": args.instances,
            "rate": args.rate,
            "load_seconds": args.load_seconds,
            "leader_elect": False,
        },
        keep_logs=args.keep_logs,
    )


if __name__ == "__main__":
    main()
