"""Injected time.

Logic never calls ``time.time()`` or ``loop.time()`` directly: it takes a :class:`Clock`, so
deadlines, backoffs and windows are tested with :class:`FakeClock` without sleeping.
Wall time (``now``) is for timestamps written to the API server; monotonic time
(``monotonic``) is for intervals.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import time
from collections.abc import Awaitable
from typing import Protocol, TypeVar

T = TypeVar("T")


class Clock(Protocol):
    def now(self) -> dt.datetime:
        """Wall-clock time, timezone-aware UTC."""
        ...

    def monotonic(self) -> float:
        """Seconds on a monotonic scale, for intervals."""
        ...

    async def sleep(self, seconds: float) -> None: ...


class RealClock:
    def now(self) -> dt.datetime:
        return dt.datetime.now(dt.UTC)

    def monotonic(self) -> float:
        return time.monotonic()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(max(0.0, seconds))


class FakeClock:
    """A clock that moves only when told to; sleepers wake when time passes their deadline."""

    def __init__(self, start: dt.datetime | None = None) -> None:
        self._wall = start or dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
        self._mono = 1000.0
        self._sleepers: list[tuple[float, asyncio.Future[None]]] = []

    def now(self) -> dt.datetime:
        return self._wall

    def monotonic(self) -> float:
        return self._mono

    async def sleep(self, seconds: float) -> None:
        if seconds <= 0:
            await asyncio.sleep(0)
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._sleepers.append((self._mono + seconds, fut))
        await fut

    def advance(self, seconds: float) -> None:
        self._mono += seconds
        self._wall += dt.timedelta(seconds=seconds)
        due = [(t, f) for t, f in self._sleepers if t <= self._mono]
        self._sleepers = [(t, f) for t, f in self._sleepers if t > self._mono]
        for _, fut in due:
            if not fut.done():
                fut.set_result(None)


def rfc3339(value: dt.datetime) -> str:
    """The Kubernetes wire form of a timestamp: second precision, UTC, trailing Z."""
    return value.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_rfc3339(value: str) -> dt.datetime:
    """Parse a Kubernetes timestamp (``2026-01-02T03:04:05Z``, fractional seconds allowed)."""
    text = value.strip()
    if text.endswith(("Z", "z")):
        text = text[:-1] + "+00:00"
    parsed = dt.datetime.fromisoformat(text)
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=dt.UTC)
    return parsed.astimezone(dt.UTC)


async def within(clock: Clock, awaitable: Awaitable[T], seconds: float) -> T:
    """Await with a deadline on ``clock``; TimeoutError (and the awaitable cancelled) when the
    deadline passes first. ``asyncio.wait_for`` would use the loop's clock, which a
    :class:`FakeClock` does not move."""
    task = asyncio.ensure_future(awaitable)
    timer = asyncio.ensure_future(clock.sleep(seconds))
    try:
        await asyncio.wait({task, timer}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        timer.cancel()
        if not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
    if task.cancelled():
        raise TimeoutError(f"not done within {seconds:.3f}s")
    return task.result()
