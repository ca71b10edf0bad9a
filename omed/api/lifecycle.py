"""A component's ``lifecycle``: how OMENative restarts, updates, readies and moves its Instances.

The same block appears on an InferenceService component (where the user writes it) and on the
InferenceReplica that the InferenceService controller projects from it, so both models share
this one definition and the projection is a copy.

Every field is optional and stays ``None`` when the user leaves it out, so that a projected
InferenceReplica spec holds exactly what the user wrote. Defaults are applied where the value is
used, through the ``effective_*`` properties here, never written back into the object.
"""

from __future__ import annotations

from pydantic import Field

from omed.api.base import ApiModel, BatchSize, Duration, IntOrPercent
from omed.api.lifecyclechoices import (
    DEFAULT_MIGRATION_MODE,
    DEFAULT_UPDATE_RETRY_MAX_ATTEMPTS,
    DEFAULT_UPDATE_STRATEGY_TYPE,
    MigrationMode,
    ReadyPolicy,
    RestartPolicy,
    UpdateStrategyType,
)


class RollingUpdate(ApiModel):
    """Bounds of a rolling update across a component's Instances."""

    partition: int | None = Field(default=None, ge=0)
    """Instances with an index below the partition keep their current revision."""
    max_unavailable: IntOrPercent | None = None
    """Instances that may be unavailable during the update: a count or a percentage."""
    max_surge: IntOrPercent | None = None
    """Extra Instances that may exist during the update: a count or a percentage."""


class UpdateStrategy(ApiModel):
    """How an Instance moves to a new revision."""

    type: UpdateStrategyType | None = None
    """SurgeThenDrain (the default), RecreatePod, InPlaceIfPossible or InPlaceOnly."""
    rolling_update: RollingUpdate | None = None
    """Bounds of the rolling update."""

    @property
    def effective_type(self) -> UpdateStrategyType:
        return self.type or DEFAULT_UPDATE_STRATEGY_TYPE


class MigrationPolicy(ApiModel):
    """Whether the component's Instances may move to other nodes."""

    mode: MigrationMode | None = None
    """Auto (the default), Surge (the same as Auto) or Never, which refuses manual migrations
    and turns off automatic relocation."""

    @property
    def effective_mode(self) -> MigrationMode:
        return self.mode or DEFAULT_MIGRATION_MODE


class UpdateRetry(ApiModel):
    """How often OME retries updates to a revision that fails, before it holds the revision."""

    max_attempts: int | None = Field(default=None, ge=1)
    """Attempts before the revision is held; 3 when unset."""
    initial_delay: Duration | None = None
    """Backoff before the first retry, such as 30s."""
    max_delay: Duration | None = None
    """Longest backoff between retries."""
    multiplier: float | None = Field(default=None, ge=1)
    """Factor by which the backoff grows after each failed attempt."""

    @property
    def effective_max_attempts(self) -> int:
        return self.max_attempts or DEFAULT_UPDATE_RETRY_MAX_ATTEMPTS


class Lifecycle(ApiModel):
    """How OMENative restarts, updates, readies and migrates the component's Instances."""

    restart_policy: RestartPolicy | None = None
    """None, or RecreateInstanceOnPodRestart to recreate a whole Instance when one of its pods
    restarts."""
    update_strategy: UpdateStrategy | None = None
    """How an Instance moves to a new revision."""
    ready_policy: ReadyPolicy | None = None
    """AllPodReady: an Instance is Ready when all its pods are. None: no readiness rule."""
    instance_ready_timeout: Duration | None = None
    """How long a new or updated Instance may take to become Ready, such as 15m."""
    min_ready_seconds: int | None = Field(default=None, ge=0)
    """Seconds an Instance must stay Ready before it counts as available."""
    migration_policy: MigrationPolicy | None = None
    """Whether the component's Instances may move to other nodes."""
    update_retry: UpdateRetry | None = None
    """Retries of a failing revision before OME holds it."""
    repair_batch_size: BatchSize | None = None
    """Crash-loop repairs per pass: a count, or a percentage of the component's Instances."""

    @property
    def effective_update_strategy_type(self) -> UpdateStrategyType:
        return (self.update_strategy or UpdateStrategy()).effective_type

    @property
    def effective_migration_mode(self) -> MigrationMode:
        return (self.migration_policy or MigrationPolicy()).effective_mode

    @property
    def effective_max_attempts(self) -> int:
        return (self.update_retry or UpdateRetry()).effective_max_attempts
