"""Go's strconv at its edges: underscores, the order of Go's two reasons, special floats.

Every expectation is what Go's ``strconv.ParseInt(s, 0, 64)`` and ``ParseFloat(s, 64)``
return for the same string.
"""

from __future__ import annotations

import math

import pytest

from omed.config.gostrconv import parse_go_float, parse_go_int


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("0_17", 15),  # an underscore may follow the octal 0
        ("0b_1", 1),  # or a base prefix
        ("0X1f", 31),
        ("00", 0),
        ("-0", 0),
        ("-0x8000000000000000", -(1 << 63)),
        ("0" * 100 + "7", 7),  # leading zeros are not significant
    ],
)
def test_int_accepts(text: str, value: int) -> None:
    assert parse_go_int(text) == value


@pytest.mark.parametrize("text", ["+", "-", "0_", "0__1", "0b", "0b_", "0b2", "0o8", "0xg", "٣"])
def test_int_parse_errors(text: str) -> None:
    with pytest.raises(ValueError, match=r"^parse error$"):
        parse_go_int(text)


def test_int_overflow_is_reported_before_a_later_bad_character() -> None:
    # Go reads left to right: twenty nines pass 2**64 - 1 before the x is seen ...
    with pytest.raises(ValueError, match=r"^value out of range$"):
        parse_go_int("99999999999999999999x")
    # ... while 2**63 still fits in the unsigned read, so the x is what Go reports.
    with pytest.raises(ValueError, match=r"^parse error$"):
        parse_go_int("9223372036854775808x")


def test_int_range_without_a_digit_limit() -> None:
    with pytest.raises(ValueError, match=r"^value out of range$"):
        parse_go_int("9" * 5000)


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("1_000.000_5", 1000.0005),
        ("1e1_0", 1e10),
        ("0x.8p0", 0.5),
        ("0x_1p4", 16.0),
        ("+0X1P-2", 0.25),
        ("1E-3", 0.001),
        ("-0.0", -0.0),
    ],
)
def test_float_accepts(text: str, value: float) -> None:
    assert parse_go_float(text) == value


@pytest.mark.parametrize(
    "text", ["1_.5", "1._5", "._5", "1_e1", "1e_1", "0x_.8p0", "0x1p", ".", "+nan", "infinit", "٣"]
)
def test_float_parse_errors(text: str) -> None:
    with pytest.raises(ValueError, match=r"^parse error$"):
        parse_go_float(text)


@pytest.mark.parametrize("text", ["-1e400", "0x1p2000"])
def test_float_range_errors(text: str) -> None:
    with pytest.raises(ValueError, match=r"^value out of range$"):
        parse_go_float(text)


def test_float_infinities_are_values_not_range_errors() -> None:
    assert parse_go_float("+Inf") == math.inf
    assert parse_go_float("INFINITY") == math.inf
    assert math.isnan(parse_go_float("nAn"))
