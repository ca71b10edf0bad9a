"""The runtime revision shell over caches filled by hand and a client that records requests:
the writes a pass sends (and their preconditions), the requeue at the deadline, the
expectation that holds creates until the cache shows a snapshot, and which events wake a
runtime name."""

from __future__ import annotations

import datetime as dt
from typing import Any

from omed.api.constants import ANNOTATION_GC_ELIGIBLE_SINCE
from omed.clock import FakeClock
from omed.controllers.runtimerevision.core.snapshot import content_hash
from omed.controllers.runtimerevision.shell.controller import RuntimeRevisionController
from omed.informers import InformerFactory
from omed.kube.errors import Conflict

NOW = dt.datetime(2026, 9, 28, 14, 0, 0, tzinfo=dt.UTC)
SPEC = {"engineConfig": {"runner": {"image": "srt:1"}}}


class Recorder:
    """A KubeClient stand-in: records creates, patches and deletes; refuses what it's told."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []
        self.conflict: set[str] = set()

    async def create(self, resource: Any, body: Any, namespace: str | None = None) -> Any:
        self.calls.append(("create", (namespace, body)))
        return body

    async def patch(
        self, resource: Any, name: str, patch: Any, namespace: str | None = None
    ) -> Any:
        self.calls.append(("patch", (namespace, name, patch)))
        if name in self.conflict:
            raise Conflict(409, "Conflict", "the object has been modified")
        return {}

    async def delete(
        self, resource: Any, name: str, namespace: str | None = None, **pre: Any
    ) -> Any:
        self.calls.append(("delete", (namespace, name, pre)))
        return {}


def controller() -> tuple[RuntimeRevisionController, Recorder, FakeClock]:
    client = Recorder()
    clock = FakeClock(NOW)
    made = RuntimeRevisionController(
        client=client,  # type: ignore[arg-type]
        factory=InformerFactory(client, clock=clock),  # type: ignore[arg-type]
        namespace="ome",
        retention=1,
        grace_period=3600.0,
        clock=clock,
    )
    return made, client, clock


def revision(number: int, *, mark: str | None = None, digest: str | None = None) -> dict[str, Any]:
    digest = digest or f"{number:08x}"
    annotations = {"ome.io/created-by": "ome-controller"}
    if mark:
        annotations[ANNOTATION_GC_ELIGIBLE_SINCE] = mark
    return {
        "metadata": {
            "name": f"r-prod-srt-{digest}",
            "namespace": "ome",
            "uid": f"uid-{number}",
            "resourceVersion": f"{10 + number}",
            "creationTimestamp": f"2026-09-28T13:0{number}:00Z",
            "labels": {
                "ome.io/runtime-of": "srt",
                "ome.io/runtime-of-kind": "ServingRuntime",
                "ome.io/runtime-of-namespace": "prod",
                "ome.io/revision-hash": digest,
            },
            "annotations": annotations,
        },
        "revision": number,
        "data": {},
    }


def runtime() -> dict[str, Any]:
    return {"metadata": {"name": "srt", "namespace": "prod"}, "spec": SPEC}


async def test_a_pass_snapshots_once_until_the_cache_shows_it() -> None:
    made, client, clock = controller()
    made.runtimes.store.upsert(runtime())
    await made.reconciler.reconcile("srt")
    creates = [c for c in client.calls if c[0] == "create"]
    assert len(creates) == 1
    namespace, body = creates[0][1]
    assert namespace == "ome"
    assert body["metadata"]["name"] == f"r-prod-srt-{content_hash(SPEC)}"
    await made.reconciler.reconcile("srt")
    assert len([c for c in client.calls if c[0] == "create"]) == 1, "created again before seen"
    clock.advance(31)
    await made.reconciler.reconcile("srt")
    assert len([c for c in client.calls if c[0] == "create"]) == 2, "expectation never expires"


async def test_marks_carry_the_resource_version_deletes_the_preconditions_and_it_requeues() -> None:
    made, client, _clock = controller()
    current = revision(3, digest=content_hash(SPEC))
    made.runtimes.store.upsert(runtime())
    for obj in (revision(1, mark="2026-09-28T12:00:00Z"), revision(2), current):
        made.revisions.store.upsert(obj)
    result = await made.reconciler.reconcile("srt")
    assert [c[0] for c in client.calls] == ["patch", "delete"]
    _ns, name, patch = client.calls[0][1]
    assert name == "r-prod-srt-00000002"
    assert patch == {
        "metadata": {
            "resourceVersion": "12",
            "annotations": {ANNOTATION_GC_ELIGIBLE_SINCE: "2026-09-28T14:00:00Z"},
        }
    }
    _ns, name, pre = client.calls[1][1]
    assert (name, pre) == ("r-prod-srt-00000001", {"uid": "uid-1", "resource_version": "11"})
    assert result.requeue_after == 3600.0


async def test_a_refused_mark_is_left_to_the_pass_its_event_starts() -> None:
    made, client, _clock = controller()
    client.conflict.add("r-prod-srt-00000001")
    for obj in (revision(1), revision(2)):
        made.revisions.store.upsert(obj)
    await made.reconciler.reconcile("srt")
    assert [c[0] for c in client.calls] == ["patch"]


async def test_only_a_change_of_runtime_or_pins_wakes_a_name() -> None:
    made, _client, _clock = controller()
    made.revisions.store.upsert(revision(1))
    queue = made.controller.queue
    old = {
        "metadata": {"name": "chat", "namespace": "prod"},
        "spec": {"runtime": {"name": "other"}},
        "status": {"observedGeneration": 1},
    }
    made._service_update(old, {**old, "status": {"observedGeneration": 2}})
    assert len(queue) == 0
    pinned = {**old, "spec": {"runtime": {"name": "other", "revision": "r-prod-srt-00000001"}}}
    made._service_update(old, pinned)
    assert len(queue) == 2
    assert sorted([await queue.get(), await queue.get()]) == ["other", "srt"]
