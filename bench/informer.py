"""Informer throughput and cache memory for realistic OME serving pods, printed as JSON.

    .venv/bin/python bench/informer.py [--pods 10000] [--repeats 3] [--loop uvloop|asyncio]

Why this script exists: the pod cache sees every pod event of the cluster, so its hot path
(decode + transform + store + dispatch) and its memory per pod bound how large a fleet one
manager can follow. The goals: >= 15x kubernetes-asyncio's ``Watch``, >= 40% of a
bare ``orjson.loads`` loop over the same stream, and <= 3 KiB per cached pod.

What it does:

* builds ``--pods`` pods from /work/shared/fixtures/ome-serving-pod.json (name, uid,
  instance index, node, pod and host IPs varied; managedFields kept; ~4.4 KB of JSON each)
  and serves them from a subprocess running an aiohttp server on loopback, as one chunked
  watch response of ``{"type":"ADDED","object":{...}}`` lines (and an empty LIST);
* ``informer``: omed's product pod cache (``inference_pod_informer``: pod projection,
  four indexes) with one handler that enqueues the InferenceService key, through
  :class:`omed.kube.client.KubeClient`; timed from start to the last ``on_add``;
* ``kubernetes_asyncio_watch``: ``kubernetes_asyncio.watch.Watch`` over
  ``CoreV1Api.list_pod_for_all_namespaces`` (builds a ``V1Pod`` per event);
* ``bare_orjson``: ``KubeClient.stream`` lines into ``orjson.loads`` and nothing else.

Each figure is the median of ``--repeats`` runs (best also given); ``events_per_s`` uses
wall time, ``events_per_cpu_s`` this process's CPU time (the server runs in another
process), which stays meaningful on a loaded machine (the load average is reported).

Memory (tracemalloc, retained bytes after a GC, divided by the pod count): the informer's
store with transform and indexes, for the benchmark pods and for pods whose timestamps all
differ (less sharing); a plain dict store of the decoded pods; ``V1Pod`` models (on a
sample of ``--v1pod-sample`` pods, they are slow to build).
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import gc
import json
import os
import statistics
import subprocess
import sys
import time
import tracemalloc
from collections.abc import Awaitable, Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import orjson

FIXTURE = Path("/work/shared/fixtures/ome-serving-pod.json")
GOAL_VS_WATCH = 15.0
GOAL_VS_BARE = 0.40
GOAL_BYTES_PER_POD = 3 * 1024


# -- the pods ------------------------------------------------------------------------------


def make_pods(count: int, *, unique_timestamps: bool = False) -> list[dict[str, Any]]:
    base = json.loads(FIXTURE.read_text())
    pods = []
    for i in range(count):
        pod = copy.deepcopy(base)
        md = pod["metadata"]
        md["name"] = f"chat-engine-{i}-default-0"
        md["uid"] = f"0b6e2f41-9d3c-4a57-{i // 65536:04x}-{i:012x}"
        md["resourceVersion"] = str(10_000 + i)
        md["labels"]["ome.io/instance-index"] = str(i)
        pod["spec"]["nodeName"] = f"gpu-node-{i // 8}"
        pod["status"]["podIP"] = f"10.{1 + i // 65536}.{(i // 256) % 256}.{i % 256}"
        pod["status"]["hostIP"] = f"10.0.{(i // 8) // 256}.{(i // 8) % 256}"
        if unique_timestamps:
            day, hour, minute, second = 1 + i // 86400, (i // 3600) % 24, (i // 60) % 60, i % 60
            stamp = f"2026-09-{day:02d}T{hour:02d}:{minute:02d}:{second:02d}Z"
            md["creationTimestamp"] = stamp
            pod["status"]["startTime"] = stamp
            for condition in pod["status"]["conditions"]:
                condition["lastTransitionTime"] = stamp
            pod["status"]["containerStatuses"][0]["state"]["running"]["startedAt"] = stamp
        pods.append(pod)
    return pods


def watch_payload(pods: list[dict[str, Any]]) -> bytes:
    return b"".join(orjson.dumps({"type": "ADDED", "object": p}) + b"\n" for p in pods)


# -- the server (a subprocess) -------------------------------------------------------------


def serve(count: int) -> None:
    """Serve the watch stream and an empty LIST on a free loopback port; print the port."""
    from aiohttp import web

    payload = watch_payload(make_pods(count))
    chunk = 64 * 1024
    empty_list = orjson.dumps(
        {"kind": "PodList", "apiVersion": "v1", "metadata": {"resourceVersion": "1"}, "items": []}
    )

    async def pods(request: web.Request) -> web.StreamResponse:
        if request.query.get("watch") not in ("true", "1", "True"):
            return web.Response(body=empty_list, content_type="application/json")
        response = web.StreamResponse()
        response.content_type = "application/json"
        response.enable_chunked_encoding()
        try:
            await response.prepare(request)
            for start in range(0, len(payload), chunk):
                await response.write(payload[start : start + chunk])
            await response.write_eof()
        except ConnectionError:
            pass  # the client stopped reading (an informer re-watching as it is stopped)
        return response

    async def main() -> None:
        app = web.Application()
        app.router.add_get("/api/v1/pods", pods)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        print(port, flush=True)
        await asyncio.Event().wait()

    asyncio.run(main())


# -- the three consumers -------------------------------------------------------------------


async def run_informer(host: str, count: int) -> None:
    from omed.informers import Handlers, InformerFactory, inference_pod_informer
    from omed.kube.client import ClusterConfig, KubeClient

    done = asyncio.Event()
    queued: set[str] = set()
    seen = 0

    def on_add(obj: dict[str, Any]) -> None:
        nonlocal seen
        md = obj["metadata"]
        queued.add(f"{md['namespace']}/{md['labels']['ome.io/inferenceservice']}")
        seen += 1
        if seen == count:
            done.set()

    async with KubeClient(ClusterConfig(host=host, ssl_context=False), qps=1e6, burst=10**6) as kc:
        factory = InformerFactory(kc)
        informer = inference_pod_informer(factory)
        informer.add_event_handler(Handlers(on_add=on_add))
        factory.start()
        try:
            await done.wait()
        finally:
            await factory.stop()
    assert len(informer.store) >= count and queued == {"prod/chat"}


async def run_watch(host: str, count: int) -> None:
    from kubernetes_asyncio import client, watch

    configuration = client.Configuration(host=host)
    async with client.ApiClient(configuration) as api:
        v1 = client.CoreV1Api(api)
        seen = 0
        async with watch.Watch() as stream:
            async for event in stream.stream(v1.list_pod_for_all_namespaces, timeout_seconds=600):
                assert event["object"].metadata.name
                seen += 1
                if seen == count:
                    stream.stop()
                    break
    assert seen == count


async def run_bare(host: str, count: int) -> None:
    from omed.kube.client import ClusterConfig, KubeClient

    seen = 0
    loads = orjson.loads
    config = ClusterConfig(host=host, ssl_context=False)
    async with (
        KubeClient(config, qps=1e6, burst=10**6) as kc,
        kc.stream("/api/v1/pods", params={"watch": True}) as lines,
    ):
        async for line in lines:
            loads(line)
            seen += 1
            if seen == count:
                break
    assert seen == count


Consumer = Callable[[str, int], Awaitable[None]]


async def timed(run: Consumer, host: str, count: int) -> dict[str, float]:
    gc.collect()
    cpu, wall = time.process_time(), time.perf_counter()
    await run(host, count)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    return {"events_per_s": count / wall, "events_per_cpu_s": count / cpu}


def summarize(runs: list[dict[str, float]]) -> dict[str, Any]:
    walls = [r["events_per_s"] for r in runs]
    cpus = [r["events_per_cpu_s"] for r in runs]
    return {
        "events_per_s": round(statistics.median(walls)),
        "events_per_s_best": round(max(walls)),
        "events_per_cpu_s": round(statistics.median(cpus)),
        "runs": [round(w) for w in walls],
    }


# -- memory --------------------------------------------------------------------------------


def retained(build: Callable[[], object], count: int) -> float:
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    kept = build()
    gc.collect()
    after = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    del kept
    return round((after - before) / count)


def memory(count: int, v1pod_sample: int) -> dict[str, Any]:
    from omed.informers import (
        POD_INDEXERS,
        IndexedStore,
        SharedValues,
        make_pod_transform,
        object_key,
    )

    results: dict[str, Any] = {}
    for label, unique in (("informer_transformed", False), ("informer_unique_timestamps", True)):
        lines = [orjson.dumps(p) for p in make_pods(count, unique_timestamps=unique)]

        def build(lines: list[bytes] = lines) -> object:
            # A fresh table: nothing shared with earlier runs in this process.
            transform = make_pod_transform(shared=SharedValues())
            store = IndexedStore(indexers=POD_INDEXERS)
            for line in lines:
                store.upsert(transform(orjson.loads(line)))
            return store, transform

        results[label] = retained(build, count)
    lines = [orjson.dumps(p) for p in make_pods(count)]
    results["plain_dict"] = retained(
        lambda: {object_key(o): o for o in (orjson.loads(line) for line in lines)}, count
    )
    results["plain_dict_without_managed_fields"] = retained(
        lambda: {
            object_key(o): (o["metadata"].pop("managedFields", None), o)[1]
            for o in (orjson.loads(line) for line in lines)
        },
        count,
    )
    results["v1pod"] = asyncio.run(_v1pod_memory([line.decode() for line in lines[:v1pod_sample]]))
    return results


async def _v1pod_memory(sample: list[str]) -> float:
    from kubernetes_asyncio.client import ApiClient

    async with ApiClient() as api:
        return retained(
            lambda: [
                api.deserialize(response=SimpleNamespace(data=text), response_type="V1Pod")
                for text in sample
            ],
            len(sample),
        )


# -- main ----------------------------------------------------------------------------------


async def throughput(host: str, count: int, repeats: int) -> dict[str, Any]:
    runs: dict[str, list[dict[str, float]]] = {"informer": [], "kubernetes_asyncio_watch": [],
                                                "bare_orjson": []}  # fmt: skip
    for run in (run_bare, run_informer, run_watch):  # imports, connections, code paths
        await timed(run, host, min(count, 500))
    for _ in range(repeats):
        runs["bare_orjson"].append(await timed(run_bare, host, count))
        runs["informer"].append(await timed(run_informer, host, count))
        runs["kubernetes_asyncio_watch"].append(await timed(run_watch, host, count))
    return {name: summarize(r) for name, r in runs.items()}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pods", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--loop", choices=("uvloop", "asyncio"), default="uvloop")
    parser.add_argument("--v1pod-sample", type=int, default=1000)
    parser.add_argument("--serve", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.serve)
        return
    load_before = os.getloadavg()
    server = subprocess.Popen(
        [sys.executable, __file__, "--serve", str(args.pods)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stdout is not None
        host = f"http://127.0.0.1:{int(server.stdout.readline())}"
        if args.loop == "uvloop":
            import uvloop

            figures = uvloop.run(throughput(host, args.pods, args.repeats))
        else:
            figures = asyncio.run(throughput(host, args.pods, args.repeats))
    finally:
        server.terminate()
        server.wait()
    mem = memory(args.pods, args.v1pod_sample)
    ours = figures["informer"]["events_per_s"]
    ours_cpu = figures["informer"]["events_per_cpu_s"]
    watch = figures["kubernetes_asyncio_watch"]
    bare = figures["bare_orjson"]
    ratios = {
        "informer_vs_watch": round(ours / watch["events_per_s"], 1),
        "informer_vs_watch_cpu": round(ours_cpu / watch["events_per_cpu_s"], 1),
        "informer_vs_bare": round(ours / bare["events_per_s"], 2),
        "informer_vs_bare_cpu": round(ours_cpu / bare["events_per_cpu_s"], 2),
    }
    pod_bytes = len(orjson.dumps(make_pods(1)[0]))
    print(
        json.dumps(
            {
                "benchmark": "informer",
                "pods": args.pods,
                "pod_json_bytes": pod_bytes,
                "loop": args.loop,
                "python": sys.version.split()[0],
                "cpus": os.cpu_count(),
                "loadavg_before": [round(x, 2) for x in load_before],
                "loadavg_after": [round(x, 2) for x in os.getloadavg()],
                "throughput": figures,
                "ratios": ratios,
                "memory_bytes_per_pod": mem,
                "goals": {
                    "vs_watch_15x": ratios["informer_vs_watch"] >= GOAL_VS_WATCH,
                    "vs_bare_40pct": ratios["informer_vs_bare"] >= GOAL_VS_BARE,
                    "bytes_per_pod_3KiB": mem["informer_transformed"] <= GOAL_BYTES_PER_POD,
                },
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
