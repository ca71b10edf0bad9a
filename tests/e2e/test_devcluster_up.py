"""``./dev up`` (``python -m omed_devcluster up``): Ctrl-C or SIGTERM stops it at any stage
(building the binaries, starting etcd and kube-apiserver, running), leaving nothing behind,
checked from ``/proc`` as for the demo."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import pytest
from test_demo import (
    PROMPT,
    assert_nothing_left,
    demo,
    endless_go_build,
    etcd_starting,
    listening_ports,
    sockets_of,
    started_by,
    wait_for,
)

pytestmark = [pytest.mark.integration, pytest.mark.slow]

UP = (sys.executable, "-m", "omed_devcluster", "up")


def test_ctrl_c_while_running_stops_the_cluster(control_plane: object, tmp_path: Path) -> None:
    with demo(tmp_path, "--nodes", "2", command=UP) as running:
        running.wait_for_output("Press Ctrl-C to stop and clean up.", timeout=120)
        before = started_by(running.proc.pid)
        assert {"etcd", "kube-apiserver"} <= {p.comm for p in before}
        ports = listening_ports(sockets_of(before))
        code, elapsed, started = running.stopped_by(
            lambda: os.killpg(running.proc.pid, signal.SIGINT)
        )
        assert code == 130, running.output()[-4000:]
        assert elapsed < PROMPT
        assert "SIGINT received: stopping" in running.output()
        assert_nothing_left(running, started, ports)


def test_sigterm_while_the_control_plane_starts_stops_it(
    control_plane: object, tmp_path: Path
) -> None:
    with demo(tmp_path, command=UP) as running:
        ports = etcd_starting(running)
        code, elapsed, started = running.stopped_by(running.proc.terminate)
        output = running.output()
        assert "A local control plane is running" not in output
        assert code == 143, output[-4000:]
        assert elapsed < PROMPT
        assert "SIGTERM received: stopping" in output
        assert_nothing_left(running, started, ports)


def test_ctrl_c_while_the_binaries_build_stops_the_build(tmp_path: Path) -> None:
    # A go with a child of its own, as go build has compilers.
    env, go_pid = endless_go_build(tmp_path, then="sleep 600 &\nwait")
    with demo(tmp_path, env=env, command=UP) as running:
        wait_for(lambda: go_pid.exists() and go_pid.read_text().strip(), timeout=60, what="go")
        wait_for(
            lambda: "sleep" in {p.comm for p in started_by(running.proc.pid)},
            timeout=30,
            what="go's child",
        )
        code, elapsed, started = running.stopped_by(
            lambda: os.kill(running.proc.pid, signal.SIGINT)
        )
        output = running.output()
        assert int(go_pid.read_text()) in {p.pid for p in started}
        assert "sleep" in {p.comm for p in started}
        assert code == 130, output[-4000:]
        assert elapsed < PROMPT
        assert "starting etcd" not in output
        assert_nothing_left(running, started, set())
