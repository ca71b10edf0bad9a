"""What one pass over a 20,000-Instance InferenceReplica costs the leader, in-process; print JSON.

    .venv/bin/python bench/pass_cost.py [--instances 20000] [--encoding ColumnarV2] [--runs 3]

No control plane: the real reconciler (:class:`InferenceReplicaReconciler`, so the real
``observe_replica``, :func:`~omed.controllers.inferencereplica.core.decide.decide` and the
executor's status encoding) over in-memory caches that hold what an informer's would. The
world: one standalone InferenceReplica of ``--instances`` Instances of one pod each, every pod
Running, Ready (each at its own second, so every row is its own ColumnarV2 class: the
legitimate worst case) and serving, its pods as the pod transform keeps them
(:func:`omed.informers.transform.make_pod_transform`); the status the controller wrote,
decoded from its JSON as the watch decodes it (``orjson``). The replica is first driven to
convergence (passes until one writes nothing). Then, each measured ``--runs`` times:

* ``noop``: a pass over the converged replica and the same cached objects (a pod event that
  changed nothing the planner reads): writes nothing;
* ``one_changed``: a pass after one pod's new version shows it not Ready (its readiness
  probe failing): one row changes, its gate goes False, the status is written;
* ``fresh_version``: the pass that reads that write back (a new resourceVersion, a new status
  object, as the watch delivers it) and writes the pod's gate change (servingReplicas);
* ``read_back``: the pass that reads *that* write back and writes nothing: the pass that
  checks the stored form of a new version;
* ``read_fresh``: :func:`~omed.controllers.inferencereplica.core.status.decode_rows_from_status`
  of that status alone.

Each figure: CPU time of the pass (``time.process_time``: the machine may be loaded, wall time
isn't the pass's), best and median of the runs; the peak of traced allocations during the pass
(``tracemalloc``, in a separate run, since tracing slows allocation); and the peak RSS over the
RSS before (``/proc/self/clear_refs`` resets the peak, ``VmHWM``), in the untraced runs.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import copy
import datetime as dt
import gc
import json
import os
import statistics
import time
import tracemalloc
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any

import orjson
from statuscodec import calibration_ms  # bench/statuscodec.py: the same loop, comparable

from omed.clock import FakeClock
from omed.controllers.inferencereplica.core import names
from omed.controllers.inferencereplica.core.encoding import StatusEncodingSettings
from omed.controllers.inferencereplica.core.model import PlanSettings
from omed.controllers.inferencereplica.core.observe import replica_target
from omed.controllers.inferencereplica.core.podtemplate import render_pod
from omed.controllers.inferencereplica.core.status import decode_rows_from_status
from omed.controllers.inferencereplica.shell.expectations import Expectations
from omed.controllers.inferencereplica.shell.reconciler import InferenceReplicaReconciler
from omed.informers import NAMESPACE as NAMESPACE_INDEX
from omed.informers import OWNER_UID
from omed.informers.transform import make_pod_transform
from omed.statuscodec import COLUMNAR_V2, DENSE_V1

NAMESPACE, NAME, UID = "prod", "huge", "irep-uid-huge"
KEY = f"{NAMESPACE}/{NAME}"
START = dt.datetime(2026, 9, 14, 20, 0, 0, tzinfo=dt.UTC)
TEMPLATE = {"spec": {"containers": [{"name": "ome-container", "image": "ome/srt:1.0"}]}}


def rfc3339(at: dt.datetime) -> str:
    return at.strftime("%Y-%m-%dT%H:%M:%SZ")


def replica(instances: int) -> dict[str, Any]:
    return {
        "apiVersion": "ome.io/v1beta1",
        "kind": "InferenceReplica",
        "metadata": {
            "name": NAME,
            "namespace": NAMESPACE,
            "uid": UID,
            "generation": 1,
            "resourceVersion": "1",
            "finalizers": [names.FINALIZER],
        },
        "spec": {
            "component": "engine",
            "replicas": instances,
            "runners": [{"name": "default", "template": TEMPLATE}],
        },
    }


def pod_status(index: int, *, ready: bool) -> dict[str, Any]:
    started = rfc3339(START)
    since = rfc3339(START + dt.timedelta(seconds=60 + index))
    state = {"running": {"startedAt": started}}
    flag = "True" if ready else "False"
    return {
        "phase": "Running",
        "hostIP": "10.0.0.1",
        "podIP": f"10.1.{index // 250}.{index % 250}",
        "startTime": started,
        "conditions": [
            {"type": "PodScheduled", "status": "True", "lastTransitionTime": started},
            {"type": "Initialized", "status": "True", "lastTransitionTime": started},
            {"type": "ContainersReady", "status": flag, "lastTransitionTime": since},
            {"type": "Ready", "status": flag, "lastTransitionTime": since},
            {"type": "ome.io/serving", "status": "True", "lastTransitionTime": since},
        ],
        "containerStatuses": [
            {
                "name": "ome-container",
                "image": "ome/srt:1.0",
                "ready": ready,
                "started": True,
                "restartCount": 0,
                "state": state,
            }
        ],
    }


def pods(irep: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Every Instance's pod, Ready, as the cache holds it."""
    target = replica_target(irep)
    transform = make_pod_transform()
    found: dict[str, dict[str, Any]] = {}
    for index in range(target.replicas):
        [slot] = target.slots(index)
        body = render_pod(target, index=index, incarnation=1, slot=slot, operation_id="op-0")
        body["metadata"].update(
            uid=f"pod-uid-{index}",
            resourceVersion=str(100 + index),
            creationTimestamp=rfc3339(START),
        )
        body["metadata"]["ownerReferences"][0]["uid"] = UID
        body["spec"]["nodeName"] = f"node-{index % 100}"
        body["status"] = pod_status(index, ready=True)
        found[slot.name] = transform(orjson.loads(orjson.dumps(body)))
    return found


class Store:
    """The caches a reconcile reads: the replica by key, its pods by owner uid."""

    def __init__(self, irep: dict[str, Any], pods: dict[str, dict[str, Any]]) -> None:
        self.irep = irep
        self.pods = pods
        self.revisions: list[dict[str, Any]] = []

    def get(self, key: str) -> Any:
        if key == KEY:
            return self.irep
        return self.pods.get(key.partition("/")[2])

    def by_index(self, index: str, value: str) -> list[Any]:
        return list(self.pods.values()) if index == OWNER_UID and value == UID else []


class RevisionStore:
    def __init__(self, store: Store) -> None:
        self._store = store

    def get(self, key: str) -> Any:
        return None

    def by_index(self, index: str, value: str) -> list[Any]:
        return list(self._store.revisions) if index == NAMESPACE_INDEX else []


class PodStore:
    def __init__(self, store: Store) -> None:
        self._store = store

    def get(self, key: str) -> Any:
        return self._store.pods.get(key.partition("/")[2])

    def by_index(self, index: str, value: str) -> list[Any]:
        return self._store.by_index(index, value)


class Client:
    """The API server as far as these passes reach it: a status write stores a new version
    (delivered later, decoded from JSON, as a watch event is); a gate patch a new pod version."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.version = 1000
        self.written: dict[str, Any] | None = None
        self.patched: list[str] = []
        self.writes = 0

    def _next(self) -> str:
        self.version += 1
        return str(self.version)

    async def replace_status(self, resource: Any, body: Mapping[str, Any], namespace: Any) -> Any:
        self.writes += 1
        stored = {**body, "metadata": {**body["metadata"], "resourceVersion": self._next()}}
        self.written = stored
        return stored

    async def patch(
        self, resource: Any, name: str, patch: Any, namespace: Any = None, **_: Any
    ) -> Any:
        pod = copy.deepcopy(self.store.pods[name])
        for cond in pod["status"]["conditions"]:
            for change in patch["status"]["conditions"]:
                if cond["type"] == change["type"]:
                    cond.update(change)
        pod["metadata"]["resourceVersion"] = self._next()
        self.store.pods[name] = pod
        self.patched.append(name)
        return pod

    async def get(self, resource: Any, name: str, namespace: Any = None) -> Any:
        return self.store.pods[name]

    async def create(self, resource: Any, body: Mapping[str, Any], namespace: Any = None) -> Any:
        stored = orjson.loads(orjson.dumps(body))  # a ControllerRevision
        stored["metadata"].update(resourceVersion=self._next(), uid=f"uid-{self.version}")
        self.store.revisions.append(stored)
        return stored

    def deliver(self) -> bool:
        """The watch event of the last status write, if one is pending."""
        if self.written is None:
            return False
        self.store.irep = orjson.loads(orjson.dumps(self.written))
        self.written = None
        return True


class Sink:
    def event(self, obj: Any, *, type: str, reason: str, message: str) -> None:
        pass


class World:
    def __init__(self, instances: int, encoding: str) -> None:
        irep = replica(instances)
        self.store = Store(irep, pods(irep))
        self.client = Client(self.store)
        self.clock = FakeClock(START + dt.timedelta(hours=1))
        self.expectations = Expectations(clock=self.clock)
        self.run = InferenceReplicaReconciler(
            client=self.client,  # type: ignore[arg-type]
            replicas=self.store,
            pods=PodStore(self.store),
            revisions=RevisionStore(self.store),
            events=Sink(),
            settings=PlanSettings(),
            expectations=self.expectations,
            clock=self.clock,
            status_encoding=StatusEncodingSettings(
                encoding=encoding,  # type: ignore[arg-type]
                max_decoded_instances=instances,
            ),
        )

    async def pass_(self) -> None:
        self.clock.advance(60)  # past any status pace
        await self.run.reconcile(KEY)
        for name in self.client.patched:
            self.expectations.observe(KEY, self.store.pods[name])
        self.client.patched.clear()

    async def converge(self) -> int:
        for passes in range(1, 20):
            writes = self.client.writes
            await self.pass_()
            self.client.deliver()
            if self.client.writes == writes:
                return passes
        raise RuntimeError("the replica does not converge")

    def break_pod(self, index: int) -> None:
        name = names.pod_name(NAME, index, "default", 0)
        pod = copy.deepcopy(self.store.pods[name])
        pod["status"].update(
            {
                k: v
                for k, v in pod_status(index, ready=False).items()
                if k in ("conditions", "containerStatuses")
            }
        )
        pod["metadata"]["resourceVersion"] = self.client._next()
        self.store.pods[name] = pod

    def heal_pod(self, index: int) -> None:
        name = names.pod_name(NAME, index, "default", 0)
        pod = copy.deepcopy(self.store.pods[name])
        pod["status"].update(
            {
                k: v
                for k, v in pod_status(index, ready=True).items()
                if k in ("conditions", "containerStatuses")
            }
        )
        pod["metadata"]["resourceVersion"] = self.client._next()
        self.store.pods[name] = pod


def rss_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


def reset_peak() -> None:
    with contextlib.suppress(OSError):
        Path("/proc/self/clear_refs").write_text("5")


Step = Callable[[], Awaitable[Any]]


async def measure(step: Step, *, traced: bool) -> dict[str, float]:
    gc.collect()
    if traced:
        tracemalloc.start()
        tracemalloc.reset_peak()
        before, _ = tracemalloc.get_traced_memory()
        await step()
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        return {"traced_peak_mib": (peak - before) / 2**20}
    reset_peak()
    rss = rss_kib("VmRSS")
    started = time.process_time()
    await step()
    spent = time.process_time() - started
    return {"cpu_ms": spent * 1000, "rss_peak_mib": (rss_kib("VmHWM") - rss) / 1024}


async def scenario(world: World, traced: bool) -> dict[str, dict[str, float]]:
    """One run of each scenario, leaving the world converged as it found it."""
    out: dict[str, dict[str, float]] = {}
    writes = world.client.writes
    out["noop"] = await measure(world.pass_, traced=traced)
    assert world.client.writes == writes, "a no-op pass wrote"
    world.break_pod(7)
    out["one_changed"] = await measure(world.pass_, traced=traced)
    assert world.client.writes == writes + 1, "the changed pass did not write"
    world.client.deliver()
    out["fresh_version"] = await measure(world.pass_, traced=traced)
    status = world.store.irep["status"]
    assert world.client.deliver(), "the fresh version's pass wrote nothing"
    out["read_back"] = await measure(world.pass_, traced=traced)
    assert world.client.writes == writes + 2, "the read-back pass wrote"

    async def read() -> None:
        decode_rows_from_status(orjson.loads(orjson.dumps(status)), max_rows=10**9)

    out["read_fresh"] = await measure(read, traced=traced)
    world.heal_pod(7)
    await world.pass_()
    world.client.deliver()
    await world.converge()
    return out


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    calibration = calibration_ms()
    world = World(args.instances, args.encoding)
    built = time.process_time()
    passes = await world.converge()
    converge_cpu = time.process_time() - built
    runs = [await scenario(world, traced=False) for _ in range(args.runs)]
    traced = await scenario(world, traced=True)
    stored = world.store.irep["status"]
    result: dict[str, Any] = {
        "instances": args.instances,
        "encoding": args.encoding,
        "stored_encoding": stored.get("instanceStatusEncoding", DENSE_V1),
        "status_bytes": len(orjson.dumps(stored)),
        "converge_passes": passes,
        "converge_cpu_s": round(converge_cpu, 2),
        "runs": args.runs,
        "calibration_loop_ms": [calibration, calibration_ms()],
        "load_average": [round(x, 1) for x in os.getloadavg()],
    }
    for name in runs[0]:
        cpu = [run[name]["cpu_ms"] for run in runs]
        rss = [run[name]["rss_peak_mib"] for run in runs]
        result[name] = {
            "cpu_ms_best": round(min(cpu), 1),
            "cpu_ms_median": round(statistics.median(cpu), 1),
            "rss_peak_mib_max": round(max(rss), 1),
            "traced_peak_mib": round(traced[name]["traced_peak_mib"], 1),
        }
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--instances", type=int, default=20000)
    parser.add_argument("--encoding", choices=(COLUMNAR_V2, DENSE_V1), default=COLUMNAR_V2)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    print(json.dumps(asyncio.run(main_async(args)), indent=2))


if __name__ == "__main__":
    main()
