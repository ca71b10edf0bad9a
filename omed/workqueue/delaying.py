"""Delayed adds: put a key on the queue once a delay has passed.

Why this module exists: a reconcile that asks to look again in 30 s, and a failure backed off
for 80 ms, both need "add this key later" without a task per key. This is client-go's
delaying queue on asyncio: a min-heap of (ready time, key) and at most one timer task, which
sleeps on the injected :class:`~omed.clock.Clock` until the earliest ready time, so tests
move a :class:`~omed.clock.FakeClock` instead of waiting.

Invariants:

* a key waits at most once: a second ``add_after`` of a waiting key keeps the earlier ready
  time (an earlier one replaces the later; a later one is dropped), as client-go does;
* while any key waits, exactly one timer task runs, sleeping until the earliest ready time;
  an ``add_after`` that becomes the new earliest restarts it; it ends when nothing waits;
* a key whose time has come goes through :meth:`Queue.add`, so dedup and the processing rule
  apply to it as to any add; ``add_after`` with a delay <= 0 is a plain ``add``;
* every ``add_after`` before shutdown counts one ``workqueue_retries_total`` (as client-go);
  ``shutdown`` drops every waiting key and stops the timer.

``add_after`` must be called from a task on the queue's event loop (it may start the timer).
"""

from __future__ import annotations

import asyncio
import heapq
import itertools

from omed.clock import Clock
from omed.workqueue.queue import Queue

# A heap entry: (ready_at, sequence, key). The sequence keeps FIFO order among equal ready
# times and means keys are never compared. An entry is live while ``_waiting[key] is entry``;
# a superseded one stays in the heap and is skipped when it surfaces.
_Entry = tuple[float, int, str]


class DelayingQueue(Queue):
    """A :class:`Queue` with :meth:`add_after`."""

    __slots__ = ("_heap", "_sequence", "_timer", "_waiting")

    def __init__(self, name: str | None = None, *, clock: Clock | None = None) -> None:
        super().__init__(name, clock=clock)
        self._heap: list[_Entry] = []
        self._waiting: dict[str, _Entry] = {}
        self._sequence = itertools.count()
        self._timer: asyncio.Task[None] | None = None

    @property
    def waiting(self) -> int:
        """Keys waiting for their delay to pass."""
        return len(self._waiting)

    def add_after(self, key: str, delay: float) -> None:
        """Add ``key`` once ``delay`` seconds have passed on the queue's clock."""
        if self._shutting_down:
            return
        metrics = self._metrics
        if metrics is not None:
            metrics.retried()
        if delay <= 0:
            self.add(key)
            return
        ready_at = self._clock.monotonic() + delay
        existing = self._waiting.get(key)
        if existing is not None and existing[0] <= ready_at:
            return
        entry: _Entry = (ready_at, next(self._sequence), key)
        heapq.heappush(self._heap, entry)
        self._waiting[key] = entry
        if self._heap[0] is entry:
            self._restart_timer()

    def shutdown(self) -> None:
        super().shutdown()
        self._heap.clear()
        self._waiting.clear()
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    # ---------------------------------------------------------------- internals

    def _restart_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        name = f"workqueue-timer-{self._name}" if self._name else "workqueue-timer"
        self._timer = asyncio.get_running_loop().create_task(self._run_timer(), name=name)

    async def _run_timer(self) -> None:
        heap = self._heap
        waiting = self._waiting
        now = self._clock.monotonic
        this_task = asyncio.current_task()
        try:
            while True:
                while heap and waiting.get(heap[0][2]) is not heap[0]:
                    heapq.heappop(heap)  # superseded by an earlier add_after
                if not heap:
                    return
                delay = heap[0][0] - now()
                if delay > 0:
                    # Re-check after waking: a loop may wake a timer a hair early.
                    await self._clock.sleep(delay)
                    continue
                key = heapq.heappop(heap)[2]
                del waiting[key]
                self.add(key)
        finally:
            if self._timer is this_task:
                self._timer = None
