"""N workers draining one rate-limiting queue into a reconciler.

Why this module exists: every omed controller has the same loop (take a key, reconcile it,
decide from the outcome whether and when to look again, release the key) and the same
metrics. This is controller-runtime's ``reconcileHandler`` and worker pool on asyncio.

What a reconcile's outcome does (controller-runtime's order of precedence):

====================================  ====================================  ===============
outcome                               queue                                 ``result`` label
====================================  ====================================  ===============
raises                                ``add_rate_limited`` (backoff grows)  ``error``
raises :class:`TerminalError`         nothing: not retried                  ``error``
``Result(requeue_after=s)``, s > 0    ``forget``, ``add_after(key, s)``     ``requeue_after``
``Result(requeue=True)``              ``add_rate_limited``                  ``requeue``
``Result()``                          ``forget`` (backoff resets)           ``success``
====================================  ====================================  ===============

Invariants:

* a worker never dies of its reconcile: anything raised is logged with the controller and the
  key, counted in ``controller_runtime_reconcile_errors_total`` and the ``error`` result, and
  the key is retried with backoff; the worker takes the next key;
* every key a worker takes is released with ``done`` whatever happens, cancellation included,
  so the queue's one-worker-per-key rule holds and a drain always ends;
* cancellation of the worker itself propagates (it is how ``shutdown(drain=False)`` stops
  in-flight reconciles); a ``CancelledError`` that escapes a reconcile while its worker is
  *not* being cancelled (it awaited something that was cancelled) is an error like any other.

Terminal errors. A reconcile that can't succeed until the object changes (a spec the models
refuse, a status that can't be decoded) raises :class:`TerminalError`, controller-runtime's
``reconcile.TerminalError``: it counts as an error (``controller_runtime_reconcile_errors_total``
and the ``error`` result) and in ``controller_runtime_terminal_reconcile_errors_total``, and
the key is not put back: the object's next change wakes it. The key's backoff is kept, as in
controller-runtime. A reconciler that has already said why (its own log line and event, once
per resourceVersion) raises it with ``reported=True``, and the controller logs nothing more,
so an object whose pods keep changing doesn't repeat an ERROR line on every pass.

Panics. Go's controller-runtime counts a recovered panic in
``controller_runtime_reconcile_panics_total`` and then handles it as an error. Python has no
panic/error split, so omed draws the line at "a bug in the reconciler, not a failure of
what it talks to": an ``AssertionError`` (a broken invariant), or a ``BaseException`` that
is not an ``Exception`` (and not cancellation), or an exception group holding either. See
:func:`is_panic`. Such a reconcile counts as a panic *and* as an error, and the key is
retried with backoff, like a recovered panic in Go. ``KeyboardInterrupt`` and ``SystemExit``
are counted as panics but then propagate (they ask the process to stop; controller-runtime
with ``RecoverPanic=false`` also counts, then re-panics).
"""

from __future__ import annotations

import asyncio
import logging
import math
from bisect import bisect_left
from collections import OrderedDict
from dataclasses import dataclass
from typing import Final, Protocol

from omed.clock import Clock, RealClock
from omed.workqueue.metrics import ControllerMetrics, monotonic_of
from omed.workqueue.ratelimit import RateLimiter
from omed.workqueue.ratelimiting_queue import RateLimitingQueue

DEFAULT_BUSY_WINDOW: Final = 5.0
"""Seconds that "more work than workers" counts as busy after it was seen (:meth:`busy`)."""

_log = logging.getLogger(__name__)

MSG_RECONCILER_ERROR: Final = "Reconciler error"
MSG_RECONCILER_PANIC: Final = "Observed a panic in reconciler"
MSG_STARTING_WORKERS: Final = "Starting workers"
MSG_ALL_WORKERS_FINISHED: Final = "All workers finished"


@dataclass(frozen=True, slots=True)
class Result:
    """What a reconcile asks for next. ``Result()`` means done: forget the key's backoff.

    ``requeue_after`` (seconds, > 0) looks again after that delay with the backoff reset; it
    wins over ``requeue``. ``requeue=True`` looks again after the key's backoff delay.
    """

    requeue: bool = False
    requeue_after: float | None = None

    def __post_init__(self) -> None:
        if self.requeue_after is not None and not (self.requeue_after >= 0):
            raise ValueError(f"requeue_after must be >= 0 seconds, got {self.requeue_after}")


class TerminalError(Exception):
    """A reconcile failure that retrying can't fix: counted, not retried (module docstring).

    ``reported``: the reconciler has logged it and recorded its event itself, so the
    controller's "Reconciler error" line would only repeat it.
    """

    def __init__(self, message: str, *, reported: bool = False) -> None:
        super().__init__(message)
        self.reported = reported


class Reconciler(Protocol):
    async def reconcile(self, key: str) -> Result:
        """Make the world match ``key``'s object; raise to be retried with backoff."""
        ...


def is_panic(exc: BaseException) -> bool:
    """Whether a reconcile that raised ``exc`` counts as a panic (see the module docstring)."""
    if isinstance(exc, BaseExceptionGroup):
        return (
            exc.subgroup(lambda e: not isinstance(e, BaseExceptionGroup) and is_panic(e))
            is not None
        )
    if isinstance(exc, asyncio.CancelledError):
        return False
    return isinstance(exc, AssertionError) or not isinstance(exc, Exception)


class Controller:
    """A named rate-limiting queue and ``workers`` tasks reconciling its keys.

    Event handlers enqueue with ``controller.queue.add(key)``. ``run()`` starts the workers
    and returns when they have all stopped; ``shutdown()`` stops them.
    """

    __slots__ = ("_busy_window", "_contended_at", "_metrics", "_name", "_now", "_queue",
                 "_recent", "_reconciler", "_started", "_tasks", "_workers")  # fmt: skip

    def __init__(
        self,
        *,
        name: str,
        reconciler: Reconciler,
        workers: int = 1,
        clock: Clock | None = None,
        rate_limiter: RateLimiter | None = None,
        busy_window: float = DEFAULT_BUSY_WINDOW,
    ) -> None:
        if workers < 1:
            raise ValueError(f"a controller needs at least 1 worker, got {workers}")
        clock = clock if clock is not None else RealClock()
        self._name = name
        self._reconciler = reconciler
        self._workers = workers
        self._now = monotonic_of(clock)
        self._queue = RateLimitingQueue(name, clock=clock, rate_limiter=rate_limiter)
        self._metrics = ControllerMetrics.for_controller(name)
        self._tasks: list[asyncio.Task[None]] = []
        self._started = False
        self._contended_at = -math.inf
        self._busy_window = busy_window
        self._recent: OrderedDict[str, float] = OrderedDict()
        """key -> when a worker last took it, oldest first, within the busy window."""

    @property
    def name(self) -> str:
        return self._name

    @property
    def queue(self) -> RateLimitingQueue:
        return self._queue

    @property
    def workers(self) -> int:
        return self._workers

    def busy(self) -> bool:
        """Whether this controller had more work than workers within the busy window (a few
        seconds): more distinct keys were taken than there are workers, or keys were queued
        with no idle worker to take them.

        A lone object's passes are one key, and one InferenceService's two or three
        InferenceReplicas are fewer keys than the 4 workers, so this says "many objects at
        once": a fleet converging, a resync. The controllers let informational status writes
        wait longer then (:mod:`omed.controllers.pacing`)."""
        return self._now() - self._contended_at < self._busy_window

    def _note_taken(self, key: str, now: float) -> None:
        """Record that a worker took ``key`` at ``now`` (for :meth:`busy`). O(1) amortized:
        the keys are kept oldest first and the stale ones leave from the front."""
        recent = self._recent
        recent[key] = now
        recent.move_to_end(key)
        workers = self._workers
        if len(recent) > workers:
            horizon = now - self._busy_window
            while len(recent) > workers and next(iter(recent.values())) < horizon:
                recent.popitem(last=False)
        if len(recent) > workers or len(self._queue) > workers - self._metrics.active_workers:
            self._contended_at = now

    async def run(self) -> None:
        """Run the workers until :meth:`shutdown` (or cancellation, which stops them now)."""
        if self._started:
            raise RuntimeError(f"controller {self._name} was started more than once")
        self._started = True
        metrics = self._metrics
        metrics.max_concurrent = self._workers
        metrics.active_workers = 0
        loop = asyncio.get_running_loop()
        self._tasks = [
            loop.create_task(self._work(), name=f"{self._name}-worker-{index}")
            for index in range(self._workers)
        ]
        _log.info(
            MSG_STARTING_WORKERS,
            extra={"kv": {"controller": self._name, "worker count": self._workers}},
        )
        try:
            await asyncio.wait(self._tasks)
        except asyncio.CancelledError:
            await self._stop_now()
            raise
        _log.info(MSG_ALL_WORKERS_FINISHED, extra={"kv": {"controller": self._name}})
        for task in self._tasks:
            if not task.cancelled() and (exc := task.exception()) is not None:
                raise exc

    async def shutdown(self, *, drain: bool = True) -> None:
        """Stop taking keys, then wait for the workers to stop.

        With ``drain`` the in-flight reconciles finish (their outcome still counts, though
        their requeues are dropped); without it they are cancelled. A draining shutdown that
        is itself cancelled (a timeout) leaves them running: call ``shutdown(drain=False)``.
        """
        if drain:
            await self._queue.shutdown_with_drain()
            if self._tasks:
                await asyncio.wait(self._tasks)
        else:
            await self._stop_now()

    # ---------------------------------------------------------------- internals

    async def _stop_now(self) -> None:
        self._queue.shutdown()
        for task in self._tasks:
            task.cancel()
        if self._tasks:
            await asyncio.wait(self._tasks)

    async def _work(self) -> None:
        # One frame per worker, not one per key: this loop is the hot path.
        queue = self._queue
        metrics = self._metrics
        reconcile = self._reconciler.reconcile
        reconcile_time = metrics.reconcile_time
        time_bounds = reconcile_time.bounds
        time_counts = reconcile_time.counts
        now = self._now
        while True:
            key = await queue.get()
            if key is None:
                return
            started = now()
            metrics.active_workers += 1
            self._note_taken(key, started)
            try:
                result = await reconcile(key)
            except asyncio.CancelledError as exc:
                task = asyncio.current_task()
                if task is None or task.cancelling():
                    raise
                self._failed(key, exc)
            except (KeyboardInterrupt, SystemExit) as exc:
                metrics.panics += 1
                self._log_failure(key, exc, panic=True)
                raise
            except BaseException as exc:
                self._failed(key, exc)
            else:
                self._finished(key, result)
            finally:
                took = now() - started  # FastHistogram.observe, inlined
                time_counts[bisect_left(time_bounds, took)] += 1
                reconcile_time.sum += took
                metrics.active_workers -= 1
                queue.done(key)

    def _finished(self, key: str, result: Result) -> None:
        if not isinstance(result, Result):
            self._failed(key, TypeError(f"reconcile returned {result!r}, not a Result"))
            return
        queue = self._queue
        metrics = self._metrics
        after = result.requeue_after
        if after is not None and after > 0:
            queue.forget(key)
            queue.add_after(key, after)
            metrics.requeue_after += 1
        elif result.requeue:
            queue.add_rate_limited(key)
            metrics.requeue += 1
        else:
            queue.forget(key)
            metrics.success += 1

    def _failed(self, key: str, exc: BaseException) -> None:
        metrics = self._metrics
        metrics.errors += 1
        metrics.error += 1
        if isinstance(exc, TerminalError):
            metrics.terminal_errors += 1
            if not exc.reported:
                self._log_failure(key, exc, panic=False)
            return
        panic = is_panic(exc)
        if panic:
            metrics.panics += 1
        self._queue.add_rate_limited(key)
        self._log_failure(key, exc, panic=panic)

    def _log_failure(self, key: str, exc: BaseException, *, panic: bool) -> None:
        _log.error(
            MSG_RECONCILER_PANIC if panic else MSG_RECONCILER_ERROR,
            exc_info=exc,
            extra={"kv": {"controller": self._name, "key": key}},
        )
