"""Leader failover time and idle memory of the manager process; print JSON.

    .venv/bin/python bench/failover.py [--timings chart,fast]

Starts a local control plane and installs omed with the real ``helm`` as an operator installs
it (:mod:`omed_devcluster.install`): the ``ome-crd`` chart, then ``ome-resources`` into
namespace ``ome``, whose ConfigMap, ServiceAccount and Lease namespace the managers use. Every
replica runs as the chart's Deployment runs it: ``python -m omed`` with the rendered
container's arguments and environment (``--leader-elect``, ``--webhook``, the chart's
``--kube-api-qps 100 --kube-api-burst 200`` and leader election timings), the token of the
chart's ServiceAccount (never the admin's) and its webhook certificate, with its webhook
published as an endpoint of the chart's Service while it runs; no flag is added. For each set
of leader election timings (lease duration / renew deadline / retry period), installed as the
chart's ``ome.controller.leaderElection`` values (a ``helm upgrade`` between sets):

* ``chart``: the chart's own values (60s / 40s / 8s today; the timings reported are read
  from the rendered arguments); ``fast``: 15s / 10s / 2s, the flags' defaults;
* ``kill -9``: replicas A (leader) and B (standby); A is killed with SIGKILL;
* ``SIGTERM``: B (now leader) and C (standby); B gets SIGTERM and releases the Lease.

The failover time runs from the signal until the standby's ``/metrics`` shows
``leader_election_master_status`` 1 (``to_metrics_seconds``), and until the Lease's
holderIdentity names the standby (``to_lease_seconds``), both polled every 50 ms.
Memory: the RSS (and peak RSS) of the first leader, 10 s after it became leader, with no
InferenceServices or InferenceReplicas in the cluster, and of a standby (both serving the
webhooks, as every replica of the chart does). Also reported: the time from process start to
``/readyz`` 200 for a standby (its webhook server listening included).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from omed.config.duration import parse_duration
from omed.kube.client import KubeClient, load_config
from omed.kube.resources import LEASES
from omed_devcluster.binaries import ensure_binaries
from omed_devcluster.controlplane import ControlPlane, free_port
from omed_devcluster.install import OmeInstall

ROOT = Path(__file__).resolve().parent.parent
NAMESPACE = "ome"
LEASE_NAME = "ome-controller-manager-leader-lock"
TIMINGS: dict[str, dict[str, str] | None] = {
    "chart": None,
    "fast": {"leaseDuration": "15s", "renewDeadline": "10s", "retryPeriod": "2s"},
}
"""``ome.controller.leaderElection`` values per set; None keeps the chart's."""
TIMING_FLAGS = (
    "--leader-elect-lease-duration",
    "--leader-elect-renew-deadline",
    "--leader-elect-retry-period",
)
POLL = 0.05
IDLE_SECONDS = 10.0


@dataclass
class Replica:
    name: str
    install: OmeInstall
    proc: subprocess.Popen[bytes]
    metrics_port: int
    health_port: int
    started: float

    def _get(self, port: int, path: str) -> tuple[int, str] | None:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=1) as answer:
                return answer.status, answer.read().decode()
        except urllib.error.HTTPError as err:
            return err.code, ""
        except OSError:
            return None

    def ready(self) -> bool:
        answer = self._get(self.health_port, "/readyz")
        return answer is not None and answer[0] == 200

    def leader(self) -> bool:
        answer = self._get(self.metrics_port, "/metrics")
        if answer is None:
            return False
        return f'leader_election_master_status{{name="{LEASE_NAME}"}} 1.0' in answer[1]

    def memory_kib(self) -> dict[str, int]:
        status = Path(f"/proc/{self.proc.pid}/status").read_text()
        values = {}
        for line in status.splitlines():
            key, _, rest = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                values[key] = int(rest.split()[0])
        return values

    def stop(self) -> None:
        """SIGKILL if still running; then withdraw its webhook endpoint, as a dead pod's."""
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=10)
        self.install.withdraw_endpoint(self.name)


def start_replica(name: str, *, install: OmeInstall, log_dir: Path) -> Replica:
    """Replica ``name`` of the chart's Deployment (:meth:`OmeInstall.manager_command`, no
    extra argument), its webhook published as an endpoint of the chart's Service."""
    metrics_port, health_port, webhook_port = free_port(), free_port(), free_port()
    argv, env = install.manager_command(
        name,
        metrics_port=metrics_port,
        health_port=health_port,
        webhook_port=webhook_port,
        python=sys.executable,
    )
    with (log_dir / f"{name}.log").open("wb") as log:
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=ROOT)
    replica = Replica(name, install, proc, metrics_port, health_port, time.monotonic())
    try:
        install.publish_endpoint(name, webhook_port)
    except BaseException:
        replica.stop()
        raise
    return replica


def rendered_timings(install: OmeInstall) -> tuple[float, float, float]:
    """Lease duration, renew deadline and retry period (seconds) in the rendered arguments
    (the last occurrence of each flag, as the manager reads them)."""
    found: dict[str, float] = {}
    for arg in install.spec.args:
        flag, _, value = arg.partition("=")
        if flag in TIMING_FLAGS:
            found[flag] = parse_duration(value)
    missing = [flag for flag in TIMING_FLAGS if flag not in found]
    if missing:
        raise RuntimeError(f"the chart's arguments have no {', '.join(missing)}")
    lease, renew, retry = (found[flag] for flag in TIMING_FLAGS)
    return lease, renew, retry


async def until(check: Any, *, timeout: float, what: str) -> float:
    """Poll every 50 ms; return the monotonic time it first held."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if asyncio.iscoroutine(value):
            value = await value
        if value:
            return time.monotonic()
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:g}s waiting for {what}")
        await asyncio.sleep(POLL)


async def holder(client: KubeClient) -> str:
    lease = await client.get(LEASES, LEASE_NAME, NAMESPACE)
    return str(lease["spec"].get("holderIdentity") or "")


async def failover(
    client: KubeClient, old: Replica, new: Replica, *, sig: signal.Signals, limit: float
) -> dict[str, float]:
    """Signal ``old`` (the leader); time until ``new`` shows leadership in metrics and Lease."""
    sent = time.monotonic()
    old.proc.send_signal(sig)
    seen: dict[str, float] = {}

    async def check() -> bool:
        if "metrics" not in seen and new.leader():
            seen["metrics"] = time.monotonic()
        if "lease" not in seen and (await holder(client)).startswith(f"{new.name}_"):
            seen["lease"] = time.monotonic()
        return len(seen) == 2

    await until(check, timeout=limit, what=f"{new.name} to lead")
    return {
        "to_metrics_seconds": round(seen["metrics"] - sent, 2),
        "to_lease_seconds": round(seen["lease"] - sent, 2),
    }


async def one_timing(
    client: KubeClient, install: OmeInstall, name: str, logs: Path
) -> dict[str, Any]:
    """Install the set's values over the chart's (``helm upgrade``); run its two failovers."""
    override = TIMINGS[name]
    values = {"ome": {"controller": {"leaderElection": override}}} if override else {}
    await asyncio.to_thread(install.install, values)
    lease, renew, retry = rendered_timings(install)
    result: dict[str, Any] = {
        "lease_duration_s": lease,
        "renew_deadline_s": renew,
        "retry_period_s": retry,
        "chart_args": list(install.spec.args),
    }
    limit = lease + 3 * retry + 30

    async def start(suffix: str) -> Replica:
        return await asyncio.to_thread(
            start_replica, f"{name}-{suffix}", install=install, log_dir=logs
        )

    a = await start("a")
    replicas = [a]
    try:
        led = await until(a.leader, timeout=lease + 60, what="the first leader")
        b = await start("b")
        replicas.append(b)
        ready = await until(b.ready, timeout=60, what="the standby's /readyz")
        result["standby_start_to_ready_seconds"] = round(ready - b.started, 2)
        await asyncio.sleep(max(0.0, led + IDLE_SECONDS - time.monotonic()))
        result["idle_leader_memory_kib"] = a.memory_kib()
        result["standby_memory_kib"] = b.memory_kib()
        result["kill_9"] = await failover(client, a, b, sig=signal.SIGKILL, limit=limit)
        await asyncio.to_thread(a.stop)  # reaped; its endpoint withdrawn
        c = await start("c")
        replicas.append(c)
        await until(c.ready, timeout=60, what="the second standby's /readyz")
        result["sigterm"] = await failover(client, b, c, sig=signal.SIGTERM, limit=limit)
        code = await asyncio.to_thread(b.proc.wait, 30)
        result["sigterm"]["old_leader_exit_code"] = code
    finally:
        for replica in replicas:
            await asyncio.to_thread(replica.stop)
        await client.delete(LEASES, LEASE_NAME, NAMESPACE)
    return result


async def run(plane: ControlPlane, names: list[str], workdir: Path) -> dict[str, Any]:
    kubeconfig = str(plane.kubeconfig_path)
    install = OmeInstall(plane, workdir=workdir / "install", namespace=NAMESPACE)
    await asyncio.to_thread(install.install_crds)
    async with KubeClient(await load_config(kubeconfig), qps=1000, burst=2000) as client:
        results: dict[str, Any] = {}
        for name in names:
            results[name] = await one_timing(client, install, name, workdir)
        return {"manager_user": install.user, "timings": results}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--timings", default="chart,fast", help="comma-separated: chart, fast")
    args = parser.parse_args()
    names = [name for name in args.timings.split(",") if name]
    unknown = sorted(set(names) - set(TIMINGS))
    if unknown:
        parser.error(f"unknown timings: {', '.join(unknown)} (choose from chart, fast)")
    binaries = ensure_binaries()
    plane = ControlPlane(binaries)
    plane.start()
    try:
        with tempfile.TemporaryDirectory(prefix="omed-bench-failover-") as workdir:
            results = asyncio.run(run(plane, names, Path(workdir)))
    finally:
        plane.stop()
    print(
        json.dumps(
            {
                "benchmark": "failover",
                "kubernetes": binaries.kubernetes_version,
                "cpus": os.cpu_count(),
                "python": sys.version.split()[0],
                "poll_interval_s": POLL,
                **results,
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
