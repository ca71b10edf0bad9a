"""The simulated kubelets' loop: one :class:`~.kubelet.PodRuntime` per pod bound to one of
the simulator's nodes, synced by a bounded pool of workers.

A sync is level-triggered: it reads the newest cached pod, brings the runtime up to now
(plans, deletion, due transitions), computes the status the kubelet owns and patches it only
when the pod does not already say so; then it asks :class:`~.watch.Wakeups` for the next due
transition. Watch events, injections and wake-ups all just queue the pod's key, and
:class:`~.watch.KeyQueue` guarantees one worker per key, so a runtime is never mutated by two
syncs at once.

Invariants:
- a status write never repeats itself: if the API server answered a write with a pod that
  still differs from what was written (it normalised something), the same write is not sent
  again until the pod changes;
- a pod on a node whose kubelet is down (:meth:`Kubelets.set_node_up`) gets only Ready=False;
  its runtime is frozen and resumes where it left off;
- a container whose image the pod's spec changed (an in-place update) is restarted on the
  new image (:meth:`~.kubelet.PodRuntime.set_images`), at most once per change;
- a deleted pod is removed (DELETE, grace 0, uid precondition) only after its containers
  exited and the terminal status was written; on a node that ignores deletions
  (:attr:`Kubelets.ignoring_deletions`) never;
- a container that newly waits on ErrImagePull, ImagePullBackOff or CrashLoopBackOff gets
  kubelet's Warning event, after the status write that says so (:mod:`~.events`).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from omed.log import kv
from omed_devcluster.sim.context import TERMINAL_PHASES, SimContext, pod_key
from omed_devcluster.sim.events import KubeletEvents
from omed_devcluster.sim.failures import ImageRule, Injection, PodPlans, plan_pod
from omed_devcluster.sim.kubelet import PodRuntime
from omed_devcluster.sim.nodes import PodIPs, host_ip
from omed_devcluster.sim.podstatus import desired_status, status_matches
from omed_devcluster.sim.watch import KeyQueue, Wakeups

log = logging.getLogger("omed_devcluster.simulator")

_RETRY_AFTER_ERROR = 0.5
_DEFAULT_GRACE = 30.0


class Kubelets:
    """The kubelets of all the simulator's nodes."""

    def __init__(
        self,
        ctx: SimContext,
        *,
        image_rules: Sequence[ImageRule],
        on_written: Callable[[dict[str, Any]], None],
    ) -> None:
        self._ctx = ctx
        self._image_rules = tuple(image_rules)
        self._on_written = on_written
        """Called with each pod our writes return, so the cache moves past our own write."""
        self.nodes: dict[str, int] = {}
        self.up: dict[str, bool] = {}
        self.ignoring_deletions: set[str] = set()
        """Nodes whose kubelet runs its pods but never acts on a deletion (a wedged kubelet,
        a container that ignores SIGTERM under an unbounded grace): deleted pods there stay
        Terminating, their containers running, while the node stays Ready."""
        self.injections: list[Injection] = []
        self._ips: dict[str, PodIPs] = {}
        self._runtimes: dict[str, PodRuntime] = {}
        self._written: dict[str, tuple[str, str]] = {}
        self._warned: set[str] = set()
        self.queue = KeyQueue()
        self.wakeups = Wakeups(ctx.clock, self.queue.add)
        self.events = KubeletEvents(ctx.client, clock=ctx.clock)

    # -- nodes and pods -----------------------------------------------------------------------
    def add_node(self, name: str, index: int) -> None:
        self.nodes[name] = index
        self.up.setdefault(name, True)
        self._ips.setdefault(name, PodIPs(index))

    def forget_node(self, name: str) -> None:
        self.nodes.pop(name, None)
        self.up.pop(name, None)

    def set_node_up(self, name: str, up: bool) -> None:
        self.up[name] = up
        for key, rt in self._runtimes.items():
            if rt.node == name:
                self.queue.add(key)

    def observe(self, key: str) -> None:
        self.queue.add(key)

    def forget(self, key: str) -> None:
        """The pod is gone (or replaced): drop its runtime and free its IP."""
        self.wakeups.cancel(key)
        self._written.pop(key, None)
        rt = self._runtimes.pop(key, None)
        if rt is not None:
            self.events.forget(rt.uid)
        if rt is not None and rt.node in self._ips:
            self._ips[rt.node].release(rt.pod_ip)

    def runtime(self, key: str) -> PodRuntime | None:
        return self._runtimes.get(key)

    def touch(self, injection: Injection) -> None:
        """Re-sync the running pods an injection matches."""
        for key in self._runtimes:
            pod = self._ctx.pods.get(key)
            if pod is not None and injection.matches(pod):
                self.queue.add(key)

    # -- workers ------------------------------------------------------------------------------
    async def worker(self) -> None:
        while True:
            key = await self.queue.get()
            try:
                await self._sync(key)
            except asyncio.CancelledError:
                raise
            except Exception as err:
                self._ctx.stats.errors += 1
                log.info("Pod sync failed, retrying", extra=kv(pod=key, error=str(err)))
                self.wakeups.after(key, _RETRY_AFTER_ERROR)
            finally:
                self.queue.done(key)

    def _plans(self, pod: Mapping[str, Any]) -> PodPlans:
        plans = plan_pod(pod, injections=self.injections, image_rules=self._image_rules)
        uid = str((pod.get("metadata") or {}).get("uid"))
        if plans.problems and uid not in self._warned:
            self._warned.add(uid)
            log.warning(
                "Ignoring invalid simulator annotations",
                extra=kv(pod=pod_key(pod), problems=list(plans.problems)),
            )
        return plans

    async def _sync(self, key: str) -> None:
        pod = self._ctx.pods.get(key)
        if pod is None:
            return
        meta = pod.get("metadata") or {}
        node = (pod.get("spec") or {}).get("nodeName") or ""
        if node not in self.nodes:
            return
        now = self._ctx.clock.now()
        deleting = bool(meta.get("deletionTimestamp"))
        rt = self._runtimes.get(key)
        if rt is not None and rt.uid != meta.get("uid"):
            self.forget(key)
            rt = None
        if rt is None:
            if (pod.get("status") or {}).get("phase") in TERMINAL_PHASES:
                if deleting:  # a finished pod has nothing left to stop
                    await self._ctx.remove_pod(pod)
                return
            rt = self._new_runtime(pod, node, now)
        if not self.up.get(node, False):
            rt.freeze(now)  # a dead kubelet writes nothing; the node lifecycle controller
            return  # marks the pod not Ready once the node's Lease runs out
        rt.thaw(now)
        plans = self._plans(pod)
        self._set_images(rt, pod, now, plans.termination_delay)
        rt.set_plans(plans.containers, now)
        if deleting and node not in self.ignoring_deletions:
            grace = float(meta.get("deletionGracePeriodSeconds") or 0)
            rt.begin_termination(now, grace=grace, delay=plans.termination_delay)
        rt.advance(now)
        pod = await self._write(key, pod, desired_status(rt, pod, now=now))
        if rt.terminated and deleting:
            await self._ctx.remove_pod(pod)
            return
        due = rt.next_due()
        if due is not None:
            self.wakeups.after(key, (due - now).total_seconds())

    def _set_images(
        self, rt: PodRuntime, pod: Mapping[str, Any], now: dt.datetime, delay: float | None
    ) -> None:
        """Restart the containers whose image the pod's spec now names differently."""
        spec = pod.get("spec") or {}
        images = {
            str(c.get("name")): str(c.get("image") or "")
            for c in [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]
        }
        grace = spec.get("terminationGracePeriodSeconds")
        grace = float(_DEFAULT_GRACE if grace is None else grace)
        changed = rt.set_images(images, now, grace=grace, delay=delay)
        if changed:
            log.info(
                "Container definition changed, will be restarted",
                extra=kv(pod=pod_key(pod), containers=changed),
            )

    def _new_runtime(self, pod: Mapping[str, Any], node: str, now: dt.datetime) -> PodRuntime:
        key = pod_key(pod)
        status = pod.get("status") or {}
        ips = self._ips[node]
        ip = status.get("podIP")
        if not (ip and ips.claim(ip, key)):
            ip = ips.allocate(key)
        rt = PodRuntime.for_pod(
            pod,
            host_ip=host_ip(self.nodes[node]),
            pod_ip=ip,
            now=now,
            timings=self._ctx.timings,
            plans=self._plans(pod).containers,
        )
        rt.adopt(status, now)
        self._runtimes[key] = rt
        return rt

    async def _write(
        self, key: str, pod: dict[str, Any], desired: dict[str, Any]
    ) -> dict[str, Any]:
        """Patch the owned status fields when they differ; returns the newest pod."""
        if not desired or status_matches(desired, pod):
            return pod
        text = repr(desired)
        version = str((pod.get("metadata") or {}).get("resourceVersion"))
        if self._written.get(key) == (text, version):
            return pod  # the API server normalised our last write; sending it again would loop
        result = await self._ctx.patch_status(pod, desired)
        if result is None:
            return pod
        self._ctx.stats.status_writes += 1
        self._written[key] = (text, str((result.get("metadata") or {}).get("resourceVersion")))
        self._on_written(result)
        node = str((result.get("spec") or {}).get("nodeName") or "")
        await self.events.record(pod, result, node=node)
        self._ctx.stats.events = self.events.written
        return result
