"""The decoders raise DecodeError and nothing else, whatever they are given.

Three sources of input: arbitrary JSON, envelopes with the right keys and arbitrary values,
and valid encodings with random damage (keys dropped, types changed, numbers swapped, strings
and lists cut or edited). A decode that succeeds must still return valid rows.
"""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from omed.statuscodec import (
    DecodeError,
    decode_columnar,
    decode_status,
    encode_columnar,
    validate_rows,
)
from omed.statuscodec.rowschema import COLUMNS

from ._support import assert_valid_rows, json_values, row_lists

FUZZ = settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))

sequence_texts = st.text(alphabet="0123456789,-*~", max_size=16) | st.sampled_from(
    ["0-3", "0*4", "~*4", "1,0,2,3", "0", ""]
)
envelopes = st.fixed_dictionaries(
    {},
    optional={
        "version": st.just(2) | json_values,
        "rowCount": st.integers(-2, 6) | json_values,
        "classCount": st.integers(-1, 4) | json_values,
        "strings": st.lists(st.text(max_size=4), max_size=4) | json_values,
        "times": sequence_texts | json_values,
        "index": sequence_texts,
        "rowClass": sequence_texts,
        "overrides": st.dictionaries(st.sampled_from(["0", "1", "2", "x"]), sequence_texts),
        "columns": st.dictionaries(
            st.sampled_from(sorted(COLUMNS)[:40]) | st.text(max_size=4), sequence_texts
        ),
    },
)


def decodes_or_refuses(columns: Any, *, max_rows: int | None = 50) -> None:
    try:
        rows = decode_columnar(columns, max_rows=max_rows)
    except DecodeError as err:
        assert err.reason and isinstance(err.detail, str)
        return
    assert_valid_rows(rows)


@FUZZ
@given(json_values, st.sampled_from([None, 0, 1, 50, 10**6]))
def test_arbitrary_json_is_decoded_or_refused(value: Any, max_rows: int | None) -> None:
    decodes_or_refuses(value, max_rows=max_rows)
    decodes_or_refuses({"version": 2, "rowCount": 1, "classCount": 1, "columns": value})


@FUZZ
@given(envelopes)
def test_envelopes_with_any_contents_are_decoded_or_refused(columns: dict[str, Any]) -> None:
    decodes_or_refuses(columns)


STRING_KEYS = ("times", "index", "rowClass")


def mutate_text(data: st.DataObject, text: str) -> str:
    how = data.draw(st.sampled_from(["cut", "insert", "delete", "swap", "repeat", "replace"]))
    at = data.draw(st.integers(0, len(text)))
    if how == "cut":
        return text[:at]
    if how == "insert":
        inserted: str = data.draw(st.sampled_from([*",-*~0123456789", "9" * 20]))
        return text[:at] + inserted + text[at:]
    if how == "delete":
        return text[:at] + text[at + 1 :]
    if how == "swap" and len(text) >= 2:
        i, j = sorted(data.draw(st.lists(st.integers(0, len(text) - 1), min_size=2, max_size=2)))
        chars = list(text)
        chars[i], chars[j] = chars[j], chars[i]
        return "".join(chars)
    if how == "repeat" and text:
        items = text.split(",")
        k = data.draw(st.integers(0, len(items) - 1))
        return ",".join([*items[: k + 1], items[k], *items[k + 1 :]])
    replaced: str = data.draw(sequence_texts)
    return replaced


def mutate(data: st.DataObject, columns: dict[str, Any]) -> None:
    targets = ["drop", "retype", "number", "swap-numbers", "text", "strings", "column", "override"]
    how = data.draw(st.sampled_from(targets))
    keys = sorted(columns)
    if how == "drop":
        columns.pop(data.draw(st.sampled_from(keys)))
    elif how == "retype":
        columns[data.draw(st.sampled_from(keys))] = data.draw(json_values)
    elif how == "number":
        key = data.draw(st.sampled_from(["version", "rowCount", "classCount"]))
        if type(columns.get(key)) is int:
            columns[key] += data.draw(st.sampled_from([-1, 1, -(10**9), 10**30]))
        else:
            columns[key] = data.draw(st.integers(-3, 3) | st.booleans())
    elif how == "swap-numbers":
        columns["rowCount"], columns["classCount"] = (
            columns.get("classCount", 0),
            columns.get("rowCount", 0),
        )
    elif how == "text":
        present = [key for key in STRING_KEYS if type(columns.get(key)) is str]
        if present:
            key = data.draw(st.sampled_from(present))
            columns[key] = mutate_text(data, columns[key])
    elif how == "strings" and type(columns.get("strings")) is list and columns["strings"]:
        strings = columns["strings"]
        change = data.draw(st.sampled_from(["truncate", "append", "drop"]))
        if change == "truncate":
            del strings[data.draw(st.integers(0, len(strings) - 1)) :]
        elif change == "append":
            strings.append(data.draw(json_values))
        else:
            strings.pop(data.draw(st.integers(0, len(strings) - 1)))
    elif how == "column" and type(columns.get("columns")) is dict and columns["columns"]:
        table = columns["columns"]
        path = data.draw(st.sampled_from(sorted(table)))
        change = data.draw(st.sampled_from(["drop", "edit", "rename", "retype"]))
        if change == "drop":
            table.pop(path)
        elif change == "edit" and type(table[path]) is str:
            table[path] = mutate_text(data, table[path])
        elif change == "rename":
            table[data.draw(st.sampled_from(sorted(COLUMNS)))] = table.pop(path)
        else:
            table[path] = data.draw(json_values)
    elif how == "override":
        overrides = columns.setdefault("overrides", {})
        if type(overrides) is dict:
            key = data.draw(st.sampled_from(["0", "1", "2", "7", "01", "-1"]))
            overrides[key] = data.draw(sequence_texts)


@FUZZ
@given(row_lists(max_rows=15), st.data())
def test_damaged_encodings_are_decoded_or_refused(
    rows: list[dict[str, Any]], data: st.DataObject
) -> None:
    columns = copy.deepcopy(encode_columnar(rows))
    for _ in range(data.draw(st.integers(1, 3))):
        mutate(data, columns)
    decodes_or_refuses(columns, max_rows=data.draw(st.sampled_from([15, len(rows), 1000])))


statuses = st.fixed_dictionaries(
    {},
    optional={
        "instanceStatusEncoding": st.sampled_from(["ColumnarV2", "DenseV1", ""]) | json_values,
        "instanceStatuses": st.lists(json_values, max_size=3) | json_values,
        "instanceStatusColumns": envelopes | json_values,
    },
)


@FUZZ
@given(statuses | json_values)
def test_any_status_is_read_or_refused(status: Any) -> None:
    try:
        rows = decode_status(status, max_rows=50)
    except DecodeError:
        return
    assert_valid_rows(rows)
    assert len({row["index"] for row in rows}) == len(rows)


@FUZZ
@given(st.lists(json_values, max_size=4) | json_values)
def test_any_replacement_rows_are_accepted_or_refused(rows: Any) -> None:
    try:
        checked = validate_rows(rows)
    except DecodeError:
        return
    assert_valid_rows(checked)
