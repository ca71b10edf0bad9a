"""The client-side QPS/burst limiter every request of one API client passes.

A token bucket with reservations, as Go's ``rate.Limiter.Wait`` that client-go uses: each
caller takes a token now, possibly driving the balance negative, and sleeps until its own
token would have been refilled. Callers are served in arrival order and the long-run rate is
exactly ``qps``, with at most ``burst`` requests back to back. A non-positive qps means no
limit (client-go's ``-1``).
"""

from __future__ import annotations

from omed.clock import Clock, RealClock


class TokenBucket:
    def __init__(self, *, qps: float, burst: int, clock: Clock | None = None) -> None:
        self.qps = qps
        self.burst = max(1, burst)
        self._clock = clock or RealClock()
        self._tokens = float(self.burst)
        self._last = self._clock.monotonic()

    def reserve(self) -> float:
        """Take one token; return how long the caller must wait before using it."""
        if self.qps <= 0:
            return 0.0
        now = self._clock.monotonic()
        self._tokens = min(float(self.burst), self._tokens + (now - self._last) * self.qps)
        self._last = now
        self._tokens -= 1.0
        if self._tokens >= 0:
            return 0.0
        return -self._tokens / self.qps

    async def wait(self) -> float:
        delay = self.reserve()
        if delay > 0:
            await self._clock.sleep(delay)
        return delay
