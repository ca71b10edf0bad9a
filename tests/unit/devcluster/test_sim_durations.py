"""Durations parse and print the way Go reads and writes them."""

from __future__ import annotations

import pytest

from omed_devcluster.sim.durations import format_duration, parse_duration


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
