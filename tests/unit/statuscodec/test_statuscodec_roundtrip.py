"""encode -> decode gives back exactly the rows, for chosen shapes and generated ones."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings

from omed.statuscodec import (
    EncodeError,
    decode_columnar,
    encode,
    encode_columnar,
    encoded_size,
)
from omed.statuscodec.rowschema import INT64_MAX, INT64_MIN, MAX_LIST_ITEMS

from ._support import assert_valid_rows, canonical, row_lists

CONDITION = {
    "type": "Ready",
    "status": "True",
    "observedGeneration": 3,
    "lastTransitionTime": "2026-09-14T20:52:31Z",
    "reason": "InstanceReady",
    "message": "",
}


def round_trip(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    columns = encode_columnar(rows)
    stored = orjson.loads(orjson.dumps(columns))  # what the API server gives back
    decoded = decode_columnar(stored, max_rows=max(len(rows), 1))  # nested values shared
    assert canonical(decoded) == canonical(rows)
    assert decoded == rows
    fresh = decode_columnar(stored, max_rows=max(len(rows), 1), share_nested=False)
    assert canonical(fresh) == canonical(rows)
    assert_nothing_shared(fresh)
    assert encode_columnar(decoded) == columns  # a pass that changes nothing writes nothing
    assert encode_columnar(fresh) == columns
    return decoded


def assert_nothing_shared(rows: list[dict[str, Any]]) -> None:
    """No container (row, list, object) appears twice in ``rows``."""
    seen: set[int] = set()

    def walk(value: Any) -> None:
        if isinstance(value, dict | list):
            assert id(value) not in seen, value
            seen.add(id(value))
            for item in value.values() if isinstance(value, dict) else value:
                walk(item)

    for row in rows:
        walk(row)


SHAPES: dict[str, list[dict[str, Any]]] = {
    "no rows": [],
    "only an index": [{"index": 0}],
    "no index at all": [{"phase": "Ready"}, {}, {"phase": "Ready"}],
    "empty containers": [
        {"index": 0, "conditions": [], "lastFailure": {}, "operation": {"hintTargetNodes": []}},
        {"index": 1, "conditions": [{}], "operation": {}},
    ],
    "every field": [
        {
            "index": 7,
            "incarnation": 8,
            "phase": "Updating",
            "runningRevision": "chat-decoder-old",
            "targetRevision": "chat-decoder-new",
            "podCount": 4,
            "servingPodCount": 1,
            "availablePodCount": 1,
            "admitted": True,
            "conditions": [CONDITION, {**CONDITION, "type": "Admitted", "status": "Unknown"}],
            "readySince": "2026-09-14T20:50:00Z",
            "activeOrdinal": 1,
            "lastFailure": {
                "pod": "chat-decoder-7-default-0",
                "container": "ome-container",
                "reason": "CapacityProvisioning",
                "exitCode": -1,
                "time": "2026-09-14T20:52:31Z",
            },
            "operation": {
                "id": "op-1",
                "type": "Migrate",
                "step": "SurgePending",
                "startedAt": "2026-09-14T20:51:00Z",
                "lastProgressAt": "2026-09-14T20:52:00Z",
                "deadline": "2026-09-14T21:51:00Z",
                "retryCount": 2,
                "targetRevision": "chat-decoder-new",
                "reason": "MigrationRequested",
                "waiting": "AdmissionUnavailable",
                "surgeIndex": 12,
                "fromNode": "gpu-node-3",
                "hintTargetNodes": ["gpu-node-4", "gpu-node-5", "gpu-node-4"],
                "requestUUID": "8b7c3f5e-3a41-4b53-9d4e-0f3c5e2a9b10",
            },
        }
    ],
    "strings that look like tokens": [
        {"index": 0, "runningRevision": s, "readySince": s}
        for s in ["", "~", "0", "12", "-3", "1-2", "3*4", ",", "é", "\u2603", "\x00"]
    ],
    "times canonical and not": [
        {"index": i, "readySince": s}
        for i, s in enumerate(
            [
                "2026-09-14T20:52:31Z",
                "0001-01-01T00:00:00Z",
                "9999-12-31T23:59:59Z",
                "1969-12-31T23:59:59Z",
                "2026-09-14T20:52:31.123Z",
                "2026-09-14T20:52:31+00:00",
                "2016-12-31T23:59:60Z",
                "2026-02-30T00:00:00Z",
                "0000-01-01T00:00:00Z",
                "2026-09-14t20:52:31z",
                "2026-09-14T20:52:31Z",
            ]
        )
    ],
    "integer limits": [
        {"index": INT64_MAX, "incarnation": INT64_MAX, "lastFailure": {"exitCode": INT64_MIN}},
        {"index": 0, "incarnation": 0, "lastFailure": {"exitCode": INT64_MAX}},
    ],
    "indexes repeated and descending": [{"index": i % 3} for i in (5, 4, 3, 2, 1, 0, 0, 0)],
    "longest lists": [
        {
            "index": 0,
            "conditions": [{"type": f"T{k}"} for k in range(MAX_LIST_ITEMS)],
            "operation": {"hintTargetNodes": [f"n{k}" for k in range(MAX_LIST_ITEMS)]},
        }
    ],
    "a replaced Instance inside a batch": [
        {"index": i, "incarnation": 2 if i in (5, 6, 40) else 1, "phase": "Ready"}
        for i in range(60)
    ],
    "alternating classes": [{"index": i, "admitted": i % 2 == 0} for i in range(30)],
    "key order differs": [
        {"index": 0, "phase": "Ready", "incarnation": 1},
        {"incarnation": 1, "index": 1, "phase": "Ready"},
    ],
}


@pytest.mark.parametrize("shape", SHAPES, ids=list(SHAPES))
def test_round_trip_of_chosen_shapes(shape: str) -> None:
    round_trip(SHAPES[shape])


def test_decoded_rows_share_no_mutable_value() -> None:
    rows = [
        {
            "index": i,
            "conditions": [dict(CONDITION)],
            "lastFailure": {"pod": "p"},
            "operation": {"id": "x", "hintTargetNodes": ["a"]},
        }
        for i in range(3)
    ]
    decoded = decode_columnar(encode_columnar(rows), max_rows=3, share_nested=False)
    decoded[0]["conditions"][0]["status"] = "False"
    decoded[0]["lastFailure"]["pod"] = "q"
    decoded[0]["operation"]["hintTargetNodes"].append("b")
    decoded[0]["operation"]["id"] = "y"
    assert decoded[1] == rows[1]
    assert decoded[2] == rows[2]
    again = decode_columnar(encode_columnar(rows), max_rows=3)
    assert again == rows


def test_shared_nested_values_are_equal_and_shared_within_a_class() -> None:
    rows = [
        {"index": i, "conditions": [dict(CONDITION)], "operation": {"hintTargetNodes": ["a"]}}
        for i in range(3)
    ] + [{"index": 3}, {"phase": "Ready"}]
    decoded = decode_columnar(encode_columnar(rows), max_rows=5)  # the default
    assert canonical(decoded) == canonical(rows)
    assert decoded[0] is not decoded[1]
    assert decoded[0]["conditions"] is decoded[1]["conditions"]
    assert decoded[0]["operation"] is decoded[2]["operation"]


def test_decoded_keys_come_in_canonical_order() -> None:
    rows = [{"operation": {"type": "Update", "id": "a"}, "phase": "Ready", "index": 3}]
    (decoded,) = round_trip(rows)
    assert list(decoded) == ["index", "phase", "operation"]
    assert list(decoded["operation"]) == ["id", "type"]


def test_a_uniform_fleet_is_a_handful_of_bytes() -> None:
    rows = [
        {"index": i, "incarnation": 1, "phase": "Ready", "runningRevision": "chat-engine-2f32f6fe"}
        for i in range(5000)
    ]
    columns = encode_columnar(rows)
    assert columns["classCount"] == 1
    assert columns["index"] == "0-4999"
    assert columns["rowClass"] == "0*5000"
    assert encoded_size(columns) < 250
    round_trip(rows)


def test_scattered_replacements_become_overrides() -> None:
    rows = SHAPES["a replaced Instance inside a batch"]
    columns = encode_columnar(rows)
    assert columns["rowClass"] == "0*60"
    assert columns["overrides"] == {"1": "5-6,40"}


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        ([["index", 0]], "row 0: must be an object"),
        ([{"index": -1}], "row 0: index must be an integer from 0"),
        ([{"index": True}], "row 0: index must be an integer from 0"),
        ([{"index": 0, "phase": "Running"}], "row 0: phase is 'Running', not one of"),
        ([{"index": 0, "podCount": 1.0}], "row 0: podCount must be an integer from 0"),
        ([{"index": 0, "podCount": -1}], "row 0: podCount must be an integer from 0"),
        ([{"index": 0, "admitted": 1}], "row 0: admitted must be true or false"),
        ([{"index": 0, "readySince": None}], "row 0: readySince must be a string, got null"),
        ([{"index": 0, "nodeName": "x"}], "row 0: unknown key(s) 'nodeName'"),
        ([{"index": 0, "operation": {"kind": "x"}}], "row 0: operation has unknown key(s)"),
        ([{"index": 0, "operation": []}], "row 0: operation must be an object"),
        ([{"index": 0, "conditions": {}}], "row 0: conditions must be a list"),
        ([{"index": 0, "conditions": ["Ready"]}], "row 0: conditions.0 must be an object"),
        ([{"index": 0, "conditions": [{}] * 33}], "conditions has 33 items, more than 32"),
        (
            [{"index": 0, "conditions": [{"status": "Yes"}]}],
            "row 0: conditions.0.status is 'Yes', not one of False, True, Unknown",
        ),
        (
            [{"index": 0, "operation": {"hintTargetNodes": [1]}}],
            "row 0: operation.hintTargetNodes.0 must be a string",
        ),
        ([{"index": 0, "incarnation": 2**63}], "incarnation must be an integer from 0"),
        ([{"index": 0, "lastFailure": {"exitCode": -(2**63) - 1}}], "exitCode must be an int64"),
    ],
)
def test_invalid_rows_are_refused(rows: list[Any], message: str) -> None:
    with pytest.raises(EncodeError) as caught:
        encode_columnar(rows)
    assert message in str(caught.value)


def test_an_invalid_row_is_refused_even_after_valid_ones() -> None:
    rows: list[dict[str, Any]] = [{"index": i, "phase": "Ready"} for i in range(10)]
    rows.append({"index": 10, "phase": "Ready", "podCount": "1"})
    with pytest.raises(EncodeError, match="row 10: podCount must be an integer"):
        encode_columnar(rows)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(row_lists())
def test_round_trip_of_generated_rows(rows: list[dict[str, Any]]) -> None:
    decoded = round_trip(rows)
    assert_valid_rows(decoded)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(row_lists())
def test_dense_size_is_the_size_of_the_list(rows: list[dict[str, Any]]) -> None:
    encoded = encode(rows)
    assert encoded.dense_size == encoded_size(rows)
    assert encoded.dense_size_at_least() <= encoded.dense_size


def test_the_encoding_does_not_depend_on_key_order() -> None:
    rows = [{"index": 0, "phase": "Ready", "operation": {"id": "a", "type": "Update"}}]
    reordered = [{"operation": {"type": "Update", "id": "a"}, "phase": "Ready", "index": 0}]
    assert encode_columnar(rows) == encode_columnar(reordered)


def test_a_row_equal_to_a_checked_row_is_stored_as_that_row() -> None:
    # Documented: classes are found with ==, so True where 1 belongs is normalized, not
    # refused, once a row with 1 was checked. validate_rows checks each row on its own.
    rows: list[dict[str, Any]] = [{"index": 0, "podCount": 1}, {"index": 1, "podCount": True}]
    decoded = decode_columnar(encode_columnar(rows), max_rows=2)
    assert canonical(decoded) == canonical(
        [{"index": 0, "podCount": 1}, {"index": 1, "podCount": 1}]
    )
    with pytest.raises(EncodeError):
        encode_columnar(rows[::-1])
