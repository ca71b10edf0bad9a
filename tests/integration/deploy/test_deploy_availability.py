"""The manager's availability settings: the PodDisruptionBudget and the spread across nodes,
as rendered by the real helm, and the budget enforced by the real API server's Eviction API
against the chart's own Deployment, its pods run Ready by the node simulator."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
import yaml

from omed.kube.client import KubeClient
from omed.kube.errors import NotFound, TooManyRequests
from omed.kube.resources import NODES, PODS, Resource
from omed_devcluster.simulator import NodeSimulator

from .charts import Render, RenderText, find, run_kubectl

pytestmark = pytest.mark.integration

PDBS = Resource("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget")
DEPLOYMENTS = Resource("apps", "v1", "deployments", "Deployment")
SELECTOR = {"control-plane": "ome-controller-manager"}
REFUSED = "Cannot evict pod as it would violate the pod's disruption budget."


def controller(**values: Any) -> dict[str, Any]:
    return {"ome": {"controller": values}}


def pod_spec(docs: list[dict[str, Any]]) -> dict[str, Any]:
    spec: dict[str, Any] = find(docs, "Deployment", "ome-controller-manager")["spec"]
    return spec["template"]["spec"]


# --- the PodDisruptionBudget, rendered -------------------------------------------------------


def test_default_budget_takes_one_replica_at_a_time(render: Render) -> None:
    docs = render()
    pdb = find(docs, "PodDisruptionBudget", "ome-controller-manager")
    deployment = find(docs, "Deployment", "ome-controller-manager")
    assert pdb["apiVersion"] == "policy/v1"
    assert pdb["metadata"]["namespace"] == "ome"
    chart_labels = {
        k: v for k, v in deployment["metadata"]["labels"].items() if k != "control-plane"
    }
    assert pdb["metadata"]["labels"] == chart_labels
    assert pdb["spec"] == {
        "maxUnavailable": 1,
        "unhealthyPodEvictionPolicy": "AlwaysAllow",
        "selector": {"matchLabels": SELECTOR},
    }
    # the budget selects exactly the Deployment's pods
    assert pdb["spec"]["selector"] == deployment["spec"]["selector"]
    assert deployment["spec"]["template"]["metadata"]["labels"].items() >= SELECTOR.items()


@pytest.mark.parametrize(
    ("budget", "expected"),
    [
        (
            {"minAvailable": 2, "maxUnavailable": None},
            {"minAvailable": 2, "unhealthyPodEvictionPolicy": "AlwaysAllow"},
        ),
        (
            {"minAvailable": "50%", "maxUnavailable": None},
            {"minAvailable": "50%", "unhealthyPodEvictionPolicy": "AlwaysAllow"},
        ),
        (
            {"maxUnavailable": "34%"},
            {"maxUnavailable": "34%", "unhealthyPodEvictionPolicy": "AlwaysAllow"},
        ),
        (
            {"maxUnavailable": 2, "unhealthyPodEvictionPolicy": "IfHealthyBudget"},
            {"maxUnavailable": 2, "unhealthyPodEvictionPolicy": "IfHealthyBudget"},
        ),
        ({"unhealthyPodEvictionPolicy": None}, {"maxUnavailable": 1}),
    ],
    ids=["min-2", "min-percent", "max-percent", "if-healthy", "policy-null"],
)
def test_budget_values(render: Render, budget: dict[str, Any], expected: dict[str, Any]) -> None:
    pdb = find(render(controller(podDisruptionBudget=budget)), "PodDisruptionBudget")
    spec = dict(pdb["spec"])
    assert spec.pop("selector") == {"matchLabels": SELECTOR}
    assert spec == expected


@pytest.mark.parametrize(
    "values",
    [
        controller(podDisruptionBudget={"enabled": False}),
        controller(podDisruptionBudget=None),
    ],
    ids=["disabled", "null"],
)
def test_budget_can_be_turned_off(render: Render, values: dict[str, Any]) -> None:
    assert not [d for d in render(values) if d["kind"] == "PodDisruptionBudget"]


# --- the spread across nodes ---------------------------------------------------------------------


def test_default_spread_is_across_nodes(render: Render) -> None:
    (constraint,) = pod_spec(render())["topologySpreadConstraints"]
    assert constraint == {
        "maxSkew": 1,
        "topologyKey": "kubernetes.io/hostname",
        "whenUnsatisfiable": "ScheduleAnyway",
        "labelSelector": {"matchLabels": SELECTOR},
        "matchLabelKeys": ["pod-template-hash"],
    }


def test_spread_values(render: Render) -> None:
    assert "topologySpreadConstraints" not in pod_spec(
        render(controller(topologySpreadConstraints=[]))
    )
    zones = [
        {
            "maxSkew": 1,
            "topologyKey": "topology.kubernetes.io/zone",
            "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": SELECTOR},
        }
    ]
    assert (
        pod_spec(render(controller(topologySpreadConstraints=zones)))["topologySpreadConstraints"]
        == zones
    )
    # preferred anti-affinity instead: the operator's affinity, with the spread turned off
    anti = {
        "podAntiAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {
                    "weight": 100,
                    "podAffinityTerm": {
                        "topologyKey": "kubernetes.io/hostname",
                        "labelSelector": {"matchLabels": SELECTOR},
                    },
                }
            ]
        }
    }
    spec = pod_spec(render(controller(affinity=anti, topologySpreadConstraints=None)))
    assert spec["affinity"] == anti
    assert "topologySpreadConstraints" not in spec


async def test_variants_pass_server_validation(
    render_text: RenderText, kubectl: str, kubeconfig: str, namespace: str
) -> None:
    """The budget and spread variants, as the API server's validation sees them (the
    defaults are dry-run with every other object in test_deploy_rbac.py)."""
    variants = [
        controller(podDisruptionBudget={"minAvailable": "50%", "maxUnavailable": None}),
        controller(
            podDisruptionBudget={"maxUnavailable": "34%", "unhealthyPodEvictionPolicy": None},
            topologySpreadConstraints=[
                {
                    "maxSkew": 1,
                    "topologyKey": "topology.kubernetes.io/zone",
                    "whenUnsatisfiable": "DoNotSchedule",
                    "labelSelector": {"matchLabels": SELECTOR},
                }
            ],
        ),
    ]
    for values in variants:
        docs = [
            d
            for d in yaml.safe_load_all(render_text(values, namespace=namespace))
            if d and d["kind"] in ("PodDisruptionBudget", "Deployment")
        ]
        assert len(docs) == 2
        out = run_kubectl(
            kubectl,
            kubeconfig,
            "apply",
            "--dry-run=server",
            "-f",
            "-",
            stdin=yaml.safe_dump_all(docs),
        )
        assert "poddisruptionbudget.policy/ome-controller-manager created (server dry run)" in out
        assert "deployment.apps/ome-controller-manager created (server dry run)" in out


# --- evictions against the real API server ------------------------------------------------------


async def eventually(
    check: Callable[[], Awaitable[Any]], *, timeout: float, what: str, interval: float = 0.2
) -> Any:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        result = await check()
        if result:
            return result
        assert loop.time() < deadline, f"timed out after {timeout}s waiting for {what}"
        await asyncio.sleep(interval)


def is_ready(pod: dict[str, Any]) -> bool:
    conditions = pod.get("status", {}).get("conditions", [])
    ready = any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)
    return ready and not pod["metadata"].get("deletionTimestamp")


async def evict(kube: KubeClient, namespace: str, name: str) -> Any:
    """POST pods/<name>/eviction, as `kubectl drain` does."""
    body = {
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": name, "namespace": namespace},
    }
    return await kube.request("POST", PODS.path(namespace, name, "eviction"), body=body)


async def test_a_drain_evicts_one_manager_pod_at_a_time(
    render: Render, kube: KubeClient, kubectl: str, kubeconfig: str, namespace: str
) -> None:
    """The chart's Deployment (3 replicas) and PodDisruptionBudget, with its webhook Secret,
    applied for real; the node simulator runs the pods Ready on 3 nodes. As `kubectl drain`
    does, the nodes are cordoned, then the pods evicted: the first eviction is granted, the
    second refused with 429 while only 2 pods are left Ready (the ReplicaSet's replacement
    stays Pending on the cordoned nodes)."""
    docs = render(namespace=namespace)
    applied = [
        find(docs, "Secret", "ome-webhook-server-cert"),
        find(docs, "Deployment", "ome-controller-manager"),
        find(docs, "PodDisruptionBudget", "ome-controller-manager"),
    ]
    assert applied[1]["spec"]["replicas"] == 3
    run_kubectl(kubectl, kubeconfig, "apply", "-f", "-", stdin=yaml.safe_dump_all(applied))
    selector = "control-plane=ome-controller-manager"

    async def ready_pods() -> list[dict[str, Any]]:
        pods = await kube.list_page(PODS, namespace, labelSelector=selector)
        ready = [p for p in pods["items"] if is_ready(p)]
        return ready if len(ready) == 3 else []

    async def budget(**wanted: int) -> dict[str, Any] | None:
        pdb = await kube.get(PDBS, "ome-controller-manager", namespace)
        status = pdb.get("status", {})
        fresh = status.get("observedGeneration") == pdb["metadata"]["generation"]
        if fresh and all(status.get(k) == v for k, v in wanted.items()):
            return pdb
        return None

    async with NodeSimulator(
        kube, nodes=3, node_prefix=f"{namespace}-n", namespaces=[namespace]
    ) as sim:
        try:
            pods = await eventually(ready_pods, timeout=60, what="3 Ready manager pods")
            await eventually(
                lambda: budget(
                    expectedPods=3, currentHealthy=3, desiredHealthy=2, disruptionsAllowed=1
                ),
                timeout=60,
                what="the disruption controller to allow 1 disruption",
            )
            for node in sim.node_names:
                await kube.patch(NODES, node, {"spec": {"unschedulable": True}})
            first, second = sorted(p["metadata"]["name"] for p in pods)[:2]

            granted = await evict(kube, namespace, first)
            assert granted["status"] == "Success", granted
            with pytest.raises(TooManyRequests) as refused:
                await evict(kube, namespace, second)
            assert refused.value.status == 429
            assert refused.value.message == REFUSED
            causes = refused.value.body["details"]["causes"]
            assert causes == [
                {
                    "reason": "DisruptionBudget",
                    "message": "The disruption budget ome-controller-manager needs 2 healthy "
                    "pods and has 2 currently",
                }
            ], causes
            # the second pod is untouched, and the budget stays spent
            assert is_ready(await kube.get(PODS, second, namespace))
            await eventually(
                lambda: budget(currentHealthy=2, disruptionsAllowed=0),
                timeout=30,
                what="the budget to count 2 healthy pods",
            )
            with pytest.raises(TooManyRequests):
                await evict(kube, namespace, second)
        finally:
            await kube.delete(DEPLOYMENTS, "ome-controller-manager", namespace)
            pods_left = await kube.list_page(PODS, namespace, labelSelector=selector)
            for pod in pods_left["items"]:
                # the garbage collector may be deleting it already
                with contextlib.suppress(NotFound):
                    await kube.delete(
                        PODS, pod["metadata"]["name"], namespace, grace_period_seconds=0
                    )
