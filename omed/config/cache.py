"""A TTL cache of the inferenceservice-config ConfigMap, shared by all reconciles.

Why: every reconcile reads the ConfigMap's reconcile-time entries. Reading it from the API
server each time would make ConfigMap reads a noticeable share of the manager's traffic;
reading it from a watch would apply edits mid-way through a fleet. It does neither: an edit is
seen within the TTL of the config cache, 30 seconds by default, and
``--config-cache-ttl=0`` sends every read to the API server.

Invariants:

* Freshness: :meth:`ConfigCache.get` returns data whose fetch *started* less than ``ttl``
  ago, or the result of a fetch still running that started at or after the call. So with
  ``ttl=0`` every call reads (concurrent calls at one instant share the read), a caller
  never gets data read before its call, and an edit is never hidden for longer than
  ``ttl`` plus one fetch.
* Single flight: at most one fetch runs at a time; callers that can use it share it.
* A failed fetch raises to every caller that waited on it, and leaves the cache as it was:
  the next call fetches again.
* A caller that is cancelled doesn't cancel the shared fetch.
* Refresh ahead: a call that finds its data past half the TTL gets that (still fresh) data
  at once and starts the next fetch in the background, once per fetched generation. So while
  calls keep coming at least every half TTL, none waits on the API server: the admission
  webhook's defaulter, which reads the cache on every request, never pays a ConfigMap read
  in its latency. An idle cache fetches nothing; a refresh that fails is not retried ahead
  (the first call past the TTL fetches, and sees the error, as without it).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Mapping
from types import MappingProxyType

from omed.clock import Clock

__all__ = ["ConfigCache"]


class ConfigCache:
    """The data of one ConfigMap, fetched through ``fetch`` and reused for ``ttl`` seconds."""

    def __init__(
        self,
        *,
        fetch: Callable[[], Awaitable[Mapping[str, str]]],
        ttl: float,
        clock: Clock,
    ) -> None:
        if not ttl >= 0:
            raise ValueError(f"config cache TTL must be 0 or more, got {ttl}")
        self._fetch = fetch
        self._ttl = ttl
        self._clock = clock
        self._data: Mapping[str, str] | None = None
        self._data_started_at = 0.0
        self._inflight: asyncio.Future[Mapping[str, str]] | None = None
        self._inflight_started_at = 0.0
        self._ahead_of = -1.0
        """The ``_data_started_at`` of the data a refresh ahead was started for."""

    @property
    def ttl(self) -> float:
        return self._ttl

    def _fresh(self, started_at: float, called_at: float) -> bool:
        return called_at - started_at < self._ttl

    async def get(self) -> Mapping[str, str]:
        """The ConfigMap's data, read-only; fetched again when older than the TTL."""
        called_at = self._clock.monotonic()
        while True:
            if self._data is not None and self._fresh(self._data_started_at, called_at):
                self._maybe_refresh_ahead(called_at)
                return self._data
            inflight = self._inflight
            if inflight is None:
                inflight = self._start_fetch()
            elif not (
                self._inflight_started_at >= called_at
                or self._fresh(self._inflight_started_at, called_at)
            ):
                # Started too long before this call: let it finish, then fetch anew.
                with contextlib.suppress(Exception):
                    await asyncio.shield(inflight)
                continue
            return await asyncio.shield(inflight)

    def _maybe_refresh_ahead(self, called_at: float) -> None:
        if (
            self._inflight is None
            and self._ahead_of != self._data_started_at
            and called_at - self._data_started_at >= self._ttl / 2
        ):
            self._ahead_of = self._data_started_at
            self._start_fetch()

    def _start_fetch(self) -> asyncio.Future[Mapping[str, str]]:
        started_at = self._clock.monotonic()
        task = asyncio.ensure_future(self._run_fetch(started_at))
        self._inflight = task
        self._inflight_started_at = started_at
        # Retrieve the error even when every waiter was cancelled, so it isn't reported
        # as never retrieved; the waiters that remain see it through the shield.
        task.add_done_callback(_consume_error)
        return task

    async def _run_fetch(self, started_at: float) -> Mapping[str, str]:
        try:
            data: Mapping[str, str] = MappingProxyType(dict(await self._fetch()))
            if self._data is None or started_at >= self._data_started_at:
                self._data = data
                self._data_started_at = started_at
            return data
        finally:
            self._inflight = None


def _consume_error(task: asyncio.Future[Mapping[str, str]]) -> None:
    if not task.cancelled():
        task.exception()
