"""ColumnarV2 columns -> DenseV1 rows, checking everything on the way.

The columns come from the API server, which checks only their JSON types: a hand edit, a bad
writer or a bug can leave anything inside the strings. The decoder is the line where such damage
becomes a :class:`~omed.statuscodec.errors.DecodeError` with a reason, instead of a wrong row
acted on. So it checks every count, reference and token against the format and the row schema,
and it bounds its work by what the object declares before it allocates: ``rowCount`` against
``max_rows`` first, then every sequence against the size of the table it fills.

Why it is fast: each distinct row (class) is built and checked once; a row is then a copy of
its class's template with its ``index`` set, and fresh copies of the template's nested objects
(no two rows share a mutable value).

Invariant: :func:`decode_columnar` returns rows that satisfy the row schema, or raises
:class:`DecodeError`; it raises nothing else for any input.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager
from itertools import groupby
from typing import Any, Final

from omed.statuscodec import layout, timestamps
from omed.statuscodec.classtable import build_templates
from omed.statuscodec.errors import DecodeError, describe, type_name
from omed.statuscodec.rowschema import (
    COLUMNS,
    INT64_MAX,
    STR,
)
from omed.statuscodec.sequences import Token, mark_ranges, parse_sequence

_MISSING: Final[Any] = object()

Row = dict[str, Any]


def decode_columnar(columns: Any, *, max_rows: int | None, share_nested: bool = False) -> list[Row]:
    """The rows stored in a ColumnarV2 ``status.instanceStatusColumns``.

    ``max_rows`` is maxDecodedInstances: with ``None`` or 0 no bound is set, and nothing is
    decoded (``cardinality_limit``), as with more rows than the bound.

    Each row is a new dict. Its nested values (conditions, lastFailure, operation) are new
    too, unless ``share_nested``: then the rows of one class share them, which halves the
    memory and the time of a large decode, for readers that never change a row in place
    (such as one that validates the rows into models right away).
    """
    if type(max_rows) is not int or max_rows < 1:
        raise DecodeError(
            "cardinality_limit",
            "no bound on decoded rows is set (maxDecodedInstances is 0 or missing)",
        )
    if type(columns) is not dict:
        raise DecodeError(
            "type", f"instanceStatusColumns must be an object, got {type_name(columns)}"
        )
    unknown = [key for key in columns if key not in layout.ENVELOPE_KEYS]
    version = columns.get(layout.KEY_VERSION, _MISSING)
    if version is _MISSING:
        raise DecodeError("version", "instanceStatusColumns has no version")
    if type(version) is not int or version != layout.FORMAT_VERSION:
        raise DecodeError(
            "version",
            f"instanceStatusColumns has version {describe(version)}; "
            f"this manager reads version {layout.FORMAT_VERSION}",
        )
    if unknown:
        raise DecodeError(
            "type", f"instanceStatusColumns has an unknown key {describe(unknown[0])}"
        )
    row_count = _count(columns, layout.KEY_ROW_COUNT)
    if row_count > max_rows:
        raise DecodeError(
            "cardinality_limit",
            f"{describe(row_count)} rows are stored, more than maxDecodedInstances {max_rows}",
        )
    class_count = _count(columns, layout.KEY_CLASS_COUNT)
    if class_count > row_count:
        raise DecodeError(
            "bounds",
            f"classCount {describe(class_count)} is larger than rowCount {row_count}",
        )
    column_texts = columns.get(layout.KEY_COLUMNS, {})
    if type(column_texts) is not dict:
        raise DecodeError("type", f"columns must be an object, got {type_name(column_texts)}")
    for path in column_texts:
        if path not in COLUMNS:
            raise DecodeError("row_shape", f"columns has an unknown column {describe(path)}")
    space = _string_space(columns, class_count=class_count, column_texts=column_texts)
    row_class = _row_classes(columns, row_count=row_count, class_count=class_count)
    indexes = parse_sequence(
        columns.get(layout.KEY_INDEX, ""), what=layout.KEY_INDEX, length=row_count
    )
    for position, index in enumerate(indexes):
        if index is not None and not 0 <= index <= INT64_MAX:
            raise DecodeError("value", f"index of row {position} is out of range ({index})")
    templates = build_templates(column_texts, class_count=class_count, space=space)
    with _collector_paused():
        return _rows(templates, row_class=row_class, indexes=indexes, share_nested=share_nested)


@contextmanager
def _collector_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while rows are built.

    Building 20,000 rows allocates some 80,000 containers; each 700 allocations start a
    collection, and the older generations' collections walk every live object of the process
    (the caller's caches included). That tripled the decode time, to find no garbage: JSON rows
    have no cycles. The previous state is restored, so a caller that runs with the collector
    off keeps it off.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _count(columns: dict[Any, Any], key: str) -> int:
    value = columns.get(key, _MISSING)
    if value is _MISSING:
        raise DecodeError("type", f"instanceStatusColumns has no {key}")
    if type(value) is not int:
        raise DecodeError("type", f"{key} must be an integer, got {type_name(value)}")
    if value < 0:
        raise DecodeError("value", f"{key} is negative ({describe(value)})")
    return value


def _string_space(
    columns: dict[Any, Any], *, class_count: int, column_texts: dict[Any, Any]
) -> list[str]:
    """``strings`` followed by the rendered ``times``: what string tokens refer to."""
    strings = columns.get(layout.KEY_STRINGS, [])
    if type(strings) is not list:
        raise DecodeError("type", f"strings must be a list, got {type_name(strings)}")
    for number, text in enumerate(strings):
        if type(text) is not str:
            raise DecodeError("type", f"strings[{number}] must be a string, got {type_name(text)}")
    string_columns = sum(1 for path in column_texts if COLUMNS[path].kind == STR)
    deltas = parse_sequence(
        columns.get(layout.KEY_TIMES, ""),
        what=layout.KEY_TIMES,
        length=None,
        limit=class_count * string_columns,
    )
    space = list(strings)
    epoch = 0
    days: dict[int, str] = {}
    for number, delta in enumerate(deltas):
        if delta is None:
            raise DecodeError("value", f"times item {number + 1} is absent ('~')")
        epoch = delta if number == 0 else epoch + delta
        if not timestamps.MIN_EPOCH <= epoch <= timestamps.MAX_EPOCH:
            raise DecodeError(
                "value", f"times item {number + 1} is outside years 0001 to 9999 ({epoch})"
            )
        day, seconds = divmod(epoch, 86400)
        prefix = days.get(day)
        if prefix is None:
            prefix = days[day] = timestamps.render(day * 86400)[:11]
        hour, rest = divmod(seconds, 3600)
        space.append(f"{prefix}{hour:02d}:{rest // 60:02d}:{rest % 60:02d}Z")
    return space


def _row_classes(columns: dict[Any, Any], *, row_count: int, class_count: int) -> list[int]:
    tokens = parse_sequence(
        columns.get(layout.KEY_ROW_CLASS, ""), what=layout.KEY_ROW_CLASS, length=row_count
    )
    for position, cls in enumerate(tokens):
        if cls is None or not 0 <= cls < class_count:
            raise DecodeError(
                "class_ref",
                f"rowClass gives row {position} class {_token(cls)}, "
                f"not one of the {class_count} classes",
            )
    row_class: list[int] = tokens  # type: ignore[assignment]  # checked: no None left
    overrides = columns.get(layout.KEY_OVERRIDES, {})
    if type(overrides) is not dict:
        raise DecodeError("type", f"overrides must be an object, got {type_name(overrides)}")
    marks = bytearray(row_count)
    for key, text in overrides.items():
        cls = _class_key(key, class_count=class_count)
        for start, end in mark_ranges(text, what=f"overrides[{cls}]", marks=marks):
            row_class[start : end + 1] = [cls] * (end - start + 1)
    return row_class


def _class_key(key: Any, *, class_count: int) -> int:
    text = key if type(key) is str else ""
    canonical = (
        text != ""
        and text.isascii()
        and text.isdigit()
        and len(text) <= 19
        and (text[0] != "0" or text == "0")
    )
    if not canonical or int(text) >= class_count:
        raise DecodeError(
            "class_ref",
            f"overrides names class {describe(key)}, not one of the {class_count} classes",
        )
    return int(text)


# -- Rows ------------------------------------------------------------------------------------


def _rows(
    templates: list[Row], *, row_class: list[int], indexes: list[Token], share_nested: bool
) -> list[Row]:
    """Each row: a copy of its class's template, its index, fresh copies of nested values
    (unless ``share_nested``).

    Rows come in runs of one class, so the work per run picks the loop that fits the class
    (no nested values, only conditions, or anything) and the loop body does no dispatch.
    """
    out: list[Row] = []
    append = out.append
    plans: dict[int, tuple[Row, Row, Any, bool]] = {}
    start = 0
    for cls, group in groupby(row_class):
        end = start + len(list(group))
        plan = plans.get(cls)
        if plan is None:
            body = templates[cls]
            conditions = body.get("conditions")
            only_conditions = "lastFailure" not in body and "operation" not in body
            if share_nested:
                conditions, only_conditions = None, True
            plan = plans[cls] = (body, {"index": 0, **body}, conditions, only_conditions)
        body, indexed, conditions, only_conditions = plan
        run = indexes[start:end]
        start = end
        copy = indexed.copy
        if None in run:
            for index in run:
                if index is None:
                    row = body.copy()
                else:
                    row = copy()
                    row["index"] = index
                if not share_nested:
                    _fresh(row)
                append(row)
        elif not only_conditions:
            for index in run:
                row = copy()
                row["index"] = index
                _fresh(row)
                append(row)
        elif conditions is None:
            for index in run:
                row = copy()
                row["index"] = index
                append(row)
        elif len(conditions) == 1:
            first = conditions[0].copy
            for index in run:
                row = copy()
                row["index"] = index
                row["conditions"] = [first()]
                append(row)
        elif len(conditions) == 2:
            first, second = conditions[0].copy, conditions[1].copy
            for index in run:
                row = copy()
                row["index"] = index
                row["conditions"] = [first(), second()]
                append(row)
        elif len(conditions) == 3:
            first, second, third = conditions[0].copy, conditions[1].copy, conditions[2].copy
            for index in run:
                row = copy()
                row["index"] = index
                row["conditions"] = [first(), second(), third()]
                append(row)
        else:
            for index in run:
                row = copy()
                row["index"] = index
                row["conditions"] = list(map(dict.copy, conditions))
                append(row)
    return out


def _fresh(row: Row) -> None:
    """Replace the template's nested values in ``row`` (a shallow copy) with copies."""
    conditions = row.get("conditions")
    if conditions is not None:
        row["conditions"] = list(map(dict.copy, conditions))
    failure = row.get("lastFailure")
    if failure is not None:
        row["lastFailure"] = failure.copy()
    operation = row.get("operation")
    if operation is not None:
        operation = row["operation"] = operation.copy()
        hints = operation.get("hintTargetNodes")
        if hints is not None:
            operation["hintTargetNodes"] = hints.copy()


# -- Messages --------------------------------------------------------------------------------


def _token(value: Token) -> str:
    return "~" if value is None else str(value)
