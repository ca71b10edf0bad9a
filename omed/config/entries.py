"""Typed entries of the inferenceservice-config ConfigMap, and startup validation.

This module holds the startup entries and re-exports the reconcile-time ones
(:mod:`omed.config.reconcile`) and the field rules (:mod:`omed.config.rules`), so callers
import every entry type from one place.

Why: OME keeps most settings in one ConfigMap, one JSON document per key, written by the
chart. Some entries are read once when the manager starts and must be valid for it to start
(omeAgent, multicluster, omenativeStatus, eventRecorder, tpuSliceProvisioning,
ingress.enableGatewayAPI and the lifecycle batch settings); the others
are read at reconcile time through the TTL cache (see :mod:`omed.config.cache`), where a bad
entry fails the reconciles that need it and nothing else.

Invariants:

* :func:`load_startup_config` reads only the startup settings, and
  :func:`reconcile_entries` only the reconcile-time ones, so an edit to a startup setting
  can neither break nor change a running manager until it restarts.
* Every failure names the entry and, for a field, the value and the rule
  (:mod:`omed.config.rules`). A startup failure is a :class:`StartupConfigError`, logged
  as ``Failed to initialize <name> configuration`` with the error.
* Unknown keys in an entry are ignored: OME adds settings over time, and a ConfigMap
  written for a newer chart must still start omed. Known keys are typed strictly.
* ``null`` and an absent key mean the same: the field is unset.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Literal, Self, TypeVar

from pydantic import (
    BaseModel,
    Field,
    PlainValidator,
    model_validator,
)

from omed.config.lifecycle import lifecycle_entry
from omed.config.reconcile import (
    DeployConfig,
    DeployReplicas,
    IngressConfig,
    LifecycleConfig,
    MigrationAuditConfig,
    ReconcileConfig,
    ReconcileConfigError,
    RequeueConfig,
    deploy_entry,
    reconcile_entries,
)
from omed.config.rules import (
    CONFIGMAP_NAME,
    ENTRY_MODEL_CONFIG,
    BatchSize,
    EntryError,
    FieldRuleError,
    Percent,
    batch_size_rule,
    bool_rule,
    choice_rule,
    decode_object,
    int_rule,
    positive_duration_rule,
    resolve_budget,
    validate_entry,
)

__all__ = [
    "CLIENT_GO_EVENT_BURST",
    "CLIENT_GO_EVENT_REFILL_INTERVAL",
    "CONFIGMAP_NAME",
    "STARTUP_ENTRY_NAMES",
    "BatchSize",
    "DeployConfig",
    "DeployReplicas",
    "EntryError",
    "EventRecorderConfig",
    "FieldRuleError",
    "IngressConfig",
    "LifecycleConfig",
    "LifecycleScaleConfig",
    "MigrationAuditConfig",
    "OMENativeStatusConfig",
    "Percent",
    "ReconcileConfig",
    "ReconcileConfigError",
    "RequeueConfig",
    "StartupConfig",
    "StartupConfigError",
    "deploy_entry",
    "lifecycle_entry",
    "load_startup_config",
    "reconcile_entries",
    "resolve_budget",
]

CLIENT_GO_EVENT_BURST = 25
"""client-go's event burst, used when eventRecorder.burstSize is unset."""
CLIENT_GO_EVENT_REFILL_INTERVAL = 300.0
"""client-go's refill (one event every five minutes), when eventRecorder.refillInterval is unset."""

STARTUP_ENTRY_NAMES: Mapping[str, str] = {
    "omeAgent": "OME agent",
    "multicluster": "multicluster",
    "omenativeStatus": "OMENative status",
    "eventRecorder": "event recorder",
    "tpuSliceProvisioning": "TPU slice provisioning",
    "ingress": "ingress",
    "lifecycle": "lifecycle scale",
}
"""Entry key -> the ``<name>`` in ``Failed to initialize <name> configuration``, in check order."""

_ENTRY = ENTRY_MODEL_CONFIG
T = TypeVar("T")


# --- startup entries ------------------------------------------------------------------------


class OMENativeStatusConfig(BaseModel):
    """``omenativeStatus``: how Instance rows are stored on InferenceReplicas."""

    model_config = _ENTRY

    instance_status_encoding: Annotated[
        Literal["DenseV1", "ColumnarV2"],
        PlainValidator(
            choice_rule("omenativeStatus.instanceStatusEncoding", ("DenseV1", "ColumnarV2"))
        ),
    ] = Field(alias="instanceStatusEncoding")
    max_decoded_instances: Annotated[
        int | None,
        PlainValidator(
            int_rule(
                "omenativeStatus.maxDecodedInstances",
                minimum=1,
                rule="must be a positive integer",
            )
        ),
    ] = Field(default=None, alias="maxDecodedInstances")

    @model_validator(mode="after")
    def _columnar_needs_bound(self) -> Self:
        if self.instance_status_encoding == "ColumnarV2" and self.max_decoded_instances is None:
            raise FieldRuleError(
                "omenativeStatus.maxDecodedInstances",
                "omenativeStatus.maxDecodedInstances is required when instanceStatusEncoding "
                "is ColumnarV2",
            )
        return self

    @property
    def decode_bound(self) -> int:
        """The bound as the startup log line shows it: 0 when none is set."""
        return self.max_decoded_instances or 0


class EventRecorderConfig(BaseModel):
    """``eventRecorder``: the per-object, per-type event bucket. Unset fields keep client-go's."""

    model_config = _ENTRY

    burst_size: Annotated[
        int,
        PlainValidator(
            int_rule(
                "eventRecorder.burstSize",
                minimum=1,
                rule="must be a positive integer",
                default=CLIENT_GO_EVENT_BURST,
            )
        ),
    ] = Field(default=CLIENT_GO_EVENT_BURST, alias="burstSize")
    refill_interval: Annotated[
        float,
        PlainValidator(
            positive_duration_rule(
                "eventRecorder.refillInterval",
                example="2s",
                default=CLIENT_GO_EVENT_REFILL_INTERVAL,
            )
        ),
    ] = Field(default=CLIENT_GO_EVENT_REFILL_INTERVAL, alias="refillInterval")
    """Seconds for the bucket to regain one event."""


class LifecycleScaleConfig(BaseModel):
    """The startup part of ``lifecycle``: scale-up, scale-down and repair batch budgets.

    ``None`` removes a bound: one pass does everything, and deletes in flight aren't polled.
    """

    model_config = _ENTRY

    scale_up_pod_batch_size: Annotated[
        BatchSize | None, PlainValidator(batch_size_rule("lifecycle.scaleUpPodBatchSize"))
    ] = Field(default=None, alias="scaleUpPodBatchSize")
    scale_down_pod_batch_size: Annotated[
        BatchSize | None, PlainValidator(batch_size_rule("lifecycle.scaleDownPodBatchSize"))
    ] = Field(default=None, alias="scaleDownPodBatchSize")
    scale_down_requeue_interval: Annotated[
        float | None,
        PlainValidator(positive_duration_rule("lifecycle.scaleDownRequeueInterval", example="5s")),
    ] = Field(default=None, alias="scaleDownRequeueInterval")
    """Seconds between rechecks of a component while its deletes are in flight."""
    repair_batch_size: Annotated[
        BatchSize | None, PlainValidator(batch_size_rule("lifecycle.repairBatchSize"))
    ] = Field(default=None, alias="repairBatchSize")


@dataclass(frozen=True, kw_only=True)
class StartupConfig:
    """Everything the manager reads from the ConfigMap once, when it starts."""

    omenative_status: OMENativeStatusConfig
    event_recorder: EventRecorderConfig
    lifecycle_scale: LifecycleScaleConfig
    enable_gateway_api: bool
    ome_agent: Mapping[str, Any] | None
    """Free-form: validated as a JSON object only; ``None`` when the entry is absent."""
    multicluster: Mapping[str, Any] | None
    tpu_slice_provisioning: Mapping[str, Any] | None


class StartupConfigError(Exception):
    """A startup entry that stops the manager. Log ``message`` with ``error``, then exit 1."""

    def __init__(self, name: str, error: str) -> None:
        self.name = name
        self.error = error
        super().__init__(f"{self.message}: {error}")

    @property
    def message(self) -> str:
        return f"Failed to initialize {self.name} configuration"


def _optional_object(data: Mapping[str, str], key: str) -> Mapping[str, Any] | None:
    raw = data.get(key)
    return None if raw is None else decode_object(key, raw)


def _load_omenative_status(data: Mapping[str, str]) -> OMENativeStatusConfig:
    raw = data.get("omenativeStatus")
    if raw is None:
        raise EntryError(f"ConfigMap {CONFIGMAP_NAME} has no omenativeStatus entry")
    document = decode_object("omenativeStatus", raw)
    return validate_entry(OMENativeStatusConfig, document, key="omenativeStatus")


def _load_event_recorder(data: Mapping[str, str]) -> EventRecorderConfig:
    document = _optional_object(data, "eventRecorder")
    if document is None:
        return EventRecorderConfig()
    return validate_entry(EventRecorderConfig, document, key="eventRecorder")


def _load_enable_gateway_api(data: Mapping[str, str]) -> bool:
    document = _optional_object(data, "ingress") or {}
    return bool(
        bool_rule("ingress.enableGatewayAPI", default=False)(document.get("enableGatewayAPI"))
    )


def _load_lifecycle_scale(data: Mapping[str, str]) -> LifecycleScaleConfig:
    document = _optional_object(data, "lifecycle")
    if document is None:
        return LifecycleScaleConfig()
    return validate_entry(LifecycleScaleConfig, document, key="lifecycle")


def load_startup_config(data: Mapping[str, str]) -> StartupConfig:
    """Validate the startup entries of the ConfigMap's ``data``.

    Raises :class:`StartupConfigError` for the first bad entry, in the order of
    :data:`STARTUP_ENTRY_NAMES`. omenativeStatus is the only required entry.
    """

    def attempt(key: str, load: Callable[[], T]) -> T:
        try:
            return load()
        except EntryError as exc:
            raise StartupConfigError(STARTUP_ENTRY_NAMES[key], str(exc)) from exc

    ome_agent = attempt("omeAgent", lambda: _optional_object(data, "omeAgent"))
    multicluster = attempt("multicluster", lambda: _optional_object(data, "multicluster"))
    omenative_status = attempt("omenativeStatus", lambda: _load_omenative_status(data))
    event_recorder = attempt("eventRecorder", lambda: _load_event_recorder(data))
    tpu = attempt("tpuSliceProvisioning", lambda: _optional_object(data, "tpuSliceProvisioning"))
    enable_gateway_api = attempt("ingress", lambda: _load_enable_gateway_api(data))
    lifecycle_scale = attempt("lifecycle", lambda: _load_lifecycle_scale(data))
    return StartupConfig(
        omenative_status=omenative_status,
        event_recorder=event_recorder,
        lifecycle_scale=lifecycle_scale,
        enable_gateway_api=enable_gateway_api,
        ome_agent=ome_agent,
        multicluster=multicluster,
        tpu_slice_provisioning=tpu,
    )
