"""A JSON string as Go's ``encoding/json`` writes it.

Why a module of its own, outside :mod:`omed.api.gojson`: the audit ledger's document writes
its strings this way, and its readers (``kubectl ome migration history``) import the document
without the typed-struct encoder (its tables, ``decimal``, ``fractions``).

Invariant: :func:`go_string` of any ``str`` is a JSON string that decodes to the same text,
except lone surrogates, which Go replaces with U+FFFD as it does.
"""

from __future__ import annotations

from typing import Final

__all__ = ["go_string"]


def go_string(text: str) -> str:
    """A JSON string as Go writes it (HTML-safe, U+2028/9 escaped, lone surrogates U+FFFD)."""
    out = ['"']
    for ch in text:
        code = ord(ch)
        if ch in {'"', "\\"}:
            out.append("\\" + ch)
        elif code < 0x20 or ch in "<>&":
            out.append(_CONTROL.get(ch) or f"\\u{code:04x}")
        elif ch in "\u2028\u2029":
            out.append(f"\\u{code:04x}")
        elif 0xD800 <= code <= 0xDFFF:
            out.append("\\ufffd")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


_CONTROL: Final = {"\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t"}
