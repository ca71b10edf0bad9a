"""The PodGroups of a pass: what the cache shows of them, and the writes a plan may hold.

Why apart from :mod:`.podgroups` (the rules): the pass's working state (:mod:`.work`) and the
model (:mod:`.model`) carry these values, and the rules need both, so the values live below
them. Nothing here decides.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from omed.controllers.inferencereplica.core.objectrefs import ObjectRef


@dataclass(frozen=True, slots=True)
class PodGroupView(ObjectRef):
    """One PodGroup of the cache, labelled as the replica's."""

    resource_version: str
    ours: bool
    """Its controller reference is this InferenceReplica (by uid)."""
    terminating: bool = False
    """Its deletionTimestamp is set."""
    min_member: int | None = None
    schedule_timeout: int | None = None
    """``spec.scheduleTimeoutSeconds``; None when unset."""
    labels: Mapping[str, str] = field(default_factory=dict)
    phase: str | None = None
    """``status.phase``, the gang scheduler's verdict (Failed is final for the object)."""


@dataclass(frozen=True, slots=True)
class CreatePodGroup:
    """Create an Instance's PodGroup (the Instance's pods wait until the cache shows it)."""

    name: str
    index: int
    body: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class UpdatePodGroup:
    """Bring a PodGroup's labels, minMember and scheduleTimeoutSeconds to what they should be:
    a JSON merge patch carrying the resourceVersion it was decided on."""

    name: str
    patch: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class DeletePodGroup(ObjectRef):
    """Delete a PodGroup (uid precondition): its Instance is gone, or it is reset."""


PodGroupWrite = CreatePodGroup | UpdatePodGroup | DeletePodGroup


@dataclass(slots=True)
class GangState:
    """What one pass knows and decided about PodGroups (see :mod:`.podgroups`)."""

    enabled: bool = False
    """The PodGroup CRD was present when the manager started."""
    groups: Mapping[str, PodGroupView] = field(default_factory=dict)
    """The replica's PodGroups in the cache, by name."""
    writes: list[PodGroupWrite] = field(default_factory=list)
    decided: set[str] = field(default_factory=set)
    """Names this pass already writes (one write per name per pass)."""
    held: dict[int, str | None] = field(default_factory=dict)
    """Instance index -> the waiting token of an Instance whose pods wait for their PodGroup
    (None: waiting for the cache to show a PodGroup just created, no token)."""
    created_for: list[int] = field(default_factory=list)
    """Instances whose PodGroup this pass creates."""
    warnings: list[tuple[str, str]] = field(default_factory=list)
    """(reason, message) of the Warning events of this pass: they record no transition of
    the status, so they go out whether or not the pass writes it."""
