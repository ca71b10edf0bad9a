"""Go's ``strconv`` rules for the values of command-line flags, and Go's ``%q`` quoting.

Why: omed's flags are the flags of OME's Go manager. Deployments, charts and patches pass
values such as ``--leader-elect=T``, ``--webhook-port=0x24d5`` or ``--kube-api-qps=1e2``
that Go's ``flag`` package accepts, and errors quote the value as Go's ``%q`` does. Python's
``int()``, ``float()`` and ``bool`` parsing differ at the edges (``int("017", 0)`` fails,
``float(" 1")`` succeeds), so the rules live here, once.

Invariant: each parser accepts exactly the strings Go accepts and raises ``ValueError``
carrying Go's flag-package reason (``parse error`` or ``value out of range``) otherwise.
"""

from __future__ import annotations

import math

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


def _underscore_ok(text: str) -> bool:
    """Go's underscoreOK: underscores only between digits, or after a base prefix."""
    saw = "^"
    s = text
    if s and s[0] in "+-":
        s = s[1:]
    i = 0
    hexadecimal = False
    if len(s) >= 2 and s[0] == "0" and s[1].lower() in "box":
        i = 2
        saw = "0"
        hexadecimal = s[1].lower() == "x"
    while i < len(s):
        ch = s[i]
        if "0" <= ch <= "9" or (hexadecimal and "a" <= ch.lower() <= "f"):
            saw = "0"
        elif ch == "_":
            if saw != "0":
                return False
            saw = "_"
        else:
            if saw == "_":
                return False
            saw = "!"
        i += 1
    return saw != "_"


def _parse_uint_base0(text: str, limit: int) -> int:
    """``strconv.ParseUint(s, 0, 64)`` with the caller's upper bound for the range error."""
    if not text:
        raise ValueError(PARSE_ERROR)
    s = text
    base = 10
    if s[0] == "0":
        if len(s) >= 3 and s[1].lower() == "b":
            base, s = 2, s[2:]
        elif len(s) >= 3 and s[1].lower() == "o":
            base, s = 8, s[2:]
        elif len(s) >= 3 and s[1].lower() == "x":
            base, s = 16, s[2:]
        else:
            base, s = 8, s[1:]
    value = 0
    underscores = False
    for ch in s:
        if ch == "_":
            underscores = True
            continue
        if "0" <= ch <= "9":
            digit = ord(ch) - ord("0")
        elif "a" <= ch.lower() <= "z":
            digit = ord(ch.lower()) - ord("a") + 10
        else:
            raise ValueError(PARSE_ERROR)
        if digit >= base:
            raise ValueError(PARSE_ERROR)
        value = value * base + digit
        if value > limit:
            raise ValueError(RANGE_ERROR)
    if underscores and not _underscore_ok(text):
        raise ValueError(PARSE_ERROR)
    return value


def parse_go_int(text: str) -> int:
    """``strconv.ParseInt(s, 0, 64)``: decimal, ``0x``/``0o``/``0b``/leading-0 octal, ``_``."""
    if not text:
        raise ValueError(PARSE_ERROR)
    s = text
    negative = False
    if s[0] in "+-":
        negative = s[0] == "-"
        s = s[1:]
    limit = 1 << 63 if negative else (1 << 63) - 1
    value = _parse_uint_base0(s, limit)
    return -value if negative else value


_SPECIAL_FLOATS = {"inf": math.inf, "infinity": math.inf}


def parse_go_float(text: str) -> float:
    """``strconv.ParseFloat(s, 64)``: Go float literals, ``Inf``/``Infinity``/``NaN``."""
    if not text or text != text.strip():
        raise ValueError(PARSE_ERROR)
    s = text
    sign = 1.0
    unsigned = s
    if s[0] in "+-":
        sign = -1.0 if s[0] == "-" else 1.0
        unsigned = s[1:]
    lowered = unsigned.lower()
    if lowered in _SPECIAL_FLOATS:
        return sign * _SPECIAL_FLOATS[lowered]
    if lowered == "nan" and unsigned == s:
        return math.nan
    if "_" in unsigned and not _underscore_ok(unsigned):
        raise ValueError(PARSE_ERROR)
    plain = unsigned.replace("_", "")
    if not plain or plain[0] not in "0123456789.":
        raise ValueError(PARSE_ERROR)
    try:
        if plain[:2].lower() == "0x":
            # Go requires the binary exponent of a hexadecimal float.
            if "p" not in plain.lower():
                raise ValueError(PARSE_ERROR)
            value = float.fromhex(plain)
        else:
            if any(ch not in "0123456789.eE+-" for ch in plain):
                raise ValueError(PARSE_ERROR)
            value = float(plain)
    except (ValueError, OverflowError) as exc:
        if isinstance(exc, OverflowError):
            raise ValueError(RANGE_ERROR) from None
        raise ValueError(PARSE_ERROR) from None
    if math.isinf(value):
        raise ValueError(RANGE_ERROR)
    return sign * value


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
