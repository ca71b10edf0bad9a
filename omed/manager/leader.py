"""What only the leader runs: the event recorder, the shared informers and the controllers.

Why a unit of its own: these parts start and stop together, in a fixed order, and the
manager gates them on the Lease as one (controller-runtime's "leader election runnables").

Order (the invariant this class keeps):

* :meth:`LeaderWork.run`: start the event recorder's writer; start every informer the
  controllers registered; wait until all caches have synced (``cache_sync_timeout``, then
  it fails with ``timed out waiting for cache to be synced``); only then start every
  controller's workers. :attr:`synced` turns true between the last two steps, which is
  what the leader's ``/readyz`` reports.
* :meth:`LeaderWork.stop`: shut every controller's queue (with ``drain`` the reconciles in
  flight finish; without it they are cancelled at their next await), detach them from the
  informers, then stop the informers. Safe to call again, e.g. ``drain=False`` after a
  draining stop timed out.
* :meth:`LeaderWork.close`: flush the queued events (bounded) and stop the recorder. The
  manager calls it after it has released the Lease, so events never delay a handover.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import Final

from omed.events import EventRecorder
from omed.informers import InformerFactory
from omed.log import kv
from omed.manager.controllers import ManagedController

__all__ = ["CACHE_SYNC_TIMEOUT", "EVENT_FLUSH_TIMEOUT", "CacheSyncTimeout", "LeaderWork"]

log = logging.getLogger("omed.manager")

CACHE_SYNC_TIMEOUT: Final = 120.0
"""controller-runtime's default ``CacheSyncTimeout``: two minutes."""
EVENT_FLUSH_TIMEOUT: Final = 5.0
MSG_CACHE_SYNC_TIMEOUT: Final = "timed out waiting for cache to be synced"


class CacheSyncTimeout(Exception):
    def __init__(self) -> None:
        super().__init__(MSG_CACHE_SYNC_TIMEOUT)


class LeaderWork:
    """The leader's runnables; see the module docstring for the order they keep."""

    def __init__(
        self,
        *,
        controllers: Sequence[tuple[str, ManagedController]],
        informers: InformerFactory,
        recorder: EventRecorder | None,
        cache_sync_timeout: float = CACHE_SYNC_TIMEOUT,
    ) -> None:
        self._controllers = list(controllers)
        self._informers = informers
        self._recorder = recorder
        self._cache_sync_timeout = cache_sync_timeout
        self._synced = False
        self._stopping = False
        self._closed = False
        self._sync: asyncio.Future[bool] | None = None

    @property
    def synced(self) -> bool:
        """Whether every informer has synced and the workers were started."""
        return self._synced

    async def run(self) -> None:
        """Start everything, then run the workers until :meth:`stop` (or one fails)."""
        if self._stopping:
            return
        if self._recorder is not None:
            await self._recorder.start()
        if self._stopping:  # stopped while the recorder started: start no informer
            return
        log.info("Starting informers", extra=kv(count=len(self._informers.informers())))
        self._informers.start()
        self._sync = asyncio.ensure_future(
            self._informers.wait_for_cache_sync(timeout=self._cache_sync_timeout)
        )
        try:
            synced = await self._sync
        except asyncio.CancelledError:
            if self._stopping:
                return
            raise
        if self._stopping:
            return
        if not synced:
            raise CacheSyncTimeout()
        self._synced = True
        log.info(
            "Starting controllers",
            extra=kv(controllers=[name for name, _ in self._controllers]),
        )
        runs = [
            asyncio.create_task(controller.run(), name=f"controller-{name}")
            for name, controller in self._controllers
        ]
        try:
            done, _ = await asyncio.wait(runs, return_when=asyncio.FIRST_EXCEPTION)
            for task in done:
                if not task.cancelled() and (error := task.exception()) is not None:
                    raise error
            await asyncio.gather(*runs)
        finally:
            for task in runs:
                task.cancel()
            await asyncio.gather(*runs, return_exceptions=True)

    async def stop(self, *, drain: bool) -> None:
        """Stop the controllers (draining or not), then the informers."""
        self._stopping = True
        if self._sync is not None and not self._sync.done():
            self._sync.cancel()
        await asyncio.gather(
            *(controller.shutdown(drain=drain) for _, controller in self._controllers)
        )
        for _, controller in self._controllers:
            controller.close()  # idempotent: detaching twice is a no-op
        await self._informers.stop()

    async def close(self, *, flush: bool = True) -> None:
        """Write the events still queued (up to a few seconds), then stop the recorder."""
        if self._closed or self._recorder is None:
            return
        self._closed = True
        await self._recorder.stop(flush=flush, timeout=EVENT_FLUSH_TIMEOUT)
