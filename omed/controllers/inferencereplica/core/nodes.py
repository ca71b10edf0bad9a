"""Node facts: whether the node a pod is bound to still runs it.

Why: a pod's own conditions say its node stopped reporting only once the node lifecycle
controller marks it (Ready False, reason NodeNotReady), and a pod on a deleted node says
nothing at all. The node object says more, sooner: its Ready condition and when it last
changed, the ``node.kubernetes.io/unreachable`` taint the lifecycle controller puts on a node
whose kubelet stopped posting status (and when), or that it is gone. Those facts drive the
``NodeUnknown`` waiting token and the force-delete escalation (:mod:`.escalation`).

The node cache (:mod:`omed.informers.nodes`) keeps only what is read here. A node missing
from a synced cache is *gone*; without a node cache nothing is judged from nodes.

Invariant: pure; a :class:`NodeView` holds facts of one version of one node, nothing derived
from time.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from omed.controllers.inferencereplica.core.model import ObservedState, PodView
from omed.controllers.inferencereplica.core.observe import api_time

UNREACHABLE_TAINT: Final = "node.kubernetes.io/unreachable"
NOT_READY_TAINT: Final = "node.kubernetes.io/not-ready"
LIFECYCLE_TAINTS: Final = (UNREACHABLE_TAINT, NOT_READY_TAINT)
"""The taints the node lifecycle controller manages: the only ones the node cache keeps."""

NODE_GONE: Final = "node-gone"
NODE_UNREACHABLE: Final = "node-unreachable-taint"
NODE_NOT_READY: Final = "node-not-ready"


@dataclass(frozen=True, slots=True)
class NodeView:
    """One node, as the cache last saw it."""

    name: str
    uid: str = ""
    ready: bool = True
    """The Ready condition is True (a node without one is not Ready)."""
    not_ready_since: dt.datetime | None = None
    """The Ready condition's lastTransitionTime while it is not True."""
    unreachable: bool = False
    """Tainted ``node.kubernetes.io/unreachable`` (any effect)."""
    unreachable_since: dt.datetime | None = None
    """The earliest ``timeAdded`` of its unreachable taints (the NoExecute one has it)."""

    @property
    def healthy(self) -> bool:
        return self.ready and not self.unreachable

    @property
    def down_since(self) -> dt.datetime | None:
        """Since when it is known down: the earlier of its unreachable taint and its Ready
        condition's last change to not True (None: not down, or since an unknown time)."""
        times = [t for t in (self.not_ready_since, self.unreachable_since) if t is not None]
        return min(times) if times else None


def node_view(node: Mapping[str, Any]) -> NodeView:
    """What the core needs of one (cached, stripped) Node object."""
    meta = node.get("metadata") or {}
    ready: Mapping[str, Any] = next(
        (c for c in (node.get("status") or {}).get("conditions") or () if c.get("type") == "Ready"),
        {},
    )
    is_ready = ready.get("status") == "True"
    unreachable = [
        t for t in (node.get("spec") or {}).get("taints") or () if t.get("key") == UNREACHABLE_TAINT
    ]
    added = [
        t for t in (api_time(taint.get("timeAdded")) for taint in unreachable) if t is not None
    ]
    return NodeView(
        name=str(meta.get("name") or ""),
        uid=str(meta.get("uid") or ""),
        ready=is_ready,
        not_ready_since=None if is_ready else api_time(ready.get("lastTransitionTime")),
        unreachable=bool(unreachable),
        unreachable_since=min(added) if added else None,
    )


@dataclass(frozen=True, slots=True)
class NodeState:
    """What a pod's node is, for the escalation: ``cause`` None means healthy (or unknown)."""

    cause: str | None
    """NODE_GONE, NODE_UNREACHABLE, NODE_NOT_READY, or None."""
    since: dt.datetime | None = None
    """Since when it is so (None for a gone node, and when no time is known)."""


HEALTHY: Final = NodeState(None)


def node_state(pod: PodView, nodes: Mapping[str, NodeView] | None) -> NodeState:
    """The state of ``pod``'s node; healthy when nothing is known (no node cache, or the
    pod isn't bound)."""
    if nodes is None or pod.node is None:
        return HEALTHY
    return node_state_of(pod.node, nodes.get(pod.node))


def node_state_of(name: str, node: NodeView | None) -> NodeState:
    """The state of node ``name``, ``node`` as read (None: it is gone)."""
    if node is None:
        return NodeState(NODE_GONE)
    if node.unreachable:
        return NodeState(NODE_UNREACHABLE, node.down_since)
    if not node.ready:
        return NodeState(NODE_NOT_READY, node.not_ready_since)
    return HEALTHY


def with_node_facts(observed: ObservedState) -> ObservedState:
    """``observed`` with ``node_lost`` set on every pod whose node is not healthy (the pod's
    own NodeNotReady/NodeLost mark is kept)."""
    nodes = observed.nodes
    if nodes is None:
        return observed

    def mark(pod: PodView) -> PodView:
        if pod.node_lost or node_state(pod, nodes).cause is None:
            return pod
        return dataclasses.replace(pod, node_lost=True)

    pods = {index: tuple(mark(p) for p in group) for index, group in observed.pods.items()}
    strays = tuple(mark(p) for p in observed.stray_pods)
    return dataclasses.replace(observed, pods=pods, stray_pods=strays)


__all__ = [
    "HEALTHY",
    "LIFECYCLE_TAINTS",
    "NODE_GONE",
    "NODE_NOT_READY",
    "NODE_UNREACHABLE",
    "NOT_READY_TAINT",
    "UNREACHABLE_TAINT",
    "NodeState",
    "NodeView",
    "node_state",
    "node_state_of",
    "node_view",
]
