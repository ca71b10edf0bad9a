"""Pods that carry an InferenceReplica's name but not its ownership: which to adopt, which
to drain, and in what order.

Why: beside omed runs kube-controller-manager's garbage collector, and it, not omed, decides
some pods' owner references (docs/controllers.md, "Deletion and the garbage collector"):

* a pod no controller owns, named and labelled as this InferenceReplica's, was left running
  by a deletion with ``propagationPolicy: Orphan``: the InferenceReplica of the same name
  *adopts* it (:func:`adoptable`), as a ReplicaSet adopts its orphans, and the planner takes
  the Instances from there under the usual rules;
* a pod still controlled by an InferenceReplica of the name that is gone, or by an earlier
  one of another uid, was left by a deletion that bypassed omed's finalizer: it is garbage,
  drained one by one (:func:`drain_orphans`) once the shell's fresh reads confirm it.

Invariants: a pod any controller owns is never adopted; omed's finalizer goes on before
omed owns a pod, adopted ones included (:func:`finalizer_first`); a pod held by an earlier
InferenceReplica of the name is drained only when the cache shows it controlled by that
name with another uid (:func:`earlier_holders`), and the shell acts only after the API
server confirms it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from omed.api.constants import (
    KIND_INFERENCE_REPLICA,
    LABEL_COMPONENT,
    LABEL_INFERENCE_SERVICE,
    LABEL_INSTANCE_INDEX,
)
from omed.api.inferencereplica import InferenceReplicaStatus
from omed.controllers.inferencereplica.core import names, operations
from omed.controllers.inferencereplica.core.actions import (
    RETRY_SOON,
    Action,
    AddFinalizer,
    DeletePods,
    Plan,
    PodRef,
    RemoveFinalizer,
    SetServingGate,
)
from omed.controllers.inferencereplica.core.model import ObservedState, PodView, ReplicaTarget
from omed.controllers.inferencereplica.core.names import parse_pod_name
from omed.controllers.inferencereplica.core.podtemplate import owner_reference
from omed.controllers.owners import controller_name, controller_ref, controller_uid


def owner_key(pod: Mapping[str, Any]) -> str | None:
    """``namespace/name`` of the InferenceReplica that controls ``pod``, if one does."""
    name = controller_name(pod, kind=KIND_INFERENCE_REPLICA)
    if name is None:
        return None
    namespace = (pod.get("metadata") or {}).get("namespace")
    return f"{namespace}/{name}" if namespace else name


def unowned(pod: Mapping[str, Any]) -> bool:
    """No controller owns ``pod`` (of any kind)."""
    return controller_ref(pod) is None


def adoptable(target: ReplicaTarget, pods: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The pods of ``pods`` that ``target`` may adopt, by name: no controller owns them, they
    aren't Terminating, their ``ome.io/inferenceservice`` and ``component`` labels are
    ``target``'s, and the name is one of its pod names for their ``ome.io/instance-index``
    (``<replica>-<index>-<runner>-<ordinal>``). None while ``target`` is deleted (its pods
    are drained or, under Orphan, left) or paused (no pod write at all: it adopts them once
    resumed)."""
    if target.deleting or target.paused:
        return []
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


def let_go(target: ReplicaTarget, observed: ObservedState) -> Plan:
    """Deleted with ``propagationPolicy: Orphan``: the user asked for the pods to stay.

    Nothing is drained (a drain would race the collector, which takes the owner references
    off at once, and leave some pods gated off and unowned); the rows stay as stored; the
    finalizer goes, which the executor does only once a fresh list shows no pod still
    owned by this InferenceReplica, that is, once the collector has orphaned them all.
    """
    rows = tuple(sorted(observed.rows.values(), key=lambda row: row.index))
    actions: tuple[Action, ...] = (RemoveFinalizer(),) if target.has_finalizer else ()
    return Plan(actions=actions, rows=rows, status=observed.status)


def finalizer_first(observed: ObservedState) -> Plan:
    """The pass of a replica without omed's finalizer that has pods to adopt: the finalizer
    goes on, and nothing else (no pod is omed's without it); the next pass adopts."""
    rows = tuple(sorted(observed.rows.values(), key=lambda row: row.index))
    return Plan(actions=(AddFinalizer(),), rows=rows, status=observed.status)


def drain_orphans(pods: Sequence[PodView]) -> tuple[SetServingGate | DeletePods, ...]:
    """Drain pods that no row owns, one by one: pods left by a deleted InferenceReplica, or
    a deleted InferenceReplica's pods without a usable index.

    Their state lives on the pods themselves: gate False first, delete once not routed.
    Such actions carry index -1 and no operation id.
    """
    actions: list[SetServingGate | DeletePods] = []
    for pod in pods:
        state = operations.drain_state([pod])
        ref = PodRef(pod.name, pod.uid)
        if state.gate_off:
            actions.append(
                SetServingGate(index=-1, pod=ref, serving=False, reason=names.GATE_DRAINING)
            )
        if state.deletable:
            actions.append(DeletePods(index=-1, operation_id="", pods=(ref,)))
    return tuple(actions)


def drain_left_over(pods: Sequence[PodView]) -> Plan:
    """The plan for pods left by a gone or earlier InferenceReplica of the name, once the
    API server confirmed them (:func:`still_held`): drain them one by one, and look again
    soon (no row records their drain; the next pass reads it off the pods)."""
    return Plan(
        actions=drain_orphans(pods),
        rows=(),
        status=InferenceReplicaStatus(),
        requeue_after=RETRY_SOON,
    )


@dataclass(frozen=True, slots=True)
class NameHolders:
    """Who holds the pod names a pass's creates met as AlreadyExists."""

    earlier: tuple[Mapping[str, Any], ...] = ()
    """Pods controlled by an earlier InferenceReplica of this name (another uid): to drain,
    once a fresh list confirms it."""
    unowned: bool = False
    """Some are owned by no controller: the next pass adopts them."""

    @property
    def look_again(self) -> bool:
        return self.unowned or bool(self.earlier)


def earlier_holders(
    taken: Iterable[str],
    cached: Mapping[str, Mapping[str, Any] | None],
    *,
    key: str,
    uid: str,
) -> NameHolders:
    """Sort the pods holding names in ``taken`` (``cached``: the cache's pod of each name,
    None when it holds none: a repeat of our own create, or one not seen yet)."""
    earlier: list[Mapping[str, Any]] = []
    adopt = False
    for name in taken:
        pod = cached.get(name)
        if pod is None:
            continue
        if unowned(pod):
            adopt = True
            continue
        owner = controller_uid(pod, kind=KIND_INFERENCE_REPLICA)
        if owner is not None and owner != uid and owner_key(pod) == key:
            earlier.append(pod)
    return NameHolders(earlier=tuple(earlier), unowned=adopt)


def selectors_of(pods: Iterable[Mapping[str, Any]]) -> tuple[str, ...]:
    """The label selectors that list ``pods`` again: each one's InferenceService and
    component (only the first when it has no component), without repeats."""
    selectors: dict[str, None] = {}
    for pod in pods:
        labels = (pod.get("metadata") or {}).get("labels") or {}
        isvc, component = labels.get(LABEL_INFERENCE_SERVICE), labels.get(LABEL_COMPONENT)
        if isvc and component:
            selectors[names.label_selector(isvc, component)] = None
        elif isvc:
            selectors[f"{LABEL_INFERENCE_SERVICE}={isvc}"] = None
    return tuple(selectors)


def still_held(
    cached: Iterable[Mapping[str, Any]],
    fresh: Mapping[str, Mapping[str, Any]],
    *,
    replica: str,
    current_uid: str | None,
) -> tuple[tuple[Mapping[str, Any], ...], bool]:
    """Of the ``cached`` pods, those the API server (``fresh``, by uid) still shows controlled
    by an InferenceReplica named ``replica`` whose uid isn't ``current_uid`` (``None``: the
    InferenceReplica is gone, any uid), as the API server has them; and whether some are
    owned by no controller any more (the collector orphaned them: to be adopted)."""
    kept: list[Mapping[str, Any]] = []
    orphaned = False
    for pod in cached:
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
    return tuple(kept), orphaned
