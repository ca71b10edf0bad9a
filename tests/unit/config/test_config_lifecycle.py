"""The reconcile-time lifecycle settings: every key, judged one by one."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from omed.config import lifecycle_entry
from omed.config.lifecycle import LifecycleConfig

CHART = {
    "scaleUpPodBatchSize": 100,
    "instanceReadyTimeout": "30m",
    "stuckPodGracePeriod": "60s",
    "unschedulableGracePeriod": "15m",
    "revisionHistoryLimit": 5,
    "audit": {"maxInFlightMigrations": 3, "maxMigrationsPerWindow": 10, "window": "1h"},
    "requeue": {"operation": "5s", "gate": "3s"},
    "autoMigrate": {"maxAttempts": 3},
    "forceDelete": {"overdueSlack": "30s", "nodeUnreachableThreshold": "5m"},
    "teardown": {"deadline": "30m"},
    "updateRetry": {
        "maxAttempts": 4,
        "initialDelay": "20s",
        "maxDelay": "10m",
        "multiplier": 3,
    },
    "gangScheduleTimeout": {"min": "60s", "max": "600s"},
}


def read(document: Any) -> LifecycleConfig:
    return lifecycle_entry({"lifecycle": json.dumps(document)})


def test_every_key_is_read() -> None:
    config = read(CHART)
    assert config.problems == ()
    assert config.instance_ready_timeout == 1800.0
    assert config.stuck_pod_grace_period == 60.0
    assert config.unschedulable_grace_period == 900.0
    assert config.revision_history_limit == 5
    assert config.audit is not None and config.audit.window == 3600.0
    assert (config.requeue.operation, config.requeue.gate) == (5.0, 3.0)
    assert config.auto_migrate.max_attempts == 3
    assert (config.force_delete.overdue_slack, config.force_delete.node_unreachable_threshold) == (
        30.0,
        300.0,
    )
    assert config.teardown.deadline == 1800.0
    retry = config.update_retry
    assert (retry.max_attempts, retry.initial_delay, retry.max_delay, retry.multiplier) == (
        4,
        20.0,
        600.0,
        3.0,
    )
    assert (config.gang_schedule_timeout.min, config.gang_schedule_timeout.max) == (60.0, 600.0)


def test_absent_keys_are_unconfigured_with_no_default() -> None:
    config = read({"scaleUpPodBatchSize": 100})
    assert config == LifecycleConfig(audit_problem="lifecycle.audit is not set")
    assert lifecycle_entry({}).problems == ()


@pytest.mark.parametrize(
    ("key", "value", "error"),
    [
        (
            "stuckPodGracePeriod",
            60,
            "validate lifecycle.stuckPodGracePeriod: invalid lifecycle.stuckPodGracePeriod 60 "
            'must be a duration string, such as "60s"',
        ),
        (
            "unschedulableGracePeriod",
            "-1s",
            "validate lifecycle.unschedulableGracePeriod: invalid "
            'lifecycle.unschedulableGracePeriod "-1s" must be a positive duration, such as "15m"',
        ),
        (
            "revisionHistoryLimit",
            -1,
            "validate lifecycle.revisionHistoryLimit: invalid lifecycle.revisionHistoryLimit -1 "
            "must be an integer >= 0",
        ),
        (
            "autoMigrate",
            {"maxAttempts": "3"},
            "validate lifecycle.autoMigrate.maxAttempts: invalid "
            'lifecycle.autoMigrate.maxAttempts "3" must be an integer >= 0',
        ),
        (
            "forceDelete",
            [],
            "validate lifecycle.forceDelete: invalid lifecycle.forceDelete [] must be a JSON "
            "object",
        ),
        (
            "teardown",
            {"deadline": "soon"},
            'validate lifecycle.teardown.deadline: invalid lifecycle.teardown.deadline "soon" '
            'must be a positive duration, such as "30m": time: invalid duration "soon"',
        ),
        (
            "updateRetry",
            {"multiplier": 0.5, "maxAttempts": 2},
            "validate lifecycle.updateRetry.multiplier: invalid lifecycle.updateRetry.multiplier "
            "0.5 must be a number >= 1",
        ),
        (
            "updateRetry",
            {"initialDelay": "5m", "maxDelay": "1m"},
            "validate lifecycle.updateRetry.maxDelay: invalid lifecycle.updateRetry.maxDelay "
            "must be at least lifecycle.updateRetry.initialDelay",
        ),
        (
            "gangScheduleTimeout",
            {"min": "10m", "max": "1m"},
            "validate lifecycle.gangScheduleTimeout.max: invalid "
            "lifecycle.gangScheduleTimeout.max must be at least lifecycle.gangScheduleTimeout.min",
        ),
    ],
)
def test_one_invalid_key_is_unconfigured_and_the_others_apply(
    key: str, value: object, error: str
) -> None:
    config = read({**CHART, key: value})
    assert config.problems == (error,)
    expected = read({k: v for k, v in CHART.items() if k != key})
    assert config == LifecycleConfig(
        **{
            name: getattr(expected, name)
            for name in LifecycleConfig.__dataclass_fields__
            if name != "problems"
        },
        problems=(error,),
    )


def test_an_entry_that_is_not_an_object_configures_nothing() -> None:
    config = lifecycle_entry({"lifecycle": "{"})
    assert config.instance_ready_timeout is None
    assert config.problems == (
        "parse lifecycle: invalid JSON: unexpected end of data: line 1 column 2 (char 1)",
    )


def test_a_read_of_the_same_document_shares_its_parse() -> None:
    raw = json.dumps(CHART)
    assert lifecycle_entry({"lifecycle": raw}) is lifecycle_entry({"lifecycle": str(raw)})


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=8), children, max_size=3)
    ),
    max_leaves=12,
)


@given(st.dictionaries(st.sampled_from(sorted(CHART)), JSON, max_size=6))
def test_any_document_parses_without_raising(document: dict[str, Any]) -> None:
    config = read(document)
    assert len(config.problems) <= len(document)
