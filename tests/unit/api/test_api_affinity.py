"""``required_hostnames``: the ``kubernetes.io/hostname In`` values of a pod spec's required
node affinity, which migration start (CLI) and the migration (controller) both read."""

from __future__ import annotations

from typing import Any

import pytest

from omed.api.affinity import required_hostnames


def spec(*terms: Any) -> dict[str, Any]:
    return {
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": list(terms)}
            }
        }
    }


def hostname(operator: str, *values: str) -> dict[str, Any]:
    return {"key": "kubernetes.io/hostname", "operator": operator, "values": list(values)}


def test_every_hostname_in_requirement_of_every_term_in_order() -> None:
    found = spec(
        {"matchExpressions": [hostname("In", "a", "b"), hostname("NotIn", "c")]},
        {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["z"]}]},
        {"matchExpressions": [hostname("In", "d")]},
    )
    assert [list(v) for v in required_hostnames(found)] == [["a", "b"], ["d"]]


def test_a_requirement_without_values_yields_an_empty_sequence() -> None:
    found = spec({"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In"}]})
    assert [list(v) for v in required_hostnames(found)] == [[]]


@pytest.mark.parametrize(
    "pod_spec",
    [
        {},
        {"affinity": None},
        {"affinity": {"nodeAffinity": None}},
        {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": None}}},
        spec(),
        spec(None, {}, {"matchExpressions": None}, {"matchExpressions": []}),
    ],
    ids=[
        "no affinity",
        "null affinity",
        "null node affinity",
        "null required",
        "no terms",
        "null and empty terms",
    ],
)
def test_missing_null_and_empty_parts_yield_nothing(pod_spec: dict[str, Any]) -> None:
    assert list(required_hostnames(pod_spec)) == []


def test_preferred_affinity_is_not_read() -> None:
    preferred = {
        "affinity": {
            "nodeAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {"weight": 1, "preference": {"matchExpressions": [hostname("In", "a")]}}
                ]
            }
        }
    }
    assert list(required_hostnames(preferred)) == []
