"""The dedup work queue that hands each key to one worker at a time.

Why this module exists: controllers are level-triggered, so an event only says "look at
this key again". Ten events for one object before a worker gets to it should cost one
reconcile, and two workers must never reconcile the same object at once, or they race each
other's writes. This is client-go's ``workqueue.Type`` on one asyncio event loop: a FIFO of
keys, a *dirty* set (keys that need processing) and a *processing* set (keys a worker holds).

Invariants (all methods run on the loop's thread, so no lock is needed; none of the
synchronous methods awaits, so each is atomic with respect to the other tasks):

* a key is in the FIFO at most once, and only if it is dirty and not being processed;
* ``add`` of a key already dirty does nothing (a key queued twice is queued once);
* ``get`` moves a key from dirty to processing; no other ``get`` can return it until its
  ``done``, so two workers never hold the same key;
* a key added while it is being processed stays dirty, out of the FIFO, and goes back in
  the FIFO at ``done``: it is processed exactly once more, after the current pass;
* after ``shutdown`` the queue accepts no key and hands out no key: every ``get``, waiting
  or future, returns ``None``; the keys still queued are dropped. Unlike client-go, which
  keeps handing out queued keys after ``ShutDown``, a stopping omed finishes only what is
  in flight: reconciles are level-triggered, so the next process (or leader) relists and
  sees those objects anyway. ``shutdown_with_drain`` also waits until every in-flight key
  is ``done``.
"""

from __future__ import annotations

import asyncio
from collections import deque
from contextlib import suppress

from omed.clock import Clock, RealClock
from omed.workqueue.metrics import QueueMetrics


class Queue:
    """Dedup FIFO of string keys with a processing set; see the module docstring.

    ``name`` turns the workqueue metrics on (series ``name=controller=<name>``); an unnamed
    queue keeps none. ``clock`` times the metrics (and delays, in subclasses).
    """

    __slots__ = (
        "__weakref__",
        "_clock",
        "_dirty",
        "_drain_waiters",
        "_getters",
        "_idle_waiters",
        "_metrics",
        "_name",
        "_processing",
        "_queue",
        "_shutting_down",
    )

    def __init__(self, name: str | None = None, *, clock: Clock | None = None) -> None:
        if name is not None and not name:
            raise ValueError("a queue name must not be empty")
        self._name = name
        self._clock: Clock = clock if clock is not None else RealClock()
        self._queue: deque[str] = deque()
        self._dirty: set[str] = set()
        self._processing: set[str] = set()
        # Futures of get() calls waiting for a key; resolved with None as a wake-up only,
        # the woken get() takes the key itself (a key is never parked in a future that a
        # cancelled task could drop).
        self._getters: deque[asyncio.Future[None]] = deque()
        self._drain_waiters: list[asyncio.Future[None]] = []
        self._idle_waiters: list[asyncio.Future[None]] = []
        self._shutting_down = False
        self._metrics: QueueMetrics | None = (
            QueueMetrics(name, clock=self._clock) if name is not None else None
        )

    @property
    def name(self) -> str | None:
        return self._name

    @property
    def shutting_down(self) -> bool:
        return self._shutting_down

    def __len__(self) -> int:
        """Keys waiting to be handed to a worker (not those re-added while processing)."""
        return len(self._queue)

    def is_processing(self, key: str) -> bool:
        """Whether a worker holds ``key`` now (between its ``get`` and its ``done``)."""
        return key in self._processing

    def add(self, key: str) -> None:
        """Mark ``key`` as needing processing; a no-op if it already does or on shutdown."""
        if self._shutting_down:
            return
        dirty = self._dirty
        if key in dirty:
            return
        dirty.add(key)
        metrics = self._metrics
        if metrics is not None:
            metrics.added(key)
        if key in self._processing:
            return  # queued again by done()
        self._queue.append(key)
        if self._getters:
            self._wake_getter()

    async def get(self) -> str | None:
        """The next key, which the caller now holds until ``done``; ``None`` on shutdown."""
        queue = self._queue
        while not queue:
            if self._shutting_down:
                return None
            await self._wait_for_key()
        key = queue.popleft()
        self._dirty.remove(key)
        self._processing.add(key)
        metrics = self._metrics
        if metrics is not None:
            metrics.got(key)
        return key

    def done(self, key: str) -> None:
        """Release ``key``; if it was added meanwhile, queue it again.

        Raises ``KeyError`` if ``key`` is not being processed: releasing a key twice would
        otherwise let two workers hold it.
        """
        processing = self._processing
        processing.remove(key)
        metrics = self._metrics
        if metrics is not None:
            metrics.done(key)
        if key in self._dirty:
            self._queue.append(key)
            if self._getters:
                self._wake_getter()
        elif not processing and (self._drain_waiters or (self._idle_waiters and not self._dirty)):
            self._notify_settled()

    def shutdown(self) -> None:
        """Accept and hand out no more keys; waiting ``get`` calls return ``None``."""
        if self._shutting_down:
            return
        self._shutting_down = True
        self._queue.clear()
        self._dirty.clear()
        if self._metrics is not None:
            self._metrics.cleared()
        getters = self._getters
        while getters:
            getter = getters.popleft()
            if not getter.done():
                getter.set_result(None)
        self._notify_settled()

    async def shutdown_with_drain(self) -> None:
        """``shutdown``, then wait until every key handed out before it is ``done``."""
        self.shutdown()
        while self._processing:
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._drain_waiters.append(waiter)
            try:
                await waiter
            finally:
                with suppress(ValueError):
                    self._drain_waiters.remove(waiter)

    async def wait_idle(self) -> None:
        """Wait until no key is queued or being processed (delayed adds do not count)."""
        while self._dirty or self._processing:
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._idle_waiters.append(waiter)
            try:
                await waiter
            finally:
                with suppress(ValueError):
                    self._idle_waiters.remove(waiter)

    # ---------------------------------------------------------------- internals

    async def _wait_for_key(self) -> None:
        getter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._getters.append(getter)
        try:
            await getter
        except BaseException:
            getter.cancel()
            with suppress(ValueError):
                self._getters.remove(getter)
            # Woken for a key but leaving (cancelled): hand the wake-up to the next getter,
            # or the key would sit in the FIFO while another worker waits.
            if self._queue and not getter.cancelled():
                self._wake_getter()
            raise

    def _wake_getter(self) -> None:
        getters = self._getters
        while getters:
            getter = getters.popleft()
            if not getter.done():
                getter.set_result(None)
                return

    def _notify_settled(self) -> None:
        if self._processing:
            return
        for waiters in (
            self._drain_waiters,
            self._idle_waiters if not self._dirty else [],
        ):
            for waiter in waiters:
                if not waiter.done():
                    waiter.set_result(None)
