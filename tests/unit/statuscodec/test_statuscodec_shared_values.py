"""Classes whose nested values are equal (each Instance Ready at its own second, all with the
same conditions) hold the very same decoded objects, and a refusal still names the first
class that is wrong, as it would if every class were built on its own."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from omed.statuscodec import DecodeError, decode_class_table, decode_columnar, encode_columnar

ROWS: list[dict[str, Any]] = [
    {
        "index": i,
        "phase": "Ready",
        "readySince": f"2026-09-14T20:52:{i:02d}Z",
        "conditions": [{"type": "Ready", "status": "True" if i < 2 else "False"}],
        **({"operation": {"id": "op", "hintTargetNodes": ["n1"]}} if i % 2 else {}),
    }
    for i in range(4)
]
VALID = encode_columnar(ROWS)


def test_the_fixture_is_four_classes_of_two_conditions_lists() -> None:
    assert VALID["classCount"] == 4
    assert VALID["columns"]["conditions.0.status"] == "1*2,2*2"
    assert VALID["columns"]["operation"] == "~,1,~,1"


def test_equal_nested_values_are_one_object_across_classes() -> None:
    table = decode_class_table(VALID, max_rows=4)
    bodies = table.templates
    assert bodies[0]["conditions"] is bodies[1]["conditions"]
    assert bodies[2]["conditions"] is bodies[3]["conditions"]
    assert bodies[0]["conditions"] is not bodies[2]["conditions"]
    assert bodies[1]["operation"] is bodies[3]["operation"]
    assert "operation" not in bodies[0] and "operation" not in bodies[2]
    # the keys keep their canonical order in every class
    assert [list(body) for body in bodies] == [
        ["phase", "conditions", "readySince"],
        ["phase", "conditions", "readySince", "operation"],
    ] * 2
    rows = decode_columnar(VALID, max_rows=4)
    assert rows == ROWS
    assert rows[0]["conditions"] is rows[1]["conditions"]


def test_unshared_rows_get_their_own_copies() -> None:
    rows = decode_columnar(VALID, max_rows=4, share_nested=False)
    assert rows == ROWS
    assert rows[0]["conditions"] is not rows[1]["conditions"]
    assert rows[0]["conditions"][0] is not rows[1]["conditions"][0]
    assert rows[1]["operation"] is not rows[3]["operation"]
    rows[1]["operation"]["hintTargetNodes"].append("n2")
    assert rows[3]["operation"]["hintTargetNodes"] == ["n1"]


def _with(path: str, text: str) -> dict[str, Any]:
    out = copy.deepcopy(VALID)
    out["columns"][path] = text
    return out


@pytest.mark.parametrize(
    ("path", "text", "detail"),
    [
        # classes 2 and 3 share their (bad) tokens: class 2 is named
        (
            "conditions.0.status",
            "1*2,9*2",
            "column conditions.0.status: class 2 refers to string 9, but there are 9",
        ),
        # only class 3 is bad, its tokens its own: class 3, not its place among the built
        (
            "conditions.0.status",
            "1*2,2,9",
            "column conditions.0.status: class 3 refers to string 9, but there are 9",
        ),
        ("conditions", "1,1,1,40", "column conditions: class 3 has 40 items; a list has 0 to 32"),
        (
            "operation.hintTargetNodes.0",
            "~,4,~,~",
            "class 3: operation.hintTargetNodes has 1 items but only 0 are stored",
        ),
        (
            "operation.hintTargetNodes.2",
            "~,~,~,4",
            "column operation.hintTargetNodes.2: class 3 has item 2 but not item 1",
        ),
        ("operation", "~,1,~,2", "column operation: class 3 has 2; an object is 1 or ~"),
        (
            "operation.id",
            "~,3,3,3",
            "column operation.id: class 2 has a value but no operation to hold it",
        ),
        (
            "operation.hintTargetNodes",
            "~,1,~,2",
            "class 3: operation.hintTargetNodes has 2 items but only 1 are stored",
        ),
    ],
)
def test_a_refusal_names_the_first_wrong_class(path: str, text: str, detail: str) -> None:
    with pytest.raises(DecodeError) as caught:
        decode_columnar(_with(path, text), max_rows=4)
    assert detail in caught.value.detail
