"""Label selectors, node selector terms and taint tolerations, with Kubernetes' semantics.

These decide where the simulated scheduler may put a pod, so they follow the API's rules
exactly, including the easy-to-miss ones:

- a ``null`` label selector matches nothing, an empty one (``{}``) matches everything;
- ``NotIn`` and ``DoesNotExist`` match an object that lacks the key;
- node selector terms are ORed, the requirements inside a term ANDed, and a term with no
  requirements matches no node;
- a toleration with an empty key and ``Exists`` tolerates every taint; an empty effect
  tolerates every effect.
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


def _node_requirement(req: Mapping[str, Any], values_of: Labels) -> bool:
    operator = req["operator"]
    key = req["key"]
    values = req.get("values") or []
    if operator in ("Gt", "Lt"):
        if key not in values_of or len(values) != 1:
            return False
        try:
            have, want = int(values_of[key]), int(values[0])
        except ValueError:
            return False
        return have > want if operator == "Gt" else have < want
    return _requirement(key, operator, values, values_of)


def match_node_selector_term(term: Mapping[str, Any], *, name: str, labels: Labels) -> bool:
    """One ``NodeSelectorTerm``: all its expressions and fields hold (and it has some)."""
    expressions = term.get("matchExpressions") or []
    fields = term.get("matchFields") or []
    if not expressions and not fields:
        return False
    if not all(_node_requirement(req, labels) for req in expressions):
        return False
    field_values = {"metadata.name": name}
    return all(_node_requirement(req, field_values) for req in fields)


def match_node_selector(selector: Mapping[str, Any], *, name: str, labels: Labels) -> bool:
    """A ``NodeSelector``: any of its terms matches."""
    terms = selector.get("nodeSelectorTerms") or []
    return any(match_node_selector_term(t, name=name, labels=labels) for t in terms)


def tolerates(toleration: Mapping[str, Any], taint: Mapping[str, Any]) -> bool:
    """Whether one toleration tolerates one taint (``v1.Toleration.ToleratesTaint``)."""
    effect = toleration.get("effect") or ""
    if effect and effect != taint.get("effect"):
        return False
    key = toleration.get("key") or ""
    operator = toleration.get("operator") or "Equal"
    if key and key != taint.get("key"):
        return False
    if operator == "Exists":
        return True
    if operator == "Equal":
        return bool(key) and (toleration.get("value") or "") == (taint.get("value") or "")
    return False


def untolerated_taint(
    taints: Sequence[Mapping[str, Any]], tolerations: Sequence[Mapping[str, Any]]
) -> Mapping[str, Any] | None:
    """The first ``NoSchedule``/``NoExecute`` taint no toleration covers, if any."""
    for taint in taints:
        if taint.get("effect") not in ("NoSchedule", "NoExecute"):
            continue
        if not any(tolerates(t, taint) for t in tolerations):
            return taint
    return None
