"""The decoded size of a status: rows x cells, bounded before anything is built from it.

Why: ColumnarV2 stores each distinct row once, so its bytes say little about what it decodes
to. 20,000 identical rows of 32 conditions each are 6.6 KB of columns, but 4 million values
once decoded: a reader that builds, validates or serializes them row by row (the controller's
row models, a status write, ``kubectl ome instance``) spends seconds of CPU and a gigabyte on
them. ``maxDecodedInstances`` bounds the rows, not what each holds. So the decoders also bound
the *cells*: every ``index`` and every leaf value of every row (a string, an integer, a bool;
each field of each condition, each hint of an operation), counted from the class table
(each class's leaves times the rows of that class) before a single row exists. Containers (a
``conditions`` list, an ``operation`` object) are not cells; their fields are.

The bound is :data:`CELLS_PER_ROW` per row of the row bound: with maxDecodedInstances 20000,
1,280,000 cells (never below :data:`MIN_CELL_BOUND`). omed's own rows hold 16 cells (a Ready
row with its one condition) to 34 (with a last failure and an operation; 66 if an operation
carried all 32 hint nodes), so every status omed writes fits it at any row count up to the
bound; 20,000 rows of 32 conditions (203 cells each, 4,060,000 in all) don't. A
status past it is refused as ``size``, like a damaged one: no row is built, and
``ome-status-preflight repair`` fixes it.

Invariant: :func:`check_cells` costs C-level passes over the class table's tokens only (never
per row), and raises :class:`~omed.statuscodec.errors.DecodeError` ``size`` exactly when the
decoded rows would hold more than the bound.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from itertools import compress, repeat
from operator import is_not
from typing import Final

from omed.statuscodec.errors import DecodeError
from omed.statuscodec.rowschema import COLUMNS, COUNT, PRESENT
from omed.statuscodec.sequences import Token

CELLS_PER_ROW: Final = 64
"""Cells allowed per row of the row bound, on average over an object's rows."""
MIN_CELL_BOUND: Final = 2048 * CELLS_PER_ROW
"""The bound under a small row bound (131,072 cells: 518 rows of the largest shape, 253 cells
each): one row may hold far more than 64 cells, and so many cells decode in milliseconds."""


def cell_bound(max_rows: int) -> int:
    """The most cells a status may decode to under a bound of ``max_rows`` rows:
    ``max_rows`` x :data:`CELLS_PER_ROW`, at least :data:`MIN_CELL_BOUND`."""
    return max(max_rows * CELLS_PER_ROW, MIN_CELL_BOUND)


def is_leaf(path: str) -> bool:
    """Whether a column path holds cells (a value), not a container (a presence or a count)."""
    return COLUMNS[path].kind not in (PRESENT, COUNT)


def check_cells(
    leaf_tokens: Iterable[Sequence[Token]],
    *,
    leaf_columns: int,
    row_class: Sequence[int],
    class_count: int,
    indexed_rows: int,
    max_rows: int,
) -> int:
    """The cells the rows decode to; ``DecodeError("size")`` above :func:`cell_bound`.

    ``leaf_tokens`` are the class table's leaf columns (one token per class, ``None`` where
    the class has no value); ``row_class`` each row's class; ``indexed_rows`` the rows with an
    index. When every row (and every class) holding every leaf column stays within the bound,
    nothing is counted. The class table itself (each class's leaf values, whether a row uses
    the class or not) is bounded too.
    """
    bound = cell_bound(max_rows)
    rows = len(row_class)
    if indexed_rows + max(rows, class_count) * leaf_columns <= bound:
        return -1  # within the bound whatever the classes hold: not counted
    tokens = list(leaf_tokens)
    table = sum(class_count - column.count(None) for column in tokens)
    if table > bound:  # the classes themselves, whether rows use them or not
        raise DecodeError(
            "size",
            f"the class table holds {table} cells ({class_count} classes), more than the bound "
            f"of {bound}",
        )
    if class_count == 1:
        weights: list[int] = [rows]
    else:
        per_class = Counter(row_class)
        weights = [per_class.get(cls, 0) for cls in range(class_count)]
    total = indexed_rows
    for column in tokens:
        total += sum(compress(weights, map(is_not, column, repeat(None))))
    if total > bound:
        raise DecodeError("size", size_detail(rows=rows, cells=total, max_rows=max_rows))
    return total


def size_detail(*, rows: int, cells: int, max_rows: int) -> str:
    """``<rows> rows x <cells per row> cells = <cells> cells, more than the bound <bound>
    (<max_rows> rows x 64 cells)``: what a ``size`` refusal says."""
    per_row = round(cells / rows) if rows else 0
    bound = cell_bound(max_rows)
    how = (
        f"{max_rows} rows x {CELLS_PER_ROW} cells"
        if bound > MIN_CELL_BOUND
        else f"the least bound, 2048 rows x {CELLS_PER_ROW} cells"
    )
    return (
        f"{rows} rows x {per_row} cells = {cells} decoded cells (indexes and leaf values, "
        f"every condition's fields included), more than the bound of {bound} ({how})"
    )
