"""The README's main-job command, run as a new user would: it converges the example."""

from __future__ import annotations

import subprocess
import sys

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def test_demo_converges_the_example(control_plane: object) -> None:
    # control_plane: the binaries are known to work; the demo starts its own control plane.
    result = subprocess.run(
        [sys.executable, "-m", "omed.demo", "--exit-when-ready", "--timeout", "240"],
        capture_output=True,
        text=True,
        timeout=420,
        check=False,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-4000:]
    assert "InferenceService demo/chat is Ready. Its Instances:" in output
    table = output.split("Its Instances:")[1].splitlines()
    rows = [line.split() for line in table if line.startswith(("engine", "decoder", "router"))]
    assert [(r[0], r[2]) for r in rows] == [("engine", "Ready")] * 4 + [
        ("decoder", "Ready")
    ] * 2 + [("router", "Ready")]
    assert [r[3] for r in rows if r[0] == "decoder"] == ["3/3/3", "3/3/3"]
    assert "stopped; nothing left behind" in output
