"""ome-status-preflight against two real clusters: the session control plane and a second one.

Each cluster gets what an OME installation has for the tool to read: namespace ``ome`` with the
manager Deployment (never scheduled: there is no scheduler, which the tool doesn't need) and
the inferenceservice-config ConfigMap, the CRDs, and InferenceReplicas whose statuses were
written through the status subresource in both encodings. The tests then change one thing at a
time (a ConfigMap, an image, a damaged status, an object changed under a repair) and check the
report lines and exit codes operators script against. One test runs the tool as a subprocess;
the others call it in-process.

The session control plane is shared with other tests, so counts are exact only for the second
cluster; the verdicts hold for both (other tests' InferenceReplicas hold valid statuses).
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import dataclasses
import io
import json
import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml

from omed.cli.preflight import run
from omed.cli.preflight_repair import APPLIED_HEADER, DRY_RUN_FOOTER, DRY_RUN_HEADER
from omed.kube.client import KubeClient, load_config
from omed.kube.errors import AlreadyExists
from omed.kube.resources import CONFIGMAPS, DEPLOYMENTS, INFERENCE_REPLICAS, NAMESPACES
from omed.statuscodec import DecodeError, choose_encoding, decode_status, encode_columnar
from omed_devcluster.controlplane import ControlPlane, free_port
from omed_devcluster.setup import apply, install_crds

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[3]
CONTEXT = "omed-dev"
MANAGER_IMAGE = "ome/ome-manager:v1.3.0"
BLOCK = {"instanceStatusEncoding": "ColumnarV2", "maxDecodedInstances": 20000}
BLOCK_JSON = '{"instanceStatusEncoding":"ColumnarV2","maxDecodedInstances":20000}'
REVISION = "example-engine-2f32f6fe"
TEMPLATE = {
    "metadata": {"labels": {"app": "chat"}},
    "spec": {"containers": [{"name": "ome-container", "image": "ome/serving:1.0"}]},
}


def make_rows(count: int) -> list[dict[str, Any]]:
    return [
        {
            "index": index,
            "incarnation": 1,
            "phase": "Ready",
            "runningRevision": REVISION,
            "podCount": 1,
            "servingPodCount": 1,
            "availablePodCount": 1,
            "admitted": True,
        }
        for index in range(count)
    ]


def columnar_status(rows: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "observedGeneration": 1,
        "replicas": len(rows),
        "readyReplicas": len(rows),
        "currentRevision": REVISION,
        "instanceStatusEncoding": "ColumnarV2",
        "instanceStatusColumns": encode_columnar(rows),
    }


def dense_status(rows: list[dict[str, Any]]) -> dict[str, Any]:
    return {"observedGeneration": 1, "replicas": len(rows), "instanceStatuses": rows}


@dataclasses.dataclass(kw_only=True)
class Cluster:
    name: str
    kubeconfig: Path
    client: KubeClient
    namespace: str
    """Where this module's InferenceReplicas live."""


@dataclasses.dataclass(kw_only=True)
class Fleet:
    east: Cluster
    """The session control plane."""
    west: Cluster
    """The second control plane, started by this module."""
    inventory: Path
    document: dict[str, Any]

    @property
    def clusters(self) -> tuple[Cluster, Cluster]:
        return self.east, self.west


# -- setup -------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def second_plane(control_plane: Any) -> Iterator[ControlPlane]:
    plane = ControlPlane(control_plane.binaries).start()
    try:
        yield plane
    finally:
        plane.stop()


def deployment(image: str = MANAGER_IMAGE) -> dict[str, Any]:
    labels = {"control-plane": "ome-controller-manager"}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "ome-controller-manager", "namespace": "ome"},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "containers": [
                        {"name": "kube-rbac-proxy", "image": "ome/kube-rbac-proxy:v0.15.0"},
                        {"name": "manager", "image": image},
                    ]
                },
            },
        },
    }


def configmap(block: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "inferenceservice-config", "namespace": "ome"},
        "data": {
            "omenativeStatus": json.dumps(block, indent=2),
            "deploy": '{"defaultDeploymentMode": "OMENative"}',
        },
    }


async def create_replica(
    client: KubeClient, *, namespace: str, name: str, status: dict[str, Any] | None
) -> dict[str, Any]:
    body = {
        "apiVersion": "ome.io/v1beta1",
        "kind": "InferenceReplica",
        "metadata": {"name": name},
        "spec": {
            "component": "engine",
            "replicas": (status or {}).get("replicas", 0),
            "runners": [{"name": "default", "template": TEMPLATE}],
        },
    }
    created: dict[str, Any] = await client.create(INFERENCE_REPLICAS, body, namespace)
    if status is None:
        return created
    written: dict[str, Any] = await client.replace_status(
        INFERENCE_REPLICAS, {**created, "status": status}, namespace
    )
    return written


async def put_status(cluster: Cluster, *, name: str, status: dict[str, Any]) -> dict[str, Any]:
    current = await cluster.client.get(INFERENCE_REPLICAS, name, cluster.namespace)
    written: dict[str, Any] = await cluster.client.replace_status(
        INFERENCE_REPLICAS, {**current, "status": status}, cluster.namespace
    )
    return written


async def set_up_cluster(name: str, kubeconfig: Path) -> Cluster:
    client = KubeClient(await load_config(str(kubeconfig), context=CONTEXT), qps=500, burst=1000)
    await install_crds(client, ROOT / "deploy" / "crds")
    ns = f"pf-{uuid.uuid4().hex[:8]}"
    for each in ("ome", ns):
        with contextlib.suppress(AlreadyExists):
            await client.create(NAMESPACES, {"metadata": {"name": each}})
    await apply(client, DEPLOYMENTS, deployment(), "ome")
    await apply(client, CONFIGMAPS, configmap(BLOCK), "ome")
    cluster = Cluster(name=name, kubeconfig=kubeconfig, client=client, namespace=ns)
    statuses = {
        "chat-engine": columnar_status(make_rows(6)),
        "chat-router": dense_status(make_rows(2)),
        "summarize-engine": columnar_status(make_rows(3)),
        "idle-engine": None,
    }
    for replica_name, status in statuses.items():
        await create_replica(client, namespace=ns, name=replica_name, status=status)
    return cluster


@pytest.fixture(scope="module")
async def fleet(
    control_plane: Any, second_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Fleet]:
    east = await set_up_cluster("east", Path(control_plane.kubeconfig_path))
    assert second_plane.kubeconfig_path is not None
    west = await set_up_cluster("west", second_plane.kubeconfig_path)
    document = {
        "managerImage": MANAGER_IMAGE,
        "omenativeStatus": dict(BLOCK),
        "manager": {
            "namespace": "ome",
            "deployment": "ome-controller-manager",
            "container": "manager",
            "configMap": "inferenceservice-config",
        },
        "pageSize": 2,
        "clusters": [
            {"name": "east", "kubeconfig": str(east.kubeconfig), "context": CONTEXT},
            {"name": "west", "kubeconfig": str(west.kubeconfig), "context": CONTEXT},
        ],
    }
    inventory = tmp_path_factory.mktemp("preflight") / "fleet.yaml"
    inventory.write_text(yaml.safe_dump(document, sort_keys=False))
    try:
        yield Fleet(east=east, west=west, inventory=inventory, document=document)
    finally:
        for cluster in (east, west):
            for item in await cluster.client.list_all(INFERENCE_REPLICAS, cluster.namespace):
                await cluster.client.delete(
                    INFERENCE_REPLICAS, item["metadata"]["name"], cluster.namespace
                )
            await cluster.client.delete(DEPLOYMENTS, "ome-controller-manager", "ome")
            await cluster.client.delete(CONFIGMAPS, "inferenceservice-config", "ome")
            await cluster.client.close()


async def preflight(*argv: str, before_write: Any = None) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = await run(list(argv), out=out, err=err, before_write=before_write)
    return code, out.getvalue(), err.getvalue()


def write_inventory(path: Path, document: dict[str, Any]) -> Path:
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


def write_rows(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text(yaml.safe_dump({"instanceStatuses": rows}, sort_keys=False))
    return path


async def damage(cluster: Cluster, name: str) -> tuple[dict[str, Any], DecodeError]:
    """Break coverage: the index sequence loses its last row. Returns the object and the
    codec's own error for it."""
    current = await cluster.client.get(INFERENCE_REPLICAS, name, cluster.namespace)
    status = copy.deepcopy(current["status"])
    status["instanceStatusColumns"]["index"] = (
        f"0-{status['instanceStatusColumns']['rowCount'] - 2}"
    )
    written = await put_status(cluster, name=name, status=status)
    with pytest.raises(DecodeError) as caught:
        decode_status(written["status"], max_rows=20000)
    return written, caught.value


# -- the fleet check ---------------------------------------------------------------------------


async def test_healthy_fleet_is_go_as_a_subprocess(fleet: Fleet) -> None:
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "omed.cli.preflight", "--inventory", str(fleet.inventory),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, cwd=ROOT,
    )  # fmt: skip
    raw_out, raw_err = await asyncio.wait_for(process.communicate(), timeout=120)
    stdout, stderr = raw_out.decode(), raw_err.decode()
    assert process.returncode == 0, stdout + stderr
    lines = stdout.splitlines()
    assert lines[-1] == "result: GO (2 clusters)"
    assert "east: GO" in lines
    west = lines.index("west: GO")
    assert lines[west + 1 : west + 4] == [
        "  InferenceReplicas: 4 (DenseV1 2, ColumnarV2 2)",
        "  largestColumnarV2Rows: 6",
        "  decode failures: 0",
    ]
    assert stderr == ""


async def test_json_report_counts_every_page(fleet: Fleet) -> None:
    code, out, _ = await preflight("--inventory", str(fleet.inventory), "--json")
    assert code == 0
    report = json.loads(out)
    assert report["result"] == "GO"
    assert report["summary"] == "GO (2 clusters)"
    east, west = report["clusters"]
    assert (east["name"], east["verdict"], east["problems"]) == ("east", "GO", [])
    assert east["inferenceReplicas"]["total"] >= 4  # other tests' objects are listed too
    assert west == {
        "name": "west",
        "verdict": "GO",
        "problems": [],
        "inferenceReplicas": {
            "total": 4,
            "byEncoding": {"DenseV1": 2, "ColumnarV2": 2},
            "largestColumnarV2Rows": 6,
            "decodeFailures": [],
        },
    }


async def test_changed_configmap_is_no_go(fleet: Fleet) -> None:
    dense = {"instanceStatusEncoding": "DenseV1", "maxDecodedInstances": 20000}
    await apply(fleet.west.client, CONFIGMAPS, configmap(dense), "ome")
    try:
        code, out, _ = await preflight("--inventory", str(fleet.inventory))
    finally:
        await apply(fleet.west.client, CONFIGMAPS, configmap(BLOCK), "ome")
    assert code == 1
    lines = out.splitlines()
    assert "east: GO" in lines
    assert "west: NO-GO" in lines
    assert (
        "  - config_block: configmap ome/inferenceservice-config sets omenativeStatus "
        '{"instanceStatusEncoding":"DenseV1","maxDecodedInstances":20000}, '
        f"the inventory wants {BLOCK_JSON}"
    ) in lines
    assert lines[-1] == "result: NO-GO (1 of 2 clusters)"


async def test_invalid_configmap_block_is_no_go_with_the_managers_error(fleet: Fleet) -> None:
    bad = {"instanceStatusEncoding": "ColumnarV2"}
    await apply(fleet.east.client, CONFIGMAPS, configmap(bad), "ome")
    try:
        code, out, _ = await preflight("--inventory", str(fleet.inventory))
    finally:
        await apply(fleet.east.client, CONFIGMAPS, configmap(BLOCK), "ome")
    assert code == 1
    assert (
        "  - config_block: configmap ome/inferenceservice-config: Failed to initialize OMENative "
        "status configuration: validate omenativeStatus.maxDecodedInstances: "
        "omenativeStatus.maxDecodedInstances is required when instanceStatusEncoding is "
        "ColumnarV2"
    ) in out.splitlines()


async def test_other_manager_image_is_no_go(fleet: Fleet) -> None:
    await apply(fleet.west.client, DEPLOYMENTS, deployment("ome/ome-manager:v1.2.2"), "ome")
    try:
        code, out, _ = await preflight("--inventory", str(fleet.inventory))
    finally:
        await apply(fleet.west.client, DEPLOYMENTS, deployment(), "ome")
    assert code == 1
    assert (
        "  - manager_image: container manager of deployment ome/ome-controller-manager runs "
        "ome/ome-manager:v1.2.2, the inventory wants ome/ome-manager:v1.3.0"
    ) in out.splitlines()
    assert out.splitlines()[-1] == "result: NO-GO (1 of 2 clusters)"


async def test_unreachable_and_unknown_context_are_no_go_not_a_crash(
    fleet: Fleet, tmp_path: Path
) -> None:
    closed = yaml.safe_load(fleet.west.kubeconfig.read_text())
    port = free_port()  # nothing listens there
    closed["clusters"][0]["cluster"]["server"] = f"https://127.0.0.1:{port}"
    (tmp_path / "closed").write_text(yaml.safe_dump(closed))
    document = copy.deepcopy(fleet.document)
    document["clusters"] += [
        {"name": "gone", "kubeconfig": "closed", "context": CONTEXT},  # relative to the file
        {"name": "typo", "kubeconfig": str(fleet.west.kubeconfig), "context": "omed-prod"},
    ]
    inventory = write_inventory(tmp_path / "fleet.yaml", document)
    code, out, _ = await preflight("--inventory", str(inventory))
    assert code == 1
    lines = out.splitlines()
    gone = lines.index("gone: NO-GO")
    assert lines[gone + 1] == "  InferenceReplicas: not listed"
    assert lines[gone + 2].startswith(f"  - unreachable: cannot reach https://127.0.0.1:{port}: ")
    typo = lines.index("typo: NO-GO")
    assert lines[typo + 2].startswith(
        f"  - kubeconfig: cannot load context omed-prod from {fleet.west.kubeconfig}: "
    )
    assert lines[-1] == "result: NO-GO (2 of 4 clusters)"


async def test_bad_flag_and_bad_inventory_exit_2(fleet: Fleet, tmp_path: Path) -> None:
    code, out, err = await preflight("--inventory", str(fleet.inventory), "--verbose")
    assert (code, out) == (2, "")
    assert err.startswith("error: unrecognized arguments: --verbose\n")

    code, _, err = await preflight()
    assert code == 2
    assert err.startswith("error: the following arguments are required: --inventory\n")

    document = copy.deepcopy(fleet.document)
    document["clusters"][1]["kubeConfig"] = document["clusters"][1].pop("kubeconfig")
    inventory = write_inventory(tmp_path / "fleet.yaml", document)
    code, out, err = await preflight("--inventory", str(inventory))
    assert (code, out) == (2, "")
    assert err.splitlines() == [
        f"error: inventory {inventory}: clusters[1].kubeconfig is required",
        f"error: inventory {inventory}: clusters[1].kubeConfig is not a known field",
    ]


# -- repair ------------------------------------------------------------------------------------


async def test_damaged_status_is_no_go_and_repair_brings_it_back(
    fleet: Fleet, tmp_path: Path
) -> None:
    west = fleet.west
    damaged, error = await damage(west, "chat-engine")
    code, out, _ = await preflight("--inventory", str(fleet.inventory))
    assert code == 1
    lines = out.splitlines()
    assert f"  - coverage: {west.namespace}/chat-engine: {error.detail}" in lines
    assert "  decode failures: 1" in lines
    assert lines[-1] == "result: NO-GO (1 of 2 clusters)"

    rows = make_rows(6)
    replacement = write_rows(tmp_path / "rows.yaml", rows)
    repair = [
        "repair", "--inventory", str(fleet.inventory), "--cluster", "west",
        "--namespace", west.namespace, "--name", "chat-engine", "--replacement", str(replacement),
    ]  # fmt: skip
    encoding, payload = choose_encoding(rows, configured="ColumnarV2", max_rows=20000)
    field = "instanceStatusColumns" if encoding == "ColumnarV2" else "instanceStatuses"
    size = len(orjson.dumps(payload))
    version = damaged["metadata"]["resourceVersion"]

    code, out, err = await preflight(*repair)
    assert (code, err) == (0, "")
    assert out.splitlines() == [
        DRY_RUN_HEADER,
        "cluster: west",
        f"inferenceReplica: {west.namespace}/chat-engine (resourceVersion {version})",
        f"omenativeStatus: {BLOCK_JSON} (the cluster's block matches the inventory's)",
        f"stored: ColumnarV2, cannot be decoded (coverage: {error.detail})",
        "replacement: 6 rows (indexes 0-5), checked",
        "spec.replicas: 6",
        f"would write: 6 rows as {encoding} in status.{field} ({size} bytes)",
        "would keep: status.currentRevision, status.observedGeneration, status.readyReplicas, "
        "status.replicas",
        DRY_RUN_FOOTER,
    ]
    after_dry_run = await west.client.get(INFERENCE_REPLICAS, "chat-engine", west.namespace)
    assert after_dry_run["metadata"]["resourceVersion"] == version  # nothing was written

    code, out, err = await preflight(*repair, "--apply")
    assert (code, err) == (0, ""), out
    repaired = await west.client.get(INFERENCE_REPLICAS, "chat-engine", west.namespace)
    lines = out.splitlines()
    assert lines[0] == APPLIED_HEADER
    assert f"wrote: 6 rows as {encoding} in status.{field} ({size} bytes)" in lines
    assert lines[-1] == (
        f"now: resourceVersion {repaired['metadata']['resourceVersion']}; "
        "the stored status decodes (6 rows)"
    )
    assert decode_status(repaired["status"], max_rows=20000) == rows
    kept = {k: v for k, v in damaged["status"].items() if not k.startswith("instanceStatus")}
    assert {k: v for k, v in repaired["status"].items() if not k.startswith("instanceStatus")} == (
        kept
    )

    code, out, _ = await preflight("--inventory", str(fleet.inventory))
    assert (code, out.splitlines()[-1]) == (0, "result: GO (2 clusters)")


async def test_repair_refuses_an_object_changed_after_the_read(
    fleet: Fleet, tmp_path: Path
) -> None:
    east = fleet.east
    damaged, _ = await damage(east, "summarize-engine")
    rows = make_rows(3)
    replacement = write_rows(tmp_path / "rows.yaml", rows)

    async def someone_else_writes() -> None:
        await east.client.patch(
            INFERENCE_REPLICAS,
            "summarize-engine",
            {"status": {"readyReplicas": 2}},
            east.namespace,
            subresource="status",
        )

    repair = [
        "repair", "--inventory", str(fleet.inventory), "--cluster", "east",
        "--namespace", east.namespace, "--name", "summarize-engine",
        "--replacement", str(replacement), "--apply",
    ]  # fmt: skip
    code, out, err = await preflight(*repair, before_write=someone_else_writes)
    assert (code, out) == (1, "")
    assert err == (
        f"refused: InferenceReplica {east.namespace}/summarize-engine changed after the tool "
        f"read it at resourceVersion {damaged['metadata']['resourceVersion']}; nothing was "
        "written: run the dry run again\n"
    )
    current = await east.client.get(INFERENCE_REPLICAS, "summarize-engine", east.namespace)
    assert current["status"]["readyReplicas"] == 2  # the other write stands
    assert current["status"]["instanceStatusColumns"] == damaged["status"]["instanceStatusColumns"]

    code, out, err = await preflight(*repair)  # read again: the write goes through
    assert (code, err) == (0, "")
    current = await east.client.get(INFERENCE_REPLICAS, "summarize-engine", east.namespace)
    assert decode_status(current["status"], max_rows=20000) == rows
    assert current["status"]["readyReplicas"] == 2


async def test_repair_refusals_and_errors(fleet: Fleet, tmp_path: Path) -> None:
    west = fleet.west
    replacement = write_rows(tmp_path / "rows.yaml", make_rows(2))
    base = [
        "repair", "--inventory", str(fleet.inventory), "--cluster", "west",
        "--namespace", west.namespace, "--replacement", str(replacement),
    ]  # fmt: skip

    code, out, err = await preflight(*base, "--name", "chat-router")
    assert (code, out) == (1, "")
    assert err == (
        f"refused: InferenceReplica {west.namespace}/chat-router is not damaged: its status "
        "decodes (2 rows); repair replaces only a status that can't be decoded\n"
    )

    code, _, err = await preflight(*base, "--name", "no-such-engine")
    assert code == 2
    assert err == f"error: InferenceReplica {west.namespace}/no-such-engine not found\n"

    code, _, err = await preflight(*base[:4], "north", *base[5:], "--name", "chat-router")
    assert code == 2
    assert err == "error: the inventory has no cluster north (it has east, west)\n"

    code, _, err = await preflight(*base, "--name", "chat-router", "--json")
    assert code == 2
    assert err.startswith("error: unrecognized arguments: --json\n")

    dense = {"instanceStatusEncoding": "DenseV1", "maxDecodedInstances": 20000}
    await apply(west.client, CONFIGMAPS, configmap(dense), "ome")
    try:
        code, _, err = await preflight(*base, "--name", "chat-router", "--apply")
    finally:
        await apply(west.client, CONFIGMAPS, configmap(BLOCK), "ome")
    assert code == 1
    assert err == (
        "refused: configmap ome/inferenceservice-config sets omenativeStatus "
        '{"instanceStatusEncoding":"DenseV1","maxDecodedInstances":20000}, '
        f"the inventory wants {BLOCK_JSON}\n"
    )


async def test_a_row_the_manager_refuses_is_damaged_for_the_check_and_repair(
    fleet: Fleet, tmp_path: Path
) -> None:
    """The codec accepts any string as a time; the manager's InstanceStatus model doesn't. The
    check and repair judge the status as the manager does: NO-GO (row_shape), then repaired."""
    west = fleet.west
    bad = make_rows(3)
    bad[2]["readySince"] = "not-a-time"
    stored = await create_replica(
        west.client, namespace=west.namespace, name="bad-time-engine", status=columnar_status(bad)
    )
    try:
        assert decode_status(stored["status"], max_rows=20000) == bad  # the codec alone: fine
        code, out, _ = await preflight("--inventory", str(fleet.inventory))
        assert code == 1
        assert (
            f"  - row_shape: {west.namespace}/bad-time-engine: the row of index 2 is not a valid "
            "Instance row: readySince: Input should be a valid datetime or date, invalid "
            'character in year (got "not-a-time")'
        ) in out.splitlines()

        rows = make_rows(3)
        repair = [
            "repair", "--inventory", str(fleet.inventory), "--cluster", "west",
            "--namespace", west.namespace, "--name", "bad-time-engine",
            "--replacement", str(write_rows(tmp_path / "rows.yaml", rows)),
        ]  # fmt: skip
        code, out, err = await preflight(*repair)
        assert (code, err) == (0, "")
        assert (out.splitlines()[0], out.splitlines()[-1]) == (
            "InferenceReplica status repair (dry run: nothing was written)",
            "Re-run with --apply to write.",
        )
        code, out, err = await preflight(*repair, "--apply")
        assert (code, err) == (0, "")
        assert out.splitlines()[0] == "InferenceReplica status repair (applied)"
        current = await west.client.get(INFERENCE_REPLICAS, "bad-time-engine", west.namespace)
        assert decode_status(current["status"], max_rows=20000) == rows

        code, out, _ = await preflight("--inventory", str(fleet.inventory))
        assert (code, out.splitlines()[-1]) == (0, "result: GO (2 clusters)")
    finally:
        await west.client.delete(INFERENCE_REPLICAS, "bad-time-engine", west.namespace)


async def test_an_empty_name_is_a_bad_flag_not_a_list(fleet: Fleet, tmp_path: Path) -> None:
    replacement = write_rows(tmp_path / "rows.yaml", make_rows(2))
    base = [
        "repair", "--inventory", str(fleet.inventory), "--cluster", "west",
        "--replacement", str(replacement),
    ]  # fmt: skip
    code, out, err = await preflight(*base, "--namespace", fleet.west.namespace, "--name", "")
    assert (code, out) == (2, "")
    assert err.startswith('error: argument --name: "" is not a valid InferenceReplica name: ')
    code, out, err = await preflight(*base, "--namespace", "", "--name", "chat-router")
    assert (code, out) == (2, "")
    assert err.startswith('error: argument --namespace: "" is not a valid namespace: ')
