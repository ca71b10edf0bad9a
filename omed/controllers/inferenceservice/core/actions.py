"""What the core decides: the writes of one step of a pass, and how the pass ends.

Each write carries exactly what is sent (a patch, a body), so the executor adds nothing of its
own. Guards that need a fresh read (the InferenceService before an adoption, the list of
replicas before the finalizer goes) are part of the write: the executor does the read and the
write only when the read agrees, and says which in the :class:`~.model.Progress` it returns.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from omed.controllers.inferenceservice.core.pacing import PaceMemory
from omed.controllers.refusedwrite import RefusedWrite


@dataclasses.dataclass(frozen=True)
class _Written:
    """The object a write is sent to (an InferenceService or an InferenceReplica)."""

    namespace: str
    name: str


@dataclasses.dataclass(frozen=True)
class AddFinalizer(_Written):
    """A JSON patch of the finalizers, guarded by a ``test`` of the resourceVersion read."""

    patch: list[dict[str, Any]]


@dataclasses.dataclass(frozen=True)
class RemoveFinalizer(_Written):
    """The same patch without the finalizer, sent only when a fresh list of the replicas
    labelled ``label_selector`` shows none controlled by ``uid``."""

    patch: list[dict[str, Any]]
    uid: str
    label_selector: str


@dataclasses.dataclass(frozen=True)
class CreateReplica(_Written):
    body: dict[str, Any]


@dataclasses.dataclass(frozen=True)
class PatchReplica(_Written):
    """A JSON merge patch of what the controller owns, carrying the resourceVersion read."""

    patch: dict[str, Any]


@dataclasses.dataclass(frozen=True)
class AdoptReplica(_Written):
    """:class:`PatchReplica` of a replica no controller owns, sent only when a fresh read of
    the InferenceService shows it with ``service_uid`` and not being deleted."""

    patch: dict[str, Any]
    service_name: str
    service_uid: str


@dataclasses.dataclass(frozen=True)
class DeleteReplica(_Written):
    """A delete with a uid precondition (a replica created again under the name stays)."""

    uid: str | None


@dataclasses.dataclass(frozen=True)
class WriteStatus(_Written):
    """A status replace carrying the resourceVersion read (``body``: the whole object)."""

    body: dict[str, Any]


@dataclasses.dataclass(frozen=True)
class ReportRefusals:
    """The pass's refused writes: a Warning event and a WARNING line per kind; the key goes
    back through the workqueue's rate limiter."""

    refusals: tuple[RefusedWrite, ...]


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
