"""Writing an InferenceReplica's rows: which encoding to store, and the status that stores it.

The rules this module implements:

* Under the ColumnarV2 setting the manager still writes the list when it is no larger than the
  columns, or when there are more rows than maxDecodedInstances; under DenseV1 it always writes
  the list (:func:`choose_encoding`).
* A written status holds one form only: the other form's fields are removed, by a full update
  (:func:`with_rows`) or by a merge patch that deletes them (:func:`status_merge_patch`).

Why a module apart from :mod:`omed.statuscodec.status`: writing needs the encoder, reading
doesn't, so a reader of statuses (``kubectl ome``'s reports) imports no encoder.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from omed.statuscodec.cells import cell_bound
from omed.statuscodec.classes import check_rows
from omed.statuscodec.encoder import RowCells, encode
from omed.statuscodec.status import (
    COLUMNAR_V2,
    DENSE_V1,
    ENCODINGS,
    FIELD_COLUMNS,
    FIELD_ENCODING,
    FIELD_LIST,
    Encoding,
    encoded_size,
    stored_encoding,
)

__all__ = ["choose_encoding", "conversion", "status_merge_patch", "with_rows"]


def choose_encoding(
    rows: Sequence[Mapping[str, Any]],
    *,
    configured: Encoding,
    max_rows: int | None,
    memo: RowCells | None = None,
) -> tuple[Encoding, list[Mapping[str, Any]] | dict[str, Any]]:
    """The encoding and payload to write for ``rows`` under the configured encoding.

    DenseV1: the list. ColumnarV2: the columns, unless there are more rows than ``max_rows``
    (or no bound is set), or more cells than its cell bound (columns that wouldn't decode
    again: ``size``), or the list is no larger than the columns; then the list.
    Raises :class:`EncodeError` for rows that aren't valid. ``memo`` (rows never changed once
    given) spares the encoder the rows it has seen (:class:`~omed.statuscodec.RowCells`).
    """
    if configured not in ENCODINGS:
        raise ValueError(f"unknown encoding {configured!r}")
    listed = list(rows)
    if configured == DENSE_V1 or not max_rows or max_rows < 1 or len(listed) > max_rows:
        check_rows(listed, memo=memo)  # a list gets the same checks as columns
        return DENSE_V1, listed
    encoded = encode(listed, memo=memo)
    if encoded.cells > cell_bound(max_rows):
        return DENSE_V1, listed
    columns_size = encoded_size(encoded.columns)
    if columns_size < encoded.dense_size_at_least() or columns_size < encoded.dense_size:
        return COLUMNAR_V2, encoded.columns
    return DENSE_V1, listed


def conversion(
    status: Mapping[str, Any] | None, written: Encoding
) -> tuple[Encoding, Encoding] | None:
    """``(old, new)`` when writing ``written`` over ``status`` converts stored rows from one
    encoding to the other (an InstanceStatusConverted event), else ``None``.

    A status that held no rows (no list or an empty one, and no columns) converts nothing.
    """
    if status is None:
        return None
    old = stored_encoding(status)
    if old == written:
        return None
    if old == DENSE_V1 and not status.get(FIELD_LIST):
        return None
    return old, written


def with_rows(
    status: Mapping[str, Any] | None,
    *,
    encoding: Encoding,
    payload: list[Mapping[str, Any]] | dict[str, Any],
) -> dict[str, Any]:
    """A copy of ``status`` that stores ``payload`` in ``encoding`` and holds no trace of the
    other form: for a full status update (PUT of the status subresource)."""
    out = {
        key: value
        for key, value in (status or {}).items()
        if key not in (FIELD_ENCODING, FIELD_LIST, FIELD_COLUMNS)
    }
    if encoding == COLUMNAR_V2:
        out[FIELD_ENCODING] = COLUMNAR_V2
        out[FIELD_COLUMNS] = payload
    else:
        out[FIELD_LIST] = payload
    return out


def status_merge_patch(
    status: Mapping[str, Any] | None,
    *,
    encoding: Encoding,
    payload: list[Mapping[str, Any]] | dict[str, Any],
) -> dict[str, Any]:
    """The ``status`` part of a JSON merge patch (RFC 7386) that turns ``status`` into
    :func:`with_rows` ``(status, ...)``.

    A merge patch merges nested objects key by key, so writing new columns over old ones would
    keep the old columns' keys that the new ones lack (a stale column is damage). The patch
    therefore deletes (``None``) every key of the stored form that the new one doesn't have.
    """
    old = status or {}
    if encoding == COLUMNAR_V2:
        return {
            FIELD_ENCODING: COLUMNAR_V2,
            FIELD_LIST: None,
            FIELD_COLUMNS: _replacing(old.get(FIELD_COLUMNS), payload),
        }
    return {FIELD_ENCODING: None, FIELD_COLUMNS: None, FIELD_LIST: payload}


def _replacing(old: Any, new: Any) -> Any:
    if type(old) is not dict or type(new) is not dict:
        return new
    patch: dict[str, Any] = {key: None for key in old if key not in new}
    for key, value in new.items():
        patch[key] = _replacing(old.get(key), value)
    return patch
