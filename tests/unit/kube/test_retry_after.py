"""Retry-After as the informers read it (``TooManyRequests.retry_after``): seconds, capped.

The header comes from the API server or from whatever stands in front of it (a proxy, a
load balancer), so it is not trusted: a value that isn't a finite, non-negative number is
treated as absent, and a long one waits only :data:`~omed.kube.errors.MAX_RETRY_AFTER`
(30 s, the reflector's longest back-off). A wait read from ``inf`` or ``3600`` would leave
an informer's cache frozen, while it still reports synced.
"""

from __future__ import annotations

import pytest

from omed.kube import errors

ABSENT = 1.0
"""What a 429 without a usable Retry-After waits at least (then the back-off applies)."""


@pytest.mark.parametrize(
    ("header", "seconds"),
    [
        ("3", 3.0),
        (" 7 ", 7.0),
        ("1.5", 1.5),
        ("0", 0.0),
        ("30", 30.0),
        ("3600", 30.0),  # capped
        ("1e9", 30.0),
        ("1e400", ABSENT),  # overflows to inf
        ("inf", ABSENT),
        ("-inf", ABSENT),
        ("Infinity", ABSENT),
        ("nan", ABSENT),
        ("-5", ABSENT),
        ("-0.5", ABSENT),
        ("Wed, 21 Oct 2026 07:28:00 GMT", ABSENT),  # an HTTP date
        ("soon", ABSENT),
        ("", ABSENT),
        (None, ABSENT),
    ],
)
def test_retry_after_is_capped_and_unusable_values_are_absent(
    header: str | None, seconds: float
) -> None:
    err = errors.error_from_response(
        429, {"reason": "TooManyRequests", "message": "slow"}, retry_after=header
    )
    assert isinstance(err, errors.TooManyRequests)
    assert err.retry_after == seconds


def test_the_cap_is_the_reflector_s_longest_back_off() -> None:
    from omed.informers.backoff import Backoff

    assert errors.MAX_RETRY_AFTER == 30.0
    assert Backoff.__init__.__kwdefaults__["cap"] == errors.MAX_RETRY_AFTER
