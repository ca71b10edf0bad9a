"""Work queue throughput: add/get/done cycles per second, printed as JSON.

Why this script exists: the controller's hot path is one add, one get and one done per
reconcile; the goal is >= 150,000 such cycles a second with metrics on. This measures,
on one event loop (uvloop when installed, else asyncio's), with 1 and 8 worker tasks:

* ``ratelimiting_queue_metrics``: omed's RateLimitingQueue with workqueue metrics on (what a
  controller uses);
* ``controller_metrics``: a whole omed Controller with a reconciler that returns
  ``Result()`` at once, i.e. the queue plus result handling and reconcile metrics;
* ``bare_queue``: omed's dirty/processing Queue with no limiter and no metrics;
* ``asyncio_queue``: ``asyncio.Queue`` (no dedup, no processing set), for scale.

Modes: ``batch`` (a producer adds a batch of distinct keys, then waits until the workers
have finished it; a worker that finds keys queued takes the next without yielding) and
``yield`` (each worker yields to the loop once between get and done, as a reconcile that
awaits anything does, so the 8 workers really interleave).

Each figure is the best of ``--repeats`` runs. ``cycles_per_s`` uses wall time;
``cycles_per_cpu_s`` uses this process's CPU time, which stays meaningful on a shared,
loaded machine (the load average is reported too).
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import platform
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

from omed.workqueue import Controller, Queue, RateLimitingQueue, Result

GOAL_CYCLES_PER_S = 150_000
_names = itertools.count()

Runner = Callable[[int, int, list[str], bool], Awaitable[None]]


async def _run_omed_queue(
    queue: Queue, workers: int, batches: int, keys: list[str], yield_: bool
) -> None:
    async def worker() -> None:
        while True:
            key = await queue.get()
            if key is None:
                return
            if yield_:
                await asyncio.sleep(0)
            queue.done(key)

    tasks = [asyncio.create_task(worker()) for _ in range(workers)]
    add = queue.add
    for _ in range(batches):
        for key in keys:
            add(key)
        await queue.wait_idle()
    queue.shutdown()
    await asyncio.gather(*tasks)


async def ratelimiting_queue_metrics(
    workers: int, batches: int, keys: list[str], yield_: bool
) -> None:
    queue = RateLimitingQueue(f"bench-{next(_names)}")
    await _run_omed_queue(queue, workers, batches, keys, yield_)


async def bare_queue(workers: int, batches: int, keys: list[str], yield_: bool) -> None:
    await _run_omed_queue(Queue(), workers, batches, keys, yield_)


_DONE = Result()


class _NoopReconciler:
    def __init__(self, yield_: bool) -> None:
        self._yield = yield_

    async def reconcile(self, key: str) -> Result:
        if self._yield:
            await asyncio.sleep(0)
        return _DONE


async def controller_metrics(workers: int, batches: int, keys: list[str], yield_: bool) -> None:
    controller = Controller(
        name=f"bench-controller-{next(_names)}", reconciler=_NoopReconciler(yield_), workers=workers
    )
    running = asyncio.create_task(controller.run())
    add = controller.queue.add
    for _ in range(batches):
        for key in keys:
            add(key)
        await controller.queue.wait_idle()
    await controller.shutdown()
    await running


async def asyncio_queue(workers: int, batches: int, keys: list[str], yield_: bool) -> None:
    queue: asyncio.Queue[str | None] = asyncio.Queue()

    async def worker() -> None:
        while True:
            key = await queue.get()
            if key is None:
                queue.task_done()
                return
            if yield_:
                await asyncio.sleep(0)
            queue.task_done()

    tasks = [asyncio.create_task(worker()) for _ in range(workers)]
    put = queue.put_nowait
    for _ in range(batches):
        for key in keys:
            put(key)
        await queue.join()
    for _ in tasks:
        put(None)
    await asyncio.gather(*tasks)


IMPLEMENTATIONS: dict[str, Runner] = {
    "ratelimiting_queue_metrics": ratelimiting_queue_metrics,
    "controller_metrics": controller_metrics,
    "bare_queue": bare_queue,
    "asyncio_queue": asyncio_queue,
}


def _loop_factory(choice: str) -> tuple[str, Callable[[], asyncio.AbstractEventLoop]]:
    if choice in ("auto", "uvloop"):
        try:
            import uvloop
        except ImportError:
            if choice == "uvloop":
                raise
        else:
            return "uvloop", uvloop.new_event_loop
    return "asyncio", asyncio.new_event_loop


def _measure(
    new_loop: Callable[[], asyncio.AbstractEventLoop],
    runner: Runner,
    *,
    workers: int,
    cycles: int,
    batch: int,
    yield_: bool,
) -> tuple[float, float]:
    keys = [f"default/object-{index}" for index in range(batch)]
    batches = max(1, cycles // batch)
    loop = new_loop()
    try:
        wall = time.perf_counter()
        cpu = time.process_time()
        loop.run_until_complete(runner(workers, batches, keys, yield_))
        cpu = time.process_time() - cpu
        wall = time.perf_counter() - wall
    finally:
        loop.close()
    done = batches * batch
    return done / wall, done / max(cpu, 1e-9)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cycles", type=int, default=200_000, help="cycles per run")
    parser.add_argument("--batch", type=int, default=1000, help="distinct keys per batch")
    parser.add_argument("--repeats", type=int, default=5, help="runs per figure; best counts")
    parser.add_argument("--loop", choices=["auto", "asyncio", "uvloop"], default="auto")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 8])
    parser.add_argument(
        "--modes", nargs="+", choices=["batch", "yield"], default=["batch", "yield"]
    )
    args = parser.parse_args(argv)

    loop_name, new_loop = _loop_factory(args.loop)
    results: dict[str, Any] = {}
    for mode in args.modes:
        for impl, runner in IMPLEMENTATIONS.items():
            for workers in args.workers:
                best_wall = 0.0
                best_cpu = 0.0
                for _ in range(args.repeats):
                    wall, cpu = _measure(
                        new_loop,
                        runner,
                        workers=workers,
                        cycles=args.cycles,
                        batch=args.batch,
                        yield_=mode == "yield",
                    )
                    best_wall = max(best_wall, wall)
                    best_cpu = max(best_cpu, cpu)
                results.setdefault(mode, {}).setdefault(impl, {})[f"workers_{workers}"] = {
                    "cycles_per_s": round(best_wall),
                    "cycles_per_cpu_s": round(best_cpu),
                }

    batch = results.get("batch", {}).get("ratelimiting_queue_metrics", {})
    goal_figures = [figure["cycles_per_s"] for figure in batch.values()]
    report = {
        "benchmark": "workqueue add/get/done cycles",
        "loop": loop_name,
        "python": platform.python_version(),
        "cpu_count": os.cpu_count(),
        "load_average_1m": round(os.getloadavg()[0], 2),
        "cycles_per_run": args.cycles,
        "batch": args.batch,
        "repeats": args.repeats,
        "goal_cycles_per_s_with_metrics": GOAL_CYCLES_PER_S,
        "goal_met_batch_wall": bool(goal_figures) and min(goal_figures) >= GOAL_CYCLES_PER_S,
        "results": results,
    }
    json.dump(report, sys.stdout, indent=2)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
