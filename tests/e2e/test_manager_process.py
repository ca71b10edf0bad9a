"""The manager as a process (``python -m omed``) against the real API server.

What a user sees: flag handling and its exit codes, start-up failures with their exact
lines, one leader among replicas (the Lease and ``leader_election_master_status``),
failover after ``kill -9`` (about one lease duration) and after SIGTERM (about one retry
period, since the leader releases the Lease), the probes, the webhook reading the
``deploy`` entry through the config cache, and a leader that loses the API server exiting
with ``leader election lost``.

Timings are the short test ones from conftest: lease 3 s, renew deadline 2 s, retry 0.5 s.
The test that stops the API server comes last in this file and starts it again.
"""

from __future__ import annotations

import asyncio
import base64
import json
import signal
import ssl
import time
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import pytest

from omed.kube.errors import NotFound
from omed.kube.resources import LEASES
from omed_devcluster.certs import CertificateAuthority
from omed_devcluster.controlplane import free_port

pytestmark = pytest.mark.integration

LEASE_NAME = "ome-controller-manager-leader-lock"
STATUS_LINE = "Configured InferenceReplica status representation"
FAILED = "Failed to start manager"


async def holder(kube: Any, namespace: str) -> str:
    try:
        lease = await kube.get(LEASES, LEASE_NAME, namespace)
    except NotFound:
        return ""
    return str((lease.get("spec") or {}).get("holderIdentity") or "")


def fields(line: str) -> dict[str, Any]:
    """The key-values of a console log line."""
    parsed: dict[str, Any] = json.loads(line.split("\t")[4])
    return parsed


# --- flags -------------------------------------------------------------------------------------


def test_help_prints_the_usage_and_exits_0(managers: Any) -> None:
    done = managers.run("--help", base=False)
    assert done.returncode == 0
    assert done.stdout.startswith("Usage of omed:\n")
    assert "  -leader-elect\n" in done.stdout
    assert done.stderr == ""


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (["--no-such-flag"], "flag provided but not defined: -no-such-flag"),
        (["--leader-elect=yes"], 'invalid boolean value "yes" for -leader-elect: parse error'),
        (
            ["--config-cache-ttl", "3d"],
            'invalid value "3d" for flag -config-cache-ttl: '
            'time: unknown unit "d" in duration "3d"',
        ),
    ],
)
def test_bad_flags_exit_2_with_go_s_line_and_the_usage(
    managers: Any, args: list[str], line: str
) -> None:
    done = managers.run(*args, base=False)
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.startswith(f"{line}\nUsage of omed:\n")


def test_invalid_leader_election_timing_exits_1(managers: Any) -> None:
    done = managers.run("--leader-elect-renew-deadline=3s")  # lease 3s: not longer
    assert done.returncode == 1
    [line] = [ln for ln in done.stderr.splitlines() if "Invalid leader election timing" in ln]
    assert fields(line) == {
        "error": "--leader-elect-lease-duration=3s must be greater than "
        "--leader-elect-renew-deadline=3s"
    }


async def test_the_last_flag_wins(managers: Any, manager_config: Any) -> None:
    # A bad lease duration, a JSON log and a dead metrics port, each overridden later on.
    metrics_port = free_port()
    manager = managers.start(
        "--leader-elect-lease-duration=1s",
        "--zap-encoder=json",
        "--metrics-bind-address=0",
        "--leader-elect-lease-duration=3s",
        "--zap-encoder=console",
        f"--metrics-bind-address=127.0.0.1:{metrics_port}",
    )
    manager.metrics_port = metrics_port
    await manager.wait_ready()
    await managers.wait_until(manager.is_leader, timeout=10, what="leadership")
    line = await manager.wait_log(STATUS_LINE, timeout=5)
    assert line.split("\t")[1:4] == ["INFO", "setup", STATUS_LINE]  # console, not JSON


# --- start-up failures -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("entries", "message", "error"),
    [
        (
            {"lifecycle": {"scaleDownPodBatchSize": "101%"}},
            "Failed to initialize lifecycle scale configuration",
            "validate lifecycle.scaleDownPodBatchSize: invalid lifecycle.scaleDownPodBatchSize "
            '"101%" must be between 1% and 100%',
        ),
        (
            {"omenativeStatus": None},
            "Failed to initialize OMENative status configuration",
            "ConfigMap inferenceservice-config has no omenativeStatus entry",
        ),
        (
            {"eventRecorder": {"burstSize": 0, "refillInterval": "5s"}},
            "Failed to initialize event recorder configuration",
            "validate eventRecorder.burstSize: invalid eventRecorder.burstSize 0 "
            "must be a positive integer",
        ),
    ],
)
async def test_an_invalid_startup_entry_stops_the_manager_with_its_message(
    managers: Any,
    manager_config: Any,
    kube: Any,
    *,
    entries: dict[str, Any],
    message: str,
    error: str,
) -> None:
    await manager_config(**entries)
    done = managers.run()
    assert done.returncode == 1, done.stderr
    [line] = [ln for ln in done.stderr.splitlines() if f"\t{message}\t" in ln]
    assert line.split("\t")[1:3] == ["ERROR", "setup"]
    assert fields(line) == {"error": error}
    assert await holder(kube, managers.namespace) == ""  # stopped before the election


async def test_a_missing_configmap_stops_the_manager(
    managers: Any, manager_config: Any, kube: Any
) -> None:
    from omed.kube.resources import CONFIGMAPS

    await kube.delete(CONFIGMAPS, "inferenceservice-config", managers.namespace)
    done = managers.run()
    assert done.returncode == 1
    [line] = [
        ln
        for ln in done.stderr.splitlines()
        if "\tFailed to initialize OMENative status configuration\t" in ln
    ]
    assert fields(line) == {
        "error": f"ConfigMap {managers.namespace}/inferenceservice-config not found"
    }


async def test_the_status_representation_line_shows_0_without_a_bound(
    managers: Any, manager_config: Any
) -> None:
    await manager_config(omenativeStatus={"instanceStatusEncoding": "DenseV1"})
    manager = managers.start(leader_elect=False)
    line = await manager.wait_log(STATUS_LINE, timeout=30)
    assert fields(line) == {"instanceStatusEncoding": "DenseV1", "maxDecodedInstances": 0}
    manager.signal(signal.SIGTERM)
    assert await manager.wait_exit(timeout=20) == 0


# --- leader election ----------------------------------------------------------------------------


async def two_managers(managers: Any, kube: Any) -> tuple[Any, Any]:
    """Start two replicas; return (leader, standby) once one leads with its controllers
    running, and both are ready."""
    first, second = managers.start(name="replica-a"), managers.start(name="replica-b")
    await first.wait_ready()
    await second.wait_ready()
    leader = await managers.wait_until(
        lambda: next((m for m in (first, second) if m.is_leader()), None),
        timeout=15,
        what="a leader",
    )
    standby = second if leader is first else first
    await leader.wait_log("Starting workers", timeout=15)  # caches synced, controllers run
    await leader.wait_ready()
    return leader, standby


async def test_exactly_one_replica_leads(
    managers: Any, manager_config: Any, kube: Any, namespace: str
) -> None:
    leader, standby = await two_managers(managers, kube)
    identity = await holder(kube, managers.namespace)
    assert identity.startswith(f"{leader.name}_")
    uuid.UUID(identity.split("_", 1)[1])
    # Stable over several retry periods: the standby stays a standby.
    deadline = time.monotonic() + 4 * managers.retry
    while time.monotonic() < deadline:
        assert leader.master_status() == 1.0
        assert standby.master_status() == 0.0
        await asyncio.sleep(0.1)  # sampling over a period, not synchronisation
    assert await holder(kube, managers.namespace) == identity
    # Both serve their probes; only the leader started the controllers.
    assert leader.probe("/healthz") == (200, "ok")
    assert standby.probe("/healthz") == (200, "ok")
    assert standby.probe("/readyz") == (200, "ok")
    assert leader.log_lines("Starting controllers")
    assert not standby.log_lines("Starting controllers")


async def test_kill_9_of_the_leader_hands_over_after_about_the_lease_duration(
    managers: Any, manager_config: Any, kube: Any, namespace: str
) -> None:
    leader, standby = await two_managers(managers, kube)
    old = await holder(kube, managers.namespace)
    killed = time.monotonic()
    leader.kill()
    await managers.wait_until(standby.is_leader, timeout=managers.lease + 10, what="takeover")
    took = time.monotonic() - killed
    # The standby waits a whole lease duration from the last renewal it saw (up to one
    # retry period before the kill), then tries every retry period x [1, 2.2).
    assert managers.lease - managers.retry - 0.5 <= took <= managers.lease + 3, took
    new = await holder(kube, managers.namespace)
    assert new != old
    assert new.startswith("replica-")
    assert await leader.wait_exit(timeout=5) == -signal.SIGKILL


async def test_sigterm_of_the_leader_hands_over_within_about_a_retry_period(
    managers: Any, manager_config: Any, kube: Any, namespace: str
) -> None:
    leader, standby = await two_managers(managers, kube)
    await standby.wait_log("attempting to acquire leader lease", timeout=5)
    stopped = time.monotonic()
    leader.signal(signal.SIGTERM)
    await managers.wait_until(standby.is_leader, timeout=10, what="takeover")
    took = time.monotonic() - stopped
    assert took <= managers.retry * 2.2 + 1.0, took  # far below the 3 s lease duration
    assert await leader.wait_exit(timeout=20) == 0
    log = leader.log()
    order = [
        "Received signal, stopping",
        "Stopping and waiting for leader election runnables",
        "All workers finished",
        "released leader lease",
        "Stopping and waiting for HTTP servers",
        "Wait completed, proceeding to shutdown the manager",
    ]
    positions = [log.index(message) for message in order]
    assert positions == sorted(positions), log
    assert FAILED not in log


async def test_sigterm_of_a_standby_just_stops_it(
    managers: Any, manager_config: Any, kube: Any, namespace: str
) -> None:
    leader, standby = await two_managers(managers, kube)
    identity = await holder(kube, managers.namespace)
    standby.signal(signal.SIGTERM)
    assert await standby.wait_exit(timeout=20) == 0
    assert "Stopping standby" in standby.log()
    assert "released leader lease" not in standby.log()
    assert await holder(kube, managers.namespace) == identity
    assert leader.is_leader()


# --- the webhook and the config cache ---------------------------------------------------------


def serving_certificate(directory: Path) -> ssl.SSLContext:
    """Write tls.crt/tls.key for 127.0.0.1 into ``directory``; return a client context."""
    authority = CertificateAuthority.create("omed-e2e-webhook-ca")
    pair = authority.issue(common_name="webhook", ip_addresses=["127.0.0.1"], server=True)
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "tls.crt").write_bytes(pair.cert_pem)
    (directory / "tls.key").write_bytes(pair.key_pem)
    context = ssl.create_default_context()
    context.load_verify_locations(cadata=authority.cert_pem.decode())
    return context


def defaulted_min_replicas(port: int, context: ssl.SSLContext) -> int:
    """Ask the mutating webhook to default a new InferenceService's engine; the minReplicas
    it would write."""
    review = {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": str(uuid.uuid4()),
            "kind": {"group": "ome.io", "version": "v1beta1", "kind": "InferenceService"},
            "operation": "CREATE",
            "name": "example",
            "namespace": "serving",
            "object": {
                "apiVersion": "ome.io/v1beta1",
                "kind": "InferenceService",
                "metadata": {"name": "example", "namespace": "serving"},
                "spec": {"engine": {}},
            },
        },
    }
    request = urllib.request.Request(
        f"https://127.0.0.1:{port}/mutate-ome-io-v1beta1-inferenceservice",
        data=json.dumps(review).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, context=context, timeout=5) as answer:
        response = json.loads(answer.read())["response"]
    assert response["allowed"] is True, response
    patch = json.loads(base64.b64decode(response["patch"]))
    [value] = [op["value"] for op in patch if op["path"] == "/spec/engine/minReplicas"]
    return int(value)


async def test_an_edit_to_a_cached_entry_is_seen_within_the_ttl(
    managers: Any, manager_config: Any, tmp_path: Path
) -> None:
    ttl = 3.0
    context = serving_certificate(tmp_path / "certs")
    port = free_port()
    await manager_config(deploy={"replicas": {"minReplicas": 1}})
    manager = managers.start(
        "--webhook",
        f"--webhook-port={port}",
        f"--webhook-cert-dir={tmp_path / 'certs'}",
        f"--config-cache-ttl={ttl:g}s",
    )
    await manager.wait_ready()
    # Ready as a standby, then briefly not once it leads and its informers sync (the webhook
    # process takes a second or two to start, about when a Lease left by an earlier test
    # expires): wait for the leader's readiness.
    verbose = (200, "[+]webhook ok\n[+]leader ok\nreadyz check passed\n")
    await managers.wait_until(
        lambda: manager.is_leader() and manager.probe("/readyz?verbose") == verbose,
        timeout=30,
        what="the leader ready",
    )
    assert defaulted_min_replicas(port, context) == 1  # the cache now holds a fresh read
    await manager_config(deploy={"replicas": {"minReplicas": 2}})
    edited = time.monotonic()
    assert defaulted_min_replicas(port, context) == 1  # still cached: the TTL hasn't passed
    await managers.wait_until(
        lambda: defaulted_min_replicas(port, context) == 2,
        timeout=ttl + 5,
        what="the edit through the cache",
        interval=0.1,
    )
    assert time.monotonic() - edited <= ttl + 1.0


# --- last: stops the API server ----------------------------------------------------------------


async def test_a_leader_that_cannot_renew_exits_with_leader_election_lost(
    managers: Any, manager_config: Any, kube: Any, control_plane: Any
) -> None:
    leader, standby = await two_managers(managers, kube)
    control_plane.stop_apiserver()  # returns once kube-apiserver has exited
    try:
        stopped = time.monotonic()
        code = await leader.wait_exit(timeout=managers.renew + 10)
        took = time.monotonic() - stopped
        assert code == 1
        [line] = leader.log_lines(f"\t{FAILED}\t")
        assert line.split("\t")[1:3] == ["ERROR", "omed.manager"]
        assert fields(line) == {"error": "leader election lost"}
        assert took <= managers.renew + 2, took
        assert standby.running()
    finally:
        control_plane.start_apiserver()
    # The standby takes over once the API server is back.
    try:
        await managers.wait_until(standby.is_leader, timeout=managers.lease + 15, what="takeover")
    except AssertionError as failure:
        failure.add_note(f"standby log:\n{standby.log()}\nleader log:\n{leader.log()}")
        raise


# --- a stop that can't reach the API server; a leader that stalled -------------------------------


GRACE_PERIOD = 30.0
"""The chart's terminationGracePeriodSeconds: the kubelet SIGKILLs the manager after it."""
CHART_TIMINGS = (
    "--leader-elect-lease-duration=60s",
    "--leader-elect-renew-deadline=40s",
    "--leader-elect-retry-period=8s",
)


class BlackHoleProxy:
    """A TCP proxy to the API server that can turn into a black hole: every connection stays
    open and nothing passes any more, as a partitioned or hung API server looks to a client
    (a stopped one on the same host refuses connections at once, which nothing waits on)."""

    def __init__(self, host: str, port: int) -> None:
        self._upstream = (host, port)
        self._open = asyncio.Event()
        self._open.set()
        self._tasks: set[asyncio.Task[None]] = set()
        self._writers: list[asyncio.StreamWriter] = []
        self._server: asyncio.Server | None = None

    async def start(self) -> int:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        return int(self._server.sockets[0].getsockname()[1])

    def black_hole(self) -> None:
        self._open.clear()

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        for writer in self._writers:
            writer.close()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        self._writers.append(writer)
        await self._open.wait()
        up_reader, up_writer = await asyncio.open_connection(*self._upstream)
        self._writers.append(up_writer)
        await asyncio.gather(
            self._pump(reader, up_writer), self._pump(up_reader, writer), return_exceptions=True
        )

    async def _pump(self, source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
        while data := await source.read(65536):
            await self._open.wait()
            sink.write(data)
            await sink.drain()
        sink.close()


def kubeconfig_through(
    source: Path, target: Path, *, server: str, token: str | None = None
) -> Path:
    """A copy of the kubeconfig ``source`` that reaches the API server at ``server`` (with the
    user's token replaced by ``token``, when given)."""
    import yaml

    config = yaml.safe_load(source.read_text())
    config["clusters"][0]["cluster"]["server"] = server
    if token is not None:
        config["users"][0]["user"] = {"token": token}
    target.write_text(yaml.safe_dump(config, sort_keys=False))
    target.chmod(0o600)
    return target


async def test_a_leader_that_cannot_reach_the_api_server_stops_within_the_grace_period(
    managers: Any, manager_config: Any, tmp_path: Path
) -> None:
    from urllib.parse import urlsplit

    install = managers.install
    real = urlsplit(install.plane.url)
    assert real.hostname is not None and real.port is not None
    proxy = BlackHoleProxy(real.hostname, real.port)
    port = await proxy.start()
    try:
        kubeconfig = kubeconfig_through(
            install.kubeconfig_path,
            tmp_path / "through-proxy.kubeconfig",
            server=f"https://{real.hostname}:{port}",
        )
        # The chart's timings: the Lease would outlive the grace period (a 40 s renew
        # deadline), so the stop, not a lost Lease, decides when the process ends.
        leader = managers.start(f"--kubeconfig={kubeconfig}", *CHART_TIMINGS, name="partitioned")
        await leader.wait_ready()
        await managers.wait_until(leader.is_leader, timeout=15, what="leadership")
        await leader.wait_log("Starting workers", timeout=15)
        proxy.black_hole()
        signalled = time.monotonic()
        leader.signal(signal.SIGTERM)
        code = await leader.wait_exit(timeout=GRACE_PERIOD + 20)
        took = time.monotonic() - signalled
    finally:
        await proxy.close()
    log = leader.log()
    assert took < GRACE_PERIOD - 2, f"stopped {took:.1f}s after SIGTERM:\n{log}"
    assert code == 1, log
    # The release is cut short at its share; on a loaded machine a step before it may be too.
    lines = leader.log_lines("Graceful shutdown timeout reached")
    assert "release the Lease" in [fields(line)["step"] for line in lines], lines
    assert "released leader lease" not in log


# A replica that stalls with a whole lease duration passing, then resumes: it must not write.

STALLED_SA = "omed-e2e-stalled"
WRITES_SCHEMA = "omed-e2e-stalled-writes"
WRITTEN_RESOURCES = [
    "pods",
    "pods/status",
    "inferencereplicas",
    "inferencereplicas/status",
    "inferenceservices",
    "inferenceservices/status",
]


async def stalled_identity(control_plane: Any, namespace: str) -> str:
    """A ServiceAccount with the manager's roles, and a FlowSchema counting its pod and status
    writes at the API server (apiserver_flowcontrol_dispatched_requests_total); its token."""
    api = control_plane.request_json
    api(
        "POST",
        f"/api/v1/namespaces/{namespace}/serviceaccounts",
        {"metadata": {"name": STALLED_SA}},
    )
    subject = [{"kind": "ServiceAccount", "name": STALLED_SA, "namespace": namespace}]
    api(
        "POST",
        "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
        {
            "metadata": {"name": STALLED_SA},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": "ome-manager-role",
            },
            "subjects": subject,
        },
    )
    api(
        "POST",
        f"/apis/rbac.authorization.k8s.io/v1/namespaces/{namespace}/rolebindings",
        {
            "metadata": {"name": STALLED_SA},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "Role",
                "name": "ome-manager-role",
            },
            "subjects": subject,
        },
    )
    api(
        "POST",
        "/apis/flowcontrol.apiserver.k8s.io/v1/flowschemas",
        {
            "metadata": {"name": WRITES_SCHEMA},
            "spec": {
                "matchingPrecedence": 50,
                "priorityLevelConfiguration": {"name": "workload-low"},
                "distinguisherMethod": {"type": "ByUser"},
                "rules": [
                    {
                        "subjects": [
                            {
                                "kind": "ServiceAccount",
                                "serviceAccount": {"name": STALLED_SA, "namespace": namespace},
                            }
                        ],
                        "resourceRules": [
                            {
                                "verbs": ["create", "update", "patch", "delete"],
                                "apiGroups": ["", "ome.io"],
                                "resources": WRITTEN_RESOURCES,
                                "namespaces": ["*"],
                            }
                        ],
                    }
                ],
            },
        },
    )
    answer = api(
        "POST",
        f"/api/v1/namespaces/{namespace}/serviceaccounts/{STALLED_SA}/token",
        {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}},
    )
    return str(answer["status"]["token"])


def remove_stalled_identity(control_plane: Any, namespace: str) -> None:
    api = control_plane.request_json
    api(
        "DELETE",
        f"/apis/flowcontrol.apiserver.k8s.io/v1/flowschemas/{WRITES_SCHEMA}",
        missing_ok=True,
    )
    api(
        "DELETE",
        f"/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/{STALLED_SA}",
        missing_ok=True,
    )
    api(
        "DELETE",
        f"/apis/rbac.authorization.k8s.io/v1/namespaces/{namespace}/rolebindings/{STALLED_SA}",
        missing_ok=True,
    )
    api("DELETE", f"/api/v1/namespaces/{namespace}/serviceaccounts/{STALLED_SA}", missing_ok=True)


async def dispatched_writes(kube: Any) -> float:
    """The stalled identity's pod and status writes the API server has dispatched."""
    text = await kube.request("GET", "/metrics")
    if isinstance(text, bytes):
        text = text.decode()
    total = 0.0
    for line in str(text).splitlines():
        if line.startswith("apiserver_flowcontrol_dispatched_requests_total{") and (
            f'flow_schema="{WRITES_SCHEMA}"' in line
        ):
            total += float(line.rpartition(" ")[2])
    return total


async def test_a_leader_that_stalled_past_its_lease_never_writes_after_the_takeover(
    managers: Any, manager_config: Any, kube: Any, namespace: str, control_plane: Any
) -> None:
    from _support import inference_service, serving_runtime

    from omed.kube.errors import ServerError
    from omed.kube.resources import INFERENCE_SERVICES, PODS, SERVING_RUNTIMES

    install = managers.install
    token = await stalled_identity(control_plane, managers.namespace)
    try:
        kubeconfig = kubeconfig_through(
            install.kubeconfig_path,
            Path(install.kubeconfig_path).with_name("stalled.kubeconfig"),
            server=install.plane.url,
            token=token,
        )
        # Pods are created slowly (5 a second), so the stall lands in the middle of a pass,
        # with creations queued behind the rate limiter: the danger is the instant it resumes.
        old = managers.start(
            f"--kubeconfig={kubeconfig}", "--kube-api-qps=5", "--kube-api-burst=1", name="replica-a"
        )
        await old.wait_ready()
        await managers.wait_until(old.is_leader, timeout=15, what="replica-a leading")
        await old.wait_log("Starting workers", timeout=15)
        new = managers.start(name="replica-b")
        await new.wait_ready()
        await new.wait_log("attempting to acquire leader lease", timeout=5)

        runtime = serving_runtime(
            "srt-stall", engineConfig={"runner": {"name": "ome-container", "image": "ome/srt:1.0"}}
        )
        await kube.create(SERVING_RUNTIMES, runtime, namespace)
        service = inference_service(
            "stall", runtime="srt-stall", engine={"minReplicas": 40, "maxReplicas": 40}
        )
        await kube.create(INFERENCE_SERVICES, service, namespace)

        async def pods() -> int:
            return len(await kube.list_all(PODS, namespace))

        await managers.wait_until(
            lambda: _at_least(pods, 3), timeout=30, what="replica-a creating pods"
        )
        assert await dispatched_writes(kube) > 0  # the FlowSchema sees replica-a's writes
        managers.withdraw(old)  # admissions go to replica-b while replica-a is stopped
        old.signal(signal.SIGSTOP)
        stalled = time.monotonic()
        try:
            # Scaled while it is stopped: the standby takes over and does the work. The API
            # server may send the admission over its kept-alive connection to the stopped
            # replica (as it would to a stalled pod) and give up after the webhook's timeout:
            # the user tries again.
            async def scale() -> bool:
                try:
                    await kube.patch(
                        INFERENCE_SERVICES,
                        "stall",
                        {"spec": {"engine": {"minReplicas": 45, "maxReplicas": 45}}},
                        namespace,
                    )
                except ServerError:
                    return False
                return True

            await managers.wait_until(scale, timeout=40, what="the scale-up admitted")
            await managers.wait_until(
                lambda: _holder_is(kube, managers.namespace, "replica-b_"),
                timeout=managers.lease + 10,
                what="replica-b taking the Lease",
            )
            await managers.wait_until(new.is_leader, timeout=10, what="replica-b leading")
            await asyncio.sleep(max(0.0, stalled + 8.0 - time.monotonic()))  # an 8 s stall
            before = await dispatched_writes(kube)
        finally:
            old.signal(signal.SIGCONT)
        resumed = time.monotonic()
        code = await old.wait_exit(timeout=15)
        exited = time.monotonic() - resumed
        after = await dispatched_writes(kube)
        log = old.log()
        assert after == before, f"{after - before:g} writes after the takeover:\n{log[-6000:]}"
        assert code == 1, log[-4000:]
        [line] = old.log_lines(f"\t{FAILED}\t")
        assert fields(line) == {"error": "leader election lost"}
        assert exited <= 3.0, exited
        assert new.is_leader()
        await managers.wait_until(
            lambda: _at_least(pods, 45), timeout=60, what="replica-b finishing the scale-up"
        )
    finally:
        remove_stalled_identity(control_plane, managers.namespace)


async def _at_least(count: Any, wanted: int) -> bool:
    return bool(await count() >= wanted)


async def _holder_is(kube: Any, namespace: str, prefix: str) -> bool:
    return (await holder(kube, namespace)).startswith(prefix)
