"""The controller's result handling, worker survival, shutdown and controller_runtime metrics."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

import pytest

from omed.clock import FakeClock
from omed.workqueue import Controller, Result, TerminalError, is_panic
from omed.workqueue.controller import MSG_RECONCILER_ERROR, MSG_RECONCILER_PANIC

from ._support import sample, settle, until


class PanicLike(BaseException):
    """A BaseException that is neither an Exception nor cancellation."""


Behaviour = Callable[[str, int], Result]


class ScriptedReconciler:
    """Calls ``behaviour(key, attempt)``: returns its Result or raises what it raises."""

    def __init__(self, behaviour: Behaviour | None = None) -> None:
        self.behaviour = behaviour or (lambda key, attempt: Result())
        self.calls: list[str] = []
        self.gate: asyncio.Event | None = None
        self.in_flight = 0

    def attempts(self, key: str) -> int:
        return self.calls.count(key)

    async def reconcile(self, key: str) -> Result:
        self.calls.append(key)
        self.in_flight += 1
        try:
            if self.gate is not None:
                await self.gate.wait()
            return self.behaviour(key, self.attempts(key))
        finally:
            self.in_flight -= 1


@asynccontextmanager
async def running(controller: Controller) -> AsyncIterator[asyncio.Task[None]]:
    task = asyncio.create_task(controller.run())
    await settle()
    try:
        yield task
    finally:
        await controller.shutdown(drain=False)
        await asyncio.wait_for(task, timeout=5)


def total(name: str, result: str) -> float:
    return sample("controller_runtime_reconcile_total", controller=name, result=result)


async def test_success_forgets_the_key_and_counts_success(unique_name: str) -> None:
    clock = FakeClock()

    def fail_once(key: str, attempt: int) -> Result:
        if attempt == 1:
            raise RuntimeError("transient")
        return Result()

    reconciler = ScriptedReconciler(fail_once)
    controller = Controller(name=unique_name, reconciler=reconciler, clock=clock)
    async with running(controller):
        controller.queue.add("ns/a")
        await until(lambda: controller.queue.num_requeues("ns/a") == 1)
        clock.advance(0.005)
        await until(lambda: total(unique_name, "success") == 1)
        assert controller.queue.num_requeues("ns/a") == 0
        assert reconciler.calls == ["ns/a", "ns/a"]
        assert controller.queue.waiting == 0
        assert total(unique_name, "error") == 1


async def test_an_error_requeues_rate_limited_and_is_logged_with_the_key(
    unique_name: str, caplog: pytest.LogCaptureFixture
) -> None:
    clock = FakeClock()

    def always_fail(key: str, attempt: int) -> Result:
        raise RuntimeError(f"boom {attempt}")

    reconciler = ScriptedReconciler(always_fail)
    controller = Controller(name=unique_name, reconciler=reconciler, clock=clock)
    caplog.set_level(logging.ERROR, logger="omed.workqueue.controller")
    async with running(controller):
        controller.queue.add("ns/a")
        await until(lambda: reconciler.attempts("ns/a") == 1)
        await settle()
        assert controller.queue.num_requeues("ns/a") == 1
        assert controller.queue.waiting == 1
        clock.advance(0.004)  # backoff is 5 ms
        await settle()
        assert reconciler.attempts("ns/a") == 1
        clock.advance(0.002)
        await until(lambda: reconciler.attempts("ns/a") == 2)
        await settle()
        assert controller.queue.num_requeues("ns/a") == 2  # next wait: 10 ms
        clock.advance(0.008)
        await settle()
        assert reconciler.attempts("ns/a") == 2
        clock.advance(0.004)
        await until(lambda: reconciler.attempts("ns/a") == 3)

    assert sample("controller_runtime_reconcile_errors_total", controller=unique_name) == 3
    assert total(unique_name, "error") == 3
    assert total(unique_name, "success") == 0
    assert sample("controller_runtime_reconcile_panics_total", controller=unique_name) == 0
    records = [r for r in caplog.records if r.getMessage() == MSG_RECONCILER_ERROR]
    assert len(records) == 3
    assert records[0].kv == {"controller": unique_name, "key": "ns/a"}  # type: ignore[attr-defined]
    assert records[0].exc_info is not None
    assert str(records[0].exc_info[1]) == "boom 1"


async def test_an_exception_does_not_kill_the_worker(unique_name: str) -> None:
    def fail_a(key: str, attempt: int) -> Result:
        if key == "a":
            raise ValueError("bad object")
        return Result()

    reconciler = ScriptedReconciler(fail_a)
    controller = Controller(name=unique_name, reconciler=reconciler, workers=1, clock=FakeClock())
    async with running(controller) as task:
        controller.queue.add("a")
        controller.queue.add("b")
        await until(lambda: reconciler.attempts("b") == 1)
        await until(lambda: total(unique_name, "success") == 1)
        assert not task.done()
        controller.queue.add("c")
        await until(lambda: total(unique_name, "success") == 2)
    assert total(unique_name, "error") == 1


async def test_requeue_after_forgets_then_adds_after_the_delay(unique_name: str) -> None:
    clock = FakeClock()

    def behaviour(key: str, attempt: int) -> Result:
        if attempt <= 2:
            raise RuntimeError("warming up")
        if attempt == 3:
            return Result(requeue_after=30.0, requeue=True)  # requeue_after wins
        return Result()

    reconciler = ScriptedReconciler(behaviour)
    controller = Controller(name=unique_name, reconciler=reconciler, clock=clock)
    async with running(controller):
        controller.queue.add("a")
        await until(lambda: reconciler.attempts("a") == 1)
        clock.advance(0.005)
        await until(lambda: reconciler.attempts("a") == 2)
        clock.advance(0.01)
        await until(lambda: total(unique_name, "requeue_after") == 1)
        assert controller.queue.num_requeues("a") == 0  # forgotten
        clock.advance(29.5)
        await settle()
        assert reconciler.attempts("a") == 3
        clock.advance(0.5)
        await until(lambda: total(unique_name, "success") == 1)
        assert reconciler.attempts("a") == 4
    assert total(unique_name, "requeue") == 0


async def test_requeue_true_requeues_rate_limited(unique_name: str) -> None:
    clock = FakeClock()

    def behaviour(key: str, attempt: int) -> Result:
        return Result(requeue=attempt < 3)

    reconciler = ScriptedReconciler(behaviour)
    controller = Controller(name=unique_name, reconciler=reconciler, clock=clock)
    async with running(controller):
        controller.queue.add("a")
        await until(lambda: total(unique_name, "requeue") == 1)
        assert controller.queue.num_requeues("a") == 1
        assert controller.queue.waiting == 1
        clock.advance(0.005)
        await until(lambda: total(unique_name, "requeue") == 2)
        assert controller.queue.num_requeues("a") == 2
        clock.advance(0.01)
        await until(lambda: total(unique_name, "success") == 1)
        assert controller.queue.num_requeues("a") == 0
    assert total(unique_name, "error") == 0


@pytest.mark.parametrize(
    ("raised", "panic"),
    [
        (RuntimeError("an error"), False),
        (AssertionError("broken invariant"), True),
        (PanicLike("not an Exception"), True),
    ],
)
async def test_panics_are_counted_apart_from_errors_and_the_worker_survives(
    unique_name: str,
    caplog: pytest.LogCaptureFixture,
    raised: BaseException,
    panic: bool,
) -> None:
    def behaviour(key: str, attempt: int) -> Result:
        if key == "bad":
            raise raised
        return Result()

    reconciler = ScriptedReconciler(behaviour)
    controller = Controller(name=unique_name, reconciler=reconciler, workers=1, clock=FakeClock())
    caplog.set_level(logging.ERROR, logger="omed.workqueue.controller")
    async with running(controller):
        controller.queue.add("bad")
        controller.queue.add("good")
        await until(lambda: total(unique_name, "success") == 1)
        assert controller.queue.num_requeues("bad") == 1  # retried with backoff either way
    panics = sample("controller_runtime_reconcile_panics_total", controller=unique_name)
    assert panics == (1 if panic else 0)
    assert sample("controller_runtime_reconcile_errors_total", controller=unique_name) == 1
    assert total(unique_name, "error") == 1
    expected = MSG_RECONCILER_PANIC if panic else MSG_RECONCILER_ERROR
    assert [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR] == [expected]


@pytest.mark.parametrize("reported", [False, True])
async def test_a_terminal_error_is_counted_and_not_retried(
    unique_name: str, caplog: pytest.LogCaptureFixture, reported: bool
) -> None:
    clock = FakeClock()

    def behaviour(key: str, attempt: int) -> Result:
        if key == "ns/broken":
            raise TerminalError("spec refused", reported=reported)
        return Result()

    reconciler = ScriptedReconciler(behaviour)
    controller = Controller(name=unique_name, reconciler=reconciler, workers=1, clock=clock)
    caplog.set_level(logging.ERROR, logger="omed.workqueue.controller")
    async with running(controller):
        controller.queue.add("ns/broken")
        controller.queue.add("ns/good")
        await until(lambda: total(unique_name, "success") == 1)
        clock.advance(3600)  # far past any backoff: nothing comes back
        await settle()
        assert reconciler.attempts("ns/broken") == 1
        assert controller.queue.waiting == 0 and len(controller.queue) == 0
        controller.queue.add("ns/broken")  # its next change wakes it
        await until(lambda: reconciler.attempts("ns/broken") == 2)
    terminal = sample("controller_runtime_terminal_reconcile_errors_total", controller=unique_name)
    assert terminal == 2
    assert sample("controller_runtime_reconcile_errors_total", controller=unique_name) == 2
    assert sample("controller_runtime_reconcile_panics_total", controller=unique_name) == 0
    assert total(unique_name, "error") == 2
    lines = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert lines == ([] if reported else [MSG_RECONCILER_ERROR] * 2)


async def test_a_stray_cancelled_error_from_a_reconcile_is_an_error(unique_name: str) -> None:
    class AwaitsCancelledFuture:
        async def reconcile(self, key: str) -> Result:
            future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            future.cancel()
            await future  # raises CancelledError, though nobody cancels the worker
            return Result()

    controller = Controller(name=unique_name, reconciler=AwaitsCancelledFuture(), clock=FakeClock())
    async with running(controller) as task:
        controller.queue.add("a")
        await until(lambda: total(unique_name, "error") == 1)
        await settle()
        assert not task.done()
        assert not controller.queue.is_processing("a")
        assert controller.queue.num_requeues("a") == 1


async def test_a_result_that_is_not_a_result_is_an_error(unique_name: str) -> None:
    class ReturnsNone:
        async def reconcile(self, key: str) -> Result:
            return None  # type: ignore[return-value]

    controller = Controller(name=unique_name, reconciler=ReturnsNone(), clock=FakeClock())
    async with running(controller):
        controller.queue.add("a")
        await until(lambda: total(unique_name, "error") == 1)
    assert total(unique_name, "success") == 0


def test_result_refuses_a_negative_delay() -> None:
    with pytest.raises(ValueError, match="requeue_after"):
        Result(requeue_after=-1.0)
    with pytest.raises(ValueError, match="requeue_after"):
        Result(requeue_after=float("nan"))
    assert Result(requeue_after=0).requeue_after == 0


def test_is_panic_draws_the_documented_line() -> None:
    assert not is_panic(RuntimeError())
    assert not is_panic(KeyError("x"))
    assert not is_panic(asyncio.CancelledError())
    assert is_panic(AssertionError())
    assert is_panic(PanicLike())
    assert is_panic(KeyboardInterrupt())
    assert is_panic(ExceptionGroup("g", [ValueError(), ExceptionGroup("h", [AssertionError()])]))
    assert not is_panic(ExceptionGroup("g", [ValueError(), KeyError()]))


async def test_shutdown_with_drain_finishes_in_flight_and_starts_nothing_new(
    unique_name: str,
) -> None:
    reconciler = ScriptedReconciler()
    reconciler.gate = asyncio.Event()
    controller = Controller(name=unique_name, reconciler=reconciler, workers=2, clock=FakeClock())
    run = asyncio.create_task(controller.run())
    for key in ["a", "b", "c"]:
        controller.queue.add(key)
    await until(lambda: reconciler.in_flight == 2)
    shutdown = asyncio.create_task(controller.shutdown(drain=True))
    await settle()
    assert not shutdown.done()
    reconciler.gate.set()
    await asyncio.wait_for(shutdown, timeout=5)
    await asyncio.wait_for(run, timeout=5)
    assert sorted(reconciler.calls) == ["a", "b"]  # "c" was queued, never started
    assert total(unique_name, "success") == 2
    assert sample("controller_runtime_active_workers", controller=unique_name) == 0


async def test_shutdown_without_drain_cancels_in_flight_reconciles(unique_name: str) -> None:
    reconciler = ScriptedReconciler()
    reconciler.gate = asyncio.Event()  # never set
    controller = Controller(name=unique_name, reconciler=reconciler, clock=FakeClock())
    run = asyncio.create_task(controller.run())
    controller.queue.add("a")
    await until(lambda: reconciler.in_flight == 1)
    await asyncio.wait_for(controller.shutdown(drain=False), timeout=5)
    await asyncio.wait_for(run, timeout=5)
    assert reconciler.in_flight == 0
    assert not controller.queue.is_processing("a")  # released by the worker's finally
    assert total(unique_name, "success") == 0
    assert total(unique_name, "error") == 0


async def test_cancelling_run_stops_the_workers(unique_name: str) -> None:
    reconciler = ScriptedReconciler()
    reconciler.gate = asyncio.Event()
    controller = Controller(name=unique_name, reconciler=reconciler, workers=3, clock=FakeClock())
    run = asyncio.create_task(controller.run())
    controller.queue.add("a")
    await until(lambda: reconciler.in_flight == 1)
    run.cancel()
    with pytest.raises(asyncio.CancelledError):
        await run
    assert reconciler.in_flight == 0
    assert controller.queue.shutting_down
    assert not controller.queue.is_processing("a")


async def test_run_twice_is_refused(unique_name: str) -> None:
    controller = Controller(name=unique_name, reconciler=ScriptedReconciler(), clock=FakeClock())
    async with running(controller):
        with pytest.raises(RuntimeError, match="started more than once"):
            await controller.run()


async def test_shutdown_before_run_makes_run_return(unique_name: str) -> None:
    controller = Controller(name=unique_name, reconciler=ScriptedReconciler(), clock=FakeClock())
    await controller.shutdown()
    await asyncio.wait_for(controller.run(), timeout=5)
    assert controller.queue.shutting_down


def test_a_controller_needs_a_worker(unique_name: str) -> None:
    with pytest.raises(ValueError, match="at least 1 worker"):
        Controller(name=unique_name, reconciler=ScriptedReconciler(), workers=0)


async def test_controller_metrics_have_controller_runtimes_names(unique_name: str) -> None:
    clock = FakeClock()
    reconciler = ScriptedReconciler()
    reconciler.gate = asyncio.Event()
    controller = Controller(name=unique_name, reconciler=reconciler, workers=4, clock=clock)
    # Every result label exists at zero from construction, as controller-runtime initialises.
    for result in ["success", "error", "requeue", "requeue_after"]:
        assert total(unique_name, result) == 0
    for counter in ("reconcile_errors", "terminal_reconcile_errors", "reconcile_panics"):
        assert sample(f"controller_runtime_{counter}_total", controller=unique_name) == 0
    async with running(controller):
        assert sample("controller_runtime_max_concurrent_reconciles", controller=unique_name) == 4
        controller.queue.add("a")
        controller.queue.add("b")
        await until(lambda: reconciler.in_flight == 2)
        assert sample("controller_runtime_active_workers", controller=unique_name) == 2
        clock.advance(0.3)
        reconciler.gate.set()
        await until(lambda: total(unique_name, "success") == 2)
        assert sample("controller_runtime_active_workers", controller=unique_name) == 0
    time_labels = {"controller": unique_name}
    assert sample("controller_runtime_reconcile_time_seconds_count", **time_labels) == 2
    assert sample("controller_runtime_reconcile_time_seconds_sum", **time_labels) == pytest.approx(
        0.6
    )
    assert sample("controller_runtime_reconcile_time_seconds_bucket", le="0.25", **time_labels) == 0
    assert sample("controller_runtime_reconcile_time_seconds_bucket", le="0.3", **time_labels) == 2
    # The controller's queue exports the workqueue series under the controller's name.
    queue_labels = {"name": unique_name, "controller": unique_name}
    assert sample("workqueue_adds_total", **queue_labels) == 2
    assert sample("workqueue_work_duration_seconds_count", **queue_labels) == 2


async def test_busy_means_more_work_than_workers_within_the_window(unique_name: str) -> None:
    clock = FakeClock()
    reconciler = ScriptedReconciler()
    controller = Controller(
        name=unique_name, reconciler=reconciler, workers=2, clock=clock, busy_window=5.0
    )

    async def one_by_one(*keys: str) -> None:
        for key in keys:
            wanted = len(reconciler.calls) + 1
            controller.queue.add(key)
            await until(lambda: len(reconciler.calls) == wanted)  # noqa: B023 - awaited here
            await until(lambda: reconciler.in_flight == 0)

    async with running(controller):
        # One object's passes, one after another: one key.
        await one_by_one("ns/lone", "ns/lone", "ns/lone")
        assert not controller.busy()
        clock.advance(6.0)
        # Two keys for two workers at once: each finds an idle worker, none waits.
        reconciler.gate = asyncio.Event()
        for key in ("ns/a", "ns/b"):
            controller.queue.add(key)
        await until(lambda: reconciler.in_flight == 2)
        assert not controller.busy()
        reconciler.gate.set()
        await until(lambda: reconciler.in_flight == 0)
        reconciler.gate = None
        clock.advance(6.0)
        # Four keys for two workers at once: two wait in the queue.
        reconciler.gate = asyncio.Event()
        for key in ("ns/c", "ns/d", "ns/e", "ns/f"):
            controller.queue.add(key)
        await until(lambda: reconciler.in_flight == 2)
        assert controller.busy()
        reconciler.gate.set()
        await until(lambda: len(reconciler.calls) == 9 and reconciler.in_flight == 0)
        reconciler.gate = None
        clock.advance(4.9)
        assert controller.busy()
        clock.advance(0.2)  # nothing of the kind for 5 s
        assert not controller.busy()
        # Three objects one after another within the window: more keys than workers, even
        # though none ever waited (a fleet trickling in).
        await one_by_one("ns/g", "ns/h")
        assert not controller.busy()
        clock.advance(1.0)
        await one_by_one("ns/i")
        assert controller.busy()
        # Keys older than the window don't count.
        clock.advance(5.1)
        await one_by_one("ns/j", "ns/k")
        assert not controller.busy()
