"""What one pass of the serving controller sees, as values.

The component (:class:`Component`) is read from its InferenceReplica; the revisions its pods
run (:class:`RevisionSelector`) from the pod cache; the objects it may already have are the
cached JSON as it is (the core compares only the fields omed owns, and a patch must carry
what a user added through untouched). The PodDisruptionBudget setting is one of three:
``None`` (the entry is unconfigured: no PDB), a
:class:`~omed.config.disruption.DisruptionBudget`, or :data:`BUDGET_INVALID` (the entry
can't be used: each PDB is kept as it is).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from omed.config.disruption import DisruptionBudget
from omed.controllers.serving.core.actions import Kind

Obj = Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class ServicePort:
    """One port of the component's Services: a port of the serving container."""

    name: str
    port: int
    protocol: str = "TCP"

    def body(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "port": self.port,
            "targetPort": self.port,
            "protocol": self.protocol,
        }


@dataclass(frozen=True, slots=True)
class Component:
    """One InferenceReplica, as the serving controller needs it."""

    namespace: str
    name: str
    """The InferenceReplica's name (the key, and the owner of every object here)."""
    uid: str
    isvc: str
    """The pods' ``ome.io/inferenceservice`` label: the parent's name, or the replica's own."""
    component: str
    replicas: int
    """Instances wanted."""
    pods_per_instance: int
    ports: tuple[ServicePort, ...]
    """The serving runner's container ports (the leader's for leader and workers)."""
    deleting: bool = False
    leader: bool = False
    """Its Instances are a leader and workers: only the leader takes requests."""


@dataclass(frozen=True, slots=True)
class RevisionSelector:
    """How the per-revision Services of one revision select its pods: on ``label`` equal to
    ``value`` (``ome.io/revision-hash`` when every pod of the revision carries it, else the
    full revision name in ``ome.io/revision``)."""

    label: str
    value: str


BudgetInvalid = Literal["invalid"]
BUDGET_INVALID: Final[BudgetInvalid] = "invalid"

BudgetSetting = DisruptionBudget | BudgetInvalid | None


@dataclass(frozen=True, kw_only=True)
class Observed:
    """Everything one pass decides from."""

    component: Component
    revisions: Mapping[str, RevisionSelector] = field(default_factory=dict)
    """Revision hash -> selector, for every revision that at least one pod of the component
    runs (Terminating pods included: they may still be drained through their Service)."""
    runner_labelled: bool = False
    """Every pod of the component carries ``ome.io/runner``: the ClusterIP Services of a
    leader-and-workers component can then select the leaders alone."""
    services: Mapping[str, Obj] = field(default_factory=dict)
    """Cached Services by name: those controlled by the InferenceReplica, and any other of a
    name the component wants (adopted when no controller owns it, else left alone)."""
    budget: Obj | None = None
    """The cached PodDisruptionBudget of the component's name, if any."""
    budget_setting: BudgetSetting = None
    creating: frozenset[tuple[Kind, str]] = frozenset()
    """Objects an earlier pass created that the caches don't show yet: a missing one of these
    names is not created again (its create is in flight, not lost)."""
