"""The token bucket's arithmetic and the mapping of API answers to typed errors."""

from __future__ import annotations

import pytest

from omed.clock import FakeClock
from omed.kube import errors
from omed.kube.ratelimit import TokenBucket


def test_burst_then_steady_rate() -> None:
    clock = FakeClock()
    bucket = TokenBucket(qps=10, burst=3, clock=clock)
    assert [bucket.reserve() for _ in range(3)] == [0.0, 0.0, 0.0]
    # Reservations queue up: the 4th waits 0.1 s, the 5th 0.2 s.
    assert bucket.reserve() == pytest.approx(0.1)
    assert bucket.reserve() == pytest.approx(0.2)
    clock.advance(10)
    # After a long idle period the bucket holds burst tokens again, never more.
    assert [bucket.reserve() for _ in range(3)] == [0.0, 0.0, 0.0]
    assert bucket.reserve() == pytest.approx(0.1)


def test_non_positive_qps_means_unlimited() -> None:
    bucket = TokenBucket(qps=0, burst=1, clock=FakeClock())
    assert all(bucket.reserve() == 0.0 for _ in range(1000))


@pytest.mark.parametrize(
    ("status", "body", "expected"),
    [
        (404, {"reason": "NotFound", "message": "x not found"}, errors.NotFound),
        (409, {"reason": "Conflict", "message": "modified"}, errors.Conflict),
        (409, {"reason": "AlreadyExists", "message": "exists"}, errors.AlreadyExists),
        (410, {"reason": "Expired", "message": "too old resource version"}, errors.Gone),
        (413, {"reason": "RequestEntityTooLarge", "message": "limit"}, errors.TooLarge),
        (
            500,
            {"reason": "InternalError", "message": "etcdserver: request is too large"},
            errors.TooLarge,
        ),
        (422, {"reason": "Invalid", "message": "spec.x: Invalid value"}, errors.Invalid),
        (403, {"reason": "Forbidden", "message": "no"}, errors.Forbidden),
        (503, {"reason": "ServiceUnavailable", "message": "later"}, errors.ServerError),
        (400, b"not json", errors.BadRequest),
    ],
)
def test_error_mapping(status: int, body: object, expected: type[errors.ApiError]) -> None:
    err = errors.error_from_response(status, body)
    assert type(err) is expected
    assert err.status == status


def test_too_many_requests_reads_retry_after() -> None:
    err = errors.error_from_response(
        429, {"reason": "TooManyRequests", "message": "slow"}, retry_after="3"
    )
    assert isinstance(err, errors.TooManyRequests)
    assert err.retry_after == 3.0


def test_too_large_resource_version_is_recognised() -> None:
    err = errors.error_from_response(
        504, {"reason": "Timeout", "message": "Too large resource version: 99, current: 5"}
    )
    assert errors.is_too_large_resource_version(err)


@pytest.mark.parametrize(
    ("status", "header", "wait"),
    [
        (429, "1", 1),
        (429, " 3 ", 3),
        (503, "2", 2),
        (500, "0", 0),
        (429, "-4", 0),  # a negative wait waits nothing
        (429, "3600", 60),  # capped at MAX_RETRY_AFTER
        (429, None, None),  # no Retry-After: fail now
        (503, None, None),
        (429, "Wed, 21 Oct 2026 07:28:00 GMT", None),  # an HTTP date isn't waited on
        (429, "1.5", None),  # whole seconds only, as client-go
        (409, "1", None),  # only 429 and 5xx ask to retry
        (404, "1", None),
        (499, "1", None),
    ],
)
def test_retry_after_seconds(status: int, header: str | None, wait: int | None) -> None:
    from omed.kube.client import MAX_RETRY_AFTER, retry_after_seconds

    assert MAX_RETRY_AFTER == 60
    assert retry_after_seconds(status, header) == wait
