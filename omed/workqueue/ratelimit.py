"""Rate limiters: how long a failing key waits before it is retried.

Why this module exists: a reconcile that fails must be retried, but neither in a hot loop
for one broken object (per-key exponential backoff) nor as a stampede when many objects
fail at once (an overall token bucket). controller-runtime's default limiter is the maximum
of the two, and omed keeps its numbers: 5 ms doubling per failure up to 1000 s, and 10
retries a second with a burst of 100.

Invariants:

* ``when(key)`` records one failure and returns the delay in seconds before the next try;
  ``num_requeues(key)`` counts the failures since the last ``forget(key)``; ``forget`` is
  the only way a per-key backoff shrinks;
* all time comes from an injected :class:`~omed.clock.Clock` (monotonic scale), so the
  backoff arithmetic is tested without sleeping;
* the token bucket follows ``golang.org/x/time/rate``'s reservation rule: it starts full,
  refills at ``qps`` up to ``burst``, and a reservation always succeeds, possibly driving
  the balance negative, in which case the delay is the time to pay the debt back.
"""

from __future__ import annotations

from typing import Protocol

from omed.clock import Clock, RealClock

DEFAULT_BASE_DELAY = 0.005
DEFAULT_MAX_DELAY = 1000.0
DEFAULT_QPS = 10.0
DEFAULT_BURST = 100

# 2.0 ** 1024 overflows a float; far before that every delay is clamped to max_delay.
_MAX_EXPONENT = 1000


class RateLimiter(Protocol):
    def when(self, key: str) -> float:
        """Record a failure of ``key``; the delay in seconds before it may be retried."""
        ...

    def forget(self, key: str) -> None:
        """Stop tracking ``key``: its next failure starts from the smallest delay."""
        ...

    def num_requeues(self, key: str) -> int:
        """Failures of ``key`` recorded since it was last forgotten."""
        ...


class ItemExponentialFailureRateLimiter:
    """Per-key backoff: ``base_delay * 2 ** failures``, clamped to ``max_delay``."""

    __slots__ = ("_base_delay", "_failures", "_max_delay")

    def __init__(
        self, *, base_delay: float = DEFAULT_BASE_DELAY, max_delay: float = DEFAULT_MAX_DELAY
    ) -> None:
        if base_delay <= 0 or max_delay < base_delay:
            raise ValueError(
                f"need 0 < base_delay <= max_delay, got base_delay={base_delay} "
                f"max_delay={max_delay}"
            )
        self._base_delay = base_delay
        self._max_delay = max_delay
        self._failures: dict[str, int] = {}

    def when(self, key: str) -> float:
        exponent = self._failures.get(key, 0)
        self._failures[key] = exponent + 1
        if exponent >= _MAX_EXPONENT:
            return self._max_delay
        return min(self._base_delay * 2.0**exponent, self._max_delay)

    def forget(self, key: str) -> None:
        self._failures.pop(key, None)

    def num_requeues(self, key: str) -> int:
        return self._failures.get(key, 0)


class BucketRateLimiter:
    """An overall token bucket: every ``when`` takes one token, whatever the key."""

    __slots__ = ("_burst", "_clock", "_last", "_qps", "_tokens")

    def __init__(
        self,
        *,
        qps: float = DEFAULT_QPS,
        burst: int = DEFAULT_BURST,
        clock: Clock | None = None,
    ) -> None:
        if qps <= 0 or burst < 1:
            raise ValueError(f"need qps > 0 and burst >= 1, got qps={qps} burst={burst}")
        self._qps = float(qps)
        self._burst = float(burst)
        self._clock: Clock = clock if clock is not None else RealClock()
        self._tokens = float(burst)
        self._last = self._clock.monotonic()

    def when(self, key: str) -> float:
        now = self._clock.monotonic()
        # A clock that stepped back (it should not, being monotonic) refills nothing.
        elapsed = max(0.0, now - self._last)
        tokens = min(self._burst, self._tokens + elapsed * self._qps) - 1.0
        self._tokens = tokens
        self._last = max(now, self._last)
        return 0.0 if tokens >= 0 else -tokens / self._qps

    def forget(self, key: str) -> None:
        """The bucket does not track keys."""

    def num_requeues(self, key: str) -> int:
        return 0


class MaxOfRateLimiter:
    """The longest delay of several limiters; every limiter records every failure."""

    __slots__ = ("_limiters",)

    def __init__(self, *limiters: RateLimiter) -> None:
        if not limiters:
            raise ValueError("MaxOfRateLimiter needs at least one limiter")
        self._limiters: tuple[RateLimiter, ...] = limiters

    def when(self, key: str) -> float:
        # A list, not a generator inside max(): every limiter must see the failure.
        return max([limiter.when(key) for limiter in self._limiters])

    def forget(self, key: str) -> None:
        for limiter in self._limiters:
            limiter.forget(key)

    def num_requeues(self, key: str) -> int:
        return max(limiter.num_requeues(key) for limiter in self._limiters)


def default_controller_rate_limiter(clock: Clock | None = None) -> MaxOfRateLimiter:
    """controller-runtime's default: max(5 ms doubling to 1000 s per key, 10/s burst 100)."""
    return MaxOfRateLimiter(
        ItemExponentialFailureRateLimiter(),
        BucketRateLimiter(clock=clock),
    )
