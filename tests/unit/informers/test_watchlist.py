"""The reflector's watch-list: streamed initial events fill the cache at their bookmark, the
stream goes on as the watch, and a refusal, a 410 or a stream cut short go where client-go
goes (a consistent restream, or a paged LIST). The integration tests in
tests/integration/informers/test_watchlist_apiserver.py run the same paths against the real
API server."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from omed.clock import FakeClock
from omed.informers.informer import SharedInformer
from omed.informers.relist import DeletedFinalStateUnknown
from omed.kube.errors import error_from_response
from omed.kube.resources import PODS
from omed.metrics import REGISTRY

from ._support import Recorder, ScriptedApi, ScriptedWatch, advance_until, page, pod, status, until


def end_bookmark(watch: ScriptedWatch, rv: int) -> None:
    watch.event(
        "BOOKMARK",
        {
            "kind": "Pod",
            "metadata": {
                "resourceVersion": str(rv),
                "annotations": {"k8s.io/initial-events-end": "true"},
            },
        },
    )


def fallbacks(cause: str) -> float:
    labels = {"resource": "pods", "cause": cause}
    return REGISTRY.get_sample_value("omed_informer_watch_list_fallbacks_total", labels) or 0.0


class World:
    def __init__(self) -> None:
        self.api = ScriptedApi()
        self.clock = FakeClock()
        self.informer = SharedInformer(self.api, PODS, clock=self.clock)
        self.recorder = Recorder()
        self.informer.add_event_handler(self.recorder)


@pytest.fixture
async def world() -> AsyncIterator[World]:
    world = World()
    try:
        yield world
    finally:
        await world.informer.stop()


async def synced(world: World) -> ScriptedWatch:
    """Start with [a@5, b@6] streamed and bookmarked at 10; return the open stream."""
    first = world.api.watch()
    world.informer.start()
    await until(first.opened.is_set)
    first.event("ADDED", pod("a", 5))
    first.event("ADDED", pod("b", 6))
    end_bookmark(first, 10)
    await until(world.informer.has_synced)
    return first


async def test_initial_events_fill_the_cache_at_the_bookmark_and_the_stream_goes_on(
    world: World,
) -> None:
    first = world.api.watch()
    world.informer.start()
    await until(first.opened.is_set)
    assert first.params is not None
    assert first.params["resourceVersion"] == ""  # a consistent read
    assert first.params["sendInitialEvents"] is True
    assert first.params["resourceVersionMatch"] == "NotOlderThan"
    assert first.params["allowWatchBookmarks"] is True and first.params["watch"] is True
    first.event("ADDED", pod("a", 5))
    first.event("ADDED", pod("b", 6))
    await until(first._queue.empty)
    await asyncio.sleep(0)
    # Nothing reaches the store or the handlers before the bookmark.
    assert len(world.informer.store) == 0 and world.recorder.events == []
    assert not world.informer.has_synced()
    end_bookmark(first, 10)
    await until(world.informer.has_synced)
    assert world.recorder.events == [("add", "ns/a", "5"), ("add", "ns/b", "6")]
    assert world.informer.reflector.last_sync_resource_version == "10"
    # The same stream is now the watch.
    first.event("MODIFIED", pod("a", 11))
    await until(lambda: len(world.recorder.events) == 3)
    assert world.recorder.events[2] == ("update", "ns/a", "11")
    assert world.api.list_calls == [] and len(world.api.watch_calls) == 1
    assert world.informer.reflector.watch_lists == 1 and world.informer.reflector.lists == 0


async def test_gone_relists_by_watch_list_from_the_last_version_reusing_unchanged_objects(
    world: World,
) -> None:
    first = await synced(world)
    kept_b = world.informer.store.get("ns/b")
    first.event("MODIFIED", pod("a", 7))
    first.error(410, "Expired", "too old resource version: 7 (40)")
    second = world.api.watch()
    await advance_until(world.clock, second.opened.is_set)
    assert second.params is not None and second.params["resourceVersion"] == "7"
    assert second.params["sendInitialEvents"] is True
    # Meanwhile: a deleted and recreated as c; b unchanged.
    second.event("ADDED", pod("b", 6))
    second.event("ADDED", pod("c", 31))
    end_bookmark(second, 40)
    await until(lambda: "ns/c" in world.informer.store)
    assert world.informer.store.get("ns/b") is kept_b  # one copy of what did not change
    assert sorted(world.informer.store.keys()) == ["ns/b", "ns/c"]
    assert world.recorder.events[3:] == [("delete", "ns/a", "7"), ("add", "ns/c", "31")]
    kind, tombstone = world.recorder.objects[3]
    assert kind == "delete" and isinstance(tombstone, DeletedFinalStateUnknown)
    assert world.informer.reflector.last_sync_resource_version == "40"
    assert world.api.list_calls == []


async def test_gone_on_a_watch_list_streams_again_at_once_with_a_consistent_read(
    world: World,
) -> None:
    first = await synced(world)
    first.error(410, "Expired")
    gone = error_from_response(410, status(410, "Expired", "too old resource version"))
    world.api.watches.append(gone)
    third = world.api.watch()
    await advance_until(world.clock, third.opened.is_set)
    versions = [c["resourceVersion"] for c in world.api.watch_calls]
    assert versions == ["", "10", ""]
    end_bookmark(third, 50)
    await until(lambda: world.informer.reflector.last_sync_resource_version == "50")
    assert world.recorder.events[2:] == [("delete", "ns/a", "5"), ("delete", "ns/b", "6")]
    assert world.api.list_calls == []


@pytest.mark.parametrize("code", [400, 422])
async def test_a_refused_watch_list_falls_back_to_a_paged_list_and_is_remembered(
    world: World, code: int
) -> None:
    refused_before = fallbacks("refused")
    reason = "BadRequest" if code == 400 else "Invalid"
    world.api.watches.append(error_from_response(code, status(code, reason, "forbidden")))
    world.api.pages.append(page([pod("a", 5)], 10, cont="t"))
    world.api.pages.append(page([pod("b", 6)], 10))
    watch = world.api.watch()
    world.informer.start()
    await until(watch.opened.is_set)  # no backoff: listing at once
    assert [c.get("limit") for c in world.api.list_calls] == [500, 500]
    assert sorted(world.informer.store.keys()) == ["ns/a", "ns/b"]
    assert "sendInitialEvents" not in (watch.params or {})
    assert world.informer.reflector.watch_list_refused
    assert fallbacks("refused") == refused_before + 1
    # A relist lists, without asking for a watch-list again.
    watch.error(410, "Expired")
    world.api.pages.append(page([pod("b", 6)], 20))
    after = world.api.watch()
    await advance_until(world.clock, after.opened.is_set)
    assert len(world.api.list_calls) == 3
    assert world.api.list_calls[2]["resourceVersion"] == "10"
    assert world.api.list_calls[2]["limit"] == 500
    assert not any("sendInitialEvents" in c for c in world.api.watch_calls[1:])


async def test_a_stream_that_ends_before_the_bookmark_falls_back_once(world: World) -> None:
    ended_before = fallbacks("ended")
    first = world.api.watch()
    world.api.pages.append(page([pod("a", 5)], 10))
    watch = world.api.watch()
    world.informer.start()
    await until(first.opened.is_set)
    first.event("ADDED", pod("a", 5))
    first.close()
    await until(watch.opened.is_set)
    assert sorted(world.informer.store.keys()) == ["ns/a"]
    assert len(world.api.list_calls) == 1
    assert fallbacks("ended") == ended_before + 1
    assert not world.informer.reflector.watch_list_refused  # tried again at the next relist
    watch.error(410, "Expired")
    again = world.api.watch()
    await advance_until(world.clock, again.opened.is_set)
    assert again.params is not None and again.params.get("sendInitialEvents") is True


async def test_an_ordinary_bookmark_first_means_the_server_ignores_send_initial_events(
    world: World,
) -> None:
    first = world.api.watch()
    world.api.pages.append(page([pod("a", 5)], 10))
    watch = world.api.watch()
    world.informer.start()
    await until(first.opened.is_set)
    first.event("ADDED", pod("a", 5))
    first.bookmark(9)
    await until(watch.opened.is_set)
    assert world.informer.reflector.watch_list_refused
    assert sorted(world.informer.store.keys()) == ["ns/a"]


async def test_a_paged_relist_reuses_unchanged_cached_objects() -> None:
    api, clock = ScriptedApi(), FakeClock()
    api.pages.append(page([pod("a", 5), pod("b", 6)], 10))
    watch = api.watch()
    informer = SharedInformer(api, PODS, clock=clock, watch_list=False)
    informer.start()
    try:
        await until(watch.opened.is_set)
        kept = informer.store.get("ns/a")
        watch.error(410, "Expired")
        api.pages.append(page([pod("a", 5), pod("b", 8)], 20))
        after = api.watch()
        await advance_until(clock, after.opened.is_set)
        assert informer.store.get("ns/a") is kept
        assert informer.store.get("ns/b") is not None
        assert informer.store.get("ns/b")["metadata"]["resourceVersion"] == "8"  # type: ignore[index]
    finally:
        await informer.stop()


async def test_a_watch_cache_behind_etcd_is_streamed_again_after_a_backoff(world: World) -> None:
    behind = error_from_response(
        504, status(504, "Timeout", "Too large resource version: 277, current: 262")
    )
    world.api.watches += [behind, behind]
    third = world.api.watch()
    world.informer.start()
    # The first answer streams again at once (as after a 410), the second backs off.
    await until(lambda: len(world.api.watch_calls) == 2)
    await asyncio.sleep(0)
    assert not third.opened.is_set()
    waited = await advance_until(world.clock, third.opened.is_set)
    assert waited >= 0.8
    assert [c["resourceVersion"] for c in world.api.watch_calls] == ["", "", ""]
    assert all(c["sendInitialEvents"] is True for c in world.api.watch_calls)
    assert world.api.list_calls == []
    third.event("ADDED", pod("a", 5))
    end_bookmark(third, 300)
    await until(world.informer.has_synced)
