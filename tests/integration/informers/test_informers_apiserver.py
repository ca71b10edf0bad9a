"""Informers against the real API server: events, the label-scoped pod cache, the
watch-list that fills the cache (first sync, a forced 410's relist, deletions while the
initial events stream, the fallback to a paged LIST on a server with WatchList off), a
forced 410 that relists by LIST without losing a delete, and recovery from an API server
restart.

The restart tests stop the session's API server and start it again before they return; they
wait until it answers, so the tests after them see a working control plane.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any

import orjson
import pytest

from omed.informers import (
    INSTANCE,
    DeletedFinalStateUnknown,
    InformerFactory,
    SharedInformer,
    inference_pod_informer,
    instance_key,
)
from omed.informers.transform import Obj
from omed.kube.client import KubeClient
from omed.kube.resources import CONFIGMAPS, NAMESPACES, PODS
from omed.metrics import REGISTRY

INITIAL_EVENTS_END = "k8s.io/initial-events-end"

pytestmark = pytest.mark.integration


# -- helpers ---------------------------------------------------------------------------------


class Recorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, str, Obj]] = []

    def on_add(self, obj: Obj) -> None:
        self.events.append(("add", obj["metadata"]["name"], obj))

    def on_update(self, old: Obj, new: Obj) -> None:
        self.events.append(("update", new["metadata"]["name"], new))

    def on_delete(self, obj: Obj) -> None:
        self.events.append(("delete", obj["metadata"]["name"], obj))

    def saw(self, kind: str, name: str) -> bool:
        return any(k == kind and n == name for k, n, _ in self.events)

    def of(self, kind: str, name: str) -> list[Obj]:
        return [o for k, n, o in self.events if k == kind and n == name]


async def eventually(
    condition: Callable[[], bool], *, timeout: float = 30.0, what: str = "condition"
) -> None:
    """Poll ``condition`` until it holds; fail after ``timeout`` seconds."""
    began = time.monotonic()
    while not condition():
        if time.monotonic() - began > timeout:
            raise AssertionError(f"{what} not reached within {timeout}s")
        await asyncio.sleep(0.05)


async def retrying(action: Callable[[], Awaitable[Any]], *, timeout: float = 60.0) -> Any:
    """Run ``action`` until it succeeds (the API server may still be coming back)."""
    began = time.monotonic()
    while True:
        try:
            return await action()
        except Exception:
            if time.monotonic() - began > timeout:
                raise
            await asyncio.sleep(0.2)


def watch_ends(resource: str, reason: str) -> float:
    labels = {"resource": resource, "reason": reason}
    return REGISTRY.get_sample_value("omed_informer_watch_ends_total", labels) or 0.0


def counter(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


def configmap(name: str, **data: str) -> Obj:
    return {"metadata": {"name": name}, "data": dict(data)}


def pod_body(name: str, labels: Mapping[str, str] | None = None) -> Obj:
    return {
        "metadata": {"name": name, "labels": dict(labels or {})},
        "spec": {
            "containers": [{"name": "server", "image": "example/server:v1"}],
            "readinessGates": [{"conditionType": "ome.io/serving"}],
        },
    }


@contextlib.asynccontextmanager
async def running(informer: SharedInformer) -> AsyncIterator[Recorder]:
    recorder = Recorder()
    informer.add_event_handler(recorder)
    informer.start()
    try:
        assert await informer.wait_synced(timeout=30), "informer did not sync"
        yield recorder
    finally:
        await informer.stop()


async def server_names(kube: KubeClient, namespace: str) -> list[str]:
    items = await kube.list_all(CONFIGMAPS, namespace)
    return sorted(
        i["metadata"]["name"] for i in items if i["metadata"]["name"] != "kube-root-ca.crt"
    )


def cached_names(informer: SharedInformer) -> list[str]:
    names = (o["metadata"]["name"] for o in informer.store.list())
    return sorted(n for n in names if n != "kube-root-ca.crt")


class GatedClient:
    """The real client behind a gate: closing it cuts the open watch stream and holds new
    requests until it opens again (a network partition of this one informer)."""

    def __init__(self, inner: KubeClient) -> None:
        self._inner = inner
        self._open = asyncio.Event()
        self._open.set()
        self._cut = asyncio.Event()
        self.watch_versions: list[str] = []
        self.watch_params: list[dict[str, Any]] = []
        self.list_params: list[dict[str, Any]] = []
        self.lines: list[bytes] = []  # every line the streams delivered, in order
        self._hold_after: int | None = None
        self.held = asyncio.Event()
        self._release = asyncio.Event()
        self._gone = False

    def hold_after(self, lines: int) -> None:
        """Pause the next stream after it delivered ``lines`` lines, until ``release``."""
        self._hold_after = lines
        self.held.clear()
        self._release.clear()

    def release(self) -> None:
        self._hold_after = None
        self._release.set()

    def inject_gone(self) -> None:
        """The open stream's next line is an ERROR 410 event, as after etcd compaction."""
        self._gone = True

    def close_gate(self) -> None:
        self._open.clear()
        self._cut.set()

    def open_gate(self) -> None:
        self._cut.clear()
        self._open.set()

    async def list_page(self, resource: Any, namespace: str | None = None, **params: Any) -> Any:
        await self._open.wait()
        self.list_params.append(dict(params))
        return await self._inner.list_page(resource, namespace, **params)

    @contextlib.asynccontextmanager
    async def stream(
        self, path: str, *, params: Mapping[str, Any] | None = None, timeout: float | None = None
    ) -> AsyncIterator[AsyncIterator[bytes]]:
        await self._open.wait()
        self.watch_versions.append(str((params or {}).get("resourceVersion")))
        self.watch_params.append(dict(params or {}))
        async with self._inner.stream(path, params=params, timeout=timeout) as lines:
            yield self._until_cut(lines)

    async def _until_cut(self, lines: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
        source = lines.__aiter__()
        delivered = 0
        while True:
            if self._hold_after is not None and delivered >= self._hold_after:
                self.held.set()
                await self._release.wait()
            if self._gone:
                self._gone = False
                status = {"kind": "Status", "code": 410, "reason": "Expired",
                          "message": "too old resource version (injected)"}  # fmt: skip
                yield orjson.dumps({"type": "ERROR", "object": status})
                continue
            line = asyncio.ensure_future(source.__anext__())
            cut = asyncio.ensure_future(self._cut.wait())
            try:
                await asyncio.wait({line, cut}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                cut.cancel()
                if not line.done():  # cut, or the informer is stopping: end the read too
                    line.cancel()
                    await asyncio.gather(line, return_exceptions=True)
            if line.cancelled():
                raise ConnectionResetError("the test cut the watch")
            try:
                chunk = line.result()
            except StopAsyncIteration:
                return
            delivered += 1
            self.lines.append(chunk)
            yield chunk


# -- tests -----------------------------------------------------------------------------------


async def test_watch_sees_create_update_and_delete(kube: KubeClient, namespace: str) -> None:
    await kube.create(CONFIGMAPS, configmap("before", k="v"), namespace)
    informer = InformerFactory(kube).informer(CONFIGMAPS, namespace=namespace)
    async with running(informer) as recorder:
        assert recorder.saw("add", "before")

        await kube.create(CONFIGMAPS, configmap("chat", k="1"), namespace)
        await eventually(lambda: recorder.saw("add", "chat"), what="add")
        await kube.patch(CONFIGMAPS, "chat", {"data": {"k": "2"}}, namespace)
        await eventually(lambda: recorder.saw("update", "chat"), what="update")
        assert recorder.of("update", "chat")[-1]["data"] == {"k": "2"}
        assert informer.store.get(f"{namespace}/chat") is recorder.of("update", "chat")[-1]
        await kube.delete(CONFIGMAPS, "chat", namespace)
        await eventually(lambda: recorder.saw("delete", "chat"), what="delete")
        assert f"{namespace}/chat" not in informer.store
        # Watch objects are stored without managedFields, like listed ones.
        assert all("managedFields" not in o["metadata"] for o in informer.store.list())
        # This API server streams the first fill: no LIST at all.
        assert informer.reflector.watch_lists == 1 and informer.reflector.lists == 0


async def test_pod_cache_holds_only_labelled_pods(kube: KubeClient, namespace: str) -> None:
    labels = {
        "ome.io/inferenceservice": "chat",
        "component": "engine",
        "ome.io/instance-index": "0",
    }
    await kube.create(PODS, pod_body("serving-0", labels), namespace)
    await kube.create(PODS, pod_body("sidecar-job"), namespace)
    factory = InformerFactory(kube)
    pods = inference_pod_informer(factory, namespace=namespace)
    async with running(pods) as recorder:
        assert sorted(pods.store.keys()) == [f"{namespace}/serving-0"]
        await kube.create(PODS, pod_body("other-unlabelled", {"app": "x"}), namespace)
        await kube.create(
            PODS, pod_body("serving-1", {**labels, "ome.io/instance-index": "1"}), namespace
        )
        await eventually(lambda: recorder.saw("add", "serving-1"), what="labelled pod")
        # The unlabelled pod was created first; the watch delivers in order, so had it
        # been sent it would be here by now.
        assert sorted(pods.store.keys()) == [f"{namespace}/serving-0", f"{namespace}/serving-1"]
        assert not recorder.saw("add", "other-unlabelled") and not recorder.saw(
            "add", "sidecar-job"
        )
        cached = pods.store.by_index(INSTANCE, instance_key(namespace, "chat", "engine", 1))
        assert [p["metadata"]["name"] for p in cached] == ["serving-1"]
        kept = cached[0]
        assert "managedFields" not in kept["metadata"]
        assert kept["spec"]["containers"] == [{"name": "server", "image": "example/server:v1"}]
        assert kept["spec"]["readinessGates"] == [{"conditionType": "ome.io/serving"}]
        # Removing the label takes a pod out of the cache: to the cache, it is deleted.
        await kube.patch(
            PODS,
            "serving-0",
            {"metadata": {"labels": {"ome.io/inferenceservice": None}}},
            namespace,
        )
        await eventually(lambda: recorder.saw("delete", "serving-0"), what="label removal")
        assert sorted(pods.store.keys()) == [f"{namespace}/serving-1"]


async def test_forced_gone_relists_by_list_and_loses_no_delete(
    kube: KubeClient, namespace: str, control_plane: Any
) -> None:
    for name in ("keep", "drop-1", "drop-2"):
        await kube.create(CONFIGMAPS, configmap(name, v="1"), namespace)
    gated = GatedClient(kube)
    informer = SharedInformer(gated, CONFIGMAPS, namespace=namespace, watch_list=False)
    gone_before = watch_ends("configmaps", "gone")
    async with running(informer) as recorder:
        # One event through the watch, so that cutting it is a break, not a failed start.
        await kube.create(CONFIGMAPS, configmap("warm"), namespace)
        await eventually(lambda: recorder.saw("add", "warm"), what="the first watch event")
        resume_from = informer.reflector.last_sync_resource_version

        gated.close_gate()  # the watch is cut; the reflector waits to watch again
        await kube.delete(CONFIGMAPS, "drop-1", namespace)
        await kube.delete(CONFIGMAPS, "drop-2", namespace)
        await kube.patch(CONFIGMAPS, "keep", {"data": {"v": "2"}}, namespace)
        await kube.create(CONFIGMAPS, configmap("born", v="1"), namespace)
        # Compact etcd past everything the informer saw, and restart the API server so its
        # watch cache (which outlives compaction) starts after it too.
        await asyncio.to_thread(control_plane.compact_etcd)
        await asyncio.to_thread(control_plane.restart_apiserver)
        await retrying(lambda: kube.get(NAMESPACES, namespace))
        assert cached_names(informer) == ["drop-1", "drop-2", "keep", "warm"]  # nothing seen

        gated.open_gate()
        await eventually(
            lambda: cached_names(informer) == ["born", "keep", "warm"], timeout=60, what="relist"
        )
        assert gated.watch_versions[1] == resume_from  # it did try to resume, and got 410
        assert len(gated.watch_versions) == 3
        assert watch_ends("configmaps", "gone") == gone_before + 1
        assert informer.reflector.lists == 2
        for name in ("drop-1", "drop-2"):
            (tombstone,) = recorder.of("delete", name)
            assert isinstance(tombstone, DeletedFinalStateUnknown)
            assert tombstone.key == f"{namespace}/{name}"
        assert recorder.saw("add", "born")
        assert recorder.of("update", "keep")[-1]["data"] == {"v": "2"}
        assert cached_names(informer) == await server_names(kube, namespace)


async def test_apiserver_restart_mid_watch_recovers_by_itself(
    kube: KubeClient, namespace: str, control_plane: Any
) -> None:
    await kube.create(CONFIGMAPS, configmap("first"), namespace)
    informer = SharedInformer(kube, CONFIGMAPS, namespace=namespace)
    async with running(informer) as recorder:
        restart = asyncio.ensure_future(asyncio.to_thread(control_plane.restart_apiserver))
        await restart
        await retrying(lambda: kube.create(CONFIGMAPS, configmap("after-restart"), namespace))
        await retrying(lambda: kube.delete(CONFIGMAPS, "first", namespace))
        await eventually(
            lambda: recorder.saw("add", "after-restart") and recorder.saw("delete", "first"),
            timeout=90,
            what="events after the restart",
        )
        assert cached_names(informer) == await server_names(kube, namespace)
        # And it keeps watching.
        await kube.create(CONFIGMAPS, configmap("later"), namespace)
        await eventually(lambda: recorder.saw("add", "later"), what="a later event")


# -- the watch-list ---------------------------------------------------------------------------


def is_watch_list(params: Mapping[str, Any]) -> bool:
    return params.get("sendInitialEvents") is True and params.get("watch") is True


def end_bookmarks(lines: list[bytes]) -> list[str]:
    """The resourceVersions of the initial-events-end bookmarks among ``lines``."""
    found = []
    for line in lines:
        event = orjson.loads(line)
        if event.get("type") != "BOOKMARK":
            continue
        metadata = event["object"]["metadata"]
        if (metadata.get("annotations") or {}).get(INITIAL_EVENTS_END) == "true":
            found.append(metadata["resourceVersion"])
    return found


async def test_first_sync_streams_initial_events_up_to_their_bookmark(
    kube: KubeClient, namespace: str
) -> None:
    for name in ("a", "b", "c"):
        await kube.create(CONFIGMAPS, configmap(name, v="1"), namespace)
    recording = GatedClient(kube)
    informer = SharedInformer(recording, CONFIGMAPS, namespace=namespace)
    streamed_before = counter(
        "omed_informer_watch_lists_total", resource="configmaps", reason="initial"
    )
    async with running(informer) as recorder:
        (first,) = recording.watch_params
        assert is_watch_list(first)
        assert first["resourceVersion"] == ""  # a consistent read
        assert first["resourceVersionMatch"] == "NotOlderThan"
        assert first["allowWatchBookmarks"] is True
        assert recording.list_params == []  # the real server streamed; nothing was listed
        assert informer.reflector.watch_lists == 1
        assert not informer.reflector.watch_list_refused
        assert (
            counter("omed_informer_watch_lists_total", resource="configmaps", reason="initial")
            == streamed_before + 1
        )
        # The server's bookmark ended the initial events, and the cache is at its version.
        (bookmark_rv,) = end_bookmarks(recording.lines)
        assert informer.reflector.last_sync_resource_version == bookmark_rv
        assert cached_names(informer) == ["a", "b", "c"] == await server_names(kube, namespace)
        assert all(recorder.saw("add", n) for n in ("a", "b", "c"))
        newest = max(int(o["metadata"]["resourceVersion"]) for o in informer.store.list())
        assert int(bookmark_rv) >= newest
        # The same stream goes on as the watch.
        await kube.create(CONFIGMAPS, configmap("later"), namespace)
        await eventually(lambda: recorder.saw("add", "later"), what="a live event")
        assert len(recording.watch_params) == 1


async def test_forced_gone_relists_by_watch_list_reusing_what_did_not_change(
    kube: KubeClient, namespace: str, control_plane: Any
) -> None:
    for name in ("keep", "same", "drop-1", "drop-2"):
        await kube.create(CONFIGMAPS, configmap(name, v="1"), namespace)
    gated = GatedClient(kube)
    informer = SharedInformer(gated, CONFIGMAPS, namespace=namespace)
    gone_before = watch_ends("configmaps", "gone")
    relists_before = counter(
        "omed_informer_watch_lists_total", resource="configmaps", reason="watch-error"
    )
    async with running(informer) as recorder:
        await kube.create(CONFIGMAPS, configmap("warm"), namespace)
        await eventually(lambda: recorder.saw("add", "warm"), what="the first watch event")
        resume_from = informer.reflector.last_sync_resource_version
        same = informer.store.get(f"{namespace}/same")
        assert same is not None

        gated.close_gate()
        await kube.delete(CONFIGMAPS, "drop-1", namespace)
        await kube.delete(CONFIGMAPS, "drop-2", namespace)
        await kube.patch(CONFIGMAPS, "keep", {"data": {"v": "2"}}, namespace)
        await kube.create(CONFIGMAPS, configmap("born", v="1"), namespace)
        await asyncio.to_thread(control_plane.compact_etcd)
        await asyncio.to_thread(control_plane.restart_apiserver)
        await retrying(lambda: kube.get(NAMESPACES, namespace))

        gated.open_gate()
        await eventually(
            lambda: cached_names(informer) == ["born", "keep", "same", "warm"],
            timeout=60,
            what="relist",
        )
        # Resuming the watch answered 410; the relist was a watch-list from the last version
        # seen ("not older than": the server's current state, no history needed).
        assert gated.watch_versions == ["", resume_from, resume_from]
        assert is_watch_list(gated.watch_params[2])
        assert not is_watch_list(gated.watch_params[1])
        assert gated.list_params == []
        assert watch_ends("configmaps", "gone") == gone_before + 1
        assert informer.reflector.watch_lists == 2 and informer.reflector.lists == 0
        assert (
            counter("omed_informer_watch_lists_total", resource="configmaps", reason="watch-error")
            == relists_before + 1
        )
        # One copy of what did not change: the cached object itself.
        assert informer.store.get(f"{namespace}/same") is same
        assert not recorder.of("update", "same")
        for name in ("drop-1", "drop-2"):
            (tombstone,) = recorder.of("delete", name)
            assert isinstance(tombstone, DeletedFinalStateUnknown)
        assert recorder.saw("add", "born")
        assert recorder.of("update", "keep")[-1]["data"] == {"v": "2"}
        assert informer.reflector.last_sync_resource_version == end_bookmarks(gated.lines)[-1]
        assert cached_names(informer) == await server_names(kube, namespace)


async def test_deletions_while_the_initial_events_stream_arrive_after_the_bookmark(
    kube: KubeClient, namespace: str
) -> None:
    names = [f"cm-{i:02d}" for i in range(12)]
    for name in names:
        await kube.create(CONFIGMAPS, configmap(name), namespace)
    gated = GatedClient(kube)
    gated.hold_after(4)  # the stream stops after 4 initial events
    informer = SharedInformer(gated, CONFIGMAPS, namespace=namespace)
    recorder = Recorder()
    informer.add_event_handler(recorder)
    informer.start()
    try:
        await asyncio.wait_for(gated.held.wait(), 30)
        assert not informer.has_synced() and len(informer.store) == 0
        # Deleted while the snapshot streams: one already sent, one not yet.
        await kube.delete(CONFIGMAPS, "cm-00", namespace)
        await kube.delete(CONFIGMAPS, "cm-11", namespace)
        await kube.create(CONFIGMAPS, configmap("cm-new"), namespace)
        gated.release()
        assert await informer.wait_synced(timeout=30)
        await eventually(
            lambda: cached_names(informer) == sorted([*names[1:11], "cm-new"]),
            what="the deletes after the bookmark",
        )
        assert cached_names(informer) == await server_names(kube, namespace)
        assert recorder.saw("delete", "cm-00") and recorder.saw("delete", "cm-11")
        assert len(gated.watch_params) == 1 and gated.list_params == []
    finally:
        await informer.stop()


async def test_a_server_with_watch_list_off_is_listed_in_pages_and_not_asked_again(
    kube: KubeClient, namespace: str, control_plane: Any
) -> None:
    for name in ("a", "b", "c", "d", "e"):
        await kube.create(CONFIGMAPS, configmap(name), namespace)
    refused_before = counter(
        "omed_informer_watch_list_fallbacks_total", resource="configmaps", cause="refused"
    )
    await asyncio.to_thread(
        control_plane.restart_apiserver, extra_args=["--feature-gates=WatchList=false"]
    )
    try:
        await retrying(lambda: kube.get(NAMESPACES, namespace))
        gated = GatedClient(kube)
        informer = SharedInformer(gated, CONFIGMAPS, namespace=namespace, page_size=2)
        async with running(informer) as recorder:
            assert is_watch_list(gated.watch_params[0])  # asked, and refused
            assert informer.reflector.watch_list_refused
            assert (
                counter(
                    "omed_informer_watch_list_fallbacks_total",
                    resource="configmaps",
                    cause="refused",
                )
                == refused_before + 1
            )
            # The fallback LIST asks for pages; the watch cache answers a "0" LIST whole.
            (first,) = gated.list_params
            assert first["resourceVersion"] == "0" and first["limit"] == 2
            assert cached_names(informer) == ["a", "b", "c", "d", "e"]
            assert not is_watch_list(gated.watch_params[1])
            # A relist (410 in the stream) lists again, without a watch-list, and pages
            # (limit 2, continue tokens followed) at the last version seen.
            resume_from = informer.reflector.last_sync_resource_version
            gated.inject_gone()
            await kube.create(CONFIGMAPS, configmap("f"), namespace)
            await eventually(lambda: recorder.saw("add", "f"), what="f")
            relist = gated.list_params[1:]
            assert relist[0]["resourceVersion"] == resume_from
            assert [p.get("limit") for p in relist] == [2] * len(relist)
            assert len(relist) >= 3 and all(p.get("_continue") for p in relist[1:])
            assert not any(is_watch_list(p) for p in gated.watch_params[1:])
            assert informer.reflector.lists == 2 and informer.reflector.watch_lists == 0
            assert cached_names(informer) == await server_names(kube, namespace)
    finally:
        await asyncio.to_thread(control_plane.restart_apiserver)
        await retrying(lambda: kube.get(NAMESPACES, namespace))
