"""Rate limiters' arithmetic on a FakeClock, and the rate-limiting queue on top of them."""

from __future__ import annotations

import pytest

from omed.clock import FakeClock
from omed.workqueue import (
    BucketRateLimiter,
    ItemExponentialFailureRateLimiter,
    MaxOfRateLimiter,
    RateLimitingQueue,
    default_controller_rate_limiter,
)

from ._support import settle


def test_exponential_backoff_doubles_from_5ms_per_key() -> None:
    limiter = ItemExponentialFailureRateLimiter()
    assert [limiter.when("a") for _ in range(4)] == [0.005, 0.01, 0.02, 0.04]
    assert limiter.when("b") == 0.005
    assert limiter.num_requeues("a") == 4
    assert limiter.num_requeues("b") == 1
    assert limiter.num_requeues("never") == 0


def test_exponential_backoff_is_capped_at_1000s_and_never_overflows() -> None:
    limiter = ItemExponentialFailureRateLimiter()
    delays = [limiter.when("a") for _ in range(2000)]
    assert delays[17] == pytest.approx(0.005 * 2**17)  # 655 s, still under the cap
    assert delays[18] == 1000.0
    assert delays[-1] == 1000.0
    assert limiter.num_requeues("a") == 2000


def test_forget_resets_a_keys_backoff_only() -> None:
    limiter = ItemExponentialFailureRateLimiter()
    for _ in range(3):
        limiter.when("a")
        limiter.when("b")
    limiter.forget("a")
    limiter.forget("unknown")
    assert limiter.num_requeues("a") == 0
    assert limiter.when("a") == 0.005
    assert limiter.num_requeues("b") == 3


def test_exponential_limiter_refuses_nonsense() -> None:
    with pytest.raises(ValueError, match="base_delay"):
        ItemExponentialFailureRateLimiter(base_delay=0)
    with pytest.raises(ValueError, match="base_delay"):
        ItemExponentialFailureRateLimiter(base_delay=2, max_delay=1)


def test_bucket_allows_a_burst_of_100_then_10_per_second() -> None:
    clock = FakeClock()
    limiter = BucketRateLimiter(clock=clock)
    assert [limiter.when(f"k{i}") for i in range(100)] == [0.0] * 100
    assert limiter.when("x") == pytest.approx(0.1)
    assert limiter.when("y") == pytest.approx(0.2)
    clock.advance(1.0)  # 10 tokens back; 2 were owed
    assert [limiter.when("z") for _ in range(8)] == [0.0] * 8
    assert limiter.when("z") == pytest.approx(0.1)
    assert limiter.num_requeues("z") == 0


def test_bucket_refills_no_further_than_its_burst() -> None:
    clock = FakeClock()
    limiter = BucketRateLimiter(qps=1, burst=2, clock=clock)
    clock.advance(3600)
    assert [limiter.when("a") for _ in range(2)] == [0.0, 0.0]
    assert limiter.when("a") == pytest.approx(1.0)


def test_bucket_refuses_nonsense() -> None:
    with pytest.raises(ValueError, match="qps"):
        BucketRateLimiter(qps=0, clock=FakeClock())
    with pytest.raises(ValueError, match="burst"):
        BucketRateLimiter(burst=0, clock=FakeClock())


def test_max_of_takes_the_longest_delay_and_records_in_every_limiter() -> None:
    slow = ItemExponentialFailureRateLimiter(base_delay=1.0, max_delay=100.0)
    fast = ItemExponentialFailureRateLimiter(base_delay=0.5, max_delay=100.0)
    limiter = MaxOfRateLimiter(fast, slow)
    assert limiter.when("a") == 1.0
    assert limiter.when("a") == 2.0
    assert slow.num_requeues("a") == fast.num_requeues("a") == 2
    assert limiter.num_requeues("a") == 2
    limiter.forget("a")
    assert slow.num_requeues("a") == fast.num_requeues("a") == 0
    with pytest.raises(ValueError, match="at least one"):
        MaxOfRateLimiter()


def test_default_limiter_is_the_max_of_backoff_and_bucket() -> None:
    clock = FakeClock()
    limiter = default_controller_rate_limiter(clock)
    # 100 distinct keys fail once each: backoff 5 ms, bucket still has tokens.
    assert {limiter.when(f"k{i}") for i in range(100)} == {0.005}
    # The 101st failure overall waits for the bucket (0.1 s) although its backoff is 5 ms.
    assert limiter.when("k100") == pytest.approx(0.1)
    assert limiter.num_requeues("k100") == 1


async def test_add_rate_limited_adds_after_the_backoff() -> None:
    clock = FakeClock()
    queue = RateLimitingQueue(clock=clock)
    queue.add_rate_limited("a")
    queue.add_rate_limited("a")  # 2nd failure: 10 ms, but the 5 ms entry wins (earlier)
    assert queue.num_requeues("a") == 2
    clock.advance(0.004)
    await settle()
    assert len(queue) == 0
    clock.advance(0.002)
    await settle()
    assert await queue.get() == "a"
    queue.done("a")
    queue.add_rate_limited("a")  # 3rd failure: 20 ms
    clock.advance(0.015)
    await settle()
    assert len(queue) == 0
    clock.advance(0.01)
    await settle()
    assert len(queue) == 1
    queue.forget("a")
    assert queue.num_requeues("a") == 0
    assert len(queue) == 1  # forget does not unqueue
    queue.shutdown()


async def test_add_rate_limited_after_shutdown_records_nothing() -> None:
    queue = RateLimitingQueue(clock=FakeClock())
    queue.shutdown()
    queue.add_rate_limited("a")
    assert queue.num_requeues("a") == 0
    assert queue.waiting == 0


async def test_a_custom_limiter_is_used() -> None:
    clock = FakeClock()
    limiter = ItemExponentialFailureRateLimiter(base_delay=1.0, max_delay=8.0)
    queue = RateLimitingQueue(clock=clock, rate_limiter=limiter)
    assert queue.rate_limiter is limiter
    queue.add_rate_limited("a")
    clock.advance(0.5)
    await settle()
    assert len(queue) == 0
    clock.advance(0.5)
    await settle()
    assert len(queue) == 1
    queue.shutdown()
