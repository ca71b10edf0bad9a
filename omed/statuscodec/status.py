"""Reading an InferenceReplica's rows in whichever encoding the status holds (writing them is
:mod:`omed.statuscodec.writing`).

The rules this module implements:

* A status holds its rows either as the list ``instanceStatuses`` (``instanceStatusEncoding``
  absent: DenseV1) or as ``instanceStatusColumns`` (``instanceStatusEncoding: ColumnarV2``),
  never both. Readers accept both (:func:`decode_status`).
* A ColumnarV2 object with more rows than the bound, or read with no bound set, is not decoded:
  ``cardinality_limit``; one whose rows would hold more cells than the bound allows
  (:mod:`omed.statuscodec.cells`), ``size``. Lists have no bound: their bytes bound them.

Invariant: :func:`decode_status` returns valid rows (the row schema, each ``index`` present and
unique, as the API server guarantees for a list-map) or raises
:class:`~omed.statuscodec.errors.DecodeError`; it raises nothing else for any input.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from operator import itemgetter
from typing import Any, Final, Literal

import orjson

from omed.statuscodec.classes import check_rows, class_table
from omed.statuscodec.classtable import ClassTable
from omed.statuscodec.decoder import decode_class_table, decode_columnar
from omed.statuscodec.errors import DecodeError, EncodeError, describe
from omed.statuscodec.rowschema import check_index, flatten

Encoding = Literal["DenseV1", "ColumnarV2"]
DENSE_V1: Final[Encoding] = "DenseV1"
COLUMNAR_V2: Final[Encoding] = "ColumnarV2"
ENCODINGS: Final[tuple[Encoding, ...]] = (DENSE_V1, COLUMNAR_V2)

METRIC_LABEL_DENSE_V1: Final = "dense_v1"
METRIC_LABEL_COLUMNAR_V2: Final = "columnar_v2"
METRIC_LABELS: Final[dict[Encoding, str]] = {
    DENSE_V1: METRIC_LABEL_DENSE_V1,
    COLUMNAR_V2: METRIC_LABEL_COLUMNAR_V2,
}
"""The ``encoding`` label value of the manager's metrics for each encoding."""

FIELD_ENCODING: Final = "instanceStatusEncoding"
FIELD_LIST: Final = "instanceStatuses"
FIELD_COLUMNS: Final = "instanceStatusColumns"

CLI_MAX_ROWS: Final = 20000
"""``kubectl ome instance`` decodes ColumnarV2 objects of up to this many rows, whatever the
manager's bound."""
GUARDED_ACTION_MAX_ROWS: Final = 2048
"""The guarded kubectl-ome actions (scale, migration start, ...) decode at most this many
rows per InferenceReplica, whatever the manager's bound."""


def encoded_size(obj: Any) -> int:
    """Bytes of ``obj`` as compact JSON: what a status write of it costs."""
    return len(orjson.dumps(obj))


def stored_encoding(status: Mapping[str, Any] | None) -> Encoding:
    """The encoding a status says it holds (DenseV1 when ``instanceStatusEncoding`` is absent).

    Raises ``DecodeError("encoding")`` for any other value.
    """
    value = None if status is None else status.get(FIELD_ENCODING)
    if value is None:
        return DENSE_V1
    if value == COLUMNAR_V2:
        return COLUMNAR_V2
    raise DecodeError(
        "encoding",
        f"instanceStatusEncoding is {describe(value)}; it must be ColumnarV2 or absent",
    )


def decode_status(
    status: Any, *, max_rows: int | None, share_nested: bool = True
) -> list[dict[str, Any]]:
    """The rows of an InferenceReplica ``status``, in whichever encoding it stores them.

    ``max_rows`` is the bound for ColumnarV2 (maxDecodedInstances for the manager,
    :data:`CLI_MAX_ROWS` or :data:`GUARDED_ACTION_MAX_ROWS` for the CLI); a list is read
    whatever its length. Rows of a list are returned as the same dicts (not copied); rows of
    columns are new dicts whose nested values are shared within a class, so treat the rows
    as read-only below the top level, or pass ``share_nested=False`` (see
    :func:`decode_columnar`).
    """
    if status is None:
        return []
    if not isinstance(status, Mapping):
        raise DecodeError("type", f"status must be an object, got {describe(status)}")
    columns, listed = _stored_form(status)
    if columns is not None:
        rows = decode_columnar(columns, max_rows=max_rows, share_nested=share_nested)
    else:
        if listed is None:
            return []
        _check_list(listed)
        rows = list(listed)
    _check_unique_index(rows)
    return rows


def decode_status_table(status: Any, *, max_rows: int | None) -> ClassTable:
    """The rows of ``status`` as classes (:class:`~omed.statuscodec.classtable.ClassTable`),
    for readers that work once per class, not once per row: the checks and bounds of
    :func:`decode_status`, but no row is built. A list's classes are its rows grouped by
    equal content (a class's template is the body of its first row)."""
    if status is None:
        return ClassTable(templates=[], row_class=[], indexes=[])
    if not isinstance(status, Mapping):
        raise DecodeError("type", f"status must be an object, got {describe(status)}")
    columns, listed = _stored_form(status)
    if columns is not None:
        table = decode_class_table(columns, max_rows=max_rows)
    elif listed is None:
        return ClassTable(templates=[], row_class=[], indexes=[])
    else:
        for position, row in enumerate(listed):
            if type(row) is not dict:
                raise DecodeError(
                    "row_shape", f"row {position}: must be an object, got {describe(row)}"
                )
        try:
            table = class_table(listed)
        except EncodeError as err:
            raise DecodeError(err.reason, str(err)) from None
    _check_unique_indexes(table.indexes)
    return table


def _stored_form(status: Mapping[str, Any]) -> tuple[Any, list[Any] | None]:
    """``(columns, None)`` for ColumnarV2, ``(None, list or None)`` for DenseV1; the
    ``encoding`` and ``type`` refusals of a status that is neither."""
    encoding = stored_encoding(status)
    listed = status.get(FIELD_LIST)
    columns = status.get(FIELD_COLUMNS)
    if encoding == COLUMNAR_V2:
        if listed is not None and listed != []:
            raise DecodeError(
                "encoding",
                "instanceStatusEncoding is ColumnarV2 but instanceStatuses holds rows too",
            )
        if columns is None:
            raise DecodeError(
                "encoding",
                "instanceStatusEncoding is ColumnarV2 but instanceStatusColumns is absent",
            )
        return columns, None
    if columns is not None:
        raise DecodeError(
            "encoding",
            "instanceStatusColumns is present but instanceStatusEncoding is not ColumnarV2",
        )
    if listed is not None and type(listed) is not list:
        raise DecodeError("type", f"instanceStatuses must be a list, got {describe(listed)}")
    return None, listed


def validate_rows(rows: Any) -> list[dict[str, Any]]:
    """Check every row of a DenseV1 list on its own (no shortcut for repeated rows), for rows
    from outside the manager such as a repair's replacement file. Returns them as a list."""
    if type(rows) is not list:
        raise DecodeError("type", f"instanceStatuses must be a list, got {describe(rows)}")
    for position, row in enumerate(rows):
        _check_row(row, position=position)
    _check_unique_index(rows)
    return list(rows)


def _check_list(rows: list[Any]) -> None:
    """Check a stored list, row by row, with the encoder's per-class checking
    (:func:`~omed.statuscodec.classes.check_rows`): a row equal to an already checked row is
    not checked again."""
    for position, row in enumerate(rows):
        if type(row) is not dict:
            raise DecodeError(
                "row_shape", f"row {position}: must be an object, got {describe(row)}"
            )
    try:
        check_rows(rows)
    except EncodeError as err:
        raise DecodeError(err.reason, str(err)) from None


def _check_row(row: Any, *, position: int) -> None:
    where = f"row {position}: "
    if type(row) is not dict:
        raise DecodeError("row_shape", f"{where}must be an object, got {describe(row)}")
    if "index" in row:
        check_index(row["index"], where=where)
    flatten({k: v for k, v in row.items() if k != "index"}, where=where)


def _check_unique_indexes(indexes: Sequence[int | None]) -> None:
    """:func:`_check_unique_index` on the rows' indexes alone (``None``: no index)."""
    distinct = set(indexes)
    if len(distinct) == len(indexes) and None not in distinct:
        return
    seen: dict[int, int] = {}
    for position, index in enumerate(indexes):
        if index is None:
            raise DecodeError("index", f"row {position} has no index")
        first = seen.setdefault(index, position)
        if first != position:
            raise DecodeError("index", f"rows {first} and {position} both have index {index}")


def _check_unique_index(rows: Sequence[Mapping[str, Any]]) -> None:
    """Every row has an ``index``, and no two the same: C-level passes, then a loop only to
    name the first offender."""
    try:
        indexes = list(map(itemgetter("index"), rows))
    except KeyError:
        indexes = []
    else:
        distinct = set(indexes)
        if len(distinct) == len(indexes) and None not in distinct:
            return
    seen: dict[int, int] = {}
    for position, row in enumerate(rows):
        index = row.get("index")
        if index is None:
            raise DecodeError("index", f"row {position} has no index")
        first = seen.setdefault(index, position)
        if first != position:
            raise DecodeError("index", f"rows {first} and {position} both have index {index}")
