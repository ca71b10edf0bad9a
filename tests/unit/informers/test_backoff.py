"""The reflector's backoff: 0.8 s doubling to 30 s, jittered, reset after two healthy minutes."""

from __future__ import annotations

import asyncio

import pytest

from omed.clock import FakeClock
from omed.informers.backoff import Backoff


def test_doubles_to_the_cap_without_jitter() -> None:
    clock = FakeClock()
    backoff = Backoff(clock, rand=lambda: 0.0)
    delays = [backoff.next_delay() for _ in range(8)]
    assert delays == pytest.approx([0.8, 1.6, 3.2, 6.4, 12.8, 25.6, 30.0, 30.0])


def test_jitter_stretches_up_to_double_but_never_past_the_cap() -> None:
    clock = FakeClock()
    backoff = Backoff(clock, rand=lambda: 0.999)
    delays = [backoff.next_delay() for _ in range(7)]
    assert delays[0] == pytest.approx(0.8 * 1.999)
    assert max(delays) == 30.0
    assert all(0.8 <= d <= 30.0 for d in delays)


def test_resets_after_two_minutes_without_failure() -> None:
    clock = FakeClock()
    backoff = Backoff(clock, rand=lambda: 0.0)
    for _ in range(5):
        backoff.next_delay()
    clock.advance(119.0)
    assert backoff.next_delay() == pytest.approx(25.6)  # still failing recently
    clock.advance(120.0)
    assert backoff.next_delay() == pytest.approx(0.8)
    backoff.reset()
    assert backoff.next_delay() == pytest.approx(0.8)


async def test_wait_sleeps_on_the_injected_clock_at_least_the_floor() -> None:
    clock = FakeClock()
    backoff = Backoff(clock, rand=lambda: 0.0)
    waiter = asyncio.ensure_future(backoff.wait(at_least=5.0))
    await asyncio.sleep(0)
    clock.advance(4.9)
    await asyncio.sleep(0)
    assert not waiter.done()
    clock.advance(0.2)
    assert await waiter == pytest.approx(5.0)


@pytest.mark.parametrize("floor", [3600.0, 1e9, float("inf"), float("nan"), -5.0])
async def test_a_floor_never_stretches_a_wait_past_the_cap(floor: float) -> None:
    # A Retry-After that made it here unchecked still can't freeze the reflector: the wait
    # is at most ``cap``, and a floor that is no finite, non-negative number is no floor.
    clock = FakeClock()
    backoff = Backoff(clock, rand=lambda: 0.0)
    waiter = asyncio.ensure_future(backoff.wait(at_least=floor))
    await asyncio.sleep(0)
    clock.advance(30.0)
    await asyncio.sleep(0)
    assert waiter.done(), f"still waiting after 30 s for at_least={floor}"
    assert (await waiter) in (pytest.approx(30.0), pytest.approx(0.8))
