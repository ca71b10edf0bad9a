"""What the e2e suites that run the manager as a real process (``python -m omed``) share.

:class:`ManagerWorld` is the test's namespace seen from outside the manager. It starts
managers (through the e2e conftest's ``managers`` fixture) exactly as the chart runs them, and
waits until the newest one leads, or kills it with SIGKILL; it creates and patches the
InferenceService (built with :func:`serving_runtime` and :func:`inference_service`); and
:meth:`ManagerWorld.running` runs the node simulator and the test's own watcher of the
namespace for the span of the test. :class:`PodIdentity` is what names a pod ever seen, and
:func:`duplicate_pods` finds a pod created twice among them.

``tests/e2e`` is not a package: the suites import this module as ``_support`` (pytest puts the
test's folder on ``sys.path``, and conftest modules aren't importable).
"""

from __future__ import annotations

import asyncio
import signal
import time
from collections import defaultdict
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, Protocol

from omed.kube.client import KubeClient
from omed.kube.resources import INFERENCE_SERVICES, PODS, SERVING_RUNTIMES
from omed_devcluster.simulator import NodeSimulator, Timings


def lifecycle(*, scale_up_pod_batch_size: int) -> dict[str, Any]:
    """The ``lifecycle`` entry of the manager's config: scale-ups in passes of at most
    ``scale_up_pod_batch_size`` pods, scale-downs by 10% of the pods a wave, short requeues."""
    return {
        "scaleUpPodBatchSize": scale_up_pod_batch_size,
        "scaleDownPodBatchSize": "10%",
        "scaleDownRequeueInterval": "5s",
        "requeue": {"operation": "5s", "gate": "3s"},
    }


def serving_runtime(name: str, **configs: Any) -> dict[str, Any]:
    """A ServingRuntime ``name`` of safetensors models, with these entries of its spec
    (``engineConfig=``, ``decoderConfig=``)."""
    return {
        "apiVersion": "ome.io/v1beta1",
        "kind": "ServingRuntime",
        "metadata": {"name": name},
        "spec": {"supportedModelFormats": [{"name": "safetensors"}], **configs},
    }


def inference_service(name: str, *, runtime: str, **components: Any) -> dict[str, Any]:
    """An OMENative InferenceService ``name`` of the llama-3-2-1b-instruct model on the
    ServingRuntime ``runtime``, with these components (``engine=``, ``decoder=``)."""
    return {
        "apiVersion": "ome.io/v1beta1",
        "kind": "InferenceService",
        "metadata": {"name": name},
        "spec": {
            "deploymentMode": "OMENative",
            "model": {"name": "llama-3-2-1b-instruct"},
            "runtime": {"name": runtime},
            **components,
        },
    }


def condition(obj: Mapping[str, Any], kind: str) -> str | None:
    """The status of the ``kind`` condition of ``obj`` (``"True"``...), or None if absent."""
    for item in (obj.get("status") or {}).get("conditions") or ():
        if item.get("type") == kind:
            return str(item.get("status"))
    return None


def pod_ready(pod: Mapping[str, Any]) -> bool:
    return condition(pod, "Ready") == "True"


async def eventually(
    check: Callable[[], Any], *, timeout: float, what: str, interval: float = 0.1
) -> Any:
    """Poll ``check`` (sync or async) until it returns something truthy; return that."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if isinstance(value, Awaitable):
            value = await value
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g}s waiting for {what}")
        await asyncio.sleep(interval)


@dataclass
class PodIdentity:
    """One pod ever seen (one uid): its name and the incarnation it was made for. The suites'
    ``PodRecord`` add what each of them follows."""

    name: str
    uid: str
    incarnation: str


def duplicate_pods(records: Iterable[PodIdentity]) -> dict[str, list[tuple[str, str]]]:
    """Pod names seen with two uids of one incarnation (a pod created twice), with every
    (incarnation, uid) seen under each such name."""
    by_name: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for record in records:
        by_name[record.name].append((record.incarnation, record.uid))
    return {
        name: seen
        for name, seen in by_name.items()
        if len({incarnation for incarnation, _ in seen}) != len(seen)
    }


class Watcher(Protocol):
    """A test's own watch of the namespace (its informers), started and stopped with it."""

    async def start(self) -> None: ...

    async def stop(self) -> None: ...


class ManagerWorld:
    """The test's namespace and the manager processes started in it; :attr:`manager` is the
    newest (None before the first)."""

    def __init__(self, *, kube: KubeClient, namespace: str, managers: Any) -> None:
        self.kube = kube
        self.namespace = namespace
        self.managers = managers
        self.manager: Any = None
        self.simulator: NodeSimulator | None = None
        """The node simulator while :meth:`running` runs (for failure injections)."""

    async def start_manager(self, name: str, *extra: str) -> Any:
        """Start a manager named ``name`` (``extra`` arguments last, as a chart value that sets
        the flag would put them); return it once it is ready and leads."""
        self.manager = self.managers.start(*extra, name=name)
        await self.manager.wait_ready(timeout=90)
        await eventually(self.manager.is_leader, timeout=30, what=f"{name} leading")
        return self.manager

    def kill_manager(self) -> None:
        """``kill -9`` the newest manager and reap it."""
        self.manager.signal(signal.SIGKILL)
        self.manager.proc.wait(timeout=10)
        self.managers.withdraw(self.manager)

    def check_manager(self) -> None:
        """Fail, with the tail of its log, if the newest manager has exited."""
        if self.manager is not None and not self.manager.running():
            raise AssertionError(f"the manager exited:\n{self.manager.log()[-4000:]}")

    async def create_service(self, runtime: Mapping[str, Any], service: Mapping[str, Any]) -> None:
        """Create the ServingRuntime ``runtime``, then the InferenceService ``service``."""
        await self.kube.create(SERVING_RUNTIMES, runtime, self.namespace)
        await self.kube.create(INFERENCE_SERVICES, service, self.namespace)

    async def patch_service(self, name: str, patch: Mapping[str, Any]) -> None:
        """Merge ``patch`` into the InferenceService ``name``."""
        await self.kube.patch(INFERENCE_SERVICES, name, patch, self.namespace)

    async def pods(self) -> list[dict[str, Any]]:
        return list(await self.kube.list_all(PODS, self.namespace))

    @asynccontextmanager
    async def running(
        self, watcher: Watcher | None = None, *, nodes: int, timings: Timings | None = None
    ) -> AsyncIterator[None]:
        """The node simulator (``nodes`` nodes of 8 GPUs, running only this namespace's pods)
        and ``watcher`` (if the test keeps a watch of its own), for the span of the ``with``;
        then every manager is killed."""
        simulator = NodeSimulator(
            self.kube,
            nodes=nodes,
            gpus_per_node=8,
            namespaces=[self.namespace],
            node_prefix=f"{self.namespace}-n",
            timings=timings,
        )
        await simulator.start()
        self.simulator = simulator
        try:
            if watcher is not None:
                await watcher.start()
            try:
                yield
            finally:
                if watcher is not None:
                    await watcher.stop()
        finally:
            self.managers.stop_all()  # kill -9 before the simulator goes, so nothing acts on a gap
            self.simulator = None
            await simulator.stop()
