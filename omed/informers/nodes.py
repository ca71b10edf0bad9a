"""The node cache: what the InferenceReplica controller reads of the nodes its pods run on.

Why: whether a pod's kubelet still runs it is a fact of its node (its Ready condition and
when it changed, the ``node.kubernetes.io/unreachable`` and ``not-ready`` taints the node
lifecycle controller manages, or the node being gone), and the NodeUnknown waiting token and
the force-delete escalation are decided from it. Nodes are cluster-scoped and one object
per machine, so the cache keeps each node stripped to exactly that: name, uid and
resourceVersion; the Ready condition's status, reason and lastTransitionTime (not its
heartbeat, which moves without news); the two lifecycle taints with their effect and
``timeAdded``. Capacity, images, addresses and labels are dropped. A heartbeat that changes
nothing of that still arrives as an update of an equal object, which handlers can ignore.

The pod cache gets an index by node name (:data:`POD_NODE`), so a node event wakes only the
InferenceReplicas with a pod there.
"""

from __future__ import annotations

from typing import Any, Final

from omed.informers.factory import InformerFactory
from omed.informers.informer import SharedInformer
from omed.informers.transform import Obj
from omed.kube.resources import NODES

POD_NODE: Final = "node-name"
"""Pod index: ``spec.nodeName``."""
LIFECYCLE_TAINTS: Final = ("node.kubernetes.io/unreachable", "node.kubernetes.io/not-ready")

_METADATA: Final = ("name", "uid", "resourceVersion")
_CONDITION: Final = ("type", "status", "reason", "lastTransitionTime")
_TAINT: Final = ("key", "effect", "timeAdded")


def transform_node(obj: Obj) -> Obj:
    """Keep what the controller reads (see the module docstring)."""
    meta = obj.get("metadata") or {}
    conditions = [
        {k: c[k] for k in _CONDITION if k in c}
        for c in (obj.get("status") or {}).get("conditions") or ()
        if c.get("type") == "Ready"
    ]
    taints = [
        {k: t[k] for k in _TAINT if k in t}
        for t in (obj.get("spec") or {}).get("taints") or ()
        if t.get("key") in LIFECYCLE_TAINTS
    ]
    out: dict[str, Any] = {"metadata": {k: meta[k] for k in _METADATA if k in meta}}
    if taints:
        out["spec"] = {"taints": taints}
    out["status"] = {"conditions": conditions}
    return out


def pod_node_index(obj: Obj) -> tuple[str, ...]:
    node = (obj.get("spec") or {}).get("nodeName")
    return (str(node),) if node else ()


def node_informer(factory: InformerFactory) -> SharedInformer:
    """The shared, cluster-wide, stripped node cache."""
    return factory.informer(NODES, transform=transform_node)


__all__ = ["LIFECYCLE_TAINTS", "POD_NODE", "node_informer", "pod_node_index", "transform_node"]
