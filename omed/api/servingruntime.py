"""ServingRuntime (namespaced) and ClusterServingRuntime (cluster-scoped), minimally.

omed reads a runtime only to resolve an InferenceService's ``spec.runtime`` to the pod template
of each component: the runtime's ``engineConfig``, ``decoderConfig`` and ``routerConfig``, or its
top-level pod spec fields. Upstream defines much more (model size ranges, protocol versions,
...); this model types what omed reads and keeps everything else, and the CRD preserves unknown
fields, so installing omed's CRD over upstream's loses nothing a user wrote.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from omed.api.base import ApiModel, FreeForm, ObjectMeta
from omed.api.component import PodSpecFields, RuntimeComponentConfig
from omed.api.constants import (
    API_VERSION,
    KIND_CLUSTER_SERVING_RUNTIME,
    KIND_SERVING_RUNTIME,
    ComponentName,
)


class ServingRuntimeSpec(PodSpecFields):
    """A runtime: the pods that serve a family of models, per component."""

    supported_model_formats: list[FreeForm] | None = None
    """Model formats the runtime serves."""
    disabled: bool | None = None
    """Whether the runtime is disabled for selection."""
    deployment_mode: str | None = None
    """Deployment mode the runtime asks for, such as OMENative."""
    engine_config: RuntimeComponentConfig | None = None
    """The engine component's pods."""
    decoder_config: RuntimeComponentConfig | None = None
    """The decoder component's pods."""
    router_config: RuntimeComponentConfig | None = None
    """The router component's pods."""

    def component_config(self, component: ComponentName) -> RuntimeComponentConfig | None:
        """The runtime's config for ``component``, or ``None``."""
        config: RuntimeComponentConfig | None = getattr(self, f"{component}_config")
        return config


class ServingRuntime(ApiModel):
    """A namespaced serving runtime."""

    api_version: str = API_VERSION
    kind: Literal["ServingRuntime"] = KIND_SERVING_RUNTIME
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: ServingRuntimeSpec
    status: FreeForm | None = None


class ClusterServingRuntime(ApiModel):
    """A cluster-scoped serving runtime."""

    api_version: str = API_VERSION
    kind: Literal["ClusterServingRuntime"] = KIND_CLUSTER_SERVING_RUNTIME
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: ServingRuntimeSpec
    status: FreeForm | None = None
