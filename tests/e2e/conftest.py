"""Run the manager as the charts deploy it, as a subprocess against the session's control plane.

Fixtures (the helpers are reached through them, as conftest modules aren't importable):

* ``managers``: a :class:`ManagerLauncher`. On first use it installs ``ome-resources`` with
  the real helm into namespace ``ome`` with :data:`TEST_VALUES` (the short leader election
  timings :data:`LEASE`, :data:`RENEW`, :data:`RETRY` among them); ``managers.start(*args)``
  then starts ``python -m omed`` as a replica of the chart's Deployment would run
  (:mod:`omed_devcluster.install`: the rendered arguments and environment, the chart's
  ServiceAccount token, ConfigMap and webhook certificate, free ports for metrics, probes and
  webhooks, and the webhook published as an endpoint of the chart's Service); the extra
  arguments come last, so they win. It returns a :class:`ManagerProcess`; every process is
  killed, the chart uninstalled and the Lease removed at teardown. ``managers.run(*args)``
  runs one to completion; ``managers.wait_until`` polls with a timeout.
* ``manager_config``: the chart installed; yields ``set_entries(**documents)`` to edit its
  ``inferenceservice-config`` as an operator would.

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

from omed_devcluster.controlplane import free_port

ROOT = Path(__file__).resolve().parents[2]

LEASE, RENEW, RETRY = 3.0, 2.0, 0.5
"""Short leader election timings for tests: lease 3 s, renew deadline 2 s, retry 0.5 s."""
LEASE_NAME = "ome-controller-manager-leader-lock"

TEST_VALUES: dict[str, Any] = {
    "ome": {
        "controller": {
            "leaderElection": {
                "leaseDuration": f"{LEASE:g}s",
                "renewDeadline": f"{RENEW:g}s",
                "retryPeriod": f"{RETRY:g}s",
            },
            "lifecycle": {"scaleUpPodBatchSize": 50, "scaleDownPodBatchSize": "10%"},
            "deploy": {"defaultDeploymentMode": "OMENative"},
        }
    }
}
"""The ome-resources values the tests install with, over the chart's own: the short
leader election timings, example batch sizes (scale up 50 pods, scale down 10%), OMENative
as the default mode."""


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

    def metrics_text(self) -> str | None:
        """The ``/metrics`` page as served, or None if unreachable."""
        answer = self._get(self.metrics_port, "/metrics")
        if answer is None or answer[0] != 200:
            return None
        return answer[1]

    def metrics(self) -> dict[str, float] | None:
        text = self.metrics_text()
        return None if text is None else parse_metrics(text)

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
    """Starts managers for one test (the ``managers`` fixture); see the module docstring.

    Every manager runs as a replica of the chart's Deployment would (see
    :mod:`omed_devcluster.install`): the rendered container's arguments and environment, the
    chart's ServiceAccount token, its ConfigMap and webhook certificate, with a webhook
    endpoint of the chart's Service published while it runs. The charts are installed on the
    first start (or by the ``manager_config`` fixture) and uninstalled at teardown.
    """

    lease = LEASE
    renew = RENEW
    retry = RETRY
    lease_name = LEASE_NAME
    wait_until = staticmethod(wait_until)

    def __init__(self, *, install: Any, log_dir: Path) -> None:
        self._install = install
        self._installed = False
        self._log_dir = log_dir
        self.started: list[ManagerProcess] = []
        self._endpoints: dict[str, None] = {}

    @property
    def namespace(self) -> str:
        """The manager's own namespace (``POD_NAMESPACE``): its Lease and ConfigMap live there."""
        return str(self._install.namespace)

    @property
    def install(self) -> Any:
        """The :class:`~omed_devcluster.install.OmeInstall`, installed on first use."""
        if not self._installed:
            self._install.install(TEST_VALUES)
            self._installed = True
        return self._install

    def _command(
        self, name: str, *, leader_elect: bool, extra: tuple[str, ...]
    ) -> tuple[list[str], dict[str, str], int, int, int]:
        metrics_port, health_port, webhook_port = free_port(), free_port(), free_port()
        argv, env = self.install.manager_command(
            name,
            metrics_port=metrics_port,
            health_port=health_port,
            webhook_port=webhook_port,
            python=sys.executable,
            extra=(() if leader_elect else ("--leader-elect=false",)) + extra,
        )
        return argv, env, metrics_port, health_port, webhook_port

    def start(
        self,
        *extra: str,
        leader_elect: bool = True,
        name: str | None = None,
        env: Mapping[str, str] | None = None,
    ) -> ManagerProcess:
        """Start a manager; ``extra`` arguments come last, so they win."""
        label = name or f"manager-{len(self.started)}"
        argv, environ, metrics_port, health_port, webhook_port = self._command(
            label, leader_elect=leader_elect, extra=extra
        )
        log_path = self._log_dir / f"{label}.log"
        with log_path.open("wb") as log_file:
            proc = subprocess.Popen(
                argv,
                stdout=log_file,
                stderr=subprocess.STDOUT,
                env={**environ, **(env or {})},
                cwd=ROOT,
            )
        process = ManagerProcess(
            name=label,
            args=argv[3:],
            log_path=log_path,
            metrics_port=metrics_port,
            health_port=health_port,
            proc=proc,
        )
        self.started.append(process)
        self.install.publish_endpoint(label, webhook_port)
        self._endpoints[label] = None
        return process

    def run(
        self,
        *args: str,
        base: bool = True,
        leader_elect: bool = True,
        env: Mapping[str, str] | None = None,
        timeout: float = 60.0,
    ) -> subprocess.CompletedProcess[str]:
        """Run a manager to completion (flag errors, start-up failures). With ``base``, as
        :meth:`start` runs it, ``args`` last; without it, ``python -m omed`` and ``args``."""
        if base:
            argv, environ, *_ = self._command("manager-run", leader_elect=leader_elect, extra=args)
        else:
            argv, environ = [sys.executable, "-m", "omed", *args], dict(os.environ)
        return subprocess.run(
            argv,
            capture_output=True,
            text=True,
            timeout=timeout,
            env={**environ, **(env or {})},
            cwd=ROOT,
            check=False,
        )

    def withdraw(self, process: ManagerProcess) -> None:
        """Take a stopped (or killed) replica out of the webhook Service, as the endpoint of a
        pod that went away leaves it; the API server then calls the replicas left."""
        if process.name in self._endpoints:
            self._install.withdraw_endpoint(process.name)
            del self._endpoints[process.name]

    def stop_all(self) -> None:
        for process in self.started:
            process.kill()
            process.proc.wait(timeout=10)
        for name in list(self._endpoints):
            self._install.withdraw_endpoint(name)
        self._endpoints.clear()

    def teardown(self) -> None:
        """Stop every manager; uninstall the chart and remove the Lease the managers made."""
        self.stop_all()
        if self._installed:
            self._install.uninstall()
            self._install.plane.request_json(
                "DELETE",
                f"/apis/coordination.k8s.io/v1/namespaces/{self.namespace}/leases/{LEASE_NAME}",
                missing_ok=True,
            )
            self._installed = False


@pytest.fixture
def managers(
    control_plane: Any, crds_installed: None, namespace: str, tmp_path: Path
) -> Iterator[ManagerLauncher]:
    """A :class:`ManagerLauncher`; kills what it started and uninstalls the chart."""
    from omed_devcluster.install import OmeInstall

    install = OmeInstall(control_plane, workdir=tmp_path / "install")
    launcher = ManagerLauncher(install=install, log_dir=tmp_path)
    try:
        yield launcher
    finally:
        launcher.teardown()


@pytest.fixture
async def manager_config(
    kube: Any, managers: ManagerLauncher
) -> AsyncIterator[Callable[..., Awaitable[None]]]:
    """Install the charts (their ``inferenceservice-config`` holds :data:`TEST_VALUES`'
    entries); yield ``set_entries(**documents)``, which edits that ConfigMap as an operator
    would, replacing entries (a JSON-able value, a raw string, or None to delete)."""
    from omed.kube.resources import CONFIGMAPS

    install = managers.install
    name, namespace = install.configmap_name(), install.namespace

    async def set_entries(**entries: Any) -> None:
        current = await kube.get(CONFIGMAPS, name, namespace)
        new = dict(current.get("data") or {})
        for key, value in entries.items():
            if value is None:
                new.pop(key, None)
            else:
                new[key] = value if isinstance(value, str) else json.dumps(value)
        current["data"] = new
        await kube.replace(CONFIGMAPS, current, namespace)

    yield set_entries
