"""Label selectors with Kubernetes' semantics, for choosing the pods a failure applies to.

:meth:`omed_devcluster.simulator.NodeSimulator.inject` takes a ``metav1.LabelSelector`` (or plain
labels), so the match follows the API's rules exactly, including the easy-to-miss ones:

- a ``null`` label selector matches nothing, an empty one (``{}``) matches everything;
- ``NotIn`` and ``DoesNotExist`` match an object that lacks the key.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

Labels = Mapping[str, str]


class SelectorError(ValueError):
    """An operator the API does not define for this kind of selector."""


def _requirement(key: str, operator: str, values: Sequence[str], labels: Labels) -> bool:
    if operator == "In":
        return key in labels and labels[key] in values
    if operator == "NotIn":
        return key not in labels or labels[key] not in values
    if operator == "Exists":
        return key in labels
    if operator == "DoesNotExist":
        return key not in labels
    raise SelectorError(f"unknown label selector operator {operator!r}")


def match_label_selector(selector: Mapping[str, Any] | None, labels: Labels) -> bool:
    """Whether a ``metav1.LabelSelector`` selects an object with these labels."""
    if selector is None:
        return False
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expr in selector.get("matchExpressions") or []:
        if not _requirement(expr["key"], expr["operator"], expr.get("values") or [], labels):
            return False
    return True
