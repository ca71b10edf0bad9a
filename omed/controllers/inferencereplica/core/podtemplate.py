"""Pods of an Instance, rendered from the runner templates; and the update revision.

Why: the pod is where the controller's identity scheme becomes visible to everyone else.
The InferenceService controller (or the user, for a standalone InferenceReplica) writes the
runner templates; this module adds what omed owns on every pod:

* labels ``ome.io/inferenceservice`` (the parent's name, or the replica's own when it is
  standalone, so the product's label-filtered pod cache sees it), ``component``,
  ``ome.io/instance-index``, ``ome.io/incarnation`` and ``ome.io/revision``;
* the annotation ``ome.io/operation-id`` of the operation that created it;
* a controller owner reference to the InferenceReplica, with ``blockOwnerDeletion`` (the key
  the pod events are mapped back to; the garbage collector's link, which omed's finalizer
  holds off until the pods are drained, and which a Foreground deletion of the replica
  waits on);
* the readiness gate ``ome.io/serving``, which omed alone sets.

Invariants: rendering is pure and deterministic (the same inputs give the same body), and
the template's own labels, annotations and readiness gates are kept, with omed's keys
winning on a clash. The revision is hashed over the templates *before* these additions, so
every Instance of one template shares one revision.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from omed.api.constants import (
    KIND_INFERENCE_REPLICA,
    LABEL_COMPONENT,
    LABEL_INCARNATION,
    LABEL_INFERENCE_SERVICE,
    LABEL_INSTANCE_INDEX,
    LABEL_REVISION,
    READINESS_GATE_SERVING,
)
from omed.api.revision import MAX_REVISION_NAME_LENGTH, REVISION_HASH_LENGTH, template_hash
from omed.controllers.inferencereplica.core.model import PodSlot, ReplicaTarget, RunnerShape
from omed.controllers.inferencereplica.core.names import ANNOTATION_OPERATION_ID
from omed.controllers.owners import controller_reference


def revision_of(*, isvc: str, component: str, runners: tuple[RunnerShape, ...]) -> str:
    """``<isvc>-<component>-<hash>`` of the Instances' pod templates.

    One runner: the hash of its template, exactly as :func:`omed.api.revision.revision_name`
    takes it. Several (leader and workers): the hash of ``{"runners": [{name, size,
    template}, ...]}`` sorted by name, so a change of either template or of the worker count
    is a new revision. A prefix too long for a label value is cut, never the hash.
    """
    if len(runners) == 1:
        digest = template_hash(runners[0].template)
    else:
        shapes = [
            {"name": r.name, "size": r.size, "template": dict(r.template)}
            for r in sorted(runners, key=lambda r: r.name)
        ]
        digest = template_hash({"runners": shapes})
    prefix = f"{isvc}-{component}"
    room = MAX_REVISION_NAME_LENGTH - REVISION_HASH_LENGTH - 1
    return f"{prefix[:room].rstrip('-.')}-{digest}"


def owner_reference(target: ReplicaTarget) -> dict[str, Any]:
    """The controller reference of ``target``'s pods."""
    return controller_reference(kind=KIND_INFERENCE_REPLICA, name=target.name, uid=target.uid)


def render_pod(
    target: ReplicaTarget,
    *,
    index: int,
    incarnation: int,
    slot: PodSlot,
    operation_id: str,
) -> dict[str, Any]:
    """The Pod to create for ``slot`` of Instance ``index`` in ``incarnation``."""
    runner = target.runner(slot.runner)
    template: Mapping[str, Any] = runner.template if runner is not None else {}
    template_meta: Mapping[str, Any] = template.get("metadata") or {}
    spec: dict[str, Any] = copy.deepcopy(dict(template.get("spec") or {}))

    labels = dict(template_meta.get("labels") or {})
    labels.update(
        {
            LABEL_INFERENCE_SERVICE: target.isvc,
            LABEL_COMPONENT: target.component,
            LABEL_INSTANCE_INDEX: str(index),
            LABEL_INCARNATION: str(incarnation),
            LABEL_REVISION: target.update_revision,
        }
    )
    annotations = dict(template_meta.get("annotations") or {})
    annotations[ANNOTATION_OPERATION_ID] = operation_id

    gates = [g for g in spec.get("readinessGates") or [] if isinstance(g, Mapping)]
    if not any(g.get("conditionType") == READINESS_GATE_SERVING for g in gates):
        gates.append({"conditionType": READINESS_GATE_SERVING})
    spec["readinessGates"] = gates

    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": slot.name,
            "namespace": target.namespace,
            "labels": labels,
            "annotations": annotations,
            "ownerReferences": [owner_reference(target)],
        },
        "spec": spec,
    }
