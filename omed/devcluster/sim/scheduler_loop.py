"""The simulated kube-scheduler's loop: batches of pending pods, bound or marked Unschedulable.

Pods wait in an *active* set until the loop wakes; a batch is ordered by priority, then age
(as kube-scheduler's queue orders them), decided one by one in memory against
:class:`~.scheduling.ClusterState` — each placed pod counted at once, so a batch cannot
overcommit — and then written with bounded concurrency: a ``pods/binding`` POST per placed
pod, a PodScheduled=False (reason ``Unschedulable``) status patch per pod that fits nowhere.

Unschedulable pods are parked until something could change the answer: a pod leaving one
of the simulator's nodes, a node added or changed, or ``Timings.unschedulable_retry``
passing. A pod's own update (our condition write, say) does not wake it unless its spec or
labels changed. A binding that fails (an error answer, or a dropped connection or timeout
on the way) is undone in the cluster state and the pod retried; a pass that fails in any
other way puts its pods back and runs again, so the loop never dies while pods wait.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import Any

import aiohttp

from omed.devcluster.sim.context import TERMINAL_PHASES, SimContext, pod_key
from omed.devcluster.sim.podstatus import status_matches, unschedulable_status
from omed.devcluster.sim.scheduling import PodInfo
from omed.kube.errors import ApiError, Conflict, NotFound
from omed.kube.resources import PODS
from omed.log import kv

log = logging.getLogger("omed.devcluster.simulator")

_YIELD_EVERY = 64
_BIND_RETRY = 0.2


def _fingerprint(pod: Mapping[str, Any]) -> tuple[Any, ...]:
    meta = pod.get("metadata") or {}
    return (meta.get("uid"), repr(pod.get("spec")), repr(meta.get("labels")))


class Scheduler:
    """Binds the pods it is given to the context's nodes."""

    def __init__(self, ctx: SimContext, *, scheduler_names: frozenset[str]) -> None:
        self._ctx = ctx
        self._names = scheduler_names
        self._active: dict[str, None] = {}
        self._unschedulable: dict[str, tuple[Any, ...]] = {}
        self._wake = asyncio.Event()

    def wants(self, pod: Mapping[str, Any]) -> bool:
        """Whether this scheduler is responsible for ``pod`` now."""
        spec = pod.get("spec") or {}
        return (
            not spec.get("nodeName")
            and not (pod.get("metadata") or {}).get("deletionTimestamp")
            and (spec.get("schedulerName") or "default-scheduler") in self._names
            and (pod.get("status") or {}).get("phase") not in TERMINAL_PHASES
        )

    def observe(self, key: str, pod: Mapping[str, Any]) -> None:
        """A pod changed: queue it if it needs scheduling (and something relevant changed)."""
        if not self.wants(pod):
            self.forget(key)
            return
        if self._unschedulable.get(key) == _fingerprint(pod):
            return
        self._unschedulable.pop(key, None)
        self._active[key] = None
        self._wake.set()

    def forget(self, key: str) -> None:
        self._active.pop(key, None)
        self._unschedulable.pop(key, None)

    def retry(self) -> None:
        """Capacity or constraints changed: every unschedulable pod gets another try."""
        if self._unschedulable:
            self._active.update(dict.fromkeys(self._unschedulable))
            self._unschedulable.clear()
            self._wake.set()

    @property
    def pending(self) -> int:
        return len(self._active) + len(self._unschedulable)

    async def retry_loop(self) -> None:
        while True:
            await self._ctx.clock.sleep(self._ctx.timings.unschedulable_retry)
            self.retry()

    async def run(self) -> None:
        self._wake.set()
        while True:
            await self._wake.wait()
            self._wake.clear()
            keys = list(self._active)
            try:
                await self._schedule_batch()
            except Exception:  # a status write that failed on the way: try the pass again
                log.exception("Scheduling pass failed; retrying its pods")
                self._ctx.stats.errors += 1
                self._active.update(dict.fromkeys(keys))
                await asyncio.sleep(_BIND_RETRY)
                self._wake.set()

    async def _schedule_batch(self) -> None:
        pods = self._ctx.pods
        batch = [pods[k] for k in self._active if k in pods]
        self._active.clear()
        batch.sort(
            key=lambda p: (
                -int((p.get("spec") or {}).get("priority") or 0),
                str((p.get("metadata") or {}).get("creationTimestamp") or ""),
                pod_key(p),
            )
        )
        writes = []
        for i, queued in enumerate(batch):
            if i % _YIELD_EVERY == _YIELD_EVERY - 1:
                await asyncio.sleep(0)  # let watch events in during a long batch
            key = pod_key(queued)
            pod = pods.get(key, queued)
            if not self.wants(pod) or self._ctx.cluster.node_of(key):
                continue
            info = PodInfo.from_pod(pod)
            decision = self._ctx.cluster.schedule(info)
            if decision.node is not None:
                self._ctx.cluster.place(info, decision.node)
                writes.append(self._bind(pod, decision.node))
            else:
                self._unschedulable[key] = _fingerprint(pod)
                writes.append(self._mark_unschedulable(pod, decision.message))
        await asyncio.gather(*writes)

    async def _bind(self, pod: Mapping[str, Any], node: str) -> None:
        meta = pod.get("metadata") or {}
        key = pod_key(pod)
        body = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": meta.get("name"), "uid": meta.get("uid")},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node},
        }
        path = PODS.path(meta.get("namespace"), meta.get("name"), "binding")
        try:
            async with self._ctx.writes:
                await self._ctx.client.request("POST", path, body=body)
            self._ctx.stats.bindings += 1
        except (ApiError, aiohttp.ClientError, TimeoutError) as err:
            current = self._ctx.pods.get(key)
            bound = (current or {}).get("spec", {}).get("nodeName")
            if self._ctx.cluster.node_of(key) == node and bound != node:
                self._ctx.cluster.remove(key)
            if not isinstance(err, NotFound | Conflict):
                self._ctx.stats.errors += 1
                log.info("Binding failed", extra=kv(pod=key, node=node, error=str(err)))
            if current is not None and self.wants(current):
                asyncio.get_running_loop().call_later(_BIND_RETRY, self._requeue, key)

    def _requeue(self, key: str) -> None:
        pod = self._ctx.pods.get(key)
        if pod is not None and self.wants(pod):
            self._active[key] = None
            self._wake.set()

    async def _mark_unschedulable(self, pod: Mapping[str, Any], message: str) -> None:
        desired = unschedulable_status(pod, message, self._ctx.clock.now())
        if status_matches(desired, pod):
            return
        if await self._ctx.patch_status(pod, desired) is not None:
            self._ctx.stats.unschedulable += 1
