"""Go duration syntax: ``30s``, ``72h``, ``1m30s``, ``1.5h``, ``300ms``, ``0``.

Why: every duration a user writes for omed (flags such as ``--config-cache-ttl=30s`` and
ConfigMap values such as ``"scaleDownRequeueInterval": "5s"``) was written for OME's Go
manager, whose charts and docs use Go's ``time.ParseDuration`` syntax. omed must accept
exactly the same strings and refuse exactly the same strings, with the same error text,
and print durations the way Go's ``Duration.String`` does (``1h0m0s``), because the error
messages users match contain such strings.

Invariant: :func:`parse_duration_ns` agrees with Go's ``time.ParseDuration`` on every input
(value or error message), computed in integer nanoseconds like Go, so ``1.5h`` and
``90m`` are the same value and no float rounding creeps in before the final conversion.
:func:`format_duration_ns` agrees with Go's ``time.Duration.String``.
"""

from __future__ import annotations

__all__ = [
    "DurationError",
    "format_duration",
    "format_duration_ns",
    "parse_duration",
    "parse_duration_ns",
]

_NANOSECOND = 1
_MICROSECOND = 1000 * _NANOSECOND
_MILLISECOND = 1000 * _MICROSECOND
_SECOND = 1000 * _MILLISECOND
_MINUTE = 60 * _SECOND
_HOUR = 60 * _MINUTE

_UNITS: dict[str, int] = {
    "ns": _NANOSECOND,
    "us": _MICROSECOND,
    "\u00b5s": _MICROSECOND,  # micro sign
    "\u03bcs": _MICROSECOND,  # Greek small letter mu
    "ms": _MILLISECOND,
    "s": _SECOND,
    "m": _MINUTE,
    "h": _HOUR,
}

_MAX_INT64 = (1 << 63) - 1
_TWO_63 = 1 << 63


class DurationError(ValueError):
    """A string that Go's ``time.ParseDuration`` refuses; ``str()`` is Go's message."""


def _go_time_quote(text: str) -> str:
    """Go's ``time.quote``: like %q, but escapes non-ASCII and control bytes as ``\\xNN``."""
    out = ['"']
    for ch in text:
        if ch < " " or ord(ch) >= 0x80:
            out.extend(f"\\x{byte:02x}" for byte in ch.encode("utf-8", "surrogatepass"))
        else:
            if ch in ('"', "\\"):
                out.append("\\")
            out.append(ch)
    out.append('"')
    return "".join(out)


def _invalid(orig: str) -> DurationError:
    return DurationError(f"time: invalid duration {_go_time_quote(orig)}")


def _is_digit(ch: str) -> bool:
    return "0" <= ch <= "9"


def parse_duration_ns(text: str) -> int:
    """Parse a Go duration into integer nanoseconds, or raise :class:`DurationError`.

    A duration is an optionally signed sequence of decimal numbers, each with an optional
    fraction and a unit (``ns``, ``us``/``µs``, ``ms``, ``s``, ``m``, ``h``); ``0`` alone
    needs no unit. Values beyond Go's int64 nanoseconds (about 292 years) are refused.
    """
    orig = text
    s = text
    neg = False
    if s and s[0] in "+-":
        neg = s[0] == "-"
        s = s[1:]
    if s == "0":
        return 0
    if not s:
        raise _invalid(orig)
    total = 0
    while s:
        if not (s[0] == "." or _is_digit(s[0])):
            raise _invalid(orig)
        # Integer part, with Go's overflow rule for leadingInt.
        i = 0
        whole = 0
        while i < len(s) and _is_digit(s[i]):
            if whole > _TWO_63 // 10:
                raise _invalid(orig)
            whole = whole * 10 + (ord(s[i]) - ord("0"))
            if whole > _TWO_63:
                raise _invalid(orig)
            i += 1
        pre = i > 0
        s = s[i:]
        # Fraction part: Go keeps accumulating digits until they would overflow, then
        # ignores the rest (leadingFraction).
        frac = 0
        scale = 1.0
        post = False
        if s and s[0] == ".":
            s = s[1:]
            j = 0
            overflow = False
            while j < len(s) and _is_digit(s[j]):
                if not overflow:
                    if frac > _MAX_INT64 // 10:
                        overflow = True
                    else:
                        candidate = frac * 10 + (ord(s[j]) - ord("0"))
                        if candidate > _TWO_63:
                            overflow = True
                        else:
                            frac = candidate
                            scale *= 10
                j += 1
            post = j > 0
            s = s[j:]
        if not pre and not post:
            raise _invalid(orig)
        # Unit: everything up to the next digit or dot.
        k = 0
        while k < len(s) and not (s[k] == "." or _is_digit(s[k])):
            k += 1
        if k == 0:
            raise DurationError(f"time: missing unit in duration {_go_time_quote(orig)}")
        unit_name = s[:k]
        s = s[k:]
        unit = _UNITS.get(unit_name)
        if unit is None:
            raise DurationError(
                f"time: unknown unit {_go_time_quote(unit_name)} in duration {_go_time_quote(orig)}"
            )
        if whole > _TWO_63 // unit:
            raise _invalid(orig)
        value = whole * unit
        if frac > 0:
            # Go converts through float64 here too: nanosecond-exact for every unit up to h.
            value += int(float(frac) * (float(unit) / scale))
            if value > _TWO_63:
                raise _invalid(orig)
        total += value
        if total > _TWO_63:
            raise _invalid(orig)
    if neg:
        return -total
    if total > _MAX_INT64:
        raise _invalid(orig)
    return total


def parse_duration(text: str) -> float:
    """Parse a Go duration into seconds (``"1m30s"`` -> ``90.0``); see :func:`parse_duration_ns`."""
    return parse_duration_ns(text) / _SECOND


def _fmt_frac(value: int, prec: int) -> tuple[str, int]:
    """Go's fmtFrac: the fraction ``value % 10**prec`` without trailing zeros, and the rest."""
    digits: list[str] = []
    printed = False
    for _ in range(prec):
        digit = value % 10
        printed = printed or digit != 0
        if printed:
            digits.append(str(digit))
        value //= 10
    if printed:
        return "." + "".join(reversed(digits)), value
    return "", value


def format_duration_ns(nanoseconds: int) -> str:
    """Go's ``time.Duration.String``: ``1h0m0s``, ``1m30s``, ``1.5s``, ``300ms``, ``0s``."""
    neg = nanoseconds < 0
    u = -nanoseconds if neg else nanoseconds
    if u < _SECOND:
        if u == 0:
            return "0s"
        if u < _MICROSECOND:
            unit, prec = "ns", 0
        elif u < _MILLISECOND:
            unit, prec = "\u00b5s", 3
        else:
            unit, prec = "ms", 6
        frac, rest = _fmt_frac(u, prec)
        body = f"{rest}{frac}{unit}"
    else:
        frac, rest = _fmt_frac(u, 9)
        body = f"{rest % 60}{frac}s"
        rest //= 60
        if rest > 0:
            body = f"{rest % 60}m{body}"
            rest //= 60
            if rest > 0:
                body = f"{rest}h{body}"
    return f"-{body}" if neg else body


def format_duration(seconds: float) -> str:
    """Go's ``Duration.String`` of a duration given in seconds, rounded to the nanosecond."""
    return format_duration_ns(round(seconds * _SECOND))
