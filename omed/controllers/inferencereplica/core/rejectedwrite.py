"""A write of the InferenceReplica that the API server rejected as too large, as a value.

Why: the executor meets the rejection and the reconciler reports it, once per stored version
and write (:meth:`~.memory.KeyMemory.report_too_large_once`). What is reported is a function
of this value alone, so it is spelled here, next to it, and tested without a cluster.

Invariant: only a status write carries an ``encoding``; it is reported as StatusSizeExceeded
(:mod:`omed.statuscodec`), every other write as :data:`~.names.EVENT_WRITE_SIZE_EXCEEDED`,
whose message names the write.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from omed.statuscodec import Encoding


class ReplicaWriteKind(StrEnum):
    """The writes of the InferenceReplica that may be too large, as messages name them."""

    STATUS = "status write"
    ADD_FINALIZER = "add-finalizer patch"
    REMOVE_FINALIZER = "remove-finalizer patch"


@dataclass(frozen=True, slots=True, kw_only=True)
class RejectedWrite:
    """A write of the InferenceReplica that the API server (or etcd) rejected as too large.

    Keyword-only: its two sizes are easily swapped.
    """

    write: ReplicaWriteKind
    size: int
    """Bytes of the request body sent (compact JSON): the whole object for a status write."""
    object_size: int
    """Bytes of the InferenceReplica as this pass read it (compact JSON)."""
    encoding: Encoding | None = None
    """The encoding of the rows a status write carried; ``None`` for the other writes."""
    error: str = ""
    """The API server's message."""

    def log_fields(self) -> dict[str, Any]:
        """The fields of the log line that tells of a write other than the status's."""
        return {
            "write": str(self.write),
            "bytes": self.size,
            "objectBytes": self.object_size,
            "error": self.error,
        }

    def message(self, *, namespace: str, name: str) -> str:
        """``InferenceReplica <ns>/<name>: add-finalizer patch of <n> bytes was rejected as too
        large (the object is <m> bytes)``: the event of a write other than the status's."""
        return (
            f"InferenceReplica {namespace}/{name}: {self.write} of {self.size} bytes "
            f"was rejected as too large (the object is {self.object_size} bytes)"
        )
