"""The simulated scheduler's pure core: which of the simulator's nodes a pod fits, and why not.

It plays the filter plugins of kube-scheduler's default profile that matter for GPU serving,
in kube-scheduler's order, and reports failures with kube-scheduler's wording, so an
Unschedulable condition reads like the real one ("0/8 nodes are available: 8 Insufficient
nvidia.com/gpu."):

NodeUnschedulable, TaintToleration, NodeAffinity (``nodeSelector`` and the required node
affinity), NodeResourcesFit (sum of container requests, limits standing in for missing
requests; the largest init container; ``spec.overhead``; one pod slot), and InterPodAffinity
(required pod affinity and anti-affinity of the incoming pod on any topology key, and the
required anti-affinity of pods already placed).

Invariant: :class:`ClusterState` counts a pod against exactly one node from the moment it is
*placed* (bound, or assumed while its binding is in flight) until it is *removed* (deleted
or terminal), so a batch of decisions made before the watch catches up never overcommits a
node.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from omed.devcluster.sim.quantity import milli
from omed.devcluster.sim.selectors import (
    match_label_selector,
    match_node_selector,
    untolerated_taint,
)

GPU = "nvidia.com/gpu"
PODS = "pods"
HOSTNAME_LABEL = "kubernetes.io/hostname"
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"

REASON_UNSCHEDULABLE_NODE = "node(s) were unschedulable"
REASON_NODE_AFFINITY = "node(s) didn't match Pod's node affinity/selector"
REASON_TOO_MANY_PODS = "Too many pods"
REASON_POD_AFFINITY = "node(s) didn't match pod affinity rules"
REASON_POD_ANTI_AFFINITY = "node(s) didn't match pod anti-affinity rules"
REASON_EXISTING_ANTI_AFFINITY = "node(s) didn't satisfy existing pods anti-affinity rules"
NO_NODES_MESSAGE = "no nodes available to schedule pods"

DEFAULT_MILLI_CPU_REQUEST = 100
"""What kube-scheduler's scoring counts for a container that requests no CPU (100m)."""
DEFAULT_MEMORY_REQUEST = 200 * 1024 * 1024 * 1000
"""... and no memory (200Mi), in milli-units like every amount here."""


def container_requests(container: Mapping[str, Any]) -> dict[str, int]:
    """One container's requests in milli-units; a limit stands in for a missing request."""
    resources = container.get("resources") or {}
    requests = dict(resources.get("requests") or {})
    for name, value in (resources.get("limits") or {}).items():
        requests.setdefault(name, value)
    return {name: milli(value) for name, value in requests.items()}


def _pod_sum(
    spec: Mapping[str, Any], per_container: Callable[[Mapping[str, Any]], Mapping[str, int]]
) -> dict[str, int]:
    """A pod's amounts as kube-scheduler adds them up, each container counted by
    ``per_container``: regular containers and sidecars (init containers with
    ``restartPolicy: Always``) add up; each resource is then at least the largest regular
    init container's amount plus the sidecars started before it (init containers run one at
    a time, before the others); ``spec.overhead`` is added on top."""
    total: Counter[str] = Counter()
    for container in spec.get("containers") or []:
        total.update(per_container(container))
    init_peak: Counter[str] = Counter()
    sidecars: Counter[str] = Counter()
    for container in spec.get("initContainers") or []:
        requests = per_container(container)
        if container.get("restartPolicy") == "Always":
            sidecars.update(requests)
            continue
        for name, value in requests.items():
            init_peak[name] = max(init_peak[name], value + sidecars[name])
    total.update(sidecars)
    result = {name: max(total[name], init_peak[name]) for name in total.keys() | init_peak}
    for name, value in (spec.get("overhead") or {}).items():
        result[name] = result.get(name, 0) + milli(value)
    return result


def pod_requests(spec: Mapping[str, Any]) -> dict[str, int]:
    """What a pod occupies on a node, as kube-scheduler computes it (:func:`_pod_sum` of
    the containers' requests), plus one pod slot."""
    result = _pod_sum(spec, container_requests)
    result[PODS] = 1000
    return {name: value for name, value in result.items() if value}


def _nonzero(container: Mapping[str, Any]) -> dict[str, int]:
    requests = container_requests(container)
    return {
        "cpu": requests.get("cpu") or DEFAULT_MILLI_CPU_REQUEST,
        "memory": requests.get("memory") or DEFAULT_MEMORY_REQUEST,
    }


def scored_requests(spec: Mapping[str, Any]) -> dict[str, int]:
    """CPU and memory as kube-scheduler's scoring counts them (``NonZeroRequested``): summed
    as :func:`pod_requests` sums them, but a container without a request counts 100m CPU
    and 200Mi memory, so pods that request nothing still spread instead of piling onto one
    node."""
    summed = _pod_sum(spec, _nonzero)
    return {name: summed.get(name, 0) for name in ("cpu", "memory")}


@dataclasses.dataclass(frozen=True)
class AffinityTerm:
    """A required ``PodAffinityTerm``: which pods (selector, namespaces) in which domain."""

    selector: Mapping[str, Any] | None
    topology_key: str
    namespaces: frozenset[str] | None
    """The namespaces the term looks in; ``None`` means all of them."""
    namespace_selector: Mapping[str, Any] | None = None

    @classmethod
    def from_api(cls, term: Mapping[str, Any], own_namespace: str) -> AffinityTerm:
        listed = frozenset(term.get("namespaces") or ())
        ns_selector = term.get("namespaceSelector")
        if (
            ns_selector is not None
            and not ns_selector.get("matchLabels")
            and not (ns_selector.get("matchExpressions"))
        ):
            namespaces: frozenset[str] | None = None  # an empty namespaceSelector: everywhere
            ns_selector = None
        elif ns_selector is None and not listed:
            namespaces = frozenset({own_namespace})
        else:
            namespaces = listed
        return cls(
            selector=term.get("labelSelector"),
            topology_key=term.get("topologyKey") or HOSTNAME_LABEL,
            namespaces=namespaces,
            namespace_selector=ns_selector,
        )

    def covers_namespace(self, namespace: str) -> bool:
        if self.namespaces is None or namespace in self.namespaces:
            return True
        # Namespace labels are not watched; the label every namespace carries stands in.
        return self.namespace_selector is not None and match_label_selector(
            self.namespace_selector, {NAMESPACE_NAME_LABEL: namespace}
        )

    def matches(self, pod: PodInfo) -> bool:
        return self.covers_namespace(pod.namespace) and match_label_selector(
            self.selector, pod.labels
        )


def _required_terms(affinity: Mapping[str, Any], kind: str, namespace: str) -> tuple[Any, ...]:
    block = affinity.get(kind) or {}
    terms = block.get("requiredDuringSchedulingIgnoredDuringExecution") or []
    return tuple(AffinityTerm.from_api(t, namespace) for t in terms)


@dataclasses.dataclass(frozen=True)
class PodInfo:
    """What scheduling needs to know about one pod."""

    namespace: str
    name: str
    labels: Mapping[str, str]
    requests: Mapping[str, int]
    scored: Mapping[str, int] = dataclasses.field(default_factory=dict)
    """CPU and memory for scoring (:func:`scored_requests`)."""
    node_selector: Mapping[str, str] = dataclasses.field(default_factory=dict)
    node_affinity: Mapping[str, Any] | None = None
    tolerations: tuple[Mapping[str, Any], ...] = ()
    affinity: tuple[AffinityTerm, ...] = ()
    anti_affinity: tuple[AffinityTerm, ...] = ()
    priority: int = 0
    created: str = ""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @classmethod
    def from_pod(cls, pod: Mapping[str, Any]) -> PodInfo:
        meta = pod.get("metadata") or {}
        spec = pod.get("spec") or {}
        namespace = meta.get("namespace") or "default"
        affinity = spec.get("affinity") or {}
        node_affinity = (affinity.get("nodeAffinity") or {}).get(
            "requiredDuringSchedulingIgnoredDuringExecution"
        )
        return cls(
            namespace=namespace,
            name=meta.get("name") or "",
            labels=dict(meta.get("labels") or {}),
            requests=pod_requests(spec),
            scored=scored_requests(spec),
            node_selector=dict(spec.get("nodeSelector") or {}),
            node_affinity=node_affinity,
            tolerations=tuple(spec.get("tolerations") or ()),
            affinity=_required_terms(affinity, "podAffinity", namespace),
            anti_affinity=_required_terms(affinity, "podAntiAffinity", namespace),
            priority=int(spec.get("priority") or 0),
            created=str(meta.get("creationTimestamp") or ""),
        )


@dataclasses.dataclass
class NodeInfo:
    """One simulated node as the scheduler sees it, with the pods placed on it."""

    name: str
    index: int
    labels: dict[str, str]
    allocatable: dict[str, int]
    taints: list[Mapping[str, Any]] = dataclasses.field(default_factory=list)
    unschedulable: bool = False
    ready: bool = True
    requested: Counter[str] = dataclasses.field(default_factory=Counter)
    scored: Counter[str] = dataclasses.field(default_factory=Counter)
    """The placed pods' :attr:`PodInfo.scored` amounts."""
    pods: dict[str, PodInfo] = dataclasses.field(default_factory=dict)

    def free(self, resource: str) -> int:
        return self.allocatable.get(resource, 0) - self.requested[resource]


@dataclasses.dataclass(frozen=True)
class Decision:
    """Where a pod goes, or why it goes nowhere (the Unschedulable condition's message)."""

    node: str | None
    message: str = ""


@dataclasses.dataclass
class _AffinityContext:
    """Per-pod precomputation, so each node check is O(1) in the number of placed pods."""

    own_anti: list[tuple[str, set[str]]]
    own_affinity: list[tuple[str, set[str] | None]]
    """Per affinity term: topology values with a match, or None when the pod may go anywhere
    (no pod matches yet but the pod matches its own term: the first of a group)."""
    existing_anti: set[tuple[str, str]]


class ClusterState:
    """The simulator's nodes and the pods placed on them."""

    def __init__(self) -> None:
        self.nodes: dict[str, NodeInfo] = {}
        self._placement: dict[str, str] = {}
        self._with_anti_affinity: set[str] = set()
        """Placed pods with required anti-affinity: the only ones every decision must visit."""

    # -- nodes --------------------------------------------------------------------------------
    def set_node(self, node: NodeInfo) -> None:
        """Add a node, or update one keeping the pods placed on it."""
        old = self.nodes.get(node.name)
        if old is not None:
            node.pods = old.pods
            node.requested = old.requested
            node.scored = old.scored
        self.nodes[node.name] = node

    def remove_node(self, name: str) -> list[str]:
        """Forget a node; returns the keys of the pods that were placed on it."""
        node = self.nodes.pop(name, None)
        if node is None:
            return []
        for key in node.pods:
            self._placement.pop(key, None)
            self._with_anti_affinity.discard(key)
        return list(node.pods)

    # -- pods ---------------------------------------------------------------------------------
    def place(self, pod: PodInfo, node_name: str) -> None:
        """Count ``pod`` against ``node_name`` (moving it if it was counted elsewhere)."""
        self.remove(pod.key)
        node = self.nodes.get(node_name)
        if node is None:
            return
        node.pods[pod.key] = pod
        node.requested.update(pod.requests)
        node.scored.update(pod.scored)
        self._placement[pod.key] = node_name
        if pod.anti_affinity:
            self._with_anti_affinity.add(pod.key)

    def remove(self, key: str) -> str | None:
        """Stop counting a pod; returns the node it was on."""
        node_name = self._placement.pop(key, None)
        self._with_anti_affinity.discard(key)
        if node_name is None:
            return None
        node = self.nodes.get(node_name)
        if node is not None:
            pod = node.pods.pop(key, None)
            if pod is not None:
                node.requested.subtract(pod.requests)
                node.scored.subtract(pod.scored)
        return node_name

    def node_of(self, key: str) -> str | None:
        return self._placement.get(key)

    def placed(self) -> Iterable[tuple[NodeInfo, PodInfo]]:
        for node in self.nodes.values():
            for pod in node.pods.values():
                yield node, pod

    def _placed_with_anti_affinity(self) -> Iterable[tuple[NodeInfo, PodInfo]]:
        for key in self._with_anti_affinity:
            node = self.nodes[self._placement[key]]
            yield node, node.pods[key]

    # -- deciding -----------------------------------------------------------------------------
    def schedule(self, pod: PodInfo) -> Decision:
        """The best node for ``pod``, or why none fits.

        Best is least allocated, then lowest index: a pod that requests GPUs goes where the
        fewest GPUs are taken, then by CPU and memory; any other pod by CPU and memory alone
        (kube-scheduler's default scoring counts only those two), so pods without GPUs do not
        crowd the node whose GPUs happen to be free.
        """
        nodes = sorted(self.nodes.values(), key=lambda n: n.index)
        if not nodes:
            return Decision(None, NO_NODES_MESSAGE)
        context = self._affinity_context(pod)
        reasons: Counter[str] = Counter()
        best: tuple[tuple[float, float, int], NodeInfo] | None = None
        for node in nodes:
            failed = self.filter(pod, node, context)
            if failed:
                reasons.update(failed)
                continue
            gpu = _after(node, pod, GPU) if pod.requests.get(GPU) else 0.0
            score = (gpu, _cpu_memory_after(node, pod), node.index)
            if best is None or score < best[0]:
                best = (score, node)
        if best is not None:
            return Decision(best[1].name)
        detail = ", ".join(f"{count} {reason}" for reason, count in sorted(reasons.items()))
        return Decision(None, f"0/{len(nodes)} nodes are available: {detail}.")

    def filter(
        self, pod: PodInfo, node: NodeInfo, context: _AffinityContext | None = None
    ) -> list[str]:
        """The reasons ``node`` cannot take ``pod`` (first failing plugin only), or []."""
        if node.unschedulable and not any(
            t.get("key") == "node.kubernetes.io/unschedulable" and t.get("operator") == "Exists"
            for t in pod.tolerations
        ):
            return [REASON_UNSCHEDULABLE_NODE]
        taint = untolerated_taint(node.taints, pod.tolerations)
        if taint is not None:
            return [
                f"node(s) had untolerated taint {{{taint.get('key', '')}: "
                f"{taint.get('value', '')}}}"
            ]
        if any(node.labels.get(k) != v for k, v in pod.node_selector.items()) or (
            pod.node_affinity is not None
            and not match_node_selector(pod.node_affinity, name=node.name, labels=node.labels)
        ):
            return [REASON_NODE_AFFINITY]
        insufficient = []
        if pod.requests.get(PODS, 0) > node.free(PODS):
            insufficient.append(REASON_TOO_MANY_PODS)
        for resource, amount in sorted(pod.requests.items()):
            if resource != PODS and amount > node.free(resource):
                insufficient.append(f"Insufficient {resource}")
        if insufficient:
            return insufficient
        ctx = context or self._affinity_context(pod)
        for key, values in ctx.own_affinity:
            if values is not None and node.labels.get(key) not in values:
                return [REASON_POD_AFFINITY]
        for key, values in ctx.own_anti:
            if node.labels.get(key) in values:
                return [REASON_POD_ANTI_AFFINITY]
        for key, value in ctx.existing_anti:
            if node.labels.get(key) == value:
                return [REASON_EXISTING_ANTI_AFFINITY]
        return []

    def _affinity_context(self, pod: PodInfo) -> _AffinityContext:
        own_anti: list[tuple[str, set[str]]] = [(t.topology_key, set()) for t in pod.anti_affinity]
        affinity_values: list[set[str]] = [set() for _ in pod.affinity]
        existing_anti: set[tuple[str, str]] = set()
        if pod.affinity or pod.anti_affinity:
            candidates: Iterable[tuple[NodeInfo, PodInfo]] = self.placed()
        else:
            candidates = self._placed_with_anti_affinity()
        for node, other in candidates:
            if other.key == pod.key:
                continue
            for term, (key, values) in zip(pod.anti_affinity, own_anti, strict=True):
                if key in node.labels and term.matches(other):
                    values.add(node.labels[key])
            for term, found in zip(pod.affinity, affinity_values, strict=True):
                if term.topology_key in node.labels and term.matches(other):
                    found.add(node.labels[term.topology_key])
            for term in other.anti_affinity:
                if term.topology_key in node.labels and term.matches(pod):
                    existing_anti.add((term.topology_key, node.labels[term.topology_key]))
        own_affinity: list[tuple[str, set[str] | None]] = []
        for term, found in zip(pod.affinity, affinity_values, strict=True):
            # kube-scheduler lets the first pod of a self-affine group go anywhere.
            anywhere = not found and term.matches(pod)
            own_affinity.append((term.topology_key, None if anywhere else found))
        return _AffinityContext(own_anti, own_affinity, existing_anti)


def _after(node: NodeInfo, pod: PodInfo, resource: str) -> float:
    capacity = node.allocatable.get(resource, 0)
    if capacity <= 0:
        return 0.0
    return (node.requested[resource] + pod.requests.get(resource, 0)) / capacity


def _scored_after(node: NodeInfo, pod: PodInfo, resource: str) -> float:
    capacity = node.allocatable.get(resource, 0)
    if capacity <= 0:
        return 0.0
    return (node.scored[resource] + pod.scored.get(resource, 0)) / capacity


def _cpu_memory_after(node: NodeInfo, pod: PodInfo) -> float:
    return (_scored_after(node, pod, "cpu") + _scored_after(node, pod, "memory")) / 2
