"""Node objects and pod IP allocation."""

from __future__ import annotations

import datetime as dt

import pytest

from omed_devcluster.sim.nodes import (
    POOL_LABEL,
    PodIPs,
    host_ip,
    micro_time,
    node_capacity,
    node_lease,
    node_object,
    node_ready,
    pod_cidr,
)

NOW = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


def test_node_object_looks_like_a_gpu_node() -> None:
    node = node_object(
        name="gpu-3",
        index=3,
        pool="gpu",
        capacity=node_capacity(gpus=8, cpu="192", memory="2Ti", pods=110),
        labels={"team": "a"},
        taints=[],
        kubelet_version="v1.36.3",
        now=NOW,
    )
    labels = node["metadata"]["labels"]
    assert labels["kubernetes.io/hostname"] == "gpu-3"
    assert labels[POOL_LABEL] == "gpu"
    assert labels["team"] == "a"
    status = node["status"]
    assert status["allocatable"]["nvidia.com/gpu"] == "8"
    assert status["capacity"]["pods"] == "110"
    assert {"type": "InternalIP", "address": "172.18.0.5"} in status["addresses"]
    assert node_ready(node)
    assert "taints" not in node["spec"]
    assert node["spec"]["podCIDR"] == "10.244.3.0/24"


def test_the_heartbeat_lease_is_the_kubelets() -> None:
    lease = node_lease(name="gpu-3", uid="u-1", now=NOW)
    assert lease["metadata"]["namespace"] == "kube-node-lease"
    assert lease["metadata"]["ownerReferences"] == [
        {"apiVersion": "v1", "kind": "Node", "name": "gpu-3", "uid": "u-1"}
    ]
    assert lease["spec"]["holderIdentity"] == "gpu-3"
    assert lease["spec"]["leaseDurationSeconds"] == 40
    assert micro_time(NOW) == lease["spec"]["renewTime"]
    assert len(lease["spec"]["renewTime"]) == len("2026-01-01T00:00:00.000000Z")


def test_addresses_are_distinct_for_many_nodes() -> None:
    assert len({host_ip(i) for i in range(1000)}) == 1000
    assert len({pod_cidr(i) for i in range(1000)}) == 1000


def test_pod_ips_round_robin_unique_and_reused_late() -> None:
    ips = PodIPs(1)
    first = [ips.allocate(f"p{i}") for i in range(3)]
    assert first == ["10.244.1.2", "10.244.1.3", "10.244.1.4"]
    ips.release("10.244.1.2")
    assert ips.allocate("p3") == "10.244.1.5"
    assert not ips.claim("10.244.1.3", "someone-else")
    assert ips.claim("10.244.1.3", "p1")
    assert not ips.claim("10.9.9.9", "p1")


def test_pod_ips_run_out() -> None:
    ips = PodIPs(0)
    got = {ips.allocate(str(i)) for i in range(253)}
    assert len(got) == 253
    with pytest.raises(RuntimeError):
        ips.allocate("one-more")
