"""``resource.Quantity`` as Go's apimachinery writes it to JSON.

Why: a pod template's resource requests and limits are quantities, and upstream OME hashes the
bytes Go's ``json.Marshal`` gives them. Go does not echo what the user wrote: it parses the
string and writes the canonical form (``1000m`` is ``"1"``, ``0.5`` is ``"500m"``, ``1024Mi``
is ``"1Gi"``), except that a string the parser already finds canonical is kept verbatim, sign
and leading zeros included (``+100m``, ``1.500k``). This module is a port of
``ParseQuantity`` and ``CanonicalizeBytes`` of k8s.io/apimachinery v0.36
(``pkg/api/resource``), checked against Go's own output by the revision-hash golden test.

The value is kept exactly (a :class:`~fractions.Fraction`): Go's int64 fast path and its
``inf.Dec`` slow path give the same canonical digits for the same number, so one exact
representation serves both.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from fractions import Fraction
from typing import Final, Literal

Format = Literal["DecimalExponent", "BinarySI", "DecimalSI"]

MAX_INT64: Final = (1 << 63) - 1
_MAX_INT64_FACTORS: Final = 18
_NANO: Final = -9
_DECIMAL_SUFFIXES: Final[dict[str, int]] = {
    "n": -9,
    "u": -6,
    "m": -3,
    "": 0,
    "k": 3,
    "M": 6,
    "G": 9,
    "T": 12,
    "P": 15,
    "E": 18,
}
_BINARY_SUFFIXES: Final[dict[str, int]] = {
    "Ki": 10,
    "Mi": 20,
    "Gi": 30,
    "Ti": 40,
    "Pi": 50,
    "Ei": 60,
}
_DECIMAL_BY_EXPONENT: Final = {e: s for s, e in _DECIMAL_SUFFIXES.items()}
_BINARY_BY_EXPONENT: Final = {e: s for s, e in _BINARY_SUFFIXES.items()}
_SUFFIX_CHARS: Final = frozenset("eEinumkKMGTP")
_INT_RE: Final = re.compile(r"[+-]?[0-9]+")


class QuantityError(ValueError):
    """The string is not a quantity Go would parse (its ``ParseQuantity`` fails)."""


@dataclass(frozen=True, slots=True)
class Quantity:
    """A parsed quantity: its exact value, its format and Go's cached string, if any."""

    value: Fraction
    format: Format
    cached: str | None = None

    def marshal(self) -> str:
        """The JSON string body Go's ``MarshalJSON`` writes (without the quotes)."""
        if self.cached:
            return self.cached
        return canonical(self.value, self.format)

    @property
    def is_zero(self) -> bool:
        return self.value == 0


ZERO: Final = Quantity(Fraction(0), "DecimalExponent")
"""Go's zero ``Quantity{}`` (its ``MarshalJSON`` writes ``"0"``)."""


def _split(text: str) -> tuple[bool, str, str, str, str]:
    """``parseQuantityString``: (positive, value, num, denom, suffix)."""
    positive = True
    pos = 0
    end = len(text)
    if pos < end and text[0] in "+-":
        positive = text[0] != "-"
        pos += 1
    i = pos
    while True:  # leading zeros
        if i >= end:
            return positive, "0", "0", "", ""
        if text[i] != "0":
            break
        pos += 1
        i += 1
    i = pos
    while True:  # numerator
        if i >= end:
            return positive, text[0:end], text[pos:end], "", ""
        if not text[i].isascii() or not text[i].isdigit():
            num = text[pos:i]
            pos = i
            break
        i += 1
    if not num:
        num = "0"
    denom = ""
    if pos < end and text[pos] == ".":
        pos += 1
        i = pos
        while True:
            if i >= end:
                return positive, text[0:end], num, text[pos:end], ""
            if not text[i].isascii() or not text[i].isdigit():
                denom = text[pos:i]
                pos = i
                break
            i += 1
    value = text[0:pos]
    suffix_start = pos
    i = pos
    while True:
        if i >= end:
            return positive, value, num, denom, text[suffix_start:end]
        if text[i] not in _SUFFIX_CHARS:
            pos = i
            break
        i += 1
    if pos < end and text[pos] in "+-":
        pos += 1
    i = pos
    while True:
        if i >= end:
            return positive, value, num, denom, text[suffix_start:end]
        if not text[i].isascii() or not text[i].isdigit():
            break
        i += 1
    raise QuantityError(f"quantities must match the regular expression: {text!r}")


def _interpret(suffix: str) -> tuple[int, int, Format]:
    """(base, exponent, format) of a suffix, as Go's suffixer reads it."""
    if suffix in _DECIMAL_SUFFIXES:
        return 10, _DECIMAL_SUFFIXES[suffix], "DecimalSI"
    if suffix in _BINARY_SUFFIXES:
        return 2, _BINARY_SUFFIXES[suffix], "BinarySI"
    if len(suffix) > 1 and suffix[0] in "eE" and _INT_RE.fullmatch(suffix[1:]):
        parsed = int(suffix[1:])
        if -(1 << 63) <= parsed <= MAX_INT64:
            exponent = (parsed + (1 << 31)) % (1 << 32) - (1 << 31)  # Go's int32(parsed)
            return 10, exponent, "DecimalExponent"
    raise QuantityError(f"unable to parse quantity's suffix: {suffix!r}")


def parse(text: str) -> Quantity:
    """``resource.ParseQuantity``: raises :class:`QuantityError` where Go returns an error."""
    if not text:
        raise QuantityError("quantities must match the regular expression")
    if text == "0":
        return Quantity(Fraction(0), "DecimalSI", "0")
    positive, value, num, denom, suffix = _split(text)
    base, exponent, fmt = _interpret(suffix)

    precision = 0
    scale = 0
    mantissa = 1
    if fmt in ("DecimalExponent", "DecimalSI"):
        scale = exponent
        precision = _MAX_INT64_FACTORS - (len(num) + len(denom))
    elif exponent >= 0 and not denom:
        mantissa = 1 << exponent
        precision = 15 - len(num) - int(exponent * 3 / 10) - 1
    else:
        precision = -1

    if precision >= 0:
        scale -= len(denom)
        if scale >= _NANO:
            shifted = num + denom
            parsed = int(shifted)
            if parsed > MAX_INT64:
                raise QuantityError("quantity too large")
            result = parsed * mantissa
            if result <= MAX_INT64:
                if not positive:
                    result = -result
                amount = Fraction(result) * Fraction(10) ** scale
                cached: str | None = None
                if fmt == "BinarySI":
                    if exponent % 10 == 0 and parsed & 0x07 != 0:
                        cached = text
                elif scale % 3 == 0 and not shifted.endswith("000") and shifted[0] != "0":
                    cached = text
                return Quantity(amount, fmt, cached)

    try:
        exact = Fraction(value)
    except ValueError as err:
        raise QuantityError(f"unable to parse quantity's number: {value!r}") from err
    exact *= Fraction(base) ** exponent
    negative = exact < 0
    exact = abs(exact)
    if exact != 0:
        nanos = exact * 10**9
        whole = nanos.numerator // nanos.denominator
        if whole != nanos:
            whole += 1  # Go rounds a non-zero value up to the next nano
        exact = Fraction(whole, 10**9)
    if fmt == "BinarySI" and exact > MAX_INT64:
        exact = Fraction(MAX_INT64)
    if fmt == "BinarySI" and 0 < exact < 1:
        fmt = "DecimalSI"
    return Quantity(-exact if negative else exact, fmt)


def _strip(value: int, factor: int) -> tuple[int, int]:
    times = 0
    while value != 0 and value % factor == 0:
        value //= factor
        times += 1
    return value, times


def canonical(value: Fraction, fmt: Format) -> str:
    """``Quantity.CanonicalizeBytes`` of ``value`` in ``fmt``."""
    if value == 0:
        return "0"
    if fmt == "BinarySI":
        if -1024 < value < 1024 or value.denominator != 1:
            fmt = "DecimalSI"
        else:
            number, times = _strip(value.numerator, 1024)
            return f"{number}{_BINARY_BY_EXPONENT.get(times * 10, '')}"
    # value = numerator / denominator, the denominator a divisor of 10**9 (nano-rounded)
    exponent = 0
    scaled = value
    while scaled.denominator != 1:
        scaled *= 10
        exponent -= 1
    number, times = _strip(scaled.numerator, 10)
    exponent += times
    while exponent % 3 != 0:
        number *= 10
        exponent -= 1
    if fmt == "DecimalSI":
        return f"{number}{_DECIMAL_BY_EXPONENT.get(exponent, '')}"
    return f"{number}e{exponent}" if exponent else str(number)
