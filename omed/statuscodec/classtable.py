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

from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from itertools import repeat
from operator import setitem
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
    column's ``class_count`` tokens, parsed.

    A nested value (``conditions``, ``lastFailure``, ``operation``) is built once per distinct
    set of its columns' tokens, and classes whose tokens are equal hold the very same object
    (:func:`_groups`): equal tokens decode to equal values. Its columns are built and checked
    over the first class of each distinct set only, which is also the first class to fail a
    check (a check of a class reads only its own tokens in the same columns), so a refusal
    names the class it would name if every class were built."""
    templates: list[Row] = [{} for _ in range(class_count)]
    holders: dict[str, list[Any]] = {"": templates}
    string_lists: dict[str, list[Token]] = {}
    groups = _groups(column_tokens, class_count=class_count)
    for path in sorted(column_tokens, key=RANK.__getitem__):
        column = COLUMNS[path]
        group = groups.get(path.partition(".")[0])
        tokens = column_tokens[path]
        names: list[int] | None = None
        if group is not None:
            names = group.firsts
            tokens = list(map(tokens.__getitem__, names))
        holder = holders.get(column.holder)
        if group is not None and holder is templates:
            holder = group.templates(templates)
        if column.kind == PRESENT:
            holders[path] = _objects(column, tokens, holder=holder, names=names)
            if group is not None and column.holder == "":
                group.spread(templates, holders[path], key=path)
        elif column.kind == COUNT:
            lists = _lists(column, tokens, holder=holder, names=names)
            if group is not None and column.holder == "":
                group.spread(templates, lists, key=path)
            if column.object_items:
                for k in range(max((len(x) for x in lists if x is not None), default=0)):
                    holders[f"{path}.{k}"] = [
                        x[k] if x is not None and k < len(x) else None for x in lists
                    ]
            else:
                holders[path] = lists
                string_lists[path] = tokens
        elif column.key is None:
            _list_items(column, tokens, holder=holder, space=space, names=names)
        else:
            values = _values(column, tokens, space=space, names=names)
            key = column.key
            if holder is templates:
                if None not in values:  # every class has it: one C-level pass
                    _consume(map(setitem, templates, repeat(key), values))
                    continue
                for row, value in zip(templates, values, strict=True):
                    if value is not None:
                        row[key] = value
                continue
            for cls, value in enumerate(values):
                if value is None:
                    continue
                target = holder[cls] if holder is not None else None
                if target is None:
                    raise _orphan(column, _name(cls, names))
                target[key] = value
    for path, lengths in string_lists.items():
        group = groups.get(path.partition(".")[0])
        names = None if group is None else group.firsts
        for cls, items in enumerate(holders[path]):
            if items is not None and len(items) != lengths[cls]:
                raise DecodeError(
                    "row_shape",
                    f"class {_name(cls, names)}: {path} has {lengths[cls]} items but only "
                    f"{len(items)} are stored",
                )
    return templates


@dataclass(slots=True)
class _Group:
    """The classes of one nested value's columns, by their tokens in those columns."""

    firsts: list[int]
    """The first class of each distinct set of tokens, ascending: the classes built."""
    first_of: list[int]
    """Each class's first class with the same tokens."""

    def templates(self, templates: list[Row]) -> list[Row]:
        return list(map(templates.__getitem__, self.firsts))

    def spread(self, templates: list[Row], built: list[Any], *, key: str) -> None:
        """Give every class the value built for its first class (the very same object)."""
        by_class: list[Any] = [None] * len(templates)
        for cls, value in zip(self.firsts, built, strict=True):
            by_class[cls] = value
        shared = map(by_class.__getitem__, self.first_of)
        for row, cls, value in zip(templates, self.first_of, shared, strict=True):
            if value is not None and row is not templates[cls]:
                row[key] = value


def _groups(column_tokens: dict[str, list[Token]], *, class_count: int) -> dict[str, _Group]:
    """Each nested value's classes grouped by their tokens in its columns; only where some
    classes share them (else every class is built, as it is)."""
    members: dict[str, list[list[Token]]] = {}
    for path, tokens in column_tokens.items():
        root = path.partition(".")[0]
        if root in _NESTED:
            members.setdefault(root, []).append(tokens)
    out: dict[str, _Group] = {}
    for root, columns in members.items():
        keys = zip(*columns, strict=True) if len(columns) > 1 else columns[0]
        distinct: dict[Any, int] = {}
        first_of = list(map(distinct.setdefault, keys, range(class_count)))
        if len(distinct) < class_count:
            out[root] = _Group(list(distinct.values()), first_of)
    return out


_NESTED: Final = frozenset(
    path
    for path, column in COLUMNS.items()
    if column.holder == "" and column.kind in (PRESENT, COUNT)
)
"""The row's nested values (``conditions``, ``lastFailure``, ``operation``)."""


_consume: Final[Callable[[Iterable[Any]], None]] = deque(maxlen=0).extend
"""Run an iterator to its end, in C (the ``itertools`` recipe)."""


def _name(cls: int, names: list[int] | None) -> int:
    """The class number of position ``cls`` in a column built over ``names`` (all: ``None``)."""
    return cls if names is None else names[cls]


def _objects(
    column: Column, tokens: list[Token], *, holder: list[Any] | None, names: list[int] | None
) -> list[Any]:
    created: list[Any] = [None] * len(tokens)
    key = column.key
    assert key is not None
    for cls, token in enumerate(tokens):
        if token is None:
            continue
        if token != 1:
            raise DecodeError(
                "value",
                f"column {column.path}: class {_name(cls, names)} has {token}; an object is 1 or ~",
            )
        target = holder[cls] if holder is not None else None
        if target is None:
            raise _orphan(column, _name(cls, names))
        created[cls] = target[key] = {}
    return created


def _lists(
    column: Column, tokens: list[Token], *, holder: list[Any] | None, names: list[int] | None
) -> list[Any]:
    created: list[Any] = [None] * len(tokens)
    key = column.key
    assert key is not None
    for cls, token in enumerate(tokens):
        if token is None:
            continue
        if not 0 <= token <= MAX_LIST_ITEMS:
            raise DecodeError(
                "value",
                f"column {column.path}: class {_name(cls, names)} has {token} items; "
                f"a list has 0 to {MAX_LIST_ITEMS}",
            )
        target = holder[cls] if holder is not None else None
        if target is None:
            raise _orphan(column, _name(cls, names))
        items: list[Any] = [{} for _ in range(token)] if column.object_items else []
        created[cls] = target[key] = items
    return created


def _list_items(
    column: Column,
    tokens: list[Token],
    *,
    holder: list[Any] | None,
    space: list[str],
    names: list[int] | None,
) -> None:
    for cls, value in enumerate(_values(column, tokens, space=space, names=names)):
        if value is None:
            continue
        items = holder[cls] if holder is not None else None
        if items is None:
            raise _orphan(column, _name(cls, names))
        if len(items) != column.item:
            raise DecodeError(
                "row_shape",
                f"column {column.path}: class {_name(cls, names)} has item {column.item} "
                f"but not item {len(items)}",
            )
        items.append(value)


_BOOLS: Final[dict[Any, bool]] = {0: False, 1: True}


def _values(
    column: Column, tokens: list[Token], *, space: list[str], names: list[int] | None = None
) -> list[Any]:
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
            convert(token, _name(cls, names))
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
