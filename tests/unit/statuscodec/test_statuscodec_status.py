"""Reading either encoding from a status, choosing the one to write, and what is written."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

from omed.statuscodec import (
    CLI_MAX_ROWS,
    COLUMNAR_V2,
    DENSE_V1,
    GUARDED_ACTION_MAX_ROWS,
    METRIC_LABELS,
    REASON_CONVERTED,
    REASON_DECODE_FAILED,
    REASON_SIZE_EXCEEDED,
    DecodeError,
    EncodeError,
    choose_encoding,
    conversion,
    converted_message,
    decode_columnar,
    decode_failed_message,
    decode_status,
    encode_columnar,
    encoded_size,
    size_exceeded_message,
    status_merge_patch,
    stored_encoding,
    validate_rows,
    with_rows,
)

from ._support import row_lists


def fleet(count: int, *, revision: str = "chat-engine-2f32f6fe") -> list[dict[str, Any]]:
    return [
        {
            "index": i,
            "incarnation": 1,
            "phase": "Ready",
            "runningRevision": revision,
            "targetRevision": revision,
            "podCount": 1,
            "servingPodCount": 1,
            "availablePodCount": 1,
            "admitted": True,
        }
        for i in range(count)
    ]


ROWS = fleet(50)
COLUMNS = encode_columnar(ROWS)


def refused(status: Any, *, max_rows: int | None = 100) -> DecodeError:
    with pytest.raises(DecodeError) as caught:
        decode_status(status, max_rows=max_rows)
    return caught.value


# -- decode_status ---------------------------------------------------------------------------


def test_a_list_is_read_as_is_and_without_a_bound() -> None:
    status = {"replicas": 50, "instanceStatuses": ROWS}
    rows = decode_status(status, max_rows=None)
    assert rows == ROWS
    assert rows[0] is ROWS[0]


def test_columns_are_read_under_the_bound() -> None:
    status = {"instanceStatusEncoding": "ColumnarV2", "instanceStatusColumns": COLUMNS}
    assert decode_status(status, max_rows=50) == ROWS
    assert decode_status({**status, "instanceStatuses": []}, max_rows=50) == ROWS
    assert refused(status, max_rows=49).reason == "cardinality_limit"
    assert refused(status, max_rows=0).reason == "cardinality_limit"
    assert refused(status, max_rows=None).reason == "cardinality_limit"


@pytest.mark.parametrize("status", [None, {}, {"instanceStatuses": []}, {"replicas": 0}])
def test_no_rows(status: Any) -> None:
    assert decode_status(status, max_rows=None) == []


@pytest.mark.parametrize(
    ("status", "reason", "detail"),
    [
        ([], "type", "status must be an object"),
        ({"instanceStatuses": {}}, "type", "instanceStatuses must be a list"),
        ({"instanceStatuses": [7]}, "row_shape", "row 0: must be an object"),
        ({"instanceStatuses": [{"index": 0, "phase": 1}]}, "value", "row 0: phase must be"),
        ({"instanceStatuses": [{"index": 0, "nodeName": "a"}]}, "row_shape", "unknown key"),
        ({"instanceStatuses": [{"index": "0"}]}, "value", "index must be an integer"),
        ({"instanceStatuses": [{"index": 0}, {"phase": "Ready"}]}, "index", "row 1 has no index"),
        (
            {"instanceStatuses": [{"index": 3}, {"index": 4}, {"index": 3}]},
            "index",
            "rows 0 and 2 both have index 3",
        ),
        ({"instanceStatusEncoding": "DenseV1"}, "encoding", "it must be ColumnarV2 or absent"),
        ({"instanceStatusEncoding": "columnarV2"}, "encoding", "is 'columnarV2'"),
        ({"instanceStatusEncoding": "ColumnarV2"}, "encoding", "instanceStatusColumns is absent"),
        (
            {
                "instanceStatusEncoding": "ColumnarV2",
                "instanceStatusColumns": COLUMNS,
                "instanceStatuses": ROWS[:1],
            },
            "encoding",
            "instanceStatuses holds rows too",
        ),
        (
            {"instanceStatusColumns": COLUMNS, "instanceStatuses": ROWS},
            "encoding",
            "instanceStatusColumns is present but instanceStatusEncoding is not ColumnarV2",
        ),
        (
            {"instanceStatusEncoding": "ColumnarV2", "instanceStatusColumns": "0-49"},
            "type",
            "instanceStatusColumns must be an object",
        ),
    ],
)
def test_a_damaged_status_is_refused(status: Any, reason: str, detail: str) -> None:
    error = refused(status)
    assert error.reason == reason
    assert detail in error.detail


def test_columns_with_a_repeated_index_are_refused() -> None:
    rows = [{"index": 1}, {"index": 2}, {"index": 1}]
    status = {
        "instanceStatusEncoding": "ColumnarV2",
        "instanceStatusColumns": encode_columnar(rows),
    }
    error = refused(status)
    assert (error.reason, error.detail) == ("index", "rows 0 and 2 both have index 1")


def test_validate_rows_checks_every_row_on_its_own() -> None:
    rows: list[Any] = [{"index": 0, "admitted": True}, {"index": 1, "admitted": 1}]
    with pytest.raises(DecodeError) as caught:
        validate_rows(rows)
    assert (caught.value.reason, caught.value.detail) == (
        "value",
        "row 1: admitted must be true or false, got 1",
    )
    assert validate_rows(ROWS) == ROWS


def test_stored_encoding() -> None:
    assert stored_encoding(None) == DENSE_V1
    assert stored_encoding({"instanceStatuses": []}) == DENSE_V1
    assert stored_encoding({"instanceStatusEncoding": "ColumnarV2"}) == COLUMNAR_V2


# -- choose_encoding -------------------------------------------------------------------------


def test_dense_v1_always_writes_the_list() -> None:
    assert choose_encoding(ROWS, configured="DenseV1", max_rows=20000) == ("DenseV1", ROWS)
    assert choose_encoding(ROWS, configured="DenseV1", max_rows=0) == ("DenseV1", ROWS)


def test_columnar_v2_writes_columns_when_they_are_smaller() -> None:
    encoding, payload = choose_encoding(ROWS, configured="ColumnarV2", max_rows=20000)
    assert encoding == "ColumnarV2"
    assert payload == COLUMNS


def test_columnar_v2_writes_the_list_when_it_is_no_larger() -> None:
    one = fleet(1)
    assert encoded_size(one) <= encoded_size(encode_columnar(one))
    assert choose_encoding(one, configured="ColumnarV2", max_rows=20000) == ("DenseV1", one)
    assert choose_encoding([], configured="ColumnarV2", max_rows=20000) == ("DenseV1", [])


def test_columnar_v2_writes_the_list_past_the_bound_or_without_one() -> None:
    assert choose_encoding(ROWS, configured="ColumnarV2", max_rows=49) == ("DenseV1", ROWS)
    assert choose_encoding(ROWS, configured="ColumnarV2", max_rows=50)[0] == "ColumnarV2"
    assert choose_encoding(ROWS, configured="ColumnarV2", max_rows=0) == ("DenseV1", ROWS)
    assert choose_encoding(ROWS, configured="ColumnarV2", max_rows=None) == ("DenseV1", ROWS)


@pytest.mark.parametrize("configured", ["DenseV1", "ColumnarV2"])
def test_invalid_rows_are_not_written_either_way(configured: Any) -> None:
    with pytest.raises(EncodeError):
        choose_encoding([{"index": 0, "phase": "Up"}], configured=configured, max_rows=10)
    with pytest.raises(ValueError, match="unknown encoding"):
        choose_encoding(ROWS, configured="Dense", max_rows=10)  # type: ignore[arg-type]


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(row_lists(max_rows=20))
def test_the_choice_follows_the_rule(rows: list[dict[str, Any]]) -> None:
    encoding, payload = choose_encoding(rows, configured="ColumnarV2", max_rows=20)
    columns_size = encoded_size(encode_columnar(rows))
    if encoded_size(rows) <= columns_size:
        assert (encoding, payload) == ("DenseV1", rows)
    else:
        assert encoding == "ColumnarV2"
        assert encoded_size(payload) == columns_size
        assert decode_columnar(payload, max_rows=20) == rows


# -- Writing ---------------------------------------------------------------------------------


def merge(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch."""
    if type(patch) is not dict:
        return copy.deepcopy(patch)
    out = dict(target) if type(target) is dict else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge(out.get(key), value)
    return out


OLD_COLUMNS = encode_columnar(
    [{"index": 0, "phase": "Updating", "operation": {"id": "a", "type": "Update"}}]
    + [{"index": i, "phase": "Ready", "incarnation": 2 if i == 5 else 1} for i in range(1, 40)]
)


@pytest.mark.parametrize(
    "old",
    [
        {},
        {"replicas": 3, "instanceStatuses": ROWS},
        {
            "replicas": 3,
            "instanceStatusEncoding": "ColumnarV2",
            "instanceStatusColumns": OLD_COLUMNS,
        },
    ],
    ids=["empty", "list", "columns"],
)
@pytest.mark.parametrize("encoding", ["DenseV1", "ColumnarV2"])
def test_a_merge_patch_leaves_exactly_the_new_form(old: dict[str, Any], encoding: Any) -> None:
    payload: Any = ROWS if encoding == "DenseV1" else COLUMNS
    expected = with_rows(old, encoding=encoding, payload=payload)
    assert merge(old, status_merge_patch(old, encoding=encoding, payload=payload)) == expected
    assert decode_status(expected, max_rows=50) == ROWS
    assert expected.get("replicas") == old.get("replicas")
    if encoding == "ColumnarV2":
        assert expected["instanceStatusColumns"] == COLUMNS
        assert "instanceStatuses" not in expected
    else:
        assert "instanceStatusColumns" not in expected
        assert "instanceStatusEncoding" not in expected


def test_conversion() -> None:
    columnar = {"instanceStatusEncoding": "ColumnarV2", "instanceStatusColumns": COLUMNS}
    assert conversion(columnar, "DenseV1") == ("ColumnarV2", "DenseV1")
    assert conversion({"instanceStatuses": ROWS}, "ColumnarV2") == ("DenseV1", "ColumnarV2")
    assert conversion(columnar, "ColumnarV2") is None
    assert conversion({"instanceStatuses": ROWS}, "DenseV1") is None
    assert conversion({"instanceStatuses": []}, "ColumnarV2") is None
    assert conversion(None, "ColumnarV2") is None


# -- Names and messages ----------------------------------------------------------------------


def test_names_quoted_by_the_product_page() -> None:
    assert (DENSE_V1, COLUMNAR_V2) == ("DenseV1", "ColumnarV2")
    assert METRIC_LABELS == {"DenseV1": "dense_v1", "ColumnarV2": "columnar_v2"}
    assert (CLI_MAX_ROWS, GUARDED_ACTION_MAX_ROWS) == (20000, 2048)
    assert REASON_DECODE_FAILED == "InstanceStatusDecodeFailed"
    assert REASON_CONVERTED == "InstanceStatusConverted"
    assert REASON_SIZE_EXCEEDED == "StatusSizeExceeded"
    assert decode_failed_message(namespace="serving", name="example-engine", reason="coverage") == (
        "InferenceReplica serving/example-engine: per-Instance status cannot be decoded (coverage)"
    )
    assert converted_message(
        namespace="serving", name="example-engine", old="ColumnarV2", new="DenseV1"
    ) == (
        "InferenceReplica serving/example-engine: per-Instance status was rewritten "
        "from ColumnarV2 to DenseV1"
    )
    assert "status write of 1572864 bytes (DenseV1)" in size_exceeded_message(
        namespace="serving", name="example-engine", size=1572864, encoding="DenseV1"
    )
