"""The decoder's and encoder's fast paths give what their plain loops give.

The fast paths check a whole sequence with C-level scans and fall back to a loop that names
the first bad token; these tests hold both sides to the same answers, and check what the
decoder does to the garbage collector's state.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from omed.statuscodec import DecodeError, decode_columnar, encode_columnar
from omed.statuscodec.sequences import format_ranges, mark_ranges

from ._support import canonical
from .test_statuscodec_roundtrip import assert_nothing_shared


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.integers(0, 40), min_size=1, max_size=12),
    st.integers(1, 40),
    st.sets(st.integers(0, 39), max_size=5),
)
def test_single_positions_are_marked_or_refused_like_the_loop(
    positions: list[int], size: int, marked: set[int]
) -> None:
    marks = bytearray(size)
    for p in marked:
        if p < size:
            marks[p] = 1
    before = bytes(marks)
    text = ",".join(map(str, positions))
    fine = (
        max(positions) < size
        and len(set(positions)) == len(positions)
        and not any(before[p] for p in positions)
    )
    if fine:
        assert mark_ranges(text, what="o", marks=marks) == [(p, p) for p in positions]
        assert [i for i in range(size) if marks[i]] == sorted(
            {*positions, *(p for p in marked if p < size)}
        )
    else:
        with pytest.raises(DecodeError) as caught:
            mark_ranges(text, what="o", marks=marks)
        assert caught.value.reason == "coverage"


@given(st.sets(st.integers(0, 200), max_size=20))
def test_range_sets_with_and_without_neighbours(positions: set[int]) -> None:
    ordered = sorted(positions)
    text = format_ranges(ordered)
    marks = bytearray(201)
    ranges = mark_ranges(text, what="o", marks=marks) if ordered else []
    assert [p for start, end in ranges for p in range(start, end + 1)] == ordered


def _mixed_rows() -> list[dict[str, Any]]:
    """Classes with and without each nested value, in runs and scattered."""
    rows: list[dict[str, Any]] = []
    for i in range(40):
        row: dict[str, Any] = {"index": i, "phase": "Ready", "incarnation": 1 + i % 3}
        if i % 3 == 0:
            row["conditions"] = [{"type": "Ready", "status": "True"}, {"type": "Admitted"}]
        if i % 5 == 0:
            row["lastFailure"] = {"pod": f"p-{i % 2}", "exitCode": -1}
        if i % 4 == 1:
            row["operation"] = {"id": "op", "hintTargetNodes": ["a", "b"]}
        elif i % 4 == 2:
            row["operation"] = {"id": "op2"}
        rows.append(row)
    return rows


def test_fresh_nested_values_for_some_classes_only() -> None:
    rows = _mixed_rows()
    columns = encode_columnar(rows)
    fresh = decode_columnar(columns, max_rows=40, share_nested=False)
    assert canonical(fresh) == canonical(rows)
    assert_nothing_shared(fresh)
    shared = decode_columnar(columns, max_rows=40)
    assert canonical(shared) == canonical(rows)
    assert shared[1]["operation"] is shared[13]["operation"]  # the same class: rows 1 and 13


def test_rows_without_an_index_in_either_mode() -> None:
    rows: list[dict[str, Any]] = [
        {"conditions": [{"type": "Ready"}]},
        {"index": 3, "conditions": [{"type": "Ready"}]},
    ]
    columns = encode_columnar(rows)
    assert "~" in columns["index"]
    fresh = decode_columnar(columns, max_rows=2, share_nested=False)
    assert fresh == rows
    assert_nothing_shared(fresh)
    assert decode_columnar(columns, max_rows=2) == rows


@pytest.fixture
def collector() -> Iterator[None]:
    was = gc.isenabled()
    yield
    if was:
        gc.enable()
    else:
        gc.disable()


COLUMNS = encode_columnar(
    [{"index": i, "phase": "Ready", "conditions": [{"type": "Ready"}]} for i in range(3000)]
)


@pytest.mark.usefixtures("collector")
def test_decoding_leaves_the_collector_as_it_found_it() -> None:
    gc.disable()
    decode_columnar(COLUMNS, max_rows=3000)
    assert not gc.isenabled()
    gc.enable()
    decode_columnar(COLUMNS, max_rows=3000)
    assert gc.isenabled()
    assert gc.get_freeze_count() == 0  # nothing is left frozen


@pytest.mark.usefixtures("collector")
def test_decodes_in_several_threads_leave_the_collector_enabled() -> None:
    gc.enable()
    barrier = threading.Barrier(6)
    decoded: list[int] = []

    def work() -> None:
        barrier.wait()
        for _ in range(10):
            decoded.append(len(decode_columnar(COLUMNS, max_rows=3000)))

    threads = [threading.Thread(target=work) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert decoded == [3000] * 60
    assert gc.isenabled()
    assert gc.get_freeze_count() == 0


@pytest.mark.usefixtures("collector")
def test_objects_frozen_by_the_process_stay_frozen() -> None:
    gc.collect()
    keep = [[i] for i in range(100)]
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        assert frozen >= len(keep)
        decode_columnar(COLUMNS, max_rows=3000)
        assert gc.get_freeze_count() == frozen
    finally:
        gc.unfreeze()
