"""What the runtime revision core sees and decides: typed views of the cached objects, cut
down to the fields the rules read, and the plan of writes.

One plan covers one runtime *name*: garbage collection keeps the newest revisions of each
name across namespaces and kinds (``ome.io/runtime-of`` holds the bare name), so every
ServingRuntime of that name, the ClusterServingRuntime of that name, all of their revisions
and every InferenceService that names the runtime or pins one of the revisions are read
together.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

SourceKind = Literal["ServingRuntime", "ClusterServingRuntime"]


@dataclass(frozen=True, slots=True, order=True)
class Source:
    """The runtime a revision is a snapshot of. ``namespace`` is empty for a
    ClusterServingRuntime."""

    kind: SourceKind
    namespace: str
    name: str


@dataclass(frozen=True, slots=True)
class LiveRuntime:
    """A ServingRuntime or ClusterServingRuntime as it is now: its spec, as stored."""

    source: Source
    spec: Mapping[str, Any]


@dataclass(frozen=True, slots=True, kw_only=True)
class Revision:
    """A ControllerRevision labelled ``ome.io/runtime-of``, in the manager's namespace."""

    name: str
    uid: str
    resource_version: str
    runtime_name: str
    """Its ``ome.io/runtime-of`` label."""
    source: Source | None
    """From its kind and namespace labels; ``None`` when they don't name one."""
    content_hash: str
    """Its ``ome.io/revision-hash`` label, or empty."""
    number: int
    """Its ``revision`` field."""
    created: dt.datetime | None
    """Its ``metadata.creationTimestamp``."""
    mark: str | None
    """Its ``ome.io/gc-eligible-since`` annotation, as written (possibly not a time)."""
    written_by_ome: bool
    """``ome.io/created-by: ome-controller``: only such revisions are marked or deleted."""


@dataclass(frozen=True, slots=True)
class ServiceUse:
    """What an InferenceService says about the runtime revisions it uses.

    ``pins`` are upstream OME's two pin fields, ``spec.runtime.revision`` and
    ``status.pinnedRevisionName``, read as stored (the CRD keeps both). omed renders pods from
    the runtime's live spec, so the service also uses the revision of the spec it was last
    rendered from (:func:`~omed.controllers.runtimerevision.core.plan.plan` works it out from
    ``runtime_name`` and ``runtime_kind``).
    """

    namespace: str
    name: str
    runtime_name: str | None
    runtime_kind: str | None
    pins: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class Observed:
    """Everything one plan reads, for the runtime name ``runtime_name``."""

    runtime_name: str
    namespace: str
    """The manager's namespace, where the revisions live."""
    runtimes: tuple[LiveRuntime, ...] = ()
    revisions: tuple[Revision, ...] = ()
    services: tuple[ServiceUse, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class Settings:
    retention: int
    """``--runtime-revision-retention``: newest revisions kept per runtime name."""
    grace_period: dt.timedelta
    """``--runtime-revision-grace-period``: from the mark to the delete."""


# -- the plan --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RuntimeAction:
    """What the plan says of one live runtime: a snapshot to write, or why none can be."""

    source: Source


@dataclass(frozen=True, slots=True)
class Create(RuntimeAction):
    """Write a snapshot of ``source``'s live spec: ``body`` is the whole ControllerRevision."""

    body: Mapping[str, Any]

    @property
    def name(self) -> str:
        """The revision's name, as the body spells it."""
        return str(self.body["metadata"]["name"])


@dataclass(frozen=True, slots=True)
class Skipped(RuntimeAction):
    """A runtime whose snapshot can't be written; ``reason`` says why."""

    reason: str


@dataclass(frozen=True, slots=True)
class RevisionAction:
    """A write to one stored revision, preconditioned on the resourceVersion it was read at:
    a revision that changed or went since is left for the next pass."""

    revision: Revision


@dataclass(frozen=True, slots=True)
class Mark(RevisionAction):
    """Annotate ``revision`` with ``ome.io/gc-eligible-since: since``."""

    since: str


@dataclass(frozen=True, slots=True)
class Unmark(RevisionAction):
    """Remove ``revision``'s ``ome.io/gc-eligible-since``: it is kept again."""


@dataclass(frozen=True, slots=True)
class Delete(RevisionAction):
    """Delete ``revision``, preconditioned on its uid as well."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Plan:
    creates: tuple[Create, ...] = ()
    unmarks: tuple[Unmark, ...] = ()
    marks: tuple[Mark, ...] = ()
    deletes: tuple[Delete, ...] = ()
    skipped: tuple[Skipped, ...] = ()
    in_use: frozenset[str] = field(default_factory=frozenset)
    """Revision names kept because a runtime or an InferenceService uses them."""
    newest: frozenset[str] = field(default_factory=frozenset)
    """Revision names kept as the ``retention`` newest of the runtime name."""
    requeue_after: dt.timedelta | None = None
    """When the earliest mark that waits reaches its grace period; ``None`` when none waits."""

    @property
    def writes(self) -> int:
        return len(self.creates) + len(self.unmarks) + len(self.marks) + len(self.deletes)
