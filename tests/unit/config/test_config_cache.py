"""The ConfigMap TTL cache: freshness, TTL 0, single flight, errors, cancellation, refresh
ahead."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping

import pytest

from omed.clock import FakeClock
from omed.config.cache import ConfigCache


class FakeConfigMap:
    """A ConfigMap whose reads are counted and can be held open or made to fail."""

    def __init__(self) -> None:
        self.data = {"deploy": '{"defaultDeploymentMode": "OMENative"}'}
        self.reads = 0
        self.gate: asyncio.Event | None = None
        self.fail_with: Exception | None = None

    async def fetch(self) -> Mapping[str, str]:
        self.reads += 1
        snapshot = dict(self.data)
        if self.gate is not None:
            await self.gate.wait()
        if self.fail_with is not None:
            raise self.fail_with
        return snapshot


async def settle() -> None:
    """Let every ready task run until all of them wait on something."""
    for _ in range(5):
        await asyncio.sleep(0)


def make(ttl: float) -> tuple[ConfigCache, FakeConfigMap, FakeClock]:
    clock = FakeClock()
    configmap = FakeConfigMap()
    return ConfigCache(fetch=configmap.fetch, ttl=ttl, clock=clock), configmap, clock


async def test_reads_within_ttl_share_one_fetch() -> None:
    cache, configmap, clock = make(30)
    first = await cache.get()
    clock.advance(14.9)
    second = await cache.get()
    await settle()
    assert first is second
    assert configmap.reads == 1


async def test_a_read_past_half_the_ttl_refreshes_ahead_without_waiting() -> None:
    cache, configmap, clock = make(30)
    first = await cache.get()
    configmap.data["deploy"] = "edited"
    configmap.gate = asyncio.Event()  # the refresh stays in flight until the gate opens
    clock.advance(15)
    assert await cache.get() is first  # fresh data at once, the fetch behind it
    await settle()
    assert configmap.reads == 2
    clock.advance(5)
    assert await cache.get() is first  # one refresh per generation: no second fetch
    await settle()
    assert configmap.reads == 2
    configmap.gate.set()
    await settle()
    refreshed = await cache.get()
    assert refreshed["deploy"] == "edited"
    assert configmap.reads == 2
    clock.advance(14)  # 19 s after the refresh started: its own half TTL has passed
    assert await cache.get() is refreshed
    await settle()
    assert configmap.reads == 3


async def test_a_refresh_ahead_keeps_the_freshness_bound() -> None:
    cache, configmap, clock = make(30)
    await cache.get()
    configmap.gate = asyncio.Event()
    clock.advance(15)
    await cache.get()
    await settle()
    configmap.data["deploy"] = "edited"
    clock.advance(16)  # the data is 31 s old: a call waits for the refresh (started 16 s ago)
    late = asyncio.create_task(cache.get())
    await settle()
    assert not late.done()
    configmap.gate.set()
    # The refresh read the ConfigMap before the edit, at 15 s: within the TTL of this call.
    assert (await late)["deploy"] == '{"defaultDeploymentMode": "OMENative"}'
    assert configmap.reads == 2


async def test_a_failed_refresh_ahead_is_not_retried_until_the_ttl() -> None:
    cache, configmap, clock = make(30)
    first = await cache.get()
    configmap.fail_with = RuntimeError("apiserver unavailable")
    clock.advance(20)
    assert await cache.get() is first
    await settle()
    assert await cache.get() is first
    await settle()
    assert configmap.reads == 2  # the failure was not retried ahead
    clock.advance(11)
    with pytest.raises(RuntimeError, match="apiserver unavailable"):
        await cache.get()
    assert configmap.reads == 3


async def test_an_idle_cache_fetches_nothing() -> None:
    cache, configmap, clock = make(30)
    await cache.get()
    clock.advance(600)
    await settle()
    assert configmap.reads == 1


async def test_edit_is_seen_after_ttl() -> None:
    cache, configmap, clock = make(30)
    assert (await cache.get())["deploy"] == '{"defaultDeploymentMode": "OMENative"}'
    configmap.data["deploy"] = '{"defaultDeploymentMode": "RawDeployment"}'
    clock.advance(10)
    assert (await cache.get())["deploy"] == '{"defaultDeploymentMode": "OMENative"}'
    clock.advance(20)
    assert (await cache.get())["deploy"] == '{"defaultDeploymentMode": "RawDeployment"}'
    assert configmap.reads == 2


async def test_ttl_zero_reads_every_time() -> None:
    cache, configmap, clock = make(0)
    await cache.get()
    await cache.get()
    clock.advance(0.001)
    configmap.data["deploy"] = "{}"
    assert (await cache.get())["deploy"] == "{}"
    assert configmap.reads == 3
    assert cache.ttl == 0


async def test_concurrent_callers_share_one_fetch() -> None:
    cache, configmap, _ = make(30)
    configmap.gate = asyncio.Event()
    waiters = [asyncio.create_task(cache.get()) for _ in range(10)]
    await settle()
    assert configmap.reads == 1
    configmap.gate.set()
    results = await asyncio.gather(*waiters)
    assert all(result is results[0] for result in results)
    assert configmap.reads == 1


async def test_ttl_zero_callers_at_the_same_instant_share_one_fetch() -> None:
    cache, configmap, _ = make(0)
    configmap.gate = asyncio.Event()
    waiters = [asyncio.create_task(cache.get()) for _ in range(5)]
    await settle()
    configmap.gate.set()
    await asyncio.gather(*waiters)
    assert configmap.reads == 1


async def test_ttl_zero_caller_after_a_fetch_started_waits_for_a_fresh_one() -> None:
    cache, configmap, clock = make(0)
    configmap.gate = asyncio.Event()
    early = asyncio.create_task(cache.get())
    await settle()
    clock.advance(1)
    configmap.data["deploy"] = "edited"  # after the first read began
    late = asyncio.create_task(cache.get())
    await settle()
    assert configmap.reads == 1  # one fetch at a time
    configmap.gate.set()
    assert (await early)["deploy"] == '{"defaultDeploymentMode": "OMENative"}'
    assert (await late)["deploy"] == "edited"
    assert configmap.reads == 2


async def test_fetch_error_propagates_and_does_not_poison() -> None:
    cache, configmap, _ = make(30)
    configmap.fail_with = RuntimeError("apiserver unavailable")
    with pytest.raises(RuntimeError, match="apiserver unavailable"):
        await cache.get()
    configmap.fail_with = None
    assert "deploy" in await cache.get()
    assert configmap.reads == 2


async def test_fetch_error_after_expiry_keeps_last_good_data_for_later() -> None:
    cache, configmap, clock = make(30)
    await cache.get()
    clock.advance(31)
    configmap.fail_with = RuntimeError("timeout")
    with pytest.raises(RuntimeError, match="timeout"):
        await cache.get()
    configmap.fail_with = None
    configmap.data = {"deploy": "new"}
    assert (await cache.get())["deploy"] == "new"
    assert configmap.reads == 3


async def test_concurrent_callers_all_see_the_error() -> None:
    cache, configmap, _ = make(30)
    configmap.gate = asyncio.Event()
    configmap.fail_with = RuntimeError("boom")
    waiters = [asyncio.create_task(cache.get()) for _ in range(3)]
    await settle()
    configmap.gate.set()
    results = await asyncio.gather(*waiters, return_exceptions=True)
    assert [str(result) for result in results] == ["boom"] * 3
    assert configmap.reads == 1


async def test_cancelled_caller_does_not_cancel_the_shared_fetch() -> None:
    cache, configmap, _ = make(30)
    configmap.gate = asyncio.Event()
    cancelled = asyncio.create_task(cache.get())
    survivor = asyncio.create_task(cache.get())
    await settle()
    cancelled.cancel()
    await settle()
    configmap.gate.set()
    assert "deploy" in await survivor
    assert cancelled.cancelled()
    assert configmap.reads == 1


async def test_returned_data_is_read_only() -> None:
    cache, _, _ = make(30)
    data = await cache.get()
    with pytest.raises(TypeError):
        data["deploy"] = "x"  # type: ignore[index]


def test_negative_ttl_is_refused() -> None:
    with pytest.raises(ValueError, match="0 or more"):
        ConfigCache(fetch=FakeConfigMap().fetch, ttl=-1, clock=FakeClock())
