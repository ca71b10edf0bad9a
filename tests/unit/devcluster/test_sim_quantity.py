"""Quantities and durations parse exactly, the way the API server and Go read them."""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from omed.devcluster.sim.quantity import (
    QuantityError,
    format_duration,
    milli,
    parse_duration,
    parse_quantity,
)


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("1", Fraction(1)),
        ("500m", Fraction(1, 2)),
        ("0.5", Fraction(1, 2)),
        ("16Gi", Fraction(16 * 2**30)),
        ("512Mi", Fraction(512 * 2**20)),
        ("2Ti", Fraction(2 * 2**40)),
        ("1k", Fraction(1000)),
        ("1M", Fraction(10**6)),
        ("1e3", Fraction(1000)),
        ("1E3", Fraction(1000)),
        ("1E", Fraction(10**18)),
        ("100n", Fraction(1, 10**7)),
        ("1.5Gi", Fraction(3 * 2**29)),
        (".5", Fraction(1, 2)),
        ("-1", Fraction(-1)),
        (8, Fraction(8)),
    ],
)
def test_parse_quantity(text: str | int, value: Fraction) -> None:
    assert parse_quantity(text) == value


@pytest.mark.parametrize("text", ["", "abc", "1Gb", "1.2.3", "Gi", "1 Gi", "1e"])
def test_parse_quantity_rejects_garbage(text: str) -> None:
    with pytest.raises(QuantityError):
        parse_quantity(text)


@pytest.mark.parametrize(
    ("text", "value"),
    [("1", 1000), ("500m", 500), ("0.1", 100), ("1n", 1), ("16Gi", 16 * 2**30 * 1000), ("0", 0)],
)
def test_milli_rounds_up(text: str, value: int) -> None:
    assert milli(text) == value


def test_milli_sums_do_not_drift() -> None:
    assert milli("0.1") + milli("0.2") == milli("300m")


@given(st.integers(min_value=0, max_value=10**6))
def test_milli_of_millicores_is_exact(n: int) -> None:
    assert milli(f"{n}m") == n


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("2s", 2.0), ("500ms", 0.5), ("1m30s", 90.0), ("1h", 3600.0), ("1.5", 1.5), ("0", 0.0)],
)
def test_parse_duration(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "2x", "s", "-1s", "-3", "1s garbage"])
def test_parse_duration_rejects_garbage(text: str) -> None:
    with pytest.raises(ValueError):
        parse_duration(text)


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(0.2, "200ms"), (10, "10s"), (80, "1m20s"), (300, "5m0s"), (3725, "1h2m5s"), (0, "0s")],
)
def test_format_duration_like_go(seconds: float, text: str) -> None:
    assert format_duration(seconds) == text
