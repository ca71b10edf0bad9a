"""What the controller remembers of one InferenceReplica between passes, as one value.

Why: some facts of a pass are in no cache (a create the API server refused, a write refused
for good, when this manager last wrote the status, what it has already reported), and the
next pass decides with them. The shell keeps one :class:`KeyMemory` per key, hands it to
:func:`.decide.decide` and keeps what comes back; the core never mutates it.

Invariants: the memory is per process (a new leader starts from :data:`EMPTY`, so it writes
at once and reports once more); a key whose InferenceReplica and pods are all gone is
forgotten; nothing here is needed for correctness across a restart: every operation is in
the rows.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace

from omed.controllers.inferencereplica.core.model import CreateRefusal
from omed.controllers.refusedwrite import RefusedWrite


@dataclass(frozen=True, slots=True, kw_only=True)
class KeyMemory:
    """One InferenceReplica's memory between passes."""

    reported: str | None = None
    """The resourceVersion whose unreadable spec or status was reported (event and log)."""
    size_reported: str | None = None
    """``<write>@<resourceVersion>`` of the write reported as too large."""
    form_current: str | None = None
    """The resourceVersion whose stored form was found to be the one a write keeps."""
    refused: Mapping[int, CreateRefusal] = field(default_factory=dict)
    """Instance index -> the last refused create of its pods (a waiting token)."""
    write_refused: RefusedWrite | None = None
    """The refused write condition WriteRefused shows, until a pass completes without one."""
    last_status_write: float | None = None
    """When this manager last stored the status (monotonic seconds): what pacing counts."""
    escalations_reported: frozenset[str] = frozenset()
    """What the escalation (:mod:`.escalation`) reported once and still holds: a pod's
    finalizer block, the set of pods a teardown is blocked by."""
    removed_requests: frozenset[str] = frozenset()
    """Migration request annotations this manager removed from the parent InferenceService
    that its cache may still show (:func:`.decide.decide` hides them from the mailbox until
    the cache shows them gone), so a stale cache neither removes nor answers one twice."""

    def report_once(self, version: str) -> KeyMemory | None:
        """The memory after reporting that ``version`` can't be read; None when it was."""
        return None if self.reported == version else replace(self, reported=version)

    def report_too_large_once(self, write: str, version: str) -> KeyMemory | None:
        """The memory after reporting ``write`` of ``version`` too large; None when it was."""
        said = f"{write}@{version}"
        return None if self.size_reported == said else replace(self, size_reported=said)

    def status_written(self, at: float) -> KeyMemory:
        return replace(self, last_status_write=at)

    def requests_removed(self, keys: Iterable[str]) -> KeyMemory:
        return replace(self, removed_requests=self.removed_requests | frozenset(keys))


EMPTY = KeyMemory()
"""What a key starts with, and what a forgotten key is."""
