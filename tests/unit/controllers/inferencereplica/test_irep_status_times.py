"""Reading rows whose classes differ in their times: the decoder's shortcuts accept and give
exactly what the model's own validation does.

``core/status.py`` reads a ``readySince`` of the form the controller writes without the model
(:func:`canonical_time`), and where each class is one row's makes the class model that row.
Each is checked against what it replaces: the model's validation of the same string, and the
rows validated one by one.
"""

from __future__ import annotations

import datetime as dt
import random
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from pydantic import TypeAdapter, ValidationError

from omed.api.base import Time
from omed.api.inferencereplica import InstanceStatus
from omed.controllers.inferencereplica.core import status as status_module
from omed.controllers.inferencereplica.core.status import (
    StatusDecodeFailed,
    canonical_time,
    canonical_times,
    decode_rows_from_status,
)
from omed.statuscodec import COLUMNAR_V2, encode_columnar

TIME: TypeAdapter[dt.datetime] = TypeAdapter(Time)

SHAPED = st.from_regex(r"\A[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z\Z")
"""Strings of the canonical shape, most of them no real instant (month 47, second 83)."""
NEAR = st.one_of(
    SHAPED.map(lambda text: text[:-1]),  # no zone
    SHAPED.map(lambda text: text.replace("T", " ")),
    SHAPED.map(lambda text: text[:-1] + ".5Z"),
    SHAPED.map(lambda text: text[:-1] + "+02:00"),
    st.from_regex(r"\A\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z\Z"),  # any Unicode digits
    st.text(max_size=24),
)
REAL = st.datetimes(
    min_value=dt.datetime(1, 1, 1), max_value=dt.datetime(9999, 12, 31, 23, 59, 59)
).map(lambda at: at.strftime("%Y-%m-%dT%H:%M:%SZ").rjust(20, "0"))


def model_time(text: str) -> dt.datetime | None:
    """What the model makes of ``text`` (``None``: it refuses it)."""
    try:
        return TIME.validate_python(text)
    except ValidationError:
        return None


@given(st.one_of(SHAPED, NEAR, REAL))
@example("2026-02-30T00:00:00Z")
@example("2026-02-29T00:00:00Z")
@example("2024-02-29T00:00:00Z")
@example("0000-01-01T00:00:00Z")
@example("2026-09-14T24:00:00Z")
@example("2026-09-14T23:59:60Z")
@example("2026-W37-1T20:00:00Z")
@example("\uff12\uff10\uff12\uff16-09-14T20:00:00Z")  # fullwidth digits
@example("2026-09-14t20:00:00z")
def test_the_shortcut_gives_a_time_only_where_the_model_gives_the_same(text: str) -> None:
    fast = canonical_time(text)
    if fast is not None:
        slow = model_time(text)
        assert slow is not None, f"the shortcut accepts {text!r}, which the model refuses"
        assert fast == slow and fast.tzinfo is slow.tzinfo is dt.UTC


@given(REAL)
def test_every_time_the_controller_writes_takes_the_shortcut(text: str) -> None:
    assert canonical_time(text) == model_time(text)


@given(st.lists(st.one_of(REAL, REAL, SHAPED, NEAR, st.none(), st.integers())))
def test_the_batch_reads_what_each_string_reads_alone(texts: list[Any]) -> None:
    assert canonical_times(texts) == list(map(canonical_time, texts))


def test_a_value_that_is_no_string_is_left_to_the_model() -> None:
    for value in (None, 1, True, 1.5, ["2026-09-14T20:00:00Z"], {"a": 1}):
        assert canonical_time(value) is None


def row(index: int, since: Any) -> dict[str, Any]:
    return {
        "index": index,
        "incarnation": 1,
        "phase": "Ready",
        "podCount": 1,
        "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": since}],
        "readySince": since,
    }


def alone(rows: list[dict[str, Any]]) -> list[InstanceStatus] | ValidationError:
    """The rows validated one by one, sorted by index; or the first row's refusal."""
    models = []
    for body in rows:
        try:
            models.append(InstanceStatus.model_validate({**body, "index": 0}))
        except ValidationError as err:
            return err
    return [
        model.model_copy(update={"index": body["index"]})
        for model, body in sorted(zip(models, rows, strict=True), key=lambda p: p[1]["index"])
    ]


@given(st.lists(st.one_of(SHAPED, REAL, NEAR), min_size=1, max_size=12), st.randoms())
def test_decoded_rows_are_the_rows_validated_one_by_one(
    times: list[Any], shuffle: random.Random
) -> None:
    """Each row its own class (its own ``readySince``, stored in any order): the decoded
    rows, or the refusal, are those of the model alone, in both forms."""
    rows = [row(index, since) for index, since in enumerate(times)]
    shuffle.shuffle(rows)
    expected = alone(rows)
    for stored in (
        {"instanceStatuses": rows},
        {"instanceStatusEncoding": COLUMNAR_V2, "instanceStatusColumns": encode_columnar(rows)},
    ):
        if isinstance(expected, ValidationError):
            with pytest.raises(StatusDecodeFailed) as caught:
                decode_rows_from_status(stored, max_rows=100)
            assert caught.value.reason == "row_shape"
            assert caught.value.detail == f"a row is not a valid Instance row: {expected}"
            continue
        decoded = decode_rows_from_status(stored, max_rows=100)
        assert decoded == expected
        assert [m.model_fields_set for m in decoded] == [m.model_fields_set for m in expected]
        assert [m.to_dict() for m in decoded] == [m.to_dict() for m in expected]
        assert len({id(m) for m in decoded}) == len(decoded)
    assert status_module._FIRST.index == 0  # the placeholder is never a row


def test_a_shaped_time_that_names_no_instant_is_refused_as_the_model_refuses_it() -> None:
    rows = [row(0, "2026-09-14T20:00:00Z"), row(1, "2026-02-30T20:00:00Z")]
    with pytest.raises(StatusDecodeFailed) as caught:
        decode_rows_from_status({"instanceStatuses": rows}, max_rows=None)
    assert caught.value.row is not None and caught.value.row["index"] == 1
    assert "readySince" in caught.value.detail


def test_rows_of_one_class_each_hold_their_own_time_and_share_their_conditions() -> None:
    rows = [row(index, f"2026-09-14T20:00:{index:02}Z") for index in range(5)]
    for body in rows:
        body["conditions"] = rows[0]["conditions"]
    decoded = decode_rows_from_status({"instanceStatuses": rows}, max_rows=None)
    assert [m.index for m in decoded] == list(range(5))
    assert [m.ready_since for m in decoded] == [
        dt.datetime(2026, 9, 14, 20, 0, index, tzinfo=dt.UTC) for index in range(5)
    ]
    assert decoded[0].conditions[0] is decoded[4].conditions[0]  # validated once, shared
