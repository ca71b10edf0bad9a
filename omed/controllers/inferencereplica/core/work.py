"""The mutable working state of one planning pass: its Instances and what it decided.

Why: the planner (:mod:`.plan`) and every operation kind (:mod:`.ops`) move Instances
along within one pass, and each must see what the others decided in it (a surge an update
created, a Delete that took an Instance); these two records are that shared state. Nothing
here outlives the pass, and nothing does I/O.

Invariant: an :class:`InstanceWork`'s ``op`` is what the row written by this pass records;
every pod action collected on the :class:`PassWork` belongs to such an operation.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field

from omed.api.base import Condition
from omed.api.events import NORMAL, WARNING
from omed.api.inferencereplica import InstanceStatus, Operation, RetryBlock
from omed.controllers.inferencereplica.core.actions import (
    CreatePods,
    DeletePods,
    PatchPodImages,
    RecordEvent,
    RemoveReleaseAnnotation,
    SetServingGate,
)
from omed.controllers.inferencereplica.core.model import PlanSettings, ReplicaTarget
from omed.controllers.inferencereplica.core.podgroupactions import GangState
from omed.controllers.inferencereplica.core.rows import CreateFailure, InstanceFacts, condition


@dataclass(slots=True)
class InstanceWork:
    """One Instance while the pass decides about it."""

    facts: InstanceFacts
    previous: InstanceStatus | None
    incarnation: int
    op: Operation | None
    wanted: bool
    keep: bool = True
    created_now: bool = False
    surge_of: int | None = None
    """Index of the Instance whose Update created this surge Instance (SurgeThenDrain)."""
    draining: bool = False
    """This pass sets the Instance's gates False (an update drains it): leave its gates."""
    deadline_failed: bool = False
    """This pass failed the Instance's Create at instanceReadyTimeout (its row says so)."""
    create_failed: CreateFailure | None = None
    """This pass failed the Instance's Create by a grace (its row says so, :mod:`.graces`), or
    a failed migration restored it with pods that aren't runtime-ready (:mod:`.ops.migrate`)."""
    waiting_pod: str | None = None
    """The pod that shows what holds the operation (its waiting token), if one does."""
    index: int = field(init=False)
    """The facts' index (read tens of times per Instance in a pass: a slot, not a property;
    the facts of an Instance's work are never replaced)."""

    def __post_init__(self) -> None:
        self.index = self.facts.index


@dataclass(slots=True)
class PassWork:
    """What one pass has decided so far."""

    target: ReplicaTarget
    settings: PlanSettings
    now: dt.datetime
    act: bool
    gates: list[SetServingGate] = field(default_factory=list)
    creates: list[CreatePods] = field(default_factory=list)
    deletes: list[DeletePods] = field(default_factory=list)
    patches: list[PatchPodImages] = field(default_factory=list)
    events: list[RecordEvent] = field(default_factory=list)
    requeue: list[float] = field(default_factory=list)
    blocks: list[RetryBlock] = field(default_factory=list)
    """The retry blocks this pass leaves in status."""
    conditions: list[Condition] = field(default_factory=list)
    """Conditions beyond Ready and Progressing (UpdateBlocked, RetryBlockMalformed)."""
    release: RemoveReleaseAnnotation | None = None
    release_events: list[RecordEvent] = field(default_factory=list)
    """Events of a release: recorded with the annotation's removal, status change or not."""
    excluded: dict[int, tuple[str, ...]] = field(default_factory=dict)
    """Instance index -> nodes its pods are created off (automatic relocation's suspects)."""
    gangs: GangState = field(default_factory=GangState)
    """The PodGroups seen and decided in this pass (:mod:`.podgroups`)."""

    def tell(self, reason: str, message: str) -> None:
        """Record a Normal event with the pass's status write."""
        self.events.append(RecordEvent(type=NORMAL, reason=reason, message=message))

    def warn(self, reason: str, message: str) -> None:
        """Record a Warning event with the pass's status write."""
        self.events.append(RecordEvent(type=WARNING, reason=reason, message=message))

    def flag(self, type: str, *, reason: str, message: str) -> None:
        """Show condition ``type`` True on the InferenceReplica (set anew each pass that
        still sees the cause; the planner keeps its transition time from the stored one)."""
        self.conditions.append(
            condition(None, type=type, status="True", reason=reason, message=message, now=self.now)
        )
