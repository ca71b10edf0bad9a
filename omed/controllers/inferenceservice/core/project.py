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
- the models are read, the wire form built: a component's pod spec fields and runner are
  free-form, laid over the runtime's as JSON, and integral numbers are written as the API
  server stores them (``2``, not ``2.0``), so the digest of the wanted spec is the same
  whatever float a model holds;
- only the runtime's ``spec`` is read, never its metadata (uid, resourceVersion,
  creationTimestamp), so a runtime created again with the same spec projects the same
  replicas; a runtime the service names that doesn't exist (yet, or any more) is
  ``RuntimeUnresolved``, never a projection without it.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Mapping
from typing import Any, Final

from omed.api.base import ObjectMeta, OwnerReference
from omed.api.component import RuntimeComponentConfig
from omed.api.constants import (
    ANNOTATION_CONTROLLER_WRITE,
    ANNOTATION_DEPLOYMENT_MODE,
    COMPONENTS,
    CONTROLLER_WRITE_TRUE,
    DEPLOYMENT_MODE_OME_NATIVE,
    FINALIZER_INFERENCE_REPLICA,
    KIND_INFERENCE_SERVICE,
    LABEL_COMPONENT,
    LABEL_INFERENCE_SERVICE,
)
from omed.api.inferencereplica import (
    InferenceReplica,
    InferenceReplicaSpec,
    ParentRef,
    Runner,
    inference_replica_name,
)
from omed.api.inferenceservice import InferenceService
from omed.api.servingruntime import ServingRuntimeSpec
from omed.controllers.inferenceservice.core.mode import mode_of
from omed.controllers.inferenceservice.core.names import (
    REASON_INVALID_TEMPLATE,
    REASON_RUNTIME_UNRESOLVED,
)
from omed.controllers.inferenceservice.core.owned import (
    ANNOTATION_SPEC_HASH,
    spec_hash,
    spec_json,
)
from omed.controllers.owners import controller_reference

RUNNER_CONTAINER: Final = "ome-container"
"""Name of the runner container when neither the runtime nor the component names it."""

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
    replicas: dict[str, InferenceReplica]
    """Wanted InferenceReplicas by component, for OMENative components only."""
    fronted: tuple[str, ...] = ()
    """Names of standalone InferenceReplicas that ``spec.replicaRefs`` fronts."""


def resolve_mode(
    service: InferenceService, runtime: ServingRuntimeSpec | None, default_mode: str | None
) -> tuple[str, str]:
    """The deployment mode and where it came from: the annotation, the service's spec, the
    runtime's, the ConfigMap's default, else RawDeployment."""
    return mode_of(
        annotation=service.metadata.annotation(ANNOTATION_DEPLOYMENT_MODE),
        service_mode=service.spec.deployment_mode,
        runtime_mode=runtime.deployment_mode if runtime is not None else None,
        default_mode=default_mode,
    )


def _json(model: RuntimeComponentConfig | None) -> dict[str, Any] | None:
    """A component as JSON, for its pod spec fields and runners (free-form, as written: no
    float of a model reaches a template)."""
    if model is None:
        return None
    dumped: dict[str, Any] = model.model_dump(by_alias=True, exclude_none=True, mode="json")
    return dumped


def instance_count(component: RuntimeComponentConfig) -> int:
    """``minReplicas`` when set (capped by a non-zero ``maxReplicas``), else 1."""
    count = component.min_replicas if component.min_replicas is not None else 1
    if component.max_replicas:
        count = min(count, component.max_replicas)
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
    service: InferenceService,
    runtime: ServingRuntimeSpec | None,
    *,
    default_mode: str | None,
) -> Projection:
    """The InferenceReplicas ``service`` should have (raises ProjectionError when it can't
    say). ``runtime`` is the spec of the runtime ``spec.runtime`` names, ``None`` when the
    caches don't have it."""
    mode, source = resolve_mode(service, runtime, default_mode)
    spec = service.spec
    name = str(service.metadata.name)
    refs = tuple(ref.name for ref in spec.replica_refs or () if ref.name)
    if refs or mode != DEPLOYMENT_MODE_OME_NATIVE:
        return Projection(mode=mode, mode_source=source, replicas={}, fronted=refs)
    runtime_name = spec.runtime.name if spec.runtime is not None else None
    if runtime is None and runtime_name:
        # Never project without the runtime the service names: its part of every template
        # would go, a new revision for every Instance, and come back with it (a runtime
        # deleted and created again would roll everything twice). The replicas stay as they
        # are.
        raise ProjectionError(
            REASON_RUNTIME_UNRESOLVED,
            f"runtime {runtime_name} not found; the InferenceReplicas are left as they are "
            "until it exists",
        )
    wanted: dict[str, InferenceReplica] = {}
    for component in COMPONENTS:
        own = spec.component(component)
        if own is None:
            continue
        runtime_config = _json(runtime.component_config(component) if runtime else None)
        runner_list = runners(_json(own) or {}, runtime_config)
        if not _has_image(runner_list):
            raise ProjectionError(
                REASON_RUNTIME_UNRESOLVED if runtime is None else REASON_INVALID_TEMPLATE,
                f"spec.{component}: no container image; the runtime "
                f"{runtime_name if runtime_name is not None else '<none>'!s} does not "
                "supply one",
            )
        irep_spec = InferenceReplicaSpec(
            parent_ref=ParentRef(name=name),
            component=component,
            replicas=instance_count(own),
            runners=[Runner.model_validate(runner) for runner in runner_list],
            lifecycle=own.lifecycle.model_copy(deep=True) if own.lifecycle else None,
            paused=True if spec.paused else None,
        )
        wanted[component] = InferenceReplica(
            metadata=ObjectMeta(
                name=inference_replica_name(name, component),
                namespace=service.metadata.namespace,
                labels={LABEL_INFERENCE_SERVICE: name, LABEL_COMPONENT: component},
                annotations={
                    ANNOTATION_CONTROLLER_WRITE: CONTROLLER_WRITE_TRUE,
                    ANNOTATION_SPEC_HASH: spec_hash(spec_json(irep_spec)),
                },
                # Created with the InferenceReplica controller's finalizer already on, which
                # saves that controller a patch (and a round trip) per replica; it still
                # adds it to a standalone replica and removes it once the pods are drained.
                finalizers=[FINALIZER_INFERENCE_REPLICA],
                owner_references=[
                    OwnerReference.model_validate(
                        controller_reference(
                            kind=KIND_INFERENCE_SERVICE, name=name, uid=str(service.metadata.uid)
                        )
                    )
                ],
            ),
            spec=irep_spec,
        )
    return Projection(mode=mode, mode_source=source, replicas=wanted)
