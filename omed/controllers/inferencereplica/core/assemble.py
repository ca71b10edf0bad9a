"""One InferenceReplica's desired and observed state, from the objects a pass reads.

Why here: the reconciler reads these objects from its caches, and ``kubectl ome instance
plan`` reads the same kinds from the API server; both must hand :func:`~.decide.decide`
exactly the same :class:`~.model.ReplicaTarget` and :class:`~.model.ObservedState` for the
same objects, or the plan the command prints is not the pass the controller runs. So the
assembly is one pure function over the objects, and each caller only chooses where they
come from.

Invariant: pure; the objects are read, never changed (cached objects are shared).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, TypeVar

import orjson

from omed.api.constants import LABEL_INFERENCE_SERVICE
from omed.config.lifecycle import LifecycleConfig
from omed.controllers.inferencereplica.core import names, podgroups
from omed.controllers.inferencereplica.core.migrationview import mailbox_of
from omed.controllers.inferencereplica.core.model import ObservedState, ReplicaTarget
from omed.controllers.inferencereplica.core.nodes import NodeView, node_view
from omed.controllers.inferencereplica.core.observe import observe_pods, replica_target
from omed.controllers.inferencereplica.core.revisions import revision_views
from omed.controllers.inferencereplica.core.status import in_list_form

Obj = Mapping[str, Any]
Found = TypeVar("Found", bound=Mapping[str, Any])


def labelled(objs: Iterable[Found], irep: Obj) -> list[Found]:
    """The objects of ``objs`` labelled with ``irep``'s InferenceService (its parent's name,
    else its own) and component: its ControllerRevisions and PodGroups, and any other
    object's of the same labels (a name another object holds is a collision)."""
    meta = irep.get("metadata") or {}
    spec = irep.get("spec") or {}
    parent = spec.get("parentRef") if isinstance(spec, Mapping) else None
    isvc = parent.get("name") if isinstance(parent, Mapping) else meta.get("name")
    component = spec.get("component") if isinstance(spec, Mapping) else None
    return [
        obj
        for obj in objs
        if (labels := (obj.get("metadata") or {}).get("labels") or {}).get(LABEL_INFERENCE_SERVICE)
        == isvc
        and labels.get("component") == component
    ]


def observe_replica(
    irep: Obj,
    fleet: LifecycleConfig,
    *,
    max_rows: int | None,
    pods: Iterable[Obj],
    revisions: Iterable[Obj],
    slices: Callable[[str, str], Sequence[Obj]],
    pod_groups: Iterable[Obj] | None,
) -> tuple[ReplicaTarget, ObservedState]:
    """``irep``'s target and what its objects show, nodes aside (:func:`with_nodes`).

    ``pods`` may hold other objects' pods (only ``irep``'s are kept); ``revisions`` and
    ``pod_groups`` are the objects :func:`labelled` as ``irep``'s (``pod_groups`` None: the
    PodGroup CRD isn't served, and no PodGroup is judged); ``slices`` gives the
    EndpointSlices of a Service by namespace and name (the traffic Service's). Raises what
    the readers raise for a replica that can't be read (``InvalidReplica``,
    ``RowsUnreadable``)."""
    uid = str((irep.get("metadata") or {}).get("uid") or "")
    listed = in_list_form(irep, max_rows=max_rows)
    views = revision_views(revisions, uid=uid)
    target = replica_target(listed, fleet, views)
    service = names.traffic_service(target.isvc, target.component)
    observed = observe_pods(target, listed, pods, slices(target.namespace, service), views)
    if pod_groups is not None:
        observed = dataclasses.replace(observed, pod_groups=podgroups.views(pod_groups, uid=uid))
    return target, observed


def node_names(observed: ObservedState) -> set[str]:
    """The nodes the observed pods (stray ones included) are bound to."""
    pods = [p for group in observed.pods.values() for p in group] + list(observed.stray_pods)
    return {pod.node for pod in pods if pod.node}


def with_nodes(observed: ObservedState, nodes: Mapping[str, Obj]) -> ObservedState:
    """``observed`` with ``nodes``, the known nodes of its pods by name (a node of a pod
    missing here is gone: pass only a complete reading)."""
    wanted = node_names(observed)
    views: dict[str, NodeView] = {
        name: node_view(node) for name, node in nodes.items() if name in wanted
    }
    return dataclasses.replace(observed, nodes=views)


def with_migrations(
    observed: ObservedState, *, revisions: Iterable[Obj], parent: Obj | None
) -> ObservedState:
    """``observed`` with the parent InferenceService's migration mailbox (None: no parent, or
    not known) and the payloads of the replica's revisions (a migration's surge is built from
    its source's running revision)."""
    payloads = {
        str((obj.get("metadata") or {}).get("name") or ""): orjson.dumps(obj.get("data"))
        for obj in revisions
        if isinstance(obj.get("data"), Mapping)
    }
    mailbox = mailbox_of(parent) if parent is not None else None
    return dataclasses.replace(observed, mailbox=mailbox, revision_payloads=payloads)


__all__ = ["labelled", "node_names", "observe_replica", "with_migrations", "with_nodes"]
