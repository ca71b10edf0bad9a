"""Duration fields of the API (``instanceReadyTimeout``, ``updateRetry.initialDelay`` and
``maxDelay``): read as Go reads them, and refused beyond Go's longest ``time.Duration``, both by
the parser and by the models that read stored objects."""

from __future__ import annotations

import datetime as dt
import time
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from omed.api.base import (
    DURATION_PATTERN,
    DURATION_TOO_LONG,
    MAX_DURATION,
    MAX_DURATION_NS,
    DurationTooLong,
    parse_duration,
    parse_duration_ns,
)
from omed.api.inferencereplica import InferenceReplica
from omed.api.lifecycle import Lifecycle
from omed.config import duration as go

AT_LIMIT = [
    MAX_DURATION,
    "9223372036854775807ns",
    "9223372036854775.807us",
    "9223372036s854ms775us807ns",
    "2562047h47m16.8547758079s",  # Go keeps nanoseconds: the tenth digit is cut, not rounded
    "00000000000000000000002562047h",  # leading zeros are no overflow for Go either
]
JUST_OVER = [
    "2562047h47m16.854775808s",
    "9223372036854775808ns",
    "2562048h",
    "2562047h47m17s",
    "9223372036854775807ns1ns",
    "153722867m17s",
]
ABSURD = [
    "99999999999999999999999h",
    "18446744073709551616ns",  # 2**64: wraps to 0 in an unsigned 64-bit sum
    "1" + "0" * 5000 + "h",  # more digits than Python converts to an int by default
    "1000000h" * 3000,  # each part fits, the sum does not
    "0." + "9" * 5000 + "h" + "9999999999999999999m",
]


def test_the_limit_is_go_s_longest_duration() -> None:
    assert MAX_DURATION_NS == 2**63 - 1
    assert go.format_duration_ns(MAX_DURATION_NS) == MAX_DURATION


@pytest.mark.parametrize("text", AT_LIMIT)
def test_durations_at_the_limit_parse(text: str) -> None:
    assert parse_duration_ns(text) == go.parse_duration_ns(text)
    assert parse_duration_ns(text) in {MAX_DURATION_NS, 2562047 * 3600 * 10**9}
    assert parse_duration(text).total_seconds() == pytest.approx(parse_duration_ns(text) / 1e9)


@pytest.mark.parametrize("text", JUST_OVER + ABSURD)
def test_durations_beyond_the_limit_are_too_long(text: str) -> None:
    with pytest.raises(DurationTooLong, match=f"longer than {MAX_DURATION}"):
        parse_duration_ns(text)
    with pytest.raises(DurationTooLong):
        parse_duration(text)
    with pytest.raises(go.DurationError):  # and Go refuses them too
        go.parse_duration_ns(text)


def test_a_huge_number_is_refused_quickly() -> None:
    started = time.perf_counter()
    with pytest.raises(DurationTooLong):
        parse_duration_ns("9" * 1_000_000 + "ns")
    assert time.perf_counter() - started < 1.0


def test_too_long_is_a_value_error() -> None:
    """Callers that catch ValueError for a bad duration catch this one too."""
    assert issubclass(DurationTooLong, ValueError)


@pytest.mark.parametrize(
    ("text", "nanoseconds"),
    [("0", 0), ("90s", 90 * 10**9), ("1.5h", 5400 * 10**9), ("250ms", 250 * 10**6), ("7ns", 7)],
)
def test_parse_duration_ns(text: str, nanoseconds: int) -> None:
    assert parse_duration_ns(text) == nanoseconds


def test_parse_duration_is_a_timedelta_to_the_microsecond() -> None:
    assert parse_duration("1h30m") == dt.timedelta(hours=1, minutes=30)
    assert parse_duration("1500ns") == dt.timedelta(microseconds=2)  # rounded half to even
    assert parse_duration(MAX_DURATION) == dt.timedelta(microseconds=9223372036854776)


@pytest.mark.parametrize("text", ["", "5", "-5m", "+5m", ".5s", "5.s", "1d", "5 m", "1μs"])
def test_what_the_crd_pattern_refuses_is_invalid_not_too_long(text: str) -> None:
    with pytest.raises(ValueError, match="invalid duration") as caught:
        parse_duration_ns(text)
    assert not isinstance(caught.value, DurationTooLong)


# -- Agreement with Go ----------------------------------------------------------------------

UNIT_NS = {
    "ns": 1,
    "us": 10**3,
    "µs": 10**3,
    "ms": 10**6,
    "s": 10**9,
    "m": 60 * 10**9,
    "h": 3600 * 10**9,
}
UNITS = st.sampled_from(sorted(UNIT_NS))


@st.composite
def crd_durations(draw: st.DrawFn) -> str:
    """Strings the CRD's pattern admits, with numbers around Go's limit for every unit."""
    if draw(st.booleans()):
        return "0"
    parts = []
    for _ in range(draw(st.integers(1, 4))):
        unit = draw(UNITS)
        whole = draw(
            st.integers(0, 10**25)
            | st.sampled_from([0, 1, 59, 2562047, 153722867, 9223372036, 9223372036854775])
        )
        if draw(st.booleans()):  # up to Go's limit in this unit
            whole = draw(st.integers(0, 2**63)) // UNIT_NS[unit]
        fraction = draw(st.none() | st.text("0123456789", min_size=1, max_size=25))
        parts.append(f"{whole}{'' if fraction is None else '.' + fraction}{unit}")
    return "".join(parts)


def _go(text: str) -> int | None:
    try:
        return go.parse_duration_ns(text)
    except go.DurationError:
        return None


def _ours(text: str) -> int | None:
    try:
        return parse_duration_ns(text)
    except DurationTooLong:
        return None


@given(crd_durations())
def test_agrees_with_go_on_crd_durations(text: str) -> None:
    """omed.config.duration is Go's time.ParseDuration, checked against Go's own test cases;
    on every string the CRD admits, the API's parser gives the same value or refuses it as
    too long exactly when Go refuses it."""
    assert _ours(text) == _go(text)


@given(st.from_regex(DURATION_PATTERN, fullmatch=True))
def test_agrees_with_go_on_any_string_of_the_pattern(text: str) -> None:
    assert _ours(text) == _go(text)


# -- Models: stored objects -----------------------------------------------------------------

FIELDS = ["instanceReadyTimeout", "updateRetry.initialDelay", "updateRetry.maxDelay"]


def lifecycle_with(field: str, value: str) -> dict[str, Any]:
    """``{"updateRetry": {"maxDelay": value}}`` for ``updateRetry.maxDelay``."""
    outer, _, inner = field.rpartition(".")
    return {outer: {inner: value}} if outer else {inner: value}


@pytest.mark.parametrize("field", FIELDS)
@pytest.mark.parametrize("value", [MAX_DURATION, "15m"])
def test_models_read_durations_up_to_the_limit(field: str, value: str) -> None:
    model = Lifecycle.model_validate(lifecycle_with(field, value))
    assert model.to_dict() == lifecycle_with(field, value)


@pytest.mark.parametrize("field", FIELDS)
@pytest.mark.parametrize("value", [JUST_OVER[0], ABSURD[0]])
def test_models_refuse_durations_beyond_the_limit(field: str, value: str) -> None:
    with pytest.raises(ValidationError) as caught:
        Lifecycle.model_validate(lifecycle_with(field, value))
    (error,) = caught.value.errors()
    assert ".".join(str(part) for part in error["loc"]) == field
    assert error["type"] == "duration_too_long"
    assert error["msg"] == DURATION_TOO_LONG


def test_a_stored_replica_with_a_huge_timeout_is_a_validation_error() -> None:
    """The InferenceReplica controller reads stored objects with this model and turns a
    ValidationError into a Warning event on the object, not a crash of its reconcile."""
    stored = {
        "apiVersion": "ome.io/v1beta1",
        "kind": "InferenceReplica",
        "metadata": {"name": "chat-engine", "namespace": "prod", "uid": "u-1"},
        "spec": {
            "component": "engine",
            "replicas": 1,
            "runners": [{"name": "default", "template": {}}],
            "lifecycle": {"instanceReadyTimeout": "99999999999999999999999h"},
        },
    }
    with pytest.raises(ValidationError) as caught:
        InferenceReplica.model_validate(stored)
    assert "spec.lifecycle.instanceReadyTimeout" in str(caught.value)
    assert DURATION_TOO_LONG in str(caught.value)


def test_every_duration_short_enough_to_skip_the_range_check_is_in_range() -> None:
    # The models skip parsing a duration of at most _ALWAYS_IN_RANGE characters (the webhook
    # checks every duration of a spec on every write): every well-formed one that short must
    # be within Go's range. Digits 0 and 9 and the units up to hours span the extremes.
    import itertools
    import re

    from omed.api import base

    pattern = re.compile(DURATION_PATTERN)
    longest = 0
    for length in range(1, base._ALWAYS_IN_RANGE + 1):
        for letters in itertools.product("09.hms", repeat=length):
            text = "".join(letters)
            if pattern.fullmatch(text):
                longest = max(longest, parse_duration_ns(text))
    assert longest == 999_999 * 3600 * 10**9  # "999999h"
    assert longest <= MAX_DURATION_NS
    # One character more reaches past it, so the bound is as long as it can be.
    with pytest.raises(DurationTooLong):
        parse_duration_ns("9" * base._ALWAYS_IN_RANGE + "h")
