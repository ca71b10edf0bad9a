"""The reconcile-time part of the ``lifecycle`` entry: the settings the controllers read
through the config cache at every reconcile.

Why: these keys tune running controllers (readiness deadlines, retry ladders, revision
history, graces and escalations), so a ``kubectl edit`` must reach the next reconcile of every
object within the cache TTL, without a restart. Upstream OME's rule holds for each key: no
in-code default lives here, an absent key is *unconfigured* (``None``), and an invalid key is
unconfigured too while the manager and every other key keep working. A typo in one setting
must not stop every InferenceReplica of the fleet from reconciling; instead the problem is
carried in :attr:`LifecycleConfig.problems`, each message naming the key, its value and the
rule, for the controller to log.

Invariants:

* Keys are judged one by one, a whole top-level key at a time: an object key with one bad
  field (``updateRetry.multiplier: 0.5``) is unconfigured as a whole, so a half-read block
  never mixes with defaults. An entry that isn't a JSON object leaves every key unconfigured.
* ``audit`` keeps its own report, :attr:`LifecycleConfig.audit_problem`: migrations are held
  while it is missing or invalid, with a message of their own.
* The startup fields of the entry (the batch sizes and interval) are not read here, so an
  edit of them can't change a running manager.
* Parsing is memoised on the raw document: the reconciles that share a cache read share one
  parse.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any, Final, Self

from pydantic import BaseModel, Field, PlainValidator, model_validator

from omed.config.rules import (
    CONFIGMAP_NAME,
    ENTRY_MODEL_CONFIG,
    EntryError,
    FieldRuleError,
    decode_object,
    int_rule,
    object_rule,
    positive_duration_rule,
    render,
    validate_entry,
)

__all__ = [
    "AutoMigrateConfig",
    "ForceDeleteConfig",
    "GangScheduleTimeoutConfig",
    "LifecycleConfig",
    "MigrationAuditConfig",
    "RequeueConfig",
    "TeardownConfig",
    "UpdateRetryConfig",
    "lifecycle_entry",
    "load_lifecycle",
]

_ENTRY = ENTRY_MODEL_CONFIG
KEY: Final = "lifecycle"


def _duration(path: str, example: str, *, required: bool = False) -> Any:
    return PlainValidator(positive_duration_rule(path, example=example, nullable=not required))


class RequeueConfig(BaseModel):
    """``lifecycle.requeue``: how soon held migration work is looked at again."""

    model_config = _ENTRY

    operation: Annotated[float | None, _duration("lifecycle.requeue.operation", "5s")] = None
    gate: Annotated[float | None, _duration("lifecycle.requeue.gate", "3s")] = None


class MigrationAuditConfig(BaseModel):
    """``lifecycle.audit``: the migration caps. All three fields are required and positive."""

    model_config = _ENTRY

    max_in_flight_migrations: Annotated[
        int,
        PlainValidator(
            int_rule(
                "lifecycle.audit.maxInFlightMigrations",
                minimum=1,
                rule="must be a positive integer",
                nullable=False,
            )
        ),
    ] = Field(alias="maxInFlightMigrations")
    max_migrations_per_window: Annotated[
        int,
        PlainValidator(
            int_rule(
                "lifecycle.audit.maxMigrationsPerWindow",
                minimum=1,
                rule="must be a positive integer",
                nullable=False,
            )
        ),
    ] = Field(alias="maxMigrationsPerWindow")
    window: Annotated[float, _duration("lifecycle.audit.window", "1h", required=True)]
    """Seconds of the rate cap's sliding window."""


class AutoMigrateConfig(BaseModel):
    """``lifecycle.autoMigrate``: the budget of automatic relocations per Instance."""

    model_config = _ENTRY

    max_attempts: Annotated[
        int | None,
        PlainValidator(
            int_rule(
                "lifecycle.autoMigrate.maxAttempts",
                minimum=0,
                rule="must be an integer >= 0",
            )
        ),
    ] = Field(default=None, alias="maxAttempts")


class ForceDeleteConfig(BaseModel):
    """``lifecycle.forceDelete``: when a pod stuck Terminating on a dead node is force-deleted."""

    model_config = _ENTRY

    overdue_slack: Annotated[
        float | None, _duration("lifecycle.forceDelete.overdueSlack", "30s")
    ] = Field(default=None, alias="overdueSlack")
    node_unreachable_threshold: Annotated[
        float | None, _duration("lifecycle.forceDelete.nodeUnreachableThreshold", "5m")
    ] = Field(default=None, alias="nodeUnreachableThreshold")


class TeardownConfig(BaseModel):
    """``lifecycle.teardown``: how long a deleted InferenceReplica's teardown may take."""

    model_config = _ENTRY

    deadline: Annotated[float | None, _duration("lifecycle.teardown.deadline", "30m")] = None


def _multiplier_rule(path: str) -> Callable[[Any], float | None]:
    def validate(value: Any) -> float | None:
        if value is None:
            return None
        number_like = isinstance(value, int | float) and not isinstance(value, bool)
        if not number_like or not 1 <= value < float("inf"):
            raise FieldRuleError(path, f"invalid {path} {render(value)} must be a number >= 1")
        return float(value)

    return validate


class UpdateRetryConfig(BaseModel):
    """``lifecycle.updateRetry``: the retry ladder of failing revisions, fleet-wide.

    A component's own ``lifecycle.updateRetry`` fields win over these, field by field.
    """

    model_config = _ENTRY

    max_attempts: Annotated[
        int | None,
        PlainValidator(
            int_rule(
                "lifecycle.updateRetry.maxAttempts",
                minimum=1,
                rule="must be an integer >= 1",
            )
        ),
    ] = Field(default=None, alias="maxAttempts")
    initial_delay: Annotated[
        float | None, _duration("lifecycle.updateRetry.initialDelay", "10s")
    ] = Field(default=None, alias="initialDelay")
    max_delay: Annotated[float | None, _duration("lifecycle.updateRetry.maxDelay", "5m")] = Field(
        default=None, alias="maxDelay"
    )
    multiplier: Annotated[
        float | None, PlainValidator(_multiplier_rule("lifecycle.updateRetry.multiplier"))
    ] = None

    @model_validator(mode="after")
    def _ordered(self) -> Self:
        low, high = self.initial_delay, self.max_delay
        if low is not None and high is not None and high < low:
            raise FieldRuleError(
                "lifecycle.updateRetry.maxDelay",
                "invalid lifecycle.updateRetry.maxDelay must be at least "
                "lifecycle.updateRetry.initialDelay",
            )
        return self


class GangScheduleTimeoutConfig(BaseModel):
    """``lifecycle.gangScheduleTimeout``: the clamp of a PodGroup's schedule timeout."""

    model_config = _ENTRY

    min: Annotated[float | None, _duration("lifecycle.gangScheduleTimeout.min", "60s")] = None
    max: Annotated[float | None, _duration("lifecycle.gangScheduleTimeout.max", "600s")] = None

    @model_validator(mode="after")
    def _ordered(self) -> Self:
        if self.min is not None and self.max is not None and self.max < self.min:
            raise FieldRuleError(
                "lifecycle.gangScheduleTimeout.max",
                "invalid lifecycle.gangScheduleTimeout.max must be at least "
                "lifecycle.gangScheduleTimeout.min",
            )
        return self


@dataclass(frozen=True, kw_only=True)
class LifecycleConfig:
    """The reconcile-time ``lifecycle`` settings; ``None`` is unconfigured (absent or invalid).

    A component's own ``lifecycle`` fields win over these where the API defines them
    (``instanceReadyTimeout``, ``updateRetry``), as the InferenceReplica's own
    ``revisionHistoryLimit`` wins over the entry's.
    """

    instance_ready_timeout: float | None = None
    """Seconds an Instance may take to become Ready after a Create, Update or Restart."""
    stuck_pod_grace_period: float | None = None
    """Seconds a pod may sit in a terminal waiting reason before its attempt fails."""
    unschedulable_grace_period: float | None = None
    """Seconds a pod may stay unschedulable before its attempt fails."""
    revision_history_limit: int | None = None
    """ControllerRevisions kept per InferenceReplica beyond the ones its pods run."""
    requeue: RequeueConfig = field(default_factory=RequeueConfig)
    audit: MigrationAuditConfig | None = None
    audit_problem: str | None = "lifecycle.audit is not set"
    """Why migrations are held (MigrationPolicyUnconfigured); ``None`` once ``audit`` is set."""
    auto_migrate: AutoMigrateConfig = field(default_factory=AutoMigrateConfig)
    force_delete: ForceDeleteConfig = field(default_factory=ForceDeleteConfig)
    teardown: TeardownConfig = field(default_factory=TeardownConfig)
    update_retry: UpdateRetryConfig = field(default_factory=UpdateRetryConfig)
    gang_schedule_timeout: GangScheduleTimeoutConfig = field(
        default_factory=GangScheduleTimeoutConfig
    )
    problems: tuple[str, ...] = ()
    """One message per key that was set but invalid, and so is unconfigured."""


@dataclass(frozen=True)
class _Key:
    attribute: str
    """The :class:`LifecycleConfig` field."""
    key: str
    """The key in the entry's JSON object."""
    parse: Callable[[Any], Any]


def _block(model: type[BaseModel], key: str) -> Callable[[Any], Any]:
    path = f"{KEY}.{key}"

    def parse(value: Any) -> Any:
        object_rule(path)(value)
        return validate_entry(model, value or {}, key=path)

    return parse


_KEYS: Final = (
    _Key(
        "instance_ready_timeout",
        "instanceReadyTimeout",
        positive_duration_rule("lifecycle.instanceReadyTimeout", example="30m"),
    ),
    _Key(
        "stuck_pod_grace_period",
        "stuckPodGracePeriod",
        positive_duration_rule("lifecycle.stuckPodGracePeriod", example="60s"),
    ),
    _Key(
        "unschedulable_grace_period",
        "unschedulableGracePeriod",
        positive_duration_rule("lifecycle.unschedulableGracePeriod", example="15m"),
    ),
    _Key(
        "revision_history_limit",
        "revisionHistoryLimit",
        int_rule("lifecycle.revisionHistoryLimit", minimum=0, rule="must be an integer >= 0"),
    ),
    _Key("requeue", "requeue", _block(RequeueConfig, "requeue")),
    _Key("auto_migrate", "autoMigrate", _block(AutoMigrateConfig, "autoMigrate")),
    _Key("force_delete", "forceDelete", _block(ForceDeleteConfig, "forceDelete")),
    _Key("teardown", "teardown", _block(TeardownConfig, "teardown")),
    _Key("update_retry", "updateRetry", _block(UpdateRetryConfig, "updateRetry")),
    _Key(
        "gang_schedule_timeout",
        "gangScheduleTimeout",
        _block(GangScheduleTimeoutConfig, "gangScheduleTimeout"),
    ),
)


def _audit(document: Mapping[str, Any]) -> tuple[MigrationAuditConfig | None, str | None]:
    raw = document.get("audit")
    if raw is None:
        return None, "lifecycle.audit is not set"
    try:
        object_rule("lifecycle.audit")(raw)
        return validate_entry(MigrationAuditConfig, raw, key="lifecycle.audit"), None
    except EntryError as exc:
        return None, str(exc)


def _message(error: EntryError) -> str:
    text = str(error)
    return text if text.startswith(("validate ", "parse ")) else f"validate {text}"


@functools.lru_cache(maxsize=16)
def load_lifecycle(raw: str | None) -> LifecycleConfig:
    """The settings of the raw ``lifecycle`` document (``None``: the ConfigMap has none).

    Never raises: see the module docstring for what an invalid key becomes.
    """
    if raw is None:
        return LifecycleConfig(audit_problem=f"ConfigMap {CONFIGMAP_NAME} has no lifecycle entry")
    try:
        document = decode_object(KEY, raw)
    except EntryError as exc:
        return LifecycleConfig(audit_problem=str(exc), problems=(str(exc),))
    values: dict[str, Any] = {}
    problems: list[str] = []
    for key in _KEYS:
        value = document.get(key.key)
        if value is None:
            continue
        try:
            parsed = key.parse(value)
        except EntryError as exc:
            problems.append(_message(exc))
            continue
        if parsed is not None:
            values[key.attribute] = parsed
    audit, audit_problem = _audit(document)
    return LifecycleConfig(
        **values, audit=audit, audit_problem=audit_problem, problems=tuple(problems)
    )


def lifecycle_entry(data: Mapping[str, str]) -> LifecycleConfig:
    """The ``lifecycle`` settings alone, from the cached ConfigMap ``data``: what the
    InferenceReplica controller reads at each reconcile. A bad ``deploy`` or ``ingress``
    entry, which it doesn't use, can't fail it."""
    return load_lifecycle(data.get(KEY))
