"""The deployment mode of an InferenceService: the first of four values that is set.

Why a module of its own: the projection (:mod:`.project`) resolves the mode from its models,
``kubectl ome`` from the JSON the API server answers (:func:`resolve_mode_json`), and the
rule must be one; this module needs no model, so the plugin's reports import no pydantic.

The rule: the ``ome.io/deploymentMode`` annotation, else ``spec.deploymentMode``, else the
runtime's ``deploymentMode``, else ``deploy.defaultDeploymentMode``, else RawDeployment;
with where it came from (Annotation, ServiceSpec, Runtime, ConfigMap or Default).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from omed.api.constants import ANNOTATION_DEPLOYMENT_MODE

__all__ = ["mode_of", "resolve_mode_json"]


def resolve_mode_json(
    isvc: Mapping[str, Any], runtime: Mapping[str, Any] | None, default_mode: str | None
) -> tuple[str, str]:
    """:func:`resolve_mode` of objects held as JSON (``kubectl ome`` reads what the API
    server answers, and must say something of an object the models would refuse)."""
    annotations = (isvc.get("metadata") or {}).get("annotations") or {}
    runtime_spec = (runtime or {}).get("spec") or {}
    return mode_of(
        annotation=annotations.get(ANNOTATION_DEPLOYMENT_MODE),
        service_mode=(isvc.get("spec") or {}).get("deploymentMode"),
        runtime_mode=runtime_spec.get("deploymentMode"),
        default_mode=default_mode,
    )


def mode_of(
    *,
    annotation: str | None,
    service_mode: str | None,
    runtime_mode: str | None,
    default_mode: str | None,
) -> tuple[str, str]:
    """The deployment mode from the four values it weighs: the first set wins."""
    if annotation:
        return str(annotation), "Annotation"
    if service_mode:
        return str(service_mode), "ServiceSpec"
    if runtime_mode:
        return str(runtime_mode), "Runtime"
    if default_mode:
        return default_mode, "ConfigMap"
    return "RawDeployment", "Default"
