"""``/validate-ome-io-v1beta1-inferenceservice``: the InferenceService validating webhook.

Why: an InferenceService is written by a user, and the controllers act on it later, with
nobody watching. A mistake they would only meet then (a replica range that can't be met, a
multi-pod Instance with no readiness rule, a migration request they can't read, a policy
reference nothing resolves) is refused here instead, with a message that names the field.

Invariants:

* DELETE is always admitted, and so is an UPDATE of an object already being deleted
  (``metadata.deletionTimestamp`` set): nothing may stand between an object and the
  removal of its finalizers.
* On UPDATE, an error about values the update leaves unchanged is a warning instead
  (ratcheting, :mod:`omed.webhooks.findings`), except for policy references while their
  feature is off.
* What is admitted, the controllers can read: the ``spec`` of an object that passes the
  rules is also parsed with :class:`omed.api.InferenceServiceSpec` (checked without making its
  instances, :data:`_SPEC_PARSES`), and any error from the model refuses it (the API server
  guarantees ``metadata``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final

import pydantic

from omed.api.component import RuntimeComponentConfig
from omed.api.constants import (
    ANNOTATION_DEPLOYMENT_MODE,
    COMPONENTS,
    KIND_CLUSTER_SERVING_RUNTIME,
    KIND_INFERENCE_SERVICE,
    KIND_SERVING_RUNTIME,
    KNOWN_DEPLOYMENT_MODES,
)
from omed.api.inferenceservice import InferenceServiceSpec
from omed.api.revision import MAX_REVISION_NAME_LENGTH, REVISION_HASH_LENGTH
from omed.api.shapecheck import shape_checker
from omed.webhooks.components import check_lifecycle, check_replicas
from omed.webhooks.findings import (
    Findings,
    Loc,
    as_object,
    check_choice,
    check_subdomain,
    show,
)
from omed.webhooks.migration import check_request, is_request_key, requested_components
from omed.webhooks.policies import FeatureGates, check_policy_refs
from omed.webhooks.review import (
    AdmissionResponse,
    Write,
    WriteValidator,
    allow,
    deny,
)

PATH: Final = "/validate-ome-io-v1beta1-inferenceservice"
MODEL_KINDS: Final = ("ClusterBaseModel", "BaseModel")
RUNTIME_KINDS: Final = (KIND_SERVING_RUNTIME, KIND_CLUSTER_SERVING_RUNTIME)

_NAME: Final = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")
"""Upstream OME's InferenceService name format (a DNS-1035 label, length checked apart)."""
_NAME_RULE: Final = (
    "must start with a lowercase letter and hold only lowercase letters, digits and '-', "
    "ending with a letter or digit"
)


def _name_ok(name: str) -> bool:
    return _NAME.fullmatch(name) is not None


def max_name_length(component: str) -> int:
    """Longest InferenceService name whose ``<name>-<component>-<hash>`` revisions fit a label
    value (63 characters): 47 with an engine or router, 46 with a decoder."""
    return MAX_REVISION_NAME_LENGTH - REVISION_HASH_LENGTH - len(component) - 2


_SHORTEST_NAME_LIMIT: Final = min(max_name_length(component) for component in COMPONENTS)
"""A name this long or shorter fits with every component."""


def _check_name(
    findings: Findings, *, metadata: Mapping[str, Any], spec: Mapping[str, Any]
) -> None:
    name = metadata.get("name")
    if not isinstance(name, str) or not name:
        return  # generateName: the API server names it later, and checks the name it makes
    loc: Loc = ("metadata", "name")
    if not _name_ok(name):
        findings.error(loc, f"{_NAME_RULE}, got {show(name)}")
        return
    if len(name) <= _SHORTEST_NAME_LIMIT:
        return
    for component in COMPONENTS:
        if isinstance(spec.get(component), dict) and len(name) > max_name_length(component):
            findings.error(
                loc,
                f"must be at most {max_name_length(component)} characters with a {component}, "
                f"so that its revision names (<name>-{component}-<hash>) fit in 63 "
                f"characters, got {len(name)}",
            )
            return


def _check_refs(findings: Findings, spec: Mapping[str, Any]) -> None:
    model = as_object(findings, ("spec", "model"), value=spec.get("model"))
    if model is not None:
        check_subdomain(findings, ("spec", "model", "name"), value=model.get("name"))
        if (kind := model.get("kind")) is not None:
            check_choice(findings, ("spec", "model", "kind"), value=kind, choices=MODEL_KINDS)
    runtime = as_object(findings, ("spec", "runtime"), value=spec.get("runtime"))
    if runtime is not None:
        check_subdomain(findings, ("spec", "runtime", "name"), value=runtime.get("name"))
        if (kind := runtime.get("kind")) is not None:
            check_choice(findings, ("spec", "runtime", "kind"), value=kind, choices=RUNTIME_KINDS)
    refs = spec.get("replicaRefs")
    if refs is None:
        return
    if not isinstance(refs, list):
        findings.error(("spec", "replicaRefs"), f"must be a list, got {show(refs)}")
        return
    for i, ref in enumerate(refs):
        body = as_object(findings, ("spec", "replicaRefs", i), value=ref)
        if body is not None:
            check_subdomain(findings, ("spec", "replicaRefs", i, "name"), value=body.get("name"))


_MODE_ANNOTATION_LOC: Final[Loc] = ("metadata", "annotations", ANNOTATION_DEPLOYMENT_MODE)
_MODE_FIELD_LOC: Final[Loc] = ("spec", "deploymentMode")


def _check_mode(
    findings: Findings, *, metadata: Mapping[str, Any], spec: Mapping[str, Any]
) -> None:
    annotations = metadata.get("annotations")
    annotated = (
        annotations.get(ANNOTATION_DEPLOYMENT_MODE) if isinstance(annotations, dict) else None
    )
    for loc, mode in (
        (_MODE_ANNOTATION_LOC, annotated),
        (_MODE_FIELD_LOC, spec.get("deploymentMode")),
    ):
        if mode is None or (mode.__class__ is str and mode in KNOWN_DEPLOYMENT_MODES):
            continue
        if not isinstance(mode, str) or not mode:
            findings.error(loc, f"must be a deployment mode such as OMENative, got {show(mode)}")
        elif mode not in KNOWN_DEPLOYMENT_MODES:
            findings.warn(
                loc,
                f"{show(mode)} is not a deployment mode that this OME knows "
                f"({', '.join(KNOWN_DEPLOYMENT_MODES)}); no OMENative controller acts on it",
            )


def validate_inferenceservice(obj: Mapping[str, Any], *, gates: FeatureGates) -> Findings:
    """Every rule, on an InferenceService as written (no ratcheting, no model parse)."""
    findings = Findings()
    metadata = as_object(findings, ("metadata",), value=obj.get("metadata")) or {}
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        findings.error(("spec",), f"must be an object, got {show(spec)}")
        return findings
    annotations = as_object(
        findings, ("metadata", "annotations"), value=metadata.get("annotations")
    )
    annotations = annotations or {}

    _check_name(findings, metadata=metadata, spec=spec)
    _check_mode(findings, metadata=metadata, spec=spec)
    request_keys = [key for key in annotations if is_request_key(key)]
    requested = requested_components(annotations) if request_keys else frozenset[str]()
    for component, loc in _COMPONENT_LOCS:
        body = as_object(findings, loc, value=spec.get(component))
        if body is None:
            continue
        check_replicas(findings, loc, component=body)
        check_lifecycle(findings, loc, component=body, migration_requested=component in requested)
    _check_refs(findings, spec)
    check_policy_refs(findings, spec, gates=gates)
    for key in request_keys:
        check_request(findings, key=key, value=annotations[key], spec=spec)
    return findings


_COMPONENT_LOCS: Final[tuple[tuple[str, Loc], ...]] = tuple(
    (component, ("spec", component)) for component in COMPONENTS
)


_SPEC_PARSES: Final = shape_checker(
    InferenceServiceSpec, dropped=(RuntimeComponentConfig._replica_bounds,)
)
"""Whether a spec parses as :class:`InferenceServiceSpec`, checked without making its model
instances (:mod:`omed.api.shapecheck`). It leaves out the model's replica-bounds validator,
which :func:`~omed.webhooks.components.check_replicas` checks more strictly before the parse
runs (a ``maxReplicas`` of 0 is refused there, and unbounded for the model)."""


def _model_errors(findings: Findings, obj: Mapping[str, Any]) -> None:
    """Parse ``spec`` with the model the controllers read it with (only when the rules found
    nothing: see :data:`_SPEC_PARSES`). A spec that parses costs no model instances; one that
    doesn't is parsed by the model itself, for its messages. (The API server itself guarantees
    the shape of ``metadata``, so it isn't parsed again.)"""
    spec = obj.get("spec")
    if _SPEC_PARSES(spec):
        return
    try:
        InferenceServiceSpec.model_validate(spec)
    except pydantic.ValidationError as exc:
        for error in exc.errors(include_url=False, include_input=False):
            loc = tuple(part for part in error["loc"] if isinstance(part, str | int))
            findings.error(("spec", *loc), error["msg"])


class InferenceServiceValidator(WriteValidator):
    """The validating webhook for InferenceServices.

    ``gates`` says which alpha policy kinds this cluster runs (both off by default).
    """

    path: Final = PATH
    kind = KIND_INFERENCE_SERVICE
    plural = "InferenceServices"

    def __init__(self, *, gates: FeatureGates | None = None) -> None:
        self._gates = gates or FeatureGates()

    def check(self, write: Write) -> AdmissionResponse:
        obj, old = write.obj, write.old
        findings = validate_inferenceservice(obj, gates=self._gates)
        # An UPDATE that leaves the spec alone (labels, annotations such as a migration
        # request) would only ratchet what the model finds: skip the parse.
        if not findings.errors and (old is None or old.get("spec") != obj.get("spec")):
            _model_errors(findings, obj)
        findings.ratchet(new=obj, old=old)
        if findings.errors:
            return deny(findings.refusal(), warnings=findings.warnings)
        return allow(warnings=findings.warnings)
