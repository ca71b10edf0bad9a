"""Each way a stored ColumnarV2 status is refused, with its reason."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from omed.statuscodec import DECODE_REASONS, DecodeError, decode_columnar, encode_columnar

ROWS: list[dict[str, Any]] = [
    {
        "index": i,
        "incarnation": 2 if i == 4 else 1,
        "phase": "Ready",
        "runningRevision": "chat-engine-2f32f6fe",
        "admitted": True,
        "conditions": [{"type": "Ready", "status": "True"}],
        "readySince": "2026-09-14T20:52:31Z",
        **({"operation": {"id": "op", "hintTargetNodes": ["n1", "n2"]}} if i == 9 else {}),
    }
    for i in range(12)
]
VALID = encode_columnar(ROWS)


def test_the_fixture_is_what_the_cases_below_edit() -> None:
    assert VALID["classCount"] == 3
    assert VALID["overrides"] == {"1": "4", "2": "9"}
    assert decode_columnar(VALID, max_rows=12) == ROWS


def edited(**changes: Any) -> dict[str, Any]:
    """VALID with top-level keys replaced (``None`` removes a key)."""
    out = copy.deepcopy(VALID)
    for key, value in changes.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = value
    return out


def with_column(path: str, text: str | None) -> dict[str, Any]:
    columns = dict(VALID["columns"])
    if text is None:
        columns.pop(path)
    else:
        columns[path] = text
    return edited(columns=columns)


def refused(columns: Any, *, max_rows: int | None = 12) -> DecodeError:
    with pytest.raises(DecodeError) as caught:
        decode_columnar(columns, max_rows=max_rows)
    assert caught.value.reason in DECODE_REASONS
    assert str(caught.value) == f"{caught.value.reason}: {caught.value.detail}"
    return caught.value


CASES: list[tuple[str, Any, int | None, str]] = [
    # (reason, columns, max_rows, detail fragment)
    ("cardinality_limit", VALID, 11, "12 rows are stored, more than maxDecodedInstances 11"),
    ("cardinality_limit", VALID, None, "no bound on decoded rows is set"),
    ("cardinality_limit", VALID, 0, "no bound on decoded rows is set"),
    ("cardinality_limit", edited(rowCount=10**30), 20000, "more than maxDecodedInstances"),
    ("coverage", edited(index="0-10"), 12, "index holds 11 values for 12 entries"),
    ("coverage", edited(index="0-12"), 12, "index holds more values than its 12 entries"),
    ("coverage", edited(rowClass="0*13"), 12, "rowClass holds more values"),
    ("coverage", edited(rowClass="0*9999999999999"), 12, "rowClass holds more values"),
    ("coverage", edited(overrides={"2": "4,4"}), 12, "covers row 4 a second time"),
    ("coverage", edited(overrides={"2": "3-5", "1": "5"}), 12, "covers row 5 a second time"),
    ("coverage", edited(overrides={"2": "12"}), 12, "names row 12, past the last row 11"),
    ("coverage", edited(overrides={"2": "0-99999999999"}), 12, "past the last row 11"),
    ("coverage", with_column("phase", "0*2"), 12, "column phase holds 2 values for 3"),
    ("range_syntax", edited(index="0-5,7-6,8-11"), 12, "'7-6' runs backwards"),
    ("range_syntax", edited(index="0-4,05,6-11"), 12, "'05' is not well formed"),
    ("range_syntax", edited(index="0-5,,6-11"), 12, "item 2 '' is not well formed"),
    ("range_syntax", edited(index="0--11"), 12, "'0--11' is not well formed"),
    ("range_syntax", edited(index="-0,1-11"), 12, "'-0' is not well formed"),
    ("range_syntax", edited(rowClass="0*0,0*12"), 12, "'0*0' is not well formed"),
    ("range_syntax", edited(rowClass="0*12 "), 12, "'0*12 ' is not well formed"),
    ("range_syntax", edited(rowClass="\uff10*12"), 12, "is not well formed"),
    ("range_syntax", edited(index="0-1" + "0" * 30), 12, "is not well formed"),
    ("range_syntax", edited(overrides={"2": "5-4"}), 12, "'5-4' runs backwards"),
    ("range_syntax", edited(overrides={"2": ""}), 12, "overrides[2] is empty"),
    ("range_syntax", edited(overrides={"2": "4;"}), 12, "'4;' is not a range"),
    ("range_syntax", edited(overrides={"2": "-4"}), 12, "'-4' is not a range"),
    ("version", edited(version=None), 12, "has no version"),
    ("version", edited(version=1), 12, "has version 1; this manager reads version 2"),
    ("version", edited(version="2"), 12, "has version '2'"),
    ("version", edited(version=True), 12, "has version true"),
    ("version", edited(version=[[[]]]), 12, "has version a list"),
    ("type", [VALID], 12, "instanceStatusColumns must be an object, got a list"),
    ("type", "ColumnarV2", 12, "must be an object, got a string"),
    ("type", edited(rowCount=None), 12, "instanceStatusColumns has no rowCount"),
    ("type", edited(rowCount="12"), 12, "rowCount must be an integer, got a string"),
    ("type", edited(rowCount=12.0), 12, "rowCount must be an integer"),
    ("type", edited(classCount=True), 12, "classCount must be an integer, got a boolean"),
    ("type", edited(strings="Ready"), 12, "strings must be a list, got a string"),
    ("type", edited(strings=["Ready", 7]), 12, "strings[1] must be a string, got an integer"),
    ("type", edited(times=1789000000), 12, "times must be a string, got an integer"),
    ("type", edited(index=[0, 1]), 12, "index must be a string, got a list"),
    ("type", edited(columns=[]), 12, "columns must be an object, got a list"),
    ("type", edited(overrides="2:4"), 12, "overrides must be an object"),
    ("type", edited(overrides={"2": 4}), 12, "overrides[2] must be a string"),
    ("type", edited(extra={}), 12, "unknown key 'extra'"),
    ("type", with_column("phase", 0), 12, "column phase must be a string"),  # type: ignore[arg-type]
    ("string_ref", with_column("phase", "99*3"), 12, "refers to string 99"),
    ("string_ref", with_column("phase", "-1*3"), 12, "refers to string -1"),
    ("class_ref", edited(rowClass="0*4,3,0*7"), 12, "gives row 4 class 3, not one of the 3"),
    ("class_ref", edited(rowClass="0*4,~,0*7"), 12, "gives row 4 class ~"),
    ("class_ref", edited(overrides={"3": "4"}), 12, "overrides names class '3'"),
    ("class_ref", edited(overrides={"02": "4"}), 12, "overrides names class '02'"),
    ("class_ref", edited(overrides={"two": "4"}), 12, "overrides names class 'two'"),
    ("value", edited(rowCount=-1), 12, "rowCount is negative (-1)"),
    ("value", edited(index="0-10,-3"), 12, "index of row 11 is out of range (-3)"),
    ("value", edited(index="0-10,9999999999999999999"), 12, "out of range"),
    ("value", with_column("admitted", "2*3"), 12, "a bool is 0 or 1"),
    ("value", with_column("incarnation", "1,-2,2"), 12, "class 1 has -2, out of range"),
    ("value", with_column("incarnation", "1,9999999999999999999,2"), 12, "out of range"),
    ("value", with_column("operation", "~,~,2"), 12, "an object is 1 or ~"),
    ("value", with_column("conditions", "1,1,33"), 12, "a list has 0 to 32"),
    ("value", edited(times="~"), 12, "times item 1 is absent"),
    ("value", edited(times="1789000000,-9999999999999999"), 12, "outside years 0001 to 9999"),
    ("row_shape", with_column("nodeName", "~*3"), 12, "unknown column 'nodeName'"),
    ("row_shape", with_column("conditions.32.type", "~*3"), 12, "unknown column"),
    ("row_shape", with_column("conditions.00.type", "~*3"), 12, "unknown column"),
    ("row_shape", with_column("operation", None), 12, "has a value but no operation"),
    ("row_shape", with_column("conditions.1.type", "~,~,0"), 12, "no conditions.1 to hold it"),
    ("row_shape", with_column("operation.hintTargetNodes.1", None), 12, "has 2 items but only 1"),
    (
        "row_shape",
        with_column("operation.hintTargetNodes.0", None),
        12,
        "has item 1 but not item 0",
    ),
    ("bounds", edited(classCount=13), 12, "classCount 13 is larger than rowCount 12"),
    ("bounds", edited(times="0*100000"), 12, "times holds more than"),
    # 3,000 rows of 32 conditions (12 + 32 x 6 - 2 = 202 cells each) under a bound of 3,000.
    (
        "size",
        encode_columnar(
            [
                {"index": i, "conditions": [{"type": f"C{k}", "status": "True"} for k in range(32)]}
                for i in range(3000)
            ]
        ),
        3000,
        "3000 rows x 65 cells = 195000 decoded cells",
    ),
]


@pytest.mark.parametrize(
    ("reason", "columns", "max_rows", "detail"),
    CASES,
    ids=[f"{reason}-{n}" for n, (reason, *_) in enumerate(CASES)],
)
def test_damage_is_refused_with_its_reason(
    reason: str, columns: Any, max_rows: int | None, detail: str
) -> None:
    error = refused(columns, max_rows=max_rows)
    assert error.reason == reason
    assert detail in error.detail


def test_every_reason_has_a_case() -> None:
    covered = {reason for reason, *_ in CASES} | {"index", "encoding"}  # decode_status tests
    assert covered == set(DECODE_REASONS)


def test_no_bound_refuses_before_looking_at_the_object() -> None:
    assert refused("garbage", max_rows=None).reason == "cardinality_limit"


def test_the_bound_is_checked_before_anything_is_built() -> None:
    huge = {"version": 2, "rowCount": 10**12, "classCount": 1, "rowClass": "0*1000000000000"}
    assert refused(huge, max_rows=20000).reason == "cardinality_limit"
    within = {**huge, "rowCount": 20000, "rowClass": "0*1000000000000"}
    assert refused(within, max_rows=20000).reason == "coverage"


def test_deep_and_huge_values_are_described_safely() -> None:
    deep: Any = []
    for _ in range(100_000):
        deep = [deep]
    assert refused(edited(version=deep)).reason == "version"
    assert refused(edited(strings=[deep])).reason == "type"
    assert refused(edited(columns={"phase": deep})).reason == "type"
    big = 10**5000
    assert "a number too large" in refused(edited(version=big)).detail
    assert refused(edited(rowCount=big), max_rows=12).reason == "cardinality_limit"
    assert refused(edited(classCount=big)).reason == "bounds"
    assert refused(edited(overrides={big: "4"})).reason == "class_ref"


def test_an_empty_object_with_no_rows_decodes() -> None:
    assert decode_columnar({"version": 2, "rowCount": 0, "classCount": 0}, max_rows=1) == []
    assert decode_columnar(encode_columnar([]), max_rows=1) == []
