"""The values a component's ``lifecycle`` fields may take, and their defaults.

Why a module apart from the models (:mod:`omed.api.lifecycle`): the values are what a reader
of stored JSON checks against too (``kubectl ome instance status`` names an unknown update
strategy; the webhook refuses one), and those readers need no pydantic model to do it. The
models' fields are typed with these same ``Literal`` types, so the two can't disagree.
"""

from __future__ import annotations

from typing import Final, Literal, get_args

__all__ = [
    "DEFAULT_MIGRATION_MODE",
    "DEFAULT_UPDATE_RETRY_MAX_ATTEMPTS",
    "DEFAULT_UPDATE_STRATEGY_TYPE",
    "UPDATE_STRATEGY_TYPES",
    "MigrationMode",
    "ReadyPolicy",
    "RestartPolicy",
    "UpdateStrategyType",
]

RestartPolicy = Literal["None", "RecreateInstanceOnPodRestart"]
UpdateStrategyType = Literal["SurgeThenDrain", "RecreatePod", "InPlaceIfPossible", "InPlaceOnly"]
ReadyPolicy = Literal["AllPodReady", "None"]
MigrationMode = Literal["Auto", "Surge", "Never"]

UPDATE_STRATEGY_TYPES: Final[tuple[UpdateStrategyType, ...]] = get_args(UpdateStrategyType)
DEFAULT_UPDATE_STRATEGY_TYPE: Final[UpdateStrategyType] = "SurgeThenDrain"
DEFAULT_MIGRATION_MODE: Final[MigrationMode] = "Auto"
DEFAULT_UPDATE_RETRY_MAX_ATTEMPTS: Final = 3
