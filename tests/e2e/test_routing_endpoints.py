"""Routing judged by what the Services route to: a scale-down and a SurgeThenDrain update,
sampled from the EndpointSlices that the real EndpointSlice controller keeps.

The chart's manager serves an engine of four single-pod Instances whose runtime declares a
port, so the serving controller gives it the traffic Service ``chat-engine`` and the real
kube-controller-manager its EndpointSlices. The test watches those slices and the pods with
informers of its own. Every slice version counts the ready endpoints: through an update to a
new image they never drop below four, and after a scale to two never below two. Every pod
deletion is checked against the slices as the API server held them just before it (the
latest slice version whose resourceVersion precedes the pod's deletion, both read from the
one etcd): no pod is deleted while a slice lists it as a ready endpoint.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import _support as support
import pytest
from _support import condition, eventually, pod_ready

from omed.informers import Handlers, InformerFactory
from omed.informers.endpoints import LABEL_SERVICE_NAME
from omed.informers.transform import Obj, identity
from omed.kube.client import KubeClient
from omed.kube.resources import ENDPOINT_SLICES, INFERENCE_SERVICES, PODS

pytestmark = [pytest.mark.integration, pytest.mark.slow]

SERVICE = "chat"
ENGINE = f"{SERVICE}-engine"
OLD_IMAGE, NEW_IMAGE = "ome/srt:1.0", "ome/srt:2.0"
RUNTIME = support.serving_runtime(
    "srt-engine",
    engineConfig={
        "runner": {
            "name": "ome-container",
            "image": OLD_IMAGE,
            "ports": [{"name": "http", "containerPort": 8080}],
        },
    },
)


def ready_uids(slice_: Obj) -> frozenset[str]:
    """Pods a slice lists as ready (``ready`` absent counts as ready, as the API says)."""
    found = set()
    for endpoint in slice_.get("endpoints") or ():
        conditions = endpoint.get("conditions") or {}
        uid = (endpoint.get("targetRef") or {}).get("uid")
        if uid and conditions.get("ready") is not False and not conditions.get("terminating"):
            found.add(uid)
    return frozenset(found)


@dataclass
class Sampler:
    """The slices' history, the fewest ready endpoints since :meth:`arm`, and deletions."""

    kube: KubeClient
    namespace: str
    factory: InformerFactory = field(init=False)
    history: dict[str, list[tuple[int, frozenset[str]]]] = field(default_factory=dict)
    """slice name -> (resourceVersion, ready pod uids) of each version seen, in order."""
    low: int | None = None
    samples: int = 0
    deletions: list[tuple[str, str, int]] = field(default_factory=list)
    """(pod name, uid, resourceVersion of the first version with a deletionTimestamp)."""

    def __post_init__(self) -> None:
        self.factory = InformerFactory(self.kube)
        self.slices = self.factory.informer(
            ENDPOINT_SLICES,
            namespace=self.namespace,
            label_selector=f"{LABEL_SERVICE_NAME}={ENGINE}",
            transform=identity,
        )
        self.pods = self.factory.informer(PODS, namespace=self.namespace, transform=identity)
        self.slices.add_event_handler(
            Handlers(
                on_add=self._slice,
                on_update=lambda _o, n: self._slice(n),
                on_delete=lambda _o: self._sample(),
            )
        )
        self.pods.add_event_handler(
            Handlers(on_add=self._pod, on_update=lambda _o, n: self._pod(n), on_delete=self._pod)
        )
        self._deleting: set[str] = set()

    async def start(self) -> None:
        self.factory.start()
        assert await self.factory.wait_for_cache_sync(timeout=30)

    async def stop(self) -> None:
        await self.factory.stop()

    def ready_now(self) -> int:
        return len(frozenset().union(*(ready_uids(s) for s in self.slices.store.list())))

    def arm(self) -> None:
        self.low, self.samples = self.ready_now(), 0

    def _sample(self) -> None:
        if self.low is not None:
            self.samples += 1
            self.low = min(self.low, self.ready_now())

    def _slice(self, slice_: Obj) -> None:
        meta = slice_["metadata"]
        versions = self.history.setdefault(meta["name"], [])
        versions.append((int(meta["resourceVersion"]), ready_uids(slice_)))
        self._sample()

    def _pod(self, pod: Obj) -> None:
        meta = pod["metadata"]
        if meta.get("deletionTimestamp") and meta["uid"] not in self._deleting:
            self._deleting.add(meta["uid"])
            self.deletions.append((meta["name"], meta["uid"], int(meta["resourceVersion"])))

    def deleted_while_ready(self) -> list[str]:
        """Deletions whose pod a slice listed as ready just before the deletion."""
        found = []
        for name, uid, version in self.deletions:
            for slice_name, versions in self.history.items():
                before = [ready for rv, ready in versions if rv < version]
                if before and uid in before[-1]:
                    found.append(f"{name} (slice {slice_name}, deletion at rv {version})")
        return found


class World(support.ManagerWorld):
    def __init__(self, *, kube: KubeClient, namespace: str, managers: Any) -> None:
        super().__init__(kube=kube, namespace=namespace, managers=managers)
        self.sampler = Sampler(kube, namespace)

    async def serving(self, wanted: int, image: str) -> bool:
        """The InferenceService Ready with exactly ``wanted`` live, Ready pods on ``image``,
        all of them ready endpoints of the traffic Service."""
        self.check_manager()
        isvc = await self.kube.get(INFERENCE_SERVICES, SERVICE, self.namespace)
        if condition(isvc, "Ready") != "True":
            return False
        pods = [p for p in await self.pods() if not p["metadata"].get("deletionTimestamp")]
        if len(pods) != wanted or len(await self.pods()) != wanted:
            return False
        if not all(pod_ready(p) and p["spec"]["containers"][0]["image"] == image for p in pods):
            return False
        return self.sampler.ready_now() == wanted


@pytest.fixture
async def world(
    kube: KubeClient, namespace: str, managers: Any, manager_config: Any
) -> AsyncIterator[World]:
    await manager_config(lifecycle=support.lifecycle(scale_up_pod_batch_size=50))
    world = World(kube=kube, namespace=namespace, managers=managers)
    async with world.running(world.sampler, nodes=2):
        yield world


async def test_capacity_never_dips_and_no_ready_endpoint_is_deleted(world: World) -> None:
    await world.start_manager("manager-a")
    body = support.inference_service(
        SERVICE,
        runtime="srt-engine",
        engine={
            "minReplicas": 4,
            "maxReplicas": 4,
            "lifecycle": {"updateStrategy": {"type": "SurgeThenDrain"}},
        },
    )
    await world.create_service(RUNTIME, body)
    await eventually(lambda: world.serving(4, OLD_IMAGE), timeout=120, what="4 ready endpoints")

    world.sampler.arm()
    await world.patch_service(SERVICE, {"spec": {"engine": {"runner": {"image": NEW_IMAGE}}}})
    await eventually(lambda: world.serving(4, NEW_IMAGE), timeout=180, what="4 on the new image")
    assert world.sampler.samples > 0
    assert world.sampler.low == 4, f"ready endpoints dipped to {world.sampler.low} in the update"
    assert len(world.sampler.deletions) >= 4  # every old pod went

    world.sampler.arm()
    await world.patch_service(SERVICE, {"spec": {"engine": {"minReplicas": 2, "maxReplicas": 2}}})
    await eventually(lambda: world.serving(2, NEW_IMAGE), timeout=120, what="2 ready endpoints")
    assert world.sampler.low is not None and world.sampler.low >= 2
    assert len(world.sampler.deletions) >= 6

    assert world.sampler.deleted_while_ready() == []
