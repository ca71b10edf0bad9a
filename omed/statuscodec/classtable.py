"""The class table of a ColumnarV2 object: one checked row template per class.

Why a module of its own: this is where the row schema meets the stored tokens. Columns are read
in canonical order, so an object's presence column or a list's length column is read before
the values it holds, and every value is checked against its column's kind (string reference,
enum, integer range, 0/1, count) in bulk, with C-level scans; only a bad token costs a loop, to
name it.

Invariant: :func:`build_templates` returns row bodies that satisfy the row schema, or raises
:class:`~omed.statuscodec.errors.DecodeError` (``coverage``, ``range_syntax``, ``string_ref``,
``value``, ``row_shape``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from omed.statuscodec.errors import DecodeError, describe
from omed.statuscodec.rowschema import (
    BOOL,
    COLUMNS,
    COUNT,
    INT,
    INT64_MAX,
    INT64_MIN,
    MAX_LIST_ITEMS,
    PRESENT,
    RANK,
    STR,
    UINT,
    Column,
)
from omed.statuscodec.sequences import Token

Row = dict[str, Any]


@dataclass(frozen=True, slots=True)
class ClassTable:
    """Rows as classes: row ``p`` is ``templates[row_class[p]]`` with ``index`` ``indexes[p]``
    (no ``index`` key where it is ``None``).

    The templates' nested values are what every row of the class shares: read-only."""

    templates: list[Row]
    """Each class's row body, without ``index``, valid under the row schema."""
    row_class: list[int]
    indexes: list[Token]


def build_templates(
    column_tokens: dict[str, list[Token]], *, class_count: int, space: list[str]
) -> list[Row]:
    """One row body per class, built column by column in canonical order (so holders exist
    before what they hold, and keys come out in canonical order). ``column_tokens`` holds each
    column's ``class_count`` tokens, parsed."""
    templates: list[Row] = [{} for _ in range(class_count)]
    holders: dict[str, list[Any]] = {"": templates}
    string_lists: dict[str, list[Token]] = {}
    for path in sorted(column_tokens, key=RANK.__getitem__):
        column = COLUMNS[path]
        tokens = column_tokens[path]
        holder = holders.get(column.holder)
        if column.kind == PRESENT:
            holders[path] = _objects(column, tokens, holder=holder)
        elif column.kind == COUNT:
            lists = _lists(column, tokens, holder=holder)
            if column.object_items:
                for k in range(max((len(x) for x in lists if x is not None), default=0)):
                    holders[f"{path}.{k}"] = [
                        x[k] if x is not None and k < len(x) else None for x in lists
                    ]
            else:
                holders[path] = lists
                string_lists[path] = tokens
        elif column.key is None:
            _list_items(column, tokens, holder=holder, space=space)
        else:
            values = _values(column, tokens, space=space)
            key = column.key
            if holder is templates:
                for row, value in zip(templates, values, strict=True):
                    if value is not None:
                        row[key] = value
                continue
            for cls, value in enumerate(values):
                if value is None:
                    continue
                target = holder[cls] if holder is not None else None
                if target is None:
                    raise _orphan(column, cls)
                target[key] = value
    for path, lengths in string_lists.items():
        for cls, items in enumerate(holders[path]):
            if items is not None and len(items) != lengths[cls]:
                raise DecodeError(
                    "row_shape",
                    f"class {cls}: {path} has {lengths[cls]} items but only "
                    f"{len(items)} are stored",
                )
    return templates


def _objects(column: Column, tokens: list[Token], *, holder: list[Any] | None) -> list[Any]:
    created: list[Any] = [None] * len(tokens)
    key = column.key
    assert key is not None
    for cls, token in enumerate(tokens):
        if token is None:
            continue
        if token != 1:
            raise DecodeError(
                "value", f"column {column.path}: class {cls} has {token}; an object is 1 or ~"
            )
        target = holder[cls] if holder is not None else None
        if target is None:
            raise _orphan(column, cls)
        created[cls] = target[key] = {}
    return created


def _lists(column: Column, tokens: list[Token], *, holder: list[Any] | None) -> list[Any]:
    created: list[Any] = [None] * len(tokens)
    key = column.key
    assert key is not None
    for cls, token in enumerate(tokens):
        if token is None:
            continue
        if not 0 <= token <= MAX_LIST_ITEMS:
            raise DecodeError(
                "value",
                f"column {column.path}: class {cls} has {token} items; "
                f"a list has 0 to {MAX_LIST_ITEMS}",
            )
        target = holder[cls] if holder is not None else None
        if target is None:
            raise _orphan(column, cls)
        items: list[Any] = [{} for _ in range(token)] if column.object_items else []
        created[cls] = target[key] = items
    return created


def _list_items(
    column: Column, tokens: list[Token], *, holder: list[Any] | None, space: list[str]
) -> None:
    for cls, value in enumerate(_values(column, tokens, space=space)):
        if value is None:
            continue
        items = holder[cls] if holder is not None else None
        if items is None:
            raise _orphan(column, cls)
        if len(items) != column.item:
            raise DecodeError(
                "row_shape",
                f"column {column.path}: class {cls} has item {column.item} "
                f"but not item {len(items)}",
            )
        items.append(value)


_BOOLS: Final[dict[Any, bool]] = {0: False, 1: True}


def _values(column: Column, tokens: list[Token], *, space: list[str]) -> list[Any]:
    """The values of a scalar column's tokens (``None`` where absent), checked in bulk with
    C-level scans; the first bad token is then named by :func:`_converter`."""
    whole = None not in tokens
    present: list[int] = [t for t in tokens if t is not None] if not whole else tokens  # type: ignore[assignment]
    if not present:
        return tokens
    low, high = min(present), max(present)
    kind = column.kind
    if kind == STR:
        if low >= 0 and high < len(space):
            values: list[Any] = (
                list(map(space.__getitem__, present))
                if whole
                else [None if t is None else space[t] for t in tokens]
            )
            if column.choices is None or set(values) <= column.choices | {None}:
                return values
    elif kind == BOOL:
        if low >= 0 and high <= 1:
            return list(map(_BOOLS.get, tokens))
    elif (INT64_MIN if kind == INT else 0) <= low and high <= INT64_MAX:
        return tokens
    convert = _converter(column, space=space)
    for cls, token in enumerate(tokens):
        if token is not None:
            convert(token, cls)
    raise AssertionError("unreachable: a bad token was found above")


def _converter(column: Column, *, space: list[str]) -> Callable[[int, int], Any]:
    path = column.path
    kind = column.kind
    if kind == STR:
        size = len(space)
        choices = column.choices

        def string(token: int, cls: int) -> str:
            if not 0 <= token < size:
                raise DecodeError(
                    "string_ref",
                    f"column {path}: class {cls} refers to string {token}, but there are {size}",
                )
            text = space[token]
            if choices is not None and text not in choices:
                raise DecodeError(
                    "value",
                    f"column {path}: class {cls} has {describe(text)}, "
                    f"not one of {', '.join(sorted(choices))}",
                )
            return text

        return string
    if kind == BOOL:

        def boolean(token: int, cls: int) -> bool:
            if token in (0, 1):
                return token == 1
            raise DecodeError("value", f"column {path}: class {cls} has {token}; a bool is 0 or 1")

        return boolean
    low = 0 if kind == UINT else INT64_MIN
    assert kind in (UINT, INT)

    def integer(token: int, cls: int) -> int:
        if low <= token <= INT64_MAX:
            return token
        raise DecodeError("value", f"column {path}: class {cls} has {token}, out of range")

    return integer


def _orphan(column: Column, cls: int) -> DecodeError:
    owner = column.holder or "row"
    return DecodeError(
        "row_shape", f"column {column.path}: class {cls} has a value but no {owner} to hold it"
    )
