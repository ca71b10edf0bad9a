"""The ControllerRevision writes a plan may hold (see :mod:`.revisions` for when)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class CreateControllerRevision:
    """Create the update revision's ControllerRevision (before any pod of it)."""

    name: str
    body: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class DeleteControllerRevision:
    """Delete an old ControllerRevision of the replica (uid precondition)."""

    name: str
    uid: str


@dataclass(frozen=True, slots=True)
class AdoptControllerRevision:
    """Make the replica the controller of an unowned ControllerRevision that holds its update
    revision's payload (one an earlier replica of the name left, deleted with
    ``propagationPolicy: Orphan``): its name stays the update revision, so the pods made from
    it are not rolled. ``uid`` and ``resource_version`` are the patch's preconditions."""

    name: str
    uid: str
    resource_version: str
