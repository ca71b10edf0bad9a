"""What the serving core decides: writes, each complete, for the shell to send as they are."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

Kind = Literal["Service", "PodDisruptionBudget"]


@dataclass(frozen=True, slots=True)
class ObjectAction:
    """A write of one component object, named by its kind and name (in the component's
    namespace); what its log line names."""

    kind: Kind
    name: str


@dataclass(frozen=True, slots=True)
class Create(ObjectAction):
    body: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class Patch(ObjectAction):
    """A JSON merge patch carrying the object's ``resourceVersion``, so it applies only to the
    object compared (a Conflict sends the key round again). ``adopt``: it also makes the
    InferenceReplica the controller of an object no controller owns."""

    patch: Mapping[str, Any]
    adopt: bool = False


@dataclass(frozen=True, slots=True)
class Delete(ObjectAction):
    """Delete with the uid as precondition: only the object compared goes."""

    uid: str
    reason: str


Action = Create | Patch | Delete


@dataclass(frozen=True, slots=True)
class Decision:
    actions: tuple[Action, ...] = ()
    taken: tuple[tuple[Kind, str], ...] = field(default_factory=tuple)
    """Wanted names held by an object another controller owns: left alone, told in the log."""
