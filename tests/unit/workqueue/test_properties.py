"""Hypothesis: the queue against a model, and its promises under concurrent workers.

* A stateful machine drives a RateLimitingQueue (adds, delayed and rate-limited adds, forget,
  gets, dones, clock steps, shutdown) and checks it against a plain model of client-go's
  rules after every step.
* Property tests run many workers with random yield points: no key is ever held by two
  workers at once; every added key is processed after its last add (checked after a
  shutdown with drain); N adds of a queued key give one get; a draining shutdown starts
  nothing new and leaves nothing in flight.

Each example runs on a private event loop (these are sync tests) with a FakeClock; nothing
sleeps on the wall clock. Delays are dyadic (0.25, 0.5, ...) so clock arithmetic is exact.
"""

from __future__ import annotations

import asyncio
import itertools
from collections import defaultdict
from collections.abc import Coroutine
from typing import Any, TypeVar

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
)

from omed.clock import FakeClock
from omed.workqueue import (
    Controller,
    ItemExponentialFailureRateLimiter,
    Queue,
    RateLimitingQueue,
    Result,
)

from ._support import settle

T = TypeVar("T")
KEY_NAMES = ["a", "b", "c", "d"]
KEYS = st.sampled_from(KEY_NAMES)
DELAYS = st.sampled_from([0.0, 0.25, 0.5, 1.0, 2.0])
STEPS = st.sampled_from([0.25, 0.5, 1.0, 4.0])
BASE_DELAY = 0.25
MAX_DELAY = 4.0
MAX_HELD = 3


def run_private(coro: Coroutine[Any, Any, T]) -> T:
    """Run one example on its own loop. The timeout only turns a hang (a bug) into a failure."""
    loop = asyncio.new_event_loop()
    try:
        return loop.run_until_complete(asyncio.wait_for(coro, timeout=20))
    finally:
        loop.close()


class QueueModel(RuleBasedStateMachine):
    """client-go's rules written plainly, next to the real RateLimitingQueue."""

    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.clock = FakeClock()
        self.queue = RateLimitingQueue(
            clock=self.clock,
            rate_limiter=ItemExponentialFailureRateLimiter(
                base_delay=BASE_DELAY, max_delay=MAX_DELAY
            ),
        )
        self.fifo: list[str] = []
        self.dirty: set[str] = set()
        self.processing: set[str] = set()
        self.waiting: dict[str, tuple[float, int]] = {}
        self.sequence = itertools.count()
        self.failures: dict[str, int] = {}
        self.held: list[str] = []  # keys the machine's "workers" hold, in get order
        self.shut = False
        self.now = self.clock.monotonic()

    def _run(self, coro: Coroutine[Any, Any, T]) -> T:
        return self.loop.run_until_complete(coro)

    # Model ----------------------------------------------------------------

    def _model_add(self, key: str) -> None:
        if self.shut or key in self.dirty:
            return
        self.dirty.add(key)
        if key not in self.processing:
            self.fifo.append(key)

    def _model_add_after(self, key: str, delay: float) -> None:
        if self.shut:
            return
        if delay <= 0:
            self._model_add(key)
            return
        ready = self.now + delay
        existing = self.waiting.get(key)
        if existing is not None and existing[0] <= ready:
            return
        self.waiting[key] = (ready, next(self.sequence))

    # Rules ----------------------------------------------------------------

    @rule(key=KEYS)
    def add(self, key: str) -> None:
        self.queue.add(key)
        self._model_add(key)

    @rule(key=KEYS, delay=DELAYS)
    def add_after(self, key: str, delay: float) -> None:
        async def call() -> None:
            self.queue.add_after(key, delay)

        self._run(call())
        self._model_add_after(key, delay)

    @rule(key=KEYS)
    def add_rate_limited(self, key: str) -> None:
        async def call() -> None:
            self.queue.add_rate_limited(key)

        self._run(call())
        if self.shut:
            return
        failures = self.failures.get(key, 0)
        self.failures[key] = failures + 1
        self._model_add_after(key, min(BASE_DELAY * 2**failures, MAX_DELAY))

    @rule(key=KEYS)
    def forget(self, key: str) -> None:
        self.queue.forget(key)
        self.failures.pop(key, None)

    @rule(step=STEPS)
    def advance(self, step: float) -> None:
        self.clock.advance(step)
        self.now = self.clock.monotonic()
        self._run(settle())
        due = sorted((ready, seq, key) for key, (ready, seq) in self.waiting.items())
        for ready, _, key in due:
            if ready <= self.now:
                del self.waiting[key]
                self._model_add(key)

    @precondition(lambda self: len(self.held) < MAX_HELD and (self.fifo or self.shut))
    @rule()
    def get(self) -> None:
        getter = self.loop.create_task(self.queue.get())
        self._run(settle(3))
        assert getter.done(), "get() blocked although a key was queued"
        key = getter.result()
        if self.shut:
            assert key is None
            return
        expected = self.fifo.pop(0)
        assert key == expected
        assert key not in self.held, f"{key} handed to a second worker"
        self.dirty.remove(key)
        self.processing.add(key)
        self.held.append(key)

    @precondition(lambda self: not self.fifo and not self.shut)
    @rule()
    def get_blocks_when_empty(self) -> None:
        getter = self.loop.create_task(self.queue.get())
        self._run(settle(3))
        assert not getter.done(), "get() returned with nothing queued"
        getter.cancel()
        self._run(settle(3))
        assert getter.cancelled()

    @precondition(lambda self: bool(self.held))
    @rule(data=st.data())
    def done(self, data: st.DataObject) -> None:
        key = data.draw(st.sampled_from(self.held))
        self.held.remove(key)
        self.queue.done(key)
        self.processing.remove(key)
        if key in self.dirty:
            self.fifo.append(key)

    @precondition(lambda self: not self.shut)
    @rule()
    def shutdown(self) -> None:
        self.queue.shutdown()
        self.shut = True
        self.fifo.clear()
        self.dirty.clear()
        self.waiting.clear()

    # Invariants -------------------------------------------------------------

    @invariant()
    def matches_the_model(self) -> None:
        assert len(self.queue) == len(self.fifo)
        assert self.queue.waiting == len(self.waiting)
        for key in KEY_NAMES:
            assert self.queue.is_processing(key) == (key in self.processing)
            assert self.queue.num_requeues(key) == self.failures.get(key, 0)
        assert len(set(self.held)) == len(self.held)

    def teardown(self) -> None:
        self.queue.shutdown()
        self._run(settle())
        self.loop.close()


QueueModel.TestCase.settings = settings(max_examples=150, stateful_step_count=40, deadline=None)
TestQueueModel = QueueModel.TestCase


# --------------------------------------------------------------------------- properties

OPS = st.lists(
    st.one_of(
        st.tuples(st.just("add"), KEYS),
        st.tuples(st.just("yield"), st.integers(0, 3)),
    ),
    max_size=60,
)
WORK = st.dictionaries(KEYS, st.integers(0, 4))
WORKERS = st.integers(1, 8)
PROPERTY_SETTINGS = settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)


class Trace:
    """What the workers did, in one global order of events."""

    def __init__(self) -> None:
        self.clock = itertools.count()
        self.last_add: dict[str, int] = {}
        self.adds: dict[str, int] = defaultdict(int)
        self.starts: dict[str, list[int]] = defaultdict(list)
        self.held: set[str] = set()
        self.overlaps: list[str] = []

    def add(self, key: str) -> None:
        self.last_add[key] = next(self.clock)
        self.adds[key] += 1

    def start(self, key: str) -> None:
        if key in self.held:
            self.overlaps.append(key)
        self.held.add(key)
        self.starts[key].append(next(self.clock))

    def finish(self, key: str) -> None:
        self.held.discard(key)


async def _worker(queue: Queue, trace: Trace, work: dict[str, int]) -> None:
    while (key := await queue.get()) is not None:
        trace.start(key)
        for _ in range(work.get(key, 1)):
            await asyncio.sleep(0)
        trace.finish(key)
        queue.done(key)


async def _produce(queue: Queue, trace: Trace, ops: list[tuple[str, Any]]) -> None:
    for op, arg in ops:
        if op == "add":
            queue.add(arg)
            trace.add(arg)
        else:
            for _ in range(arg):
                await asyncio.sleep(0)


@PROPERTY_SETTINGS
@given(workers=WORKERS, ops=OPS, work=WORK)
def test_no_key_held_twice_and_every_add_processed_after_drain(
    workers: int, ops: list[tuple[str, Any]], work: dict[str, int]
) -> None:
    trace = Trace()

    async def scenario() -> None:
        queue = Queue()
        tasks = [asyncio.create_task(_worker(queue, trace, work)) for _ in range(workers)]
        await _produce(queue, trace, ops)
        await queue.wait_idle()
        await queue.shutdown_with_drain()
        await asyncio.gather(*tasks)

    run_private(scenario())
    assert trace.overlaps == []
    assert trace.held == set()
    for key, added in trace.last_add.items():
        assert trace.starts[key], f"{key} never processed"
        assert max(trace.starts[key]) > added, f"{key} not processed after its last add"
        assert len(trace.starts[key]) <= trace.adds[key]


@PROPERTY_SETTINGS
@given(workers=WORKERS, ops=OPS, work=WORK)
def test_a_draining_shutdown_starts_nothing_new_and_leaves_nothing_in_flight(
    workers: int, ops: list[tuple[str, Any]], work: dict[str, int]
) -> None:
    trace = Trace()
    shutdown_at: list[int] = []

    async def scenario() -> None:
        queue = Queue()
        tasks = [asyncio.create_task(_worker(queue, trace, work)) for _ in range(workers)]
        await _produce(queue, trace, ops)
        shutdown_at.append(next(trace.clock))
        await queue.shutdown_with_drain()
        assert trace.held == set(), "drain returned with keys in flight"
        await asyncio.gather(*tasks)

    run_private(scenario())
    assert trace.overlaps == []
    assert all(start < shutdown_at[0] for starts in trace.starts.values() for start in starts)


@PROPERTY_SETTINGS
@given(copies=st.integers(1, 50), others=st.lists(st.sampled_from(["p", "q", "r"])))
def test_n_adds_of_a_queued_key_give_one_get(copies: int, others: list[str]) -> None:
    async def scenario() -> list[str]:
        queue = Queue()
        for index in range(copies):
            queue.add("x")
            if index < len(others):
                queue.add(others[index])
        got = []
        while len(queue):
            key = await queue.get()
            assert key is not None
            got.append(key)
            queue.done(key)
        return got

    got = run_private(scenario())
    assert got.count("x") == 1
    assert sorted(got) == sorted({"x", *others[:copies]})


@PROPERTY_SETTINGS
@given(copies=st.integers(1, 50))
def test_n_adds_of_a_held_key_give_one_more_get(copies: int) -> None:
    async def scenario() -> list[str]:
        queue = Queue()
        queue.add("x")
        first = await queue.get()
        assert first == "x"
        for _ in range(copies):
            queue.add("x")
        queue.done("x")
        got = [first]
        while len(queue):
            key = await queue.get()
            assert key is not None
            got.append(key)
            queue.done(key)
        return got

    assert run_private(scenario()) == ["x", "x"]


@PROPERTY_SETTINGS
@given(
    workers=WORKERS,
    ops=OPS,
    work=WORK,
    failing=st.sets(KEYS),
)
def test_controller_workers_never_share_a_key_and_catch_up_after_errors(
    workers: int, ops: list[tuple[str, Any]], work: dict[str, int], failing: set[str]
) -> None:
    trace = Trace()
    attempts: dict[str, int] = defaultdict(int)

    class Reconciler:
        async def reconcile(self, key: str) -> Result:
            trace.start(key)
            attempts[key] += 1
            try:
                for _ in range(work.get(key, 1)):
                    await asyncio.sleep(0)
                if key in failing and attempts[key] == 1:
                    raise RuntimeError("first attempt fails")
                return Result()
            finally:
                trace.finish(key)

    async def scenario() -> None:
        clock = FakeClock()
        controller = Controller(
            name="property-controller", reconciler=Reconciler(), workers=workers, clock=clock
        )
        running = asyncio.create_task(controller.run())
        await _produce(controller.queue, trace, ops)
        # Retries wait on the fake clock: step it until nothing is queued or waiting.
        for _ in range(100):
            await controller.queue.wait_idle()
            if not controller.queue.waiting:
                break
            clock.advance(1.0)
            await settle(3)
        assert controller.queue.waiting == 0
        await controller.shutdown(drain=True)
        await running

    run_private(scenario())
    assert trace.overlaps == []
    for key, added in trace.last_add.items():
        assert max(trace.starts[key]) > added, f"{key} not reconciled after its last add"
