"""Shared building blocks of omed's API models: the base class and the Kubernetes value types.

Every model in :mod:`omed.api` derives from :class:`ApiModel`, which fixes the wire shape:
camelCase JSON names, Python names accepted too, and optional fields that default to ``None``
so that ``model_dump(by_alias=True, exclude_none=True)`` (:meth:`ApiModel.to_dict`) writes only
what is set. Reading an object and dumping it again gives back the same dict: times are held at
whole seconds in UTC and written as ``2026-09-14T20:52:31Z``, as ``metav1.Time`` is.

The annotated types here also carry the JSON schema that :mod:`omed.api.crdgen` turns into the
CRDs: :data:`FreeForm` marks a core/v1 object kept as-is (``x-kubernetes-preserve-unknown-fields``),
:data:`IntOrPercent` and :data:`BatchSize` are ``x-kubernetes-int-or-string``, and :data:`Time`
is ``format: date-time``. A field's user-facing description is its attribute docstring.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterable
from typing import Annotated, Any, Final, Literal, Protocol

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    PlainSerializer,
    StringConstraints,
    WithJsonSchema,
)
from pydantic.alias_generators import to_camel
from pydantic_core import PydanticCustomError

PRESERVE_UNKNOWN = "x-kubernetes-preserve-unknown-fields"
INT_OR_STRING = "x-kubernetes-int-or-string"


class ApiModel(BaseModel):
    """Base of every omed API model: camelCase on the wire, unknown keys dropped."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        use_attribute_docstrings=True,
        extra="ignore",
    )

    def to_dict(self) -> dict[str, Any]:
        """The object as the API server stores it: camelCase keys, unset fields left out."""
        return self.model_dump(by_alias=True, exclude_none=True, mode="json")


class OpenApiModel(ApiModel):
    """An :class:`ApiModel` that keeps keys it doesn't know.

    For objects that upstream OME or core/v1 define more widely than omed models them (pod
    spec fields inline in a component, upstream's status fields): the CRD preserves their
    unknown fields, and a read-modify-write through the model loses none.
    """

    model_config = ConfigDict(extra="allow")


# -- Time ------------------------------------------------------------------------------------


def _normalize_time(value: dt.datetime) -> dt.datetime:
    offset = value.utcoffset()  # None without a timezone
    if offset is None:
        msg = "time must carry a timezone"
        raise ValueError(msg)
    if not offset:  # already UTC (every stored "...Z"): one copy, not two
        return value.replace(microsecond=0, tzinfo=dt.UTC)
    return value.astimezone(dt.UTC).replace(microsecond=0)


def format_time(value: dt.datetime) -> str:
    """RFC 3339 at whole seconds in UTC, as ``metav1.Time`` serializes: the year always in
    four digits, as Go writes it (``strftime("%Y")`` leaves years below 1000 unpadded on
    glibc, which no RFC 3339 reader takes back)."""
    t = _normalize_time(value)
    return "%04d-%02d-%02dT%02d:%02d:%02dZ" % (  # noqa: UP031 - the fastest spelling here
        t.year,
        t.month,
        t.day,
        t.hour,
        t.minute,
        t.second,
    )


Time = Annotated[
    dt.datetime,
    AfterValidator(_normalize_time),
    PlainSerializer(format_time, return_type=str),
]
"""A ``metav1.Time``: timezone-aware, truncated to whole seconds, written as ``...Z``."""


# -- Durations -------------------------------------------------------------------------------

DURATION_PATTERN = r"^(0|([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+)$"
_DURATION = re.compile(DURATION_PATTERN)
_DURATION_PART = re.compile(r"([0-9]+)(?:\.([0-9]+))?(ns|us|µs|ms|s|m|h)")
_DURATION_UNIT_NS: dict[str, int] = {
    "ns": 1,
    "us": 1_000,
    "µs": 1_000,
    "ms": 1_000_000,
    "s": 1_000_000_000,
    "m": 60_000_000_000,
    "h": 3_600_000_000_000,
}
_TWO_63 = 1 << 63

MAX_DURATION_NS = _TWO_63 - 1
"""The longest duration Go's ``time.Duration`` (int64 nanoseconds) holds, about 292 years."""
MAX_DURATION = "2562047h47m16.854775807s"
""":data:`MAX_DURATION_NS` as Go's ``Duration.String`` writes it."""
DURATION_TOO_LONG = f"must be at most {MAX_DURATION} (Go's longest duration, about 292 years)"
"""The rule a duration beyond :data:`MAX_DURATION` breaks, as field messages word it."""


class DurationTooLong(ValueError):
    """A well-formed duration longer than Go's ``time.Duration`` can hold."""


_ALWAYS_IN_RANGE: Final = 7
"""A duration of at most this many characters is within Go's range whatever it says: the
largest is ``999999h`` (about 114 years; ``9999999h`` is beyond). Such a text, which the
pattern has already checked, needs no parse: the admission webhook validates every duration
of a spec on every write."""


def _check_duration_range(text: str) -> str:
    if len(text) <= _ALWAYS_IN_RANGE:
        return text
    try:
        parse_duration_ns(text)
    except DurationTooLong:
        raise PydanticCustomError("duration_too_long", DURATION_TOO_LONG) from None
    return text


Duration = Annotated[
    str, StringConstraints(pattern=DURATION_PATTERN), AfterValidator(_check_duration_range)
]
"""A Go duration string such as ``"90s"``, ``"5m"`` or ``"1h30m"``; no sign, no days, at most
:data:`MAX_DURATION`. The CRD checks the pattern only; the range is checked by the webhook and
when a stored object is read, so a value stored before either ran is an error, never a crash."""


def _fraction_ns(digits: str, unit: int) -> int:
    """Nanoseconds of ``.digits`` of ``unit``, computed as Go's ``time.ParseDuration`` does:
    digits are kept until they would overflow an int64, then scaled through float64."""
    value, scale = 0, 1.0
    for digit in digits:
        if value > MAX_DURATION_NS // 10:
            break
        candidate = value * 10 + ord(digit) - ord("0")
        if candidate > _TWO_63:
            break
        value, scale = candidate, scale * 10
    return int(float(value) * (float(unit) / scale))


def parse_duration_ns(text: str) -> int:
    """Nanoseconds of a :data:`Duration` string, as Go's ``time.ParseDuration`` reads it.

    Raises :class:`DurationTooLong` beyond :data:`MAX_DURATION` (Go refuses it too), and
    ``ValueError`` on anything that isn't a :data:`Duration`. Never overflows: a number of any
    length is refused, not converted.
    """
    if text == "0":
        return 0
    if not _DURATION.fullmatch(text):
        msg = f"invalid duration {text!r}"
        raise ValueError(msg)
    total = 0
    for whole, fraction, unit_name in _DURATION_PART.findall(text):
        unit = _DURATION_UNIT_NS[unit_name]
        digits = whole.lstrip("0")
        if len(digits) > len(str(MAX_DURATION_NS)):
            total = _TWO_63  # far beyond the range: don't convert thousands of digits
            break
        total += int(digits or "0") * unit
        if fraction:
            total += _fraction_ns(fraction, unit)
        if total > MAX_DURATION_NS:
            break
    if total > MAX_DURATION_NS:
        msg = f"duration {text[:64]!r} is longer than {MAX_DURATION}"
        raise DurationTooLong(msg)
    return total


def parse_duration(text: str) -> dt.timedelta:
    """Parse a :data:`Duration` string (to the microsecond); ``ValueError`` on anything else,
    :class:`DurationTooLong` (a ``ValueError``) beyond :data:`MAX_DURATION`."""
    return dt.timedelta(microseconds=parse_duration_ns(text) / 1000)


# -- Int-or-string ---------------------------------------------------------------------------

PERCENT_PATTERN = r"^[0-9]+%$"
BATCH_PERCENT_PATTERN = r"^(100|[1-9][0-9]?)%$"


def _check_int_or_percent(value: int | str) -> int | str:
    if isinstance(value, str):
        if not re.fullmatch(PERCENT_PATTERN, value):
            msg = f"must be an integer or a percentage such as '25%', got {value!r}"
            raise ValueError(msg)
    elif value < 0:
        msg = f"must not be negative, got {value}"
        raise ValueError(msg)
    return value


def _check_batch_size(value: int | str) -> int | str:
    if isinstance(value, str):
        if not re.fullmatch(BATCH_PERCENT_PATTERN, value):
            msg = f"must be an integer or a percentage from '1%' to '100%', got {value!r}"
            raise ValueError(msg)
    elif value < 1:
        msg = f"must be at least 1, got {value}"
        raise ValueError(msg)
    return value


IntOrPercent = Annotated[
    int | str,
    AfterValidator(_check_int_or_percent),
    WithJsonSchema({INT_OR_STRING: True, "pattern": PERCENT_PATTERN}),
]
"""``intstr.IntOrString`` restricted to a non-negative count or a percentage, as a rolling
update's ``maxSurge`` and ``maxUnavailable`` are. The pattern only constrains strings."""

BatchSize = Annotated[
    int | str,
    AfterValidator(_check_batch_size),
    WithJsonSchema({INT_OR_STRING: True, "pattern": BATCH_PERCENT_PATTERN}),
]
"""A batch budget: a count of at least 1, or a percentage from ``"1%"`` to ``"100%"``."""


def resolve_int_or_percent(value: int | str, *, total: int, round_up: bool) -> int:
    """The count that ``value`` means against ``total``: a percentage is resolved and rounded."""
    if isinstance(value, int):
        return value
    percent = int(value.removesuffix("%"))
    scaled = total * percent
    return -(-scaled // 100) if round_up else scaled // 100


# -- Free-form core/v1 objects ---------------------------------------------------------------

FreeForm = Annotated[
    dict[str, Any],
    WithJsonSchema({"type": "object", PRESERVE_UNKNOWN: True}),
]
"""A core/v1 object (container, volume, pod template, ...) that omed keeps as the user wrote
it: its schema is the API server's business, and the CRD preserves every field in it."""


# -- metav1 ----------------------------------------------------------------------------------

ConditionStatus = Literal["True", "False", "Unknown"]

CONDITION_TYPE_PATTERN = (
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$"
)
CONDITION_REASON_PATTERN = r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$"


class Condition(ApiModel):
    """One aspect of an object's current state, in the shape of ``metav1.Condition``."""

    type: str = Field(max_length=316, pattern=CONDITION_TYPE_PATTERN)
    """Type of condition in CamelCase, such as Ready."""
    status: ConditionStatus
    """Status of the condition: True, False or Unknown."""
    observed_generation: int | None = Field(default=None, ge=0)
    """The object's metadata.generation that the condition was set from."""
    last_transition_time: Time
    """When the condition last changed from one status to another."""
    reason: str = Field(min_length=1, max_length=1024, pattern=CONDITION_REASON_PATTERN)
    """A CamelCase token for the condition's last transition."""
    message: str = Field(default="", max_length=32768)
    """A human-readable message about the transition."""


def json_type(value: object, *, other: str = "object") -> str:
    """The JSON type name of a decoded value, for messages: null, boolean, number, string,
    object (a dict) or array (a list); ``other`` for anything JSON doesn't decode to."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, dict):
        return "object"
    if isinstance(value, list):
        return "array"
    return other


class _Transitioned(Protocol):
    """A condition of any shape: an object's, or an Instance row's."""

    @property
    def type(self) -> str | None: ...

    @property
    def status(self) -> str | None: ...

    @property
    def last_transition_time(self) -> dt.datetime | None: ...


def transition_time(
    previous: Iterable[_Transitioned] | None, *, type: str, status: str, now: dt.datetime
) -> dt.datetime:
    """When a condition of ``type``, now at ``status``, last transitioned: the previous
    condition's time while its status stays the same (and the time is known), else ``now``.
    The one rule of ``lastTransitionTime``: it moves only when the status flips."""
    old = next((c for c in previous or () if c.type == type), None)
    if old is not None and old.status == status and old.last_transition_time:
        return old.last_transition_time
    return now


class OwnerReference(ApiModel):
    """A ``metav1.OwnerReference``."""

    api_version: str
    kind: str
    name: str
    uid: str
    controller: bool | None = None
    block_owner_deletion: bool | None = None


class ObjectMeta(OpenApiModel):
    """The parts of ``metav1.ObjectMeta`` that omed reads; every other key is kept as-is."""

    name: str | None = None
    generate_name: str | None = None
    namespace: str | None = None
    uid: str | None = None
    resource_version: str | None = None
    generation: int | None = None
    creation_timestamp: Time | None = None
    deletion_timestamp: Time | None = None
    deletion_grace_period_seconds: int | None = None
    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None
    owner_references: list[OwnerReference] | None = None
    finalizers: list[str] | None = None

    def label(self, key: str) -> str | None:
        """The value of label ``key``, or ``None``."""
        return (self.labels or {}).get(key)

    def annotation(self, key: str) -> str | None:
        """The value of annotation ``key``, or ``None``."""
        return (self.annotations or {}).get(key)

    def controller_ref(self) -> OwnerReference | None:
        """The owner reference marked ``controller: true``, if any."""
        for ref in self.owner_references or ():
            if ref.controller:
                return ref
        return None
