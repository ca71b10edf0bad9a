"""From an InferenceService (and its runtime) to the InferenceReplicas it should have. Pure.

Why a pure module: the projection is where OME's rules about modes and templates live, and
it must give the same answer for the same input so that a reconcile that changes nothing
writes nothing (a changed answer would roll every Instance).

Rules (docs/controllers.md, "InferenceService controller"):
- deployment mode: the ``ome.io/deploymentMode`` annotation, else ``spec.deploymentMode``,
  else the runtime's ``deploymentMode``, else ``deploy.defaultDeploymentMode``; only OMENative
  components get an InferenceReplica;
- an InferenceService with ``spec.replicaRefs`` fronts standalone InferenceReplicas and has
  none of its own;
- Instances: ``minReplicas`` when set (capped by a non-zero ``maxReplicas``), else 1;
- the pod template of each runner is the runtime component's pod spec with the component's
  own fields laid over it: a pod spec field the component sets replaces the runtime's, and
  the runner container is merged field by field (image, command, args, resources replace;
  env and ports merge by name);
- a multi-pod Instance (``leader`` or ``worker`` set) has runners ``leader`` (size 1) and
  ``worker`` (``worker.size``), each with its own template; else one runner ``default``;
- only the runtime's ``spec`` is read, never its metadata (uid, resourceVersion,
  creationTimestamp), so a runtime created again with the same spec projects the same
  replicas; a runtime the service names that doesn't exist (yet, or any more) is
  ``RuntimeUnresolved``, never a projection without it.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
from collections.abc import Mapping
from typing import Any, Final

import orjson

from omed.api.constants import (
    ANNOTATION_CONTROLLER_WRITE,
    ANNOTATION_DEPLOYMENT_MODE,
    API_VERSION,
    COMPONENTS,
    CONTROLLER_WRITE_TRUE,
    DEPLOYMENT_MODE_OME_NATIVE,
    FINALIZER_INFERENCE_REPLICA,
    KIND_INFERENCE_REPLICA,
    KIND_INFERENCE_SERVICE,
    LABEL_COMPONENT,
    LABEL_INFERENCE_SERVICE,
)

RUNNER_CONTAINER: Final = "ome-container"
"""Name of the runner container when neither the runtime nor the component names it."""

ANNOTATION_SPEC_HASH: Final = "ome.io/inferenceservice-spec-hash"
"""On an InferenceReplica: the digest of the spec its InferenceService last wrote."""

_MERGE_BY_NAME: Final = ("env", "ports", "volumeMounts")
_COMPONENT_OWN_FIELDS: Final = frozenset(
    {
        "minReplicas",
        "maxReplicas",
        "runner",
        "leader",
        "worker",
        "lifecycle",
        "labels",
        "annotations",
    }
)


class ProjectionError(ValueError):
    """The InferenceService cannot be projected; the message says why (a condition reason
    and message are derived from it)."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


@dataclasses.dataclass(frozen=True)
class Projection:
    mode: str
    """The resolved deployment mode."""
    mode_source: str
    """Where the mode came from: Annotation, ServiceSpec, Runtime, ConfigMap or Default."""
    replicas: dict[str, dict[str, Any]]
    """Wanted InferenceReplica objects by component, for OMENative components only."""
    fronted: tuple[str, ...] = ()
    """Names of standalone InferenceReplicas that ``spec.replicaRefs`` fronts."""


def resolve_mode(
    isvc: Mapping[str, Any], runtime: Mapping[str, Any] | None, default_mode: str | None
) -> tuple[str, str]:
    annotations = (isvc.get("metadata") or {}).get("annotations") or {}
    if annotations.get(ANNOTATION_DEPLOYMENT_MODE):
        return str(annotations[ANNOTATION_DEPLOYMENT_MODE]), "Annotation"
    spec = isvc.get("spec") or {}
    if spec.get("deploymentMode"):
        return str(spec["deploymentMode"]), "ServiceSpec"
    if runtime is not None and (runtime.get("spec") or {}).get("deploymentMode"):
        return str(runtime["spec"]["deploymentMode"]), "Runtime"
    if default_mode:
        return default_mode, "ConfigMap"
    return "RawDeployment", "Default"


def instance_count(component: Mapping[str, Any]) -> int:
    minimum = component.get("minReplicas")
    maximum = component.get("maxReplicas")
    count = int(minimum) if isinstance(minimum, int) else 1
    if isinstance(maximum, int) and maximum > 0:
        count = min(count, maximum)
    return max(count, 0)


def merge_container(
    base: Mapping[str, Any] | None, over: Mapping[str, Any] | None
) -> dict[str, Any]:
    """``over`` laid on ``base``: scalars and lists replace, env/ports/mounts merge by name."""
    merged: dict[str, Any] = copy.deepcopy(dict(base or {}))
    for key, value in (over or {}).items():
        if key in _MERGE_BY_NAME and isinstance(value, list) and isinstance(merged.get(key), list):
            by_name = {item.get("name"): item for item in merged[key] if isinstance(item, dict)}
            order = [item.get("name") for item in merged[key] if isinstance(item, dict)]
            for item in value:
                if isinstance(item, dict):
                    if item.get("name") not in by_name:
                        order.append(item.get("name"))
                    by_name[item.get("name")] = copy.deepcopy(item)
            merged[key] = [by_name[name] for name in order]
        elif key == "resources" and isinstance(value, dict) and isinstance(merged.get(key), dict):
            resources = merged[key]
            for part, amounts in value.items():
                if isinstance(amounts, dict) and isinstance(resources.get(part), dict):
                    resources[part] = {**resources[part], **amounts}
                else:
                    resources[part] = copy.deepcopy(amounts)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def _pod_fields(source: Mapping[str, Any] | None) -> dict[str, Any]:
    return {
        k: copy.deepcopy(v)
        for k, v in (source or {}).items()
        if k not in _COMPONENT_OWN_FIELDS and k not in ("size",)
    }


def _template(
    runtime_part: Mapping[str, Any] | None,
    component_part: Mapping[str, Any] | None,
    *,
    labels: Mapping[str, str],
    annotations: Mapping[str, str],
) -> dict[str, Any]:
    spec = _pod_fields(runtime_part)
    own = _pod_fields(component_part)
    runner = merge_container(
        (runtime_part or {}).get("runner"), (component_part or {}).get("runner")
    )
    containers = own.pop("containers", None) or spec.pop("containers", None) or []
    spec.update(own)
    containers = [copy.deepcopy(c) for c in containers if isinstance(c, dict)]
    if runner:
        runner.setdefault("name", RUNNER_CONTAINER)
        for position, container in enumerate(containers):
            if container.get("name") == runner["name"]:
                containers[position] = merge_container(container, runner)
                break
        else:
            containers.insert(0, runner)
    if containers:
        spec["containers"] = containers
    metadata: dict[str, Any] = {}
    if labels:
        metadata["labels"] = dict(labels)
    if annotations:
        metadata["annotations"] = dict(annotations)
    template: dict[str, Any] = {"spec": spec}
    if metadata:
        template["metadata"] = metadata
    return template


def runners(
    component: Mapping[str, Any], runtime_config: Mapping[str, Any] | None
) -> list[dict[str, Any]]:
    labels = {**((runtime_config or {}).get("labels") or {}), **(component.get("labels") or {})}
    annotations = {
        **((runtime_config or {}).get("annotations") or {}),
        **(component.get("annotations") or {}),
    }
    multi = any(
        part in source
        for source in (component, runtime_config or {})
        for part in ("leader", "worker")
    )
    if not multi:
        base = dict(runtime_config or {})
        return [
            {
                "name": "default",
                "size": 1,
                "template": _template(base, component, labels=labels, annotations=annotations),
            }
        ]
    rt = runtime_config or {}
    leader_rt = {**_pod_fields(rt), **(rt.get("leader") or {})}
    leader_own = {**_pod_fields(component), **(component.get("leader") or {})}
    worker_rt = {**_pod_fields(rt), **(rt.get("worker") or {})}
    worker_own = {**_pod_fields(component), **(component.get("worker") or {})}
    size = (component.get("worker") or {}).get("size")
    if size is None:
        size = (rt.get("worker") or {}).get("size", 0)
    found = [
        {
            "name": "leader",
            "size": 1,
            "template": _template(leader_rt, leader_own, labels=labels, annotations=annotations),
        }
    ]
    if int(size) > 0:
        found.append(
            {
                "name": "worker",
                "size": int(size),
                "template": _template(
                    worker_rt, worker_own, labels=labels, annotations=annotations
                ),
            }
        )
    return found


def _has_image(runner_list: list[dict[str, Any]]) -> bool:
    for runner in runner_list:
        containers = ((runner.get("template") or {}).get("spec") or {}).get("containers") or []
        if not containers or not all(c.get("image") for c in containers):
            return False
    return True


def project(
    isvc: Mapping[str, Any],
    runtime: Mapping[str, Any] | None,
    *,
    default_mode: str | None,
) -> Projection:
    """The InferenceReplicas ``isvc`` should have (raises ProjectionError when it can't say)."""
    mode, source = resolve_mode(isvc, runtime, default_mode)
    spec = isvc.get("spec") or {}
    metadata = isvc.get("metadata") or {}
    refs = tuple(str(r.get("name")) for r in spec.get("replicaRefs") or [] if r.get("name"))
    if refs or mode != DEPLOYMENT_MODE_OME_NATIVE:
        return Projection(mode=mode, mode_source=source, replicas={}, fronted=refs)
    name = str(metadata.get("name"))
    runtime_name = (spec.get("runtime") or {}).get("name")
    if runtime is None and runtime_name:
        # Never project without the runtime the service names: its part of every template
        # would go, a new revision for every Instance, and come back with it (a runtime
        # deleted and created again rolled everything twice). The replicas stay as they are.
        raise ProjectionError(
            "RuntimeUnresolved",
            f"runtime {runtime_name} not found; the InferenceReplicas are left as they are "
            "until it exists",
        )
    runtime_spec = (runtime or {}).get("spec") or {}
    wanted: dict[str, dict[str, Any]] = {}
    for component in COMPONENTS:
        own = spec.get(component)
        if not isinstance(own, dict):
            continue
        runtime_config = runtime_spec.get(f"{component}Config")
        runner_list = runners(own, runtime_config if isinstance(runtime_config, dict) else None)
        if not _has_image(runner_list):
            raise ProjectionError(
                "RuntimeUnresolved" if runtime is None else "InvalidTemplate",
                f"spec.{component}: no container image; the runtime "
                f"{(spec.get('runtime') or {}).get('name', '<none>')!s} does not supply one",
            )
        irep_spec: dict[str, Any] = {
            "parentRef": {"name": name},
            "component": component,
            "replicas": instance_count(own),
            "runners": runner_list,
        }
        if isinstance(own.get("lifecycle"), dict):
            irep_spec["lifecycle"] = copy.deepcopy(own["lifecycle"])
        if spec.get("paused"):
            irep_spec["paused"] = True
        wanted[component] = {
            "apiVersion": API_VERSION,
            "kind": KIND_INFERENCE_REPLICA,
            "metadata": {
                "name": f"{name}-{component}",
                "namespace": metadata.get("namespace"),
                "labels": {LABEL_INFERENCE_SERVICE: name, LABEL_COMPONENT: component},
                "annotations": {ANNOTATION_CONTROLLER_WRITE: CONTROLLER_WRITE_TRUE},
                # Created with the InferenceReplica controller's finalizer already on, which
                # saves that controller a patch (and a round trip) per replica; it still
                # adds it to a standalone replica and removes it once the pods are drained.
                "finalizers": [FINALIZER_INFERENCE_REPLICA],
                "ownerReferences": [
                    {
                        "apiVersion": API_VERSION,
                        "kind": KIND_INFERENCE_SERVICE,
                        "name": name,
                        "uid": metadata.get("uid"),
                        "controller": True,
                        "blockOwnerDeletion": True,
                    }
                ],
            },
            "spec": irep_spec,
        }
        wanted[component]["metadata"]["annotations"][ANNOTATION_SPEC_HASH] = spec_hash(irep_spec)
    return Projection(mode=mode, mode_source=source, replicas=wanted)


def spec_hash(spec: Mapping[str, Any]) -> str:
    """A digest of the wanted spec, kept in an annotation on the InferenceReplica.

    Comparing digests of what omed *wanted* (rather than the stored spec) keeps a reconcile
    that changes nothing free of writes even when the API server prunes or normalises a
    field on the way in: the stored copy may differ from the wanted one forever.
    """
    return hashlib.sha256(orjson.dumps(spec, option=orjson.OPT_SORT_KEYS)).hexdigest()[:16]


def needs_update(current: Mapping[str, Any], wanted: Mapping[str, Any]) -> bool:
    """Whether the stored InferenceReplica differs from the wanted one in what omed owns."""
    cur_meta = current.get("metadata") or {}
    want_meta = wanted.get("metadata") or {}
    for field in ("labels", "annotations"):
        have = cur_meta.get(field) or {}
        if any(have.get(k) != v for k, v in (want_meta.get(field) or {}).items()):
            return True
    owners = cur_meta.get("ownerReferences") or []
    return not any(
        o.get("controller") and o.get("uid") == want_meta["ownerReferences"][0]["uid"]
        for o in owners
    )


def merge_diff(old: Mapping[str, Any], new: Mapping[str, Any]) -> dict[str, Any]:
    """The JSON merge patch (RFC 7386) that turns ``old`` into ``new``: keys of ``old`` that
    ``new`` lacks are ``None`` (removed), objects are compared key by key, anything else
    (lists included) is replaced whole when it differs. Empty when they are equal."""
    patch: dict[str, Any] = {key: None for key in old if key not in new}
    for key, value in new.items():
        before = old.get(key)
        if isinstance(value, Mapping) and isinstance(before, Mapping):
            nested = merge_diff(before, value)
            if nested:
                patch[key] = nested
        elif key not in old or before != value:
            patch[key] = copy.deepcopy(value)
    return patch


def update_patch(current: Mapping[str, Any], wanted: Mapping[str, Any]) -> dict[str, Any]:
    """A JSON merge patch of only what omed owns of ``current``, set as ``wanted`` has it.

    Owned: the spec (made equal to the wanted one, keys it lacks removed), the wanted labels
    and annotations (others are left as stored: a user's, and kubectl's last-applied
    configuration, which the informer cache strips), and the controller owner reference (other
    references kept). The patch carries ``current``'s resourceVersion, which the API server
    checks (a Conflict when the object moved on), so it is built on what the controller read.
    A PUT of the cached object would drop whatever the cache left out.
    """
    cur_meta = current.get("metadata") or {}
    want_meta = wanted["metadata"]
    meta: dict[str, Any] = {"resourceVersion": cur_meta["resourceVersion"]}
    for field in ("labels", "annotations"):
        have = cur_meta.get(field) or {}
        changed = {k: v for k, v in (want_meta.get(field) or {}).items() if have.get(k) != v}
        if changed:
            meta[field] = changed
    kept = [o for o in cur_meta.get("ownerReferences") or [] if not o.get("controller")]
    owners = [*want_meta["ownerReferences"], *kept]
    if owners != (cur_meta.get("ownerReferences") or []):
        meta["ownerReferences"] = copy.deepcopy(owners)
    patch: dict[str, Any] = {"metadata": meta}
    spec = merge_diff(current.get("spec") or {}, wanted["spec"])
    if spec:
        patch["spec"] = spec
    return patch
