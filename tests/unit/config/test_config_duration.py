"""Go duration syntax: the cases of Go's own time_test.go, plus round trips."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from omed.config.duration import (
    DurationError,
    format_duration,
    format_duration_ns,
    parse_duration,
    parse_duration_ns,
)

NS = 1
US = 1000 * NS
MS = 1000 * US
S = 1000 * MS
M = 60 * S
H = 60 * M

PARSE_CASES = [
    ("0", 0),
    ("5s", 5 * S),
    ("30s", 30 * S),
    ("1478s", 1478 * S),
    ("-5s", -5 * S),
    ("+5s", 5 * S),
    ("-0", 0),
    ("+0", 0),
    ("5.0s", 5 * S),
    ("5.6s", 5 * S + 600 * MS),
    ("5.s", 5 * S),
    (".5s", 500 * MS),
    ("1.0s", 1 * S),
    ("1.00s", 1 * S),
    ("1.004s", 1 * S + 4 * MS),
    ("1.0040s", 1 * S + 4 * MS),
    ("100.00100s", 100 * S + 1 * MS),
    ("10ns", 10 * NS),
    ("11us", 11 * US),
    ("12\u00b5s", 12 * US),
    ("12\u03bcs", 12 * US),
    ("13ms", 13 * MS),
    ("14s", 14 * S),
    ("15m", 15 * M),
    ("16h", 16 * H),
    ("3h30m", 3 * H + 30 * M),
    ("10.5s4m", 4 * M + 10 * S + 500 * MS),
    ("-2m3.4s", -(2 * M + 3 * S + 400 * MS)),
    ("1h2m3s4ms5us6ns", 1 * H + 2 * M + 3 * S + 4 * MS + 5 * US + 6 * NS),
    ("39h9m14.425s", 39 * H + 9 * M + 14 * S + 425 * MS),
    ("52763797000ns", 52763797000 * NS),
    ("0.3333333333333333333h", 20 * M),
    ("9007199254740993ns", (1 << 53) + 1),
    ("9223372036854775807ns", (1 << 63) - 1),
    ("9223372036854775.807us", (1 << 63) - 1),
    ("9223372036s854ms775us807ns", (1 << 63) - 1),
    ("-9223372036854775808ns", -(1 << 63)),
    ("-9223372036854775.808us", -(1 << 63)),
    ("-9223372036s854ms775us808ns", -(1 << 63)),
    ("-2562047h47m16.854775808s", -(1 << 63)),
    ("0.100000000000000000000h", 6 * M),
    ("0.830103483285477580700h", 49 * M + 48 * S + 372539827 * NS),
    # The forms users write.
    ("72h", 72 * H),
    ("1m30s", 90 * S),
    ("1.5h", 90 * M),
    ("300ms", 300 * MS),
]


@pytest.mark.parametrize(("text", "expected"), PARSE_CASES)
def test_parse_matches_go(text: str, expected: int) -> None:
    assert parse_duration_ns(text) == expected


@pytest.mark.parametrize(
    ("text", "seconds"), [("30s", 30.0), ("72h", 259200.0), ("1.5h", 5400.0), ("300ms", 0.3)]
)
def test_parse_duration_returns_seconds(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


ERROR_CASES = [
    ("", 'time: invalid duration ""'),
    ("3", 'time: missing unit in duration "3"'),
    ("-", 'time: invalid duration "-"'),
    ("s", 'time: invalid duration "s"'),
    (".", 'time: invalid duration "."'),
    ("-.", 'time: invalid duration "-."'),
    (".s", 'time: invalid duration ".s"'),
    ("+.s", 'time: invalid duration "+.s"'),
    ("1d", 'time: unknown unit "d" in duration "1d"'),
    ("abc", 'time: invalid duration "abc"'),
    ("5 s", 'time: unknown unit " s" in duration "5 s"'),
    (" 5s", 'time: invalid duration " 5s"'),
    ("1h-5m", 'time: unknown unit "h-" in duration "1h-5m"'),
    ("\ufffd", 'time: invalid duration "\\xef\\xbf\\xbd"'),
    ("9223372036854775810ns", 'time: invalid duration "9223372036854775810ns"'),
    ("9223372036854775808ns", 'time: invalid duration "9223372036854775808ns"'),
    ("-9223372036854775809ns", 'time: invalid duration "-9223372036854775809ns"'),
    ("9223372036854776us", 'time: invalid duration "9223372036854776us"'),
    ("3000000h", 'time: invalid duration "3000000h"'),
    ("9223372036854775.808us", 'time: invalid duration "9223372036854775.808us"'),
    ("9223372036854ms775us808ns", 'time: invalid duration "9223372036854ms775us808ns"'),
]


@pytest.mark.parametrize(("text", "message"), ERROR_CASES)
def test_parse_errors_match_go(text: str, message: str) -> None:
    with pytest.raises(DurationError) as caught:
        parse_duration_ns(text)
    assert str(caught.value) == message


FORMAT_CASES = [
    ("0s", 0),
    ("1ns", 1 * NS),
    ("1.1\u00b5s", 1100 * NS),
    ("2.2ms", 2200 * US),
    ("3.3s", 3300 * MS),
    ("4m5s", 4 * M + 5 * S),
    ("4m5.001s", 4 * M + 5001 * MS),
    ("5h6m7.001s", 5 * H + 6 * M + 7001 * MS),
    ("8m0.000000001s", 8 * M + 1 * NS),
    ("2562047h47m16.854775807s", (1 << 63) - 1),
    ("-2562047h47m16.854775808s", -(1 << 63)),
    ("1h0m0s", H),
    ("24h0m0s", 24 * H),
    ("-1.5s", -1500 * MS),
]


@pytest.mark.parametrize(("text", "nanoseconds"), FORMAT_CASES)
def test_format_matches_go(text: str, nanoseconds: int) -> None:
    assert format_duration_ns(nanoseconds) == text


def test_format_seconds_rounds_to_the_nanosecond() -> None:
    assert format_duration(3600.0) == "1h0m0s"
    assert format_duration(0.3) == "300ms"
    assert format_duration(1.5 * 3600) == "1h30m0s"


@given(st.integers(min_value=-(1 << 63), max_value=(1 << 63) - 1))
def test_format_then_parse_is_identity(nanoseconds: int) -> None:
    assert parse_duration_ns(format_duration_ns(nanoseconds)) == nanoseconds
