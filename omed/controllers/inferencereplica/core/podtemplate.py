"""Pods of an Instance, rendered from their revision; and the revision of the runner templates.

Why: the pod is where the controller's identity scheme becomes visible to everyone else, and
it must be the one upstream OME renders, so the upstream CLI, Services and users' selectors find
omed's pods. A pod is built from its revision's payload (the ``data`` of its ControllerRevision:
``podSpec``, ``podMeta``, ``workerPodSpec``), never from a template of another version, and
gets what omed owns on every pod:

* labels ``ome.io/inferenceservice`` (the parent's name, or the replica's own when it is
  standalone), ``component``, ``ome.io/instance-index``, ``ome.io/instance-incarnation``,
  ``ome.io/runner``, ``ome.io/pod-ordinal``, ``ome.io/managed-by: OMENative``,
  ``ome.io/revision-hash`` (8 hex digits) and, on a multi-pod Instance's pods,
  ``scheduling.x-k8s.io/pod-group: <isvc>-<component>-<index>``;
* ``spec.hostname`` (the pod's name, when it fits a DNS label) and ``spec.subdomain``
  ``<isvc>-<component>-headless``, so peers resolve ``<pod>.<isvc>-<component>-headless``;
* the ``OME_*`` environment of every container, overriding a variable of the same name:
  ``OME_INFERENCESERVICE_NAME``, ``OME_COMPONENT``, ``OME_COMPONENT_REPLICAS``,
  ``OME_INSTANCE_INDEX``, ``OME_RUNNER``, ``OME_RUNNER_SIZE``, ``OME_RUNNER_INDEX`` (the ordinal,
  0 for a one-pod runner), ``OME_INSTANCE_SUBDOMAIN`` (``<isvc>-<component>-<index>``), and on a
  multi-pod Instance ``OME_LEADER_ADDRESS`` (``<leader pod>.<isvc>-<component>-headless``),
  ``OME_INSTANCE_POD_RANK`` (leader 0, worker ordinal k: k+1) and ``OME_INSTANCE_POD_COUNT``;
* the annotation ``ome.io/operation-id`` of the operation that created it;
* a controller owner reference to the InferenceReplica, with ``blockOwnerDeletion``;
* the readiness gate ``ome.io/serving``, which omed alone sets.

Invariants: rendering is pure and deterministic. The environment is rendered per pod and is not
part of the revision: ``OME_COMPONENT_REPLICAS`` changes with ``replicas``, and a scale is no
rollout. The revision is hashed over the templates *before* any of these additions, so every
Instance of one template shares one revision.
"""

from __future__ import annotations

import copy
import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

import orjson

from omed.api.constants import (
    KIND_INFERENCE_REPLICA,
    LABEL_COMPONENT,
    LABEL_INCARNATION,
    LABEL_INFERENCE_SERVICE,
    LABEL_INSTANCE_INDEX,
    LABEL_MANAGED_BY,
    LABEL_POD_GROUP,
    LABEL_POD_ORDINAL,
    LABEL_REVISION_HASH,
    LABEL_RUNNER,
    MANAGED_BY_OME_NATIVE,
    READINESS_GATE_SERVING,
)
from omed.api.names import DNS1123_LABEL_MAX
from omed.api.revision import (
    MAX_REVISION_NAME_LENGTH,
    excluded_annotation,
    excluded_label,
    fnv32a,
    legacy_template_hash,
    revision_hash,
    revision_name,
    revision_payload,
    suffixed_hash,
)
from omed.controllers.inferencereplica.core.model import PodSlot, ReplicaTarget, RunnerShape
from omed.controllers.inferencereplica.core.names import ANNOTATION_OPERATION_ID, RUNNER_ORDER
from omed.controllers.owners import controller_reference


def _primary(runners: tuple[RunnerShape, ...]) -> RunnerShape | None:
    by_name = {r.name: r for r in runners}
    return by_name.get("default") or by_name.get("leader") or (runners[0] if runners else None)


def _worker(runners: tuple[RunnerShape, ...]) -> RunnerShape | None:
    by_name = {r.name: r for r in runners}
    return by_name.get("worker") if "leader" in by_name else None


def payload_of(runners: tuple[RunnerShape, ...]) -> bytes:
    """The revision payload of the runners: the single pod's (or the leader's) spec and
    metadata, and the workers' spec. The worker count is not in it, as it is not upstream's:
    a change of the count alone is no new revision."""
    primary, worker = _primary(runners), _worker(runners)
    template: Mapping[str, Any] = primary.template if primary is not None else {}
    return revision_payload(
        pod_spec=template.get("spec") or {},
        pod_meta=template.get("metadata"),
        worker_pod_spec=(worker.template.get("spec") or {}) if worker is not None else None,
    )


@dataclass(frozen=True, slots=True)
class TemplateDigests:
    """What a pass needs of the runners' templates, computed once per distinct content."""

    payload: bytes
    """The revision payload (:func:`payload_of`)."""
    payload_fnv: int
    """FNV-32a over the payload: upstream's hash continues from it with the suffixes."""
    data_digest: str
    """SHA-256 of the payload as compact JSON with sorted keys, as a stored record's ``data``
    is compared (the API server may re-encode it with sorted keys)."""
    legacy_digest: str
    """The hash omed gave these templates before upstream's (:func:`legacy_revision_of`)."""


_DIGESTS: dict[bytes, TemplateDigests] = {}
_DIGESTS_LIMIT: Final = 4096
"""Distinct template contents remembered; past it the memo starts over (a fleet has a few
templates per component, so this is never reached in practice)."""


def template_digests(runners: tuple[RunnerShape, ...]) -> TemplateDigests:
    """The digests of ``runners``, memoised on their content.

    Why: encoding a pod template as Go's encoding/json does and hashing it byte by byte costs
    milliseconds in Python, and every pass of every InferenceReplica needs its update
    revision. The templates change rarely, so the memo is keyed on their canonical JSON (a
    fast, C-implemented dump): equal content always gives equal digests, so the memo is
    invisible to callers and the core stays a pure function of its input.
    """
    key = orjson.dumps([[r.name, r.size, r.template] for r in runners], option=orjson.OPT_SORT_KEYS)
    found = _DIGESTS.get(key)
    if found is not None:
        return found
    payload = payload_of(runners)
    found = TemplateDigests(
        payload=payload,
        payload_fnv=fnv32a(payload),
        data_digest=hashlib.sha256(
            orjson.dumps(orjson.loads(payload), option=orjson.OPT_SORT_KEYS)
        ).hexdigest(),
        legacy_digest=_legacy_digest(runners),
    )
    if len(_DIGESTS) >= _DIGESTS_LIMIT:
        _DIGESTS.clear()
    _DIGESTS[key] = found
    return found


def revision_of(
    *,
    isvc: str,
    component: str,
    runners: tuple[RunnerShape, ...],
    owner_uid: str = "",
    collision_count: int = 0,
) -> str:
    """``<isvc>-<component>-<hash>``: upstream's hash of the runners' payload, the collision
    count and the owner's uid. A prefix too long for a label value is cut, never the hash."""
    digests = template_digests(runners)
    digest = suffixed_hash(
        digests.payload_fnv, collision_count=collision_count, owner_uid=owner_uid
    )
    return revision_name(isvc=isvc, component=component, digest=digest)


def _legacy_digest(runners: tuple[RunnerShape, ...]) -> str:
    if len(runners) == 1:
        return legacy_template_hash(runners[0].template)
    shapes = [
        {"name": r.name, "size": r.size, "template": dict(r.template)}
        for r in sorted(runners, key=lambda r: r.name)
    ]
    return legacy_template_hash({"runners": shapes})


def legacy_revision_of(*, isvc: str, component: str, runners: tuple[RunnerShape, ...]) -> str:
    """The name omed gave these runners before upstream's hash (SHA-256 of canonical JSON):
    what pods and rows written then carry for the same template."""
    digest = template_digests(runners).legacy_digest
    return revision_name(isvc=isvc, component=component, digest=digest)


def owner_reference(target: ReplicaTarget) -> dict[str, Any]:
    """The controller reference of ``target``'s pods and ControllerRevisions."""
    return controller_reference(kind=KIND_INFERENCE_REPLICA, name=target.name, uid=target.uid)


def headless_service(isvc: str, component: str) -> str:
    """``<isvc>-<component>-headless``: the Service whose DNS names an Instance's peers."""
    return f"{isvc}-{component}-headless"


def instance_subdomain(isvc: str, component: str, index: int) -> str:
    """``<isvc>-<component>-<index>``: OME_INSTANCE_SUBDOMAIN, and a gang's pod-group name."""
    return f"{isvc}-{component}-{index}"[:MAX_REVISION_NAME_LENGTH].rstrip("-.")


def _ordered(target: ReplicaTarget) -> list[RunnerShape]:
    return sorted(
        target.runners,
        key=lambda r: RUNNER_ORDER.index(r.name) if r.name in RUNNER_ORDER else 99,
    )


def ome_env(
    target: ReplicaTarget, *, index: int, runner: RunnerShape | None, slot: PodSlot
) -> list[dict[str, str]]:
    """The OME_* variables of the pod in ``slot`` of Instance ``index``."""
    size = runner.size if runner is not None else 1
    env = [
        ("OME_INFERENCESERVICE_NAME", target.isvc),
        ("OME_COMPONENT", target.component),
        ("OME_COMPONENT_REPLICAS", str(target.replicas)),
        ("OME_INSTANCE_INDEX", str(index)),
        ("OME_RUNNER", slot.runner),
        ("OME_RUNNER_SIZE", str(size)),
        ("OME_RUNNER_INDEX", str(slot.ordinal if size > 1 else 0)),
        ("OME_INSTANCE_SUBDOMAIN", instance_subdomain(target.isvc, target.component, index)),
    ]
    if target.runner("leader") is not None:
        leader = next(s for s in target.slots(index) if s.runner == "leader")
        offset = 0
        for shape in _ordered(target):
            if shape.name == slot.runner:
                break
            offset += shape.size
        env += [
            (
                "OME_LEADER_ADDRESS",
                f"{leader.name}.{headless_service(target.isvc, target.component)}",
            ),
            ("OME_INSTANCE_POD_RANK", str(offset + slot.ordinal)),
            ("OME_INSTANCE_POD_COUNT", str(target.pods_per_instance)),
        ]
    return [{"name": name, "value": value} for name, value in env]


def revision_spec(target: ReplicaTarget, runner: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """(pod spec, pod-template metadata) of ``runner`` at the update revision, from its payload
    (the ControllerRevision's data); the current template when the target carries none."""
    shape = target.runner(runner)
    template: Mapping[str, Any] = shape.template if shape is not None else {}
    own_meta: Mapping[str, Any] = template.get("metadata") or {}
    if not target.revision_payload:
        return copy.deepcopy(dict(template.get("spec") or {})), {
            "labels": dict(own_meta.get("labels") or {}),
            "annotations": dict(own_meta.get("annotations") or {}),
        }
    payload = orjson.loads(target.revision_payload)
    worker = runner == "worker" and payload.get("workerPodSpec") is not None
    spec = dict(payload.get("workerPodSpec") if worker else payload.get("podSpec") or {})
    meta = payload.get("podMeta") or {}
    labels = dict(meta.get("labels") or {})
    annotations = dict(meta.get("annotations") or {})
    # What the hash leaves out (a queue, a controller's signal) is still the template's.
    labels.update(
        {k: v for k, v in (own_meta.get("labels") or {}).items() if excluded_label(str(k))}
    )
    annotations.update(
        {
            k: v
            for k, v in (own_meta.get("annotations") or {}).items()
            if excluded_annotation(str(k))
        }
    )
    return spec, {"labels": labels, "annotations": annotations}


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
    spec, template_meta = revision_spec(target, slot.runner)

    labels = dict(template_meta["labels"])
    labels.update(
        {
            LABEL_INFERENCE_SERVICE: target.isvc,
            LABEL_COMPONENT: target.component,
            LABEL_INSTANCE_INDEX: str(index),
            LABEL_INCARNATION: str(incarnation),
            LABEL_RUNNER: slot.runner,
            LABEL_POD_ORDINAL: str(slot.ordinal),
            LABEL_MANAGED_BY: MANAGED_BY_OME_NATIVE,
            LABEL_REVISION_HASH: revision_hash(target.update_revision),
        }
    )
    if target.pods_per_instance > 1:
        labels[LABEL_POD_GROUP] = instance_subdomain(target.isvc, target.component, index)
    annotations = dict(template_meta["annotations"])
    annotations[ANNOTATION_OPERATION_ID] = operation_id

    if len(slot.name) <= DNS1123_LABEL_MAX:
        spec["hostname"] = slot.name
    spec["subdomain"] = headless_service(target.isvc, target.component)
    env = ome_env(target, index=index, runner=runner, slot=slot)
    owned = {item["name"] for item in env}
    containers = []
    for container in spec.get("containers") or ():
        if not isinstance(container, Mapping):
            containers.append(container)
            continue
        kept = [
            e
            for e in container.get("env") or ()
            if not (isinstance(e, Mapping) and e.get("name") in owned)
        ]
        containers.append({**container, "env": [*kept, *env]})
    spec["containers"] = containers

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
