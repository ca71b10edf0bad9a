"""The podDisruptionBudget entry: absent is unconfigured, one bound of two, clear errors."""

from __future__ import annotations

import json

import pytest

from omed.config.disruption import InstancePercent, disruption_budget_entry
from omed.config.reconcile import ReconcileConfigError


def entry(document: object) -> dict[str, str]:
    return {"podDisruptionBudget": json.dumps(document)}


def test_absent_entry_or_block_is_unconfigured() -> None:
    assert disruption_budget_entry({}) is None
    assert disruption_budget_entry(entry({})) is None
    assert disruption_budget_entry(entry({"omeNative": None})) is None
    assert disruption_budget_entry(entry({"rawDeployment": {"minAvailable": 1}})) is None


@pytest.mark.parametrize(
    ("block", "bounds"),
    [
        ({"maxUnavailable": 1}, (None, 1)),
        ({"minAvailable": 0}, (0, None)),
        ({"minAvailable": "50%"}, (InstancePercent(50), None)),
        ({"maxUnavailable": "0%", "minAvailable": None}, (None, InstancePercent(0))),
        ({"maxUnavailable": "100%", "other": True}, (None, InstancePercent(100))),
    ],
)
def test_one_bound(block: dict[str, object], bounds: tuple[object, object]) -> None:
    budget = disruption_budget_entry(entry({"omeNative": block}))
    assert budget is not None
    assert (budget.min_available, budget.max_unavailable) == bounds


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (
            "{",
            "invalid podDisruptionBudget entry in ConfigMap inferenceservice-config: "
            "parse podDisruptionBudget: invalid JSON",
        ),
        (
            json.dumps({"omeNative": {"minAvailable": 1, "maxUnavailable": 1}}),
            "validate podDisruptionBudget.omeNative: podDisruptionBudget.omeNative must set one "
            "of minAvailable and maxUnavailable, not both",
        ),
        (
            json.dumps({"omeNative": {}}),
            "validate podDisruptionBudget.omeNative: podDisruptionBudget.omeNative must set "
            "minAvailable or maxUnavailable",
        ),
        (
            json.dumps({"omeNative": {"maxUnavailable": -1}}),
            "invalid podDisruptionBudget.omeNative.maxUnavailable -1 must be at least 0",
        ),
        (
            json.dumps({"omeNative": {"minAvailable": "150%"}}),
            'invalid podDisruptionBudget.omeNative.minAvailable "150%" must be between 0% and 100%',
        ),
        (
            json.dumps({"omeNative": {"minAvailable": "2"}}),
            'invalid podDisruptionBudget.omeNative.minAvailable "2" must be a count of Instances',
        ),
        (
            json.dumps({"omeNative": {"minAvailable": True}}),
            "invalid podDisruptionBudget.omeNative.minAvailable true must be a count",
        ),
        (
            json.dumps({"omeNative": 3}),
            "invalid podDisruptionBudget.omeNative 3 must be a JSON object",
        ),
    ],
)
def test_an_unusable_entry_names_the_entry_and_the_rule(raw: str, message: str) -> None:
    with pytest.raises(ReconcileConfigError) as caught:
        disruption_budget_entry({"podDisruptionBudget": raw})
    assert caught.value.key == "podDisruptionBudget"
    assert message in str(caught.value)
    assert str(caught.value).startswith(
        "invalid podDisruptionBudget entry in ConfigMap inferenceservice-config: "
    )


def test_other_entries_are_not_read() -> None:
    data = {"lifecycle": "{", **entry({"omeNative": {"maxUnavailable": 2}})}
    budget = disruption_budget_entry(data)
    assert budget is not None and budget.max_unavailable == 2
