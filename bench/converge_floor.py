"""The floor under bench/converge.py: an ideal controller's minimum writes alone; print JSON.

    .venv/bin/python bench/converge_floor.py                 # 200 services x 4, as converge.py
    .venv/bin/python bench/converge_floor.py --services 20   # a quick run

The same control plane, CRDs (the ``ome-crd`` chart, installed with helm), node simulator (its
own process, the same nodes; kube-scheduler binds the pods) and InferenceServices as
``bench/converge.py``, but no manager, so the ``ome-resources`` chart isn't installed either
(its webhooks, failurePolicy Fail, would refuse every write with no manager serving them):
no admission webhook is in this script's path, where converge.py's InferenceService and
InferenceReplica creates and updates pass the manager's. In its place a script makes exactly
the minimum writes of :func:`converge.min_writes` for each InferenceService, through one client
with the manager's limiter (100 QPS, burst 200), with no worker limit (every InferenceService
advances at once) and no reads but one pod watch:

1. the InferenceService's finalizer;
2. the InferenceReplica create (the object omed's InferenceService controller projects, its
   finalizer on) and its status with each Instance's Create operation;
3. per Instance one pod create (the pod omed's InferenceReplica controller renders), and the
   ``ome.io/serving`` gate patch once the simulated kubelet reports the pod's containers ready;
4. once every pod is Ready, the InferenceReplica's status (Ready rows) and the
   InferenceService's status (Ready).

It writes no Event (the manager writes two per Instance, through its own client). The clock
runs from the first InferenceService create until the last Ready status is written. The
question it answers: can this machine's API server, with the simulated kubelets' writes, serve
even the minimum writes within 1.3x of the limiter's bound? If the ideal controller can't,
no controller can.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import os
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from converge import (
    BURST,
    NAMESPACE,
    NODE_PREFIX,
    QPS,
    RUNTIME,
    add_fleet_arguments,
    min_writes,
    pid_of,
    process_cpu_seconds,
    run_and_print,
    server_writes,
    service_body,
    start_simulator,
    stop_process,
    until,
)
from converge import (
    apiserver_metrics as read_apiserver_metrics,
)

from omed.api.constants import READINESS_GATE_SERVING
from omed.clock import rfc3339
from omed.controllers.inferencereplica.core.observe import replica_target
from omed.controllers.inferencereplica.core.podtemplate import render_pod
from omed.controllers.inferenceservice.core.names import FINALIZER
from omed.controllers.inferenceservice.core.project import project
from omed.controllers.inferenceservice.core.status import build_status, replica_readiness
from omed.controllers.inferenceservice.shell.read import (
    read_replica,
    read_runtime_spec,
    read_service,
)
from omed.informers import Handlers, InformerFactory
from omed.informers.transform import Obj
from omed.kube.client import KubeClient, load_config
from omed.kube.resources import (
    INFERENCE_REPLICAS,
    INFERENCE_SERVICES,
    NAMESPACES,
    NODES,
    PODS,
)
from omed_devcluster.controlplane import ControlPlane
from omed_devcluster.install import OmeInstall


def _now() -> str:
    return rfc3339(dt.datetime.now(dt.UTC))


def _condition(pod: Obj, kind: str) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or ()
    return any(c.get("type") == kind and c.get("status") == "True" for c in conditions)


class PodWatch:
    """One pod informer; an asyncio.Event per pod for ContainersReady and for Ready."""

    def __init__(self) -> None:
        self.containers_ready: dict[str, asyncio.Event] = {}
        self.ready: dict[str, asyncio.Event] = {}

    def _event(self, table: dict[str, asyncio.Event], name: str) -> asyncio.Event:
        return table.setdefault(name, asyncio.Event())

    async def wait_containers_ready(self, name: str) -> None:
        await self._event(self.containers_ready, name).wait()

    async def wait_ready(self, name: str) -> None:
        await self._event(self.ready, name).wait()

    def seen(self, pod: Obj) -> None:
        name = str(pod["metadata"]["name"])
        if _condition(pod, "ContainersReady"):
            self._event(self.containers_ready, name).set()
        if _condition(pod, "Ready"):
            self._event(self.ready, name).set()


async def ideal_service(client: KubeClient, isvc: Obj, engines: int, pods: PodWatch) -> float:
    """The minimum writes for one InferenceService; the monotonic time of its Ready status."""
    name = isvc["metadata"]["name"]
    isvc = await client.patch(
        INFERENCE_SERVICES, name, {"metadata": {"finalizers": [FINALIZER]}}, NAMESPACE
    )
    projection = project(read_service(isvc), read_runtime_spec(RUNTIME), default_mode="OMENative")
    wanted = projection.replicas["engine"].to_dict()
    irep = await client.create(INFERENCE_REPLICAS, wanted, NAMESPACE)  # its finalizer on
    irep_name = irep["metadata"]["name"]
    target = replica_target(irep)
    started = _now()
    rows = [
        {
            "index": i,
            "incarnation": 1,
            "phase": "Creating",
            "targetRevision": target.update_revision,
            "podCount": 0,
            "operation": {
                "id": f"{irep_name}-create-{i}",
                "type": "Create",
                "step": "CreatePods",
                "startedAt": started,
                "targetRevision": target.update_revision,
            },
        }
        for i in range(engines)
    ]
    irep = await client.replace_status(
        INFERENCE_REPLICAS,
        {
            **irep,
            "status": {
                "observedGeneration": irep["metadata"]["generation"],
                "replicas": 0,
                "updateRevision": target.update_revision,
                "instanceStatuses": rows,
            },
        },
        NAMESPACE,
    )

    async def instance(index: int) -> None:
        slot = target.slots(index)[0]
        pod = render_pod(
            target,
            index=index,
            incarnation=1,
            slot=slot,
            operation_id=f"{irep_name}-create-{index}",
        )
        created = await client.create(PODS, pod, NAMESPACE)
        await pods.wait_containers_ready(slot.name)
        await client.patch(
            PODS,
            slot.name,
            {
                "metadata": {"uid": created["metadata"]["uid"]},
                "status": {
                    "conditions": [
                        {
                            "type": READINESS_GATE_SERVING,
                            "status": "True",
                            "reason": "Serving",
                            "message": "",
                            "lastTransitionTime": _now(),
                        }
                    ]
                },
            },
            NAMESPACE,
            content_type="application/strategic-merge-patch+json",
            subresource="status",
        )
        await pods.wait_ready(slot.name)

    await asyncio.gather(*(instance(i) for i in range(engines)))
    ready_at = _now()
    ready_rows = [
        {
            "index": i,
            "incarnation": 1,
            "phase": "Ready",
            "runningRevision": target.update_revision,
            "targetRevision": target.update_revision,
            "podCount": 1,
            "servingPodCount": 1,
            "availablePodCount": 1,
            "readySince": ready_at,
        }
        for i in range(engines)
    ]
    irep = await client.replace_status(
        INFERENCE_REPLICAS,
        {
            **irep,
            "status": {
                "observedGeneration": irep["metadata"]["generation"],
                "replicas": engines,
                "readyReplicas": engines,
                "servingReplicas": engines,
                "updatedReplicas": engines,
                "currentRevision": target.update_revision,
                "updateRevision": target.update_revision,
                "instanceStatuses": ready_rows,
            },
        },
        NAMESPACE,
    )
    status = build_status(
        isvc=read_service(isvc),
        components=[replica_readiness("engine", read_replica(irep))],
        now=dt.datetime.now(dt.UTC),
    )
    await client.replace_status(INFERENCE_SERVICES, {**isvc, "status": status}, NAMESPACE)
    return time.monotonic()


async def run(args: argparse.Namespace, plane: ControlPlane, workdir: Path) -> dict[str, Any]:
    assert plane.kubeconfig_path is not None
    kubeconfig = str(plane.kubeconfig_path)
    config = await load_config(kubeconfig)
    pods_per_node = max(110, 2 * args.gpus_per_node)
    simulator = None
    async with (
        KubeClient(config, qps=2000, burst=4000) as setup,
        KubeClient(config, qps=QPS, burst=BURST) as client,
    ):
        try:
            install = OmeInstall(plane, workdir=workdir / "install")
            await asyncio.to_thread(install.install_crds)
            await setup.create(NAMESPACES, {"metadata": {"name": NAMESPACE}})
            simulator = start_simulator(
                kubeconfig=kubeconfig,
                nodes=args.nodes,
                gpus=args.gpus_per_node,
                pods_per_node=pods_per_node,
                log_path=workdir / "simulator.log",
            )

            async def nodes_up() -> bool:
                listed = await setup.list_page(
                    NODES, labelSelector=f"sim.omed.dev/pool={NODE_PREFIX}"
                )
                return bool(len(listed.get("items") or []) == args.nodes)

            await until(nodes_up, timeout=120, what="the simulated nodes")
            watch = PodWatch()
            informers = InformerFactory(setup)
            informers.informer(PODS, namespace=NAMESPACE).add_event_handler(
                Handlers(on_add=watch.seen, on_update=lambda _old, new: watch.seen(new))
            )
            informers.start()
            try:
                if not await informers.wait_for_cache_sync(timeout=60):
                    raise RuntimeError("the pod informer didn't sync")
                pids = {
                    "apiserver": pid_of(plane, "apiserver"),
                    "etcd": pid_of(plane, "etcd"),
                    "scheduler": pid_of(plane, "scheduler"),
                    "controller_manager": pid_of(plane, "controller-manager"),
                    "simulator": simulator.pid,
                    "bench": os.getpid(),
                }
                cpu_before = {k: process_cpu_seconds(p) for k, p in pids.items()}
                server_before = await asyncio.to_thread(read_apiserver_metrics, plane)
                start = time.monotonic()
                names = [f"svc-{i:04d}" for i in range(args.services)]
                created = await asyncio.gather(
                    *(
                        setup.create(INFERENCE_SERVICES, service_body(n, args.engines), NAMESPACE)
                        for n in names
                    )
                )
                done = await asyncio.wait_for(
                    asyncio.gather(
                        *(ideal_service(client, isvc, args.engines, watch) for isvc in created)
                    ),
                    timeout=args.timeout,
                )
                cpu = {k: round(process_cpu_seconds(p) - cpu_before[k], 1) for k, p in pids.items()}
                server_after = await asyncio.to_thread(read_apiserver_metrics, plane)
            finally:
                await informers.stop()
        finally:
            stop_process(simulator)
    seconds = max(done) - start
    minimum = args.services * min_writes(args.engines)
    bound = max(0.0, minimum - BURST) / QPS
    return {
        "services": args.services,
        "instances": args.services * args.engines,
        "seconds": round(seconds, 2),
        "bound_seconds": round(bound, 2),
        "ratio_to_bound": round(seconds / bound, 2) if bound else None,
        "writes": minimum,
        "cpu_seconds_by_process": cpu,
        "api_server_writes_by_target": server_writes(server_after, server_before),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_fleet_arguments(parser)
    args = parser.parse_args()
    if args.services * args.engines > args.nodes * args.gpus_per_node:
        raise SystemExit("the one-GPU pods don't fit the simulated GPUs")
    run_and_print(
        benchmark="converge_floor",
        run_on=lambda plane, workdir: run(args, plane, workdir),
        flags={"kube_api_qps": QPS, "kube_api_burst": BURST},
    )


if __name__ == "__main__":
    main()
