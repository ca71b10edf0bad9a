"""Paths and small helpers shared by the chart tests (imported by conftest and the tests)."""

from __future__ import annotations

import re
import subprocess
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[3]
CHARTS = ROOT / "deploy" / "charts"
CRD_CHART = CHARTS / "ome-crd"
RESOURCES_CHART = CHARTS / "ome-resources"

Render = Callable[..., list[dict[str, Any]]]
RenderText = Callable[..., str]
RenderError = Callable[..., str]


def run_helm(helm: str, args: Sequence[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([helm, *args], capture_output=True, text=True, timeout=120, check=False)


def run_kubectl(kubectl: str, kubeconfig: str, *args: str, stdin: str = "") -> str:
    """Run kubectl against the test apiserver; its stdout. Fails the test when it fails."""
    result = subprocess.run(
        [kubectl, "--kubeconfig", kubeconfig, *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def find(docs: list[dict[str, Any]], kind: str, name: str | None = None) -> dict[str, Any]:
    """The one rendered object of this kind (and name)."""
    found = [
        d for d in docs if d.get("kind") == kind and (name is None or d["metadata"]["name"] == name)
    ]
    assert len(found) == 1, f"{len(found)} {kind} {name or ''} rendered"
    return found[0]


def failure_message(stderr: str) -> str:
    """The message of helm's ``Error: execution error at (<template>): <message>`` line: what
    a ``fail`` in a template says, without helm's prefix."""
    match = re.search(r"^Error: execution error at \([^)]*\): (.*)$", stderr, re.MULTILINE)
    assert match, stderr
    return match.group(1)
