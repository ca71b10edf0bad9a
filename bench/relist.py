"""Memory of a forced relist of a large pod cache, by watch-list and by paged LIST; prints JSON.

    .venv/bin/python bench/relist.py [--pods 20000]

Why this script exists: at 100,000 pods a relist (after a 410, or an API server restart)
must not double the manager's memory, or the pod cache, the largest thing it holds, sizes
the pod's memory limit twice over. The goal: the peak during a relist by watch-list is at
most 1.2x the steady cache.

What it does:

* starts its own control plane (omed_devcluster: real etcd and kube-apiserver with the
  API server's defaults, WatchList on) and writes ``--pods`` pods into one namespace,
  straight into etcd in transactions of 100 (see :func:`fill`), built from
  /work/shared/fixtures/ome-serving-pod.json: name, uid, instance index and IPs varied,
  status as a running serving pod's, no owner reference and no node (the garbage
  collector and the pod GC would delete them), a scheduler name nobody serves;
* for each way (``watch_list``: omed's default; ``paged_list``: ``watch_list=False``), in
  the same process, with tracemalloc on: starts the product's pod cache
  (``inference_pod_informer``: the pod projection, four indexes, one handler that
  enqueues keys), waits for it to sync, and measures the retained memory after a GC
  (``steady_cache_bytes``); then injects an ``ERROR`` 410 into its watch stream (what the
  API server sends after etcd compaction), which makes the reflector relist from its last
  resourceVersion, and takes tracemalloc's peak over the relist (``relist_peak_bytes``,
  the cache included). ``relist_peak_over_steady`` is their ratio; ``first_fill_peak_bytes``
  is the same peak for the first sync (the watch-list asks for ``resourceVersion=""``, the
  LIST for ``"0"``, which the watch cache answers in one piece, unpaged);
* checks that the relist went the way asked (``watch_lists``/``lists`` counters of the
  reflector) and that the cache holds every pod afterwards.

Times are reported (``*_s``) but the machine this runs on may be shared: memory figures
are what this measures, times only show the order of magnitude. tracemalloc counts Python
allocations (the decoded objects, the cache, aiohttp's buffers), not the allocator's
fragmentation.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import copy
import gc
import json
import os
import time
import tracemalloc
import uuid
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

import orjson

from omed.informers import InformerFactory, inference_pod_informer
from omed.kube.client import KubeClient, load_config
from omed.kube.resources import NAMESPACES, PODS
from omed_devcluster.binaries import ensure_binaries
from omed_devcluster.controlplane import ControlPlane

FIXTURE = Path("/work/shared/fixtures/ome-serving-pod.json")
NAMESPACE = "bench-relist"
GOAL_RATIO = 1.2
TXN_OPS = 100  # etcd's --max-txn-ops is 128


def pod_objects(count: int) -> list[dict[str, Any]]:
    """``count`` serving pods as the API server stores them (no resourceVersion: etcd's
    revision is the object's)."""
    base = json.loads(FIXTURE.read_text())
    pods = []
    for i in range(count):
        pod = copy.deepcopy(base)
        md = pod["metadata"]
        for field in ("managedFields", "resourceVersion", "ownerReferences"):
            md.pop(field, None)
        md["name"] = f"chat-engine-{i}-default-0"
        md["namespace"] = NAMESPACE
        md["uid"] = str(uuid.UUID(int=i + 1))
        md["labels"]["ome.io/instance-index"] = str(i)
        # No node (the pod GC deletes pods bound to nodes that don't exist) and a
        # scheduler nobody runs (the scheduler leaves them alone).
        pod["spec"].pop("nodeName", None)
        pod["spec"]["schedulerName"] = "bench-unscheduled"
        status = pod["status"]
        status["podIP"] = f"10.{1 + i // 65536}.{(i // 256) % 256}.{i % 256}"
        status["podIPs"] = [{"ip": status["podIP"]}]
        status["hostIP"] = f"10.0.{(i // 8) // 256}.{(i // 8) % 256}"
        pods.append(pod)
    return pods


def fill(plane: ControlPlane, count: int) -> dict[str, float]:
    """Write the pods straight into etcd, ``TXN_OPS`` to a transaction, as the API server
    keeps them (JSON is one of the encodings it reads back): 20,000 pods in seconds, where
    20,000 POSTs take minutes on a loaded machine and add admission and defaulting that
    this measurement does not need. The API server's watch cache picks them up from etcd's
    watch like any write."""
    began = time.monotonic()
    pods = pod_objects(count)
    for start in range(0, count, TXN_OPS):
        puts = []
        for pod in pods[start : start + TXN_OPS]:
            key = f"/registry/pods/{NAMESPACE}/{pod['metadata']['name']}".encode()
            puts.append(
                {
                    "requestPut": {
                        "key": base64.b64encode(key).decode(),
                        "value": base64.b64encode(orjson.dumps(pod)).decode(),
                    }
                }
            )
        plane._etcd_post("/v3/kv/txn", {"success": puts})
    return {"fill_s": round(time.monotonic() - began, 1)}


class InjectingClient:
    """The real client; ``inject_gone`` puts an ERROR 410 event into the open watch stream."""

    def __init__(self, inner: KubeClient) -> None:
        self._inner = inner
        self._gone = asyncio.Event()

    def inject_gone(self) -> None:
        self._gone.set()

    async def list_page(self, resource: Any, namespace: str | None = None, **params: Any) -> Any:
        return await self._inner.list_page(resource, namespace, **params)

    @contextlib.asynccontextmanager
    async def stream(
        self, path: str, *, params: Mapping[str, Any] | None = None, timeout: float | None = None
    ) -> AsyncIterator[AsyncIterator[bytes]]:
        async with self._inner.stream(path, params=params, timeout=timeout) as lines:
            yield self._with_gone(lines)

    async def _with_gone(self, lines: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
        source = lines.__aiter__()
        while True:
            line = asyncio.ensure_future(source.__anext__())
            gone = asyncio.ensure_future(self._gone.wait())
            try:
                await asyncio.wait({line, gone}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                gone.cancel()
                if not line.done() and not self._gone.is_set():  # the informer is stopping
                    line.cancel()
                    await asyncio.gather(line, return_exceptions=True)
            if self._gone.is_set() and not line.done():
                line.cancel()
                await asyncio.gather(line, return_exceptions=True)
                self._gone.clear()
                status = {"kind": "Status", "code": 410, "reason": "Expired", "message": "bench"}
                yield orjson.dumps({"type": "ERROR", "object": status})
                return
            try:
                yield line.result()
            except StopAsyncIteration:
                return


def traced() -> int:
    gc.collect()
    return tracemalloc.get_traced_memory()[0]


async def measure(kube: KubeClient, count: int, *, watch_list: bool) -> dict[str, Any]:
    client = InjectingClient(kube)
    base = traced()
    tracemalloc.reset_peak()
    factory = InformerFactory(client, watch_list=watch_list)  # type: ignore[arg-type]
    informer = inference_pod_informer(factory, namespace=NAMESPACE)
    queued: set[str] = set()

    def enqueue(obj: dict[str, Any]) -> None:
        queued.add(obj["metadata"]["labels"].get("ome.io/inferenceservice", ""))

    class Handler:
        on_add = staticmethod(enqueue)
        on_delete = staticmethod(enqueue)

        @staticmethod
        def on_update(old: dict[str, Any], new: dict[str, Any]) -> None:
            enqueue(new)

    informer.add_event_handler(Handler())
    began = time.monotonic()
    factory.start()
    assert await informer.wait_synced(timeout=600), "the cache did not sync"
    first_fill_s = time.monotonic() - began
    first_peak = tracemalloc.get_traced_memory()[1] - base
    assert len(informer.store) == count, (len(informer.store), count)
    steady = traced() - base
    reflector = informer.reflector
    fills_before = reflector.watch_lists + reflector.lists
    tracemalloc.reset_peak()
    began = time.monotonic()
    client.inject_gone()
    while reflector.watch_lists + reflector.lists == fills_before:  # noqa: ASYNC110 - polls a counter
        await asyncio.sleep(0.01)
    relist_s = time.monotonic() - began
    peak = tracemalloc.get_traced_memory()[1] - base
    # The relist went the way asked, and the watch goes on.
    assert (reflector.watch_lists if watch_list else reflector.lists) == 2
    assert len(informer.store) == count
    await factory.stop()
    result = {
        "steady_cache_bytes": steady,
        "steady_cache_bytes_per_pod": round(steady / count),
        "relist_peak_bytes": peak,
        "relist_peak_over_steady": round(peak / steady, 3),
        "first_fill_peak_bytes": first_peak,
        "first_fill_peak_over_steady": round(first_peak / steady, 3),
        "first_fill_s": round(first_fill_s, 2),
        "relist_s": round(relist_s, 2),
        "watch_lists": reflector.watch_lists,
        "lists": reflector.lists,
    }
    del informer, factory, client
    gc.collect()
    return result


async def cache_caught_up(kube: KubeClient) -> None:
    """Until the watch cache has replayed the writes: neither way should start while it
    still does (a consistent read would wait for it, a "0" LIST would miss pods)."""
    nothing = {"labelSelector": "bench-relist=none"}
    while True:
        etcd = await kube.list_page(PODS, NAMESPACE, limit=1)  # the current revision
        cache = await kube.list_page(PODS, NAMESPACE, resourceVersion="0", **nothing)
        if int(cache["metadata"]["resourceVersion"]) >= int(etcd["metadata"]["resourceVersion"]):
            return
        await asyncio.sleep(0.5)


async def run(plane: ControlPlane, count: int) -> dict[str, Any]:
    assert plane.kubeconfig_path is not None
    kube = KubeClient(await load_config(str(plane.kubeconfig_path)), qps=5000, burst=5000)
    try:
        await kube.create(NAMESPACES, {"metadata": {"name": NAMESPACE}})
        filled = await asyncio.to_thread(fill, plane, count)
        await cache_caught_up(kube)
        tracemalloc.start()
        streamed = await measure(kube, count, watch_list=True)
        paged = await measure(kube, count, watch_list=False)
        tracemalloc.stop()
    finally:
        await kube.close()
    return {**filled, "watch_list": streamed, "paged_list": paged}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pods", type=int, default=20_000)
    args = parser.parse_args()
    plane = ControlPlane(ensure_binaries())
    plane.start()
    try:
        version = plane.get_json("/version").get("gitVersion")
        result = asyncio.run(run(plane, args.pods))
    finally:
        plane.stop()
    ratio = result["watch_list"]["relist_peak_over_steady"]
    print(
        json.dumps(
            {
                "pods": args.pods,
                "kube_apiserver": version,
                **result,
                "goal_relist_peak_over_steady": GOAL_RATIO,
                "goal_met": ratio <= GOAL_RATIO,
                "loadavg_1m": round(os.getloadavg()[0], 2),
                "note": "memory is tracemalloc's (Python allocations); times are on a "
                "shared machine and only indicative",
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
