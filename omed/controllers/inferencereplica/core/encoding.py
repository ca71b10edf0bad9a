"""Which form an InferenceReplica's rows are written in, and whether a write converts them.

Why: the ``omenativeStatus`` block (DenseV1 or ColumnarV2, and maxDecodedInstances) is read
once at start, and the controller must store each InferenceReplica's rows by the rules
below, converting the stored form on its next write after a restart with another
block. This module is the pure decision; the executor (:mod:`..shell.executor`) sends it, and
:mod:`omed.statuscodec` owns the format and the rules' primitives (``choose_encoding``,
``conversion``), which are used here, never restated.

The rules (docs/status-encoding.md, "Controller side"):

* ColumnarV2: ``choose_encoding``: the columns, or the list when it is no larger than the
  columns or when there are more rows than the bound.
* DenseV1: the list. One exception: an InferenceReplica *stored* as ColumnarV2 whose list
  would make a status write larger than :data:`STATUS_SIZE_LIMIT` keeps ColumnarV2 (if its
  rows fit the bound, so it can be read back); it is "stuck",
  rather than losing every write to the API server's size limit. A DenseV1-stored
  InferenceReplica whose list grows too large is written as a list all the same, and the API
  server's refusal is the StatusSizeExceeded event that tells the operator to switch.

Invariants:

* a write never stores columns that the manager could not decode again under its own bound;
* :func:`needs_conversion` is true exactly when a write of the same rows would change the
  stored form, so a pass that changes no row still converts (a restart converts the fleet),
  and a pass after the conversion writes nothing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from omed.config import OMENativeStatusConfig
from omed.statuscodec import (
    COLUMNAR_V2,
    DENSE_V1,
    DecodeError,
    Encoding,
    RowCells,
    choose_encoding,
    conversion,
    encode,
    encoded_size,
    stored_encoding,
    with_rows,
)

ETCD_MAX_REQUEST_BYTES: Final = 1_572_864
"""etcd's default ``--max-request-bytes`` (1.5 MiB): the largest object the API server can
store."""
STATUS_WRITE_OVERHEAD: Final = 128 * 1024
"""Room kept for what an etcd request holds besides the status we send: the object's
metadata as stored (managedFields grow with every writer), its spec, and the request
framing."""
STATUS_SIZE_LIMIT: Final = ETCD_MAX_REQUEST_BYTES - STATUS_WRITE_OVERHEAD
"""Bytes (compact JSON of the whole object written) above which a DenseV1 write of a
ColumnarV2-stored InferenceReplica keeps ColumnarV2: 1,441,792."""


@dataclass(frozen=True, slots=True)
class StatusEncodingSettings:
    """The ``omenativeStatus`` block as the controller uses it, and the write size it keeps
    under.

    ``max_decoded_instances`` 0 or ``None`` means that no bound is set: then no ColumnarV2
    status is decoded (``cardinality_limit``) and none is written.
    """

    encoding: Encoding = DENSE_V1
    max_decoded_instances: int | None = None
    size_limit: int = STATUS_SIZE_LIMIT
    """Bytes of a status write above which a ColumnarV2-stored InferenceReplica stays
    ColumnarV2 under DenseV1 (:data:`STATUS_SIZE_LIMIT`; tests lower it)."""

    @classmethod
    def from_config(cls, config: OMENativeStatusConfig) -> StatusEncodingSettings:
        return cls(
            encoding=config.instance_status_encoding,
            max_decoded_instances=config.max_decoded_instances,
        )

    @property
    def bound(self) -> int | None:
        """maxDecodedInstances, or ``None`` when none is set."""
        return self.max_decoded_instances or None


@dataclass(frozen=True, slots=True)
class StatusWrite:
    """The status to write and what it does to the stored form."""

    status: dict[str, Any]
    """The full status (summary and rows in ``encoding``), with no trace of the other form."""
    encoding: Encoding
    converted: tuple[Encoding, Encoding] | None
    """``(old, new)`` when the write converts stored rows (an InstanceStatusConverted event)."""


ROW_CELLS: Final = RowCells()
"""The controller's memo of what the encoder learnt of each row JSON (one controller per
process): the row JSON it encodes is shared and never changed (``status.RowJson``)."""


def _safe_stored(status: Mapping[str, Any] | None) -> Encoding | None:
    try:
        return stored_encoding(status)
    except DecodeError:
        return None


def choose_form(
    rows: Sequence[Mapping[str, Any]],
    *,
    stored: Mapping[str, Any] | None,
    settings: StatusEncodingSettings,
    overhead: int = 0,
    memo: RowCells | None = None,
) -> tuple[Encoding, list[Mapping[str, Any]] | dict[str, Any]]:
    """The encoding and payload for ``rows`` (JSON rows sorted by index).

    ``stored`` is the status as stored now; ``overhead`` the bytes of the written object
    besides the rows (compared with the settings' ``size_limit`` together with the list).
    ``memo`` (:data:`ROW_CELLS` for rows that are never changed) changes nothing but the
    cost.
    """
    bound = settings.bound
    if settings.encoding == COLUMNAR_V2:
        return choose_encoding(rows, configured=COLUMNAR_V2, max_rows=bound, memo=memo)
    listed = list(rows)
    if _safe_stored(stored) == COLUMNAR_V2 and bound is not None and 0 < len(listed) <= bound:
        list_size = encoded_size(listed)
        if overhead + list_size > settings.size_limit:
            columns = encode(listed, memo=memo).columns
            if encoded_size(columns) < list_size:
                return COLUMNAR_V2, columns
    encoding, payload = choose_encoding(listed, configured=DENSE_V1, max_rows=bound, memo=memo)
    return encoding, payload


def status_write(
    summary: Mapping[str, Any],
    rows: Sequence[Mapping[str, Any]],
    *,
    stored: Mapping[str, Any] | None,
    settings: StatusEncodingSettings,
    overhead: int = 0,
    memo: RowCells | None = None,
) -> StatusWrite:
    """The status that stores ``summary`` (a status without rows) and ``rows``."""
    encoding, payload = choose_form(
        rows,
        stored=stored,
        settings=settings,
        overhead=overhead + encoded_size(summary),
        memo=memo,
    )
    if encoding == DENSE_V1 and not payload:
        # No rows: no instanceStatuses key at all, as before the codec (a pass that changes
        # nothing writes nothing).
        status = with_rows(summary, encoding=DENSE_V1, payload=[])
        del status["instanceStatuses"]
    else:
        status = with_rows(summary, encoding=encoding, payload=payload)
    converted = None if _safe_stored(stored) is None else conversion(stored, encoding)
    return StatusWrite(status=status, encoding=encoding, converted=converted)


def needs_conversion(
    rows: Sequence[Mapping[str, Any]],
    *,
    stored: Mapping[str, Any] | None,
    settings: StatusEncodingSettings,
    memo: RowCells | None = None,
) -> bool:
    """Whether writing the same ``rows`` again would store them in another form."""
    old = _safe_stored(stored)
    if old is None or not rows:
        return False  # nothing to convert (an undecodable status is never planned for)
    encoding, _ = choose_form(rows, stored=stored, settings=settings, memo=memo)
    return encoding != old
