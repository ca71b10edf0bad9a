"""Go's strconv rules for flag values, and Go's %q."""

from __future__ import annotations

import math

import pytest

from omed.config.gostrconv import go_quote, parse_go_bool, parse_go_float, parse_go_int


@pytest.mark.parametrize("text", ["1", "t", "T", "TRUE", "true", "True"])
def test_bool_true_set(text: str) -> None:
    assert parse_go_bool(text) is True


@pytest.mark.parametrize("text", ["0", "f", "F", "FALSE", "false", "False"])
def test_bool_false_set(text: str) -> None:
    assert parse_go_bool(text) is False


@pytest.mark.parametrize("text", ["", "yes", "no", "tRUE", "2", " true", "on"])
def test_bool_rejects_the_rest(text: str) -> None:
    with pytest.raises(ValueError, match=r"^parse error$"):
        parse_go_bool(text)


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("0", 0),
        ("9443", 9443),
        ("+5", 5),
        ("-5", -5),
        ("017", 15),  # leading 0 is octal in Go
        ("0o17", 15),
        ("0x1F", 31),
        ("0b101", 5),
        ("1_000", 1000),
        ("0x_1F", 31),
        ("9223372036854775807", (1 << 63) - 1),
        ("-9223372036854775808", -(1 << 63)),
    ],
)
def test_int_base0(text: str, value: int) -> None:
    assert parse_go_int(text) == value


@pytest.mark.parametrize(
    "text", ["", "x", "1.5", " 1", "1 ", "09", "0x", "1__0", "_1", "1_", "++1"]
)
def test_int_parse_errors(text: str) -> None:
    with pytest.raises(ValueError, match=r"^parse error$"):
        parse_go_int(text)


@pytest.mark.parametrize("text", ["9223372036854775808", "-9223372036854775809"])
def test_int_range_errors(text: str) -> None:
    with pytest.raises(ValueError, match=r"^value out of range$"):
        parse_go_int(text)


@pytest.mark.parametrize(
    ("text", "value"),
    [("20", 20.0), ("1e2", 100.0), ("0.5", 0.5), (".5", 0.5), ("5.", 5.0), ("-1.5", -1.5)],
)
def test_float(text: str, value: float) -> None:
    assert parse_go_float(text) == value


def test_float_special_values() -> None:
    assert parse_go_float("0x1p-2") == 0.25
    assert parse_go_float("Inf") == math.inf
    assert parse_go_float("-infinity") == -math.inf
    assert math.isnan(parse_go_float("NaN"))


@pytest.mark.parametrize("text", ["", "abc", " 1", "1 ", "0x10", "1e", "--1", "1,5"])
def test_float_parse_errors(text: str) -> None:
    with pytest.raises(ValueError, match=r"^parse error$"):
        parse_go_float(text)


def test_float_range_error() -> None:
    with pytest.raises(ValueError, match=r"^value out of range$"):
        parse_go_float("1e400")


@pytest.mark.parametrize(
    ("text", "quoted"),
    [
        ("x", '"x"'),
        ('a"b', '"a\\"b"'),
        ("a\\b", '"a\\\\b"'),
        ("tab\there", '"tab\\there"'),
        ("\x00", '"\\x00"'),
        ("caf\u00e9", '"caf\u00e9"'),
    ],
)
def test_go_quote(text: str, quoted: str) -> None:
    assert go_quote(text) == quoted
