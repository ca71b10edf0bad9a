"""The README's main-job command, run as a new user would: it converges the example, and
Ctrl-C (or SIGTERM) stops it promptly at any stage, leaving nothing behind.

"Nothing behind" is checked from outside, in ``/proc``: every process the demo started
(taken just before the signal) is gone, nothing is left in its process group, none of the
ports those processes listened on is still listening, and its temporary directories (the
demo runs with ``TMPDIR`` in the test's own directory) are removed.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.slow]

DEMO = (sys.executable, "-m", "omed_devcluster.demo")
"""What ``./dev demo`` runs (``exec python -m omed_devcluster.demo``)."""
PROMPT = 10.0
"""Seconds within which a signalled demo must have stopped everything and exited."""


def test_demo_converges_the_example(control_plane: object) -> None:
    # control_plane: the binaries are known to work; the demo starts its own control plane.
    result = subprocess.run(
        [*DEMO, "--exit-when-ready", "--timeout", "240"],
        capture_output=True,
        text=True,
        timeout=420,
        check=False,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-4000:]
    ready = "InferenceService demo/chat is Ready. Its Instances "
    assert ready + "(kubectl ome instance list chat -n demo):" in output
    table = output.split("(kubectl ome instance list chat -n demo):")[1].splitlines()
    assert table[1].split() == ["COMP", "IDX/INC", "PHASE", "PODS", "REVS", "AOF", "EVIDENCE"]
    rows = [line.split() for line in table if line.startswith(("engine", "decoder", "router"))]
    assert all(r[-2:] == ["A--", "OK"] for r in rows), table
    assert [(r[0], r[2]) for r in rows] == [("engine", "Ready")] * 4 + [
        ("decoder", "Ready")
    ] * 2 + [("router", "Ready")]
    assert [r[3] for r in rows if r[0] == "decoder"] == ["3/3/3", "3/3/3"]
    # The Services the serving controller keeps, with the Ready endpoints the real
    # EndpointSlice controller found (one per Instance's serving pod), and the budgets.
    services = output.split("READY: the Ready addresses of each Service's EndpointSlices):")[1]
    lines = services.splitlines()
    assert lines[1].split() == ["NAME", "CLUSTER-IP", "PORTS", "READY", "MIN-AVAILABLE"]
    shown = {line.split()[0]: line.split()[1:] for line in lines[2:] if line.startswith("chat-")}
    for component, pods, ready, budget in (
        ("engine", 4, {"4"}, "3"),  # maxUnavailable 1 of 4 Instances of 1 pod
        # 1 of 2 Instances of 3 pods: 3 pods stay. Traffic reaches the 2 leaders alone once
        # the pods carry ome.io/runner; until then all 6 pods.
        ("decoder", 6, {"2", "6"}, "3"),
        ("router", 1, {"1"}, "0"),
    ):
        traffic = shown[f"chat-{component}"]
        assert traffic[1] == "8080/TCP" and traffic[3] == budget, shown
        assert traffic[2] in ready, shown
        assert traffic[0] != "None"
        assert shown[f"chat-{component}-headless"][:3] == ["None", "8080/TCP", str(pods)], shown
    assert "stopped; nothing left behind" in output


# -- stopping it ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Proc:
    pid: int
    ppid: int
    pgid: int
    start: int
    comm: str


def processes() -> dict[int, Proc]:
    """Every live (not zombie) process, from ``/proc``."""
    found = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(entry.path, "stat").read_text()
        except OSError:
            continue
        comm = stat[stat.index("(") + 1 : stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2 :].split()
        if fields[0] == "Z":
            continue
        pid = int(entry.name)
        found[pid] = Proc(pid, int(fields[1]), int(fields[2]), int(fields[19]), comm)
    return found


def started_by(pid: int) -> list[Proc]:
    """The live descendants of ``pid``."""
    table = processes()
    tree: list[Proc] = []
    todo = [p for p in table.values() if p.ppid == pid]
    while todo:
        proc = todo.pop()
        tree.append(proc)
        todo.extend(p for p in table.values() if p.ppid == proc.pid)
    return tree


def still_running(procs: list[Proc]) -> list[Proc]:
    table = processes()
    return [p for p in procs if p.pid in table and table[p.pid].start == p.start]


def listening_ports(inodes: set[str] | None = None) -> set[int]:
    """TCP ports in LISTEN, of the sockets ``inodes`` (all of them when None)."""
    ports = set()
    for name in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(name) as table:
            next(table)
            for line in table:
                fields = line.split()
                if fields[3] == "0A" and (inodes is None or fields[9] in inodes):
                    ports.add(int(fields[1].rsplit(":", 1)[1], 16))
    return ports


def sockets_of(procs: list[Proc]) -> set[str]:
    inodes = set()
    for proc in procs:
        try:
            fds = os.listdir(f"/proc/{proc.pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                target = os.readlink(f"/proc/{proc.pid}/fd/{fd}")
            except OSError:
                continue
            if target.startswith("socket:["):
                inodes.add(target[len("socket:[") : -1])
    return inodes


def wait_for(check: Callable[[], object], *, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g}s waiting for {what}")
        time.sleep(0.1)


@dataclass
class Demo:
    proc: subprocess.Popen[bytes]
    log: Path
    tmp: Path

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def wait_for_output(self, text: str, *, timeout: float) -> None:
        def seen() -> bool:
            if text in self.output():
                return True
            assert self.proc.poll() is None, f"the demo exited early:\n{self.output()[-4000:]}"
            return False

        wait_for(seen, timeout=timeout, what=f"{text!r} in the demo's output")

    def stopped_by(self, send: Callable[[], None]) -> tuple[int, float, list[Proc]]:
        """What the demo started, then ``send()``: its exit code and how long it took."""
        started = started_by(self.proc.pid)
        began = time.monotonic()
        send()
        try:
            code = self.proc.wait(timeout=PROMPT)
        except subprocess.TimeoutExpired:
            code = None
        elapsed = time.monotonic() - began
        assert code is not None, f"still running {PROMPT:g}s after the signal:\n{self.output()}"
        return code, elapsed, started


@contextmanager
def demo(
    tmp_path: Path,
    *args: str,
    env: dict[str, str] | None = None,
    command: tuple[str, ...] = DEMO,
) -> Iterator[Demo]:
    """The demo (or another long-running ``command``) as a terminal runs it: the leader of
    its own process group (a foreground job), its output to a file; ``TMPDIR`` in the test's
    directory."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    log = tmp_path / "demo.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [*command, *args],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env={**(env or os.environ), "TMPDIR": str(tmp)},
            start_new_session=True,
        )
    running = Demo(proc, log, tmp)
    try:
        yield running
    finally:
        if proc.poll() is None:  # the test failed: don't leave it to the next one
            left = started_by(proc.pid)
            proc.kill()
            proc.wait()
            for child in still_running(left):
                os.kill(child.pid, signal.SIGKILL)


def etcd_starting(running: Demo) -> set[int]:
    """Wait until ``running`` has started etcd (and not yet finished starting the control
    plane); the ports its processes listen on so far."""
    running.wait_for_output("starting the control plane", timeout=60)
    wait_for(
        lambda: {"etcd"} <= {p.comm for p in started_by(running.proc.pid)},
        timeout=30,
        what="etcd to start",
    )
    return listening_ports(sockets_of(started_by(running.proc.pid)))


def assert_nothing_left(running: Demo, started: list[Proc], ports: set[int]) -> None:
    assert still_running(started) == []
    group = [p for p in processes().values() if p.pgid == running.proc.pid]
    assert group == []
    assert listening_ports() & ports == set()
    assert sorted(os.listdir(running.tmp)) == []  # its work dir and the control plane's
    assert running.output().rstrip().endswith("stopped; nothing left behind")


@pytest.mark.parametrize("to_the_job", [True, False], ids=["ctrl-c", "kill-int-demo-only"])
def test_ctrl_c_while_waiting_for_convergence_stops_everything_promptly(
    control_plane: object, tmp_path: Path, to_the_job: bool
) -> None:
    # Ctrl-C in a terminal signals the whole foreground job; `kill -INT <pid>` the demo alone.
    with demo(tmp_path) as running:
        running.wait_for_output("Instances ready:", timeout=180)
        before = started_by(running.proc.pid)
        ports = listening_ports(sockets_of(before))
        assert {"etcd", "kube-apiserver"} <= {p.comm for p in before}
        assert len(ports) >= 5  # etcd's two, the API server's, the manager's three
        send = os.killpg if to_the_job else os.kill
        code, elapsed, started = running.stopped_by(lambda: send(running.proc.pid, signal.SIGINT))
        output = running.output()
        assert "is Ready" not in output  # it was stopped while waiting
        assert code == 130, output[-4000:]
        assert elapsed < PROMPT
        assert "SIGINT received: stopping, and cleaning up everything the demo started" in output
        assert "stopping the manager" in output
        assert "stopping the control plane" in output
        assert_nothing_left(running, started, ports)


def test_sigterm_while_the_control_plane_starts_stops_it_and_exits_143(
    control_plane: object, tmp_path: Path
) -> None:
    with demo(tmp_path) as running:
        ports = etcd_starting(running)
        code, elapsed, started = running.stopped_by(running.proc.terminate)  # SIGTERM
        output = running.output()
        assert "installing the ome-crd chart" not in output  # it stopped before the API server
        assert code == 143, output[-4000:]
        assert elapsed < PROMPT
        assert "SIGTERM received: stopping" in output
        assert_nothing_left(running, started, ports)


def endless_go_build(
    tmp_path: Path, *, then: str = "exec sleep 600"
) -> tuple[dict[str, str], Path]:
    """An environment whose binaries must be built (an empty cache, no prebuilt ones) by a
    ``go`` that never finishes (it writes its pid to the returned file, then runs ``then``):
    a stand-in for the 10-25 minute first build."""
    fake = tmp_path / "bin"
    fake.mkdir()
    go_pid = tmp_path / "go.pid"
    (fake / "go").write_text(
        f'#!/bin/sh\necho $$ > "{go_pid}"\necho "go: downloading k8s.io/kubernetes"\n{then}\n'
    )
    (fake / "go").chmod(0o755)
    env = {
        k: v
        for k, v in os.environ.items()
        if k != "KUBEBUILDER_ASSETS" and not k.startswith("TEST_ASSET_")
    }
    env.update(PATH=f"{fake}:{env.get('PATH', '')}", OMED_CACHE_DIR=str(tmp_path / "cache"))
    return env, go_pid


def test_ctrl_c_while_the_binaries_build_stops_the_build(tmp_path: Path) -> None:
    env, go_pid = endless_go_build(tmp_path)
    with demo(tmp_path, env=env) as running:
        wait_for(lambda: go_pid.exists() and go_pid.read_text().strip(), timeout=60, what="go")
        running.wait_for_output("go: downloading", timeout=30)
        # kill -INT: to the demo alone, which must stop the build itself.
        code, elapsed, started = running.stopped_by(
            lambda: os.kill(running.proc.pid, signal.SIGINT)
        )
        output = running.output()
        assert int(go_pid.read_text()) in {p.pid for p in started}
        assert code == 130, output[-4000:]
        assert elapsed < PROMPT
        assert "SIGINT received: stopping" in output
        assert "starting etcd" not in output
        assert_nothing_left(running, started, set())
