"""The ControllerRevision writes a plan may hold (see :mod:`.revisions` for when)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from omed.controllers.inferencereplica.core.objectrefs import ObjectRef


@dataclass(frozen=True, slots=True)
class CreateControllerRevision:
    """Create the update revision's ControllerRevision (before any pod of it)."""

    name: str
    body: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class DeleteControllerRevision(ObjectRef):
    """Delete an old ControllerRevision of the replica (uid precondition)."""


@dataclass(frozen=True, slots=True)
class AdoptControllerRevision(ObjectRef):
    """Make the replica the controller of an unowned ControllerRevision that holds its update
    revision's payload (one an earlier replica of the name left, deleted with
    ``propagationPolicy: Orphan``): its name stays the update revision, so the pods made from
    it are not rolled. ``uid`` and ``resource_version`` are the patch's preconditions."""

    resource_version: str


RevisionWrite = CreateControllerRevision | AdoptControllerRevision | DeleteControllerRevision
