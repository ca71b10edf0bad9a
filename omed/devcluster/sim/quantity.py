"""Kubernetes resource quantities ("500m", "16Gi", "1", "1e3") and Go-style durations.

The scheduler compares sums of container requests with node allocatable amounts. Doing that
in floats would let ``0.1 + 0.2`` CPU exceed ``300m``; so quantities are parsed exactly (as
:class:`fractions.Fraction`) and compared as integer *milli-units*, rounded up the way the
API server rounds a request it cannot represent (``MilliValue`` rounds away from zero).

Durations in the simulator's annotations use Go's ``time.ParseDuration`` spelling
(``2s``, ``500ms``, ``1m30s``); a bare number means seconds.
"""

from __future__ import annotations

import math
import re
from fractions import Fraction

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 1000),
    "": Fraction(1),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
}
_QUANTITY = re.compile(r"^([+-]?)(\d+(?:\.\d*)?|\.\d+)([a-zA-Z]*|[eE][+-]?\d+)$")
_EXPONENT = re.compile(r"^[eE]([+-]?\d+)$")


class QuantityError(ValueError):
    """A string that is not a Kubernetes quantity."""


def parse_quantity(value: str | int | float) -> Fraction:
    """The exact value of a quantity: ``"500m"`` -> 1/2, ``"16Gi"`` -> 17179869184."""
    if isinstance(value, bool):
        raise QuantityError(f"not a quantity: {value!r}")
    if isinstance(value, int):
        return Fraction(value)
    if isinstance(value, float):
        return Fraction(str(value))
    match = _QUANTITY.match(value.strip())
    if not match:
        raise QuantityError(f"not a quantity: {value!r}")
    sign, number, suffix = match.groups()
    amount = Fraction(number)
    if sign == "-":
        amount = -amount
    if suffix in _BINARY:
        return amount * _BINARY[suffix]
    if suffix in _DECIMAL:
        return amount * _DECIMAL[suffix]
    exponent = _EXPONENT.match(suffix)
    if exponent:
        return amount * Fraction(10) ** int(exponent.group(1))
    raise QuantityError(f"not a quantity: {value!r} (unknown suffix {suffix!r})")


def milli(value: str | int | float) -> int:
    """A quantity in integer milli-units, rounded away from zero (``"1"`` -> 1000)."""
    amount = parse_quantity(value) * 1000
    return math.ceil(amount) if amount >= 0 else math.floor(amount)


_DURATION_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)")
_UNIT_SECONDS = {
    "ns": 1e-9,
    "us": 1e-6,
    "µs": 1e-6,
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
}


def parse_duration(value: str | float) -> float:
    """Seconds in a Go duration (``"1m30s"`` -> 90.0); a bare number is seconds."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        if value < 0:
            raise ValueError(f"negative duration: {value!r}")
        return float(value)
    text = str(value).strip()
    try:
        seconds = float(text)
    except ValueError:
        pass
    else:
        if seconds < 0 or math.isnan(seconds):
            raise ValueError(f"not a duration: {value!r}")
        return seconds
    if not text or _DURATION_PART.sub("", text):
        raise ValueError(f"not a duration: {value!r}")
    return sum(float(n) * _UNIT_SECONDS[u] for n, u in _DURATION_PART.findall(text))


def format_duration(seconds: float) -> str:
    """Go's ``time.Duration.String`` for the values the kubelet prints: ``200ms``, ``1m20s``."""
    if seconds <= 0:
        return "0s"
    if seconds < 1:
        ms = round(seconds * 1000, 3)
        return f"{ms:g}ms"
    whole_minutes, rest = divmod(round(seconds, 3), 60)
    hours, minutes = divmod(int(whole_minutes), 60)
    text = f"{rest:g}s"
    if hours:
        return f"{hours}h{minutes}m{text}"
    if minutes:
        return f"{minutes}m{text}"
    return text
