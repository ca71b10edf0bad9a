"""Helpers for the work queue tests: yield to the loop without ever sleeping on the wall clock.

Delays and backoffs run on :class:`~omed.clock.FakeClock`; after ``clock.advance`` the woken
tasks still need loop turns to run, which ``settle`` and ``until`` give (``sleep(0)`` is one
turn of the loop, not a wait for time).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from omed.metrics import REGISTRY


async def settle(turns: int = 20) -> None:
    """Let every ready task run for ``turns`` loop iterations."""
    for _ in range(turns):
        await asyncio.sleep(0)


async def until(condition: Callable[[], bool], *, turns: int = 2000) -> None:
    """Yield to the loop until ``condition()`` holds; fail if it never does."""
    for _ in range(turns):
        if condition():
            return
        await asyncio.sleep(0)
    raise AssertionError("condition not reached")


def sample(metric: str, /, **labels: str) -> float:
    """A sample from the process registry (absent is a failure, not zero)."""
    value = REGISTRY.get_sample_value(metric, labels)
    assert value is not None, f"no sample {metric}{labels}"
    return value
