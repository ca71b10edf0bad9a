"""What the simulated kubelets and the simulator share: the pod cache and the two writes a
kubelet makes (a status patch, a final delete), under one write limit.

The simulator plays only the kubelet, so these are its only writes to pods: it never binds
one (kube-scheduler does) and never writes a condition the kubelet does not own.

Invariant: :attr:`SimContext.pods` holds, per ``namespace/name``, the newest pod the
simulator has seen (by resourceVersion) in its scope, bound or not, whether from the watch or
from the answer to one of its own writes; an older watch event never replaces a newer answer.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Mapping
from typing import Any

from omed.clock import Clock
from omed.kube.client import STRATEGIC_MERGE_PATCH, KubeClient
from omed.kube.errors import Conflict, NotFound
from omed.kube.resources import PODS
from omed_devcluster.sim.kubelet import Timings

TERMINAL_PHASES = ("Succeeded", "Failed")


@dataclasses.dataclass
class SimulatorStats:
    """Counts of the simulator's writes, for benchmarks and tests."""

    status_writes: int = 0
    deletes: int = 0
    errors: int = 0
    events: int = 0
    """Warning events the kubelets recorded (created or counted up)."""


def pod_key(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    return f"{meta.get('namespace')}/{meta.get('name')}"


def resource_version(obj: Mapping[str, Any]) -> int | None:
    try:
        return int((obj.get("metadata") or {}).get("resourceVersion") or "")
    except ValueError:
        return None


class SimContext:
    """Shared state and writes; see the module docstring for the cache invariant."""

    def __init__(
        self, client: KubeClient, *, clock: Clock, timings: Timings, concurrency: int
    ) -> None:
        self.client = client
        self.clock = clock
        self.timings = timings
        self.stats = SimulatorStats()
        self.pods: dict[str, dict[str, Any]] = {}
        self.writes = asyncio.Semaphore(concurrency)

    async def patch_status(
        self, pod: Mapping[str, Any], status: Mapping[str, Any]
    ) -> dict[str, Any] | None:
        """Strategic-merge-patch ``status`` into the pod (conditions merge by type).

        The patch carries the pod's uid, so it cannot land on a pod recreated under the same
        name. Returns the patched pod, or None when the pod is gone or was replaced.
        """
        meta = pod.get("metadata") or {}
        body = {"metadata": {"uid": meta.get("uid")}, "status": status}
        try:
            async with self.writes:
                result: dict[str, Any] = await self.client.patch(
                    PODS,
                    str(meta.get("name")),
                    body,
                    meta.get("namespace"),
                    content_type=STRATEGIC_MERGE_PATCH,
                    subresource="status",
                )
        except (NotFound, Conflict):
            return None
        return result

    async def remove_pod(self, pod: Mapping[str, Any]) -> None:
        """Delete with grace 0 (the kubelet's last step once containers stopped), by uid."""
        meta = pod.get("metadata") or {}
        try:
            async with self.writes:
                await self.client.delete(
                    PODS,
                    str(meta.get("name")),
                    meta.get("namespace"),
                    grace_period_seconds=0,
                    uid=meta.get("uid"),
                )
            self.stats.deletes += 1
        except (NotFound, Conflict):
            pass
