"""The update and retry settings of one InferenceReplica, resolved for the planner.

Why: ``lifecycle.updateStrategy`` and ``lifecycle.updateRetry`` leave every field optional
and the user's object keeps what the user wrote. The planner must never guess a default, so
:mod:`.observe` resolves them here once per pass into frozen values with every default
applied, and unit tests build them by hand.

Precedence, field by field: the component's own ``lifecycle`` (as projected onto the
InferenceReplica) wins; then the fleet-wide ``lifecycle`` entry of inferenceservice-config
(:class:`omed.config.lifecycle.LifecycleConfig`, read through the config cache, so an edit
reaches the next pass); then the defaults below. ``instanceReadyTimeout`` has no default:
unset in both places, an Instance may take as long as it takes.

Defaults (*omed* marks omed's own choice where the CRD leaves one open):

* strategy SurgeThenDrain; partition 0;
* maxSurge 1 and maxUnavailable 0 under SurgeThenDrain (capacity never dips); maxUnavailable
  1 and maxSurge 0 under the other strategies (one Instance at a time);
* updateRetry: maxAttempts 3, initialDelay 10s, maxDelay 5m, multiplier 2 (*omed*);
* revisionHistoryLimit 10, as Deployments and StatefulSets keep (*omed*);
* parked crash-loop repairs are re-armed only by an ``updateRetry`` the user wrote, on the
  component or in the ConfigMap (*omed*: without one, "no retry ladder is configured to
  re-arm it", as the event says).

Invariant: pure data, no I/O; durations are seconds.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final

from omed.api.base import parse_duration
from omed.api.lifecycle import Lifecycle
from omed.api.lifecyclechoices import (
    DEFAULT_UPDATE_RETRY_MAX_ATTEMPTS,
    DEFAULT_UPDATE_STRATEGY_TYPE,
    UpdateStrategyType,
)
from omed.config.lifecycle import LifecycleConfig, UpdateRetryConfig

DEFAULT_MAX_ATTEMPTS: Final = DEFAULT_UPDATE_RETRY_MAX_ATTEMPTS
DEFAULT_INITIAL_DELAY: Final = 10.0
DEFAULT_MAX_DELAY: Final = 300.0
DEFAULT_MULTIPLIER: Final = 2.0
DEFAULT_REVISION_HISTORY_LIMIT: Final = 10
"""Revisions kept beyond the running ones when neither the replica nor the ConfigMap sets
``revisionHistoryLimit``: the number Kubernetes' own workload controllers keep."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RetryPolicy:
    """``lifecycle.updateRetry`` with its defaults applied."""

    max_attempts: int = DEFAULT_MAX_ATTEMPTS
    initial_delay: float = DEFAULT_INITIAL_DELAY
    max_delay: float = DEFAULT_MAX_DELAY
    multiplier: float = DEFAULT_MULTIPLIER

    def delay_after(self, attempts: int) -> float:
        """Seconds of backoff after ``attempts`` failed attempts (1 -> initialDelay)."""
        exponent = max(attempts - 1, 0)
        try:
            grown = self.initial_delay * self.multiplier**exponent
        except OverflowError:  # a huge multiplier (the API admits any >= 1): capped, as Go's +Inf
            return float(self.max_delay)
        return float(min(grown, self.max_delay))


@dataclass(frozen=True, slots=True, kw_only=True)
class UpdatePolicy:
    """``lifecycle.updateStrategy`` with its defaults applied."""

    strategy: UpdateStrategyType = DEFAULT_UPDATE_STRATEGY_TYPE
    partition: int = 0
    max_unavailable: int | str | None = None
    """As written (a count or a percentage of ``replicas``); None for the default."""
    max_surge: int | str | None = None
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    ready_timeout: float | None = None
    """``lifecycle.instanceReadyTimeout`` in seconds; None: an Update may wait forever."""
    recreate_on_restart: bool = False
    """``restartPolicy: RecreateInstanceOnPodRestart``."""
    repair_batch_size: int | str | None = None
    """``lifecycle.repairBatchSize`` as written: Restart operations in flight (default 1)."""
    repair_retry: RetryPolicy | None = None
    """The ladder that re-arms parked crash-loop repairs: ``retry`` when the user wrote a
    ``lifecycle.updateRetry`` block, None when there is none (parked repairs stay parked)."""


def update_policy(
    lifecycle: Lifecycle | None, fleet: LifecycleConfig | None = None
) -> UpdatePolicy:
    """The resolved policy of a component's ``lifecycle`` over the fleet-wide settings
    (``None``: nothing configured there)."""
    fleet = fleet or LifecycleConfig()
    lifecycle = lifecycle or Lifecycle()
    strategy = lifecycle.update_strategy
    rolling = strategy.rolling_update if strategy is not None else None
    own = lifecycle.update_retry
    shared = fleet.update_retry
    ladder = RetryPolicy(
        max_attempts=(own.max_attempts if own else None)
        or shared.max_attempts
        or DEFAULT_MAX_ATTEMPTS,
        initial_delay=_first(
            own.initial_delay if own else None, shared.initial_delay, DEFAULT_INITIAL_DELAY
        ),
        max_delay=_first(own.max_delay if own else None, shared.max_delay, DEFAULT_MAX_DELAY),
        multiplier=(own.multiplier if own else None) or shared.multiplier or DEFAULT_MULTIPLIER,
    )
    written = own is not None or shared != UpdateRetryConfig()
    timeout = lifecycle.instance_ready_timeout
    return UpdatePolicy(
        strategy=lifecycle.effective_update_strategy_type,
        partition=(rolling.partition if rolling is not None else None) or 0,
        max_unavailable=rolling.max_unavailable if rolling is not None else None,
        max_surge=rolling.max_surge if rolling is not None else None,
        retry=ladder,
        repair_retry=ladder if written else None,
        recreate_on_restart=lifecycle.restart_policy == "RecreateInstanceOnPodRestart",
        repair_batch_size=lifecycle.repair_batch_size,
        ready_timeout=(fleet.instance_ready_timeout if timeout is None else _seconds(timeout, 0.0)),
    )


def _seconds(text: str | None, default: float) -> float:
    return default if text is None else parse_duration(text).total_seconds()


def _first(text: str | None, configured: float | None, default: float) -> float:
    """The component's duration ``text`` in seconds, else the ConfigMap's, else ``default``."""
    if text is not None:
        return _seconds(text, default)
    return default if configured is None else configured


def revision_history_limit(own: int | None, fleet: LifecycleConfig | None) -> int:
    """The replica's ``revisionHistoryLimit``, else the ConfigMap's, else the default."""
    if own is not None:
        return own
    configured = fleet.revision_history_limit if fleet is not None else None
    return DEFAULT_REVISION_HISTORY_LIMIT if configured is None else configured
