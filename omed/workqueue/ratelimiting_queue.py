"""The queue controllers use: delayed adds whose delay a rate limiter chooses.

Why this module exists: a controller retries a failed key with ``add_rate_limited`` and, once
the key reconciles cleanly, resets its backoff with ``forget``; the two halves must talk to
the same limiter. This is client-go's rate-limiting queue: :class:`DelayingQueue` plus a
:class:`~omed.workqueue.ratelimit.RateLimiter`.

Invariants: ``add_rate_limited(key)`` records exactly one failure in the limiter and adds the
key after the limiter's delay (so dedup and the processing rule still apply); the limiter's
per-key state changes only through ``add_rate_limited`` and ``forget``; after shutdown
``add_rate_limited`` records nothing.
"""

from __future__ import annotations

from omed.clock import Clock, RealClock
from omed.workqueue.delaying import DelayingQueue
from omed.workqueue.ratelimit import RateLimiter, default_controller_rate_limiter


class RateLimitingQueue(DelayingQueue):
    """A :class:`DelayingQueue` with per-key retry backoff (default: controller-runtime's)."""

    __slots__ = ("_rate_limiter",)

    def __init__(
        self,
        name: str | None = None,
        *,
        clock: Clock | None = None,
        rate_limiter: RateLimiter | None = None,
    ) -> None:
        clock = clock if clock is not None else RealClock()
        super().__init__(name, clock=clock)
        self._rate_limiter: RateLimiter = (
            rate_limiter if rate_limiter is not None else default_controller_rate_limiter(clock)
        )

    @property
    def rate_limiter(self) -> RateLimiter:
        return self._rate_limiter

    def add_rate_limited(self, key: str) -> None:
        """Add ``key`` after the limiter's delay for one more failure of it."""
        if self._shutting_down:
            return
        self.add_after(key, self._rate_limiter.when(key))

    def forget(self, key: str) -> None:
        """Reset ``key``'s backoff (it stays queued if it is)."""
        self._rate_limiter.forget(key)

    def num_requeues(self, key: str) -> int:
        """Rate-limited adds of ``key`` since it was last forgotten."""
        return self._rate_limiter.num_requeues(key)
