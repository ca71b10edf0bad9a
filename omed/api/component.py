"""The component shape shared by InferenceService components and serving-runtime configs.

Upstream OME writes a component (``spec.engine``, a runtime's ``engineConfig``, ...) as core/v1
pod spec fields inline, next to OME's own fields: replicas, ``runner``, ``leader``, ``worker``
and ``lifecycle``. omed types OME's fields and keeps the pod spec part free-form: the API server
validates core/v1 types when the pods are created, and a field a newer Kubernetes adds must not
be lost. So these models keep unknown keys (the CRD preserves them), and :meth:`pod_spec` picks
out the keys that belong to a ``PodSpec`` by name, never by elimination, so that an upstream
extension field that omed doesn't model can't leak into a pod.
"""

from __future__ import annotations

from typing import Any, Final

from pydantic import Field, model_validator

from omed.api.base import FreeForm, OpenApiModel
from omed.api.lifecycle import Lifecycle

POD_SPEC_FIELDS: Final = frozenset(
    {
        "activeDeadlineSeconds",
        "affinity",
        "automountServiceAccountToken",
        "containers",
        "dnsConfig",
        "dnsPolicy",
        "enableServiceLinks",
        "ephemeralContainers",
        "hostAliases",
        "hostIPC",
        "hostNetwork",
        "hostPID",
        "hostUsers",
        "hostname",
        "hostnameOverride",
        "imagePullSecrets",
        "initContainers",
        "nodeName",
        "nodeSelector",
        "os",
        "overhead",
        "preemptionPolicy",
        "priority",
        "priorityClassName",
        "readinessGates",
        "resourceClaims",
        "resources",
        "restartPolicy",
        "runtimeClassName",
        "schedulerName",
        "schedulingGates",
        "securityContext",
        "serviceAccount",
        "serviceAccountName",
        "setHostnameAsFQDN",
        "shareProcessNamespace",
        "subdomain",
        "terminationGracePeriodSeconds",
        "tolerations",
        "topologySpreadConstraints",
        "volumes",
        "workloadRef",
    }
)
"""JSON names of the core/v1 ``PodSpec`` fields that a component may carry inline."""


class PodSpecFields(OpenApiModel):
    """Core/v1 pod spec fields written inline; the commonly used ones are named here, and any
    other ``PodSpec`` field is kept as written."""

    containers: list[FreeForm] | None = None
    """Containers of the pod (core/v1 Container)."""
    init_containers: list[FreeForm] | None = None
    """Init containers of the pod (core/v1 Container)."""
    volumes: list[FreeForm] | None = None
    """Volumes of the pod (core/v1 Volume)."""
    node_selector: dict[str, str] | None = None
    """Node labels the pod must match."""
    tolerations: list[FreeForm] | None = None
    """Tolerations of the pod (core/v1 Toleration)."""
    affinity: FreeForm | None = None
    """Scheduling constraints of the pod (core/v1 Affinity)."""
    service_account_name: str | None = None
    """Service account that the pod runs as."""
    image_pull_secrets: list[FreeForm] | None = None
    """Secrets for pulling the pod's images (core/v1 LocalObjectReference)."""
    scheduler_name: str | None = None
    """Scheduler that places the pod."""
    priority_class_name: str | None = None
    """Priority class of the pod."""

    def pod_spec(self) -> dict[str, Any]:
        """The inline ``PodSpec`` fields, camelCase, unset ones left out."""
        dumped = self.model_dump(by_alias=True, exclude_none=True, mode="json")
        return {key: value for key, value in dumped.items() if key in POD_SPEC_FIELDS}


class LeaderSpec(PodSpecFields):
    """The leader pod of a multi-pod Instance: pod spec fields plus its runner container."""

    runner: FreeForm | None = None
    """The leader's main container (core/v1 Container)."""


class WorkerSpec(PodSpecFields):
    """The worker pods of a multi-pod Instance."""

    size: int | None = Field(default=None, ge=0)
    """Worker pods per Instance, besides the leader."""
    runner: FreeForm | None = None
    """The workers' main container (core/v1 Container)."""


class RuntimeComponentConfig(PodSpecFields):
    """A component as a serving runtime or an InferenceService describes it."""

    min_replicas: int | None = Field(default=None, ge=0)
    """Fewest Instances of the component."""
    max_replicas: int | None = Field(default=None, ge=0)
    """Most Instances of the component; 0, as upstream reads it, sets no upper bound."""
    runner: FreeForm | None = None
    """The main container of a single-pod Instance (core/v1 Container)."""
    leader: LeaderSpec | None = None
    """The leader pod of a multi-pod Instance."""
    worker: WorkerSpec | None = None
    """The worker pods of a multi-pod Instance."""
    labels: dict[str, str] | None = None
    """Labels added to the component's pods."""
    annotations: dict[str, str] | None = None
    """Annotations added to the component's pods."""

    @model_validator(mode="after")
    def _replica_bounds(self) -> RuntimeComponentConfig:
        if (
            self.min_replicas is not None
            and self.max_replicas  # 0 means unbounded
            and self.max_replicas < self.min_replicas
        ):
            msg = (
                f"maxReplicas ({self.max_replicas}) must not be less than "
                f"minReplicas ({self.min_replicas})"
            )
            raise ValueError(msg)
        return self

    @property
    def is_multi_pod(self) -> bool:
        """Whether an Instance is a leader and workers rather than one pod."""
        return self.leader is not None or self.worker is not None


class ComponentSpec(RuntimeComponentConfig):
    """An InferenceService component (engine, decoder or router): Instances of one pod, or of
    a leader and workers, with their lifecycle. Pod spec fields are written inline."""

    lifecycle: Lifecycle | None = None
    """How OMENative restarts, updates, readies and migrates the component's Instances."""
