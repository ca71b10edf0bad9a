"""How long a reflector waits before it lists or watches again after a failure.

client-go's reflector backoff: 0.8 s, doubling up to 30 s, each delay stretched by up to
100% jitter (then capped at 30 s), and back to 0.8 s once two minutes pass without a
failure. The jitter spreads the informers of many managers apart after an API server
restart; the reset makes an isolated failure after a long healthy stretch cheap.

A floor (``wait(at_least=...)``, a 429's Retry-After) can lengthen a delay up to ``cap``,
never beyond; a floor that is not a finite, non-negative number is no floor. client-go
waits only the backoff on a 429, so a header can't make omed wait longer than it would.

Invariant: delays never exceed ``cap``, and never fall below ``initial`` (time comes from
the injected clock, so tests drive it with ``FakeClock``).
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable

from omed.clock import Clock


class Backoff:
    """Exponential backoff with jitter and a reset after a healthy stretch."""

    def __init__(
        self,
        clock: Clock,
        *,
        initial: float = 0.8,
        cap: float = 30.0,
        factor: float = 2.0,
        jitter: float = 1.0,
        reset_after: float = 120.0,
        rand: Callable[[], float] = random.random,
    ) -> None:
        self._clock = clock
        self.initial = initial
        self.cap = cap
        self._factor = factor
        self._jitter = jitter
        self._reset_after = reset_after
        self._rand = rand
        self._next = initial
        self._last: float | None = None

    def next_delay(self) -> float:
        """The delay before the next attempt; each call counts as one failure."""
        now = self._clock.monotonic()
        if self._last is not None and now - self._last >= self._reset_after:
            self._next = self.initial
        self._last = now
        base = self._next
        self._next = min(self.cap, base * self._factor)
        return min(self.cap, base * (1.0 + self._jitter * self._rand()))

    def reset(self) -> None:
        self._next = self.initial
        self._last = None

    async def wait(self, *, at_least: float = 0.0) -> float:
        """Sleep for the next delay (or ``at_least``, when longer, up to ``cap``); return the
        time slept."""
        floor = min(at_least, self.cap) if math.isfinite(at_least) and at_least > 0 else 0.0
        delay = max(floor, self.next_delay())
        await self._clock.sleep(delay)
        return delay
