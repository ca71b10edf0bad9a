"""An encode that remembers rows (``RowCells``) gives exactly the bytes of a full encode."""

from __future__ import annotations

import copy
from typing import Any

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from omed.statuscodec import COLUMNAR_V2, DENSE_V1, EncodeError, RowCells, choose_encoding, encode

from ._support import bodies, row_lists


def _full(rows: list[dict[str, Any]]) -> tuple[bytes, int, int] | str:
    try:
        encoded = encode(rows)
    except EncodeError as err:
        return str(err)
    return orjson.dumps(encoded.columns), encoded.dense_size, encoded.cells


def _remembered(rows: list[dict[str, Any]], memo: RowCells) -> tuple[bytes, int, int] | str:
    try:
        encoded = encode(rows, memo=memo)
    except EncodeError as err:
        return str(err)
    return orjson.dumps(encoded.columns), encoded.dense_size, encoded.cells


@settings(max_examples=300, deadline=None)
@given(
    row_lists(max_rows=40),
    st.lists(st.tuples(st.integers(0, 39), bodies), max_size=6),
    st.integers(1, 50),
)
def test_encodes_of_changing_rows_equal_full_encodes(
    rows: list[dict[str, Any]], changes: list[tuple[int, dict[str, Any]]], max_rows: int
) -> None:
    """A memo kept across encodes of a fleet whose rows are replaced one by one (new row
    objects, as the controller makes them), bounded so that entries are dropped: each encode
    equals the full encode of the same rows, columns, list size and cells alike."""
    memo = RowCells(max_rows=max_rows)
    current = list(rows)
    assert _remembered(current, memo) == _full(current)
    for position, body in changes:
        if current:
            at = position % len(current)
            row = {k: v for k, v in current[at].items() if k == "index"}
            current[at] = {**row, **body}
        assert _remembered(current, memo) == _full(current)
        assert len(memo) <= max_rows


@settings(max_examples=200, deadline=None)
@given(row_lists(max_rows=30), st.integers(0, 29))
def test_an_invalid_row_is_refused_or_normalized_as_without_a_memo(
    rows: list[dict[str, Any]], at: int
) -> None:
    """A row flatten refuses (``True`` where a count goes, an unknown key) takes the encode
    without the memo: the same error, or the same normalization to an equal checked row."""
    memo = RowCells()
    current = copy.deepcopy(rows)
    if current:
        bad = current[at % len(current)]
        if "podCount" in bad:
            bad["podCount"] = True
        else:
            bad["unknown"] = 1
    assert _remembered(current, memo) == _full(current)
    for configured in (COLUMNAR_V2, DENSE_V1):
        try:
            full = choose_encoding(current, configured=configured, max_rows=40)
        except EncodeError as err:
            full = str(err)  # type: ignore[assignment]
        try:
            kept = choose_encoding(current, configured=configured, max_rows=40, memo=memo)
        except EncodeError as err:
            kept = str(err)  # type: ignore[assignment]
        assert orjson.dumps(kept) == orjson.dumps(full)


def test_a_row_is_flattened_once_while_it_is_kept() -> None:
    memo = RowCells()
    rows = [
        {"index": i, "phase": "Ready", "readySince": f"2026-09-14T20:00:{i:02d}Z"}
        for i in range(50)
    ]
    encode(rows, memo=memo)
    entries = [memo.known(id(row)) for row in rows]
    encode(rows, memo=memo)
    again = [memo.known(id(row)) for row in rows]
    assert all(a is b for a, b in zip(again, entries, strict=True))
    assert all(e is not None and e[0] is row for e, row in zip(entries, rows, strict=True))
