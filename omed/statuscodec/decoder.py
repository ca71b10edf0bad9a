"""ColumnarV2 columns -> DenseV1 rows, checking everything on the way.

The columns come from the API server, which checks only their JSON types: a hand edit, a bad
writer or a bug can leave anything inside the strings. The decoder is the line where such damage
becomes a :class:`~omed.statuscodec.errors.DecodeError` with a reason, instead of a wrong row
acted on. So it checks every count, reference and token against the format and the row schema,
and it bounds its work by what the object declares before it allocates: ``rowCount`` against
``max_rows`` first, then every sequence against the size of the table it fills.

Why it is fast: each distinct row (class) is built and checked once, and every check of a
per-row sequence is a C-level scan (``min``/``max``, a ``~`` search in the text), not a loop.
A row is then a copy of its class's template with its ``index`` set, made by C-level passes
over all rows (``map`` of ``dict.copy``, ``operator.setitem``); its nested values are the
template's, shared by the rows of the class (read-only by contract; ``share_nested=False``
copies them per row). The garbage collector is left alone: a pure function has no business
with process-wide state (pausing it and promoting the new rows would need a check,
``gc.get_freeze_count()``, that walks every frozen object: 15 ms per decode in the manager).

Invariant: :func:`decode_columnar` returns rows that satisfy the row schema, or raises
:class:`DecodeError`; it raises nothing else for any input.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Iterator
from functools import partial
from itertools import accumulate, repeat
from operator import add, floordiv, itemgetter, mod, setitem
from typing import Any, Final

from omed.statuscodec import layout, timestamps
from omed.statuscodec.cells import check_cells, is_leaf
from omed.statuscodec.classtable import ClassTable, build_templates
from omed.statuscodec.errors import DecodeError, describe, type_name
from omed.statuscodec.rowschema import (
    COLUMNS,
    INT64_MAX,
    RANK,
    STR,
)
from omed.statuscodec.sequences import Token, mark_ranges, parse_sequence, parse_sequence_span

_MISSING: Final[Any] = object()
_TWO_DIGITS: Final = tuple(f"{n:02d}" for n in range(60))
_SECONDS: Final = tuple(f"{n:02d}Z" for n in range(60))

Row = dict[str, Any]


def decode_columnar(columns: Any, *, max_rows: int | None, share_nested: bool = True) -> list[Row]:
    """The rows stored in a ColumnarV2 ``status.instanceStatusColumns``.

    ``max_rows`` is maxDecodedInstances: with ``None`` or 0 no bound is set, and nothing is
    decoded (``cardinality_limit``), as with more rows than the bound.

    Each row is a new dict (set or delete its keys freely). Its nested values (the
    ``conditions`` list and its objects, ``lastFailure``, ``operation`` and its
    ``hintTargetNodes``) are shared by the rows of one class (rows that differ only in
    ``index``), and by every class whose tokens for that value are equal (each Instance Ready
    at its own second, all with the same conditions): **treat them as read-only**; to change
    one, replace it (``row["operation"] = {**row["operation"], "step": ...}``), never edit it
    in place. That
    halves the memory and more than halves the time of a large decode; every reader in the
    manager and the CLI only reads them (``tests/unit/statuscodec/test_statuscodec_readers.py``
    checks this). A caller that must edit nested values in place passes
    ``share_nested=False`` and gets fresh copies of them in every row.

    Past the cell bound (:mod:`omed.statuscodec.cells`: ``max_rows`` x 64 indexes and leaf
    values), nothing is built either: ``size``.
    """
    table = decode_class_table(columns, max_rows=max_rows)
    if "~" in columns.get(layout.KEY_INDEX, ""):
        return _rows_some_without_index(
            table.templates,
            row_class=table.row_class,
            indexes=table.indexes,
            share_nested=share_nested,
        )
    return _rows(
        table.templates, row_class=table.row_class, indexes=table.indexes, share_nested=share_nested
    )


def decode_class_table(columns: Any, *, max_rows: int | None) -> ClassTable:
    """The checked class table of a ColumnarV2 ``status.instanceStatusColumns``: each class's
    row body (without ``index``), each row's class and index; no row is built.

    For readers that work per class (the controller validates each class once, not each row);
    :func:`decode_columnar` makes the rows from it. Raises what :func:`decode_columnar` raises.
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
    index_text = columns.get(layout.KEY_INDEX, "")
    indexes = _indexes(index_text, row_count=row_count)
    tokens = _column_tokens(column_texts, class_count=class_count)
    leaves = [column for path, column in tokens.items() if is_leaf(path)]
    check_cells(
        leaves,
        leaf_columns=len(leaves),
        row_class=row_class,
        class_count=class_count,
        indexed_rows=row_count - indexes.count(None) if "~" in index_text else row_count,
        max_rows=max_rows,
    )
    templates = build_templates(tokens, class_count=class_count, space=space)
    return ClassTable(templates=templates, row_class=row_class, indexes=indexes)


def _column_tokens(column_texts: dict[str, Any], *, class_count: int) -> dict[str, list[Token]]:
    """Each column's tokens (``classCount`` of them), in canonical order; a column that is
    ``~`` for every class is left out, as a missing column is."""
    out: dict[str, list[Token]] = {}
    for path in sorted(column_texts, key=RANK.__getitem__):
        tokens = parse_sequence(column_texts[path], what=f"column {path}", length=class_count)
        if tokens.count(None) != class_count:
            out[path] = tokens
    return out


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
    if deltas and None not in deltas:
        numbers: list[int] = deltas  # type: ignore[assignment]  # checked: no None
        epochs = list(accumulate(numbers))  # the running sum, in C
        if min(epochs) >= timestamps.MIN_EPOCH and max(epochs) <= timestamps.MAX_EPOCH:
            space += _render_times(epochs)
            return space
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
        minute, second = divmod(rest, 60)
        space.append(f"{prefix}{_TWO_DIGITS[hour]}:{_TWO_DIGITS[minute]}:{_TWO_DIGITS[second]}Z")
    return space


def _render_times(epochs: list[int]) -> list[str]:
    """The canonical spelling of each epoch (all within years 0001 to 9999): each distinct
    minute's text rendered once, then each time its minute's text and its seconds', joined
    in C-level passes (``map`` of ``floordiv``, ``mod``, ``str.__add__``)."""
    minutes = list(map(floordiv, epochs, repeat(60)))
    texts = {minute: timestamps.render(minute * 60)[:17] for minute in dict.fromkeys(minutes)}
    seconds = map(mod, epochs, repeat(60))
    return list(map(add, map(texts.__getitem__, minutes), map(_SECONDS.__getitem__, seconds)))


def _row_classes(columns: dict[Any, Any], *, row_count: int, class_count: int) -> list[int]:
    text = columns.get(layout.KEY_ROW_CLASS, "")
    tokens, low, high = parse_sequence_span(text, what=layout.KEY_ROW_CLASS, length=row_count)
    out_of_range = low is not None and high is not None and (low < 0 or high >= class_count)
    if "~" in text or out_of_range:  # without a "~", every token is an integer
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
            if start == end:
                row_class[start] = cls
            else:
                row_class[start : end + 1] = [cls] * (end - start + 1)
    return row_class


def _indexes(text: Any, *, row_count: int) -> list[Token]:
    """``index``: ``rowCount`` tokens, each ``~`` or 0 .. INT64_MAX."""
    indexes, low, high = parse_sequence_span(text, what=layout.KEY_INDEX, length=row_count)
    if low is not None and (low < 0 or high is None or high > INT64_MAX):
        for position, index in enumerate(indexes):
            if index is not None and not 0 <= index <= INT64_MAX:
                raise DecodeError("value", f"index of row {position} is out of range ({index})")
    return indexes


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
    """Each row: a copy of its class's template with its index set; nested values shared
    within the class, or (``share_nested=False``) fresh copies of them.

    Every step is one C-level pass over all the rows (``map`` over the class numbers, the
    templates' ``dict.copy``, ``operator.setitem`` of the indexes): no Python code runs per row
    on this path, where every row has an index (no ``~`` in ``index``).
    """
    indexed = [{"index": 0, **body} for body in templates]
    rows: list[Row] = list(map(dict.copy, map(indexed.__getitem__, row_class)))
    _consume(map(setitem, rows, repeat("index"), indexes))
    if not share_nested:
        _fresh_nested(rows, templates=templates, row_class=row_class)
    return rows


def _rows_some_without_index(
    templates: list[Row], *, row_class: list[int], indexes: list[Token], share_nested: bool
) -> list[Row]:
    """The rare case (not a stored InferenceReplica's: ``decode_status`` refuses a row without
    an index): a row per token, with ``index`` only where the token is not ``~``."""
    rows: list[Row] = []
    for cls, index in zip(row_class, indexes, strict=True):
        body = templates[cls]
        rows.append(body.copy() if index is None else {"index": index, **body})
    if not share_nested:
        _fresh_nested(rows, templates=templates, row_class=row_class)
    return rows


def _fresh_nested(rows: list[Row], *, templates: list[Row], row_class: list[int]) -> None:
    """Give every row its own copies of its nested values (conditions, lastFailure, operation
    and its hintTargetNodes), one C-level pass per key over the rows that have it."""
    for key in _NESTED_KEYS:
        values = [body.get(key) for body in templates]
        holders = [cls for cls, value in enumerate(values) if value is not None]
        if not holders:
            continue
        if len(holders) == len(values):
            targets, classes = rows, row_class
        else:
            has = bytes(value is not None for value in values)
            picked = [(row, cls) for row, cls in zip(rows, row_class, strict=True) if has[cls]]
            if not picked:
                continue
            targets = [row for row, _ in picked]
            classes = [cls for _, cls in picked]
        originals: Iterator[Any] = map(values.__getitem__, classes)
        if key == "conditions":
            copy_items: Callable[[Any], Any] = partial(map, dict.copy)
            copies: list[Any] = list(map(list, map(copy_items, originals)))
        else:
            copies = list(map(dict.copy, originals))
        _consume(map(setitem, targets, repeat(key), copies))
        if key == "operation":
            hinted = [op for op in copies if "hintTargetNodes" in op]
            hints = map(list.copy, map(itemgetter("hintTargetNodes"), hinted))
            _consume(map(setitem, hinted, repeat("hintTargetNodes"), hints))


_NESTED_KEYS: Final = ("conditions", "lastFailure", "operation")
_consume: Final[Callable[[Iterable[Any]], None]] = deque(maxlen=0).extend
"""Run an iterator to its end, in C (the ``itertools`` recipe)."""


# -- Messages --------------------------------------------------------------------------------


def _token(value: Token) -> str:
    return "~" if value is None else str(value)
