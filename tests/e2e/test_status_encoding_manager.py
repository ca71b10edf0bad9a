"""Switching the Instance status encoding with the manager as a real process (``python -m omed``).

The switch as an operator runs it: set the omenativeStatus block, restart the
manager, check the ``Configured InferenceReplica status representation`` line, watch the
InferenceReplicas convert (``status.instanceStatusEncoding`` and InstanceStatusConverted
events), and back again. A damaged status on the way is an InstanceStatusDecodeFailed event,
a NO-GO of ``ome-status-preflight`` with the decode failure, and a repair (dry run, then
``--apply``) that brings the InferenceReplica back under the manager's management.

Everything runs in the test's namespace: the manager's ConfigMap and Lease, a manager
Deployment object for the preflight tool to read (never scheduled), the node simulator's
pods. Other tests' InferenceReplicas may share the control plane, so the preflight report is
checked for this test's lines, not for the whole cluster's verdict.
"""

from __future__ import annotations

import asyncio
import io
import json
import signal
from collections.abc import AsyncIterator, Callable, Mapping
from pathlib import Path
from typing import Any

import _support as support
import pytest
import yaml

from omed.api.constants import ANNOTATION_CONTROLLER_WRITE
from omed.cli.preflight import run as preflight_run
from omed.cli.preflight_repair import APPLIED_HEADER, DRY_RUN_HEADER
from omed.kube.client import KubeClient
from omed.kube.resources import EVENTS, INFERENCE_REPLICAS, PODS
from omed.statuscodec import DecodeError, decode_status
from omed_devcluster.simulator import NodeSimulator

pytestmark = [pytest.mark.integration, pytest.mark.slow]

STATUS_LINE = "Configured InferenceReplica status representation"
DENSE = {"instanceStatusEncoding": "DenseV1", "maxDecodedInstances": 20000}
COLUMNAR = {"instanceStatusEncoding": "ColumnarV2", "maxDecodedInstances": 20000}
REPLICAS = {"pool-a": 5, "pool-b": 4}
MANAGER_IMAGE = "ome/ome-manager:v1.3.0"  # the chart's default image: repository and appVersion
TEMPLATE = {"spec": {"containers": [{"name": "ome-container", "image": "ome/serving:1.0"}]}}


async def eventually(check: Callable[[], Any], *, timeout: float = 90.0, what: str) -> Any:
    return await support.eventually(check, timeout=timeout, what=what, interval=0.2)


def fields(line: str) -> dict[str, Any]:
    """The key-values of a console log line."""
    parsed: dict[str, Any] = json.loads(line.split("\t")[4])
    return parsed


def ready(pod: Mapping[str, Any]) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or ()
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


class Fleet:
    """The test's InferenceReplicas, their pods and events, as kubectl shows them."""

    def __init__(self, kube: KubeClient, namespace: str, managers: Any) -> None:
        self.kube = kube
        self.namespace = namespace
        self.managers = managers
        self.manager: Any = None

    async def start_manager(self, name: str, block: dict[str, Any], config: Any) -> None:
        if self.manager is not None:
            self.manager.signal(signal.SIGTERM)
            assert await self.manager.wait_exit(timeout=30) == 0
            self.managers.withdraw(self.manager)
        await config(omenativeStatus=block)
        self.manager = self.managers.start(name=name)
        line = await self.manager.wait_log(STATUS_LINE, timeout=60)
        assert fields(line) == block  # the block this replica loaded
        await self.manager.wait_ready(timeout=60)

    def metric(self, sample: str) -> float:
        """A sample of the running manager's /metrics (0 when absent or unreachable)."""
        samples = self.manager.metrics() if self.manager is not None else None
        return (samples or {}).get(sample, 0.0)

    async def get(self, name: str) -> dict[str, Any]:
        found: dict[str, Any] = await self.kube.get(INFERENCE_REPLICAS, name, self.namespace)
        return found

    async def encodings(self) -> dict[str, str | None]:
        return {
            name: ((await self.get(name)).get("status") or {}).get("instanceStatusEncoding")
            for name in REPLICAS
        }

    async def pods(self) -> dict[str, str]:
        return {
            p["metadata"]["name"]: p["metadata"]["uid"]
            for p in await self.kube.list_all(PODS, self.namespace)
        }

    async def converged(self, name: str, replicas: int) -> bool:
        irep = await self.get(name)
        status = irep.get("status") or {}
        try:
            rows = decode_status(status, max_rows=20000)
        except DecodeError:
            return False
        pods = [
            p
            for p in await self.kube.list_all(PODS, self.namespace)
            if p["metadata"]["name"].startswith(f"{name}-")
        ]
        return (
            status.get("observedGeneration") == irep["metadata"]["generation"]
            and status.get("readyReplicas") == replicas
            and len(rows) == replicas
            and all(r.get("phase") == "Ready" and not r.get("operation") for r in rows)
            and len(pods) == replicas
            and all(ready(p) for p in pods)
        )

    async def messages(self, reason: str) -> list[str]:
        return [
            str(e.get("message"))
            for e in await self.kube.list_all(EVENTS, self.namespace)
            if e.get("reason") == reason
        ]


@pytest.fixture
async def fleet(
    kube: KubeClient, namespace: str, managers: Any, manager_config: Any
) -> AsyncIterator[Fleet]:
    simulator = NodeSimulator(kube, nodes=2, namespaces=[namespace], node_prefix=f"{namespace}-n")
    await simulator.start()
    try:
        yield Fleet(kube, namespace, managers)
    finally:
        managers.stop_all()
        await simulator.stop()


async def preflight(*argv: str) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    code = await preflight_run(list(argv), out=out, err=err)
    return code, out.getvalue() + err.getvalue()


async def test_restarts_convert_the_fleet_and_a_repaired_status_comes_back(
    fleet: Fleet, kubeconfig: str, manager_config: Any, tmp_path: Path
) -> None:
    kube, namespace = fleet.kube, fleet.namespace
    await fleet.start_manager("manager-dense", DENSE, manager_config)
    for name, replicas in REPLICAS.items():
        body = {
            "apiVersion": "ome.io/v1beta1",
            "kind": "InferenceReplica",
            # Standalone replicas, written as the OME controller writes them: the chart's
            # webhook admits an InferenceReplica only with this annotation.
            "metadata": {"name": name, "annotations": {ANNOTATION_CONTROLLER_WRITE: "true"}},
            "spec": {
                "component": "engine",
                "replicas": replicas,
                "runners": [{"name": "default", "template": TEMPLATE}],
            },
        }
        await kube.create(INFERENCE_REPLICAS, body, namespace)
    for name, replicas in REPLICAS.items():
        await eventually(lambda n=name, r=replicas: fleet.converged(n, r), what=f"{name} Ready")
    assert await fleet.encodings() == {"pool-a": None, "pool-b": None}
    pods = await fleet.pods()

    # DenseV1 -> ColumnarV2: a restart with the other block converts every replica.
    await fleet.start_manager("manager-columnar", COLUMNAR, manager_config)
    all_columnar = {"pool-a": "ColumnarV2", "pool-b": "ColumnarV2"}

    async def columnar() -> bool:
        return await fleet.encodings() == all_columnar

    await eventually(columnar, what="both replicas stored as ColumnarV2")
    to_columnar = [
        f"InferenceReplica {namespace}/{name}: per-Instance status was rewritten "
        "from DenseV1 to ColumnarV2"
        for name in REPLICAS
    ]
    for message in to_columnar:
        await eventually(
            lambda m=message: _has(fleet, "InstanceStatusConverted", m),
            what=message,
        )
    assert await fleet.pods() == pods  # the Instances and their pods carried on
    await eventually(
        lambda: (
            fleet.metric(
                'omed_inferencereplica_status_conversions_total{from="dense_v1",to="columnar_v2"}'
            )
            >= 2
            and fleet.metric('omed_inferencereplica_status_encoding{encoding="columnar_v2"}') >= 2
            and fleet.metric(
                'omed_inferencereplica_status_bytes_written_total{encoding="columnar_v2"}'
            )
            > 0
        ),
        what="the leader's status-encoding metrics",
    )

    # A damaged status: the manager leaves pool-b alone; the preflight says NO-GO.
    stored = await fleet.get("pool-b")
    rows = decode_status(stored["status"], max_rows=20000)
    columns = dict(stored["status"]["instanceStatusColumns"])
    columns["index"] = "0-2"  # 3 indexes for 4 rows
    stored["status"] = {**stored["status"], "instanceStatusColumns": columns}
    await kube.replace_status(INFERENCE_REPLICAS, stored, namespace)
    failed = (
        f"InferenceReplica {namespace}/pool-b: per-Instance status cannot be decoded (coverage)"
    )
    await eventually(
        lambda: _has(fleet, "InstanceStatusDecodeFailed", failed), what="the decode failure"
    )
    coverage = 'omed_inferencereplica_status_decode_failures_total{reason="coverage"}'
    await eventually(lambda: fleet.metric(coverage) >= 1, what="the decode failure metric")
    await kube.patch(INFERENCE_REPLICAS, "pool-b", {"spec": {"replicas": 6}}, namespace)
    await asyncio.sleep(2.0)  # a while, for work the manager must not do
    assert await fleet.pods() == pods

    inventory = tmp_path / "fleet.yaml"
    inventory.write_text(
        yaml.safe_dump(
            {
                "managerImage": MANAGER_IMAGE,
                "omenativeStatus": COLUMNAR,
                # The chart's own Deployment and ConfigMap, as installed by helm.
                "manager": {
                    "namespace": fleet.managers.namespace,
                    "deployment": "ome-controller-manager",
                    "container": "manager",
                    "configMap": "inferenceservice-config",
                },
                "pageSize": 500,
                "clusters": [{"name": "dev", "kubeconfig": kubeconfig, "context": "omed-dev"}],
            },
            sort_keys=False,
        )
    )
    code, out = await preflight("--inventory", str(inventory))
    assert code == 1, out
    assert f"  - coverage: {namespace}/pool-b: " in out, out
    assert out.splitlines()[-1].startswith("result: NO-GO"), out

    replacement = tmp_path / "rows.yaml"
    replacement.write_text(yaml.safe_dump({"instanceStatuses": rows}, sort_keys=False))
    repair = [
        "repair", "--inventory", str(inventory), "--cluster", "dev", "--namespace", namespace,
        "--name", "pool-b", "--replacement", str(replacement),
    ]  # fmt: skip
    code, out = await preflight(*repair)
    assert (code, out.splitlines()[0]) == (0, DRY_RUN_HEADER), out
    assert await fleet.pods() == pods  # a dry run writes nothing, so nothing moved
    code, out = await preflight(*repair, "--apply")
    assert (code, out.splitlines()[0]) == (0, APPLIED_HEADER), out
    await eventually(lambda: fleet.converged("pool-b", 6), what="pool-b managed again, at 6")
    code, out = await preflight("--inventory", str(inventory))
    assert f"{namespace}/pool-b" not in out, out

    # ColumnarV2 -> DenseV1: the next restart converts them back.
    await fleet.start_manager("manager-dense-again", DENSE, manager_config)

    async def dense() -> bool:
        return await fleet.encodings() == {"pool-a": None, "pool-b": None}

    await eventually(dense, what="both replicas stored as lists again")
    for name in REPLICAS:
        back = (
            f"InferenceReplica {namespace}/{name}: per-Instance status was rewritten "
            "from ColumnarV2 to DenseV1"
        )
        await eventually(lambda m=back: _has(fleet, "InstanceStatusConverted", m), what=back)
    assert await fleet.converged("pool-a", 5) and await fleet.converged("pool-b", 6)


async def _has(fleet: Fleet, reason: str, message: str) -> bool:
    return message in await fleet.messages(reason)
