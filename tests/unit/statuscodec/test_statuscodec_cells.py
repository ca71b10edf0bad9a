"""The cell bound: a status is refused as ``size`` when its rows would hold more than
``max_rows`` x 64 cells (indexes and leaf values), before a row is built; omed never writes
columns past it; the class table readers see the same rows as the row decoder."""

from __future__ import annotations

import time
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

from omed.statuscodec import (
    CELLS_PER_ROW,
    COLUMNAR_V2,
    DENSE_V1,
    DecodeError,
    cell_bound,
    choose_encoding,
    decode_class_table,
    decode_columnar,
    decode_status,
    decode_status_table,
    encode,
    encode_columnar,
)
from omed.statuscodec.cells import MIN_CELL_BOUND

from ._support import row_lists

TIME = "2026-09-14T20:50:00Z"


def row(index: int, *, conditions: int = 1) -> dict[str, Any]:
    """A Ready row as omed writes it (16 cells with one condition: 10 values, the index and
    5 condition fields), with ``conditions`` conditions of 6 fields each."""
    body: dict[str, Any] = {
        "index": index,
        "incarnation": 1,
        "phase": "Ready",
        "runningRevision": "chat-engine-2f32f6fe",
        "targetRevision": "chat-engine-2f32f6fe",
        "podCount": 1,
        "servingPodCount": 1,
        "availablePodCount": 1,
        "admitted": True,
        "conditions": [
            {
                "type": "Ready" if k == 0 else f"Extra{k}",
                "status": "True",
                "lastTransitionTime": TIME,
                "reason": "InstanceReady",
                "message": "",
                **({"observedGeneration": 1} if k else {}),
            }
            for k in range(conditions)
        ],
        "readySince": TIME,
        "activeOrdinal": 0,
    }
    return body


def columns(count: int, *, conditions: int = 1) -> dict[str, Any]:
    return encode_columnar([row(i, conditions=conditions) for i in range(count)])


def test_the_bound_is_64_cells_a_row_of_the_row_bound_and_never_below_2048_rows() -> None:
    assert CELLS_PER_ROW == 64
    assert cell_bound(20000) == 1_280_000
    assert cell_bound(1) == cell_bound(2048) == MIN_CELL_BOUND == 131_072


def test_20000_rows_of_32_conditions_are_refused_as_size_naming_rows_cells_and_the_bound() -> None:
    hostile = columns(20000, conditions=32)  # 6.6 KB: the class table shares every value
    started = time.process_time()
    with pytest.raises(DecodeError) as caught:
        decode_columnar(hostile, max_rows=20000)
    spent = time.process_time() - started
    assert caught.value.reason == "size"
    assert caught.value.detail == (
        "20000 rows x 202 cells = 4040000 decoded cells (indexes and leaf values, every "
        "condition's fields included), more than the bound of 1280000 (20000 rows x 64 cells)"
    )
    assert spent < 0.05, f"the refusal took {spent * 1000:.0f} ms of CPU"
    status = {"instanceStatusEncoding": COLUMNAR_V2, "instanceStatusColumns": hostile}
    for decoder in (decode_status, decode_status_table):
        with pytest.raises(DecodeError) as caught:
            decoder(status, max_rows=20000)
        assert caught.value.reason == "size"


def test_omeds_own_rows_fit_at_the_row_bound() -> None:
    fleet = columns(20000)  # 16 cells a row
    assert len(decode_columnar(fleet, max_rows=20000)) == 20000
    four = columns(20000, conditions=4)  # 10 + 1 + 4 x 6 - 1 = 34 cells a row
    assert len(decode_class_table(four, max_rows=20000).row_class) == 20000


def test_the_bound_counts_each_class_by_its_rows() -> None:
    # 100 fat rows (32 conditions) among 10,000 thin ones: 100 x 202 + 9,900 x 16 cells.
    rows = [row(i, conditions=32 if i < 100 else 1) for i in range(10_000)]
    assert len(decode_columnar(encode_columnar(rows), max_rows=10_000)) == 10_000
    rows = [row(i, conditions=32 if i < 3_000 else 1) for i in range(10_000)]
    with pytest.raises(DecodeError) as caught:  # 3,000 x 202 + 7,000 x 16 = 718,000 cells
        decode_columnar(encode_columnar(rows), max_rows=10_000)
    assert caught.value.reason == "size"
    assert "718000 decoded cells" in caught.value.detail


def test_the_encoder_counts_the_same_cells_and_omed_writes_the_list_past_the_bound() -> None:
    rows = [row(i, conditions=32) for i in range(1000)]
    assert encode(rows).cells == 1000 * 202
    assert encode([{"index": 0}, {}]).cells == 1
    # 1000 rows under a bound of 1000 rows: 202,000 cells, past 131,072. Columns that could
    # not be read back are never written.
    assert choose_encoding(rows, configured=COLUMNAR_V2, max_rows=1000)[0] == DENSE_V1
    thin = [row(i) for i in range(1000)]
    assert choose_encoding(thin, configured=COLUMNAR_V2, max_rows=1000)[0] == COLUMNAR_V2


def test_lists_are_not_bounded_by_cells() -> None:
    rows = [row(i, conditions=32) for i in range(1000)]
    assert len(decode_status({"instanceStatuses": rows}, max_rows=1)) == 1000


def _rows_of(table: Any) -> list[dict[str, Any]]:
    out = []
    for cls, index in zip(table.row_class, table.indexes, strict=True):
        body = table.templates[cls]
        out.append(body.copy() if index is None else {"index": index, **body})
    return out


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(row_lists())
def test_the_class_table_holds_the_rows_the_row_decoder_gives(rows: list[dict[str, Any]]) -> None:
    encoded = encode_columnar(rows)
    bound = max(len(rows), 1)
    assert _rows_of(decode_class_table(encoded, max_rows=bound)) == decode_columnar(
        encoded, max_rows=bound
    )
    indexed = [r for r in rows if "index" in r]
    unique = list({r["index"]: r for r in indexed}.values())
    for status in (
        {"instanceStatuses": unique},
        {"instanceStatusEncoding": COLUMNAR_V2, "instanceStatusColumns": encode_columnar(unique)},
    ):
        table = decode_status_table(status, max_rows=bound)
        assert _rows_of(table) == decode_status(status, max_rows=bound)
        assert len(table.templates) <= len(unique)


def test_classes_no_row_uses_count_against_the_bound_too() -> None:
    # 2,048 rows, all of class 0 (an index alone), and 2,047 more classes that no row uses,
    # each of 65 cells (its incarnation, 32 conditions of type and status): the rows hold
    # 2,048 cells, the class table 133,055, past the bound of 131,072.
    rows = [{"index": 0}] + [
        {"index": i, "incarnation": i, "conditions": [{"type": "T", "status": "True"}] * 32}
        for i in range(1, 2048)
    ]
    cols = encode_columnar(rows)
    cols["rowClass"] = "0*2048"
    cols.pop("overrides", None)
    with pytest.raises(DecodeError) as caught:
        decode_columnar(cols, max_rows=2048)
    assert caught.value.reason == "size"
    assert caught.value.detail == (
        "the class table holds 133055 cells (2048 classes), more than the bound of 131072"
    )
