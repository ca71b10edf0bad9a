"""A real control plane on loopback, for tests, benchmarks and the demo.

etcd, kube-apiserver, kube-controller-manager and kube-scheduler: envtest's recipe in Python
(free ports, certificates from :mod:`omed_devcluster.certs`, an admin kubeconfig with a client
certificate in ``system:masters``, a wait for ``/readyz``, a clean stop), plus the two
components envtest leaves out, each with a loopback kubeconfig of its own identity
(``system:kube-controller-manager``, ``system:kube-scheduler``), so the bootstrap RBAC of the
API server decides what they may do, as in a cluster. Nothing here fakes the API server:
CRDs, status subresources, admission webhooks, Leases, Events, watches with bookmarks, 410
Gone, garbage collection, namespace deletion, EndpointSlices, PodDisruptionBudget status and
scheduling are all the real thing. Only the kubelet is simulated
(:mod:`omed_devcluster.simulator`).

The controller manager runs exactly :data:`CONTROLLERS` (what omed and its tests rely on;
the node lifecycle controller is left out, since the simulated nodes post no heartbeats and
would all turn NotReady). The scheduler runs its default profile with back-offs suited to
tests (:data:`SCHEDULER_BACKOFF_SECONDS`).

The API server routes webhook calls to a Service's EndpointSlices
(``--enable-aggregator-routing``), not to its cluster IP, which nothing here serves: an
EndpointSlice can then point a chart's webhook Service at a manager running on loopback.

Invariant: nothing outlives its owner. Children get ``PR_SET_PDEATHSIG`` so they die with the
process that started them even on ``kill -9``; every state directory records its owner's pid,
and :func:`sweep_stale` removes directories (and stops processes) of owners that are gone.
``stop`` stops the API server before etcd, and removes the directory.
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import yaml

from omed_devcluster.binaries import Binaries, ensure_binaries
from omed_devcluster.certs import CertificateAuthority, service_account_keys

_PR_SET_PDEATHSIG = 1
_DIR_PREFIX = "omed-cp-"


CONTROLLERS = (
    "garbage-collector-controller",
    "namespace-controller",
    "endpointslice-controller",
    "endpointslice-mirroring-controller",
    "serviceaccount-controller",
    "serviceaccount-token-controller",
    "root-ca-certificate-publisher-controller",
    "replicaset-controller",
    "deployment-controller",
    "disruption-controller",
    "pod-garbage-collector-controller",
    "node-lifecycle-controller",
)
"""The kube-controller-manager controllers the control plane runs. The taint eviction
controller is left out: pods on an unreachable node stay until omed (or a test) acts, which is
what the force-delete escalation is about; ``Timings.not_ready_eviction`` plays it when asked."""

NODE_MONITOR_GRACE_SECONDS = 10
"""The node lifecycle controller's ``--node-monitor-grace-period`` (50 s by default): how long a
node's Lease may go unrenewed before its Ready condition turns Unknown and it is tainted
unreachable. The simulator renews every :data:`omed_devcluster.sim.nodes.LEASE_RENEW_SECONDS`,
so a heartbeat may be late by several renewals (an event loop busy for seconds) before a node
is judged lost; a test that loses a node waits this long for the real controller's verdict."""

NODE_MONITOR_PERIOD_SECONDS = 1
"""``--node-monitor-period`` (5 s by default): how often the controller checks the Leases."""

SCHEDULER_BACKOFF_SECONDS = (1, 2)
"""kube-scheduler's ``podInitialBackoffSeconds`` and ``podMaxBackoffSeconds`` (defaults 1 and
10): an unschedulable pod is tried again within 2 s of a change that may let it fit, so a
test that adds a node sees the pod bound in seconds."""

_CHILDREN = ("scheduler", "controller-manager", "apiserver", "etcd")


class ControlPlaneError(RuntimeError):
    """The control plane did not start; the message carries the tail of its log."""


def die_with_parent() -> None:
    """For ``preexec_fn``: the child gets SIGKILL when the thread that started it dies."""
    with contextlib.suppress(Exception):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


#: Ports handed out for listeners: below Linux's default ephemeral range (32768-60999), so an
#: outgoing connection of any process can never take a port between :func:`free_port` picking
#: it and the server binding it (what port 0 allows: the kernel hands the same range to clients).
LISTEN_PORTS = range(12000, 32000)
#: Each process draws from a window of its own (chosen by pid), so the test workers and benches
#: running side by side do not pick the same port before either binds it.
_PORT_WINDOW = 1000
_next_port: list[int] = []


def free_port() -> int:
    """A loopback TCP port nothing listens on, for a server this process is about to start.

    Invariant: no two calls in one process return the same port, and the port lies outside the
    ephemeral range, so only another listener can take it before the server binds it.
    """
    windows = len(LISTEN_PORTS) // _PORT_WINDOW
    if not _next_port:
        _next_port.append(LISTEN_PORTS.start + (os.getpid() % windows) * _PORT_WINDOW)
    for _ in range(len(LISTEN_PORTS)):
        port = _next_port[0]
        _next_port[0] = port + 1 if port + 1 < LISTEN_PORTS.stop else LISTEN_PORTS.start
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    first, last = LISTEN_PORTS.start, LISTEN_PORTS.stop - 1
    raise ControlPlaneError(f"no free loopback port in {first}-{last}")


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def sweep_stale(base: Path | None = None) -> int:
    """Remove state directories whose owning process is gone; returns how many were removed."""
    root = base or Path(tempfile.gettempdir())
    removed = 0
    for directory in root.glob(f"{_DIR_PREFIX}*"):
        owner = directory / "owner.pid"
        try:
            pid = int(owner.read_text().strip())
        except (OSError, ValueError):
            pid = -1
        if pid > 0 and _pid_alive(pid):
            continue
        for child in _CHILDREN:
            with contextlib.suppress(OSError, ValueError, ProcessLookupError):
                os.kill(int((directory / f"{child}.pid").read_text().strip()), signal.SIGKILL)
        shutil.rmtree(directory, ignore_errors=True)
        removed += 1
    return removed


@dataclasses.dataclass
class _Process:
    name: str
    args: list[str]
    log_path: Path
    pid_path: Path
    popen: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        log = self.log_path.open("ab")
        try:
            self.popen = subprocess.Popen(
                self.args,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                preexec_fn=die_with_parent,  # noqa: PLW1509 - only prctl, async-signal-safe
                start_new_session=True,
            )
        finally:
            log.close()
        self.pid_path.write_text(str(self.popen.pid))

    def running(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def stop(self, *, timeout: float = 10.0, sig: int = signal.SIGTERM) -> None:
        if self.popen is None:
            return
        if self.popen.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                self.popen.send_signal(sig)
            try:
                self.popen.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait(timeout=timeout)
        self.popen = None
        with contextlib.suppress(OSError):
            self.pid_path.unlink()

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""


def _wait_healthy(
    process: _Process, url: str, *, context: ssl.SSLContext, deadline: float, interval: float
) -> None:
    """Poll ``url`` until it answers 200; fail with the process's log tail if the process
    exits or the deadline passes first."""
    last = ""
    while time.monotonic() < deadline:
        if not process.running():
            raise ControlPlaneError(f"{process.name} exited:\n{process.log_tail()}")
        try:
            with urllib.request.urlopen(url, timeout=5, context=context) as resp:
                if resp.status == 200:
                    return
        except urllib.error.HTTPError as err:
            last = f"{urllib.parse.urlsplit(url).path} answered {err.code}"
        except (OSError, urllib.error.URLError) as err:
            last = str(err)
        time.sleep(interval)
    raise ControlPlaneError(f"{process.name} not healthy in time ({last}):\n{process.log_tail()}")


class ControlPlane:
    """The control plane on loopback; ``start`` blocks until every component is healthy."""

    def __init__(self, binaries: Binaries | None = None, *, base_dir: Path | None = None) -> None:
        self.binaries = binaries or ensure_binaries()
        self._base_dir = base_dir
        self.dir: Path | None = None
        self.etcd_port = 0
        self.apiserver_port = 0
        self._etcd: _Process | None = None
        self._apiserver: _Process | None = None
        self._controller_manager: _Process | None = None
        self._scheduler: _Process | None = None
        self.controller_manager_port = 0
        self.scheduler_port = 0
        self.kubeconfig_path: Path | None = None
        self.ca_pem = b""
        self.client_cert_path: Path | None = None
        self.client_key_path: Path | None = None
        self.ca_path: Path | None = None
        self.started_in: float = 0.0
        self.healthy_after: dict[str, float] = {}
        """Seconds from ``start()`` until each component answered healthy."""

    # -- lifecycle ---------------------------------------------------------------------------
    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.apiserver_port}"

    @property
    def etcd_url(self) -> str:
        return f"http://127.0.0.1:{self.etcd_port}"

    def start(self, *, timeout: float = 120.0) -> ControlPlane:
        began = time.monotonic()
        sweep_stale(self._base_dir)
        self.dir = Path(tempfile.mkdtemp(prefix=_DIR_PREFIX, dir=self._base_dir))
        (self.dir / "owner.pid").write_text(str(os.getpid()))
        try:
            self._write_certificates()
            self.etcd_port, peer_port = free_port(), free_port()
            self.apiserver_port = free_port()
            self._etcd = _Process(
                name="etcd",
                args=[
                    str(self.binaries.etcd),
                    f"--data-dir={self.dir / 'etcd'}",
                    f"--listen-client-urls={self.etcd_url}",
                    f"--advertise-client-urls={self.etcd_url}",
                    f"--listen-peer-urls=http://127.0.0.1:{peer_port}",
                    f"--initial-advertise-peer-urls=http://127.0.0.1:{peer_port}",
                    f"--initial-cluster=default=http://127.0.0.1:{peer_port}",
                    "--unsafe-no-fsync=true",
                    "--log-level=warn",
                ],
                log_path=self.dir / "etcd.log",
                pid_path=self.dir / "etcd.pid",
            )
            self._etcd.start()
            self._wait_etcd(deadline=began + timeout)
            self.healthy_after["etcd"] = time.monotonic() - began
            self._apiserver = _Process(
                name="kube-apiserver",
                args=self._apiserver_args(),
                log_path=self.dir / "apiserver.log",
                pid_path=self.dir / "apiserver.pid",
            )
            self._apiserver.start()
            self.wait_ready(deadline=began + timeout)
            self.healthy_after["kube-apiserver"] = time.monotonic() - began
            self._write_kubeconfig()
            self._start_controller_manager()
            self._start_scheduler()
            self._wait_component(
                self._controller_manager,
                port=self.controller_manager_port,
                deadline=began + timeout,
            )
            self.healthy_after["kube-controller-manager"] = time.monotonic() - began
            self._wait_component(
                self._scheduler, port=self.scheduler_port, deadline=began + timeout
            )
            self.healthy_after["kube-scheduler"] = time.monotonic() - began
        except BaseException:
            self.stop()
            raise
        self.started_in = time.monotonic() - began
        return self

    def stop(self) -> None:
        for component in (self._scheduler, self._controller_manager):
            if component is not None:
                component.stop()
        if self._apiserver is not None:
            self._apiserver.stop()
        if self._etcd is not None:
            self._etcd.stop()
        if self.dir is not None:
            shutil.rmtree(self.dir, ignore_errors=True)
            self.dir = None

    def __enter__(self) -> ControlPlane:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- failure injection for tests ---------------------------------------------------------
    def stop_apiserver(self, *, kill: bool = False) -> None:
        assert self._apiserver is not None
        self._apiserver.stop(sig=signal.SIGKILL if kill else signal.SIGTERM)

    def start_apiserver(self, *, timeout: float = 120.0) -> None:
        assert self._apiserver is not None
        self._apiserver.start()
        self.wait_ready(deadline=time.monotonic() + timeout)

    def restart_apiserver(self, *, extra_args: Sequence[str] = ()) -> None:
        """Stop the API server and start it again, with ``extra_args`` after the usual ones
        (``--feature-gates=WatchList=false``, say) until the next restart."""
        self.stop_apiserver()
        assert self._apiserver is not None
        self._apiserver.args = [*self._apiserver_args(), *extra_args]
        self.start_apiserver()

    def compact_etcd(self) -> int:
        """Compact etcd at its current revision, so older resourceVersions answer 410 Gone."""
        current = self._etcd_post("/v3/kv/range", {"key": "AA=="})
        revision = int(current["header"]["revision"])
        self._etcd_post("/v3/kv/compaction", {"revision": str(revision), "physical": True})
        return revision

    # -- internals ---------------------------------------------------------------------------
    def _etcd_post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        request = urllib.request.Request(
            self.etcd_url + path,
            data=json.dumps(body).encode(),
            method="POST",
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            result: dict[str, Any] = json.loads(response.read())
        return result

    def _write_certificates(self) -> None:
        assert self.dir is not None
        certs = self.dir / "certs"
        certs.mkdir()
        serving_ca = CertificateAuthority.create("omed-devcluster-serving-ca")
        client_ca = CertificateAuthority.create("omed-devcluster-client-ca")
        serving = serving_ca.issue(
            common_name="kube-apiserver",
            dns_names=["localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"],
            ip_addresses=["127.0.0.1", "10.0.0.1"],
            server=True,
        )
        admin = client_ca.issue(common_name="admin", organizations=["system:masters"], client=True)
        controller_manager = client_ca.issue(
            common_name="system:kube-controller-manager", client=True
        )
        scheduler = client_ca.issue(common_name="system:kube-scheduler", client=True)
        # Nothing proxies to the API server; the front-proxy CA only completes the
        # extension-apiserver-authentication ConfigMap that the controller manager and the
        # scheduler read to authenticate requests to their own ports.
        front_proxy_ca = CertificateAuthority.create("omed-devcluster-front-proxy-ca")
        sa_key, sa_pub = service_account_keys()
        files = {
            "ca.crt": serving_ca.cert_pem,
            "apiserver.crt": serving.cert_pem,
            "apiserver.key": serving.key_pem,
            "client-ca.crt": client_ca.cert_pem,
            "front-proxy-ca.crt": front_proxy_ca.cert_pem,
            "admin.crt": admin.cert_pem,
            "admin.key": admin.key_pem,
            "controller-manager.crt": controller_manager.cert_pem,
            "controller-manager.key": controller_manager.key_pem,
            "scheduler.crt": scheduler.cert_pem,
            "scheduler.key": scheduler.key_pem,
            "sa.key": sa_key,
            "sa.pub": sa_pub,
        }
        for name, data in files.items():
            path = certs / name
            path.write_bytes(data)
            path.chmod(0o600)
        self.ca_pem = serving_ca.cert_pem
        self.ca_path = certs / "ca.crt"
        self.client_cert_path = certs / "admin.crt"
        self.client_key_path = certs / "admin.key"

    def _apiserver_args(self) -> list[str]:
        assert self.dir is not None
        certs = self.dir / "certs"
        return [
            str(self.binaries.kube_apiserver),
            f"--etcd-servers={self.etcd_url}",
            f"--secure-port={self.apiserver_port}",
            "--bind-address=127.0.0.1",
            "--advertise-address=127.0.0.1",
            f"--tls-cert-file={certs / 'apiserver.crt'}",
            f"--tls-private-key-file={certs / 'apiserver.key'}",
            f"--client-ca-file={certs / 'client-ca.crt'}",
            f"--requestheader-client-ca-file={certs / 'front-proxy-ca.crt'}",
            "--requestheader-allowed-names=front-proxy-client",
            "--requestheader-username-headers=X-Remote-User",
            "--requestheader-group-headers=X-Remote-Group",
            "--requestheader-extra-headers-prefix=X-Remote-Extra-",
            "--service-cluster-ip-range=10.0.0.0/24",
            "--allow-privileged=true",
            "--disable-admission-plugins=ServiceAccount",
            "--authorization-mode=RBAC",
            f"--service-account-issuer=https://127.0.0.1:{self.apiserver_port}/",
            f"--service-account-key-file={certs / 'sa.pub'}",
            f"--service-account-signing-key-file={certs / 'sa.key'}",
            "--endpoint-reconciler-type=none",
            "--enable-aggregator-routing=true",
            "--v=1",
        ]

    def _component_kubeconfig(self, user: str) -> Path:
        """A kubeconfig for ``user`` (``controller-manager`` or ``scheduler``): its client
        certificate, whose common name is the identity bootstrap RBAC grants."""
        assert self.dir is not None
        certs = self.dir / "certs"
        config = self.kubeconfig()
        config["users"] = [
            {
                "name": "admin",
                "user": {
                    "client-certificate": str(certs / f"{user}.crt"),
                    "client-key": str(certs / f"{user}.key"),
                },
            }
        ]
        path = self.dir / f"{user}.kubeconfig"
        path.write_text(yaml.safe_dump(config, sort_keys=False))
        path.chmod(0o600)
        return path

    def _start_controller_manager(self) -> None:
        assert self.dir is not None
        certs = self.dir / "certs"
        kubeconfig = self._component_kubeconfig("controller-manager")
        self.controller_manager_port = free_port()
        self._controller_manager = _Process(
            name="kube-controller-manager",
            args=[
                str(self.binaries.kube_controller_manager),
                f"--kubeconfig={kubeconfig}",
                f"--authentication-kubeconfig={kubeconfig}",
                f"--authorization-kubeconfig={kubeconfig}",
                "--bind-address=127.0.0.1",
                f"--secure-port={self.controller_manager_port}",
                f"--cert-dir={self.dir / 'controller-manager-certs'}",
                "--leader-elect=false",
                f"--controllers={','.join(CONTROLLERS)}",
                f"--node-monitor-grace-period={NODE_MONITOR_GRACE_SECONDS}s",
                f"--node-monitor-period={NODE_MONITOR_PERIOD_SECONDS}s",
                # Each controller acts as its own ServiceAccount in kube-system, as in a
                # cluster, so their RBAC is the bootstrap policy's, not one broad identity.
                "--use-service-account-credentials=true",
                f"--service-account-private-key-file={certs / 'sa.key'}",
                f"--root-ca-file={certs / 'ca.crt'}",
                "--kube-api-qps=200",
                "--kube-api-burst=400",
                "--v=1",
            ],
            log_path=self.dir / "controller-manager.log",
            pid_path=self.dir / "controller-manager.pid",
        )
        self._controller_manager.start()

    def _start_scheduler(self) -> None:
        assert self.dir is not None
        kubeconfig = self._component_kubeconfig("scheduler")
        initial, maximum = SCHEDULER_BACKOFF_SECONDS
        config = {
            "apiVersion": "kubescheduler.config.k8s.io/v1",
            "kind": "KubeSchedulerConfiguration",
            "clientConnection": {"kubeconfig": str(kubeconfig), "qps": 200, "burst": 400},
            "leaderElection": {"leaderElect": False},
            "podInitialBackoffSeconds": initial,
            "podMaxBackoffSeconds": maximum,
        }
        config_path = self.dir / "scheduler-config.yaml"
        config_path.write_text(yaml.safe_dump(config, sort_keys=False))
        self.scheduler_port = free_port()
        self._scheduler = _Process(
            name="kube-scheduler",
            args=[
                str(self.binaries.kube_scheduler),
                f"--config={config_path}",
                f"--authentication-kubeconfig={kubeconfig}",
                f"--authorization-kubeconfig={kubeconfig}",
                "--bind-address=127.0.0.1",
                f"--secure-port={self.scheduler_port}",
                f"--cert-dir={self.dir / 'scheduler-certs'}",
                "--v=1",
            ],
            log_path=self.dir / "scheduler.log",
            pid_path=self.dir / "scheduler.pid",
        )
        self._scheduler.start()

    def _wait_component(self, process: _Process | None, *, port: int, deadline: float) -> None:
        """Wait for a component's ``/healthz`` (served on its own self-signed certificate;
        the path needs no credentials)."""
        assert process is not None
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        _wait_healthy(
            process,
            f"https://127.0.0.1:{port}/healthz",
            context=context,
            deadline=deadline,
            interval=0.1,
        )

    def component_logs(self) -> dict[str, str]:
        """The tail of each component's log, for a failing test's report."""
        processes = (self._etcd, self._apiserver, self._controller_manager, self._scheduler)
        return {p.name: p.log_tail() for p in processes if p is not None}

    def _ssl_context(self) -> ssl.SSLContext:
        assert self.ca_path and self.client_cert_path and self.client_key_path
        context = ssl.create_default_context(cafile=str(self.ca_path))
        context.load_cert_chain(str(self.client_cert_path), str(self.client_key_path))
        return context

    def _wait_etcd(self, *, deadline: float) -> None:
        assert self._etcd is not None
        while time.monotonic() < deadline:
            if not self._etcd.running():
                raise ControlPlaneError(f"etcd exited:\n{self._etcd.log_tail()}")
            try:
                with urllib.request.urlopen(self.etcd_url + "/health", timeout=2) as resp:
                    if json.loads(resp.read()).get("health") == "true":
                        return
            except (OSError, urllib.error.URLError, ValueError):
                pass
            time.sleep(0.1)
        raise ControlPlaneError(f"etcd not healthy in time:\n{self._etcd.log_tail()}")

    def wait_ready(self, *, deadline: float) -> None:
        """Wait for kube-apiserver's ``/readyz`` (asked as the admin)."""
        assert self._apiserver is not None
        _wait_healthy(
            self._apiserver,
            self.url + "/readyz",
            context=self._ssl_context(),
            deadline=deadline,
            interval=0.25,
        )

    def request_json(
        self, method: str, path: str, body: Any = None, *, missing_ok: bool = False
    ) -> Any:
        """One request as the admin; the decoded answer (None for a 404 with ``missing_ok``)."""
        request = urllib.request.Request(
            self.url + path,
            data=None if body is None else json.dumps(body).encode(),
            method=method,
            headers={"Content-Type": "application/json", "Accept": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=30, context=self._ssl_context()) as resp:
                return json.loads(resp.read() or b"null")
        except urllib.error.HTTPError as err:
            if err.code == 404 and missing_ok:
                return None
            detail = err.read().decode(errors="replace")
            raise ControlPlaneError(f"{method} {path}: {err.code} {detail}") from err

    def get_json(self, path: str) -> Any:
        with urllib.request.urlopen(
            self.url + path, timeout=10, context=self._ssl_context()
        ) as resp:
            return json.loads(resp.read())

    def kubeconfig(self) -> dict[str, Any]:
        assert self.client_cert_path and self.client_key_path
        import base64

        def b64(data: bytes) -> str:
            return base64.b64encode(data).decode()

        return {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": "omed-dev",
                    "cluster": {"server": self.url, "certificate-authority-data": b64(self.ca_pem)},
                }
            ],
            "users": [
                {
                    "name": "admin",
                    "user": {
                        "client-certificate-data": b64(self.client_cert_path.read_bytes()),
                        "client-key-data": b64(self.client_key_path.read_bytes()),
                    },
                }
            ],
            "contexts": [{"name": "omed-dev", "context": {"cluster": "omed-dev", "user": "admin"}}],
            "current-context": "omed-dev",
        }

    def _write_kubeconfig(self) -> None:
        assert self.dir is not None
        path = self.dir / "kubeconfig"
        path.write_text(yaml.safe_dump(self.kubeconfig(), sort_keys=False))
        path.chmod(0o600)
        self.kubeconfig_path = path


@contextlib.contextmanager
def running_control_plane(binaries: Binaries | None = None) -> Iterator[ControlPlane]:
    plane = ControlPlane(binaries)
    plane.start()
    try:
        yield plane
    finally:
        plane.stop()
