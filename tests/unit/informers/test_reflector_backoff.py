"""How long a reflector waits between attempts when the API server, or a proxy in front of
it, keeps failing: Retry-After is capped, and a stream that breaks or talks garbage every
time is retried on the back-off (0.8 s doubling to 30 s), not at once.

The watch transport is :class:`~tests.unit.informers._support.ScriptedApi` (no API server);
time is a ``FakeClock`` advanced in 0.1 s steps, and the back-off has no jitter
(``rand=0``) so the delays are exact: each gap between two watch opens is checked to within
one step.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import itertools
from collections.abc import AsyncIterator, Mapping
from typing import Any

import aiohttp
import pytest

from omed.clock import FakeClock
from omed.informers.backoff import Backoff
from omed.informers.reflector import Reflector
from omed.informers.transform import Obj
from omed.kube.errors import TooManyRequests, error_from_response
from omed.kube.resources import PODS

from ._support import ScriptedApi, page, pod, status, until

STEP = 0.1
DOUBLING = [0.8, 1.6, 3.2, 6.4, 12.8, 25.6, 30.0, 30.0, 30.0]
"""The back-off without jitter: client-go's 800 ms doubling to a 30 s cap."""


class TimedApi(ScriptedApi):
    """A :class:`ScriptedApi` that notes the fake time of every watch it is asked to open."""

    def __init__(self, clock: FakeClock) -> None:
        super().__init__()
        self.clock = clock
        self.opened_at: list[float] = []

    def stream(
        self,
        path: str,
        *,
        params: Mapping[str, Any] | None = None,
        timeout: float | None = None,
    ) -> contextlib.AbstractAsyncContextManager[AsyncIterator[bytes]]:
        self.opened_at.append(self.clock.monotonic())
        return super().stream(path, params=params, timeout=timeout)

    def gaps(self) -> list[float]:
        times = self.opened_at
        return [round(b - a, 6) for a, b in itertools.pairwise(times)]


class Sink:
    """A reflector sink that keeps the objects by name and whether the first list arrived."""

    def __init__(self) -> None:
        self.objects: dict[str, Obj] = {}
        self.synced = False

    def replace(self, items: dict[str, Obj], resource_version: str) -> None:
        self.objects = dict(items)
        self.synced = True

    def upsert(self, obj: Obj) -> None:
        self.objects[obj["metadata"]["name"]] = obj

    def remove(self, obj: Obj) -> None:
        self.objects.pop(obj["metadata"]["name"], None)


@dataclasses.dataclass
class World:
    api: TimedApi
    clock: FakeClock
    sink: Sink
    reflector: Reflector
    task: asyncio.Future[None] | None = None

    def start(self) -> None:
        """Run the reflector (after the test scripted its answers)."""
        self.task = asyncio.ensure_future(self.reflector.run())

    async def advance_until_watches(self, count: int, *, limit: float = 400.0) -> None:
        """Advance fake time in steps until ``count`` watches were asked for."""
        advanced = 0.0
        while len(self.api.watch_calls) < count:
            for _ in range(50):
                await asyncio.sleep(0)
            if len(self.api.watch_calls) >= count:
                break
            assert advanced <= limit, (
                f"{len(self.api.watch_calls)} of {count} watches after {limit}s; "
                f"gaps {self.api.gaps()}"
            )
            self.clock.advance(STEP)
            advanced += STEP


@pytest.fixture
async def world() -> AsyncIterator[World]:
    clock = FakeClock()
    api = TimedApi(clock)
    sink = Sink()
    reflector = Reflector(
        api,
        PODS,
        sink,
        clock=clock,
        backoff=Backoff(clock, rand=lambda: 0.0),
        rand=lambda: 0.0,
        watch_list=False,
    )
    world = World(api, clock, sink, reflector)
    try:
        yield world
    finally:
        if world.task is not None:
            world.task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await world.task


def assert_gaps(api: TimedApi, expected: list[float]) -> None:
    """Each gap between watch opens is the expected delay, to within one clock step."""
    gaps = api.gaps()
    assert len(gaps) == len(expected), gaps
    within = [want <= got <= want + STEP + 1e-6 for got, want in zip(gaps, expected, strict=True)]
    assert all(within), f"gaps {gaps}, expected {expected}"


# -- Retry-After ---------------------------------------------------------------------------


def throttled(retry_after: str) -> TooManyRequests:
    body = status(429, "TooManyRequests", "slow down")
    err = error_from_response(429, body, retry_after=retry_after)
    assert isinstance(err, TooManyRequests)
    return err


UNUSABLE_OR_HUGE = ["3600", "1e9", "inf", "nan", "-5"]


@pytest.mark.parametrize("retry_after", UNUSABLE_OR_HUGE)
async def test_a_throttled_watch_waits_at_most_the_cap(world: World, retry_after: str) -> None:
    world.api.pages.append(page([pod("a", 5)], 10))
    first = world.api.watch()
    first.bookmark(10)  # delivered something: a plain rewatch follows
    first.close()
    world.api.watches.append(throttled(retry_after))
    world.api.watch()
    world.start()
    await world.advance_until_watches(3, limit=31.0)
    assert world.sink.synced
    waited = world.api.gaps()[1]
    assert waited <= 30.0 + STEP, world.api.gaps()
    assert waited >= 0.8  # never less than the back-off: a negative value is no floor
    assert len(world.api.list_calls) == 1  # a 429 rewatches without a relist


@pytest.mark.parametrize("retry_after", UNUSABLE_OR_HUGE)
async def test_a_throttled_list_waits_at_most_the_cap(world: World, retry_after: str) -> None:
    world.api.pages += [throttled(retry_after), page([pod("a", 5)], 10)]
    world.api.watch()
    world.start()
    await until(lambda: len(world.api.list_calls) == 1)
    assert not world.sink.synced
    await world.advance_until_watches(1, limit=31.0)
    assert world.sink.synced and len(world.api.list_calls) == 2


# -- reconnect storms ------------------------------------------------------------------------


async def test_a_stream_that_breaks_after_one_event_every_time_backs_off(world: World) -> None:
    world.api.pages.append(page([pod("a", 5)], 10))
    for rv in range(11, 11 + len(DOUBLING)):
        watch = world.api.watch()
        watch.event("MODIFIED", pod("a", rv))
        watch.fail(aiohttp.ClientPayloadError("Response payload is not completed"))
    world.api.watch()  # the last one stays open
    world.start()
    await world.advance_until_watches(len(DOUBLING) + 1)
    assert_gaps(world.api, DOUBLING)
    # Each retry resumes from the event just received: nothing relisted, nothing lost.
    assert [c["resourceVersion"] for c in world.api.watch_calls] == [
        str(rv) for rv in range(10, 11 + len(DOUBLING))
    ]
    assert len(world.api.list_calls) == 1
    assert world.sink.objects["a"]["metadata"]["resourceVersion"] == str(10 + len(DOUBLING))


async def test_a_stream_of_garbage_every_time_backs_off_and_is_no_progress(
    world: World,
) -> None:
    # A proxy answering the watch with an HTML page: nothing decodes, so nothing counts as
    # progress; the watch is a failure (a relist, as client-go does on a decode error).
    world.api.pages.append(page([pod("a", 5)], 10))
    for _ in DOUBLING:
        world.api.watch().raw(b"<html><body>502 Bad Gateway</body></html>")
        world.api.pages.append(page([pod("a", 5)], 10))
    world.api.watch()
    world.start()
    await world.advance_until_watches(len(DOUBLING) + 1)
    assert_gaps(world.api, DOUBLING)
    assert len(world.api.list_calls) == 1 + len(DOUBLING)  # each garbage stream relisted
    assert {c["resourceVersion"] for c in world.api.watch_calls} == {"10"}


async def test_the_back_off_resets_after_two_quiet_minutes(world: World) -> None:
    world.api.pages.append(page([pod("a", 5)], 10))
    for rv in (11, 12, 13):
        watch = world.api.watch()
        watch.event("MODIFIED", pod("a", rv))
        watch.fail(ConnectionResetError(104, "Connection reset by peer"))
    healthy = world.api.watch()
    world.api.watch()
    world.start()
    await world.advance_until_watches(4)
    assert_gaps(world.api, [0.8, 1.6, 3.2])
    # Healthy for more than two minutes (a bookmark every 30 s), then one break: the wait is
    # back to the first step, not the fourth.
    for rv in range(20, 26):
        world.clock.advance(30.0)
        healthy.bookmark(rv)
        await until(lambda rv=rv: world.reflector.last_sync_resource_version == str(rv))
    healthy.fail(ConnectionResetError(104, "Connection reset by peer"))
    await until(lambda: healthy.finished)
    before = world.clock.monotonic()
    await world.advance_until_watches(5)
    assert 0.8 <= world.api.opened_at[-1] - before <= 0.8 + STEP + 1e-6
    assert world.api.watch_calls[-1]["resourceVersion"] == "25"
