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
        (429, "1", 1.0),
        (429, " 3 ", 3.0),
        (429, "+3", 3.0),  # strconv.Atoi takes a sign
        (503, "2", 2.0),
        (500, "0", 0.0),  # sent again at once
        (429, "30", 30.0),
        (429, "32", 30.0),  # API Priority and Fairness's longest: capped at MAX_RETRY_AFTER
        (429, "3600", 30.0),
        (503, "99999999999999999999", None),  # out of int64: Atoi fails, client-go fails
        (429, "-4", None),  # negative: absent, as for the informers (client-go: at once)
        (429, None, None),  # no Retry-After: fail now
        (503, None, None),
        (429, "", None),
        (429, "Wed, 21 Oct 2026 07:28:00 GMT", None),  # an HTTP date isn't waited on
        (429, "1.5", None),  # whole seconds only, as client-go
        (429, "1e3", None),
        (429, "inf", None),
        (429, "nan", None),
        (429, "\u0663", None),  # a digit to Python's int(), not to Go's Atoi
        (409, "1", None),  # only 429 and 5xx ask to retry
        (404, "1", None),
        (499, "1", None),
    ],
)
def test_retry_after_seconds(status: int, header: str | None, wait: float | None) -> None:
    """client-go's ``checkWait`` decides whether to wait (429 or 5xx, whole seconds), the
    informers' :func:`~omed.kube.errors.parse_retry_after` how long (at most 30 s)."""
    from omed.kube.client import retry_after_seconds

    assert retry_after_seconds(status, header) == wait


def test_the_client_s_cap_is_the_informers_cap() -> None:
    from omed.kube import client

    assert client.MAX_RETRY_AFTER is errors.MAX_RETRY_AFTER
    assert client.MAX_RETRIES == 10  # client-go's maxRetries
