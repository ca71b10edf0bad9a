"""The simulator's faults of stuck deletions, against the real API server: a node whose
kubelet is gone (NotReady, tainted unreachable: deleted pods stay Terminating), a node
deleted under its pods (left to whoever collects them), a Ready node whose kubelet ignores
deletions (and then acts on them again)."""

from __future__ import annotations

import asyncio

import pytest
from test_simulator import Pods, SimFactory, conditions, is_ready, make_pod, pods, simulators

from omed.kube.client import KubeClient
from omed.kube.errors import NotFound
from omed.kube.resources import NODES, PODS

pytestmark = pytest.mark.integration

__all__ = ["pods", "simulators"]

STAYS = 1.5
"""How long a test watches a deleted pod stay (well past its 1 s grace and the simulator's
0.2 s termination)."""


def short_grace(name: str) -> dict[str, object]:
    pod = make_pod(name)
    pod["spec"]["terminationGracePeriodSeconds"] = 1
    return pod


async def deleted_and_kept(pods: Pods, name: str) -> dict[str, object]:
    await pods.kube.delete(PODS, name, pods.namespace)
    await asyncio.sleep(STAYS)
    pod = await pods.get(name)
    assert pod["metadata"].get("deletionTimestamp")
    return pod


async def test_a_lost_kubelet_leaves_deleted_pods_terminating(
    kube: KubeClient, simulators: SimFactory, pods: Pods
) -> None:
    sim = await simulators(nodes=1)
    await pods.create(short_grace("stuck"))
    await pods.wait("stuck", is_ready, timeout=30)
    node = sim.node_names[0]
    await sim.set_node_ready(node, False)
    taints = {t["key"] for t in (await kube.get(NODES, node))["spec"]["taints"]}
    assert taints == {"node.kubernetes.io/unreachable"}
    pod = await deleted_and_kept(pods, "stuck")
    assert conditions(pod)["Ready"]["status"] == "False"  # the node lifecycle controller's
    await kube.delete(PODS, "stuck", pods.namespace, grace_period_seconds=0)  # a force delete
    await pods.wait_gone("stuck")


async def test_a_node_removed_without_collection_leaves_its_pods(
    kube: KubeClient, simulators: SimFactory, pods: Pods
) -> None:
    sim = await simulators(nodes=1)
    await pods.create(short_grace("left"))
    await pods.wait("left", is_ready, timeout=30)
    node = sim.node_names[0]
    await sim.remove_node(node, collect_pods=False)
    with pytest.raises(NotFound):
        await kube.get(NODES, node)
    pod = await deleted_and_kept(pods, "left")
    assert pod["spec"]["nodeName"] == node
    assert pod["status"]["phase"] == "Running"  # nobody wrote Failed: no pod GC ran yet


async def test_a_kubelet_that_ignores_deletions_keeps_the_node_ready(
    kube: KubeClient, simulators: SimFactory, pods: Pods
) -> None:
    sim = await simulators(nodes=1)
    await pods.create(short_grace("wedged"))
    await pods.wait("wedged", is_ready, timeout=30)
    node = sim.node_names[0]
    sim.ignore_deletions(node)
    pod = await deleted_and_kept(pods, "wedged")
    assert is_ready(pod)  # its containers still run
    assert conditions(await kube.get(NODES, node))["Ready"]["status"] == "True"
    sim.ignore_deletions(node, False)
    await pods.wait_gone("wedged", timeout=10)
