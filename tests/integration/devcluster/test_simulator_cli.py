"""``python -m omed_devcluster.simulator`` runs the simulator until SIGTERM, then cleans up."""

from __future__ import annotations

import asyncio
import signal
import sys
import time
import uuid
from typing import Any

import pytest

from omed.kube.client import KubeClient
from omed.kube.resources import NODES, PODS
from omed_devcluster.simulator import POOL_LABEL

pytestmark = pytest.mark.integration


def _ready(pod: dict[str, Any]) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


async def test_command_line_runs_until_sigterm(
    kube: KubeClient, kubeconfig: str, namespace: str
) -> None:
    prefix = f"cli-{uuid.uuid4().hex[:6]}"
    selector = f"{POOL_LABEL}={prefix}"
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "omed_devcluster.simulator",
        "--kubeconfig",
        kubeconfig,
        "--nodes",
        "2",
        "--gpus-per-node",
        "4",
        "--node-prefix",
        prefix,
        "--namespace",
        namespace,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 30
        while len(await kube.list_all(NODES, labelSelector=selector)) < 2:
            assert process.returncode is None, "the simulator exited early"
            assert time.monotonic() < deadline, "nodes not registered"
            await asyncio.sleep(0.1)
        pod: dict[str, Any] = {
            "metadata": {"name": "via-cli"},
            "spec": {"containers": [{"name": "main", "image": "ome/serving:1.0"}]},
        }
        await kube.create(PODS, pod, namespace)
        while not _ready(pod := await kube.get(PODS, "via-cli", namespace)):
            assert time.monotonic() < deadline, f"pod not Ready: {pod.get('status')}"
            await asyncio.sleep(0.1)
        assert pod["spec"]["nodeName"].startswith(prefix)
    finally:
        if process.returncode is None:
            process.send_signal(signal.SIGTERM)
        output, _ = await asyncio.wait_for(process.communicate(), 30)
    text = output.decode()
    assert process.returncode == 0, text
    assert "Node simulator started" in text
    assert await kube.list_all(NODES, labelSelector=selector) == []
