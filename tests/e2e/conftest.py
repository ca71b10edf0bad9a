"""Run the manager as a subprocess against the session's control plane.

Fixtures (the helpers are reached through them, as conftest modules aren't importable):

* ``manager_config``: a valid ``inferenceservice-config`` ConfigMap in the test's namespace
  (the chart's entries); yields ``set_entries(**documents)`` to change it.
* ``managers``: a :class:`ManagerLauncher`. ``managers.start(*args)`` starts
  ``python -m omed`` with the session kubeconfig, free ports for metrics and probes,
  ``POD_NAMESPACE`` (and ``POD_NAME``) set, and by default ``--leader-elect`` with the Lease
  in the test's namespace and the short test timings (:data:`LEASE`, :data:`RENEW`,
  :data:`RETRY`); the extra arguments come last, so they win. It returns a
  :class:`ManagerProcess`; every process is killed at teardown. ``managers.run(*args)``
  runs one to completion; ``managers.wait_until`` polls with a timeout.

A :class:`ManagerProcess` writes its log to a file (never a pipe that could fill up), and
offers polling helpers with timeouts; nothing here sleeps for a fixed time to synchronise.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from _support import eventually

from omed.devcluster.controlplane import free_port

ROOT = Path(__file__).resolve().parents[2]

LEASE, RENEW, RETRY = 3.0, 2.0, 0.5
"""Short leader election timings for tests: lease 3 s, renew deadline 2 s, retry 0.5 s."""
TIMING_ARGS = (
    f"--leader-elect-lease-duration={LEASE:g}s",
    f"--leader-elect-renew-deadline={RENEW:g}s",
    f"--leader-elect-retry-period={RETRY:g}s",
)
LEASE_NAME = "ome-controller-manager-leader-lock"

VALID_CONFIG: dict[str, Any] = {
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
"""The chart's entries, one JSON document per key."""


async def wait_until(
    check: Callable[[], Any], *, timeout: float, what: str, interval: float = 0.05
) -> Any:
    """Poll ``check`` (sync or async) until it returns something truthy; return that."""
    return await eventually(check, timeout=timeout, what=what, interval=interval)


def parse_metrics(text: str) -> dict[str, float]:
    """``name{labels}`` -> value for every sample line of a Prometheus text page."""
    samples: dict[str, float] = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        name, _, value = line.rpartition(" ")
        samples[name] = float(value)
    return samples


@dataclass
class ManagerProcess:
    """One ``python -m omed`` subprocess and where to reach it."""

    name: str
    """Its ``POD_NAME``: the part of the Lease holder identity before the ``_``."""
    args: list[str]
    log_path: Path
    metrics_port: int
    health_port: int
    proc: subprocess.Popen[bytes]
    started_at: float = field(default_factory=time.monotonic)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def log_lines(self, message: str) -> list[str]:
        return [line for line in self.log().splitlines() if message in line]

    def running(self) -> bool:
        return self.proc.poll() is None

    def _get(self, port: int, path: str) -> tuple[int, str] | None:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=2) as answer:
                return answer.status, answer.read().decode()
        except urllib.error.HTTPError as err:
            return err.code, err.read().decode()
        except (OSError, urllib.error.URLError):
            return None

    def probe(self, path: str) -> tuple[int, str] | None:
        """GET ``path`` on the health probe server: (status, body), or None if unreachable."""
        return self._get(self.health_port, path)

    def metrics(self) -> dict[str, float] | None:
        answer = self._get(self.metrics_port, "/metrics")
        if answer is None or answer[0] != 200:
            return None
        return parse_metrics(answer[1])

    def master_status(self) -> float | None:
        """This replica's ``leader_election_master_status`` for the manager's Lease."""
        samples = self.metrics()
        if samples is None:
            return None
        return samples.get(f'leader_election_master_status{{name="{LEASE_NAME}"}}')

    def is_leader(self) -> bool:
        return self.master_status() == 1.0

    def signal(self, sig: int) -> None:
        if self.running():
            self.proc.send_signal(sig)

    def kill(self) -> None:
        self.signal(signal.SIGKILL)

    async def wait_exit(self, *, timeout: float) -> int:
        """Wait (polling) for the process to exit; return its exit code."""
        await wait_until(lambda: not self.running(), timeout=timeout, what=f"pid {self.pid} exit")
        code = self.proc.returncode
        assert code is not None
        return code

    async def wait_log(self, message: str, *, timeout: float) -> str:
        """Wait for a log line containing ``message``; return the first such line."""
        lines: list[str] = await wait_until(
            lambda: self.log_lines(message) or (None if self.running() else self._exited(message)),
            timeout=timeout,
            what=f"log line {message!r}",
        )
        return lines[0]

    def _exited(self, message: str) -> None:
        raise AssertionError(
            f"manager exited ({self.proc.returncode}) without logging {message!r}:\n{self.log()}"
        )

    async def wait_ready(self, *, timeout: float = 30.0) -> None:
        def ready() -> bool:
            if not self.running():
                raise AssertionError(f"manager exited ({self.proc.returncode}):\n{self.log()}")
            answer = self.probe("/readyz")
            return answer is not None and answer[0] == 200

        await wait_until(ready, timeout=timeout, what=f"pid {self.pid} /readyz")


class ManagerLauncher:
    """Starts managers for one test (the ``managers`` fixture); see the module docstring."""

    lease = LEASE
    renew = RENEW
    retry = RETRY
    lease_name = LEASE_NAME
    wait_until = staticmethod(wait_until)

    def __init__(self, *, kubeconfig: str, namespace: str, log_dir: Path) -> None:
        self.kubeconfig = kubeconfig
        self.namespace = namespace
        self._log_dir = log_dir
        self.started: list[ManagerProcess] = []

    def base_args(self, *, leader_elect: bool) -> tuple[list[str], int, int]:
        metrics_port, health_port = free_port(), free_port()
        args = [
            f"--kubeconfig={self.kubeconfig}",
            f"--metrics-bind-address=127.0.0.1:{metrics_port}",
            f"--health-probe-addr=127.0.0.1:{health_port}",
            f"--leader-election-namespace={self.namespace}",
        ]
        if leader_elect:
            args += ["--leader-elect", *TIMING_ARGS]
        return args, metrics_port, health_port

    def env(self, name: str, extra: Mapping[str, str] | None) -> dict[str, str]:
        return {
            **os.environ,
            "POD_NAMESPACE": self.namespace,
            "POD_NAME": name,
            **(extra or {}),
        }

    def start(
        self,
        *extra: str,
        leader_elect: bool = True,
        name: str | None = None,
        env: Mapping[str, str] | None = None,
    ) -> ManagerProcess:
        """Start a manager; ``extra`` arguments come last, so they win."""
        args, metrics_port, health_port = self.base_args(leader_elect=leader_elect)
        args += list(extra)
        label = name or f"manager-{len(self.started)}"
        log_path = self._log_dir / f"{label}.log"
        with log_path.open("wb") as log_file:
            proc = subprocess.Popen(
                [sys.executable, "-m", "omed", *args],
                stdout=log_file,
                stderr=subprocess.STDOUT,
                env=self.env(label, env),
                cwd=ROOT,
            )
        process = ManagerProcess(
            name=label,
            args=args,
            log_path=log_path,
            metrics_port=metrics_port,
            health_port=health_port,
            proc=proc,
        )
        self.started.append(process)
        return process

    def run(
        self,
        *args: str,
        base: bool = True,
        leader_elect: bool = True,
        env: Mapping[str, str] | None = None,
        timeout: float = 60.0,
    ) -> subprocess.CompletedProcess[str]:
        """Run a manager to completion (flag errors, start-up failures). With ``base``, the
        arguments of :meth:`start` come first; without it, only ``args``."""
        argv = self.base_args(leader_elect=leader_elect)[0] if base else []
        return subprocess.run(
            [sys.executable, "-m", "omed", *argv, *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            env=self.env("manager-run", env),
            cwd=ROOT,
            check=False,
        )

    def stop_all(self) -> None:
        for process in self.started:
            process.kill()
            process.proc.wait(timeout=10)


@pytest.fixture
def managers(kubeconfig: str, namespace: str, tmp_path: Path) -> Iterator[ManagerLauncher]:
    """A :class:`ManagerLauncher` for the test's namespace; kills what it started."""
    launcher = ManagerLauncher(kubeconfig=kubeconfig, namespace=namespace, log_dir=tmp_path)
    try:
        yield launcher
    finally:
        launcher.stop_all()


@pytest.fixture
async def manager_config(
    kube: Any, namespace: str, crds_installed: None
) -> AsyncIterator[Callable[..., Awaitable[None]]]:
    """Create the chart's ``inferenceservice-config``; yield ``set_entries(**documents)``,
    which replaces entries (a JSON-able value, a raw string, or None to delete)."""
    from omed.kube.resources import CONFIGMAPS

    data = {key: json.dumps(value) for key, value in VALID_CONFIG.items()}
    await kube.create(
        CONFIGMAPS,
        {"metadata": {"name": "inferenceservice-config", "namespace": namespace}, "data": data},
        namespace,
    )

    async def set_entries(**entries: Any) -> None:
        current = await kube.get(CONFIGMAPS, "inferenceservice-config", namespace)
        new = dict(current.get("data") or {})
        for key, value in entries.items():
            if value is None:
                new.pop(key, None)
            else:
                new[key] = value if isinstance(value, str) else json.dumps(value)
        current["data"] = new
        await kube.replace(CONFIGMAPS, current, namespace)

    yield set_entries
