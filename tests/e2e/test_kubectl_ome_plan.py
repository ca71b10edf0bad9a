"""``kubectl ome instance plan`` and ``kubectl ome get ir`` through the real kubectl.

``instance plan`` must print the pass the controller then runs. So the test changes the
engine's scale while no manager acts on it, prints the plan, lets a manager act, and
compares what it did with the plan's lines, on a scale-up (1 -> 4, two Instances a batch)
and a scale-down (4 -> 1, one pod a batch).

"While no manager acts": every write of an InferenceService or an InferenceReplica goes
through the manager's webhooks (failurePolicy Fail), so a manager must run; the test holds
the leader Lease itself, so the manager that runs is a standby: it serves the webhooks and
reconciles nothing. The scale is written on the InferenceService and, as the InferenceService
controller would write it, on its InferenceReplica; the test then deletes its Lease and the
standby leads. The order of what the manager did comes from a watch opened before (the
resourceVersion of each pod's ADDED event, and of the first event that shows its serving gate
False).

The plan also runs as a ServiceAccount bound to a ClusterRole of get and list only: it reads,
and never sends a write (a write would be refused, and the command would fail).
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import _support as support
import orjson
import pytest
import yaml
from _support import condition, eventually

from omed.controllers.inferencereplica.core import names
from omed.kube.client import KubeClient
from omed.kube.errors import NotFound
from omed.kube.resources import (
    INFERENCE_REPLICAS,
    INFERENCE_SERVICES,
    LEASES,
    PODS,
    Resource,
)
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
HOLDER = "instance-plan-test"
CLUSTER_ROLES = Resource(
    "rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", namespaced=False
)
CLUSTER_ROLE_BINDINGS = Resource(
    "rbac.authorization.k8s.io", "v1", "clusterrolebindings", "ClusterRoleBinding", namespaced=False
)
SERVICE_ACCOUNTS = Resource("", "v1", "serviceaccounts", "ServiceAccount")
READ_ONLY_RULES = [
    {
        "apiGroups": ["ome.io"],
        "resources": ["inferenceservices", "inferencereplicas"],
        "verbs": ["get", "list"],
    },
    {"apiGroups": [""], "resources": ["pods", "configmaps", "nodes"], "verbs": ["get", "list"]},
    {"apiGroups": ["apps"], "resources": ["controllerrevisions"], "verbs": ["get", "list"]},
    {"apiGroups": ["discovery.k8s.io"], "resources": ["endpointslices"], "verbs": ["get", "list"]},
    {
        "apiGroups": ["apiextensions.k8s.io"],
        "resources": ["customresourcedefinitions"],
        "verbs": ["get"],
    },
    {"apiGroups": ["scheduling.x-k8s.io"], "resources": ["podgroups"], "verbs": ["get", "list"]},
]


class PodOrder:
    """A watch of the namespace's pods: the resourceVersion of each pod's ADDED event and of
    the event that first shows its ome.io/serving condition False after True (a drain), in
    etcd's order."""

    def __init__(self, kube: KubeClient, namespace: str) -> None:
        self.kube = kube
        self.namespace = namespace
        self.added: dict[str, int] = {}
        self.gated: dict[str, int] = {}
        self._serving: dict[str, str | None] = {}
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        page = await self.kube.list_page(PODS, self.namespace)
        self._task = asyncio.create_task(self._watch(page["metadata"]["resourceVersion"]))

    async def _watch(self, version: str) -> None:
        params = {"watch": "true", "resourceVersion": version, "timeoutSeconds": "900"}
        async with self.kube.stream(PODS.path(self.namespace), params=params) as lines:
            async for line in lines:
                event = orjson.loads(line)
                pod = event.get("object") or {}
                meta = pod.get("metadata") or {}
                if "name" not in meta:
                    continue
                version = int(meta["resourceVersion"])
                if event.get("type") == "ADDED":
                    self.added.setdefault(meta["name"], version)
                gate = condition(pod, "ome.io/serving")
                if gate == "False" and self._serving.get(meta["name"]) == "True":
                    self.gated.setdefault(meta["name"], version)
                self._serving[meta["name"]] = gate

    def first(self, seen: dict[str, int], count: int, *, after: int = 0) -> list[str]:
        """The first ``count`` pods of ``seen`` past resourceVersion ``after``, in order."""
        return [n for n, v in sorted(seen.items(), key=lambda kv: kv[1]) if v > after][:count]

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task


@pytest.fixture
async def world(
    kube: KubeClient, namespace: str, managers: Any, manager_config: Any
) -> AsyncIterator[tuple[support.ManagerWorld, PodOrder]]:
    # Scale-ups two pods a pass; scale-downs 10% of the pods (one of four) a pass.
    await manager_config(lifecycle=support.lifecycle(scale_up_pod_batch_size=2))
    world = support.ManagerWorld(kube=kube, namespace=namespace, managers=managers)
    order = PodOrder(kube, namespace)
    async with world.running(order, nodes=2):
        yield world, order


async def kubectl(control_plane: Any, kubeconfig: str, *args: str) -> tuple[int, str, str]:
    """Run the real kubectl with the virtualenv's ``kubectl-ome`` on its PATH."""
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    proc = await asyncio.create_subprocess_exec(
        str(control_plane.binaries.kubectl),
        *args,
        "--kubeconfig",
        kubeconfig,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), timeout=120)
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
    pods = [p for p in await world.pods() if not p["metadata"].get("deletionTimestamp")]
    return (
        condition(isvc, "Ready") == "True"
        and status.get("observedGeneration") == irep["metadata"]["generation"]
        and len(rows) == wanted
        and len(pods) == wanted
        and all(r.get("phase") == "Ready" and not r.get("operation") for r in rows)
    )


async def hold_lease(world: support.ManagerWorld) -> None:
    """Take the leader Lease for the test (an hour long), from whoever had it."""
    namespace = world.managers.namespace
    now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    spec = {
        "holderIdentity": HOLDER,
        "leaseDurationSeconds": 3600,
        "acquireTime": now,
        "renewTime": now,
        "leaseTransitions": 0,
    }
    try:
        lease = await world.kube.get(LEASES, world.managers.lease_name, namespace)
    except NotFound:
        body = {"metadata": {"name": world.managers.lease_name}, "spec": spec}
        await world.kube.create(LEASES, body, namespace)
        return
    lease["spec"] = {**spec, "leaseTransitions": (lease["spec"].get("leaseTransitions") or 0) + 1}
    await world.kube.replace(LEASES, lease, namespace)


async def standby(world: support.ManagerWorld, name: str) -> None:
    """Kill the leading manager, hold the Lease, and start a manager that only stands by."""
    world.kill_manager()
    await hold_lease(world)
    world.manager = world.managers.start(name=name)
    await world.manager.wait_ready(timeout=90)
    await asyncio.sleep(1.0)  # past a retry period: it has seen the Lease held
    assert not world.manager.is_leader()


async def scale(world: support.ManagerWorld, replicas: int) -> None:
    """Scale the engine on the InferenceService and, as the InferenceService controller
    writes it, on its InferenceReplica."""
    engine = {"minReplicas": replicas, "maxReplicas": replicas}
    await world.patch_service(SERVICE, {"spec": {"engine": engine}})
    await world.kube.patch(
        INFERENCE_REPLICAS, ENGINE, {"spec": {"replicas": replicas}}, world.namespace
    )


async def release_lease(world: support.ManagerWorld) -> None:
    await world.kube.delete(LEASES, world.managers.lease_name, world.managers.namespace)
    await eventually(world.manager.is_leader, timeout=30, what="the standby leading")


async def plan(world: support.ManagerWorld, control_plane: Any, kubeconfig: str) -> list[str]:
    code, out, err = await kubectl(
        control_plane,
        kubeconfig,
        "ome",
        "instance",
        "plan",
        SERVICE,
        "--component",
        "engine",
        "-n",
        world.namespace,
        "--manager-namespace",
        world.managers.namespace,
    )
    assert (code, err) == (0, ""), err
    return out.splitlines()


@contextlib.asynccontextmanager
async def read_only_kubeconfig(
    kube: KubeClient,
    control_plane: Any,
    namespace: str,
    directory: Path,
    *,
    rules: list[dict[str, Any]] = READ_ONLY_RULES,
    account: str = "plan-reader",
) -> AsyncIterator[str]:
    """A kubeconfig of a ServiceAccount whose only rights are ``rules`` (by default get and
    list)."""
    name = f"{account}-{namespace}"
    await kube.create(SERVICE_ACCOUNTS, {"metadata": {"name": account}}, namespace)
    await kube.create(CLUSTER_ROLES, {"metadata": {"name": name}, "rules": rules})
    binding = {
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
        "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": namespace}],
    }
    await kube.create(CLUSTER_ROLE_BINDINGS, binding)
    try:
        answer = await kube.create(
            Resource("", "v1", f"serviceaccounts/{account}/token", "TokenRequest"),
            {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}},
            namespace,
        )
        config = control_plane.kubeconfig()
        config["users"] = [{"name": account, "user": {"token": answer["status"]["token"]}}]
        config["contexts"][0]["context"]["user"] = account
        path = directory / f"{account}-kubeconfig"
        path.write_text(yaml.safe_dump(config, sort_keys=False))
        path.chmod(0o600)
        yield str(path)
    finally:
        await kube.delete(CLUSTER_ROLE_BINDINGS, name)
        await kube.delete(CLUSTER_ROLES, name)


def body(lines: list[str]) -> list[str]:
    """The plan's lines without its header (which carries the time)."""
    return lines[1:]


async def test_instance_plan_prints_the_pass_the_controller_then_runs_and_get_ir_lists(
    world: tuple[support.ManagerWorld, PodOrder],
    control_plane: Any,
    kubeconfig: str,
    tmp_path: Path,
) -> None:
    manager, order = world
    ns = manager.namespace
    await manager.start_manager("manager-a")
    service = support.inference_service(
        SERVICE, runtime="srt-engine", engine={"minReplicas": 1, "maxReplicas": 1}
    )
    await manager.create_service(RUNTIME, service)
    await manager.kube.create(INFERENCE_REPLICAS, STANDALONE, ns)
    await eventually(lambda: converged(manager, 1), timeout=120, what="1 Ready Instance")
    await check_get_ir(ns, control_plane, kubeconfig)
    lines = await plan(manager, control_plane, kubeconfig)
    assert lines[0].startswith(f"InferenceReplica {ns}/{ENGINE}: the controller's next pass at ")
    assert not any(line.startswith(("create pod", "delete pod")) for line in lines), lines

    # Scale-up, 1 -> 4, two pods a pass: Instances 1 and 2 now, 3 in the next batch.
    await standby(manager, "manager-b")
    await scale(manager, 4)
    lines = await plan(manager, control_plane, kubeconfig)
    assert [line for line in lines if line.startswith("create pod")] == [
        f"create pod {ENGINE}-1-default-0 for Instance 1 (scale-up, batch 1 of 2)",
        f"create pod {ENGINE}-2-default-0 for Instance 2 (scale-up, batch 1 of 2)",
    ], lines
    assert "waiting: Instance(s) 3 for a later scale-up batch (2 pods a batch)" in lines

    # The same plan, read by an identity that can only get and list.
    async with read_only_kubeconfig(manager.kube, control_plane, ns, tmp_path) as reader:
        assert body(await plan(manager, control_plane, reader)) == body(lines)
        code, _, err = await kubectl(
            control_plane, reader, "ome", "get", "ir", "-n", ns, "-o", "json"
        )
        assert (code, err) == (0, "")

    before = max(order.added.values(), default=0)
    await release_lease(manager)
    await eventually(lambda: converged(manager, 4), timeout=120, what="4 Ready Instances")
    # The plan's batch (its pods are created concurrently, in no fixed order), then the rest.
    first = order.first(order.added, 3, after=before)
    assert set(first[:2]) == {f"{ENGINE}-1-default-0", f"{ENGINE}-2-default-0"}, first
    assert first[2:] == [f"{ENGINE}-3-default-0"], first

    # Scale-down, 4 -> 1, one pod a pass: Instance 3 drains first, then 2, then 1.
    await standby(manager, "manager-c")
    await scale(manager, 1)
    lines = await plan(manager, control_plane, kubeconfig)
    gates = [line for line in lines if line.startswith("set serving gate")]
    assert gates == [
        f"set serving gate of pod {ENGINE}-3-default-0 of Instance 3 to False "
        f"({names.GATE_DRAINING}; scale-down, batch 1 of 3)"
    ], lines
    assert "waiting: Instance(s) 1-2 for a later scale-down batch (1 pods a batch)" in lines
    assert not any(line.startswith("create pod") for line in lines)
    gated_before = max(order.gated.values(), default=0)
    assert not order.gated, order.gated  # no pod drained before
    await release_lease(manager)
    await eventually(lambda: converged(manager, 1), timeout=180, what="1 Ready Instance")
    assert order.first(order.gated, 3, after=gated_before) == [
        f"{ENGINE}-3-default-0",
        f"{ENGINE}-2-default-0",
        f"{ENGINE}-1-default-0",
    ]

    async def only_instance_0() -> bool:
        return [p["metadata"]["name"] for p in await manager.pods()] == [f"{ENGINE}-0-default-0"]

    await eventually(only_instance_0, timeout=60, what="only Instance 0's pod left")


STANDALONE: dict[str, Any] = {
    "apiVersion": "ome.io/v1beta1",
    "kind": "InferenceReplica",
    # Written as a controller would: the webhook admits no other writer.
    "metadata": {"name": "pool-a", "annotations": {"ome.io/controller-write": "true"}},
    "spec": {
        "component": "engine",
        "replicas": 0,
        "runners": [
            {
                "name": "default",
                "template": {"spec": {"containers": [{"name": "c", "image": "ome/srt:1.0"}]}},
            }
        ],
    },
}


async def check_get_ir(ns: str, control_plane: Any, kubeconfig: str) -> None:
    """get ir lists the standalone replica (PARENT -) beside the InferenceService's."""
    code, out, err = await kubectl(control_plane, kubeconfig, "ome", "get", "ir", "-n", ns)
    assert (code, err) == (0, ""), err
    header, *rows = out.splitlines()
    assert header.split() == [
        "NAME",
        "PARENT",
        "COMPONENT",
        "REPLICAS",
        "READY",
        "SERVING",
        "ENCODING",
        "AGE",
    ]
    assert [row.split()[:4] for row in rows] == [
        [ENGINE, SERVICE, "engine", "1"],
        ["pool-a", "-", "engine", "0"],
    ]
    assert rows[0].split()[4:7] == ["1", "1", "DenseV1"]

    code, out, err = await kubectl(control_plane, kubeconfig, "ome", "get", "ir", "-A")
    assert (code, err) == (0, ""), err
    mine = [line.split()[:3] for line in out.splitlines()[1:] if line.startswith(ns + " ")]
    assert out.splitlines()[0].split()[:3] == ["NAMESPACE", "NAME", "PARENT"]
    assert mine == [[ns, ENGINE, SERVICE], [ns, "pool-a", "-"]]

    code, out, err = await kubectl(
        control_plane, kubeconfig, "ome", "get", "ir", "pool-a", "-n", ns, "-o", "yaml"
    )
    assert (code, err) == (0, ""), err
    (item,) = yaml.safe_load(out)["items"]
    assert (item["name"], item["parent"], item["replicas"]) == ("pool-a", None, 0)

    code, out, err = await kubectl(
        control_plane, kubeconfig, "ome", "get", "ir", "-n", ns, "-o", "name"
    )
    assert (code, out, err) == (
        0,
        f"inferencereplica.ome.io/{ENGINE}\ninferencereplica.ome.io/pool-a\n",
        "",
    )

    code, _, err = await kubectl(control_plane, kubeconfig, "ome", "get", "ir", "-n", "empty-x")
    assert (code, err) == (0, "No resources found in empty-x namespace.\n")
