"""Selectors, node selector terms and tolerations follow the API's edge cases."""

from __future__ import annotations

from typing import Any

import pytest

from omed.devcluster.sim.selectors import (
    SelectorError,
    match_label_selector,
    match_node_selector,
    tolerates,
    untolerated_taint,
)

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


NODE_LABELS = {"kubernetes.io/hostname": "n1", "gpu": "h100", "rank": "5"}


def _term(*exprs: dict[str, Any]) -> dict[str, Any]:
    return {"nodeSelectorTerms": [{"matchExpressions": list(exprs)}]}


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        (_term({"key": "kubernetes.io/hostname", "operator": "In", "values": ["n1", "n2"]}), True),
        (_term({"key": "kubernetes.io/hostname", "operator": "NotIn", "values": ["n1"]}), False),
        (_term({"key": "zone", "operator": "NotIn", "values": ["a"]}), True),
        (_term({"key": "gpu", "operator": "Exists"}), True),
        (_term({"key": "gpu", "operator": "DoesNotExist"}), False),
        (_term({"key": "rank", "operator": "Gt", "values": ["4"]}), True),
        (_term({"key": "rank", "operator": "Lt", "values": ["4"]}), False),
        (_term({"key": "gpu", "operator": "Gt", "values": ["4"]}), False),
        ({"nodeSelectorTerms": [{}]}, False),
        ({"nodeSelectorTerms": []}, False),
        (
            {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "gpu", "operator": "In", "values": ["a100"]}]},
                    {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]},
                ]
            },
            True,
        ),
    ],
)
def test_node_selector(selector: dict[str, Any], expected: bool) -> None:
    assert match_node_selector(selector, name="n1", labels=NODE_LABELS) is expected


GPU_TAINT = {"key": "nvidia.com/gpu", "effect": "NoSchedule"}
UNREACHABLE = {"key": "node.kubernetes.io/unreachable", "effect": "NoExecute"}


@pytest.mark.parametrize(
    ("toleration", "taint", "expected"),
    [
        ({"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}, GPU_TAINT, True),
        ({"key": "nvidia.com/gpu", "operator": "Exists"}, GPU_TAINT, True),
        ({"operator": "Exists"}, UNREACHABLE, True),
        ({"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoExecute"}, GPU_TAINT, False),
        ({"key": "other", "operator": "Exists"}, GPU_TAINT, False),
        ({"key": "k", "value": "v"}, {"key": "k", "value": "v", "effect": "NoSchedule"}, True),
        ({"key": "k", "value": "w"}, {"key": "k", "value": "v", "effect": "NoSchedule"}, False),
    ],
)
def test_tolerates(toleration: dict[str, Any], taint: dict[str, Any], expected: bool) -> None:
    assert tolerates(toleration, taint) is expected


def test_prefer_no_schedule_never_blocks() -> None:
    soft = {"key": "soft", "effect": "PreferNoSchedule"}
    assert untolerated_taint([soft], []) is None
    assert untolerated_taint([soft, GPU_TAINT], []) == GPU_TAINT
    assert untolerated_taint([GPU_TAINT], [{"key": "nvidia.com/gpu", "operator": "Exists"}]) is None
