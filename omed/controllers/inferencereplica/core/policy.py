"""The update and retry settings of one InferenceReplica, resolved for the planner.

Why: ``lifecycle.updateStrategy`` and ``lifecycle.updateRetry`` leave every field optional
and the user's object keeps what the user wrote. The planner must never guess a default, so
:mod:`.observe` resolves them here once per pass into frozen values with every default
applied, and unit tests build them by hand.

Defaults (*omed* marks omed's own choice where the CRD leaves one open):

* strategy SurgeThenDrain; partition 0;
* maxSurge 1 and maxUnavailable 0 under SurgeThenDrain (capacity never dips); maxUnavailable
  1 and maxSurge 0 under the other strategies (one Instance at a time);
* updateRetry: maxAttempts 3, initialDelay 10s, maxDelay 5m, multiplier 2 (*omed*);
* parked crash-loop repairs are re-armed only by an ``updateRetry`` the user wrote (*omed*:
  without one, "no retry ladder is configured to re-arm it", as the event says).

Invariant: pure data, no I/O; durations are seconds.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final

from omed.api.base import parse_duration
from omed.api.lifecycle import Lifecycle, UpdateStrategyType

DEFAULT_MAX_ATTEMPTS: Final = 3
DEFAULT_INITIAL_DELAY: Final = 10.0
DEFAULT_MAX_DELAY: Final = 300.0
DEFAULT_MULTIPLIER: Final = 2.0


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

    strategy: UpdateStrategyType = "SurgeThenDrain"
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


def update_policy(lifecycle: Lifecycle | None) -> UpdatePolicy:
    """The resolved policy of a ``lifecycle`` block (None: every default)."""
    if lifecycle is None:
        return UpdatePolicy()
    strategy = lifecycle.update_strategy
    rolling = strategy.rolling_update if strategy is not None else None
    retry = lifecycle.update_retry
    ladder = RetryPolicy(
        max_attempts=lifecycle.effective_max_attempts,
        initial_delay=_seconds(retry.initial_delay if retry else None, DEFAULT_INITIAL_DELAY),
        max_delay=_seconds(retry.max_delay if retry else None, DEFAULT_MAX_DELAY),
        multiplier=(retry.multiplier if retry else None) or DEFAULT_MULTIPLIER,
    )
    return UpdatePolicy(
        strategy=lifecycle.effective_update_strategy_type,
        partition=(rolling.partition if rolling is not None else None) or 0,
        max_unavailable=rolling.max_unavailable if rolling is not None else None,
        max_surge=rolling.max_surge if rolling is not None else None,
        retry=ladder,
        repair_retry=ladder if retry is not None else None,
        recreate_on_restart=lifecycle.restart_policy == "RecreateInstanceOnPodRestart",
        repair_batch_size=lifecycle.repair_batch_size,
        ready_timeout=(
            None
            if lifecycle.instance_ready_timeout is None
            else _seconds(lifecycle.instance_ready_timeout, 0.0)
        ),
    )


def _seconds(text: str | None, default: float) -> float:
    return default if text is None else parse_duration(text).total_seconds()
