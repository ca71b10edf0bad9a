"""The two ways the status codec refuses: a stored status it can't decode, rows it can't encode.

A decode failure stops management of one InferenceReplica and is shown to the user as the
``<reason>`` in ``per-Instance status cannot be decoded (<reason>)`` and as a preflight line
``- <reason>: <detail>``. So the reason is a closed vocabulary (:data:`DecodeReason`) that
tools and tests can match, and the detail says where the damage is in words.

Invariant: the decoder raises :class:`DecodeError` and nothing else, whatever it is given.
:class:`EncodeError` is a programming error of the caller (rows that are not valid DenseV1
rows) and is a :class:`ValueError`.
"""

from __future__ import annotations

from typing import Final, Literal, get_args

DecodeReason = Literal[
    "cardinality_limit",
    "coverage",
    "range_syntax",
    "version",
    "type",
    "string_ref",
    "class_ref",
    "value",
    "row_shape",
    "index",
    "encoding",
    "bounds",
    "size",
]
"""Why a stored status can't be decoded; docs/status-encoding.md defines each reason."""

DECODE_REASONS: Final[tuple[DecodeReason, ...]] = get_args(DecodeReason)


class DecodeError(Exception):
    """A stored status that can't be decoded, with a reason from :data:`DecodeReason`."""

    reason: DecodeReason
    detail: str

    def __init__(self, reason: DecodeReason, detail: str) -> None:
        super().__init__(reason, detail)
        self.reason = reason
        self.detail = detail

    def __str__(self) -> str:
        return f"{self.reason}: {self.detail}"


class EncodeError(ValueError):
    """Rows that are not valid DenseV1 rows, so no encoding can store them exactly.

    ``reason`` is what a decoder would say of the same rows stored as a list: ``row_shape`` or
    ``value``.
    """

    reason: DecodeReason

    def __init__(self, detail: str, *, reason: DecodeReason = "row_shape") -> None:
        super().__init__(detail)
        self.reason = reason


def describe(value: object) -> str:
    """A short, safe description of an input value for an error detail.

    Safe: never ``repr`` of a container (a deeply nested one would overflow the stack) or of a
    huge integer (whose ``str`` raises past 4300 digits).
    """
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value) if value.bit_length() <= 64 else "a number too large"
    if isinstance(value, float):
        return f"the number {value!r}"
    if isinstance(value, str):
        return repr(value if len(value) <= 40 else value[:37] + "...")
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list | tuple):
        return "a list"
    return type(value).__name__


def type_name(value: object, *, mapping: str = "an object") -> str:
    """The JSON type of an input value, with its article: ``a string``, ``null``. A dict is
    ``mapping`` (YAML documents say ``a mapping``)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, dict):
        return mapping
    if isinstance(value, list | tuple):
        return "a list"
    return type(value).__name__
