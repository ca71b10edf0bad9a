"""Shared informer handlers and the factory: sharing, late handlers, failures, resync."""

from __future__ import annotations

import asyncio
import logging

import pytest

from omed.clock import FakeClock
from omed.informers import (
    INFERENCE_POD_SELECTOR,
    INFERENCE_SERVICE,
    INSTANCE,
    Handlers,
    InformerFactory,
    SharedInformer,
    identity,
    inference_pod_informer,
    instance_key,
    transform_pod,
)
from omed.informers.transform import Obj
from omed.kube.resources import CONFIGMAPS, NODES, PODS

from ._support import Recorder, ScriptedApi, advance_until, page, pod, until


def serving(name: str, rv: int, index: int) -> Obj:
    return pod(
        name,
        rv,
        labels={
            "ome.io/inferenceservice": "chat",
            "component": "engine",
            "ome.io/instance-index": str(index),
        },
        spec={"nodeName": "n1", "containers": [{"name": "c", "image": "i", "env": []}]},
    )


async def test_a_handler_added_after_sync_first_gets_the_cache() -> None:
    api, clock = ScriptedApi(), FakeClock()
    api.pages.append(page([pod("a", 1), pod("b", 2)], 5))
    watch = api.watch()
    informer = SharedInformer(api, PODS, clock=clock, watch_list=False)
    informer.start()
    try:
        await until(watch.opened.is_set)
        late = Recorder()
        informer.add_event_handler(late)
        assert sorted(late.events) == [("add", "ns/a", "1"), ("add", "ns/b", "2")]
        watch.event("ADDED", pod("c", 6))
        await until(lambda: len(late.events) == 3)
        assert late.events[-1] == ("add", "ns/c", "6")
    finally:
        await informer.stop()


async def test_a_failing_handler_does_not_stop_the_others_or_the_watch(
    caplog: pytest.LogCaptureFixture,
) -> None:
    api, clock = ScriptedApi(), FakeClock()
    api.pages.append(page([], 5))
    watch = api.watch()
    informer = SharedInformer(api, PODS, clock=clock, watch_list=False)

    def explode(obj: Obj) -> None:
        raise RuntimeError("handler bug")

    informer.add_event_handler(Handlers(on_add=explode, on_update=lambda o, n: explode(n)))
    recorder = Recorder()
    informer.add_event_handler(recorder)
    informer.start()
    try:
        await until(watch.opened.is_set)
        watch.event("ADDED", pod("a", 6))
        watch.event("MODIFIED", pod("a", 7))
        await until(lambda: len(recorder.events) == 2)
        assert recorder.events == [("add", "ns/a", "6"), ("update", "ns/a", "7")]
        assert informer.store.get("ns/a") is not None
    finally:
        await informer.stop()
    failures = [r for r in caplog.records if r.getMessage() == "Informer event handler failed"]
    assert len(failures) == 2 and failures[0].levelno == logging.ERROR


async def test_removed_handler_hears_nothing_more() -> None:
    api, clock = ScriptedApi(), FakeClock()
    api.pages.append(page([], 5))
    watch = api.watch()
    informer = SharedInformer(api, PODS, clock=clock, watch_list=False)
    gone, kept = Recorder(), Recorder()
    registration = informer.add_event_handler(gone)
    informer.add_event_handler(kept)
    informer.start()
    try:
        await until(watch.opened.is_set)
        informer.remove_event_handler(registration)
        watch.event("ADDED", pod("a", 6))
        await until(lambda: len(kept.events) == 1)
        assert gone.events == []
    finally:
        await informer.stop()


async def test_resync_redelivers_the_cache_on_the_fake_clock() -> None:
    api, clock = ScriptedApi(), FakeClock()
    api.pages.append(page([pod("a", 1)], 5))
    watch = api.watch()
    informer = SharedInformer(api, PODS, clock=clock, watch_list=False)
    recorder = Recorder()
    informer.add_event_handler(recorder, resync_period=30.0)
    informer.start()
    try:
        await until(watch.opened.is_set)
        watch.bookmark(6)  # keeps the watch from looking silent
        waited = await advance_until(clock, lambda: len(recorder.events) == 2, step=1.0)
        assert 29.0 <= waited <= 31.0
        assert recorder.events == [("add", "ns/a", "1"), ("update", "ns/a", "1")]
    finally:
        await informer.stop()


async def test_wait_synced_times_out_while_the_list_hangs() -> None:
    api, clock = ScriptedApi(), FakeClock()  # no page scripted: the LIST never answers
    informer = SharedInformer(api, PODS, clock=clock, watch_list=False)
    informer.start()
    try:
        waiting = asyncio.ensure_future(informer.wait_synced(timeout=10.0))
        await advance_until(clock, waiting.done, step=1.0)
        assert clock.monotonic() >= 1010.0
        assert waiting.result() is False
        assert not informer.has_synced()
    finally:
        await informer.stop()


def test_factory_shares_one_informer_per_scope_and_selectors() -> None:
    factory = InformerFactory(ScriptedApi(), watch_list=False)
    a = factory.informer(CONFIGMAPS, namespace="ns")
    assert factory.informer(CONFIGMAPS, namespace="ns") is a
    assert factory.informer(CONFIGMAPS, namespace="other") is not a
    assert factory.informer(CONFIGMAPS, namespace="ns", label_selector="x") is not a
    assert factory.informer(CONFIGMAPS) is not a
    # A cluster-scoped resource ignores the namespace.
    assert factory.informer(NODES, namespace="ns") is factory.informer(NODES)
    with pytest.raises(ValueError, match="already exists with transform"):
        factory.informer(CONFIGMAPS, namespace="ns", transform=identity)
    assert len(factory.informers()) == 5


async def test_factory_pod_cache_is_label_scoped_projected_and_indexed() -> None:
    api, clock = ScriptedApi(), FakeClock()
    api.pages.append(page([serving("p0", 1, 0), serving("p1", 2, 1)], 5))
    api.pages.append(page([], 5))
    factory = InformerFactory(api, clock=clock, watch_list=False)
    pods = inference_pod_informer(factory)
    assert inference_pod_informer(factory) is pods
    assert pods.label_selector == INFERENCE_POD_SELECTOR == "ome.io/inferenceservice"
    assert pods.transform is transform_pod
    configmaps = factory.informer(CONFIGMAPS)
    api.watch()
    api.watch()
    factory.start()
    try:
        assert await factory.wait_for_cache_sync(timeout=5)
        assert pods.has_synced() and configmaps.has_synced()
    finally:
        await factory.stop()
    assert api.list_calls[0]["labelSelector"] == "ome.io/inferenceservice"
    cached = pods.store.get("ns/p0")
    assert cached is not None and "env" not in cached["spec"]["containers"][0]
    assert [p["metadata"]["name"] for p in pods.store.by_index(INFERENCE_SERVICE, "ns/chat")] == [
        "p0",
        "p1",
    ]
    assert pods.store.index_keys(INSTANCE, instance_key("ns", "chat", "engine", 1)) == ["ns/p1"]


async def test_wait_for_cache_sync_reports_a_timeout() -> None:
    clock = FakeClock()
    factory = InformerFactory(ScriptedApi(), clock=clock, watch_list=False)
    factory.informer(PODS)
    factory.start()
    try:
        waiting = asyncio.ensure_future(factory.wait_for_cache_sync(timeout=5.0))
        await advance_until(clock, waiting.done, step=1.0)
        assert waiting.result() is False
    finally:
        await factory.stop()
