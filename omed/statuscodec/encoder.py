"""DenseV1 rows -> ColumnarV2 columns.

Why classes: a large fleet is a few kinds of row repeated. Rows that differ only in ``index``
form one *class*; the class table is stored column by column (runs of equal or ascending
tokens), and each row costs its share of two sequences, ``index`` and ``rowClass``, which are
runs too. A replaced Instance in the middle of a creation batch goes to ``overrides`` instead
of splitting the batch's run.

Why it is fast: the rows are grouped into classes in one pass
(:class:`~omed.statuscodec.classes.Classifier`: a C-level ``==`` per row, each class checked
and flattened once), which also collects the indexes and the runs of each class (each row is
read once, while it is in the cache). So its cost per row is a dict comparison, and its
checking cost is per class. The comparison reads every value of every row, which makes it the
floor: about half of an encode of a 20,000-row fleet.

Invariant: ``decode_columnar(encode_columnar(rows)) == rows`` for every list of valid rows
(rows that :func:`omed.statuscodec.rowschema.flatten` accepts, plus an optional ``index``), and
:class:`~omed.statuscodec.errors.EncodeError` for a row that isn't valid. A row equal under
Python's ``==`` to an already checked row is stored as that row, so ``True`` in place of ``1``
is normalized rather than refused there; :func:`omed.statuscodec.status.validate_rows` checks
every row on its own where that matters.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import chain, compress, count, islice, repeat
from operator import eq, is_not, sub
from typing import Any, Final

import orjson

from omed.statuscodec import layout, timestamps
from omed.statuscodec.cells import is_leaf
from omed.statuscodec.classes import Classifier, Run
from omed.statuscodec.errors import DecodeError
from omed.statuscodec.rowschema import (
    BOOL,
    COLUMNS,
    RANK,
    STR,
    Cells,
    flatten,
)
from omed.statuscodec.sequences import Token, format_ranges, format_runs, format_sequence

_MISSING: Final[Any] = object()

_BOOL_TOKENS: Final = {True: 1, False: 0}


class Encoded:
    """The columns, and (computed on first use) the size of the same rows as a DenseV1 list."""

    __slots__ = ("_classes", "_dense_size", "_indexes", "_runs", "columns")

    def __init__(
        self,
        columns: dict[str, Any],
        *,
        classes: Classifier,
        runs: list[Run],
        indexes: list[Token],
    ) -> None:
        self.columns = columns
        self._classes = classes
        self._runs = runs
        self._indexes = indexes
        self._dense_size = -1

    @property
    def dense_size(self) -> int:
        """Bytes of the compact JSON of the rows as a list (what ``encoded_size(rows)``
        returns), from each class's size and each index: no 10 MB dump of the list."""
        if self._dense_size < 0:
            self._dense_size = self._classes.dense_size(self._runs, self._indexes)
        return self._dense_size

    @property
    def cells(self) -> int:
        """The cells the rows decode to (:mod:`omed.statuscodec.cells`): every index and leaf
        value, counted per class."""
        return self._classes.cell_count(self._runs, self._indexes)

    def dense_size_at_least(self) -> int:
        """A lower bound of :attr:`dense_size` that costs nothing: each row is at least
        ``{}`` and a comma, and with an index ``{"index":N}``."""
        rows = len(self._indexes)
        return 2 + max(rows - 1, 0) + 2 * rows + 9 * (rows - self._indexes.count(None))


def encode_columnar(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The ColumnarV2 form of ``rows`` (for ``status.instanceStatusColumns``)."""
    return encode(rows).columns


class RowCells:
    """What the encoder learns of a row (its cells, leaf count and body size), kept per row
    object, so that a row written again is never checked or flattened again.

    Why: a status write encodes every row, and a write that changes one Instance of 20,000
    flattened and checked the 19,999 others again (each its own class at worst): most of an
    encode. With this memo an encode costs a lookup per row plus the column building.

    Invariant: an entry is used for the very same row object only (by identity; the entry
    holds the row, so its id can't be reused), and the caller promises that a row given with
    a memo is never changed afterwards (the controller's row JSON is shared and read-only). So
    :func:`encode` with a memo returns exactly what it returns without one: classes are the
    rows' distinct bodies, numbered by first use either way (for rows that flatten accepts,
    equal bodies are equal cells). At most ``max_rows`` rows are kept, the oldest dropped first
    (a row still in use is then learnt again: a cost, never another result).

    It also keeps the last few encodes (:data:`_KEPT_ENCODES`, of at most ``max_rows`` rows in
    all), so that an encode of rows that differ from one of them at a few rows is patched from
    it (:func:`_patch`): the same bytes as a full encode, or the full encode where the patch
    can't tell.
    """

    __slots__ = ("_encodes", "_epochs", "_max_rows", "_rows", "known", "patched")

    def __init__(self, *, max_rows: int = 100_000) -> None:
        self._max_rows = max_rows
        self._rows: dict[int, tuple[dict[str, Any], Cells, int, int]] = {}
        self._epochs: dict[str, int | None] = {}
        self._encodes: list[_Kept] = []
        self.patched = 0
        """How many encodes were patched from a kept one (:func:`_patch`) rather than made."""
        self.known = self._rows.get
        """The entry kept under a row's id (check that it holds the very row)."""

    def epochs(self) -> dict[str, int | None]:
        """The memo of :func:`timestamps.parse` (each string's epoch or ``None``), emptied
        when it holds more than ``max_rows`` strings."""
        if len(self._epochs) > self._max_rows:
            self._epochs.clear()
        return self._epochs

    def __len__(self) -> int:
        return len(self._rows)

    def _keep(self, kept: _Kept) -> None:
        """Keep ``kept`` as the latest encode (the last :data:`_KEPT_ENCODES`, one per list
        of rows: the one it was patched from goes)."""
        encodes = [old for old in self._encodes if old is not kept and old is not kept.source]
        encodes.insert(0, kept)
        weight = 0
        for pos, old in enumerate(encodes):
            weight += len(old.rows)
            if pos >= _KEPT_ENCODES or weight > self._max_rows:
                del encodes[pos:]
                break
        kept.source = None
        self._encodes = encodes

    def _nearest(self, rows: Sequence[Mapping[str, Any]]) -> tuple[_Kept, list[int]] | None:
        """The kept encode of as many rows as ``rows`` that differs from them at the fewest
        positions (by identity), with those positions; None when none differs at few."""
        best: tuple[_Kept, list[int]] | None = None
        limit = min(_PATCH_MAX_ROWS, len(rows) // 8)
        for kept in self._encodes:
            if len(kept.rows) != len(rows):
                continue
            changed = list(compress(count(), map(is_not, kept.rows, rows)))
            if len(changed) <= limit and (best is None or len(changed) < len(best[1])):
                best = (kept, changed)
        return best

    def of(self, row: dict[str, Any]) -> tuple[dict[str, Any], Cells, int, int] | None:
        """``(row, cells, leaves, body size)``, or ``None`` for a row flatten refuses."""
        key = id(row)
        entry = self._rows.get(key)
        if entry is not None and entry[0] is row:
            return entry
        body = dict(row)
        body.pop("index", None)
        try:
            cells = flatten(body, where="")
        except DecodeError:
            return None
        entry = (row, cells, sum(map(is_leaf, cells[0])), len(orjson.dumps(body)))
        self._rows[key] = entry
        if len(self._rows) > self._max_rows:
            del self._rows[next(iter(self._rows))]
        return entry


def encode(rows: Sequence[Mapping[str, Any]], *, memo: RowCells | None = None) -> Encoded:
    """Encode ``rows``; the result also knows their size as a list (see :class:`Encoded`).

    With ``memo``, rows seen before are classed by their remembered cells (see
    :class:`RowCells`); the result is the same. Rows the memo path can't take (not dicts,
    without an index, or not valid) are encoded without it, as they would be anyway.
    """
    if memo is not None:
        nearest = memo._nearest(rows)
        if nearest is not None:
            kept = _patch(nearest[0], rows, nearest[1], memo)
            if kept is not None:
                memo.patched += kept is not nearest[0]
                memo._keep(kept)
                return kept.encoded()
    classes = Classifier()
    classified = None if memo is None else classes.classify_known(rows, memo)
    runs, indexes = classes.classify(rows) if classified is None else classified
    base, overrides = _split_overrides(runs)
    order = _class_order(base, overrides)
    renumber = {old: new for new, old in enumerate(order)}
    head: dict[str, Any] = {
        layout.KEY_VERSION: layout.FORMAT_VERSION,
        layout.KEY_ROW_COUNT: len(indexes),
        layout.KEY_CLASS_COUNT: len(order),
    }
    rest: dict[str, Any] = {}
    if indexes:
        rest[layout.KEY_INDEX] = format_sequence(indexes)
        rest[layout.KEY_ROW_CLASS] = format_runs([(renumber[cls], length) for cls, length in base])
    if overrides:
        rest[layout.KEY_OVERRIDES] = {
            str(renumber[c]): format_ranges(positions)
            for c, positions in sorted(overrides.items(), key=lambda item: renumber[item[0]])
        }
    table, holders = _table([classes.cells[old] for old in order])
    epochs = None if memo is None else memo.epochs()
    strings, named, times = _string_space(table, epochs=epochs)
    columns = _formatted(table, strings, named, reuse=None)
    kept = _Kept(
        rows=tuple(rows),
        classes=classes,
        runs=runs,
        indexes=indexes,
        renumber=renumber,
        head=head,
        rest=rest,
        table=table,
        holders=holders,
        strings=strings,
        named=named,
        times=_times(times),
        columns=columns,
    )
    if memo is not None and classified is not None:
        memo._keep(kept)
    return kept.encoded()


_KEPT_ENCODES: Final = 4
"""Encodes a :class:`RowCells` keeps to patch (each of a list of rows: a replica's)."""
_PATCH_MAX_ROWS: Final = 64
"""At most this many rows changed (and at most an eighth of them) for a patched encode."""


class _Kept:
    """One encode, with what it was made of, to patch a later encode of rows that differ at a
    few positions (:func:`_patch`). Read-only once made: a patch copies what it changes."""

    __slots__ = (
        "_row_class",
        "_sizes",
        "classes",
        "columns",
        "head",
        "holders",
        "indexes",
        "named",
        "renumber",
        "rest",
        "rows",
        "runs",
        "source",
        "strings",
        "table",
        "times",
    )

    def __init__(
        self,
        *,
        rows: tuple[Any, ...],
        classes: Classifier,
        runs: list[Run],
        indexes: list[Token],
        renumber: dict[int, int],
        head: dict[str, Any],
        rest: dict[str, Any],
        table: dict[str, list[Any]],
        holders: dict[str, int],
        strings: list[str],
        named: list[str],
        times: str | None,
        columns: dict[str, str],
        row_class: list[int] | None = None,
        sizes: list[int] | None = None,
        source: _Kept | None = None,
    ) -> None:
        self.rows = rows
        self.classes = classes
        self.runs = runs
        self.indexes = indexes
        self.renumber = renumber
        self.head = head
        self.rest = rest
        self.table = table
        self.holders = holders
        self.strings = strings
        self.named = named
        self.times = times
        self.columns = columns
        self._row_class = row_class
        self._sizes = sizes
        self.source = source

    def row_class(self) -> list[int]:
        """Each row's class (the classifier's numbering), made on first use."""
        if self._row_class is None:
            row_class: list[int] = []
            for cls, _start, length in self.runs:
                row_class += [cls] * length
            self._row_class = row_class
        return self._row_class

    def class_sizes(self) -> list[int]:
        """The rows of each class, made on first use."""
        if self._sizes is None:
            sizes = [0] * len(self.classes.cells)
            for cls, _start, length in self.runs:
                sizes[cls] += length
            self._sizes = sizes
        return self._sizes

    def encoded(self) -> Encoded:
        """The encode's result: its own copy of the columns (a caller may change it)."""
        out = dict(self.head)
        if self.strings:
            out[layout.KEY_STRINGS] = list(self.strings)
        if self.times is not None:
            out[layout.KEY_TIMES] = self.times
        for key, value in self.rest.items():
            out[key] = dict(value) if type(value) is dict else value
        if self.columns:
            out[layout.KEY_COLUMNS] = dict(self.columns)
        return Encoded(out, classes=self.classes, runs=self.runs, indexes=self.indexes)


def _times(times: list[int]) -> str | None:
    if not times:
        return None
    return format_sequence([times[0], *map(sub, islice(times, 1, None), times)])  # the steps


def _patch(
    kept: _Kept, rows: Sequence[Mapping[str, Any]], changed: list[int], memo: RowCells
) -> _Kept | None:
    """The encode of ``rows``, which differ from ``kept``'s at ``changed`` only, patched from
    it; None when the patch can't tell (then the full encode runs).

    Why it is the full encode's: each changed row is the only row of its class, keeps its
    index, and its new cells are no other class's (nor another changed row's). So every row
    keeps its class number (numbered by first use: the changed row's position is the first
    and only use either way), the runs, overrides, class order, indexes and ``rowClass`` stay,
    and the class table differs in the changed classes' own values only. Those are set into
    the kept table's columns (copied first); the string space is scanned again (strings in
    order of first use, column by column), and only the columns whose tokens can differ are
    formatted again: the changed columns, or every string column when the string space moved.
    """
    if not changed:
        return kept
    classes = kept.classes
    if classes._leaves is None or classes._sizes is None:
        return None
    row_class = kept.row_class()
    class_sizes = kept.class_sizes()
    ids = classes._ids
    updates: dict[int, tuple[Cells, int, int]] = {}
    new_cells: set[Cells] = set()
    for pos in changed:
        row = rows[pos]
        if type(row) is not dict or row.get("index", _MISSING) != kept.indexes[pos]:
            return None
        if type(row["index"]) is not int:
            return None
        entry = memo.known(id(row))
        if entry is None or entry[0] is not row:
            entry = memo.of(row)
            if entry is None:
                return None
        _row, cells, leaf_count, size = entry
        cls = row_class[pos]
        if class_sizes[cls] != 1:
            return None
        found = ids.get(cells, -1)
        if found == cls:
            continue  # the same cells: the same class, nothing to set
        if found >= 0 or cells in new_cells:
            return None
        new_cells.add(cells)
        updates[cls] = (cells, leaf_count, size)
    patched = Classifier()
    if updates:
        cells_of = list(classes.cells)
        leaves = list(classes._leaves)
        sizes = list(classes._sizes)
        patched._ids = dict(ids)
        for cls, (cells, leaf_count, size) in updates.items():
            del patched._ids[cells_of[cls]]
            patched._ids[cells] = cls
            cells_of[cls], leaves[cls], sizes[cls] = cells, leaf_count, size
        patched.cells, patched._leaves, patched._sizes = cells_of, leaves, sizes
    else:
        patched.cells, patched._ids = classes.cells, ids
        patched._leaves, patched._sizes = classes._leaves, classes._sizes
    table = dict(kept.table)
    holders = dict(kept.holders)
    touched: set[str] = set()
    count_all = len(classes.cells)
    for cls, (cells, _leaves, _size) in updates.items():
        at = kept.renumber[cls]
        old_paths, _old_values = classes.cells[cls]
        paths, values = cells
        for path in old_paths:
            if path not in touched:
                touched.add(path)
                table[path] = list(table[path])
            table[path][at] = None
            holders[path] -= 1
        for path, value in zip(paths, values, strict=True):
            column = table.get(path)
            if column is None:
                column = table[path] = [None] * count_all
                holders[path] = 0
                touched.add(path)
            elif path not in touched:
                touched.add(path)
                column = table[path] = list(column)
            column[at] = value
            holders[path] += 1
    for path in touched:
        if not holders[path]:
            del table[path], holders[path]
    strings, named, times = _string_space(table, epochs=memo.epochs())
    moved = strings != kept.strings or named != kept.named
    reuse = {
        path: text
        for path, text in kept.columns.items()
        if path in table and path not in touched and not (moved and COLUMNS[path].kind == STR)
    }
    return _Kept(
        rows=tuple(rows),
        classes=patched,
        runs=kept.runs,
        indexes=kept.indexes,
        renumber=kept.renumber,
        head=kept.head,
        rest=kept.rest,
        table=table,
        holders=holders,
        strings=strings,
        named=named,
        times=_times(times) if named != kept.named else kept.times,
        columns=_formatted(table, strings, named, reuse=reuse),
        row_class=row_class,
        sizes=class_sizes,
        source=kept,
    )


def _split_overrides(runs: list[Run]) -> tuple[list[list[int]], dict[int, list[int]]]:
    """Runs of ``rowClass`` ``[class, length]``, from the classifier's runs ``(class, start,
    length)``, with short gaps inside a run lifted out into overrides ``{class: [positions]}``
    (the base run then covers the gap)."""
    base: list[list[int]] = []
    overrides: dict[int, list[int]] = {}
    gap_limit = layout.OVERRIDE_GAP
    count = len(runs)
    # The open base run: its class and length (0: none yet); appended when the next opens.
    open_cls, open_length = -1, 0
    # The last run of each class: a gap can only close on a class that comes back.
    last_run = {cls: k for k, (cls, _start, _length) in enumerate(runs)}
    k = 0
    while k < count:
        cls, start, length = runs[k]
        if cls == open_cls:
            open_length += length
            k += 1
            continue
        if open_length and length <= gap_limit:
            # A one-run gap (a replaced Instance) is the common case: no search.
            if k + 1 < count and runs[k + 1][0] == open_cls:
                overrides.setdefault(cls, []).extend(range(start, start + length))
                open_length += length
                k += 1
                continue
            end = _gap_end(runs, k=k, around=open_cls) if last_run[open_cls] > k else -1
            if end >= 0:
                for gap_cls, gap_start, gap_length in runs[k:end]:
                    overrides.setdefault(gap_cls, []).extend(
                        range(gap_start, gap_start + gap_length)
                    )
                    open_length += gap_length
                k = end
                continue
        if open_length:
            base.append([open_cls, open_length])
        open_cls, open_length = cls, length
        k += 1
    if open_length:
        base.append([open_cls, open_length])
    for positions in overrides.values():
        positions.sort()
    return base, overrides


def _gap_end(runs: list[Run], *, k: int, around: int) -> int:
    """The run after a gap starting at run ``k`` that ``around`` closes within the gap limit,
    or -1."""
    total = 0
    j = k
    while j < len(runs):
        cls, _, length = runs[j]
        if cls == around:
            return j
        total += length
        if total > layout.OVERRIDE_GAP:
            return -1
        j += 1
    return -1


def _class_order(base: list[list[int]], overrides: dict[int, list[int]]) -> list[int]:
    """Classes in order of first use by the base runs, then the override-only classes."""
    order: list[int] = []
    seen: set[int] = set()
    for cls, _ in base:
        if cls not in seen:
            seen.add(cls)
            order.append(cls)
    for cls in sorted(overrides, key=lambda c: overrides[c][0]):
        if cls not in seen:
            seen.add(cls)
            order.append(cls)
    return order


def _table(cells: list[Cells]) -> tuple[dict[str, list[Any]], dict[str, int]]:
    """The class table: each column path's values, one per class (``None`` where a class
    lacks the path), and how many classes hold each path.

    Classes with the same shape (the same column paths) are transposed together with
    ``zip(*...)`` and placed by slices, one per stretch of consecutive classes of the shape.
    """
    count = len(cells)
    by_object: dict[int, tuple[tuple[str, ...], list[int]]] = {}
    for cls, (paths_of_class, _) in enumerate(cells):
        group = by_object.get(id(paths_of_class))
        if group is None:
            group = by_object[id(paths_of_class)] = (paths_of_class, [])
        group[1].append(cls)
    shapes: dict[tuple[str, ...], list[int]] = {}
    for shape, members in by_object.values():  # equal shapes held as distinct tuples
        known = shapes.get(shape)
        if known is None:
            shapes[shape] = members
        else:
            known += members
            known.sort()
    table: dict[str, list[Any]] = {}
    holders: dict[str, int] = {}
    for shape, members in shapes.items():
        if not shape:
            continue
        columns = zip(*(cells[cls][1] for cls in members), strict=True)
        whole = len(members) == count
        spans = [] if whole else _spans(members)
        for path, values in zip(shape, columns, strict=True):
            holders[path] = holders.get(path, 0) + len(members)
            column = table.get(path)
            if column is None:
                if whole:
                    table[path] = list(values)
                    continue
                column = table[path] = [None] * count
            for low, high, at in spans:
                column[low:high] = values[at : at + high - low]
    return table, holders


def _string_space(
    table: dict[str, list[Any]], *, epochs: dict[str, int | None] | None
) -> tuple[list[str], list[str], list[int]]:
    """The strings, the time strings and their epochs, each in order of first use over the
    string columns in column order (so a column of new strings, operation ids, reads
    ``5-1004``). ``epochs`` remembers :func:`timestamps.parse` of each string seen
    (:class:`RowCells` keeps it across encodes)."""
    paths = [path for path in sorted(table, key=RANK.__getitem__) if COLUMNS[path].kind == STR]
    distinct = dict.fromkeys(chain.from_iterable(map(table.__getitem__, paths)))
    distinct.pop(None, None)
    values = list(distinct)
    parse = timestamps.parse
    if epochs is None:
        found: list[int | None] = list(map(parse, values))
    else:
        found = list(map(epochs.get, values, repeat(-1)))
        for pos in compress(count(), map(eq, found, repeat(-1))):
            found[pos] = epochs[values[pos]] = parse(values[pos])
    strings = [value for value, epoch in zip(values, found, strict=True) if epoch is None]
    named = [value for value, epoch in zip(values, found, strict=True) if epoch is not None]
    times = [epoch for epoch in found if epoch is not None]
    return strings, named, times


def _formatted(
    table: dict[str, list[Any]],
    strings: list[str],
    named: list[str],
    *,
    reuse: Mapping[str, str] | None,
) -> dict[str, str]:
    """Each column of ``table`` as a sequence of tokens (strings by reference into
    ``strings`` then ``named``), in column order; a column in ``reuse`` as given there."""
    refs: dict[Any, int] = dict(zip(strings, count()))  # (C-level passes)
    refs.update(zip(named, count(len(strings))))
    out: dict[str, str] = {}
    for path in sorted(table, key=RANK.__getitem__):
        if reuse is not None:
            text = reuse.get(path)
            if text is not None:
                out[path] = text
                continue
        kind = COLUMNS[path].kind
        column = table[path]
        if kind == STR:
            column = list(map(refs.get, column))
        elif kind == BOOL:
            column = list(map(_BOOL_TOKENS.get, column))
        out[path] = format_sequence(column)
    return out


def _spans(members: list[int]) -> list[tuple[int, int, int]]:
    """``(low, high, at)`` for each stretch of consecutive classes ``low .. high - 1`` in the
    ascending ``members``, ``at`` the stretch's first position in ``members``."""
    spans: list[tuple[int, int, int]] = []
    start = 0
    for pos in range(1, len(members) + 1):
        if pos == len(members) or members[pos] != members[pos - 1] + 1:
            spans.append((members[start], members[pos - 1] + 1, start))
            start = pos
    return spans
