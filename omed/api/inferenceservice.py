"""The InferenceService (``ome.io/v1beta1``, short name ``isvc``), as far as OMENative uses it.

Users write InferenceServices for upstream OME, and their manifests must keep working, so the
spec and the status keep every field that omed doesn't model (upstream's other deployment modes,
its ``url``, ``address`` and model status): the CRD preserves them, and a status write through
:class:`InferenceServiceStatus` loses none. omed types only what it reads or writes.

Annotations with meaning on an InferenceService:

* ``ome.io/deploymentMode`` wins over ``spec.deploymentMode`` when set
  (:meth:`InferenceService.declared_deployment_mode`).
* ``ome.io/migration-request-v1-<uuid>`` carries a manual migration request as JSON.
* ``ome.io/rollout-promote`` and ``ome.io/rollout-rollback`` steer a rollout.

``spec.paused`` pauses the rollout of every component: nothing moves to a new revision until it
is cleared, and migrations wait (their deadlines still run).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from omed.api.base import ApiModel, Condition, ObjectMeta, OpenApiModel
from omed.api.component import ComponentSpec
from omed.api.constants import (
    ANNOTATION_DEPLOYMENT_MODE,
    API_VERSION,
    COMPONENTS,
    KIND_INFERENCE_SERVICE,
    ComponentName,
)

RuntimeKind = Literal["ServingRuntime", "ClusterServingRuntime"]


class ModelRef(OpenApiModel):
    """The model an InferenceService serves."""

    name: str
    """Name of the BaseModel or ClusterBaseModel."""
    kind: str | None = None
    """BaseModel or ClusterBaseModel (the default)."""

    @property
    def effective_kind(self) -> str:
        return self.kind or "ClusterBaseModel"


class RuntimeRef(OpenApiModel):
    """The serving runtime whose configs supply the components' pod templates."""

    name: str
    """Name of the ServingRuntime or ClusterServingRuntime."""
    kind: RuntimeKind | None = None
    """ServingRuntime (in the InferenceService's namespace) or ClusterServingRuntime. When
    unset, a ServingRuntime of that name wins over a ClusterServingRuntime."""


class ReplicaRef(ApiModel):
    """A standalone InferenceReplica that the InferenceService fronts."""

    name: str
    """Name of the InferenceReplica, in the InferenceService's namespace."""


class InferenceServiceSpec(OpenApiModel):
    """Desired state of an InferenceService. Fields that omed doesn't model are kept."""

    deployment_mode: str | None = None
    """OMENative, RawDeployment, Serverless, MultiNode or PDDisaggregated. The annotation
    ome.io/deploymentMode wins when set."""
    model: ModelRef | None = None
    """The model to serve."""
    runtime: RuntimeRef | None = None
    """The serving runtime to run it with."""
    engine: ComponentSpec | None = None
    """The engine component (prefill in a prefill-decode setup)."""
    decoder: ComponentSpec | None = None
    """The decoder component of a prefill-decode setup."""
    router: ComponentSpec | None = None
    """The router component."""
    replica_refs: list[ReplicaRef] | None = None
    """Standalone InferenceReplicas that this InferenceService fronts; it writes nothing on
    them and has no Instances of its own."""
    paused: bool | None = None
    """Pause rollouts of every component until cleared."""

    def component(self, name: ComponentName) -> ComponentSpec | None:
        """The spec of component ``name``, or ``None`` when the service has none."""
        spec: ComponentSpec | None = getattr(self, name)
        return spec

    def components(self) -> dict[ComponentName, ComponentSpec]:
        """The components that are set, in reporting order (engine, decoder, router)."""
        found: dict[ComponentName, ComponentSpec] = {}
        for name in COMPONENTS:
            spec = self.component(name)
            if spec is not None:
                found[name] = spec
        return found


class ComponentStatus(OpenApiModel):
    """Summary of one OMENative component, from its InferenceReplica."""

    replicas: int | None = None
    """Instances of the component."""
    ready_replicas: int | None = None
    """Instances that are Ready."""
    serving_replicas: int | None = None
    """Instances whose pods all serve."""
    updated_replicas: int | None = None
    """Instances on the update revision."""
    inference_replica: str | None = None
    """Name of the component's InferenceReplica."""
    current_revision: str | None = None
    """Revision that the component's Instances ran before the update under way."""
    update_revision: str | None = None
    """Revision that the component's Instances move to."""


class InferenceServiceStatus(OpenApiModel):
    """Observed state of an InferenceService. Fields that omed doesn't model are kept."""

    observed_generation: int | None = None
    """The metadata.generation that the status was computed from."""
    conditions: list[Condition] | None = Field(
        default=None,
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"]},
    )
    """Ready, EngineReady, DecoderReady, RouterReady and others."""
    components: dict[str, ComponentStatus] | None = None
    """Per-component summaries, keyed by engine, decoder or router."""

    def condition(self, condition_type: str) -> Condition | None:
        """The condition of type ``condition_type``, or ``None``."""
        for condition in self.conditions or ():
            if condition.type == condition_type:
                return condition
        return None


class InferenceService(ApiModel):
    """An InferenceService: a model served by a runtime, in up to three components."""

    api_version: str = API_VERSION
    kind: Literal["InferenceService"] = KIND_INFERENCE_SERVICE
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: InferenceServiceSpec
    status: InferenceServiceStatus | None = None

    def declared_deployment_mode(self) -> str | None:
        """The mode the user asked for: the ome.io/deploymentMode annotation when set, else
        ``spec.deploymentMode``. ``None`` means the runtime decides."""
        return self.metadata.annotation(ANNOTATION_DEPLOYMENT_MODE) or self.spec.deployment_mode
