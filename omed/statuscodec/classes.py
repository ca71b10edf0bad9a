"""Rows -> classes: the grouping of rows with equal bodies, and each class's check.

Why a module of its own: the encoder builds its columns from these classes, and the readers
of a DenseV1 list need only the classes (:func:`check_rows`, :func:`class_table`): a list is
checked once per class, as columns are. Reading a status (``kubectl ome``'s reports) then
imports none of the column building.

Why it is fast: the classifier compares each row with the two most recent classes, one C-level
``==`` per row (two where classes alternate), and checks and flattens a row only when it
starts a class, looking it up first among classes with the same phase, incarnation,
readySince, revisions and operation id. It does so in one pass over the rows that also
collects the indexes and the runs of each class. So its cost per row is a dict comparison,
and its checking cost is per class.

Invariant: rows of one class have equal bodies (all but ``index``) under Python's ``==``,
classes are numbered by first use, and a row that isn't valid (that
:func:`omed.statuscodec.rowschema.flatten` refuses, or with a bad ``index``) is an
:class:`~omed.statuscodec.errors.EncodeError`, with or without a memo.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import compress, repeat
from operator import eq, is_not, itemgetter, mul
from typing import TYPE_CHECKING, Any, Final

import orjson

from omed.statuscodec.cells import is_leaf
from omed.statuscodec.classtable import ClassTable
from omed.statuscodec.errors import DecodeError, EncodeError, describe
from omed.statuscodec.rowschema import INT64_MAX, Cells, flatten
from omed.statuscodec.sequences import Token

if TYPE_CHECKING:
    from omed.statuscodec.encoder import RowCells

__all__ = ["Classifier", "Run", "check_rows", "checked_indexes", "class_table"]

_MISSING: Final[Any] = object()


class _Absent:
    """The index slot of a row without ``index`` (``None`` would be a value to refuse)."""


_ABSENT: Final = _Absent()
_NEVER: Final = _Absent()
"""The key of a probe that no row equals."""

Run = tuple[int, int, int]
"""``(class, start, length)``: rows ``start`` .. ``start + length - 1`` are of one class."""
_CLASS: Final = itemgetter(0)
_LENGTH: Final = itemgetter(2)
_BUCKET_PROBES: Final = 4


def check_rows(rows: Sequence[Mapping[str, Any]], *, memo: RowCells | None = None) -> None:
    """Raise :class:`EncodeError` unless every row is valid (checked once per class; with
    ``memo``, once per row object ever, see :class:`RowCells`)."""
    if memo is None or Classifier().classify_known(rows, memo) is None:
        Classifier().classify(rows)


def class_table(rows: Sequence[Mapping[str, Any]]) -> ClassTable:
    """The rows as classes (:class:`~omed.statuscodec.classtable.ClassTable`), each class
    checked once; :class:`EncodeError` for a row that isn't valid. A class's template is its
    first row's body: its nested values are that row's."""
    classes = Classifier()
    runs, indexes = classes.classify(rows)
    row_class: list[int] = []
    for cls, _start, length in runs:
        row_class += [cls] * length
    return ClassTable(templates=classes.bodies, row_class=row_class, indexes=indexes)


class Classifier:
    """Assigns each row a class id: equal bodies, equal ids (first seen, first numbered)."""

    def __init__(self) -> None:
        self.cells: list[Cells] = []
        self._ids: dict[Cells, int] = {}
        self._bodies: list[dict[str, Any]] = []
        self._indexed: list[dict[str, Any]] = []
        self._buckets: dict[Any, list[int]] = {}
        self._leaves: list[int] | None = None
        self._sizes: list[int] | None = None

    def classify_known(
        self, rows: Sequence[Mapping[str, Any]], memo: RowCells
    ) -> tuple[list[Run], list[Token]] | None:
        """:meth:`classify` by each row's remembered cells (:class:`RowCells`): the same runs
        and indexes, since for valid rows equal bodies are equal cells and classes are
        numbered by first use either way; ``None`` (and this classifier untouched) when a row
        is not a dict with an index or isn't valid, which :meth:`classify` then handles."""
        entries: list[tuple[dict[str, Any], Cells, int, int]] = []
        add = entries.append
        get = memo.known
        for row in rows:
            if type(row) is not dict or "index" not in row:
                return None
            entry = get(id(row))
            if entry is None or entry[0] is not row:
                entry = memo.of(row)
                if entry is None:
                    return None
            add(entry)
        ids = self._ids
        cells_of = self.cells
        leaves: list[int] = []
        sizes: list[int] = []
        seen: dict[int, tuple[Cells, int]] = {}  # id(cells) -> (cells, class)
        indexes: list[Any] = []
        index_of = indexes.append
        runs: list[Run] = []
        append = runs.append
        current, run = -1, 0
        for pos, (row, cells, leaf_count, size) in enumerate(entries):
            index_of(row["index"])
            hit = seen.get(id(cells))
            if hit is not None and hit[0] is cells:
                found = hit[1]
            else:
                found = ids.get(cells, -1)
                if found < 0:
                    found = len(cells_of)
                    ids[cells] = found
                    cells_of.append(cells)
                    leaves.append(leaf_count)
                    sizes.append(size)
                seen[id(cells)] = (cells, found)
            if found != current:
                if pos > run:
                    append((current, run, pos - run))
                current, run = found, pos
        if len(entries) > run:
            append((current, run, len(entries) - run))
        self._leaves, self._sizes = leaves, sizes
        return runs, checked_indexes(indexes)

    def classify(self, rows: Sequence[Mapping[str, Any]]) -> tuple[list[Run], list[Token]]:
        """The runs of rows of one class, ``(class, start, length)`` in row order (neighbouring
        runs hold different classes), and each row's index (``None`` for a row without one).

        The hot path, one pass over the rows (each row is touched once, while it is in the
        cache): a dict row with an index is compared with the two most recent classes (one
        C-level ``==`` each, the row's index set into the class's probe first); only a row
        that matches neither is looked up (:meth:`_lookup`), and only a new class is checked.
        A run is recorded where a row leaves the current class. Indexes are stored unchecked
        and checked all at once by :func:`checked_indexes`, after the rows (so a row's own
        error comes first).
        """
        indexes: list[Any] = [_ABSENT] * len(rows)
        runs: list[Run] = []
        append = runs.append
        indexed = self._indexed
        lookup = self._lookup
        # A probe no row equals (its key is private), until the first classes are found.
        never: dict[Any, Any] = {_NEVER: None}
        a = b = -1
        probe_a = probe_b = never
        run = 0  # where the run of class ``a`` started
        for pos, row in enumerate(rows):
            if type(row) is dict and "index" in row:
                index = indexes[pos] = row["index"]
                probe_a["index"] = index
                if row == probe_a:
                    continue
                probe_b["index"] = index
                found = b if row == probe_b else lookup(row, pos=pos, index=index)
            else:
                found = self._careful(row, pos=pos, candidates=(a, b), indexes=indexes)
            if found == a:
                continue
            if pos > run:
                append((a, run, pos - run))
            run = pos
            if found == b:
                a, b, probe_a, probe_b = b, a, probe_b, probe_a
            else:
                a, b, probe_a, probe_b = found, a, indexed[found], probe_a
        if len(rows) > run:
            append((a, run, len(rows) - run))
        return runs, checked_indexes(indexes)

    def _careful(
        self,
        row: Any,
        *,
        pos: int,
        candidates: tuple[int, int],
        indexes: list[Any],
    ) -> int:
        """The class of a row off the hot path: not a dict, or without an index."""
        if type(row) is not dict:
            if not isinstance(row, Mapping):
                raise EncodeError(f"row {pos}: must be an object, got {describe(row)}")
            row = dict(row)
        index = row.get("index", _MISSING)
        if index is not _MISSING:
            indexes[pos] = index
        probe_of = self._bodies if index is _MISSING else self._indexed
        for cls in candidates:
            if cls >= 0:
                probe = probe_of[cls]
                if index is not _MISSING:
                    probe["index"] = index
                if row == probe:
                    return cls
        return self._lookup(row, pos=pos, index=index)

    def _lookup(self, row: dict[str, Any], *, pos: int, index: Any) -> int:
        """The class of a row that matched neither of the last two classes."""
        # The bucket: a few top-level values and the operation's id (unique per operation, so
        # a rollout's rows don't share buckets).
        get = row.get
        operation = get("operation")
        bucket_key: Any = (
            get("phase"),
            get("incarnation"),
            get("readySince"),
            get("runningRevision"),
            get("targetRevision"),
            operation.get("id") if type(operation) is dict else None,
        )
        try:
            bucket = self._buckets.get(bucket_key)
        except TypeError:  # an unhashable value: no bucket (flatten refuses the row below)
            bucket_key = bucket = None
        if bucket:
            probe_of = self._bodies if index is _MISSING else self._indexed
            for candidate in reversed(bucket[-_BUCKET_PROBES:]):
                probe = probe_of[candidate]
                if index is not _MISSING:
                    probe["index"] = index
                if row == probe:
                    return candidate
        body = dict(row)
        body.pop("index", None)
        try:
            cells = flatten(body, where=f"row {pos}: ")
        except DecodeError as err:
            raise EncodeError(err.detail, reason=err.reason) from None
        found = self._ids.get(cells)
        if found is not None:
            return found
        found = len(self.cells)
        self._ids[cells] = found
        self.cells.append(cells)
        self._bodies.append(body)
        self._indexed.append({"index": 0, **body})
        if bucket_key is not None:
            self._buckets.setdefault(bucket_key, []).append(found)
        return found

    @property
    def bodies(self) -> list[dict[str, Any]]:
        """Each class's row body (its first row's, without ``index``)."""
        return self._bodies

    def cell_count(self, runs: list[Run], indexes: list[Token]) -> int:
        """Cells of the rows: each class's leaf values times its rows, plus the indexes."""
        leaves = self._leaves
        if leaves is None:
            leaves = [sum(map(is_leaf, paths)) for paths, _values in self.cells]
        classes, lengths = map(_CLASS, runs), map(_LENGTH, runs)  # (C-level passes)
        cells: int = sum(map(mul, map(leaves.__getitem__, classes), lengths))
        return cells + len(indexes) - indexes.count(None)

    def dense_size(self, runs: list[Run], indexes: list[Token]) -> int:
        """Bytes of ``orjson.dumps(rows)``, from each class's body size and each index."""
        if not indexes:
            return 2
        sizes = self._sizes
        if sizes is None:
            sizes = [len(orjson.dumps(body)) for body in self._bodies]
        total: int = 2 + len(indexes) - 1
        run_sizes = list(map(sizes.__getitem__, map(_CLASS, runs)))
        total += sum(map(mul, run_sizes, map(_LENGTH, runs)))
        for _cls, start, length in compress(runs, map(eq, run_sizes, repeat(2))):
            # '{}': no comma between the body and the index
            total -= length - indexes[start : start + length].count(None)
        present = list(compress(indexes, map(is_not, indexes, repeat(None))))
        # '"index":' and the digits, plus a comma unless the body is empty ('{}').
        total += 9 * len(present) + sum(map(len, map(str, present)))
        return total


def checked_indexes(indexes: list[Any]) -> list[Token]:
    """Check all stored indexes at once (C-level scans; a loop only to name a bad one). A row
    without an index has :data:`_ABSENT` in its slot, which becomes ``None``."""
    present = indexes
    kinds = set(map(type, indexes))
    if _Absent in kinds:
        kinds.discard(_Absent)
        present = [index for index in indexes if index is not _ABSENT]
    if kinds <= {int} and (not present or (min(present) >= 0 and max(present) <= INT64_MAX)):
        if present is indexes:
            return indexes
        return [None if index is _ABSENT else index for index in indexes]
    for pos, index in enumerate(indexes):
        if index is not _ABSENT and (type(index) is not int or not 0 <= index <= INT64_MAX):
            raise EncodeError(
                f"row {pos}: index must be an integer from 0, got {describe(index)}",
                reason="value",
            )
    raise AssertionError("unreachable: a bad index was found above")
