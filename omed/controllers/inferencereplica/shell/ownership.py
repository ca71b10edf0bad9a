"""Pods that carry an InferenceReplica's name but not its ownership: adopt them, or drain them.

Why: beside omed runs kube-controller-manager's garbage collector, and it, not omed, decides
some pods' owner references (docs/controllers.md, "Deletion and the garbage collector"):

* An InferenceReplica deleted with ``propagationPolicy: Orphan`` leaves its pods running:
  the collector takes their owner references off. Such a pod belongs to no controller and
  keeps serving. When an InferenceReplica of the same name exists again (the InferenceService
  controller recreates a missing replica at once; a user re-applies a standalone one), it
  *adopts* the pods named and labelled as its own, as a ReplicaSet or StatefulSet adopts
  its orphans: the Instances go on serving, and the planner takes them from there (scale,
  update, drain) under the usual rules.
* A pod whose controller reference names an InferenceReplica of this name with another uid,
  or one that is gone, was left by a deletion that bypassed omed's finalizer (removed by
  hand). The collector deletes such pods as soon as it sees them, routed or not; omed drains
  and deletes the ones it finds first, which is what happens while the collector lags (up to
  its discovery interval after the CRDs are installed, a backlog, deletes it can't make) or
  where there is none. Such a pod is garbage, never adopted.

Invariants:

* a pod that any controller owns is never adopted; a pod is adopted only when it is not
  Terminating, its ``ome.io/inferenceservice`` and ``component`` labels are the
  InferenceReplica's, and its name is one of the InferenceReplica's pod names for its
  ``ome.io/instance-index`` label (``<replica>-<index>-<runner>-<ordinal>``);
* a fresh read of the InferenceReplica comes first: one that is being deleted (or was
  replaced meanwhile) adopts nothing, so an adopted pod is never torn down by an owner that
  was already going away;
* the adoption patch carries the pod's uid and resourceVersion, so a pod that changed since
  the cache showed it isn't adopted; the next pass looks again;
* a left-over pod is drained only when a fresh list from the API server still shows it
  (same uid) controlled by an InferenceReplica of that name and another uid: the cache may
  still show a reference the collector has already taken off (an Orphan deletion), and such
  a pod is to be adopted, never drained.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from omed.api.constants import (
    KIND_INFERENCE_REPLICA,
    LABEL_COMPONENT,
    LABEL_INFERENCE_SERVICE,
    LABEL_INSTANCE_INDEX,
)
from omed.controllers.deletion import controller_ref
from omed.controllers.inferencereplica.core.model import ReplicaTarget
from omed.controllers.inferencereplica.core.names import label_selector, parse_pod_name
from omed.controllers.inferencereplica.core.podtemplate import owner_reference
from omed.controllers.inferencereplica.shell.executor import KubeApi
from omed.controllers.refusals import RefusedWrite, refused_write, uid_changed
from omed.kube.errors import ApiError, Conflict, NotFound
from omed.kube.resources import INFERENCE_REPLICAS, PODS

WRITE_CONCURRENCY: Final = 16
"""Adoption patches one pass keeps in flight at once (the client's limiter paces them)."""


def unowned(pod: Mapping[str, Any]) -> bool:
    """No controller owns ``pod`` (of any kind)."""
    return controller_ref(pod) is None


def adoptable(target: ReplicaTarget, pods: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The pods of ``pods`` that ``target`` may adopt (see the module's invariants), by name."""
    found: list[Mapping[str, Any]] = []
    for pod in pods:
        meta = pod.get("metadata") or {}
        if meta.get("deletionTimestamp") or not unowned(pod):
            continue
        if meta.get("namespace") != target.namespace:
            continue
        labels = meta.get("labels") or {}
        if labels.get(LABEL_INFERENCE_SERVICE) != target.isvc:
            continue
        if labels.get(LABEL_COMPONENT) != target.component:
            continue
        index = labels.get(LABEL_INSTANCE_INDEX)
        if not isinstance(index, str) or not index.isdigit():
            continue
        name = str(meta.get("name") or "")
        if parse_pod_name(name, replica=target.name, index=int(index)) is None:
            continue
        found.append(pod)
    return sorted(found, key=lambda pod: str(pod["metadata"].get("name")))


def adoption_patch(target: ReplicaTarget, pod: Mapping[str, Any]) -> dict[str, Any]:
    """A merge patch that makes ``target`` the controller of ``pod``, as it stood in the
    cache (its uid and resourceVersion are preconditions; other owner references stay)."""
    meta = pod.get("metadata") or {}
    others = [dict(ref) for ref in meta.get("ownerReferences") or () if not ref.get("controller")]
    return {
        "metadata": {
            "ownerReferences": [owner_reference(target), *others],
            "uid": meta.get("uid"),
            "resourceVersion": meta.get("resourceVersion"),
        }
    }


def candidate_keys(pod: Mapping[str, Any]) -> tuple[str, ...]:
    """``namespace/name`` of the InferenceReplicas that could adopt an unowned ``pod``: the
    replica an InferenceService names ``<isvc>-<component>``, and a standalone one named as
    the ``ome.io/inferenceservice`` label."""
    meta = pod.get("metadata") or {}
    labels = meta.get("labels") or {}
    namespace = meta.get("namespace")
    isvc = labels.get(LABEL_INFERENCE_SERVICE)
    if not namespace or not isvc:
        return ()
    component = labels.get(LABEL_COMPONENT)
    keys = [f"{namespace}/{isvc}-{component}"] if component else []
    keys.append(f"{namespace}/{isvc}")
    return tuple(keys)


@dataclass
class Adoption:
    """What one adoption pass did."""

    adopted: list[str] = field(default_factory=list)
    """Names of the pods now controlled by the InferenceReplica."""
    retry: bool = False
    """A pod changed or went since the cache showed it: look again soon."""
    refused: list[RefusedWrite] = field(default_factory=list)
    errors: list[Exception] = field(default_factory=list)


async def adopt(
    client: KubeApi, *, target: ReplicaTarget, pods: Sequence[Mapping[str, Any]]
) -> Adoption:
    """Make ``target`` the controller of ``pods`` (from :func:`adoptable`), unless a fresh read
    shows it deleted, being deleted, or replaced by another of its name."""
    outcome = Adoption()
    try:
        fresh = await client.get(INFERENCE_REPLICAS, target.name, target.namespace)
    except NotFound:
        return outcome
    meta = fresh.get("metadata") or {}
    if meta.get("uid") != target.uid or meta.get("deletionTimestamp"):
        return outcome
    semaphore = asyncio.Semaphore(WRITE_CONCURRENCY)

    async def one(pod: Mapping[str, Any]) -> None:
        name = str(pod["metadata"].get("name"))
        async with semaphore:
            try:
                await client.patch(PODS, name, adoption_patch(target, pod), target.namespace)
            except (Conflict, NotFound):
                outcome.retry = True
                return
            except ApiError as err:
                if uid_changed(err):  # another pod holds the name now
                    outcome.retry = True
                    return
                refusal = refused_write(err, verb="patch", resource=PODS.plural, name=name)
                if refusal is None:
                    outcome.errors.append(err)
                else:
                    outcome.refused.append(refusal)
                return
        outcome.adopted.append(name)

    await asyncio.gather(*(one(pod) for pod in pods))
    outcome.adopted.sort()
    return outcome


@dataclass(frozen=True)
class Leftovers:
    """Cached pods re-read from the API server before they are drained."""

    pods: tuple[Mapping[str, Any], ...]
    """As the API server has them, still controlled by an earlier (or gone) InferenceReplica
    of the name: to be drained."""
    unowned: bool
    """Some are owned by no controller any more (the collector orphaned them): to be adopted
    by the InferenceReplica of the name, if there is one."""


async def leftovers(
    client: KubeApi,
    *,
    namespace: str,
    replica: str,
    pods: Sequence[Mapping[str, Any]],
    current_uid: str | None,
) -> Leftovers:
    """Of ``pods`` (cached pods whose controller reference names the InferenceReplica
    ``replica``), those a fresh list still shows controlled by an InferenceReplica of that
    name whose uid isn't ``current_uid`` (``None``: the InferenceReplica is gone, any uid)."""
    selectors: dict[str, None] = {}
    for pod in pods:
        labels = (pod.get("metadata") or {}).get("labels") or {}
        isvc, component = labels.get(LABEL_INFERENCE_SERVICE), labels.get(LABEL_COMPONENT)
        if isvc and component:
            selectors[label_selector(isvc, component)] = None
        elif isvc:
            selectors[f"{LABEL_INFERENCE_SERVICE}={isvc}"] = None
    fresh: dict[str, Mapping[str, Any]] = {}
    for selector in selectors:
        for pod in await client.list_all(PODS, namespace, labelSelector=selector):
            fresh[str((pod.get("metadata") or {}).get("uid"))] = pod
    kept: list[Mapping[str, Any]] = []
    orphaned = False
    for pod in pods:
        now = fresh.get(str((pod.get("metadata") or {}).get("uid")))
        if now is None:
            continue  # gone, or another pod holds the name now
        ref = controller_ref(now)
        if ref is None:
            orphaned = True
        elif (
            ref.get("kind") == KIND_INFERENCE_REPLICA
            and ref.get("name") == replica
            and ref.get("uid") != current_uid
        ):
            kept.append(now)
    return Leftovers(pods=tuple(kept), unowned=orphaned)


__all__ = [
    "Adoption",
    "Leftovers",
    "adopt",
    "adoptable",
    "adoption_patch",
    "candidate_keys",
    "leftovers",
    "unowned",
]
