"""Reconcile-time entries of the inferenceservice-config ConfigMap: deploy, ingress, lifecycle.

Why: these settings are read through the TTL cache (:mod:`omed.config.cache`) on every
reconcile, so a ``kubectl edit`` reaches the controllers within the TTL without a restart.
A bad ``deploy`` or ``ingress`` entry must fail the reconciles that read it, with an error
naming the entry, and never the manager: the caller gets :class:`ReconcileConfigError`. The
``lifecycle`` entry is judged key by key instead (:mod:`omed.config.lifecycle`): an invalid
key is unconfigured and reported, and never fails a reconcile.

Invariants: the startup settings that share these entries (``ingress.enableGatewayAPI``,
the lifecycle batch sizes and interval) are neither read nor validated here, so editing
them can't change or break a running manager. Parsing is memoised on the raw documents, so
reconciles sharing a cache read share one parse.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Annotated, Self, TypeVar

from pydantic import BaseModel, BeforeValidator, Field, PlainValidator, model_validator

from omed.config.lifecycle import (
    LifecycleConfig,
    MigrationAuditConfig,
    RequeueConfig,
    load_lifecycle,
)
from omed.config.rules import (
    CONFIGMAP_NAME,
    ENTRY_MODEL_CONFIG,
    EntryError,
    FieldRuleError,
    bool_rule,
    decode_object,
    int_rule,
    object_rule,
    string_list_rule,
    string_rule,
    validate_entry,
)

__all__ = [
    "DeployConfig",
    "DeployReplicas",
    "IngressConfig",
    "LifecycleConfig",
    "MigrationAuditConfig",
    "ReconcileConfig",
    "ReconcileConfigError",
    "RequeueConfig",
    "deploy_entry",
    "reconcile_entries",
]

T = TypeVar("T")
_ENTRY = ENTRY_MODEL_CONFIG


class DeployReplicas(BaseModel):
    """``deploy.replicas``: defaults the webhook gives a component that sets no replicas."""

    model_config = _ENTRY

    min_replicas: Annotated[
        int | None,
        PlainValidator(
            int_rule("deploy.replicas.minReplicas", minimum=0, rule="must be an integer >= 0")
        ),
    ] = Field(default=None, alias="minReplicas")
    max_replicas: Annotated[
        int | None,
        PlainValidator(
            int_rule("deploy.replicas.maxReplicas", minimum=1, rule="must be an integer >= 1")
        ),
    ] = Field(default=None, alias="maxReplicas")

    @model_validator(mode="after")
    def _ordered(self) -> Self:
        low, high = self.min_replicas, self.max_replicas
        if low is not None and high is not None and high < low:
            raise FieldRuleError(
                "deploy.replicas.maxReplicas",
                f"invalid deploy.replicas.maxReplicas {high} must be at least "
                f"deploy.replicas.minReplicas {low}",
            )
        return self


class DeployConfig(BaseModel):
    """``deploy``: the default deployment mode and replica defaults."""

    model_config = _ENTRY

    default_deployment_mode: Annotated[
        str | None,
        PlainValidator(string_rule("deploy.defaultDeploymentMode", allow_empty=False)),
    ] = Field(default=None, alias="defaultDeploymentMode")
    """``None``: the InferenceService's own mode (annotation, then spec) decides alone."""
    replicas: Annotated[DeployReplicas | None, BeforeValidator(object_rule("deploy.replicas"))] = (
        None
    )


class IngressConfig(BaseModel):
    """``ingress`` without ``enableGatewayAPI`` (a startup setting, see :class:`StartupConfig`)."""

    model_config = _ENTRY

    ingress_gateway: Annotated[
        str | None, PlainValidator(string_rule("ingress.ingressGateway"))
    ] = Field(default=None, alias="ingressGateway")
    ingress_service: Annotated[
        str | None, PlainValidator(string_rule("ingress.ingressService"))
    ] = Field(default=None, alias="ingressService")
    ingress_domain: Annotated[str | None, PlainValidator(string_rule("ingress.ingressDomain"))] = (
        Field(default=None, alias="ingressDomain")
    )
    ingress_class_name: Annotated[
        str | None, PlainValidator(string_rule("ingress.ingressClassName"))
    ] = Field(default=None, alias="ingressClassName")
    additional_ingress_domains: Annotated[
        tuple[str, ...] | None,
        PlainValidator(string_list_rule("ingress.additionalIngressDomains")),
    ] = Field(default=None, alias="additionalIngressDomains")
    domain_template: Annotated[
        str | None, PlainValidator(string_rule("ingress.domainTemplate"))
    ] = Field(default=None, alias="domainTemplate")
    url_scheme: Annotated[str | None, PlainValidator(string_rule("ingress.urlScheme"))] = Field(
        default=None, alias="urlScheme"
    )
    path_template: Annotated[str | None, PlainValidator(string_rule("ingress.pathTemplate"))] = (
        Field(default=None, alias="pathTemplate")
    )
    disable_istio_virtual_host: Annotated[
        bool, PlainValidator(bool_rule("ingress.disableIstioVirtualHost", default=False))
    ] = Field(default=False, alias="disableIstioVirtualHost")
    disable_ingress_creation: Annotated[
        bool, PlainValidator(bool_rule("ingress.disableIngressCreation", default=False))
    ] = Field(default=False, alias="disableIngressCreation")


@dataclass(frozen=True, kw_only=True)
class ReconcileConfig:
    """The entries reconciles read through the TTL cache."""

    deploy: DeployConfig = field(default_factory=DeployConfig)
    ingress: IngressConfig = field(default_factory=IngressConfig)
    lifecycle: LifecycleConfig = field(default_factory=LifecycleConfig)


class ReconcileConfigError(Exception):
    """A reconcile-time entry that can't be used: the reconcile fails with this error."""

    def __init__(self, key: str, error: str) -> None:
        self.key = key
        self.error = error
        super().__init__(f"invalid {key} entry in ConfigMap {CONFIGMAP_NAME}: {error}")


@functools.lru_cache(maxsize=16)
def _reconcile_entries(
    *, deploy: str | None, ingress: str | None, lifecycle: str | None
) -> ReconcileConfig:
    def attempt(key: str, load: Callable[[], T]) -> T:
        try:
            return load()
        except EntryError as exc:
            raise ReconcileConfigError(key, str(exc)) from exc

    def load_deploy() -> DeployConfig:
        if deploy is None:
            return DeployConfig()
        return validate_entry(DeployConfig, decode_object("deploy", deploy), key="deploy")

    def load_ingress() -> IngressConfig:
        if ingress is None:
            return IngressConfig()
        document = dict(decode_object("ingress", ingress))
        document.pop("enableGatewayAPI", None)  # startup-only: a later edit can't break this
        return validate_entry(IngressConfig, document, key="ingress")

    return ReconcileConfig(
        deploy=attempt("deploy", load_deploy),
        ingress=attempt("ingress", load_ingress),
        lifecycle=load_lifecycle(lifecycle),
    )


def deploy_entry(data: Mapping[str, str]) -> DeployConfig:
    """The ``deploy`` entry alone, from the cached ConfigMap ``data``: what the
    InferenceService controller and the defaulting webhook read. The other reconcile-time
    entries aren't parsed, so a bad ``ingress`` or ``lifecycle`` field, which these readers
    don't use, can't fail them. Raises :class:`ReconcileConfigError` for a bad ``deploy``."""
    return _reconcile_entries(deploy=data.get("deploy"), ingress=None, lifecycle=None).deploy


def reconcile_entries(data: Mapping[str, str]) -> ReconcileConfig:
    """Parse the reconcile-time entries from the cached ConfigMap ``data``.

    Raises :class:`ReconcileConfigError` naming the bad entry. The result depends only on
    the three raw documents, so it is memoised on them: reconciles that share a cache read
    don't re-parse.
    """
    return _reconcile_entries(
        deploy=data.get("deploy"), ingress=data.get("ingress"), lifecycle=data.get("lifecycle")
    )
