"""The shape of one DenseV1 row, and its flattening into ColumnarV2 column cells.

Both encodings must hold exactly the same rows, so one table says what a row may contain:
which keys, which JSON type each key's value has, which strings an enum allows, and how long
a list may be. The encoder checks every distinct row against it, the DenseV1 reader checks
lists against it, and the ColumnarV2 decoder only ever builds rows that satisfy it. A row may
leave out any key; the codec keeps absent keys absent.

A row (without its ``index``) flattens into *cells*: the column paths it has and their values,
as two parallel tuples in the canonical column order. A scalar is one cell (``phase``), an
object is a presence cell plus its fields' cells (``lastFailure``, ``lastFailure.pod``), a list
is a length cell plus its items' cells (``conditions``, ``conditions.0.type``;
``operation.hintTargetNodes.0``). The cells are a row's value identity: two rows with equal
cells are equal rows, with equal JSON types.

Invariant: :func:`flatten` accepts a value if and only if it is a valid row body, and the
decoder's rebuild from the cells (:mod:`omed.statuscodec.decoder`) equals it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from omed.statuscodec.errors import DecodeError, describe

INT64_MIN: Final = -(2**63)
INT64_MAX: Final = 2**63 - 1
MAX_LIST_ITEMS: Final = 32
"""The most items a row's ``conditions`` or an operation's ``hintTargetNodes`` may have."""

PHASES: Final = frozenset(
    {"Pending", "Creating", "Ready", "Updating", "Restarting", "Migrating", "Failed", "Deleting"}
)
OPERATION_TYPES: Final = frozenset({"Create", "Update", "Restart", "Migrate", "Delete"})
CONDITION_STATUSES: Final = frozenset({"True", "False", "Unknown"})

# Kinds of cells (small ints: the decoder dispatches on them in its inner loops).
STR: Final = 0
UINT: Final = 1  # integer 0..INT64_MAX
INT: Final = 2  # integer INT64_MIN..INT64_MAX
BOOL: Final = 3  # stored as 0 or 1
PRESENT: Final = 4  # an object is present: stored as 1
COUNT: Final = 5  # a list of this many items: 0..MAX_LIST_ITEMS

Cells = tuple[tuple[str, ...], tuple[Any, ...]]
"""(paths, values) of a row body, in canonical column order."""


@dataclass(frozen=True, slots=True)
class Scalar:
    kind: int
    choices: frozenset[str] | None = None


@dataclass(frozen=True, slots=True)
class Obj:
    fields: tuple[tuple[str, Scalar | Obj | ListOf], ...]


@dataclass(frozen=True, slots=True)
class ListOf:
    item: Scalar | Obj


_S: Final = Scalar(STR)
_U: Final = Scalar(UINT)

CONDITION: Final = Obj(
    (
        ("type", _S),
        ("status", Scalar(STR, CONDITION_STATUSES)),
        ("observedGeneration", _U),
        ("lastTransitionTime", _S),
        ("reason", _S),
        ("message", _S),
    )
)
LAST_FAILURE: Final = Obj(
    (("pod", _S), ("container", _S), ("reason", _S), ("exitCode", Scalar(INT)), ("time", _S))
)
OPERATION: Final = Obj(
    (
        ("id", _S),
        ("type", Scalar(STR, OPERATION_TYPES)),
        ("step", _S),
        ("startedAt", _S),
        ("lastProgressAt", _S),
        ("deadline", _S),
        ("retryCount", _U),
        ("targetRevision", _S),
        ("reason", _S),
        ("waiting", _S),
        ("surgeIndex", _U),
        ("fromNode", _S),
        ("hintTargetNodes", ListOf(_S)),
        ("requestUUID", _S),
    )
)
ROW_BODY: Final = Obj(
    (
        ("incarnation", _U),
        ("phase", Scalar(STR, PHASES)),
        ("runningRevision", _S),
        ("targetRevision", _S),
        ("podCount", _U),
        ("servingPodCount", _U),
        ("availablePodCount", _U),
        ("admitted", Scalar(BOOL)),
        ("conditions", ListOf(CONDITION)),
        ("readySince", _S),
        ("activeOrdinal", _U),
        ("lastFailure", LAST_FAILURE),
        ("operation", OPERATION),
    )
)
"""Every key of a row but ``index``, in canonical order."""

ROW_KEYS: Final = frozenset({"index", *(name for name, _ in ROW_BODY.fields)})


@dataclass(frozen=True, slots=True)
class Column:
    """One column path of the class table, as the decoder needs it."""

    path: str
    kind: int
    choices: frozenset[str] | None
    holder: str
    """Path of the column whose values hold this one's: "" for the row itself, an object's
    presence column, a list's length column, or a list item ``conditions.3``."""
    key: str | None
    """The key this column sets in its holder; ``None`` for an item of a list of strings."""
    item: int
    """The list position for an item column, else -1."""
    item_of: str | None
    """For an item column (or a field of an item object): the list's length column."""
    object_items: bool
    """For a length column: its items are objects (``conditions``), not strings."""


def _columns() -> dict[str, Column]:
    table: dict[str, Column] = {}

    def walk(obj: Obj, *, prefix: str, holder: str, item: int, item_of: str | None) -> None:
        for name, spec in obj.fields:
            path = prefix + name
            if isinstance(spec, Scalar):
                table[path] = Column(
                    path, spec.kind, spec.choices, holder, name, item, item_of, False
                )
            elif isinstance(spec, Obj):
                table[path] = Column(path, PRESENT, None, holder, name, item, item_of, False)
                walk(spec, prefix=path + ".", holder=path, item=item, item_of=item_of)
            else:
                object_items = isinstance(spec.item, Obj)
                table[path] = Column(path, COUNT, None, holder, name, item, item_of, object_items)
                for k in range(MAX_LIST_ITEMS):
                    item_path = f"{path}.{k}"
                    if isinstance(spec.item, Obj):
                        walk(
                            spec.item,
                            prefix=item_path + ".",
                            holder=item_path,
                            item=k,
                            item_of=path,
                        )
                    else:
                        table[item_path] = Column(
                            item_path, spec.item.kind, spec.item.choices, path, None, k, path, False
                        )

    walk(ROW_BODY, prefix="", holder="", item=-1, item_of=None)
    return table


COLUMNS: Final[dict[str, Column]] = _columns()
"""Every column path a ColumnarV2 class table may have, in canonical order."""
RANK: Final[dict[str, int]] = {path: rank for rank, path in enumerate(COLUMNS)}


# -- Checking and flattening -----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Table:
    """An :class:`Obj` compiled for :func:`flatten`: paths precomputed, no lookups by spec."""

    fields: tuple[tuple[str, str, int, frozenset[str] | None, Any], ...]
    """(key, path, kind, choices, nested): nested is a _Table for an object, and for a list
    either a tuple of one _Table per item position or (item paths, kind, choices)."""
    names: frozenset[str]
    prefix: str


def _compile(obj: Obj, prefix: str) -> _Table:
    fields: list[tuple[str, str, int, frozenset[str] | None, Any]] = []
    for name, spec in obj.fields:
        path = prefix + name
        if isinstance(spec, Scalar):
            fields.append((name, path, spec.kind, spec.choices, None))
        elif isinstance(spec, Obj):
            fields.append((name, path, PRESENT, None, _compile(spec, path + ".")))
        elif isinstance(spec.item, Obj):
            member = spec.item
            items = tuple(_compile(member, f"{path}.{k}.") for k in range(MAX_LIST_ITEMS))
            fields.append((name, path, COUNT, None, items))
        else:
            paths = tuple(f"{path}.{k}" for k in range(MAX_LIST_ITEMS))
            fields.append((name, path, COUNT, None, (paths, spec.item.kind, spec.item.choices)))
    return _Table(tuple(fields), frozenset(name for name, _ in obj.fields), prefix)


_ROW_TABLE: Final = _compile(ROW_BODY, "")
_SHAPE_LIMIT: Final = 4096
_SHAPES: dict[tuple[str, ...], tuple[str, ...]] = {}
"""Each shape (a body's column paths) seen, as one tuple: rows of one shape share it, so the
encoder groups classes by shape by identity (a shape is a few dozen paths; a fleet has a
handful)."""
_MISSING: Final[Any] = object()


def flatten(body: Mapping[str, Any], *, where: str) -> Cells:
    """The cells of a row body (a row without ``index``); raises :class:`DecodeError`
    (``row_shape`` or ``value``) when ``body`` is not a valid row body."""
    paths: list[str] = []
    values: list[Any] = []
    _walk(_ROW_TABLE, body, where=where, out=(paths.append, values.append))
    shape = tuple(paths)
    known = _SHAPES.get(shape)
    if known is None:
        if len(_SHAPES) >= _SHAPE_LIMIT:
            _SHAPES.clear()
        known = _SHAPES[shape] = shape
    return known, tuple(values)


def _walk(
    table: _Table,
    value: Mapping[str, Any],
    *,
    where: str,
    out: tuple[Callable[[str], None], Callable[[Any], None]],
) -> None:
    add_path, add_value = out
    if not value.keys() <= table.names:
        extra = [describe(key) for key in value if key not in table.names]
        shown = ", ".join(extra[:3])
        owner = f"{table.prefix[:-1]} has unknown" if table.prefix else "unknown"
        raise DecodeError("row_shape", f"{where}{owner} key(s) {shown}")
    get = value.get
    for name, path, kind, choices, nested in table.fields:
        item = get(name, _MISSING)
        if item is _MISSING:
            continue
        if kind == STR:
            if type(item) is not str or (choices is not None and item not in choices):
                check_scalar(Scalar(kind, choices), item, where=f"{where}{path}")
        elif kind == UINT:
            if type(item) is not int or item < 0 or item > INT64_MAX:
                check_scalar(Scalar(kind), item, where=f"{where}{path}")
        elif kind == PRESENT:
            if type(item) is not dict:
                raise DecodeError("row_shape", f"{where}{path} must be an object")
            add_path(path)
            add_value(1)
            _walk(nested, item, where=where, out=out)
            continue
        elif kind == COUNT:
            _walk_list(item, path=path, nested=nested, where=where, out=out)
            continue
        elif kind == BOOL:
            if type(item) is not bool:
                check_scalar(Scalar(kind), item, where=f"{where}{path}")
        elif type(item) is not int or item < INT64_MIN or item > INT64_MAX:
            check_scalar(Scalar(kind), item, where=f"{where}{path}")
        add_path(path)
        add_value(item)


def _walk_list(
    item: Any,
    *,
    path: str,
    nested: Any,
    where: str,
    out: tuple[Callable[[str], None], Callable[[Any], None]],
) -> None:
    add_path, add_value = out
    if type(item) is not list:
        raise DecodeError("row_shape", f"{where}{path} must be a list")
    if len(item) > MAX_LIST_ITEMS:
        raise DecodeError(
            "row_shape", f"{where}{path} has {len(item)} items, more than {MAX_LIST_ITEMS}"
        )
    add_path(path)
    add_value(len(item))
    if type(nested) is tuple and nested and type(nested[0]) is _Table:
        for k, element in enumerate(item):
            if type(element) is not dict:
                raise DecodeError("row_shape", f"{where}{path}.{k} must be an object")
            _walk(nested[k], element, where=where, out=out)
        return
    paths, item_kind, item_choices = nested
    spec = Scalar(item_kind, item_choices)
    for k, element in enumerate(item):
        add_path(paths[k])
        add_value(check_scalar(spec, element, where=f"{where}{paths[k]}"))


def check_scalar(spec: Scalar, value: object, *, where: str) -> object:
    """``value`` if it fits ``spec``; else ``DecodeError("value")``."""
    kind = spec.kind
    if kind == STR:
        if type(value) is str:
            if spec.choices is None or value in spec.choices:
                return value
            allowed = ", ".join(sorted(spec.choices))
            raise DecodeError("value", f"{where} is {describe(value)}, not one of {allowed}")
        raise DecodeError("value", f"{where} must be a string, got {describe(value)}")
    if kind == BOOL:
        if type(value) is bool:
            return value
        raise DecodeError("value", f"{where} must be true or false, got {describe(value)}")
    low = 0 if kind == UINT else INT64_MIN
    if type(value) is int and low <= value <= INT64_MAX:
        return value
    wanted = "an integer from 0" if kind == UINT else "an int64"
    raise DecodeError("value", f"{where} must be {wanted}, got {describe(value)}")


def check_index(value: object, *, where: str) -> int:
    """A row's ``index``: an integer from 0 up to INT64_MAX."""
    if type(value) is int and 0 <= value <= INT64_MAX:
        return value
    raise DecodeError("value", f"{where}index must be an integer from 0, got {describe(value)}")
