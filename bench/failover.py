"""Leader failover time and idle memory of the manager process; print JSON.

    .venv/bin/python bench/failover.py [--timings chart,fast]

Starts a local control plane with omed's CRDs and a valid ``inferenceservice-config``, then,
for each set of leader election timings (lease duration / renew deadline / retry period):

* ``chart``: 60s / 40s / 8s, the chart's values; ``fast``: 15s / 10s / 2s, the flags'
  defaults;
* ``kill -9``: replicas A (leader) and B (standby); A is killed with SIGKILL;
* ``SIGTERM``: B (now leader) and C (standby); B gets SIGTERM and releases the Lease.

The failover time runs from the signal until the standby's ``/metrics`` shows
``leader_election_master_status`` 1 (``to_metrics_seconds``), and until the Lease's
holderIdentity names the standby (``to_lease_seconds``), both polled every 50 ms.
Memory: the RSS (and peak RSS) of the first leader, 10 s after it became leader, with no
InferenceServices or InferenceReplicas in the cluster, and of a standby. Also reported:
the time from process start to ``/readyz`` 200 for a standby.
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

from omed.devcluster.binaries import ensure_binaries
from omed.devcluster.controlplane import ControlPlane, free_port
from omed.devcluster.setup import install_crds
from omed.kube.client import KubeClient, load_config
from omed.kube.resources import CONFIGMAPS, LEASES, NAMESPACES

ROOT = Path(__file__).resolve().parent.parent
NAMESPACE = "ome-bench"
LEASE_NAME = "ome-controller-manager-leader-lock"
TIMINGS = {"chart": (60, 40, 8), "fast": (15, 10, 2)}
POLL = 0.05
IDLE_SECONDS = 10.0
CONFIG = {
    "omenativeStatus": {"instanceStatusEncoding": "ColumnarV2", "maxDecodedInstances": 20000},
    "eventRecorder": {"burstSize": 400, "refillInterval": "5s"},
    "lifecycle": {"scaleUpPodBatchSize": 50, "scaleDownPodBatchSize": "10%"},
}


@dataclass
class Replica:
    name: str
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
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=10)


def start_replica(
    name: str, *, kubeconfig: str, timings: tuple[int, int, int], log_dir: Path
) -> Replica:
    lease, renew, retry = timings
    metrics_port, health_port = free_port(), free_port()
    args = [
        f"--kubeconfig={kubeconfig}",
        f"--metrics-bind-address=127.0.0.1:{metrics_port}",
        f"--health-probe-addr=127.0.0.1:{health_port}",
        "--leader-elect",
        f"--leader-election-namespace={NAMESPACE}",
        f"--leader-elect-lease-duration={lease}s",
        f"--leader-elect-renew-deadline={renew}s",
        f"--leader-elect-retry-period={retry}s",
        "--kube-api-qps=100",
        "--kube-api-burst=200",
    ]
    with (log_dir / f"{name}.log").open("wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "omed", *args],
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, "POD_NAMESPACE": NAMESPACE, "POD_NAME": name},
            cwd=ROOT,
        )
    return Replica(name, proc, metrics_port, health_port, time.monotonic())


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
    client: KubeClient, kubeconfig: str, name: str, timings: tuple[int, int, int], logs: Path
) -> dict[str, Any]:
    lease = timings[0]
    result: dict[str, Any] = {
        "lease_duration_s": timings[0],
        "renew_deadline_s": timings[1],
        "retry_period_s": timings[2],
    }
    a = start_replica(f"{name}-a", kubeconfig=kubeconfig, timings=timings, log_dir=logs)
    replicas = [a]
    try:
        led = await until(a.leader, timeout=lease + 60, what="the first leader")
        b = start_replica(f"{name}-b", kubeconfig=kubeconfig, timings=timings, log_dir=logs)
        replicas.append(b)
        ready = await until(b.ready, timeout=60, what="the standby's /readyz")
        result["standby_start_to_ready_seconds"] = round(ready - b.started, 2)
        await asyncio.sleep(max(0.0, led + IDLE_SECONDS - time.monotonic()))
        result["idle_leader_memory_kib"] = a.memory_kib()
        result["standby_memory_kib"] = b.memory_kib()
        result["kill_9"] = await failover(
            client, a, b, sig=signal.SIGKILL, limit=lease + 3 * timings[2] + 30
        )
        c = start_replica(f"{name}-c", kubeconfig=kubeconfig, timings=timings, log_dir=logs)
        replicas.append(c)
        await until(c.ready, timeout=60, what="the second standby's /readyz")
        result["sigterm"] = await failover(
            client, b, c, sig=signal.SIGTERM, limit=lease + 3 * timings[2] + 30
        )
        code = b.proc.wait(timeout=30)
        result["sigterm"]["old_leader_exit_code"] = code
    finally:
        for replica in replicas:
            replica.stop()
        await client.delete(LEASES, LEASE_NAME, NAMESPACE)
    return result


async def run(plane: ControlPlane, names: list[str]) -> dict[str, Any]:
    kubeconfig = str(plane.kubeconfig_path)
    async with KubeClient(await load_config(kubeconfig), qps=1000, burst=2000) as client:
        await install_crds(client, ROOT / "deploy" / "crds")
        await client.create(NAMESPACES, {"metadata": {"name": NAMESPACE}})
        await client.create(
            CONFIGMAPS,
            {
                "metadata": {"name": "inferenceservice-config", "namespace": NAMESPACE},
                "data": {key: json.dumps(value) for key, value in CONFIG.items()},
            },
            NAMESPACE,
        )
        results: dict[str, Any] = {}
        with tempfile.TemporaryDirectory(prefix="omed-bench-failover-") as logs:
            for name in names:
                results[name] = await one_timing(
                    client, kubeconfig, name, TIMINGS[name], Path(logs)
                )
        return results


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--timings", default="chart,fast", help="comma-separated: chart, fast")
    args = parser.parse_args()
    names = [name for name in args.timings.split(",") if name]
    binaries = ensure_binaries()
    plane = ControlPlane(binaries)
    plane.start()
    try:
        results = asyncio.run(run(plane, names))
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
                "timings": results,
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
