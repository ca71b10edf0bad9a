"""Label selectors follow the API's edge cases."""

from __future__ import annotations

from typing import Any

import pytest

from omed_devcluster.sim.selectors import SelectorError, match_label_selector

LABELS = {"app": "chat", "tier": "engine"}


def test_null_selector_matches_nothing_and_empty_matches_everything() -> None:
    assert not match_label_selector(None, LABELS)
    assert match_label_selector({}, LABELS)
    assert match_label_selector({}, {})


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        ({"matchLabels": {"app": "chat"}}, True),
        ({"matchLabels": {"app": "other"}}, False),
        ({"matchExpressions": [{"key": "app", "operator": "In", "values": ["chat"]}]}, True),
        ({"matchExpressions": [{"key": "app", "operator": "NotIn", "values": ["chat"]}]}, False),
        ({"matchExpressions": [{"key": "gone", "operator": "NotIn", "values": ["x"]}]}, True),
        ({"matchExpressions": [{"key": "tier", "operator": "Exists"}]}, True),
        ({"matchExpressions": [{"key": "gone", "operator": "DoesNotExist"}]}, True),
        ({"matchExpressions": [{"key": "tier", "operator": "DoesNotExist"}]}, False),
        (
            {
                "matchLabels": {"app": "chat"},
                "matchExpressions": [{"key": "tier", "operator": "In", "values": ["router"]}],
            },
            False,
        ),
    ],
)
def test_label_selector(selector: dict[str, Any], expected: bool) -> None:
    assert match_label_selector(selector, LABELS) is expected


def test_unknown_operator_is_an_error() -> None:
    with pytest.raises(SelectorError):
        match_label_selector({"matchExpressions": [{"key": "a", "operator": "Gt"}]}, LABELS)
