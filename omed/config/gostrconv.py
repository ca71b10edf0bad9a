"""Go's ``strconv`` rules for the values of command-line flags, and Go's ``%q`` quoting.

Why: omed's flags are the flags of OME's Go manager. Deployments, charts and patches pass
values such as ``--leader-elect=T``, ``--webhook-port=0x24d5`` or ``--kube-api-qps=1e2``
that Go's ``flag`` package accepts, and errors quote the value as Go's ``%q`` does. Python's
``int()`` and ``float()`` read a different grammar (``int("017", 0)`` fails, ``float(" 1")``
and ``int()`` of Arabic-Indic digits succeed), so Go's grammar is checked here: an integer's
digits by Go's own left-to-right rules, a float literal by a regular expression. ``int()``
and ``float()`` only compute the value of a string Go accepts.

Invariant: each parser accepts exactly the strings Go accepts and raises ``ValueError``
carrying Go's flag-package reason (``parse error`` or ``value out of range``) otherwise.
"""

from __future__ import annotations

import math
import re

__all__ = [
    "PARSE_ERROR",
    "RANGE_ERROR",
    "go_quote",
    "parse_go_bool",
    "parse_go_float",
    "parse_go_int",
]

PARSE_ERROR = "parse error"
RANGE_ERROR = "value out of range"

_TRUE = frozenset({"1", "t", "T", "TRUE", "true", "True"})
_FALSE = frozenset({"0", "f", "F", "FALSE", "false", "False"})


def parse_go_bool(text: str) -> bool:
    """``strconv.ParseBool``: 1, t, T, TRUE, true, True and 0, f, F, FALSE, false, False."""
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise ValueError(PARSE_ERROR)


_PREFIXES = {"b": 2, "o": 8, "x": 16}
_BASE_DIGITS = {2: "01_", 8: "01234567_", 10: "0123456789_", 16: "0123456789abcdefABCDEF_"}


def parse_go_int(text: str) -> int:
    """``strconv.ParseInt(s, 0, 64)``: decimal, ``0x``/``0o``/``0b``/leading-0 octal, ``_``.

    Go reads the digits left to right, so digits that pass 2**64 - 1 are out of range even
    when a bad character follows them; underscores are checked last (Go's underscoreOK).
    """
    negative = text[:1] == "-"
    s = text[1:] if text[:1] in ("+", "-") else text
    if len(s) >= 3 and s[0] == "0" and s[1].lower() in _PREFIXES:
        base, digits = _PREFIXES[s[1].lower()], s[2:]
    elif s[:1] == "0":
        base, digits = 8, s[1:]
    else:
        base, digits = 10, s
    rest = digits.lstrip(_BASE_DIGITS[base])
    significant = digits[: len(digits) - len(rest)].replace("_", "").lstrip("0")
    value = int(significant or "0", base) if len(significant) <= 64 else 1 << 64
    if value >> 64:
        raise ValueError(RANGE_ERROR)
    misplaced = "__" in digits or digits.endswith("_") or (base == 10 and digits[:1] == "_")
    if not s or rest or misplaced:
        raise ValueError(PARSE_ERROR)
    if value > (1 << 63 if negative else (1 << 63) - 1):
        raise ValueError(RANGE_ERROR)
    return -value if negative else value


def _digits(digit: str) -> str:
    """One or more digits; an underscore only between two of them (Go's underscoreOK)."""
    return f"{digit}(?:_?{digit})*"


_DEC, _HEX = _digits("[0-9]"), _digits("[0-9a-fA-F]")
# strconv.ParseFloat(s, 64): decimal with an optional exponent, hexadecimal with the binary
# exponent Go requires (an underscore may follow its 0x), or Inf/Infinity (signed) and NaN
# (unsigned) in any case. Go checks the whole literal before it converts it.
_GO_FLOAT = re.compile(
    rf"[+-]?(?:(?:{_DEC}(?:\.(?:{_DEC})?)?|\.{_DEC})(?:[eE][+-]?{_DEC})?"
    rf"|0[xX](?:_?{_HEX}(?:\.(?:{_HEX})?)?|\.{_HEX})[pP][+-]?{_DEC}"
    r"|(?i:inf|infinity))|(?i:nan)"
)


def parse_go_float(text: str) -> float:
    """``strconv.ParseFloat(s, 64)``: Go float literals, ``Inf``/``Infinity``/``NaN``."""
    if not _GO_FLOAT.fullmatch(text):
        raise ValueError(PARSE_ERROR)
    plain = text.replace("_", "")
    try:
        value = float.fromhex(plain) if "x" in plain.lower() else float(plain)
    except OverflowError:
        raise ValueError(RANGE_ERROR) from None
    if math.isinf(value) and "inf" not in plain.lower():
        raise ValueError(RANGE_ERROR)
    return value


_GO_ESCAPES = {
    "\a": "\\a",
    "\b": "\\b",
    "\f": "\\f",
    "\n": "\\n",
    "\r": "\\r",
    "\t": "\\t",
    "\v": "\\v",
    "\\": "\\\\",
    '"': '\\"',
}


def go_quote(text: str) -> str:
    """Go's ``%q`` of a string: double quotes, Go escapes, printable Unicode kept as is."""
    out = ['"']
    for ch in text:
        escaped = _GO_ESCAPES.get(ch)
        if escaped is not None:
            out.append(escaped)
        elif ch.isprintable():
            out.append(ch)
        elif ord(ch) < 0x80:
            out.append(f"\\x{ord(ch):02x}")
        elif ord(ch) < 0x10000:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(f"\\U{ord(ch):08x}")
    out.append('"')
    return "".join(out)
