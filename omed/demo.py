"""``python -m omed.demo`` (``./dev demo``): omed's main job on an embedded default.

One command, from a fresh clone: build or find the control plane binaries (with progress),
start etcd and kube-apiserver, simulated GPU nodes, and the manager (a subprocess, as in
production: leader election, webhooks registered with the local API server, metrics and
probes); apply ``examples/`` (an InferenceService with an engine, a decoder and a router);
show progress until it converges; print its Instances; keep running until Ctrl-C, then stop
everything it started, in reverse order.

Invariant: nothing outlives the demo. The manager and the control plane die with it even on
``kill -9`` (``PR_SET_PDEATHSIG``), and a normal stop removes every temporary directory.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Coroutine, Mapping, Sequence
from pathlib import Path
from typing import Any

from omed.devcluster.binaries import BinaryError, ensure_binaries
from omed.devcluster.certs import CertificateAuthority
from omed.devcluster.controlplane import ControlPlane, ControlPlaneError, die_with_parent, free_port
from omed.devcluster.setup import install_crds, register_webhooks
from omed.devcluster.simulator import NodeSimulator, Timings
from omed.kube.client import KubeClient, load_config
from omed.kube.errors import AlreadyExists, ApiError
from omed.kube.resources import INFERENCE_REPLICAS, INFERENCE_SERVICES, NAMESPACES
from omed.statuscodec import DecodeError, decode_status

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
MANAGER_NAMESPACE = "ome"
DEMO_NAMESPACE = "demo"
SERVICE = "chat"


def say(message: str) -> None:
    print(f"[demo {time.strftime('%H:%M:%S')}] {message}", flush=True)


def _ready(obj: Mapping[str, Any], kind: str = "Ready") -> bool:
    conditions = (obj.get("status") or {}).get("conditions") or []
    return any(c.get("type") == kind and c.get("status") == "True" for c in conditions)


def _short(text: str, width: int) -> str:
    if len(text) <= width:
        return text
    head = (width - 3) // 2
    return text[:head] + "..." + text[-(width - 3 - head) :]


def instance_table(replicas: Sequence[Mapping[str, Any]]) -> str:
    """The Instances of the service, as ``kubectl ome instance list`` shows them."""
    order = {"engine": 0, "decoder": 1, "router": 2}
    lines = [f"{'COMP':<9}{'IDX/INC':<10}{'PHASE':<10}{'PODS':<8}{'REVS':<14}"]
    for irep in sorted(replicas, key=lambda r: order.get(r["spec"]["component"], 9)):
        try:
            rows = decode_status(irep.get("status") or {}, max_rows=20000)
        except DecodeError as err:
            lines.append(
                f"{irep['spec']['component']:<9}{'-':<10}{'-':<10}{'-':<8}{'-':<14}({err.reason})"
            )
            continue
        for row in sorted(rows, key=lambda r: r.get("index", 0)):
            pods = (
                f"{row.get('servingPodCount', 0)}/{row.get('availablePodCount', 0)}/"
                f"{row.get('podCount', 0)}"
            )
            revision = row.get("runningRevision") or row.get("targetRevision") or "-"
            lines.append(
                f"{irep['spec']['component']:<9}{row.get('index')}/{row.get('incarnation', 0):<8}"
                f"{row.get('phase', '-'):<10}{pods:<8}{_short(str(revision), 11):<14}"
            )
    return "\n".join(lines)


def _start_manager(
    *, plane: ControlPlane, cert_dir: Path, webhook_port: int, log_path: Path
) -> subprocess.Popen[bytes]:
    env = dict(os.environ, POD_NAMESPACE=MANAGER_NAMESPACE, POD_NAME="ome-controller-manager-demo")
    args = [
        sys.executable,
        "-m",
        "omed",
        f"--kubeconfig={plane.kubeconfig_path}",
        f"--metrics-bind-address=127.0.0.1:{free_port()}",
        f"--health-probe-addr=127.0.0.1:{free_port()}",
        "--leader-elect",
        "--webhook",
        f"--webhook-port={webhook_port}",
        f"--webhook-cert-dir={cert_dir}",
        "--zap-encoder=console",
        "--inferenceservice-max-concurrent-reconciles=4",
        "--inferencereplica-max-concurrent-reconciles=4",
        "--kube-api-qps=100",
        "--kube-api-burst=200",
    ]
    with log_path.open("ab") as log:
        return subprocess.Popen(
            args,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            preexec_fn=die_with_parent,  # noqa: PLW1509 - only prctl, async-signal-safe
        )


def _kubectl_apply(plane: ControlPlane, path: Path) -> None:
    result = subprocess.run(
        [
            str(plane.binaries.kubectl),
            f"--kubeconfig={plane.kubeconfig_path}",
            "apply",
            "-f",
            str(path),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        raise RuntimeError(f"kubectl apply -f {path.name} failed: {result.stderr.strip()}")
    for line in result.stdout.splitlines():
        say(f"kubectl: {line}")


def _tail(path: Path, lines: int = 20) -> str:
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])


async def _wait_converged(
    client: KubeClient, manager: subprocess.Popen[bytes], *, timeout: float, manager_log: Path
) -> None:
    deadline = time.monotonic() + timeout
    last = ""
    while True:
        if manager.poll() is not None:
            raise RuntimeError("the manager exited:\n" + _tail(manager_log))
        isvc = await client.get(INFERENCE_SERVICES, SERVICE, DEMO_NAMESPACE)
        listed = await client.list_page(INFERENCE_REPLICAS, DEMO_NAMESPACE)
        parts = []
        for irep in sorted(listed.get("items") or [], key=lambda r: r["metadata"]["name"]):
            status = irep.get("status") or {}
            parts.append(
                f"{irep['spec']['component']} {status.get('readyReplicas', 0)}/"
                f"{irep['spec']['replicas']}"
            )
        progress = ", ".join(parts) or "waiting for InferenceReplicas"
        if progress != last:
            say(f"Instances ready: {progress}")
            last = progress
        if _ready(isvc):
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"{SERVICE} not Ready after {timeout:.0f}s ({progress})")
        await asyncio.sleep(1.0)


async def _demo(
    plane: ControlPlane,
    *,
    nodes: int,
    gpus: int,
    timeout: float,
    exit_when_ready: bool,
    workdir: Path,
) -> int:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    client = KubeClient(await load_config(str(plane.kubeconfig_path)), qps=200, burst=400)
    manager: subprocess.Popen[bytes] | None = None
    simulator = NodeSimulator(
        client, nodes=nodes, gpus_per_node=gpus, node_prefix="gpu-node", timings=Timings.realistic()
    )
    try:
        say("installing the ome.io CRDs")
        await install_crds(client, ROOT / "deploy" / "crds")
        for name in (MANAGER_NAMESPACE, DEMO_NAMESPACE):
            with contextlib.suppress(AlreadyExists):
                await client.create(NAMESPACES, {"metadata": {"name": name}})
        _kubectl_apply(plane, EXAMPLES / "inferenceservice-config.yaml")
        say(f"starting {nodes} simulated GPU nodes ({gpus} x nvidia.com/gpu each)")
        await simulator.start()

        cert_dir = workdir / "serving-certs"
        cert_dir.mkdir()
        ca = CertificateAuthority.create("omed-demo-webhook-ca")
        serving = ca.issue(
            common_name="ome-webhook-server-service",
            ip_addresses=["127.0.0.1"],
            dns_names=["localhost"],
            server=True,
        )
        (cert_dir / "tls.crt").write_bytes(serving.cert_pem)
        (cert_dir / "tls.key").write_bytes(serving.key_pem)
        webhook_port = free_port()
        manager_log = workdir / "manager.log"
        say(f"starting the manager (log: {manager_log})")
        manager = _start_manager(
            plane=plane, cert_dir=cert_dir, webhook_port=webhook_port, log_path=manager_log
        )
        await register_webhooks(
            client, base_url=f"https://127.0.0.1:{webhook_port}", ca_pem=ca.cert_pem
        )
        _kubectl_apply(plane, EXAMPLES / "runtime.yaml")
        say("applying examples/inferenceservice.yaml (through the manager's webhooks)")
        for attempt in range(120):  # the webhook server needs a moment to start listening
            try:
                _kubectl_apply(plane, EXAMPLES / "inferenceservice.yaml")
                break
            except RuntimeError:
                if attempt == 119 or manager.poll() is not None:
                    raise
                await asyncio.sleep(0.5)
        await _wait_converged(client, manager, timeout=timeout, manager_log=manager_log)
        listed = await client.list_page(INFERENCE_REPLICAS, DEMO_NAMESPACE)
        say(f"InferenceService {DEMO_NAMESPACE}/{SERVICE} is Ready. Its Instances:")
        print(instance_table(listed.get("items") or []), flush=True)
        if exit_when_ready:
            return 0
        print(
            f"\nexport KUBECONFIG={plane.kubeconfig_path}\n"
            f"{plane.binaries.kubectl} get inferenceservices,inferencereplicas,pods -n demo\n"
            "\nPress Ctrl-C to stop and clean up.",
            flush=True,
        )
        await stop.wait()
        return 0
    except (ApiError, RuntimeError, TimeoutError) as err:
        print(f"error: {err}", file=sys.stderr)
        if (workdir / "manager.log").exists():
            print(
                "the manager's last log lines:\n" + _tail(workdir / "manager.log", 40),
                file=sys.stderr,
            )
        return 1
    finally:
        if manager is not None and manager.poll() is None:
            manager.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(asyncio.to_thread(manager.wait), 30)
            except TimeoutError:
                manager.kill()
        await simulator.stop()
        await client.close()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m omed.demo",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--nodes", type=int, default=4)
    parser.add_argument("--gpus-per-node", type=int, default=8)
    parser.add_argument(
        "--timeout", type=float, default=300.0, help="seconds to wait for the example to converge"
    )
    parser.add_argument(
        "--exit-when-ready",
        action="store_true",
        help="stop once the example is Ready (for tests and scripts)",
    )
    args = parser.parse_args(argv)
    try:
        binaries = ensure_binaries()
        say("starting etcd and kube-apiserver")
        plane = ControlPlane(binaries).start()
    except (BinaryError, ControlPlaneError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    workdir = Path(tempfile.mkdtemp(prefix="omed-demo-"))
    try:
        runner: Callable[[Coroutine[Any, Any, int]], int] = asyncio.run
        with contextlib.suppress(ImportError):
            import uvloop

            runner = uvloop.run
        return runner(
            _demo(
                plane,
                nodes=args.nodes,
                gpus=args.gpus_per_node,
                timeout=args.timeout,
                exit_when_ready=args.exit_when_ready,
                workdir=workdir,
            )
        )
    finally:
        plane.stop()
        shutil.rmtree(workdir, ignore_errors=True)
        say("stopped; nothing left behind")


if __name__ == "__main__":
    sys.exit(main())
