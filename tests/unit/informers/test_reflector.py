"""The reflector's list/watch rules, against a scripted API (see _support for the fake).

Each test pins what is requested (resourceVersion, limit, continue, bookmarks, timeout) and
what the handlers see, for one rule of omed/informers/reflector.py's docstring.
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from functools import partial

import aiohttp
import pytest

from omed.clock import FakeClock
from omed.informers.informer import SharedInformer
from omed.informers.relist import DeletedFinalStateUnknown
from omed.informers.transform import Obj
from omed.kube.errors import Gone, ServerError, TooManyRequests, error_from_response
from omed.kube.resources import PODS

from ._support import (
    Recorder,
    ScriptedApi,
    ScriptedWatch,
    advance_until,
    page,
    pod,
    status,
    until,
)


@dataclasses.dataclass
class Running:
    api: ScriptedApi
    clock: FakeClock
    informer: SharedInformer
    recorder: Recorder
    watch: ScriptedWatch  # the watch opened after the first list


@pytest.fixture
async def running() -> AsyncIterator[Running]:
    """An informer over [a@5, b@6] listed at version 10, with its first watch open."""
    api, clock = ScriptedApi(), FakeClock()
    api.pages.append(page([pod("a", 5), pod("b", 6)], 10))
    watch = api.watch()
    informer = SharedInformer(api, PODS, clock=clock, watch_list=False)
    recorder = Recorder()
    informer.add_event_handler(recorder)
    informer.start()
    try:
        await until(lambda: informer.has_synced() and watch.opened.is_set())
        yield Running(api, clock, informer, recorder, watch)
    finally:
        await informer.stop()


def gone(message: str = "too old resource version: 10 (40)") -> Gone:
    err = error_from_response(410, status(410, "Expired", message))
    assert isinstance(err, Gone)
    return err


async def test_first_list_pages_at_version_zero_then_watches_with_bookmarks() -> None:
    api, clock = ScriptedApi(), FakeClock()
    api.pages += [page([pod("a", 5)], 10, cont="token-1"), page([pod("b", 6)], 10)]
    watch = api.watch()
    informer = SharedInformer(
        api, PODS, namespace="ns", label_selector="x", clock=clock, watch_list=False
    )
    recorder = Recorder()
    informer.add_event_handler(recorder)
    informer.start()
    try:
        assert await informer.wait_synced(timeout=5)
        await until(watch.opened.is_set)
    finally:
        await informer.stop()
    assert api.list_calls == [
        {"namespace": "ns", "labelSelector": "x", "fieldSelector": None,
         "resourceVersion": "0", "limit": 500},
        {"namespace": "ns", "labelSelector": "x", "fieldSelector": None,
         "limit": 500, "_continue": "token-1"},
    ]  # fmt: skip
    assert recorder.events == [("add", "ns/a", "5"), ("add", "ns/b", "6")]
    assert informer.store.get("ns/a") == pod("a", 5)  # list items get apiVersion and kind
    params = watch.params
    assert params is not None
    assert params["path"] == "/api/v1/namespaces/ns/pods"
    assert params["watch"] is True and params["allowWatchBookmarks"] is True
    assert params["resourceVersion"] == "10" and params["labelSelector"] == "x"
    assert 300 <= params["timeoutSeconds"] < 600
    assert params["timeout"] > params["timeoutSeconds"]


async def test_watch_events_reach_the_store_before_the_handlers(running: Running) -> None:
    store = running.informer.store
    seen: list[bool] = []

    class StoreReader:
        def on_add(self, obj: Obj) -> None:
            seen.append(store.get_object(obj) is obj)

        def on_update(self, old: Obj, new: Obj) -> None:
            seen.append(store.get("ns/a") is new and old["metadata"]["resourceVersion"] == "5")

        def on_delete(self, obj: Obj) -> None:
            seen.append(store.get("ns/b") is None)

    running.informer.add_event_handler(StoreReader())
    running.watch.event("ADDED", pod("c", 11))
    running.watch.event("MODIFIED", pod("a", 12))
    running.watch.event("DELETED", pod("b", 13))
    running.watch.bookmark(20)
    await until(lambda: running.informer.reflector.last_sync_resource_version == "20")
    assert running.recorder.events[2:] == [
        ("add", "ns/c", "11"),
        ("update", "ns/a", "12"),
        ("delete", "ns/b", "13"),
    ]
    assert sorted(store.keys()) == ["ns/a", "ns/c"]
    assert seen == [True, True, True, True, True]  # two replayed adds, then the three events


async def test_closed_watch_resumes_from_the_last_version_without_a_list(
    running: Running,
) -> None:
    running.watch.event("ADDED", pod("c", 11))
    running.watch.bookmark(15)
    running.watch.close()
    second = running.api.watch()
    await until(second.opened.is_set)
    assert second.params is not None and second.params["resourceVersion"] == "15"
    assert len(running.api.list_calls) == 1


async def test_broken_stream_after_progress_resumes_after_one_backoff_step(
    running: Running,
) -> None:
    running.watch.event("MODIFIED", pod("a", 11))
    running.watch.fail(aiohttp.ClientPayloadError("Response payload is not completed"))
    second = running.api.watch()
    await until(lambda: running.watch.finished)
    assert not second.opened.is_set()  # not at once: a stream that always breaks is a storm
    waited = await advance_until(running.clock, second.opened.is_set)
    assert 0.8 <= waited <= 1.7  # the first step, jittered (test_reflector_backoff: the rest)
    assert second.params is not None and second.params["resourceVersion"] == "11"
    assert len(running.api.list_calls) == 1


async def test_gone_in_the_stream_relists_from_the_last_version_and_loses_no_delete(
    running: Running,
) -> None:
    running.watch.event("MODIFIED", pod("a", 7))
    running.watch.error(410, "Expired", "too old resource version: 7 (40)")
    # While disconnected: b was deleted, a modified, c created.
    running.api.pages.append(page([pod("a", 30), pod("c", 31)], 40))
    after = running.api.watch()
    await advance_until(running.clock, after.opened.is_set)
    relist = running.api.list_calls[1]
    assert relist["resourceVersion"] == "7"
    assert relist["limit"] == 500  # paged: one page of decoded objects at a time
    assert running.recorder.events[3:] == [
        ("delete", "ns/b", "6"),
        ("add", "ns/c", "31"),
        ("update", "ns/a", "30"),
    ]
    kind, deleted = running.recorder.objects[3]
    assert kind == "delete" and isinstance(deleted, DeletedFinalStateUnknown)
    assert deleted.key == "ns/b"
    assert after.params is not None and after.params["resourceVersion"] == "40"
    assert sorted(running.informer.store.keys()) == ["ns/a", "ns/c"]


async def test_gone_when_opening_the_watch_relists(running: Running) -> None:
    running.watch.bookmark(10)  # delivered something: a plain rewatch follows
    running.watch.close()
    running.api.watches.append(gone())
    running.api.pages.append(page([pod("a", 5)], 50))
    after = running.api.watch()
    await advance_until(running.clock, after.opened.is_set)
    assert running.api.list_calls[1]["resourceVersion"] == "10"
    assert running.recorder.events[2:] == [("delete", "ns/b", "6")]


async def test_list_gone_or_too_large_retries_at_once_with_a_consistent_read() -> None:
    api, clock = ScriptedApi(), FakeClock()
    too_large = error_from_response(
        504, status(504, "Timeout", "Too large resource version: 99, current: 50")
    )
    api.pages += [too_large, page([pod("a", 5)], 60)]
    watch = api.watch()
    informer = SharedInformer(api, PODS, clock=clock, watch_list=False)
    informer.start()
    try:
        await until(watch.opened.is_set)  # no fake time passed: no backoff
        assert [c.get("resourceVersion") for c in api.list_calls] == ["0", None]
        assert api.list_calls[1]["limit"] == 500  # a consistent read from etcd is paged
        # Later, a 410 on a relist's LIST goes the same way.
        watch.error(410, "Expired")
        api.pages += [gone(), page([pod("a", 5)], 70)]
        after = api.watch()
        await advance_until(clock, after.opened.is_set)
        assert [c.get("resourceVersion") for c in api.list_calls[2:]] == ["60", None]
        assert after.params is not None and after.params["resourceVersion"] == "70"
    finally:
        await informer.stop()


async def test_expired_continue_token_lists_again_paged_from_the_latest_state() -> None:
    api, clock = ScriptedApi(), FakeClock()
    api.pages += [
        page([pod("a", 5)], 10, cont="t"),
        gone(),
        page([pod("a", 5)], 12, cont="u"),
        page([pod("b", 6)], 12),
    ]
    watch = api.watch()
    informer = SharedInformer(api, PODS, clock=clock, watch_list=False)
    informer.start()
    try:
        await until(watch.opened.is_set)
    finally:
        await informer.stop()
    again = api.list_calls[2]
    # One page of decoded objects at a time still: the restart is paged, at the latest state.
    assert again.get("limit") == 500 and not again.get("resourceVersion")
    assert "_continue" not in again or again["_continue"] is None
    assert api.list_calls[3].get("_continue") == "u"
    assert sorted(informer.store.keys()) == ["ns/a", "ns/b"]
    assert watch.params is not None and watch.params["resourceVersion"] == "12"


async def test_continue_token_expired_twice_lists_everything_in_one_request() -> None:
    api, clock = ScriptedApi(), FakeClock()
    api.pages += [
        page([pod("a", 5)], 10, cont="t"),
        gone(),
        page([pod("a", 5)], 12, cont="u"),
        gone(),
        page([pod("a", 5), pod("b", 6)], 13),
    ]
    watch = api.watch()
    informer = SharedInformer(api, PODS, clock=clock, watch_list=False)
    informer.start()
    try:
        await until(watch.opened.is_set)
    finally:
        await informer.stop()
    full = api.list_calls[4]
    assert full.get("resourceVersion") == "0" and "limit" not in full and "_continue" not in full
    assert sorted(informer.store.keys()) == ["ns/a", "ns/b"]


async def test_refused_connection_backs_off_and_rewatches_without_a_list(
    running: Running,
) -> None:
    running.watch.bookmark(10)  # delivered something: a plain rewatch follows
    running.watch.close()
    running.api.watches.append(ConnectionRefusedError(111, "Connect call failed"))
    after = running.api.watch()
    await until(lambda: len(running.api.watch_calls) == 2)
    waited = await advance_until(running.clock, after.opened.is_set)
    assert waited >= 0.8
    assert [c["resourceVersion"] for c in running.api.watch_calls] == ["10", "10", "10"]
    assert len(running.api.list_calls) == 1


async def test_too_many_requests_waits_for_retry_after(running: Running) -> None:
    running.watch.bookmark(10)  # delivered something: a plain rewatch follows
    running.watch.close()
    running.api.watches.append(
        TooManyRequests(429, "TooManyRequests", "slow down", retry_after=7.0)
    )
    after = running.api.watch()
    await until(lambda: len(running.api.watch_calls) == 2)
    waited = await advance_until(running.clock, after.opened.is_set)
    assert waited >= 7.0
    assert len(running.api.list_calls) == 1


async def test_error_event_other_than_gone_relists_after_backoff(running: Running) -> None:
    running.watch.error(500, "InternalError", "etcd leader changed")
    running.api.pages.append(page([pod("a", 5), pod("b", 6)], 11))
    after = running.api.watch()
    await until(lambda: running.watch.finished)
    assert len(running.api.list_calls) == 1  # not before the backoff
    waited = await advance_until(running.clock, after.opened.is_set)
    assert waited >= 0.8
    assert len(running.api.list_calls) == 2
    assert running.recorder.events[2:] == []  # nothing changed: nothing redelivered


async def test_an_unknown_event_type_is_logged_and_skipped_and_the_watch_goes_on(
    running: Running, caplog: pytest.LogCaptureFixture
) -> None:
    running.watch.event("SURPRISE", pod("c", 11))
    running.watch.event("ADDED", pod("d", 12))
    await until(lambda: _at_version(running.informer, "12"))
    assert running.recorder.events[2:] == [("add", "ns/d", "12")]
    assert len(running.api.list_calls) == 1 and not running.watch.finished
    (line,) = [r for r in caplog.records if r.getMessage() == "Unknown watch event type"]
    assert line.levelname == "WARNING"


def _at_version(informer: SharedInformer, rv: str) -> bool:
    return informer.reflector.last_sync_resource_version == rv


async def test_silent_stream_is_replaced_but_bookmarks_keep_it(running: Running) -> None:
    after = running.api.watch()
    for rv in range(11, 16):  # a bookmark every 30 s keeps the stream for 150 s
        running.clock.advance(30.0)
        running.watch.bookmark(rv)
        await until(partial(_at_version, running.informer, str(rv)))
    assert not after.opened.is_set()
    waited = await advance_until(running.clock, after.opened.is_set, step=1.0)
    assert 70.0 <= waited <= 81.0
    assert running.watch.finished
    assert after.params is not None and after.params["resourceVersion"] == "15"
    assert len(running.api.list_calls) == 1


async def test_short_empty_watch_counts_as_a_failure(running: Running) -> None:
    running.watch.close()  # ended at once, nothing delivered
    running.api.pages.append(page([pod("a", 5)], 12))
    after = running.api.watch()
    await until(lambda: running.watch.finished)
    waited = await advance_until(running.clock, after.opened.is_set)
    assert waited >= 0.8
    assert len(running.api.list_calls) == 2


async def test_list_failures_back_off_and_retry() -> None:
    api, clock = ScriptedApi(), FakeClock()
    api.pages += [
        ServerError(500, "InternalError", "boom"),
        ConnectionRefusedError(111, "refused"),
        page([pod("a", 5)], 10),
    ]
    watch = api.watch()
    informer = SharedInformer(api, PODS, clock=clock, watch_list=False)
    informer.start()
    try:
        waited = await advance_until(clock, watch.opened.is_set)
        assert waited >= 0.8 + 1.6
        assert informer.has_synced()
        assert [c["resourceVersion"] for c in api.list_calls] == ["0", "0", "0"]
    finally:
        await informer.stop()


async def test_a_delete_of_an_uncached_object_is_still_delivered(running: Running) -> None:
    running.watch.event("DELETED", pod("never-seen", 11))
    await until(lambda: len(running.recorder.events) == 3)
    assert running.recorder.events[-1] == ("delete", "ns/never-seen", "11")
    assert sorted(running.informer.store.keys()) == ["ns/a", "ns/b"]


async def test_an_object_the_transform_rejects_fails_the_watch_loudly(
    caplog: pytest.LogCaptureFixture,
) -> None:
    api, clock = ScriptedApi(), FakeClock()

    def picky(obj: Obj) -> Obj:
        if obj["metadata"]["name"] == "bad":
            raise ValueError("unexpected shape")
        return obj

    api.pages += [page([pod("a", 5)], 10), page([pod("a", 5)], 12)]
    watch = api.watch()
    informer = SharedInformer(api, PODS, clock=clock, transform=picky, watch_list=False)
    informer.start()
    try:
        await until(watch.opened.is_set)
        watch.event("ADDED", pod("bad", 11))
        after = api.watch()
        await advance_until(clock, after.opened.is_set)
        assert len(api.list_calls) == 2  # relisted after a backoff, not crashed
        assert informer.store.keys() == ["ns/a"]
    finally:
        await informer.stop()
    assert any(r.getMessage() == "Watch event could not be applied" for r in caplog.records)


async def test_a_line_cut_short_is_a_broken_stream_not_bad_data(running: Running) -> None:
    running.watch.event("MODIFIED", pod("a", 11))
    running.watch.raw(b'{"type":"MODIFIED","object":{"metad')
    after = running.api.watch()
    waited = await advance_until(running.clock, after.opened.is_set)
    assert 0.8 <= waited <= 1.7  # after the backoff, from the last version: no relist
    assert after.params is not None and after.params["resourceVersion"] == "11"
    assert len(running.api.list_calls) == 1
