"""The kubelets the test control plane lacks: simulated GPU nodes.

The dev control plane runs the real kube-apiserver, kube-scheduler and
kube-controller-manager, but no kubelet: pods get bound to nodes and then stay Pending
forever. :class:`NodeSimulator` registers N GPU nodes that the real scheduler finds
schedulable (allocatable ``cpu``, ``memory``, ``pods`` and ``nvidia.com/gpu``, Ready, no
not-ready taint, not cordoned) and then acts like each node's kubelet (moving the pods bound
to its nodes to Running and Ready with realistic status, restarting crashed containers,
removing deleted pods after their grace period, :mod:`.sim.kubelet_loop`), with failures
injected on demand (:mod:`.sim.failures`). It never binds a pod nor decides where one goes:
placement, and a pod's PodScheduled=False/Unschedulable condition when nothing fits, are
kube-scheduler's, so a test makes a pod unschedulable the way a cluster would (more GPUs than
any node has free, a ``nodeSelector`` no node matches, a NotReady node's taints).

Invariant: it acts *only through the API server* — list+watch to observe, status patches
and deletes to act — so controllers under test see exactly the watch events a real cluster
would produce. It never writes a status field or condition the kubelet does not own (see
:mod:`.sim.podstatus`), so readiness gates set by others survive its writes; the one
exception is the pod GC's write, below, to a pod whose node is gone.

Scope: it runs every pod in ``namespaces`` (default: all) matching ``pod_selector`` that is
bound to one of its own nodes (labelled ``sim.omed.dev/pool=<node_prefix>``), so several
simulators with distinct prefixes and namespaces share one control plane without acting on
each other's pods. Pods outside that scope are invisible to it, even when the scheduler
binds them to its nodes: they stay Pending there, as on a node whose kubelet ignores them.
The one scheduler places any pod on any node that fits, so simulators running at once for
different namespaces keep their pods apart with node selectors or taints.

When one of its nodes goes away (:meth:`NodeSimulator.remove_node`, or a delete by anyone),
it does at once what the pod GC controller does only after its 40 s quarantine: the pods in
its scope bound to that node are marked Failed (condition DisruptionTarget, reason
``DeletionByPodGC``) and force-deleted. The real pod GC still collects the other orphans.
``remove_node(collect_pods=False)`` leaves them to the real pod GC instead.

Heartbeats: each kubelet renews its node's Lease in ``kube-node-lease`` every
:data:`.sim.nodes.LEASE_RENEW_SECONDS`; the control plane's real node lifecycle controller
reads them.

Faults of stuck deletions: :meth:`NodeSimulator.set_node_ready` (False) stops a node's
kubelet (no more Lease renewals, no status writes), and the real node lifecycle controller,
once its grace period passes, turns the node's conditions Unknown, taints it unreachable and
marks its pods not Ready; deleted pods there stay Terminating.
:meth:`NodeSimulator.remove_node` with ``collect_pods=False`` deletes a node under its pods;
:meth:`NodeSimulator.ignore_deletions` keeps a Ready node's kubelet from acting on
deletions; the ``sim.omed.dev/termination-delay`` annotation makes a healthy kubelet slow to
stop a pod.

Work is event-driven: watch events and timed wake-ups (one sleeping task) put pod keys on a
deduplicating queue served by a bounded pool of workers. Nothing polls per pod.

Run it for a demo: ``python -m omed_devcluster.simulator --kubeconfig PATH --nodes 8``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from omed.clock import Clock, RealClock, rfc3339
from omed.kube.client import KubeClient
from omed.kube.errors import AlreadyExists, NotFound
from omed.kube.resources import LEASES, NODES, PODS
from omed.log import kv
from omed_devcluster.sim.context import (
    TERMINAL_PHASES,
    SimContext,
    SimulatorStats,
    pod_key,
    resource_version,
)
from omed_devcluster.sim.failures import (
    ANNOTATIONS,
    DEFAULT_IMAGE_RULES,
    Failure,
    ImageRule,
    Injection,
)
from omed_devcluster.sim.kubelet import Timings
from omed_devcluster.sim.kubelet_loop import Kubelets
from omed_devcluster.sim.nodes import (
    LEASE_RENEW_SECONDS,
    MAX_PODS_PER_NODE,
    NODE_LEASE_NAMESPACE,
    POOL_LABEL,
    UNREACHABLE_TAINT,
    micro_time,
    node_capacity,
    node_conditions,
    node_lease,
    node_object,
    node_ready,
)
from omed_devcluster.sim.watch import list_watch

log = logging.getLogger("omed_devcluster.simulator")

_LIFECYCLE_TAINTS = (UNREACHABLE_TAINT, "node.kubernetes.io/not-ready")
_STOP_TIMEOUT = 10.0
_VERDICT_TIMEOUT = 60.0
"""How long :meth:`NodeSimulator.set_node_ready` waits for the node lifecycle controller."""

__all__ = [
    "ANNOTATIONS",
    "DEFAULT_IMAGE_RULES",
    "POOL_LABEL",
    "Failure",
    "ImageRule",
    "Injection",
    "NodeSimulator",
    "SimulatorStats",
    "Timings",
    "main",
]


def _report_death(task: asyncio.Task[None]) -> None:
    """A simulator loop must run until :meth:`NodeSimulator.stop` cancels it; one that ends
    otherwise leaves pods never Ready, so say so loudly."""
    if task.cancelled():
        return
    error = task.exception()
    log.error(
        "A simulator loop stopped; pods it handles will not progress",
        extra=kv(task=task.get_coro().__qualname__, error=repr(error)),  # type: ignore[union-attr]
        exc_info=error,
    )


class NodeSimulator:
    """Simulated GPU nodes: their kubelets, acting through the API server."""

    def __init__(
        self,
        client: KubeClient,
        *,
        nodes: int = 4,
        gpus_per_node: int = 8,
        cpu_per_node: str = "192",
        memory_per_node: str = "2Ti",
        pods_per_node: int = 110,
        node_prefix: str = "sim-node",
        node_labels: Mapping[str, str] | None = None,
        node_taints: Sequence[Mapping[str, Any]] = (),
        namespaces: Sequence[str] | None = None,
        pod_selector: str | None = None,
        timings: Timings | None = None,
        image_rules: Sequence[ImageRule] = DEFAULT_IMAGE_RULES,
        concurrency: int = 32,
        delete_nodes_on_stop: bool = True,
        kubelet_version: str = "v1.36.3",
        clock: Clock | None = None,
    ) -> None:
        if not 0 < pods_per_node <= MAX_PODS_PER_NODE:
            raise ValueError(f"pods_per_node must be 1..{MAX_PODS_PER_NODE}")
        self.client = client
        self.timings = timings or Timings()
        self._clock = clock or RealClock()
        self._ctx = SimContext(
            client, clock=self._clock, timings=self.timings, concurrency=concurrency
        )
        self.stats: SimulatorStats = self._ctx.stats
        self._kubelets = Kubelets(self._ctx, image_rules=image_rules, on_written=self._pod_upsert)
        self._node_count = nodes
        self._capacity = node_capacity(
            gpus=gpus_per_node, cpu=cpu_per_node, memory=memory_per_node, pods=pods_per_node
        )
        self._prefix = node_prefix
        self._node_labels = dict(node_labels or {})
        self._node_taints = [dict(t) for t in node_taints]
        self._namespaces = list(namespaces) if namespaces is not None else None
        self._pod_selector = pod_selector
        self._concurrency = concurrency
        self._delete_nodes = delete_nodes_on_stop
        self._kubelet_version = kubelet_version
        self._tasks: list[asyncio.Task[None]] = []
        self._evictions: dict[str, asyncio.Task[None]] = {}
        self._no_pod_gc: set[str] = set()
        """Nodes removed with ``collect_pods=False``: their pods are left as they are."""
        self._registering: set[str] = set()
        """Nodes being created: a node list from before their create must not forget them."""
        self._node_uids: dict[str, str] = {}
        """Each registered node's uid, the owner of its Lease."""
        self._reposting: set[str] = set()
        self._reposts: set[asyncio.Task[None]] = set()
        """Node status posts under way (:meth:`_node_seen`)."""
        self._started = False

    # -- lifecycle ----------------------------------------------------------------------------
    async def __aenter__(self) -> NodeSimulator:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    def queues(self) -> dict[str, int]:
        """How much work waits, for diagnostics: pods known to the simulator (bound or not)
        and pod keys queued for the kubelets."""
        return {
            "pods_cached": len(self._ctx.pods),
            "kubelet_queued": len(self._kubelets.queue),
        }

    @property
    def node_names(self) -> list[str]:
        """The simulator's nodes, in index order."""
        nodes = self._kubelets.nodes
        return sorted(nodes, key=nodes.__getitem__)

    async def start(self, *, timeout: float = 60.0) -> None:
        """Register the nodes, list and watch, then start running the pods bound to them."""
        if self._started:
            return
        self._started = True
        await asyncio.gather(*(self._register_node(i) for i in range(self._node_count)))
        synced = [asyncio.Event()]
        self._spawn(
            list_watch(
                self.client,
                NODES,
                _NodeEvents(self),
                label_selector=f"{POOL_LABEL}={self._prefix}",
                synced=synced[0],
            )
        )
        for namespace in self._namespaces if self._namespaces is not None else [None]:
            synced.append(asyncio.Event())
            self._spawn(
                list_watch(
                    self.client,
                    PODS,
                    _PodEvents(self),
                    namespace=namespace,
                    label_selector=self._pod_selector,
                    synced=synced[-1],
                )
            )
        try:
            await asyncio.wait_for(asyncio.gather(*(e.wait() for e in synced)), timeout)
        except TimeoutError:
            await self.stop()
            raise
        self._spawn(self._kubelets.wakeups.run())
        self._spawn(self._heartbeats())
        for _ in range(self._concurrency):
            self._spawn(self._kubelets.worker())
        log.info(
            "Node simulator started",
            extra=kv(nodes=len(self.node_names), prefix=self._prefix, namespaces=self._namespaces),
        )

    async def stop(self) -> None:
        """Stop acting; delete the nodes unless ``delete_nodes_on_stop`` is False."""
        tasks = self._tasks + list(self._evictions.values()) + list(self._reposts)
        self._tasks, self._evictions = [], {}
        for task in tasks:
            task.cancel()
        if tasks:
            _, pending = await asyncio.wait(tasks, timeout=_STOP_TIMEOUT)
            if pending:  # a task that swallowed its cancel; never hang the caller on it
                log.warning(
                    "Node simulator tasks did not stop",
                    extra=kv(tasks=[t.get_coro() for t in pending]),
                )
        if self._started and self._delete_nodes:
            for name in self.node_names:
                with contextlib.suppress(NotFound):
                    await self.client.delete(NODES, name)
        self._started = False

    def _spawn(self, coro: Any) -> None:
        task = asyncio.create_task(coro)
        task.add_done_callback(_report_death)
        self._tasks.append(task)

    # -- nodes --------------------------------------------------------------------------------
    async def _register_node(
        self,
        index: int,
        *,
        name: str | None = None,
        capacity: Mapping[str, str] | None = None,
        labels: Mapping[str, str] | None = None,
    ) -> str:
        name = name or f"{self._prefix}-{index}"
        body = node_object(
            name=name,
            index=index,
            pool=self._prefix,
            capacity=capacity or self._capacity,
            labels={**self._node_labels, **(labels or {})},
            taints=self._node_taints,
            kubelet_version=self._kubelet_version,
            now=self._clock.now(),
        )
        # The kubelet is up before its node exists: a pod bound to the node as soon as the
        # scheduler sees it must find a kubelet to run it.
        self._kubelets.add_node(name, index)
        self._registering.add(name)
        try:
            try:
                node = await self.client.create(NODES, body)
            except AlreadyExists:  # left by an earlier run: take it over
                meta = {"metadata": {"labels": body["metadata"]["labels"]}}
                await self.client.patch(NODES, name, meta)
                node = {}
            if not (node.get("status") or {}).get("allocatable"):
                # An adopted node's status is an earlier run's (NotReady, say): post ours.
                status = {"status": body["status"]}
                node = await self.client.patch(NODES, name, status, subresource="status")
            taints = (node.get("spec") or {}).get("taints") or []
            if any(t.get("key") in _LIFECYCLE_TAINTS for t in taints):
                # The TaintNodesByCondition admission plugin taints every new node not-ready;
                # the node lifecycle controller, absent here, lifts it once the node is Ready,
                # and only then does kube-scheduler place pods on it.
                kept = [t for t in taints if t.get("key") not in _LIFECYCLE_TAINTS]
                await self.client.patch(NODES, name, {"spec": {"taints": kept or None}})
            if not node.get("metadata"):
                node = await self.client.get(NODES, name)
            self._node_uids[name] = str(node["metadata"]["uid"])
            await self._renew_lease(name)
        except BaseException:
            self._kubelets.forget_node(name)
            raise
        finally:
            self._registering.discard(name)
        for key, pod in self._ctx.pods.items():
            if (pod.get("spec") or {}).get("nodeName") == name:
                self._kubelets.observe(key)
        return name

    def _forget_node(self, name: str) -> None:
        """The node object is gone: do what the pod GC does with the pods bound to it."""
        if name not in self._kubelets.nodes or name in self._registering:
            return
        self._kubelets.forget_node(name)
        self._node_uids.pop(name, None)
        if name in self._no_pod_gc:
            return  # left to omed, or to the real pod GC after its quarantine
        for pod in list(self._ctx.pods.values()):
            if (pod.get("spec") or {}).get("nodeName") == name:
                self._spawn(self._collect_orphan(pod))

    async def _collect_orphan(self, pod: Mapping[str, Any]) -> None:
        """The pod GC's handling of a pod whose node no longer exists: phase Failed with a
        DisruptionTarget condition, then a delete with grace 0. The real pod GC does the
        same after a 40 s quarantine; a test should not wait that long."""
        try:
            if (pod.get("status") or {}).get("phase") not in TERMINAL_PHASES:
                condition = {
                    "type": "DisruptionTarget",
                    "status": "True",
                    "reason": "DeletionByPodGC",
                    "message": "PodGC: node no longer exists",
                    "lastTransitionTime": rfc3339(self._clock.now()),
                }
                status = {"phase": "Failed", "conditions": [condition]}
                if await self._ctx.patch_status(pod, status) is None:
                    return  # gone or replaced already
            await self._ctx.remove_pod(pod)
        except Exception as err:  # the real pod GC collects it later
            self._ctx.stats.errors += 1
            log.info("Deleting an orphaned pod failed", extra=kv(pod=pod_key(pod), error=str(err)))

    def _require_node(self, name: str) -> None:
        if name not in self._kubelets.nodes:
            raise KeyError(f"{name!r} is not one of this simulator's nodes")

    async def add_node(
        self,
        *,
        name: str | None = None,
        gpus: int | None = None,
        labels: Mapping[str, str] | None = None,
    ) -> str:
        """Register one more node (the next index); returns its name."""
        index = max(self._kubelets.nodes.values(), default=-1) + 1
        capacity = dict(self._capacity)
        if gpus is not None:
            capacity["nvidia.com/gpu"] = str(gpus)
        return await self._register_node(index, name=name, capacity=capacity, labels=labels)

    async def remove_node(self, name: str, *, collect_pods: bool = True) -> None:
        """Delete a node; the pods in scope bound to it are marked Failed and force-deleted
        at once, as the pod GC does (after its quarantine) with orphaned pods.

        ``collect_pods=False`` deletes only the node object, as when a machine is removed
        from the cluster under its pods: they keep their last status, and a deleted one stays
        Terminating (no kubelet will confirm it) until someone force-deletes it, or the real
        pod GC does after its 40 s quarantine."""
        self._require_node(name)
        if not collect_pods:
            self._no_pod_gc.add(name)
        with contextlib.suppress(NotFound):
            await self.client.delete(NODES, name)
        self._forget_node(name)

    async def set_node_ready(self, name: str, ready: bool, *, wait: bool = True) -> None:
        """Stop or resume a node's kubelet; the real node lifecycle controller reports it.

        NotReady: the kubelet stops renewing the node's Lease and writing anything; its pods'
        containers freeze and deleted pods there stay Terminating, as with a real dead
        kubelet. Once its grace period (:data:`.controlplane.NODE_MONITOR_GRACE_SECONDS` in
        the test plane) passes, the controller turns the node's conditions ``Unknown``
        (``NodeStatusUnknown``), taints it ``node.kubernetes.io/unreachable`` (so
        kube-scheduler places nothing new there) and marks its pods' Ready condition False.
        With ``Timings.not_ready_eviction`` set, its pods are force-deleted after that long.
        Ready again: the kubelet renews its Lease, posts Ready conditions, and the controller
        lifts the taints; the pods carry on.

        ``wait`` (the default) returns only once the controller's verdict is on the node
        (NotReady: conditions not Ready and the unreachable ``NoSchedule`` taint; Ready: no
        lifecycle taint left)."""
        self._require_node(name)
        self._kubelets.set_node_up(name, ready)
        if ready:
            await self._renew_lease(name)
            await self._post_ready(name)
        eviction = self._evictions.pop(name, None)
        if eviction is not None:
            eviction.cancel()
        if not ready and self.timings.not_ready_eviction is not None:
            self._evictions[name] = asyncio.create_task(
                self._evict_later(name, self.timings.not_ready_eviction)
            )
        if wait:
            await self._await_verdict(name, ready)

    async def _await_verdict(self, name: str, ready: bool) -> None:
        deadline = asyncio.get_running_loop().time() + _VERDICT_TIMEOUT
        while True:
            node = await self.client.get(NODES, name)
            taints = (node.get("spec") or {}).get("taints") or []
            lifecycle = [t for t in taints if t.get("key") in _LIFECYCLE_TAINTS]
            if ready and not lifecycle and node_ready(node):
                return
            # The NoSchedule taint follows the Ready condition (from the controller's
            # node-update workers, so it can land after the NoExecute one); the NoExecute one
            # is rate-limited and held back while every node of a zone is lost (the
            # controller's disruption mode), as in a one-node test cluster. The verdict is the
            # NoSchedule taint: it is the one kube-scheduler honours, and it always comes.
            unreachable = any(
                t.get("key") == UNREACHABLE_TAINT and t.get("effect") == "NoSchedule"
                for t in taints
            )
            if not ready and unreachable and not node_ready(node):
                return
            if asyncio.get_running_loop().time() > deadline:
                raise TimeoutError(
                    f"the node lifecycle controller did not mark {name} "
                    f"{'Ready' if ready else 'unreachable'} within {_VERDICT_TIMEOUT:.0f} s: "
                    f"taints {taints}"
                )
            await asyncio.sleep(0.25)

    async def _post_ready(self, name: str) -> None:
        """The kubelet's node status: Ready conditions, with the transition at now."""
        now = self._clock.now()
        conditions = node_conditions(now=now, since=now)
        await self.client.patch(
            NODES, name, {"status": {"conditions": conditions}}, subresource="status"
        )

    def _node_seen(self, node: Mapping[str, Any]) -> None:
        """A node changed: if its kubelet is up but the node lifecycle controller judged it
        lost (Leases that could not land while the API server was away, say), post Ready
        again, as a kubelet does when the status it reads differs from its own; the
        controller then lifts the taints."""
        name = str((node.get("metadata") or {}).get("name") or "")
        if not self._kubelets.up.get(name) or name not in self._node_uids or node_ready(node):
            return
        if name in self._reposting:
            return
        self._reposting.add(name)
        task = asyncio.create_task(self._repost(name))
        self._reposts.add(task)
        task.add_done_callback(self._reposts.discard)

    async def _repost(self, name: str) -> None:
        try:
            await self._renew_lease(name)
            await self._post_ready(name)
        except Exception as err:  # the next node event tries again
            self._ctx.stats.errors += 1
            log.info("Posting node status failed", extra=kv(node=name, error=str(err)))
        finally:
            self._reposting.discard(name)

    async def _renew_lease(self, name: str) -> None:
        """One heartbeat: renew the node's Lease, creating it the first time."""
        now = self._clock.now()
        try:
            await self.client.patch(
                LEASES,
                name,
                {"spec": {"renewTime": micro_time(now)}},
                namespace=NODE_LEASE_NAMESPACE,
            )
        except NotFound:
            body = node_lease(name=name, uid=self._node_uids[name], now=now)
            with contextlib.suppress(AlreadyExists):
                await self.client.create(LEASES, body, namespace=NODE_LEASE_NAMESPACE)

    async def _heartbeats(self) -> None:
        """Renew the Lease of every node whose kubelet is up, every few seconds."""
        while True:
            await self._clock.sleep(LEASE_RENEW_SECONDS)
            alive = [n for n, up in self._kubelets.up.items() if up and n in self._node_uids]
            results = await asyncio.gather(
                *(self._renew_lease(n) for n in alive), return_exceptions=True
            )
            for node, result in zip(alive, results, strict=True):
                if isinstance(result, NotFound):
                    continue  # the node went; its Lease with it
                if isinstance(result, BaseException):
                    self._ctx.stats.errors += 1
                    log.info("Renewing a node Lease failed", extra=kv(node=node, error=str(result)))

    def ignore_deletions(self, name: str, ignore: bool = True) -> None:
        """Make a node's kubelet ignore pod deletions (or act on them again): the node stays
        Ready and its pods run, but a deleted pod stays Terminating with its containers
        running, as under a kubelet that never processes the deletion."""
        self._require_node(name)
        if ignore:
            self._kubelets.ignoring_deletions.add(name)
        else:
            self._kubelets.ignoring_deletions.discard(name)
        self._kubelets.set_node_up(name, self._kubelets.up.get(name, True))

    async def _evict_later(self, name: str, delay: float) -> None:
        await self._clock.sleep(delay)
        if self._kubelets.up.get(name, True):
            return
        pods = [p for p in self._ctx.pods.values() if (p.get("spec") or {}).get("nodeName") == name]
        log.info("Evicting pods from NotReady node", extra=kv(node=name, pods=len(pods)))
        await asyncio.gather(*(self._ctx.remove_pod(p) for p in pods))

    # -- failure injection --------------------------------------------------------------------
    def inject(
        self,
        namespace: str,
        target: str | Mapping[str, Any],
        failure: Failure | str,
        *,
        crash_after: float | None = None,
        exit_code: int = 1,
        containers: Sequence[str] | None = None,
    ) -> Injection:
        """Make pods fail. ``target`` is a pod name or a label selector (``{"app": "x"}`` or a
        ``metav1.LabelSelector``); it applies to matching pods now and later, and the latest
        matching injection wins over annotations and image rules. ``failure`` is a
        :class:`Failure` or its name; ``Failure.NONE`` makes pods healthy. Returns a handle
        for :meth:`clear_injection`."""
        injection = Injection(
            namespace=namespace,
            failure=Failure.parse(failure),
            name=target if isinstance(target, str) else None,
            selector=None if isinstance(target, str) else dict(target),
            crash_after=crash_after,
            exit_code=exit_code,
            containers=frozenset(containers) if containers is not None else None,
        )
        self._kubelets.injections.append(injection)
        self._kubelets.touch(injection)
        return injection

    def clear_injection(self, injection: Injection) -> None:
        with contextlib.suppress(ValueError):
            self._kubelets.injections.remove(injection)
        self._kubelets.touch(injection)

    def clear_injections(self) -> None:
        old, self._kubelets.injections[:] = list(self._kubelets.injections), []
        for injection in old:
            self._kubelets.touch(injection)

    async def restart_container(
        self,
        namespace: str,
        pod: str,
        container: str | None = None,
        *,
        exit_code: int = 137,
        reason: str = "Error",
    ) -> int:
        """Make a running container exit and restart at once (default: the first container).

        Returns its new ``restartCount``; the status write follows within milliseconds.
        Raises LookupError when the pod or container is not running on this simulator.
        """
        key = f"{namespace}/{pod}"
        rt = self._kubelets.runtime(key)
        if rt is None:
            raise LookupError(f"pod {key} is not running on this simulator's nodes")
        name = container or (rt.containers[0].name if rt.containers else "")
        count = rt.kill(name, self._clock.now(), exit_code=exit_code, reason=reason)
        self._kubelets.observe(key)
        return count

    # -- pod events ---------------------------------------------------------------------------
    def _pod_upsert(self, pod: dict[str, Any]) -> None:
        key = pod_key(pod)
        pods = self._ctx.pods
        old = pods.get(key)
        if old is not None:
            new_rv, old_rv = resource_version(pod), resource_version(old)
            if new_rv is not None and old_rv is not None and new_rv < old_rv:
                return  # older than the answer to a write of ours
            if (old.get("metadata") or {}).get("uid") != (pod.get("metadata") or {}).get("uid"):
                self._pod_gone(key)
        pods[key] = pod
        if (pod.get("spec") or {}).get("nodeName") in self._kubelets.nodes:
            self._kubelets.observe(key)

    def _pod_delete(self, pod: Mapping[str, Any]) -> None:
        key = pod_key(pod)
        cached = self._ctx.pods.get(key)
        uid = (pod.get("metadata") or {}).get("uid")
        if cached is not None and (cached.get("metadata") or {}).get("uid") == uid:
            self._pod_gone(key)

    def _pods_replace(self, namespace: str | None, items: list[dict[str, Any]]) -> None:
        present = {pod_key(p) for p in items}
        prefix = f"{namespace}/" if namespace is not None else ""
        for key in [k for k in self._ctx.pods if k.startswith(prefix) and k not in present]:
            self._pod_gone(key)
        for pod in items:
            self._pod_upsert(pod)

    def _pod_gone(self, key: str) -> None:
        self._ctx.pods.pop(key, None)
        self._kubelets.forget(key)


class _PodEvents:
    def __init__(self, sim: NodeSimulator) -> None:
        self._sim = sim

    def replace(self, namespace: str | None, items: list[dict[str, Any]]) -> None:
        self._sim._pods_replace(namespace, items)

    def upsert(self, obj: dict[str, Any]) -> None:
        self._sim._pod_upsert(obj)

    def delete(self, obj: dict[str, Any]) -> None:
        self._sim._pod_delete(obj)


class _NodeEvents:
    def __init__(self, sim: NodeSimulator) -> None:
        self._sim = sim

    def replace(self, namespace: str | None, items: list[dict[str, Any]]) -> None:
        names = {(n.get("metadata") or {}).get("name") for n in items}
        for name in [n for n in self._sim.node_names if n not in names]:
            self._sim._forget_node(name)

    def upsert(self, obj: dict[str, Any]) -> None:
        self._sim._node_seen(obj)

    def delete(self, obj: dict[str, Any]) -> None:
        self._sim._forget_node((obj.get("metadata") or {}).get("name") or "")


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m omed_devcluster.simulator``: see :mod:`omed_devcluster.sim.cli`."""
    from omed_devcluster.sim.cli import main as cli_main

    return cli_main(argv)


if __name__ == "__main__":
    sys.exit(main())
