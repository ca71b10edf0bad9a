"""``python -m omed_devcluster.demo`` (``./dev demo``): omed's main job on an embedded default.

One command, from a fresh clone: build or find the control plane binaries (with progress),
start etcd, kube-apiserver, kube-controller-manager and kube-scheduler, simulated GPU nodes;
install the charts with helm (``ome-crd``, then ``ome-resources`` into ``ome`` with
``examples/ome-values.yaml``), and run the manager as the chart's Deployment would (a
subprocess with the rendered arguments and environment, the chart's ServiceAccount token,
its ConfigMap and webhook certificate, and its webhook reached through the chart's Service;
:mod:`omed_devcluster.install`); apply ``examples/`` (an InferenceService with an engine, a
decoder and a router);
show progress until it converges; print its Instances and its Services and
PodDisruptionBudgets (with the Ready addresses of each Service's EndpointSlices); keep running
until Ctrl-C, then stop everything it started, in reverse order.

Ctrl-C (SIGINT) or SIGTERM stops it at any stage: while the binaries build, while the
control plane starts, while it applies the examples or waits for them to converge, and
while it runs. It says which signal it got, stops what it started (the manager, the
simulated nodes, the control plane, any build still running), removes its temporary
directories, and exits with 128 + the signal's number: 130 for SIGINT, 143 for SIGTERM.
Exit 0: ``--exit-when-ready`` and the example converged; exit 1: something failed (the
message says what, with the manager's last log lines). A second signal while it cleans up
doesn't cut the clean-up short (each step is bounded: at most 15 s for the manager).

Invariant: nothing outlives the demo. The manager and the control plane die with it even on
``kill -9`` (``PR_SET_PDEATHSIG``); a stop, normal or by a signal, removes every temporary
directory and ends every process it started (last, any descendant still alive). The manager
and kubectl run in sessions of their own, so the terminal's Ctrl-C reaches only the demo,
which stops them in order (a manager given two signals would exit at once).
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
from types import FrameType
from typing import Any, Final

import yaml

from omed.cli import kubectl_ome
from omed.kube.client import KubeClient, load_config
from omed.kube.errors import AlreadyExists, ApiError
from omed.kube.resources import (
    ENDPOINT_SLICES,
    INFERENCE_REPLICAS,
    INFERENCE_SERVICES,
    NAMESPACES,
    POD_DISRUPTION_BUDGETS,
    PODS,
    SERVICES,
)
from omed_devcluster.binaries import BinaryError, ensure_binaries
from omed_devcluster.controlplane import ControlPlane, ControlPlaneError, die_with_parent, free_port
from omed_devcluster.install import OmeInstall
from omed_devcluster.simulator import NodeSimulator, Timings

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
MANAGER_NAMESPACE = "ome"
MANAGER_POD = "ome-controller-manager-demo"
VALUES = EXAMPLES / "ome-values.yaml"
DEMO_NAMESPACE = "demo"
SERVICE = "chat"
STOP_SIGNALS: Final = (signal.SIGINT, signal.SIGTERM)
MANAGER_STOP_TIMEOUT: Final = 15.0
"""Seconds the manager gets to stop after SIGTERM before it is killed."""
LEFTOVER_STOP_TIMEOUT: Final = 5.0
"""Seconds a leftover process gets after SIGTERM before SIGKILL."""


def say(message: str) -> None:
    print(f"[demo {time.strftime('%H:%M:%S')}] {message}", flush=True)


def _notice(message: str) -> None:
    """:func:`say` for signal handlers: one raw write, never the buffered (reentrant) print."""
    line = f"[demo {time.strftime('%H:%M:%S')}] {message}\n".encode()
    with contextlib.suppress(OSError, ValueError):
        os.write(sys.stdout.fileno(), line)


class Stopped(BaseException):
    """A stop signal arrived while the demo ran synchronous work (a build, the control plane
    starting); a ``BaseException`` like ``KeyboardInterrupt``, so no ``except Exception``
    on the way swallows it, and ``ControlPlane.start`` cleans up as for any exception."""


class StopSignals:
    """SIGINT and SIGTERM, for each stage of the demo.

    * :meth:`raising` (synchronous stages): the first signal raises :class:`Stopped` where
      the main thread is, blocking calls included.
    * :meth:`attach` (the event loop's stage): the first signal cancels the demo's task, so
      whatever it awaits (an API call, kubectl, the convergence poll) ends at once.
    * :meth:`recording` (between stages, and while cleaning up): signals are only recorded.

    Later signals never interrupt: they say that the demo is still stopping.
    """

    def __init__(self) -> None:
        self.received: int | None = None
        self.cleaning = False

    @property
    def exit_code(self) -> int:
        return 128 + (self.received or signal.SIGINT)

    def _first(self, signum: int) -> bool:
        if self.received is not None:
            _notice("still stopping: cleaning up what the demo started")
            return False
        self.received = signum
        _notice(
            f"{signal.Signals(signum).name} received: stopping, and cleaning up everything "
            "the demo started"
        )
        return True

    def _raise(self, signum: int, frame: FrameType | None) -> None:
        del frame
        if self._first(signum):
            raise Stopped(signum)

    def _record(self, signum: int, frame: FrameType | None) -> None:
        del frame
        self._first(signum)

    def raising(self) -> None:
        for sig in STOP_SIGNALS:
            signal.signal(sig, self._raise)

    def recording(self) -> None:
        for sig in STOP_SIGNALS:
            signal.signal(sig, self._record)

    def attach(self, loop: asyncio.AbstractEventLoop, task: asyncio.Task[Any]) -> None:
        def on_signal(signum: int) -> None:
            if self._first(signum) and not self.cleaning:
                task.cancel()

        for sig in STOP_SIGNALS:
            loop.add_signal_handler(sig, on_signal, sig)


def _demo_values() -> dict[str, Any]:
    values: dict[str, Any] = yaml.safe_load(VALUES.read_text())
    return values


def _ready(obj: Mapping[str, Any], kind: str = "Ready") -> bool:
    conditions = (obj.get("status") or {}).get("conditions") or []
    return any(c.get("type") == kind and c.get("status") == "True" for c in conditions)


def _start_manager(*, install: OmeInstall, log_path: Path) -> subprocess.Popen[bytes]:
    """One replica of the chart's Deployment, run as its pod would run it (its arguments,
    environment, ServiceAccount token and certificate), with its webhook published as an
    endpoint of the chart's Service."""
    webhook_port = free_port()
    args, env = install.manager_command(
        MANAGER_POD,
        metrics_port=free_port(),
        health_port=free_port(),
        webhook_port=webhook_port,
        python=sys.executable,
    )
    with log_path.open("ab") as log:
        manager = subprocess.Popen(
            args,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            preexec_fn=die_with_parent,  # noqa: PLW1509 - only prctl, async-signal-safe
            start_new_session=True,  # the terminal's Ctrl-C is the demo's to handle
        )
    install.publish_endpoint(MANAGER_POD, webhook_port)
    return manager


async def _stop_manager(manager: subprocess.Popen[bytes]) -> None:
    if manager.poll() is not None:
        return
    say("stopping the manager")
    manager.send_signal(signal.SIGTERM)
    try:
        await asyncio.wait_for(asyncio.to_thread(manager.wait), MANAGER_STOP_TIMEOUT)
    except TimeoutError:
        say(f"the manager did not stop within {MANAGER_STOP_TIMEOUT:g}s; killing it")
        manager.kill()
        await asyncio.to_thread(manager.wait)


async def _kubectl_apply(plane: ControlPlane, path: Path) -> None:
    """``kubectl apply -f path``, without blocking the loop; cancelled, it kills kubectl."""
    proc = await asyncio.create_subprocess_exec(
        str(plane.binaries.kubectl),
        f"--kubeconfig={plane.kubeconfig_path}",
        "apply",
        "-f",
        str(path),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        preexec_fn=die_with_parent,  # only prctl, async-signal-safe
        start_new_session=True,
    )
    try:
        out, err = await proc.communicate()
    except asyncio.CancelledError:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        await proc.wait()
        raise
    if proc.returncode != 0:
        raise RuntimeError(
            f"kubectl apply -f {path.name} failed: {err.decode(errors='replace').strip()}"
        )
    for line in out.decode(errors="replace").splitlines():
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
        items = listed.get("items") or []
        observed = all(
            (irep.get("status") or {}).get("observedGeneration")
            == irep["metadata"].get("generation")
            for irep in items
        )
        if _ready(isvc) and items and observed:  # Ready, and every replica's status current
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"{SERVICE} not Ready after {timeout:.0f}s ({progress})")
        await asyncio.sleep(1.0)


COMPONENTS: Final = ("engine", "decoder", "router")


async def _services_table(client: KubeClient, *, timeout: float) -> list[str]:
    """The lines of the example's Services once each component has its traffic Service with
    an endpoint per Ready pod, its headless Service and its PodDisruptionBudget (the serving
    controller may still be writing them when the Instances turn Ready)."""
    deadline = time.monotonic() + timeout
    selector = f"ome.io/inferenceservice={SERVICE}"
    while True:
        services = await client.list_all(SERVICES, DEMO_NAMESPACE, labelSelector=selector)
        budgets = await client.list_all(
            POD_DISRUPTION_BUDGETS, DEMO_NAMESPACE, labelSelector=selector
        )
        slices = await client.list_all(ENDPOINT_SLICES, DEMO_NAMESPACE, labelSelector=selector)
        ready: dict[str, set[str]] = {}
        for piece in slices:
            name = piece["metadata"]["labels"].get("kubernetes.io/service-name", "")
            for endpoint in piece.get("endpoints") or ():
                if (endpoint.get("conditions") or {}).get("ready"):
                    ready.setdefault(name, set()).update(endpoint.get("addresses") or ())
        names = {svc["metadata"]["name"] for svc in services}
        wanted = {f"{SERVICE}-{c}" for c in COMPONENTS}
        pods = await client.list_all(PODS, DEMO_NAMESPACE, labelSelector=selector)
        serving = {
            svc["metadata"]["name"]: _ready_pods(pods, svc["spec"].get("selector") or {})
            for svc in services
        }
        complete = (
            wanted | {f"{n}-headless" for n in wanted} <= names
            and wanted <= {b["metadata"]["name"] for b in budgets}
            and all(ready.get(n) and len(ready[n]) == serving.get(n) for n in wanted)
        )
        if complete or time.monotonic() > deadline:
            break
        await asyncio.sleep(1.0)
    budget_of = {b["metadata"]["name"]: b["spec"].get("minAvailable") for b in budgets}
    width = max([len("NAME"), *(len(svc["metadata"]["name"]) for svc in services)]) + 2
    lines = [f"{'NAME':<{width}}{'CLUSTER-IP':<12}{'PORTS':<12}{'READY':<7}MIN-AVAILABLE"]
    for svc in sorted(services, key=lambda s: s["metadata"]["name"]):
        name = svc["metadata"]["name"]
        ports = ",".join(f"{p['port']}/{p['protocol']}" for p in svc["spec"].get("ports") or ())
        lines.append(
            f"{name:<{width}}{svc['spec'].get('clusterIP', ''):<12}{ports or '-':<12}"
            f"{len(ready.get(name, ())):<7}{budget_of.get(name, '-')}"
        )
    return lines


def _ready_pods(pods: list[dict[str, Any]], selector: dict[str, str]) -> int:
    """How many live, Ready pods a Service's ``selector`` matches: what its EndpointSlices
    list as ready once the EndpointSlice controller has caught up."""
    count = 0
    for pod in pods:
        labels = pod["metadata"].get("labels") or {}
        if pod["metadata"].get("deletionTimestamp") or any(
            labels.get(k) != v for k, v in selector.items()
        ):
            continue
        conditions = (pod.get("status") or {}).get("conditions") or ()
        count += any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)
    return count


async def _demo(
    plane: ControlPlane,
    *,
    nodes: int,
    gpus: int,
    timeout: float,
    exit_when_ready: bool,
    workdir: Path,
    signals: StopSignals,
) -> int:
    task = asyncio.current_task()
    assert task is not None
    signals.attach(asyncio.get_running_loop(), task)
    if signals.received is not None:  # between the synchronous stages and this one
        return signals.exit_code
    client: KubeClient | None = None
    manager: subprocess.Popen[bytes] | None = None
    simulator: NodeSimulator | None = None
    try:
        client = KubeClient(await load_config(str(plane.kubeconfig_path)), qps=200, burst=400)
        simulator = NodeSimulator(
            client,
            nodes=nodes,
            gpus_per_node=gpus,
            node_prefix="gpu-node",
            timings=Timings.realistic(),
        )
        install = OmeInstall(plane, workdir=workdir / "install", namespace=MANAGER_NAMESPACE)
        say("installing the ome-crd chart with helm (the ome.io CRDs)")
        await asyncio.to_thread(install.install_crds)
        say(f"installing the ome-resources chart into namespace {MANAGER_NAMESPACE} with helm")
        await asyncio.to_thread(install.install, _demo_values())
        with contextlib.suppress(AlreadyExists):
            await client.create(NAMESPACES, {"metadata": {"name": DEMO_NAMESPACE}})
        say(f"starting {nodes} simulated GPU nodes ({gpus} x nvidia.com/gpu each)")
        await simulator.start()

        manager_log = workdir / "manager.log"
        say(
            f"starting the manager as the chart's Deployment runs it, under its "
            f"ServiceAccount (log: {manager_log})"
        )
        manager = _start_manager(install=install, log_path=manager_log)
        await _kubectl_apply(plane, EXAMPLES / "runtime.yaml")
        say("applying examples/inferenceservice.yaml (through the manager's webhooks)")
        for attempt in range(120):  # the webhook server needs a moment to start listening
            try:
                await _kubectl_apply(plane, EXAMPLES / "inferenceservice.yaml")
                break
            except RuntimeError:
                if attempt == 119 or manager.poll() is not None:
                    raise
                await asyncio.sleep(0.5)
        await _wait_converged(client, manager, timeout=timeout, manager_log=manager_log)
        say(
            f"InferenceService {DEMO_NAMESPACE}/{SERVICE} is Ready. Its Instances "
            f"(kubectl ome instance list {SERVICE} -n {DEMO_NAMESPACE}):"
        )
        sys.stdout.flush()
        await kubectl_ome.run(
            [
                "instance",
                "list",
                SERVICE,
                "-n",
                DEMO_NAMESPACE,
                "--kubeconfig",
                str(plane.kubeconfig_path),
            ]
        )
        sys.stdout.flush()
        say(
            f"Its Services and PodDisruptionBudgets (kubectl get services,poddisruptionbudgets "
            f"-n {DEMO_NAMESPACE} -l ome.io/inferenceservice={SERVICE}; READY: the Ready "
            "addresses of each Service's EndpointSlices):"
        )
        print("\n".join(await _services_table(client, timeout=60.0)), flush=True)
        if exit_when_ready:
            return 0
        print(
            f"\nexport KUBECONFIG={plane.kubeconfig_path}\n"
            f"{plane.binaries.kubectl} get inferenceservices,inferencereplicas,pods -n demo\n"
            f"{plane.binaries.kubectl} get services,endpointslices,poddisruptionbudgets -n demo\n"
            "\nPress Ctrl-C to stop and clean up.",
            flush=True,
        )
        await asyncio.get_running_loop().create_future()  # until a signal cancels the task
        return 0
    except asyncio.CancelledError:
        if signals.received is None:
            raise
        task.uncancel()
        return signals.exit_code
    except (ApiError, RuntimeError, TimeoutError) as err:
        print(f"error: {err}", file=sys.stderr)
        if (workdir / "manager.log").exists():
            print(
                "the manager's last log lines:\n" + _tail(workdir / "manager.log", 40),
                file=sys.stderr,
            )
        return 1
    finally:
        signals.cleaning = True  # a signal from here on must not cut the clean-up short
        if manager is not None:
            await _stop_manager(manager)
        if simulator is not None:
            say("stopping the simulated nodes")
            await simulator.stop()
        if client is not None:
            await client.close()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m omed_devcluster.demo",
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
    runner: Callable[[Coroutine[Any, Any, int]], int] = asyncio.run
    with contextlib.suppress(ImportError):
        import uvloop

        runner = uvloop.run
    signals = StopSignals()
    signals.raising()
    plane: ControlPlane | None = None
    workdir: Path | None = None
    code = 1
    try:
        binaries = ensure_binaries()
        say("starting the control plane (etcd, kube-apiserver, controller manager, scheduler)")
        plane = ControlPlane(binaries)
        plane.start()  # on any exception, Stopped included, it stops what it started
        signals.recording()  # the loop's handlers take over once it runs
        workdir = Path(tempfile.mkdtemp(prefix="omed-demo-"))
        code = runner(
            _demo(
                plane,
                nodes=args.nodes,
                gpus=args.gpus_per_node,
                timeout=args.timeout,
                exit_when_ready=args.exit_when_ready,
                workdir=workdir,
                signals=signals,
            )
        )
    except (BinaryError, ControlPlaneError) as err:
        print(f"error: {err}", file=sys.stderr)
    except (Stopped, KeyboardInterrupt):  # KeyboardInterrupt: SIGINT as the loop closed
        code = signals.exit_code if signals.received else 128 + signal.SIGINT
    finally:
        # The loop's close restored the default handlers: record signals again, so that a
        # second Ctrl-C can't cut the rest of the clean-up short.
        signals.cleaning = True
        signals.recording()
        if plane is not None and plane.dir is not None:
            say("stopping the control plane")
        if plane is not None:
            plane.stop()
        if workdir is not None:
            shutil.rmtree(workdir, ignore_errors=True)
        _stop_leftovers()
        say("stopped; nothing left behind")
    return code


# -- the last resort: any process the demo started that is still alive ---------------------------


def _proc_stat(pid: int) -> tuple[int, str, int] | None:
    """``(ppid, state, start time)`` of ``pid`` from ``/proc`` (Linux), or ``None``."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rfind(")") + 2 :].split()
    try:
        return int(fields[1]), fields[0], int(fields[19])
    except (IndexError, ValueError):
        return None


def _descendants(pid: int) -> dict[int, int]:
    """Every live (not zombie) descendant of ``pid``: pid -> its start time (``/proc``)."""
    children: dict[int, list[int]] = {}
    started: dict[int, int] = {}
    with contextlib.suppress(OSError):
        for entry in os.scandir("/proc"):
            if not entry.name.isdigit():
                continue
            stat = _proc_stat(int(entry.name))
            if stat is None or stat[1] == "Z":
                continue
            children.setdefault(stat[0], []).append(int(entry.name))
            started[int(entry.name)] = stat[2]
    found: dict[int, int] = {}
    todo = list(children.get(pid, ()))
    while todo:
        child = todo.pop()
        if child not in found:
            found[child] = started[child]
            todo.extend(children.get(child, ()))
    return found


def _comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return "?"


def _alive(pid: int, start: int) -> bool:
    stat = _proc_stat(pid)
    return stat is not None and stat[1] != "Z" and stat[2] == start


def _reap() -> None:
    with contextlib.suppress(ChildProcessError):
        while os.waitpid(-1, os.WNOHANG)[0] > 0:
            pass


def _stop_leftovers() -> None:
    """SIGTERM, then SIGKILL, every descendant still alive (a build interrupted by a signal,
    say: its ``go`` and compilers). The whole tree is taken first, since a child whose
    parent dies is no longer ours to find."""
    left = _descendants(os.getpid())
    if not left:
        return
    named = ", ".join(f"{_comm(pid)} ({pid})" for pid in sorted(left))
    say(f"stopping {len(left)} leftover process(es): {named}")
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid, start in left.items():
            if _alive(pid, start):
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, sig)
        deadline = time.monotonic() + LEFTOVER_STOP_TIMEOUT
        while time.monotonic() < deadline:
            _reap()
            left = {pid: start for pid, start in left.items() if _alive(pid, start)}
            if not left:
                return
            time.sleep(0.05)


if __name__ == "__main__":
    sys.exit(main())
