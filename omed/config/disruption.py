"""The ``podDisruptionBudget`` entry of inferenceservice-config: each component's PDB.

Why: voluntary evictions (a node drain, the cluster autoscaler) must not take down more of
a component than its owner allows. OMENative writes one PodDisruptionBudget per component;
how much of the component it keeps is this entry's ``omeNative`` block, read through the
config cache on every reconcile, as the chart writes it::

    podDisruptionBudget: {"omeNative": {"maxUnavailable": 1}}

The block sets exactly one of ``minAvailable`` and ``maxUnavailable``, each a count of
Instances (a JSON integer >= 0) or a percentage of the component's Instances (``"0%"`` to
``"100%"``). Other keys of the entry (other deployment modes' blocks) and of the block are
ignored, as everywhere in the ConfigMap.

Invariants: an absent entry, or an entry without ``omeNative`` (or with ``null``), means
*unconfigured*: :func:`disruption_budget_entry` returns ``None``. A block that can't be used
raises :class:`~omed.config.reconcile.ReconcileConfigError` naming the entry; the serving
controller then keeps each PDB as it is (docs/configuration.md). Parsing is memoised on the
raw document, so reconciles sharing a cache read share one parse.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Final, Self

from pydantic import BaseModel, BeforeValidator, Field, PlainValidator, model_validator

from omed.config.reconcile import ReconcileConfigError
from omed.config.rules import (
    ENTRY_MODEL_CONFIG,
    EntryError,
    FieldRuleError,
    decode_object,
    object_rule,
    render,
    validate_entry,
)

__all__ = [
    "ENTRY_PDB",
    "DisruptionBudget",
    "DisruptionBudgetValue",
    "InstancePercent",
    "disruption_budget_entry",
]

ENTRY_PDB: Final = "podDisruptionBudget"
"""The ConfigMap key."""


@dataclass(frozen=True)
class InstancePercent:
    """A bound written as ``"<n>%"`` (0 to 100) of the component's Instances. Unlike a batch
    size (:class:`~omed.config.rules.Percent`), 0% is a bound like any other."""

    value: int

    def __post_init__(self) -> None:
        if not 0 <= self.value <= 100:
            raise ValueError(f"percentage {self.value} is outside 0..100")

    def __str__(self) -> str:
        return f"{self.value}%"


DisruptionBudgetValue = int | InstancePercent
"""A count of Instances (>= 0), or a percentage of the component's Instances (0% to 100%)."""

_PERCENT = re.compile(r"[0-9]+%")


def _budget_value_rule(path: str) -> Callable[[Any], DisruptionBudgetValue | None]:
    """A JSON integer >= 0, or a string ``"0%"`` to ``"100%"``; ``null`` is unset."""

    def validate(value: Any) -> DisruptionBudgetValue | None:
        if value is None or isinstance(value, InstancePercent):
            return value  # an already-typed value (built in code, not read from JSON)
        if isinstance(value, int) and not isinstance(value, bool):
            if value < 0:
                raise FieldRuleError(path, f"invalid {path} {value} must be at least 0")
            count: int = value
            return count
        if isinstance(value, str) and _PERCENT.fullmatch(value):
            number = int(value[:-1])
            if number > 100:
                raise FieldRuleError(
                    path, f"invalid {path} {render(value)} must be between 0% and 100%"
                )
            return InstancePercent(number)
        raise FieldRuleError(
            path,
            f"invalid {path} {render(value)} must be a count of Instances (an integer of at "
            'least 0) or a percentage string such as "25%"',
        )

    return validate


class DisruptionBudget(BaseModel):
    """The ``omeNative`` block: one of the two bounds, in Instances."""

    model_config = ENTRY_MODEL_CONFIG

    min_available: Annotated[
        DisruptionBudgetValue | None,
        PlainValidator(_budget_value_rule(f"{ENTRY_PDB}.omeNative.minAvailable")),
    ] = Field(default=None, alias="minAvailable")
    max_unavailable: Annotated[
        DisruptionBudgetValue | None,
        PlainValidator(_budget_value_rule(f"{ENTRY_PDB}.omeNative.maxUnavailable")),
    ] = Field(default=None, alias="maxUnavailable")

    @model_validator(mode="after")
    def _one_bound(self) -> Self:
        path = f"{ENTRY_PDB}.omeNative"
        if self.min_available is not None and self.max_unavailable is not None:
            raise FieldRuleError(
                path, f"{path} must set one of minAvailable and maxUnavailable, not both"
            )
        if self.min_available is None and self.max_unavailable is None:
            raise FieldRuleError(path, f"{path} must set minAvailable or maxUnavailable")
        return self


class _Entry(BaseModel):
    model_config = ENTRY_MODEL_CONFIG

    ome_native: Annotated[
        DisruptionBudget | None, BeforeValidator(object_rule(f"{ENTRY_PDB}.omeNative"))
    ] = Field(default=None, alias="omeNative")


@functools.lru_cache(maxsize=16)
def _parse(raw: str) -> DisruptionBudget | None:
    try:
        document = decode_object(ENTRY_PDB, raw)
        return validate_entry(_Entry, document, key=ENTRY_PDB).ome_native
    except EntryError as exc:
        raise ReconcileConfigError(ENTRY_PDB, str(exc)) from exc


def disruption_budget_entry(data: Mapping[str, str]) -> DisruptionBudget | None:
    """The ``omeNative`` block of the cached ConfigMap ``data``; ``None`` when unconfigured.

    Raises :class:`~omed.config.reconcile.ReconcileConfigError` for a block that can't be
    used; no other entry is read, so a bad one elsewhere can't fail this reader."""
    raw = data.get(ENTRY_PDB)
    return None if raw is None else _parse(raw)
