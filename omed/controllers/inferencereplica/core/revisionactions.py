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
