"""The InferenceService validator on duration fields: a duration beyond Go's longest
``time.Duration`` is refused with a field message, never an internal error, in every field
that holds one."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from webhook_world import ISVC, Request

from omed.api.base import DURATION_PATTERN, MAX_DURATION
from omed.config import duration as go
from omed.webhooks.findings import RATCHET_NOTE
from omed.webhooks.inferenceservice import InferenceServiceValidator
from omed.webhooks.review import AdmissionRequest, AdmissionResponse

VALIDATOR = InferenceServiceValidator()
LC = "spec.engine.lifecycle"
TOO_LONG = f"must be at most {MAX_DURATION} (Go's longest duration, about 292 years)"

FIELDS = ["instanceReadyTimeout", "updateRetry.initialDelay", "updateRetry.maxDelay"]


def lifecycle_with(field: str, value: str) -> dict[str, Any]:
    """``{"updateRetry": {"maxDelay": value}}`` for ``updateRetry.maxDelay``."""
    outer, _, inner = field.rpartition(".")
    return {outer: {inner: value}} if outer else {inner: value}


AT_LIMIT = [MAX_DURATION, "9223372036854775807ns", "2562047h"]
BEYOND = [
    "2562047h47m16.854775808s",  # 1 ns over
    "2562048h",
    "9223372036854775808ns",
    "99999999999999999999999h",
    "1" + "0" * 5000 + "h",
]


def review(request_for: Request, obj: dict[str, Any], **kwargs: Any) -> AdmissionResponse:
    return VALIDATOR.review(request_for(obj, **kwargs))


def with_lifecycle(lifecycle: dict[str, Any]) -> dict[str, Any]:
    obj = copy.deepcopy(ISVC)
    obj["spec"]["engine"]["lifecycle"] = lifecycle
    return obj


def shown(value: str) -> str:
    text = f'"{value}"'
    return text if len(text) <= 64 else text[:61] + "..."


@pytest.mark.parametrize("field", FIELDS)
@pytest.mark.parametrize("value", AT_LIMIT)
def test_durations_up_to_the_limit_are_admitted(
    request_for: Request, field: str, value: str
) -> None:
    answer = review(request_for, with_lifecycle(lifecycle_with(field, value)))
    assert answer.allowed, answer.message
    assert answer.warnings == ()


@pytest.mark.parametrize("field", FIELDS)
@pytest.mark.parametrize("value", BEYOND)
def test_durations_beyond_the_limit_are_refused_at_their_field(
    request_for: Request, field: str, value: str
) -> None:
    answer = review(request_for, with_lifecycle(lifecycle_with(field, value)))
    assert not answer.allowed
    assert answer.code == 403  # a refusal, not the internal error (500) it was
    assert answer.message == f"{LC}.{field}: {TOO_LONG}, got {shown(value)}"


def test_every_field_is_reported(request_for: Request) -> None:
    lifecycle = {
        "instanceReadyTimeout": "2562048h",
        "updateRetry": {"initialDelay": "99999999999999999999999h", "maxDelay": "2562048h"},
    }
    answer = review(request_for, with_lifecycle(lifecycle))
    assert answer.message.split("; ") == [
        f'{LC}.instanceReadyTimeout: {TOO_LONG}, got "2562048h"',
        f'{LC}.updateRetry.initialDelay: {TOO_LONG}, got "99999999999999999999999h"',
        f'{LC}.updateRetry.maxDelay: {TOO_LONG}, got "2562048h"',
    ]


def test_delays_at_the_limit_keep_their_order_rule(request_for: Request) -> None:
    lifecycle = {"updateRetry": {"initialDelay": MAX_DURATION, "maxDelay": "2562047h"}}
    answer = review(request_for, with_lifecycle(lifecycle))
    assert answer.message == (
        f"{LC}.updateRetry.initialDelay: must not be longer than maxDelay (2562047h), "
        f"got {MAX_DURATION}"
    )


def test_a_stored_huge_value_ratchets_on_unrelated_updates(request_for: Request) -> None:
    """An object stored before the webhook checked the range can still be edited elsewhere
    (labels, finalizers); the user hears of the value, and the controller reports it."""
    old = with_lifecycle({"instanceReadyTimeout": "99999999999999999999999h"})
    new = copy.deepcopy(old)
    new["metadata"]["labels"] = {"team": "search"}
    answer = review(request_for, new, operation="UPDATE", old=old)
    assert answer.allowed
    assert answer.warnings == (
        f'{LC}.instanceReadyTimeout: {TOO_LONG}, got "99999999999999999999999h"{RATCHET_NOTE}',
    )
    new["spec"]["engine"]["lifecycle"]["instanceReadyTimeout"] = "2562048h"
    answer = review(request_for, new, operation="UPDATE", old=old)
    assert not answer.allowed
    assert answer.message == f'{LC}.instanceReadyTimeout: {TOO_LONG}, got "2562048h"'


def _request(obj: dict[str, Any]) -> AdmissionRequest:
    return AdmissionRequest(
        uid="uid-1",
        operation="CREATE",
        group="ome.io",
        version="v1beta1",
        kind="InferenceService",
        name="chat",
        namespace="prod",
        object=obj,
        old_object=None,
    )


@given(
    st.from_regex(DURATION_PATTERN, fullmatch=True)
    | st.builds(
        lambda n, unit: f"{n}{unit}",
        st.integers(0, 10**22),
        st.sampled_from(["ns", "us", "µs", "ms", "s", "m", "h"]),
    )
)
def test_any_duration_the_crd_admits_gets_a_field_answer(value: str) -> None:
    """Whatever duration the CRD's pattern lets through, the validator answers it as Go
    reads it: admitted when positive and within Go's range, else refused at the field."""
    answer = VALIDATOR.review(_request(with_lifecycle({"instanceReadyTimeout": value})))
    try:
        nanoseconds: int | None = go.parse_duration_ns(value)
    except go.DurationError:
        nanoseconds = None
    if nanoseconds is None:
        assert answer.message == f"{LC}.instanceReadyTimeout: {TOO_LONG}, got {shown(value)}"
    elif nanoseconds <= 500:  # read to the microsecond (half to even), as the controllers do
        assert answer.message.startswith(f"{LC}.instanceReadyTimeout: must be a positive")
    else:
        assert answer.allowed, answer.message
