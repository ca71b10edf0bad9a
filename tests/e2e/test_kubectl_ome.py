"""``kubectl ome instance list``, ``retry-blocks`` and ``status`` through the real kubectl, on
what a real manager wrote.

The manager (``python -m omed``) and the node simulator run an InferenceService whose engine
has two single-pod Instances. kubectl finds the plugin as a user's kubectl would: an
executable ``kubectl-ome`` on the PATH (the virtualenv's console script). The tests compare the
plugin's tables, byte for byte, with what the InferenceReplica's status says, then make the
engine's image unpullable until OME holds the revision, read the Held block back, and read
one Instance with its live pod and a Warning event.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import _support as support
import pytest
from _support import condition, eventually

from omed.cli.instances import digest, render_table, short
from omed.controllers.inferencereplica.core import names
from omed.kube.client import KubeClient
from omed.kube.errors import NotFound
from omed.kube.resources import EVENTS, INFERENCE_REPLICAS, INFERENCE_SERVICES, PODS
from omed.statuscodec import decode_status

pytestmark = [pytest.mark.integration, pytest.mark.slow]

SERVICE = "chat"
ENGINE = f"{SERVICE}-engine"
RUNTIME = support.serving_runtime(
    "srt-engine",
    engineConfig={
        "runner": {
            "name": "ome-container",
            "image": "ome/srt:1.0",
            "resources": {"limits": {"nvidia.com/gpu": "1"}},
        },
    },
)
FAST_RETRY = {"initialDelay": "1s", "maxDelay": "2s", "multiplier": 2}


@pytest.fixture
async def world(
    kube: KubeClient, namespace: str, managers: Any, manager_config: Any
) -> AsyncIterator[support.ManagerWorld]:
    await manager_config(lifecycle=support.lifecycle(scale_up_pod_batch_size=10))
    world = support.ManagerWorld(kube=kube, namespace=namespace, managers=managers)
    async with world.running(nodes=2):
        yield world


async def kubectl(
    control_plane: Any, kubeconfig: str, *args: str, answer: bytes = b""
) -> tuple[int, str, str]:
    """Run the real kubectl with the virtualenv's ``kubectl-ome`` on its PATH."""
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    proc = await asyncio.create_subprocess_exec(
        str(control_plane.binaries.kubectl),
        *args,  # kubectl takes no flags before a plugin's name: the plugin parses them
        "--kubeconfig",
        kubeconfig,
        env=env,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    # Past the longest --timeout a command here is given (60s), so a command that runs out
    # of its own time reports it instead of being cut off by this bound.
    out, err = await asyncio.wait_for(proc.communicate(answer), timeout=120)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def converged(world: support.ManagerWorld, wanted: int) -> bool:
    world.check_manager()
    isvc = await world.kube.get(INFERENCE_SERVICES, SERVICE, world.namespace)
    try:
        irep = await world.kube.get(INFERENCE_REPLICAS, ENGINE, world.namespace)
    except NotFound:
        return False
    status = irep.get("status") or {}
    rows = decode_status(status, max_rows=20000)
    return (
        condition(isvc, "Ready") == "True"
        and status.get("observedGeneration") == irep["metadata"]["generation"]
        and len(rows) == wanted
        and all(r.get("phase") == "Ready" and not r.get("operation") for r in rows)
    )


async def test_list_retry_blocks_and_status_read_what_the_manager_wrote(
    world: support.ManagerWorld, control_plane: Any, kubeconfig: str
) -> None:
    ns = world.namespace
    await world.start_manager("manager-a")
    service = support.inference_service(
        SERVICE,
        runtime="srt-engine",
        engine={"minReplicas": 2, "maxReplicas": 2, "lifecycle": {"updateRetry": FAST_RETRY}},
    )
    await world.create_service(RUNTIME, service)
    await eventually(lambda: converged(world, 2), timeout=120, what="2 Ready Instances")

    # list: one row per Instance, exactly the recorded values.
    irep = await world.kube.get(INFERENCE_REPLICAS, ENGINE, ns)
    rows = sorted(decode_status(irep["status"], max_rows=20000), key=lambda r: r["index"])
    code, out, err = await kubectl(
        control_plane, kubeconfig, "ome", "instance", "list", SERVICE, "-n", ns
    )
    assert (code, err) == (0, ""), err
    expected = [["COMP", "IDX/INC", "PHASE", "PODS", "REVS", "AOF", "EVIDENCE"]] + [
        [
            "engine",
            f"{row['index']}/{row['incarnation']}",
            "Ready",
            "1/1/1",
            short(row["targetRevision"], 11),
            "A--",
            "OK",
        ]
        for row in rows
    ]
    assert out == render_table(expected)
    assert out.splitlines()[0] == "COMP     IDX/INC   PHASE   PODS    REVS          AOF   EVIDENCE"
    revision = irep["status"]["updateRevision"]
    assert (
        out.splitlines()[1]
        == f"engine   0/1       Ready   1/1/1   {revision[:4]}...{revision[-4:]}   A--   OK"
    )

    code, out, err = await kubectl(
        control_plane, kubeconfig, "ome", "instance", "list", SERVICE, "-n", ns, "-o", "json"
    )
    assert code == 0, err
    report = json.loads(out)
    assert report["kind"] == "InstanceListReport" and report["state"] == "OK"
    assert [i["runningRevision"] for i in report["instances"]] == [revision, revision]
    assert report["components"][0]["inferenceReplica"] == ENGINE

    # -o name: <component>/<index>, one a line; --no-headers: the table's rows alone.
    code, out, err = await kubectl(
        control_plane, kubeconfig, "ome", "instance", "list", SERVICE, "-n", ns, "-o", "name"
    )
    assert (code, err, out) == (0, "", "".join(f"engine/{r['index']}\n" for r in rows))
    code, out, err = await kubectl(
        control_plane, kubeconfig, "ome", "instance", "list", SERVICE, "-n", ns, "--no-headers"
    )
    assert (code, err, out) == (0, "", render_table(expected[1:]))

    # retry-blocks: nothing retried or held yet.
    code, out, err = await kubectl(
        control_plane,
        kubeconfig,
        "ome",
        "instance",
        "retry-blocks",
        SERVICE,
        "--component",
        "engine",
        "-n",
        ns,
    )
    assert code == 0, err
    assert out == render_table(
        [
            ["COMP", "STATE", "TARGET", "ATT", "NEXT", "REL", "REASON"],
            ["engine", "EMPTY", "-", "-", "-", "-", "-"],
        ]
    )

    # An image nobody can pull: OME retries the revision, then holds it.
    await world.patch_service(
        SERVICE, {"spec": {"engine": {"runner": {"image": "ome/srt:bad-image"}}}}
    )

    async def held() -> bool:
        world.check_manager()
        found = await world.kube.get(INFERENCE_REPLICAS, ENGINE, ns)
        status = found.get("status") or {}
        return status.get("observedGeneration") == found["metadata"]["generation"] and any(
            b.get("state") == "Held" for b in status.get("retryBlocks") or []
        )

    await eventually(held, timeout=180, what="a Held retry block")
    irep = await world.kube.get(INFERENCE_REPLICAS, ENGINE, ns)
    (block,) = irep["status"]["retryBlocks"]
    bad = block["targetRevision"]
    code, out, err = await kubectl(
        control_plane,
        kubeconfig,
        "ome",
        "instance",
        "retry-blocks",
        SERVICE,
        "--component",
        "engine",
        "-n",
        ns,
    )
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].split() == ["COMP", "STATE", "TARGET", "ATT", "NEXT", "REL", "REASON"]
    assert lines[1].split() == [
        "engine",
        "HELD",
        digest(bad),
        str(block["attemptsStarted"]),
        "-",
        "YES",
        "ImagePullB...",
    ], out
    assert len(lines) == 2, out

    code, out, err = await kubectl(
        control_plane,
        kubeconfig,
        "ome",
        "instance",
        "retry-blocks",
        SERVICE,
        "--component=engine",
        "-n",
        ns,
        "-o",
        "name",
    )
    assert (code, err, out) == (0, "", f"{bad}\n")  # what release-held --revision takes

    code, out, err = await kubectl(
        control_plane,
        kubeconfig,
        "ome",
        "instance",
        "retry-blocks",
        SERVICE,
        "--component=engine",
        "-n",
        ns,
        "-o",
        "yaml",
    )
    assert code == 0, err
    import yaml

    report = yaml.safe_load(out)
    assert report["kind"] == "InstanceRetryBlocksReport"
    (shown,) = report["blocks"]
    assert shown["targetRevision"] == bad and shown["releaseEligible"] is True
    assert shown["reason"] == "ImagePullBackOff"
    assert report["summary"] == {
        "blocks": 1,
        "held": 1,
        "backoff": 0,
        "retryInProgress": 0,
        "releaseEligible": 1,
    }

    # The list still shows both Instances serving the old revision, with the recorded failure.
    code, out, err = await kubectl(
        control_plane, kubeconfig, "ome", "instance", "list", SERVICE, "-n", ns
    )
    assert code == 0, err
    body = [line.split() for line in out.splitlines()[1:]]
    assert [(b[0], b[2], b[3]) for b in body] == [("engine", "Ready", "1/1/1")] * 2, out

    # status: the recorded row, the live pod and its Warning events. Instance 0's pod is
    # healthy, so kubelet recorded nothing on it: the test records a failed readiness probe as
    # kubelet would (the simulator records only pull and crash-loop failures).
    pod = names.pod_name(ENGINE, 0, "default", 0)
    live = await world.kube.get(PODS, pod, ns)
    await world.kube.create(
        EVENTS,
        {
            "metadata": {"name": f"{pod}.unhealthy", "namespace": ns},
            "involvedObject": {
                "kind": "Pod",
                "name": pod,
                "namespace": ns,
                "uid": live["metadata"]["uid"],
            },
            "reason": "Unhealthy",
            "message": "Readiness probe failed: HTTP probe failed with statuscode: 503",
            "type": "Warning",
            "count": 7,
            "source": {"component": "kubelet"},
        },
        ns,
    )
    code, out, err = await kubectl(
        control_plane,
        kubeconfig,
        "ome",
        "instance",
        "status",
        SERVICE,
        "0",
        "--component",
        "engine",
        "-n",
        ns,
    )
    assert code == 0, err
    table = {line[:13].strip(): line[13:] for line in out.splitlines()}
    assert out.startswith("FIELD        VALUE\n")
    assert table["state"] == "Reported engine[0] evidence=Reported"
    assert table["deployment"] == "mode=OMENative source=ServiceSpec origin=LiveRuntime evidence..."
    encoding = irep["status"].get("instanceStatusEncoding") or "DenseV1"
    assert encoding == "ColumnarV2"  # the chart's default, which the test's ConfigMap keeps
    assert table["encoding"] == f"name={encoding} evidence=Reported reason=-"
    assert table["instance"].startswith(f"{ENGINE} inc=1 phase=Ready admitted=true")
    assert table["pod"] == f"{pod} default/Running ready=True serving=Tr..."
    assert table["event"] == f"Pod/{pod} reason=Unhealthy count=7"

    code, out, err = await kubectl(
        control_plane,
        kubeconfig,
        "ome",
        "instance",
        "status",
        SERVICE,
        "0",
        "--component=engine",
        "-n",
        ns,
        "-o",
        "wide",
    )
    assert code == 0, err
    wide = {line[:22].strip(): line[22:].strip() for line in out.splitlines()}
    assert wide["pod[0] node"] == live["spec"]["nodeName"]
    assert wide["deployment evidence"] == "Resolved"

    code, out, err = await kubectl(
        control_plane,
        kubeconfig,
        "ome",
        "instance",
        "status",
        SERVICE,
        "1",
        "--component",
        "engine",
        "-n",
        ns,
        "-o",
        "json",
    )
    assert code == 0, err
    report = json.loads(out)
    assert report["kind"] == "InstanceStatusReport" and report["state"] == "Reported"
    assert report["instance"]["index"] == 1 and report["events"] == []
    assert [p["name"] for p in report["pods"]] == [names.pod_name(ENGINE, 1, "default", 0)]

    # release-held: refused for a revision no block has, before any preview.
    release = ("ome", "instance", "release-held", SERVICE, "--component", "engine", "-n", ns)
    code, out, err = await kubectl(
        control_plane, kubeconfig, *release, "--revision", "00000000", "--yes"
    )
    assert (code, out) == (1, "")
    assert err == (
        f"error: no releasable Held retry block for revision 00000000 on component engine of "
        f"InferenceService {ns}/{SERVICE}: no retry block matches --revision\n"
    )

    # Client and server dry runs check everything and store nothing.
    for mode, accepted in (("client", "No"), ("server", "Yes")):
        code, out, err = await kubectl(
            control_plane, kubeconfig, *release, "--revision", bad, "--dry-run", mode, "--yes"
        )
        assert code == 0, err
        assert err.startswith("HELD RELEASE PREVIEW\nFIELD")
        assert f"annotation   ome.io/release-held-revision={bad}\n" in err
        result = {line[:16].strip(): line[16:] for line in out.splitlines()}
        assert (result["dry-run"], result["accepted"], result["applied"]) == (mode, accepted, "No")
        assert result["target"] == f"InferenceReplica/{ns}/{ENGINE}"
        assert result["revision-hash"] == bad[-8:]
        found = await world.kube.get(INFERENCE_REPLICAS, ENGINE, ns)
        assert "ome.io/release-held-revision" not in (found["metadata"].get("annotations") or {})

    # While the block is Held, waiting for its release times out (exit 2: unmet).
    wait = ("ome", "wait", SERVICE, "-n", ns, "--for=held-revision=unheld", "--component=engine")
    code, out, err = await kubectl(
        control_plane, kubeconfig, *wait, "--revision", bad[-8:], "--timeout=2s"
    )
    assert (code, out) == (2, "")
    assert err == (
        f"error: timed out waiting for held-revision={bad[-8:]}=unheld on "
        f"inferencereplica.ome.io/{ENGINE} after 2s\n"
    )

    # Declining the prompt changes nothing.
    code, out, err = await kubectl(
        control_plane, kubeconfig, *release, "--revision", bad[-8:], answer=b"n\n"
    )
    assert (code, out) == (1, "")
    assert err.endswith(
        "Release this held revision? [y/N]: error: release cancelled; nothing changed\n"
    )

    # The cause is fixed first, as the release's help says: the image can be pulled now (the
    # simulator's injection wins over its bad-image rule), so the revision OME tries again
    # isn't held once more before the wait below sees it released.
    assert world.simulator is not None
    world.simulator.inject(ns, {"component": "engine"}, "None")

    # By its hash, confirmed at the prompt: the annotation is stored, and OME releases the block.
    code, out, err = await kubectl(
        control_plane, kubeconfig, *release, "--revision", bad[-8:], "-o", "json", answer=b"y\n"
    )
    assert code == 0, err
    result = json.loads(out)
    assert result["kind"] == "ActionResult" and result["applied"] is True
    assert result["revision"] == bad and result["annotation"] == {
        "ome.io/release-held-revision": bad
    }

    # kubectl ome wait blocks until OME has taken the release, as a script would use it.
    code, out, err = await kubectl(
        control_plane, kubeconfig, *wait, "--revision", bad[-8:], "--timeout=60s"
    )
    assert (code, err) == (0, ""), err
    assert out == f"inferencereplica.ome.io/{ENGINE} held-revision={bad[-8:]} unheld\n"
    # (OME then rolls the engine to the revision, whose image can now be pulled.)

    # A name that is no InferenceService: the API server's own words, exit 1.
    code, out, err = await kubectl(
        control_plane, kubeconfig, "ome", "instance", "list", "pool-a", "-n", ns
    )
    assert (code, out) == (1, "")
    assert err == (
        f'error: get InferenceService "{ns}/pool-a": inferenceservices.ome.io "pool-a" not found\n'
    )


async def test_status_shows_node_unknown_for_an_instance_on_a_not_ready_node(
    world: support.ManagerWorld, control_plane: Any, kubeconfig: str
) -> None:
    # An Instance whose Create can't finish (its pod never gets Ready) sits on a node whose
    # kubelet then stops: OME holds the operation on NodeUnknown, and the plugin shows it.
    ns = world.namespace
    assert world.simulator is not None
    world.simulator.inject(ns, {"component": "engine"}, "NeverReady")
    await world.start_manager("manager-a")
    service = support.inference_service(
        SERVICE, runtime="srt-engine", engine={"minReplicas": 1, "maxReplicas": 1}
    )
    await world.create_service(RUNTIME, service)

    async def bound_node() -> str | None:
        for pod in await world.pods():
            node = (pod.get("spec") or {}).get("nodeName")
            if node:
                return str(node)
        return None

    await eventually(bound_node, timeout=60, what="the engine pod bound to a node")
    node = await bound_node()
    assert node is not None
    await world.simulator.set_node_ready(node, False)

    async def held_on_node_unknown() -> bool:
        irep = await world.kube.get(INFERENCE_REPLICAS, ENGINE, ns)
        rows = decode_status(irep.get("status") or {}, max_rows=20)
        waiting = [(r.get("operation") or {}).get("waiting") for r in rows]
        return names.WAITING_NODE_UNKNOWN in waiting

    await eventually(held_on_node_unknown, timeout=60, what="the Create held on NodeUnknown")
    code, out, err = await kubectl(
        control_plane,
        kubeconfig,
        "ome",
        "instance",
        "status",
        SERVICE,
        "0",
        "--component",
        "engine",
        "-n",
        ns,
    )
    assert (code, err) == (0, ""), err
    assert "waiting=NodeUnknown" in out, out
    await world.simulator.set_node_ready(node, True)
