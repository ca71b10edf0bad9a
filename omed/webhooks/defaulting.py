"""``/mutate-ome-io-v1beta1-inferenceservice``: defaults from the ConfigMap's ``deploy`` entry.

Why: the cluster's operator sets, in the ``deploy`` entry of ``inferenceservice-config``, the
deployment mode and replica counts that an InferenceService gets when it names none. Writing
the default into the object when it is created (rather than reading the ConfigMap at every
reconcile) pins it: a later ConfigMap edit doesn't move services that already run, and
``kubectl get -o yaml`` shows the values the controllers act on.

What is defaulted (as a JSON Patch, ``patchType: JSONPatch``):

* On CREATE only, the annotation ``ome.io/deploymentMode`` (the place upstream OME writes
  it), when neither that annotation nor ``spec.deploymentMode`` is set, to
  ``deploy.defaultDeploymentMode``. Skipped when the entry doesn't set one, or names a mode
  this OME doesn't know. Not on UPDATE: moving a running service to another mode is a
  decision, not a default.
* On CREATE and UPDATE, ``minReplicas`` and ``maxReplicas`` of each component present
  (engine, decoder, router) that omits them, from ``deploy.replicas.minReplicas`` (1 when
  the entry doesn't set it, as upstream OME defaults) and ``deploy.replicas.maxReplicas``
  (left out when the entry doesn't set it: no upper bound). A default never makes a valid
  component invalid: a defaulted ``minReplicas`` is lowered to the component's own
  ``maxReplicas``, and a defaulted ``maxReplicas`` raised to its ``minReplicas``.

Invariants: a value the user wrote is never changed. An object being deleted is never
patched. When the ``deploy`` entry can't be read in time, or is invalid, the object is
admitted unchanged with a warning that says so: a bad ConfigMap must not stop every
InferenceService write in the cluster (the validating webhook still checks the object).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final

from omed.api.constants import ANNOTATION_DEPLOYMENT_MODE, COMPONENTS, KNOWN_DEPLOYMENT_MODES
from omed.config import DeployConfig
from omed.log import kv
from omed.webhooks.findings import is_int
from omed.webhooks.review import AdmissionRequest, AdmissionResponse, allow, is_deleting

PATH: Final = "/mutate-ome-io-v1beta1-inferenceservice"
DEPLOY_CONFIG_TIMEOUT: Final = 2.0
"""Seconds to wait for the ``deploy`` entry; well inside the API server's webhook timeout."""
WARN_NO_DEFAULTS: Final = "deploy defaults of ConfigMap inferenceservice-config not applied: "

BUILTIN_MIN_REPLICAS: Final = 1
"""``minReplicas`` of a component that omits it when ``deploy.replicas.minReplicas`` is unset
(upstream OME's default). ``maxReplicas`` has no built-in default: left out, it is unbounded."""

DeployConfigSource = Callable[[], Awaitable[DeployConfig]]
"""Returns the current ``deploy`` entry (the manager reads it through the config TTL cache);
raises when it can't."""

log = logging.getLogger("webhooks.defaulter")


def _pointer(*parts: str) -> str:
    return "".join("/" + part.replace("~", "~0").replace("/", "~1") for part in parts)


def default_patch(
    obj: Mapping[str, Any], *, deploy: DeployConfig, operation: str
) -> list[dict[str, Any]]:
    """The JSON Patch operations that default ``obj`` (pure)."""
    ops: list[dict[str, Any]] = []
    metadata = obj.get("metadata")
    spec = obj.get("spec")
    if not isinstance(metadata, dict) or not isinstance(spec, dict):
        return ops  # the validating webhook refuses it
    annotations = metadata.get("annotations")
    if annotations is not None and not isinstance(annotations, dict):
        return ops

    mode = deploy.default_deployment_mode
    if (
        operation == "CREATE"
        and mode in KNOWN_DEPLOYMENT_MODES
        and not (annotations or {}).get(ANNOTATION_DEPLOYMENT_MODE)
        and not spec.get("deploymentMode")
    ):
        if annotations is None:
            ops.append(
                {
                    "op": "add",
                    "path": "/metadata/annotations",
                    "value": {ANNOTATION_DEPLOYMENT_MODE: mode},
                }
            )
        else:
            ops.append(
                {
                    "op": "add",
                    "path": _pointer("metadata", "annotations", ANNOTATION_DEPLOYMENT_MODE),
                    "value": mode,
                }
            )

    replicas = deploy.replicas
    default_min = BUILTIN_MIN_REPLICAS
    default_max: int | None = None
    if replicas is not None:
        if replicas.min_replicas is not None:
            default_min = replicas.min_replicas
        default_max = replicas.max_replicas
    for component in COMPONENTS:
        body = spec.get(component)
        if not isinstance(body, dict):
            continue
        own_min, own_max = body.get("minReplicas"), body.get("maxReplicas")
        low = own_min if is_int(own_min) else None
        if own_min is None:
            low = default_min
            if is_int(own_max) and own_max >= 1:
                low = min(low, own_max)
            ops.append(
                {"op": "add", "path": _pointer("spec", component, "minReplicas"), "value": low}
            )
        if own_max is None and default_max is not None:
            high = default_max
            if low is not None:
                high = max(high, low)
            ops.append(
                {"op": "add", "path": _pointer("spec", component, "maxReplicas"), "value": high}
            )
    return ops


class InferenceServiceDefaulter:
    """The mutating webhook for InferenceServices; ``deploy_config`` supplies the entry."""

    path: Final = PATH

    def __init__(
        self, *, deploy_config: DeployConfigSource, timeout: float = DEPLOY_CONFIG_TIMEOUT
    ) -> None:
        self._deploy_config = deploy_config
        self._timeout = timeout

    async def admit(self, request: AdmissionRequest) -> AdmissionResponse:
        obj = request.object
        if request.operation not in ("CREATE", "UPDATE") or obj is None:
            return allow()
        if is_deleting(obj):
            return allow()
        try:
            async with asyncio.timeout(self._timeout):
                deploy = await self._deploy_config()
        except TimeoutError:
            return self._unavailable(request, f"reading it took more than {self._timeout:g}s")
        except Exception as exc:  # a bad or unreadable entry must not block every write
            return self._unavailable(request, str(exc) or type(exc).__name__)
        return allow(patch=default_patch(obj, deploy=deploy, operation=request.operation))

    @staticmethod
    def _unavailable(request: AdmissionRequest, why: str) -> AdmissionResponse:
        log.warning(
            "InferenceService defaults not applied",
            extra=kv(namespace=request.namespace, name=request.name, error=why),
        )
        return allow(warnings=[WARN_NO_DEFAULTS + why])
