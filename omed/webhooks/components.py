"""Rules for one InferenceService component (``spec.engine``, ``spec.decoder``,
``spec.router``): replica bounds and the ``lifecycle`` block.

Why: the CRD schema types these fields, but it can't say that ``minReplicas`` must not pass
``maxReplicas``, that a multi-pod Instance needs a readiness rule, or that a rolling update
with no budget can never start. The controllers would meet those mistakes only later, as an
update that never moves; here they are refused, or warned of, when the user writes them.

Invariant: the rules read the raw JSON, not the pydantic models, so a value of the wrong
type is reported at its own path (``spec.engine.minReplicas: must be an integer, got "3"``)
instead of failing the whole object; :mod:`omed.webhooks.inferenceservice` then checks that
the models read what was admitted.

Decision on ``maxReplicas: 0``: upstream OME, and :mod:`omed.api`, read 0 as "no upper
bound". The webhook refuses it in new writes (``must be >= 1``): a component with no upper
bound just omits ``maxReplicas``, and one spelling per meaning leaves nothing for the
controllers and the CLI to read differently. An object stored with 0 before omed's webhook
ran keeps being admitted on updates that leave the value alone (ratcheting, see
:mod:`omed.webhooks.findings`), with a warning, and the controllers still read it as
unbounded.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from typing import Any, Final

from omed.api.base import DURATION_PATTERN, DURATION_TOO_LONG, DurationTooLong, parse_duration
from omed.api.lifecyclechoices import UPDATE_STRATEGY_TYPES
from omed.webhooks.findings import (
    Findings,
    Loc,
    as_object,
    check_choice,
    check_min_int,
    is_int,
    show,
)

RESTART_POLICIES: Final = ("None", "RecreateInstanceOnPodRestart")
READY_POLICIES: Final = ("AllPodReady", "None")
MIGRATION_MODES: Final = ("Auto", "Surge", "Never")

_PERCENT = re.compile(r"(0|[1-9][0-9]*)%")
_DURATION = re.compile(DURATION_PATTERN)

MAX_REPLICAS_ZERO: Final = (
    "must be >= 1, got 0 (omit maxReplicas for no upper bound, which upstream OME spelled 0)"
)
WARN_MIN_REPLICAS_ZERO: Final = "0 lets the component run no Instances, and then it serves nothing"
WARN_READY_POLICY_NONE: Final = (
    "None counts an Instance as Ready without waiting for its pods, so updates and "
    "migrations don't wait for it to serve"
)
WARN_ZERO_BUDGETS: Final = (
    "maxSurge and maxUnavailable are both 0: no Instance may be added or taken down, so an "
    "update never starts"
)
WARN_NO_READY_TIMEOUT: Final = (
    "not set, and a migration request names this component: unless the ConfigMap's "
    'lifecycle.instanceReadyTimeout sets one, the migration can fail with "deadline exceeded '
    'in phase Accepted: surge never allocated"'
)
MULTI_POD_READY_POLICY_NONE: Final = (
    "None is not allowed for multi-pod Instances (the component has a leader or worker): "
    "use AllPodReady, so that an Instance waits for all its pods"
)


def is_multi_pod(component: Mapping[str, Any]) -> bool:
    """Whether the component's Instances are a leader and workers rather than one pod."""
    return component.get("leader") is not None or component.get("worker") is not None


def check_replicas(findings: Findings, loc: Loc, *, component: Mapping[str, Any]) -> None:
    """``minReplicas >= 0``, ``maxReplicas >= 1``, ``minReplicas <= maxReplicas``."""
    get = component.get
    low = get("minReplicas")
    high = get("maxReplicas")
    # The common case first, building no field paths: both unset, or integers in order.
    if not (
        (low is None or (low.__class__ is int and low > 0))
        and (high is None or (high.__class__ is int and high >= 1))
        and (low is None or high is None or low <= high)
    ):
        _check_replica_range(findings, loc, low=low, high=high)
    worker = get("worker")
    if isinstance(worker, dict):
        size = worker.get("size")
        if size is not None and not (size.__class__ is int and size >= 0):
            check_min_int(findings, (*loc, "worker", "size"), value=size, minimum=0)


def _check_replica_range(findings: Findings, loc: Loc, *, low: Any, high: Any) -> None:
    min_loc, max_loc = (*loc, "minReplicas"), (*loc, "maxReplicas")
    low = check_min_int(findings, min_loc, value=low, minimum=0)
    if is_int(high) and high == 0:
        findings.error(max_loc, MAX_REPLICAS_ZERO)
        high = None
    else:
        high = check_min_int(findings, max_loc, value=high, minimum=1)
    if low is not None and high is not None and low > high:
        findings.error(
            min_loc, f"must be <= maxReplicas ({high}), got {low}", depends=(min_loc, max_loc)
        )
    if low == 0:
        findings.warn(min_loc, WARN_MIN_REPLICAS_ZERO)


_NOT_A_DURATION: Final = "not a duration"
_TOO_LONG: Final = "too long"
_MEMO_MAX_CHARS: Final = 64


def _duration_seconds(text: str) -> float | str:
    """Seconds of a Go duration string, or why it isn't one that OME can hold
    (:data:`_NOT_A_DURATION`, :data:`_TOO_LONG`). Memoised for short strings: a cluster uses
    a handful of distinct durations, and a long one isn't worth keeping."""
    if len(text) <= _MEMO_MAX_CHARS:
        return _memo_duration_seconds(text)
    return _parse_duration_seconds(text)


def _parse_duration_seconds(text: str) -> float | str:
    if not _DURATION.fullmatch(text):
        return _NOT_A_DURATION
    try:
        return parse_duration(text).total_seconds()
    except DurationTooLong:
        return _TOO_LONG


_memo_duration_seconds = functools.lru_cache(maxsize=256)(_parse_duration_seconds)


def _check_duration(findings: Findings, loc: Loc, *, value: Any, example: str) -> float | None:
    """A positive Go duration such as ``example``, at most Go's longest; its seconds when it
    is one."""
    if value is None:
        return None
    seconds = _duration_seconds(value) if isinstance(value, str) else _NOT_A_DURATION
    if seconds == _TOO_LONG:
        findings.error(loc, f"{DURATION_TOO_LONG}, got {show(value)}")
        return None
    if isinstance(seconds, str):
        findings.error(loc, f'must be a duration such as "{example}", got {show(value)}')
        return None
    if seconds <= 0:
        findings.error(
            loc, f'must be a positive duration such as "{example}" (or left out), got {show(value)}'
        )
        return None
    return seconds


def _check_budget(findings: Findings, loc: Loc, *, value: Any) -> int | str | None:
    """A rolling-update budget: a count >= 0, or a percentage from "0%" to "100%"."""
    if value is None:
        return None
    if is_int(value) and value >= 0:
        return value
    if isinstance(value, str) and _PERCENT.fullmatch(value) and int(value[:-1]) <= 100:
        return value
    findings.error(
        loc,
        f'must be an integer >= 0 or a percentage from "0%" to "100%", got {show(value)}',
    )
    return None


def _check_batch(findings: Findings, loc: Loc, *, value: Any) -> None:
    """A batch size: a count >= 1, or a percentage from "1%" to "100%"."""
    if value is None:
        return
    if is_int(value) and value >= 1:
        return
    if isinstance(value, str) and _PERCENT.fullmatch(value) and 1 <= int(value[:-1]) <= 100:
        return
    findings.error(
        loc, f'must be an integer >= 1 or a percentage from "1%" to "100%", got {show(value)}'
    )


def _is_zero_budget(value: int | str | None) -> bool:
    return value in {0, "0%"}


def _check_strategy(findings: Findings, loc: Loc, *, value: Any) -> None:
    """``lifecycle.updateStrategy``: its type and rolling-update budgets."""
    strategy = as_object(findings, loc, value=value) or {}
    kind = strategy.get("type")
    if kind is not None and kind not in UPDATE_STRATEGY_TYPES:
        check_choice(findings, (*loc, "type"), value=kind, choices=UPDATE_STRATEGY_TYPES)
    raw_rolling = strategy.get("rollingUpdate")
    if raw_rolling is None:
        return
    rolling_loc = (*loc, "rollingUpdate")
    rolling = as_object(findings, rolling_loc, value=raw_rolling) or {}
    partition = rolling.get("partition")
    if partition is not None:
        check_min_int(findings, (*rolling_loc, "partition"), value=partition, minimum=0)
    surge = rolling.get("maxSurge")
    if not (surge.__class__ is int and surge >= 0):
        surge = _check_budget(findings, (*rolling_loc, "maxSurge"), value=surge)
    unavailable = rolling.get("maxUnavailable")
    if not (unavailable.__class__ is int and unavailable >= 0):
        unavailable = _check_budget(findings, (*rolling_loc, "maxUnavailable"), value=unavailable)
    if _is_zero_budget(surge) and _is_zero_budget(unavailable):
        findings.warn(rolling_loc, WARN_ZERO_BUDGETS)


def _check_retry(findings: Findings, loc: Loc, *, value: Any) -> None:
    """``lifecycle.updateRetry``: attempts, delays and their order, the multiplier."""
    retry = as_object(findings, loc, value=value) or {}
    attempts = retry.get("maxAttempts")
    if attempts is not None:
        check_min_int(findings, (*loc, "maxAttempts"), value=attempts, minimum=1)
    initial = _check_duration(
        findings, (*loc, "initialDelay"), value=retry.get("initialDelay"), example="30s"
    )
    longest = _check_duration(
        findings, (*loc, "maxDelay"), value=retry.get("maxDelay"), example="10m"
    )
    if initial is not None and longest is not None and initial > longest:
        findings.error(
            (*loc, "initialDelay"),
            f"must not be longer than maxDelay ({retry.get('maxDelay')}), "
            f"got {retry.get('initialDelay')}",
            depends=((*loc, "initialDelay"), (*loc, "maxDelay")),
        )
    multiplier = retry.get("multiplier")
    if multiplier is not None and (
        isinstance(multiplier, bool) or not isinstance(multiplier, int | float) or multiplier < 1
    ):
        findings.error((*loc, "multiplier"), f"must be a number >= 1, got {show(multiplier)}")


def check_lifecycle(
    findings: Findings, loc: Loc, *, component: Mapping[str, Any], migration_requested: bool
) -> None:
    """The ``lifecycle`` block of the component at ``loc``.

    ``migration_requested``: a migration request annotation names this component, which
    makes a missing ``instanceReadyTimeout`` worth a warning.
    """
    lc_loc = (*loc, "lifecycle")
    lifecycle = as_object(findings, lc_loc, value=component.get("lifecycle"))
    if not lifecycle:
        if migration_requested:
            findings.warn((*lc_loc, "instanceReadyTimeout"), WARN_NO_READY_TIMEOUT)
        return
    get = lifecycle.get
    # Each block is checked only when present, and a field path is built only for a value
    # that a rule may report: most components set a few valid fields.
    if (restart := get("restartPolicy")) is not None and restart not in RESTART_POLICIES:
        check_choice(findings, (*lc_loc, "restartPolicy"), value=restart, choices=RESTART_POLICIES)

    if (raw_strategy := get("updateStrategy")) is not None:
        _check_strategy(findings, (*lc_loc, "updateStrategy"), value=raw_strategy)

    ready_policy = get("readyPolicy")
    if ready_policy is not None and ready_policy != "AllPodReady":
        ready_loc = (*lc_loc, "readyPolicy")
        check_choice(findings, ready_loc, value=ready_policy, choices=READY_POLICIES)
        if ready_policy == "None":
            if is_multi_pod(component):
                findings.error(
                    ready_loc,
                    MULTI_POD_READY_POLICY_NONE,
                    depends=(ready_loc, (*loc, "leader"), (*loc, "worker")),
                )
            else:
                findings.warn(ready_loc, WARN_READY_POLICY_NONE)

    timeout = get("instanceReadyTimeout")
    if timeout is not None:
        _check_duration(findings, (*lc_loc, "instanceReadyTimeout"), value=timeout, example="15m")
    if (min_ready := get("minReadySeconds")) is not None:
        check_min_int(findings, (*lc_loc, "minReadySeconds"), value=min_ready, minimum=0)

    mode = None
    if (raw_policy := get("migrationPolicy")) is not None:
        policy_loc = (*lc_loc, "migrationPolicy")
        policy = as_object(findings, policy_loc, value=raw_policy) or {}
        mode = policy.get("mode")
        if mode is not None and mode not in MIGRATION_MODES:
            check_choice(findings, (*policy_loc, "mode"), value=mode, choices=MIGRATION_MODES)
    if migration_requested and timeout is None and mode != "Never":
        findings.warn((*lc_loc, "instanceReadyTimeout"), WARN_NO_READY_TIMEOUT)

    if (raw_retry := get("updateRetry")) is not None:
        _check_retry(findings, (*lc_loc, "updateRetry"), value=raw_retry)

    if (batch := get("repairBatchSize")) is not None:
        _check_batch(findings, (*lc_loc, "repairBatchSize"), value=batch)
