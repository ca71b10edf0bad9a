"""What the core decides: the writes of one step of a pass, and how the pass ends.

Each write carries exactly what is sent (a patch, a body), so the executor adds nothing of its
own. Guards that need a fresh read (the InferenceService before an adoption, the list of
replicas before the finalizer goes) are part of the write: the executor does the read and the
write only when the read agrees, and says which in the :class:`~.model.Progress` it returns.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from omed.controllers.inferenceservice.core.model import Refusal
from omed.controllers.inferenceservice.core.pacing import PaceMemory


@dataclasses.dataclass(frozen=True)
class AddFinalizer:
    """A JSON patch of the finalizers, guarded by a ``test`` of the resourceVersion read."""

    namespace: str
    name: str
    patch: list[dict[str, Any]]


@dataclasses.dataclass(frozen=True)
class RemoveFinalizer:
    """The same patch without the finalizer, sent only when a fresh list of the replicas
    labelled ``label_selector`` shows none controlled by ``uid``."""

    namespace: str
    name: str
    patch: list[dict[str, Any]]
    uid: str
    label_selector: str


@dataclasses.dataclass(frozen=True)
class CreateReplica:
    namespace: str
    name: str
    body: dict[str, Any]


@dataclasses.dataclass(frozen=True)
class PatchReplica:
    """A JSON merge patch of what the controller owns, carrying the resourceVersion read."""

    namespace: str
    name: str
    patch: dict[str, Any]


@dataclasses.dataclass(frozen=True)
class AdoptReplica:
    """:class:`PatchReplica` of a replica no controller owns, sent only when a fresh read of
    the InferenceService shows it with ``service_uid`` and not being deleted."""

    namespace: str
    name: str
    patch: dict[str, Any]
    service_name: str
    service_uid: str


@dataclasses.dataclass(frozen=True)
class DeleteReplica:
    """A delete with a uid precondition (a replica created again under the name stays)."""

    namespace: str
    name: str
    uid: str | None


@dataclasses.dataclass(frozen=True)
class WriteStatus:
    """A status replace carrying the resourceVersion read."""

    namespace: str
    name: str
    body: dict[str, Any]


@dataclasses.dataclass(frozen=True)
class ReportRefusals:
    """The pass's refused writes: a Warning event and a WARNING line per kind; the key goes
    back through the workqueue's rate limiter."""

    refusals: tuple[Refusal, ...]


Write = (
    AddFinalizer
    | RemoveFinalizer
    | CreateReplica
    | PatchReplica
    | AdoptReplica
    | DeleteReplica
    | WriteStatus
)
Action = Write | ReportRefusals


@dataclasses.dataclass(frozen=True)
class Decision:
    """One step of a pass: ``actions`` in order. When ``final`` is False the shell does the
    writes and asks again with their outcomes; a final decision ends the pass with its
    ``requeue`` (through the rate limiter) or ``requeue_after`` and leaves ``memory``."""

    actions: tuple[Action, ...]
    memory: PaceMemory
    final: bool = True
    requeue: bool = False
    requeue_after: float | None = None
