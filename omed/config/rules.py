"""Field rules for inferenceservice-config entries, each with its one error message.

Why: a bad setting stops the manager with an error that names the value and the rule,
such as ``validate lifecycle.scaleDownPodBatchSize: invalid
lifecycle.scaleDownPodBatchSize "101%" must be between 1% and 100%``. pydantic's own
messages don't have that shape, so every field of every entry model is validated by one of
these rules (attached with ``PlainValidator``), and pydantic only carries the result.

Invariant: a rule returns the typed value or raises :class:`FieldRuleError`, whose text is
``validate <path>: <detail>`` with the value rendered as JSON (strings in Go's ``%q``).
``null`` always means "unset" and yields the rule's default. JSON is typed strictly:
``true`` is not a count, ``5.0`` is not an integer, ``"100"`` is not a number.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final, TypeVar

import orjson
from pydantic import BaseModel, ConfigDict, ValidationError

from omed.api.base import json_type
from omed.config.duration import DurationError, parse_duration_ns
from omed.config.gostrconv import go_quote

__all__ = [
    "CONFIGMAP_NAME",
    "ENTRY_MODEL_CONFIG",
    "BatchSize",
    "EntryError",
    "FieldRuleError",
    "Percent",
    "batch_size_rule",
    "bool_rule",
    "choice_rule",
    "decode_object",
    "int_rule",
    "json_type",
    "object_rule",
    "positive_duration_rule",
    "render",
    "resolve_budget",
    "string_list_rule",
    "string_rule",
    "validate_entry",
]

T = TypeVar("T")
M = TypeVar("M", bound=BaseModel)

CONFIGMAP_NAME = "inferenceservice-config"

ENTRY_MODEL_CONFIG = ConfigDict(frozen=True, extra="ignore")
"""Entry models are immutable and ignore keys they don't know (OME adds settings over time)."""


class EntryError(ValueError):
    """An inferenceservice-config entry that can't be used; ``str()`` is the whole reason."""


class FieldRuleError(EntryError):
    """One field broke its rule: ``validate <path>: <detail>``."""

    def __init__(self, path: str, detail: str) -> None:
        super().__init__(f"validate {path}: {detail}")
        self.path = path
        self.detail = detail


@dataclass(frozen=True)
class Percent:
    """A budget written as ``"<n>%"`` (1 to 100), resolved against a footprint each pass."""

    value: int

    def __post_init__(self) -> None:
        if not 1 <= self.value <= 100:
            raise ValueError(f"percentage {self.value} is outside 1..100")

    def __str__(self) -> str:
        return f"{self.value}%"


BatchSize = int | Percent
"""A pod budget: a count of at least 1, or a percentage of the component's footprint."""


def resolve_budget(configured: BatchSize | None, footprint: int) -> int | None:
    """The pod budget of one pass. ``None`` means unbounded.

    A count is used as is; a percentage is taken of ``footprint``, rounded up, and never
    below 1, so a small component still makes progress.
    """
    if configured is None:
        return None
    if isinstance(configured, Percent):
        share = -(-configured.value * max(0, footprint) // 100)  # ceiling division
        return max(1, share)
    return configured


def render(value: object) -> str:
    """A decoded JSON value as a message shows it: strings in Go's %q, the rest as JSON."""
    if isinstance(value, str):
        return go_quote(value)
    try:
        return orjson.dumps(value).decode()
    except TypeError:
        return repr(value)


def _is_json_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


INT64_MAX: Final = 2**63 - 1
"""The largest value of Go's ``int`` (64 bits): upstream's ``json.Unmarshal`` refuses more."""


def int_rule(
    path: str, *, minimum: int, rule: str, default: int | None = None, nullable: bool = True
) -> Callable[[Any], int | None]:
    """A JSON integer from ``minimum`` to :data:`INT64_MAX`; ``rule`` completes "must ..." in
    the message.

    ``null`` yields ``default``, unless the field isn't ``nullable`` (a required field).
    """

    def validate(value: Any) -> int | None:
        if value is None and nullable:
            return default
        if not _is_json_int(value) or not minimum <= value <= INT64_MAX:
            raise FieldRuleError(path, f"invalid {path} {render(value)} {rule}")
        result: int = value
        return result

    return validate


_PERCENT = re.compile(r"[0-9]+%")
_DIGITS = re.compile(r"[0-9]+")


def batch_size_rule(path: str) -> Callable[[Any], BatchSize | None]:
    """A pod count (JSON integer >= 1) or a percentage string ``"1%"``..``"100%"``.

    Every string is read as a percentage, so ``"100"`` fails where ``100`` works.
    """

    def validate(value: Any) -> BatchSize | None:
        if value is None:
            return None
        if _is_json_int(value):
            if value < 1:
                raise FieldRuleError(path, f"invalid {path} {value} must be at least 1")
            count: int = value
            return count
        if isinstance(value, str):
            if not _PERCENT.fullmatch(value):
                detail = (
                    f"invalid {path} {render(value)} must be a percentage of digits and %, "
                    'from "1%" to "100%", with no sign, spaces or decimals'
                )
                if _DIGITS.fullmatch(value):
                    detail += f"; write a pod count as a JSON number, such as {int(value)}"
                raise FieldRuleError(path, detail)
            number = int(value[:-1])
            if not 1 <= number <= 100:
                raise FieldRuleError(
                    path, f"invalid {path} {render(value)} must be between 1% and 100%"
                )
            return Percent(number)
        raise FieldRuleError(
            path,
            f"invalid {path} {render(value)} must be a pod count (an integer of at least 1) "
            'or a percentage string such as "10%"',
        )

    return validate


def positive_duration_rule(
    path: str, *, example: str, default: float | None = None, nullable: bool = True
) -> Callable[[Any], float | None]:
    """A Go duration string greater than zero, in seconds. ``example`` shows the form.

    ``null`` yields ``default``, unless the field isn't ``nullable`` (a required field).
    """

    def validate(value: Any) -> float | None:
        if value is None and nullable:
            return default
        if not isinstance(value, str):
            raise FieldRuleError(
                path,
                f"invalid {path} {render(value)} must be a duration string, "
                f"such as {go_quote(example)}",
            )
        try:
            nanoseconds = parse_duration_ns(value)
        except DurationError as exc:
            raise FieldRuleError(
                path,
                f"invalid {path} {render(value)} must be a positive duration, "
                f"such as {go_quote(example)}: {exc}",
            ) from None
        if nanoseconds <= 0:
            raise FieldRuleError(
                path,
                f"invalid {path} {render(value)} must be a positive duration, "
                f"such as {go_quote(example)}",
            )
        return nanoseconds / 1e9

    return validate


def choice_rule(path: str, choices: tuple[T, ...]) -> Callable[[Any], T]:
    """One of ``choices`` exactly (case-sensitive); ``null`` is not a choice."""
    shown = " or ".join(str(choice) for choice in choices)
    if len(choices) > 2:
        shown = ", ".join(str(choice) for choice in choices[:-1]) + f" or {choices[-1]}"

    def validate(value: Any) -> T:
        for choice in choices:
            if isinstance(value, str) and value == choice:
                return choice
        raise FieldRuleError(path, f"invalid {path} {render(value)} must be {shown}")

    return validate


def string_rule(path: str, *, allow_empty: bool = True) -> Callable[[Any], str | None]:
    """A JSON string."""

    def validate(value: Any) -> str | None:
        if value is None:
            return None
        if not isinstance(value, str) or (not allow_empty and not value):
            rule = "must be a string" if allow_empty else "must be a non-empty string"
            raise FieldRuleError(path, f"invalid {path} {render(value)} {rule}")
        return value

    return validate


def bool_rule(path: str, *, default: bool | None = None) -> Callable[[Any], bool | None]:
    """A JSON ``true`` or ``false`` (not ``"true"``, not ``1``)."""

    def validate(value: Any) -> bool | None:
        if value is None:
            return default
        if not isinstance(value, bool):
            raise FieldRuleError(path, f"invalid {path} {render(value)} must be true or false")
        return value

    return validate


def string_list_rule(path: str) -> Callable[[Any], tuple[str, ...] | None]:
    """A JSON array of strings."""

    def validate(value: Any) -> tuple[str, ...] | None:
        if value is None:
            return None
        if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
            raise FieldRuleError(
                path, f"invalid {path} {render(value)} must be an array of strings"
            )
        return tuple(value)

    return validate


def object_rule(path: str) -> Callable[[Any], Any]:
    """A JSON object or ``null``, handed on for the nested model to validate."""

    def validate(value: Any) -> Any:
        if value is not None and not isinstance(value, dict):
            raise FieldRuleError(path, f"invalid {path} {render(value)} must be a JSON object")
        return value

    return validate


# --- whole entries ---------------------------------------------------------------------------


def decode_object(key: str, raw: str) -> dict[str, Any]:
    """The JSON object under ``key``, or :class:`EntryError` naming the key."""
    try:
        document = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise EntryError(f"parse {key}: invalid JSON: {exc}") from None
    if not isinstance(document, dict):
        raise EntryError(f"parse {key}: want a JSON object, got {json_type(document)}")
    return document


def _messages(key: str, exc: ValidationError) -> str:
    messages: list[str] = []
    for error in exc.errors():
        cause = error.get("ctx", {}).get("error")
        if isinstance(cause, EntryError):
            text = str(cause)
        else:
            path = ".".join([key, *(str(part) for part in error["loc"])])
            if error["type"] == "missing":
                text = f"validate {path}: {path} is required"
            else:
                text = f"validate {path}: {error['msg']}"
        if text not in messages:
            messages.append(text)
    return "; ".join(messages)


def validate_entry(model: type[M], document: Mapping[str, Any], *, key: str) -> M:
    """``model`` from ``document``, or :class:`EntryError` with every field's message."""
    try:
        return model.model_validate(document)
    except ValidationError as exc:
        raise EntryError(_messages(key, exc)) from None
