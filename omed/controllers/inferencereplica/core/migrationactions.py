"""What a pass decides about migrations beyond pods and status: the mailbox and the ledger.

Why a module of its own: these two actions leave the InferenceReplica (the parent
InferenceService's annotations, the audit ConfigMap), and :mod:`.migrationview` and the
planner's migration pass (:mod:`.ops.migrate`) are their only producers.
"""

from __future__ import annotations

from dataclasses import dataclass

from omed.api.migrationrequest import MigrationRequest, RequestProblem
from omed.controllers.ledger.document import LedgerEntry


@dataclass(frozen=True, slots=True)
class Mailbox:
    """The parent InferenceService's migration requests, read from the cache."""

    isvc: str
    uid: str
    """The InferenceService's uid: the audit ledger's owner."""
    requests: tuple[MigrationRequest | RequestProblem, ...]
    """Every ``ome.io/migration-request-v1-*`` annotation, keys sorted."""
    declared: frozenset[str]
    """The components the InferenceService's spec declares."""


@dataclass(frozen=True, slots=True)
class WriteAuditRow:
    """Write one row of the InferenceService's audit ledger (before the status write: a
    row is replaced by its own identity, so a pass that runs again writes it again, and a
    record never ends before its row does)."""

    isvc: str
    uid: str
    entry: LedgerEntry


@dataclass(frozen=True, slots=True)
class ConsumeMigrationRequests:
    """Remove request annotations from the parent InferenceService, after the status write
    that records what became of them (a crash between the two re-delivers the request, which
    the record makes a no-op)."""

    isvc: str
    keys: tuple[str, ...]
