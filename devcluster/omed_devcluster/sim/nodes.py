"""Simulated GPU nodes as API objects, and pod IP allocation per node.

A node looks like a GPU node a real kubelet and the NVIDIA device plugin would register:
capacity and allocatable for ``cpu``, ``memory``, ``pods``, ``ephemeral-storage`` and
``nvidia.com/gpu``; the well-known labels (``kubernetes.io/hostname`` and friends); an
InternalIP and Hostname address; the four kubelet conditions; and the kubelet's heartbeat,
its Lease in ``kube-node-lease``. A node whose heartbeat stops is judged by the real node
lifecycle controller, as in a cluster.

Addresses: node ``i`` (0-based) has InternalIP ``172.18.<i // 250>.<i % 250 + 2>`` and pod
CIDR ``10.<244 + i // 256>.<i % 256>.0/24``; its pods get ``.2`` .. ``.254`` from that range,
round-robin like the host-local IPAM plugin, so a recreated pod gets a new IP.
Invariant: no two live pods on the simulator's nodes share an IP.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from typing import Any

from omed.clock import rfc3339

POOL_LABEL = "sim.omed.dev/pool"
"""On every simulated node: the simulator's node name prefix (its watch selects on it)."""
UNREACHABLE_TAINT = "node.kubernetes.io/unreachable"
NODE_LEASE_NAMESPACE = "kube-node-lease"
LEASE_DURATION_SECONDS = 40
"""What a kubelet writes into its Lease (``nodeLeaseDurationSeconds``'s default)."""
LEASE_RENEW_SECONDS = 2.0
"""How often the simulated kubelets renew their Leases (a kubelet renews every quarter of the
duration, 10 s): often enough that the test plane's short node-monitor grace period is met with
room for an event loop that is busy for a few seconds."""
MAX_PODS_PER_NODE = 253
_FIRST_HOST, _LAST_HOST = 2, 254


def host_ip(index: int) -> str:
    return f"172.18.{index // 250}.{index % 250 + 2}"


def pod_cidr(index: int) -> str:
    return f"10.{244 + index // 256}.{index % 256}.0/24"


def node_conditions(*, now: dt.datetime, since: dt.datetime) -> list[dict[str, Any]]:
    """The kubelet's four node conditions of a healthy node. (A lost node's ``Unknown`` ones
    are the node lifecycle controller's to write.)"""
    stamp, changed = rfc3339(now), rfc3339(since)
    pressure = [
        ("MemoryPressure", "KubeletHasSufficientMemory", "kubelet has sufficient memory"),
        ("DiskPressure", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
        ("PIDPressure", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
    ]
    conditions = [
        {
            "type": kind,
            "status": "False",
            "reason": reason,
            "message": message,
            "lastHeartbeatTime": stamp,
            "lastTransitionTime": changed,
        }
        for kind, reason, message in pressure
    ]
    conditions.append(
        {
            "type": "Ready",
            "status": "True",
            "reason": "KubeletReady",
            "message": "kubelet is posting ready status",
            "lastHeartbeatTime": stamp,
            "lastTransitionTime": changed,
        }
    )
    return conditions


def micro_time(moment: dt.datetime) -> str:
    """A ``metav1.MicroTime`` as the API server accepts it (RFC 3339 with microseconds)."""
    return moment.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def node_lease(*, name: str, uid: str, now: dt.datetime) -> dict[str, Any]:
    """The Lease a kubelet keeps in ``kube-node-lease``: its heartbeat, which the node lifecycle
    controller reads. Owned by the Node, as the kubelet owns it, so it goes with the node."""
    return {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {
            "name": name,
            "namespace": NODE_LEASE_NAMESPACE,
            "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": name, "uid": uid}],
        },
        "spec": {
            "holderIdentity": name,
            "leaseDurationSeconds": LEASE_DURATION_SECONDS,
            "renewTime": micro_time(now),
        },
    }


def node_capacity(
    *, gpus: int, cpu: str, memory: str, pods: int, ephemeral_storage: str = "7Ti"
) -> dict[str, str]:
    return {
        "cpu": cpu,
        "memory": memory,
        "pods": str(pods),
        "ephemeral-storage": ephemeral_storage,
        "nvidia.com/gpu": str(gpus),
        "hugepages-1Gi": "0",
        "hugepages-2Mi": "0",
    }


def node_object(
    *,
    name: str,
    index: int,
    pool: str,
    capacity: Mapping[str, str],
    labels: Mapping[str, str],
    taints: Sequence[Mapping[str, Any]],
    kubelet_version: str,
    now: dt.datetime,
) -> dict[str, Any]:
    gpus = capacity.get("nvidia.com/gpu", "0")
    all_labels = {
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        "beta.kubernetes.io/os": "linux",
        "beta.kubernetes.io/arch": "amd64",
        "node.kubernetes.io/instance-type": f"sim.gpu-{gpus}",
        "nvidia.com/gpu.present": "true" if gpus != "0" else "false",
        "nvidia.com/gpu.count": gpus,
        POOL_LABEL: pool,
        **labels,
    }
    spec: dict[str, Any] = {"podCIDR": pod_cidr(index), "podCIDRs": [pod_cidr(index)]}
    if taints:
        spec["taints"] = [dict(t) for t in taints]
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": all_labels},
        "spec": spec,
        "status": node_status(
            name=name, index=index, capacity=capacity, kubelet_version=kubelet_version, now=now
        ),
    }


def node_status(
    *,
    name: str,
    index: int,
    capacity: Mapping[str, str],
    kubelet_version: str,
    now: dt.datetime,
) -> dict[str, Any]:
    return {
        "capacity": dict(capacity),
        "allocatable": dict(capacity),
        "conditions": node_conditions(now=now, since=now),
        "addresses": [
            {"type": "InternalIP", "address": host_ip(index)},
            {"type": "Hostname", "address": name},
        ],
        "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
        "nodeInfo": {
            "machineID": f"{index:032x}",
            "systemUUID": f"00000000-0000-0000-0000-{index:012x}",
            "bootID": f"{index:08x}-0000-0000-0000-000000000000",
            "kernelVersion": "6.8.0-sim",
            "osImage": "omed node simulator",
            "containerRuntimeVersion": "containerd://2.0.0",
            "kubeletVersion": kubelet_version,
            "kubeProxyVersion": "",
            "operatingSystem": "linux",
            "architecture": "amd64",
        },
    }


def node_ready(node: Mapping[str, Any]) -> bool:
    for cond in (node.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "Ready":
            return bool(cond.get("status") == "True")
    return False


class PodIPs:
    """Round-robin pod IPs from one node's /24."""

    def __init__(self, index: int) -> None:
        self._prefix = pod_cidr(index).rsplit(".", 1)[0]
        self._next = _FIRST_HOST
        self._used: dict[int, str] = {}

    def allocate(self, owner: str) -> str:
        for _ in range(_LAST_HOST - _FIRST_HOST + 1):
            host = self._next
            self._next = host + 1 if host < _LAST_HOST else _FIRST_HOST
            if host not in self._used:
                self._used[host] = owner
                return f"{self._prefix}.{host}"
        raise RuntimeError(f"no pod IP left in {self._prefix}.0/24")

    def claim(self, ip: str, owner: str) -> bool:
        """Record an IP a pod already has (adopted from an earlier simulator run)."""
        prefix, _, last = ip.rpartition(".")
        if prefix != self._prefix or not last.isdigit():
            return False
        host = int(last)
        if self._used.get(host, owner) != owner:
            return False
        self._used[host] = owner
        return True

    def release(self, ip: str) -> None:
        prefix, _, last = ip.rpartition(".")
        if prefix == self._prefix and last.isdigit():
            self._used.pop(int(last), None)
