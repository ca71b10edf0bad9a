"""The node simulator against the real control plane: what a controller would observe.

Each test runs its own simulator whose nodes are prefixed with the test's namespace and
which handles only that namespace, so tests never act on each other's pods. The real
kube-scheduler places the pods; tests run one at a time, so the only nodes it can choose are
the running test's. A pod is made unschedulable as in a cluster: it asks for more GPUs than
any node has free, or for a node its ``nodeSelector`` names and no node matches, or for a
node the simulator set NotReady (tainted unreachable).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any

import pytest

from omed.kube.client import JSON_PATCH, STRATEGIC_MERGE_PATCH, KubeClient
from omed.kube.errors import NotFound
from omed.kube.resources import EVENTS, LEASES, NODES, PODS
from omed_devcluster.sim.failures import CRASH_AFTER, FAIL, TERMINATION_DELAY
from omed_devcluster.simulator import POOL_LABEL, Failure, NodeSimulator, Timings

pytestmark = pytest.mark.integration

GPU = "nvidia.com/gpu"


# -- helpers -----------------------------------------------------------------------------------


def conditions(pod: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    return {c["type"]: c for c in (pod.get("status") or {}).get("conditions") or []}


def is_ready(pod: Mapping[str, Any]) -> bool:
    return conditions(pod).get("Ready", {}).get("status") == "True"


def container(pod: Mapping[str, Any], index: int = 0) -> Mapping[str, Any]:
    statuses = (pod.get("status") or {}).get("containerStatuses") or [{}]
    return statuses[index] if index < len(statuses) else {}


def waiting_reason(pod: Mapping[str, Any]) -> str | None:
    return ((container(pod).get("state") or {}).get("waiting") or {}).get("reason")


def make_pod(
    name: str,
    *,
    image: str = "ome/serving:1.0",
    gpus: int | None = None,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    **spec: Any,
) -> dict[str, Any]:
    resources = {"limits": {GPU: str(gpus)}} if gpus is not None else {}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "labels": dict(labels or {}),
            "annotations": dict(annotations or {}),
        },
        "spec": {
            "containers": [{"name": "main", "image": image, "resources": resources}],
            **spec,
        },
    }


class Pods:
    """Create, read and wait for pods in one namespace (polling with a deadline)."""

    def __init__(self, kube: KubeClient, namespace: str) -> None:
        self.kube = kube
        self.namespace = namespace

    async def create(self, body: Mapping[str, Any]) -> dict[str, Any]:
        created: dict[str, Any] = await self.kube.create(PODS, body, self.namespace)
        return created

    async def get(self, name: str) -> dict[str, Any]:
        pod: dict[str, Any] = await self.kube.get(PODS, name, self.namespace)
        return pod

    async def wait(
        self,
        name: str,
        predicate: Callable[[dict[str, Any]], bool],
        *,
        timeout: float = 10.0,
        what: str = "condition",
    ) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        pod: dict[str, Any] = {}
        while time.monotonic() < deadline:
            pod = await self.get(name)
            if predicate(pod):
                return pod
            await asyncio.sleep(0.05)
        raise AssertionError(
            f"pod {name}: {what} not reached in {timeout}s; status: "
            f"{json.dumps(pod.get('status'), indent=1)}"
        )

    async def wait_gone(self, name: str, *, timeout: float = 10.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                await self.get(name)
            except NotFound:
                return
            await asyncio.sleep(0.05)
        raise AssertionError(f"pod {name} still exists after {timeout}s")

    async def set_condition(self, name: str, kind: str, status: str) -> None:
        patch = {"status": {"conditions": [{"type": kind, "status": status}]}}
        await self.kube.patch(
            PODS,
            name,
            patch,
            self.namespace,
            content_type=STRATEGIC_MERGE_PATCH,
            subresource="status",
        )


async def warnings(pods: Pods, name: str) -> list[dict[str, Any]]:
    """The Warning events of pod ``name``, as ``kubectl describe pod`` finds them."""
    found: list[dict[str, Any]] = await pods.kube.list_all(
        EVENTS,
        pods.namespace,
        fieldSelector=f"involvedObject.kind=Pod,involvedObject.name={name},type=Warning",
    )
    return found


async def eventually(check: Callable[[], Awaitable[bool]], *, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if await check():
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"not true within {timeout}s")


SCHEDULER_RETRY = 15.0
"""How long a test waits for kube-scheduler to bind a pod that was unschedulable once
something changed (its back-off is 1-2 s here; the margin is for a loaded machine)."""

SimFactory = Callable[..., Awaitable[NodeSimulator]]


@pytest.fixture
async def simulators(kube: KubeClient, namespace: str) -> AsyncIterator[SimFactory]:
    started: list[NodeSimulator] = []

    async def start(**options: Any) -> NodeSimulator:
        options.setdefault("nodes", 2)
        options.setdefault("node_prefix", f"{namespace}-n{len(started)}")
        sim = NodeSimulator(kube, namespaces=[namespace], **options)
        await sim.start()
        started.append(sim)
        return sim

    yield start
    for sim in started:
        await sim.stop()


@pytest.fixture
async def sim(simulators: SimFactory) -> NodeSimulator:
    return await simulators()


@pytest.fixture
def pods(kube: KubeClient, namespace: str) -> Pods:
    return Pods(kube, namespace)


# -- nodes -------------------------------------------------------------------------------------


async def test_nodes_are_registered_ready_with_gpus(
    kube: KubeClient, simulators: SimFactory, namespace: str
) -> None:
    sim = await simulators(nodes=3, gpus_per_node=4)
    listed = await kube.list_all(NODES, labelSelector=f"{POOL_LABEL}={namespace}-n0")
    assert sorted(n["metadata"]["name"] for n in listed) == sorted(sim.node_names)
    for node in listed:
        # What kube-scheduler needs to place pods there: allocatable amounts, no cordon, no
        # not-ready taint (the node lifecycle controller would lift it; the simulator does).
        allocatable = node["status"]["allocatable"]
        assert (allocatable[GPU], allocatable["pods"]) == ("4", "110")
        assert (allocatable["cpu"], allocatable["memory"]) == ("192", "2Ti")
        assert not node["spec"].get("unschedulable")
        assert not (node["spec"].get("taints") or []), "the not-ready taint must be lifted"
        assert node["metadata"]["labels"]["kubernetes.io/hostname"] == node["metadata"]["name"]
        assert conditions(node)["Ready"]["status"] == "True"
        assert {a["type"] for a in node["status"]["addresses"]} == {"InternalIP", "Hostname"}
    await sim.stop()
    assert await kube.list_all(NODES, labelSelector=f"{POOL_LABEL}={namespace}-n0") == []


# -- kubelet -----------------------------------------------------------------------------------


async def test_plain_pod_is_ready_within_seconds(sim: NodeSimulator, pods: Pods) -> None:
    started = time.monotonic()
    await pods.create(make_pod("plain", gpus=1))
    pod = await pods.wait("plain", is_ready, timeout=5, what="Ready")
    elapsed = time.monotonic() - started
    assert elapsed < 3, f"Ready after {elapsed:.2f}s"
    status = pod["status"]
    assert pod["spec"]["nodeName"] in sim.node_names
    assert status["phase"] == "Running"
    assert status["podIP"].startswith("10.244.")
    assert status["hostIP"].startswith("172.18.")
    assert status["startTime"]
    assert {k: v["status"] for k, v in conditions(pod).items()} == {
        "PodScheduled": "True",
        "PodReadyToStartContainers": "True",
        "Initialized": "True",
        "ContainersReady": "True",
        "Ready": "True",
    }
    c = container(pod)
    assert (c["name"], c["image"], c["ready"], c["started"], c["restartCount"]) == (
        "main",
        "ome/serving:1.0",
        True,
        True,
        0,
    )
    assert c["imageID"].startswith("ome/serving@sha256:")
    assert c["containerID"].startswith("containerd://")
    assert c["state"]["running"]["startedAt"]
    # Pending, Running, Ready: no write repeats itself
    assert sim.stats.status_writes <= 4


async def test_pod_ips_are_unique(sim: NodeSimulator, pods: Pods) -> None:
    names = [f"ip-{i}" for i in range(12)]
    await asyncio.gather(*(pods.create(make_pod(n)) for n in names))
    ready = [await pods.wait(n, is_ready) for n in names]
    ips = {p["status"]["podIP"] for p in ready}
    assert len(ips) == len(names)


def serving_pod() -> dict[str, Any]:
    """The shape of a real OME serving pod: one 8-GPU engine, a readiness gate, a toleration."""
    limits = {GPU: "8", "cpu": "64", "memory": "512Gi"}
    return {
        "metadata": {
            "name": "chat-engine-7-default-0",
            "labels": {
                "ome.io/inferenceservice": "chat",
                "component": "engine",
                "ome.io/instance-index": "7",
                "ome.io/instance-incarnation": "1",
                "app": "chat-engine",
            },
            "annotations": {"ome.io/deploymentMode": "OMENative"},
        },
        "spec": {
            "readinessGates": [{"conditionType": "ome.io/serving"}],
            "restartPolicy": "Always",
            "terminationGracePeriodSeconds": 600,
            "tolerations": [{"key": GPU, "operator": "Exists", "effect": "NoSchedule"}],
            "containers": [
                {
                    "name": "ome-container",
                    "image": "ome/sglang:v0.4.9",
                    "args": ["--model-path", "/mnt/models/llama", "--tp-size", "8"],
                    "ports": [{"containerPort": 8080, "name": "http", "protocol": "TCP"}],
                    "resources": {"limits": limits, "requests": dict(limits)},
                }
            ],
        },
    }


async def test_realistic_serving_pod_waits_for_its_readiness_gate(
    sim: NodeSimulator, pods: Pods
) -> None:
    body = serving_pod()
    await pods.create(body)
    pod = await pods.wait(
        body["metadata"]["name"],
        lambda p: conditions(p).get("ContainersReady", {}).get("status") == "True",
        what="ContainersReady",
    )
    assert pod["spec"]["nodeName"] in sim.node_names
    assert conditions(pod)["Ready"]["reason"] == "ReadinessGatesNotReady"


async def test_readiness_gate_holds_ready_until_set(sim: NodeSimulator, pods: Pods) -> None:
    gate = "ome.io/serving"
    await pods.create(make_pod("gated", readinessGates=[{"conditionType": gate}]))
    pod = await pods.wait(
        "gated",
        lambda p: conditions(p).get("ContainersReady", {}).get("status") == "True",
        what="ContainersReady",
    )
    ready = conditions(pod)["Ready"]
    assert (ready["status"], ready["reason"]) == ("False", "ReadinessGatesNotReady")
    assert ready["message"] == (
        f'corresponding condition of pod readiness gate "{gate}" does not exist.'
    )

    await pods.set_condition("gated", gate, "True")
    pod = await pods.wait("gated", is_ready, what="Ready after the gate")
    assert conditions(pod)[gate]["status"] == "True"

    # The simulator's own writes keep the gate it does not own.
    assert await sim.restart_container(pods.namespace, "gated") == 1
    pod = await pods.wait("gated", lambda p: container(p).get("restartCount") == 1)
    pod = await pods.wait("gated", is_ready, what="Ready after the restart")
    assert conditions(pod)[gate]["status"] == "True"

    await pods.set_condition("gated", gate, "False")
    pod = await pods.wait("gated", lambda p: not is_ready(p), what="not Ready")
    assert conditions(pod)["Ready"]["message"] == (
        f'the status of pod readiness gate "{gate}" is not "True", but False'
    )
    assert conditions(pod)["ContainersReady"]["status"] == "True"


async def test_bad_image_backs_off_without_labels(sim: NodeSimulator, pods: Pods) -> None:
    await pods.create(make_pod("missing", image="ome/serving:missing"))
    await pods.create(make_pod("annotated", annotations={FAIL: "ImagePullBackOff"}))
    for name in ("missing", "annotated"):
        pod = await pods.wait(
            name, lambda p: waiting_reason(p) == "ImagePullBackOff", what="ImagePullBackOff"
        )
        c = container(pod)
        assert c["restartCount"] == 0
        assert c["ready"] is False
        assert c["state"]["waiting"]["message"].startswith("Back-off pulling image")
        assert pod["status"]["phase"] == "Pending"
        assert conditions(pod)["Ready"]["status"] == "False"
    assert sim.stats.errors == 0

    # kubelet's Warning events, aggregated: one per (container, reason, message), counted up.
    async def pull_events() -> bool:
        found = await warnings(pods, "missing")
        messages = {e["message"]: e for e in found}
        pulled = messages.get(
            'Failed to pull image "ome/serving:missing": rpc error: code = NotFound desc = '
            'failed to pull and unpack image "ome/serving:missing": not found (simulated)'
        )
        return pulled is not None and "Error: ImagePullBackOff" in messages

    await eventually(pull_events, timeout=20)
    for event in await warnings(pods, "missing"):
        assert (event["reason"], event["source"]["component"]) == ("Failed", "kubelet")
        assert event["involvedObject"]["fieldPath"] == "spec.containers{main}"
        assert event["source"]["host"].startswith(pods.namespace)


async def test_crash_loop_restarts_with_back_off(sim: NodeSimulator, pods: Pods) -> None:
    await pods.create(make_pod("crashy", annotations={CRASH_AFTER: "300ms"}))
    pod = await pods.wait(
        "crashy",
        lambda p: waiting_reason(p) == "CrashLoopBackOff",
        what="CrashLoopBackOff",
    )
    c = container(pod)
    assert set(c["state"]) == {"waiting"}, "a cleared state variant must not linger"
    assert c["restartCount"] >= 1
    assert c["ready"] is False
    terminated = c["lastState"]["terminated"]
    assert (terminated["exitCode"], terminated["reason"]) == (1, "Error")
    assert terminated["startedAt"] and terminated["finishedAt"]
    assert "restarting failed container=main" in c["state"]["waiting"]["message"]
    first = c["restartCount"]
    pod = await pods.wait(
        "crashy",
        lambda p: (
            container(p).get("restartCount", 0) >= first + 2 and "running" in container(p)["state"]
        ),
        what="restartCount rising",
    )
    assert set(container(pod)["state"]) == {"running"}
    assert pod["status"]["phase"] == "Running"

    # Each new back-off is one more on kubelet's one BackOff event for the container.
    uid = pod["metadata"]["uid"]

    async def counted() -> bool:
        found = [e for e in await warnings(pods, "crashy") if e["reason"] == "BackOff"]
        return len(found) == 1 and found[0]["count"] >= 2

    await eventually(counted, timeout=20)
    (event,) = [e for e in await warnings(pods, "crashy") if e["reason"] == "BackOff"]
    assert event["message"] == (
        f"Back-off restarting failed container main in pod crashy_{pods.namespace}({uid})"
    )
    assert event["lastTimestamp"] >= event["firstTimestamp"]
    assert sim.stats.events >= 2


async def test_inject_by_selector_and_clear(sim: NodeSimulator, pods: Pods) -> None:
    await pods.create(make_pod("served", labels={"app": "chat"}))
    await pods.wait("served", is_ready)
    injection = sim.inject(pods.namespace, {"app": "chat"}, Failure.NEVER_READY)
    pod = await pods.wait("served", lambda p: not is_ready(p), what="not Ready")
    assert container(pod)["state"]["running"]
    await pods.create(make_pod("later", labels={"app": "chat"}))
    pod = await pods.wait("later", lambda p: bool(container(p).get("started")))
    assert not is_ready(pod)
    sim.clear_injection(injection)
    await pods.wait("served", is_ready, what="Ready again")
    await pods.wait("later", is_ready, what="Ready again")


async def test_inject_crash_by_name(sim: NodeSimulator, pods: Pods) -> None:
    await pods.create(make_pod("victim"))
    await pods.wait("victim", is_ready)
    sim.inject(pods.namespace, "victim", "CrashLoopBackOff", crash_after=0.1, exit_code=2)
    pod = await pods.wait("victim", lambda p: container(p).get("restartCount", 0) >= 2)
    assert container(pod)["lastState"]["terminated"]["exitCode"] == 2


async def test_restart_container_counts(sim: NodeSimulator, pods: Pods) -> None:
    await pods.create(make_pod("restarted"))
    await pods.wait("restarted", is_ready)
    assert await sim.restart_container(pods.namespace, "restarted", "main") == 1
    assert await sim.restart_container(pods.namespace, "restarted") == 2
    pod = await pods.wait("restarted", lambda p: container(p).get("restartCount") == 2)
    assert container(pod)["lastState"]["terminated"]["exitCode"] == 137
    await pods.wait("restarted", is_ready)
    with pytest.raises(LookupError):
        await sim.restart_container(pods.namespace, "no-such-pod")


async def patch_image(pods: Pods, name: str, uid: str, image: str) -> None:
    """Replace the first container's image as an in-place update does (a JSON patch)."""
    patch = [
        {"op": "test", "path": "/metadata/uid", "value": uid},
        {"op": "replace", "path": "/spec/containers/0/image", "value": image},
    ]
    await pods.kube.patch(PODS, name, patch, pods.namespace, content_type=JSON_PATCH)


async def test_image_patched_in_place_restarts_the_container(
    simulators: SimFactory, pods: Pods
) -> None:
    timings = Timings(termination_delay=0.3, image_pull_delay=0.4, ready_delay=0.4)
    sim = await simulators(timings=timings)
    await pods.create(make_pod("inplace", readinessGates=[{"conditionType": "ome.io/serving"}]))
    await pods.set_condition("inplace", "ome.io/serving", "True")
    before = await pods.wait("inplace", is_ready, what="Ready")
    old = container(before)
    uid = before["metadata"]["uid"]

    seen: list[tuple[bool, str, int, str]] = []  # Ready, image, restartCount, state

    def record(pod: Mapping[str, Any]) -> None:
        c = container(pod)
        sample = (is_ready(pod), c.get("image", ""), c.get("restartCount", 0), *c["state"])
        if not seen or seen[-1] != sample:
            seen.append(sample)

    await patch_image(pods, "inplace", uid, "ome/serving:2.0")

    async def restarted() -> bool:
        pod = await pods.get("inplace")
        record(pod)
        return container(pod).get("restartCount") == 1 and is_ready(pod)

    await eventually(restarted, timeout=10)
    after = await pods.get("inplace")
    c = container(after)
    assert after["metadata"]["uid"] == uid  # the same pod: restarted in place
    assert after["status"]["phase"] == "Running"
    assert after["status"]["observedGeneration"] == after["metadata"]["generation"] == 2
    assert (c["image"], c["ready"], c["started"]) == ("ome/serving:2.0", True, True)
    assert c["imageID"] != old["imageID"] and c["imageID"].startswith("ome/serving@sha256:")
    assert c["containerID"] != old["containerID"]
    assert c["state"]["running"]["startedAt"] >= old["state"]["running"]["startedAt"]
    terminated = c["lastState"]["terminated"]
    assert (terminated["exitCode"], terminated["reason"]) == (0, "Completed")
    assert terminated["containerID"] == old["containerID"]
    # The pod was seen not Ready in between: the old container stopped, the new one started.
    assert (False, "ome/serving:1.0", 0, "terminated") in seen, seen
    assert (False, "ome/serving:2.0", 1, "running") in seen, seen
    ready = conditions(after)["Ready"]
    assert ready["lastTransitionTime"] >= conditions(before)["Ready"]["lastTransitionTime"]
    assert conditions(after)["ContainersReady"]["status"] == "True"
    assert sim.stats.errors == 0


async def test_image_patched_to_a_bad_one_backs_off_then_recovers(
    sim: NodeSimulator, pods: Pods
) -> None:
    created = await pods.create(make_pod("repulled"))
    await pods.wait("repulled", is_ready, what="Ready")
    uid = created["metadata"]["uid"]

    await patch_image(pods, "repulled", uid, "ome/serving:missing")  # an image rule: no pull
    pod = await pods.wait(
        "repulled",
        lambda p: waiting_reason(p) == "ImagePullBackOff",
        what="ImagePullBackOff on the patched image",
    )
    c = container(pod)
    assert c["image"] == "ome/serving:missing"
    assert c["restartCount"] == 0 and c["ready"] is False
    assert c["lastState"]["terminated"]["reason"] == "Completed"
    assert c["state"]["waiting"]["message"] == 'Back-off pulling image "ome/serving:missing"'
    assert pod["status"]["phase"] == "Running"
    assert conditions(pod)["Ready"]["status"] == "False"
    assert conditions(pod)["ContainersReady"]["reason"] == "ContainersNotReady"

    await patch_image(pods, "repulled", uid, "ome/serving:2.0")  # corrected, in place again
    pod = await pods.wait(
        "repulled",
        lambda p: is_ready(p) and container(p).get("image") == "ome/serving:2.0",
        what="Ready on the corrected image",
    )
    assert container(pod)["restartCount"] == 1
    assert pod["metadata"]["uid"] == uid
    assert sim.stats.errors == 0


async def test_deleted_pod_goes_after_containers_stop(sim: NodeSimulator, pods: Pods) -> None:
    await pods.create(make_pod("slow-stop", annotations={TERMINATION_DELAY: "1s"}))
    await pods.create(make_pod("graceful", annotations={TERMINATION_DELAY: "1h"}))
    await pods.wait("slow-stop", is_ready)
    await pods.wait("graceful", is_ready)
    started = time.monotonic()
    await pods.kube.delete(PODS, "slow-stop", pods.namespace)
    await pods.kube.delete(PODS, "graceful", pods.namespace, grace_period_seconds=1)
    pod = await pods.get("slow-stop")
    assert pod["metadata"]["deletionTimestamp"]
    await pods.wait_gone("slow-stop")
    await pods.wait_gone("graceful")
    assert time.monotonic() - started >= 0.9
    assert sim.stats.deletes == 2


async def test_unbound_pod_deleted_at_once(sim: NodeSimulator, pods: Pods) -> None:
    await pods.create(make_pod("nowhere", gpus=64))  # more than any node has: never bound
    await pods.wait(
        "nowhere", lambda p: conditions(p).get("PodScheduled", {}).get("status") == "False"
    )
    await pods.kube.delete(PODS, "nowhere", pods.namespace)
    await pods.wait_gone("nowhere", timeout=2)


# -- scheduling (kube-scheduler's, onto the simulated nodes) ----------------------------------


def unschedulable(pod: Mapping[str, Any]) -> bool:
    return conditions(pod).get("PodScheduled", {}).get("reason") == "Unschedulable"


def scheduling_message(pod: Mapping[str, Any]) -> str:
    """kube-scheduler's PodScheduled=False message ("0/2 nodes are available: ...")."""
    return str(conditions(pod).get("PodScheduled", {}).get("message") or "")


async def test_node_selector_and_affinity(sim: NodeSimulator, pods: Pods) -> None:
    first, second = sim.node_names
    host = "kubernetes.io/hostname"
    await pods.create(make_pod("selected", nodeSelector={host: second}))
    not_first = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": host, "operator": "NotIn", "values": [first]}]}
                ]
            }
        }
    }
    await pods.create(make_pod("affine", affinity=not_first))
    await pods.create(make_pod("lost", nodeSelector={host: "elsewhere"}))
    assert (await pods.wait("selected", is_ready))["spec"]["nodeName"] == second
    assert (await pods.wait("affine", is_ready))["spec"]["nodeName"] == second
    pod = await pods.wait("lost", unschedulable, what="Unschedulable")
    assert "2 node(s) didn't match Pod's node affinity/selector" in scheduling_message(pod)
    assert not pod["spec"].get("nodeName")


async def test_anti_affinity_spreads_and_blocks(sim: NodeSimulator, pods: Pods) -> None:
    anti = {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {
                    "labelSelector": {
                        "matchExpressions": [{"key": "app", "operator": "In", "values": ["e"]}]
                    },
                    "topologyKey": "kubernetes.io/hostname",
                }
            ]
        }
    }
    names = ["e-0", "e-1", "e-2"]
    for name in names:
        await pods.create(make_pod(name, labels={"app": "e"}, affinity=anti))

    async def settled() -> bool:
        listed = [await pods.get(n) for n in names]
        return sum(is_ready(p) for p in listed) == 2 and sum(unschedulable(p) for p in listed) == 1

    await eventually(settled)
    listed = [await pods.get(n) for n in names]
    bound = [p for p in listed if is_ready(p)]
    assert {p["spec"]["nodeName"] for p in bound} == set(sim.node_names)
    waiting = next(p for p in listed if unschedulable(p))
    assert "2 node(s) didn't match pod anti-affinity rules" in scheduling_message(waiting)
    await pods.kube.delete(PODS, bound[0]["metadata"]["name"], pods.namespace)
    pod = await pods.wait(
        waiting["metadata"]["name"],
        is_ready,
        timeout=SCHEDULER_RETRY,
        what="Ready once a node freed",
    )
    assert pod["spec"]["nodeName"] == bound[0]["spec"]["nodeName"]


async def test_gpu_capacity(simulators: SimFactory, pods: Pods) -> None:
    sim = await simulators(nodes=2, gpus_per_node=8)
    await pods.create(make_pod("too-big", gpus=16))
    for i in range(3):
        await pods.create(make_pod(f"full-{i}", gpus=8))
    pod = await pods.wait("too-big", unschedulable, what="Unschedulable")
    assert conditions(pod)["PodScheduled"]["status"] == "False"
    assert "0/2 nodes are available: 2 Insufficient nvidia.com/gpu." in scheduling_message(pod)
    assert "nodeName" not in pod["spec"]

    async def settled() -> bool:
        listed = [await pods.get(f"full-{i}") for i in range(3)]
        return sum(is_ready(p) for p in listed) == 2 and sum(unschedulable(p) for p in listed) == 1

    await eventually(settled)
    listed = [await pods.get(f"full-{i}") for i in range(3)]
    running = [p for p in listed if is_ready(p)]
    assert {p["spec"]["nodeName"] for p in running} == set(sim.node_names)
    waiting = next(p for p in listed if unschedulable(p))
    assert "Insufficient nvidia.com/gpu" in scheduling_message(waiting)
    await pods.kube.delete(PODS, running[0]["metadata"]["name"], pods.namespace)
    pod = await pods.wait(
        waiting["metadata"]["name"],
        is_ready,
        timeout=SCHEDULER_RETRY,
        what="Ready once GPUs freed",
    )
    assert pod["spec"]["nodeName"] == running[0]["spec"]["nodeName"]
    assert not (await pods.get("too-big"))["spec"].get("nodeName")
    assert sim.stats.errors == 0


async def test_pod_waits_for_gpus_until_a_node_is_added(simulators: SimFactory, pods: Pods) -> None:
    sim = await simulators(nodes=1, gpus_per_node=8)
    await pods.create(make_pod("first", gpus=8))
    await pods.wait("first", is_ready)
    await pods.create(make_pod("second", gpus=8))
    pod = await pods.wait("second", unschedulable, what="Unschedulable: the GPUs ran out")
    assert "0/1 nodes are available: 1 Insufficient nvidia.com/gpu." in scheduling_message(pod)

    added = await sim.add_node(gpus=8)
    pod = await pods.wait(
        "second", is_ready, timeout=SCHEDULER_RETRY, what="Ready on the added node"
    )
    assert pod["spec"]["nodeName"] == added
    assert conditions(pod)["PodScheduled"]["status"] == "True"
    assert (await pods.get("first"))["spec"]["nodeName"] == sim.node_names[0]


# -- nodes going away --------------------------------------------------------------------------


async def test_node_not_ready_makes_its_pods_not_ready(
    kube: KubeClient, sim: NodeSimulator, pods: Pods
) -> None:
    first, second = sim.node_names
    await pods.create(make_pod("on-first", nodeSelector={"kubernetes.io/hostname": first}))
    await pods.create(make_pod("on-second", nodeSelector={"kubernetes.io/hostname": second}))
    await pods.wait("on-first", is_ready)
    await pods.wait("on-second", is_ready)

    await sim.set_node_ready(first, False)
    node = await kube.get(NODES, first)
    assert conditions(node)["Ready"]["status"] == "Unknown"
    assert conditions(node)["Ready"]["reason"] == "NodeStatusUnknown"
    # NoSchedule follows the condition at once; the controller rate-limits the NoExecute
    # taint, and holds it back while a zone looks disrupted (lost nodes of other tests).
    assert "NoSchedule" in {t["effect"] for t in node["spec"]["taints"]}
    # The real node lifecycle controller's mark: Ready False (Kubernetes 1.36 gives no reason).
    pod = await pods.wait("on-first", lambda p: not is_ready(p), what="not Ready")
    assert conditions(pod)["Ready"]["status"] == "False"
    lease = await kube.get(LEASES, second, namespace="kube-node-lease")
    assert lease["spec"]["holderIdentity"] == second  # the live kubelet's heartbeat
    assert is_ready(await pods.get("on-second"))

    await pods.create(make_pod("wants-first", nodeSelector={"kubernetes.io/hostname": first}))
    pod = await pods.wait("wants-first", unschedulable, what="Unschedulable")
    assert "1 node(s) had untolerated taint(s)" in scheduling_message(pod)

    await sim.set_node_ready(first, True)
    await pods.wait("on-first", is_ready, what="Ready again")
    pod = await pods.wait(
        "wants-first",
        is_ready,
        timeout=SCHEDULER_RETRY,
        what="scheduled once the node is back",
    )
    assert pod["spec"]["nodeName"] == first
    assert container(await pods.get("on-first"))["restartCount"] == 0


async def test_not_ready_node_evicts_after_delay(simulators: SimFactory, pods: Pods) -> None:
    sim = await simulators(nodes=1, timings=Timings(not_ready_eviction=0.5))
    await pods.create(make_pod("evicted"))
    await pods.wait("evicted", is_ready)
    await sim.set_node_ready(sim.node_names[0], False)
    await pods.wait_gone("evicted", timeout=5)


async def test_removed_node_takes_its_pods(simulators: SimFactory, pods: Pods) -> None:
    sim = await simulators(nodes=1)
    await pods.create(make_pod("orphan"))
    held = make_pod("held")
    held["metadata"]["finalizers"] = ["sim.omed.dev/test-hold"]  # keeps it visible once deleted
    await pods.create(held)
    await pods.wait("orphan", is_ready)
    await pods.wait("held", is_ready)
    extra = await sim.add_node(gpus=2, labels={"pool": "extra"})
    await pods.create(make_pod("on-extra", nodeSelector={"pool": "extra"}))
    assert (await pods.wait("on-extra", is_ready))["spec"]["nodeName"] == extra
    await sim.remove_node(sim.node_names[0])
    # At once what the pod GC does after its 40 s quarantine: Failed, then a forced delete.
    await pods.wait_gone("orphan")
    pod = await pods.wait(
        "held", lambda p: bool(p["metadata"].get("deletionTimestamp")), what="deleted"
    )
    assert pod["status"]["phase"] == "Failed"
    target = conditions(pod)["DisruptionTarget"]
    assert (target["status"], target["reason"]) == ("True", "DeletionByPodGC")
    assert pod["metadata"]["deletionGracePeriodSeconds"] == 0
    await pods.kube.patch(PODS, "held", {"metadata": {"finalizers": None}}, pods.namespace)
    await pods.wait_gone("held")
    assert is_ready(await pods.get("on-extra"))


# -- scale -------------------------------------------------------------------------------------


async def _where_pods_stand(pods: Pods, sim: NodeSimulator) -> str:
    """What a timed-out wait saw: pods by state, a few of the stuck ones, the simulator's
    counters and queues."""
    listed = await pods.kube.list_all(PODS, pods.namespace)
    states: dict[str, list[str]] = {}
    for pod in listed:
        if is_ready(pod):
            state = "ready"
        elif not (pod.get("spec") or {}).get("nodeName"):
            scheduled = conditions(pod).get("PodScheduled", {})
            state = f"unbound ({scheduled.get('reason') or 'no condition'})"
        else:
            state = f"bound, {(pod.get('status') or {}).get('phase')}"
        states.setdefault(state, []).append(pod["metadata"]["name"])
    counts = {state: len(names) for state, names in states.items()}
    stuck = {state: names[:3] for state, names in states.items() if state != "ready"}
    sample = next((p for p in listed if not is_ready(p)), None)
    return (
        f"not all pods Ready: {counts}; e.g. {stuck}; stats {sim.stats}; "
        f"queues {sim.queues()}; "
        f"a stuck pod's status: {json.dumps((sample or {}).get('status'))[:1500]}"
    )


@pytest.mark.slow
async def test_hundreds_of_pods(simulators: SimFactory, pods: Pods) -> None:
    sim = await simulators(nodes=8, gpus_per_node=8)
    count = 300
    started = time.monotonic()
    sem = asyncio.Semaphore(50)

    async def create(i: int) -> None:
        async with sem:
            await pods.create(make_pod(f"many-{i}", gpus=1 if i < 64 else None))

    await asyncio.gather(*(create(i) for i in range(count)))

    async def all_ready() -> bool:
        listed = await pods.kube.list_all(PODS, pods.namespace)
        return sum(is_ready(p) for p in listed) == count

    # About 10 s on a quiet machine; the margin is for a CI machine under load.
    try:
        await eventually(all_ready, timeout=180)
    except AssertionError:
        raise AssertionError(await _where_pods_stand(pods, sim)) from None
    elapsed = time.monotonic() - started
    print(f"\n[simulator] {count} pods Ready in {elapsed:.1f}s, stats {sim.stats}")
    listed = await pods.kube.list_all(PODS, pods.namespace)
    assert {p["spec"]["nodeName"] for p in listed} <= set(sim.node_names)
    assert sim.stats.status_writes <= count * 4
    assert sim.stats.errors == 0


# -- API server trouble ------------------------------------------------------------------------


@pytest.mark.slow
async def test_survives_an_api_server_restart_and_compaction(
    control_plane: Any, sim: NodeSimulator, pods: Pods
) -> None:
    await pods.create(make_pod("before"))
    await pods.wait("before", is_ready)
    await asyncio.to_thread(control_plane.compact_etcd)
    await asyncio.to_thread(control_plane.restart_apiserver)
    await pods.create(make_pod("after"))
    await pods.kube.delete(PODS, "before", pods.namespace)
    await pods.wait("after", is_ready, timeout=30, what="Ready after the restart")
    await pods.wait_gone("before", timeout=30)
