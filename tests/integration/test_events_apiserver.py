"""The event recorder against the real API server: the Events it writes, a repeat that bumps
the count of the same Event, and the per-object budget dropping events after the burst and
letting them through again once the bucket refills (a 1 s refill, real time)."""

from __future__ import annotations

import asyncio
import re
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest

from omed.clock import parse_rfc3339
from omed.events import NORMAL, WARNING, EventRecorder
from omed.kube.resources import CONFIGMAPS, EVENTS, NAMESPACES
from omed.metrics import REGISTRY

pytestmark = pytest.mark.integration

Recorder = Callable[..., Awaitable[EventRecorder]]


@pytest.fixture
async def recorder(kube: Any) -> AsyncIterator[Recorder]:
    made: list[EventRecorder] = []

    async def make(**kwargs: Any) -> EventRecorder:
        rec = EventRecorder(kube, instance="itest-pod", **kwargs)
        await rec.start()
        made.append(rec)
        return rec

    yield make
    for rec in made:
        await rec.stop()


@pytest.fixture
async def configmap(kube: Any, namespace: str) -> dict[str, Any]:
    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "chat"}}
    created: dict[str, Any] = await kube.create(CONFIGMAPS, body, namespace)
    # Objects from a list have no apiVersion/kind; the informer cache sets them, as here.
    created.setdefault("apiVersion", "v1")
    created.setdefault("kind", "ConfigMap")
    return created


async def events_about(kube: Any, obj: dict[str, Any], namespace: str) -> list[dict[str, Any]]:
    uid = obj["metadata"]["uid"]
    items: list[dict[str, Any]] = await kube.list_all(
        EVENTS, namespace, fieldSelector=f"involvedObject.uid={uid}"
    )
    return sorted(items, key=lambda e: (e["firstTimestamp"], e["message"]))


async def poll_events(
    kube: Any,
    obj: dict[str, Any],
    namespace: str,
    check: Callable[[list[dict[str, Any]]], bool],
    *,
    timeout: float = 10.0,
) -> list[dict[str, Any]]:
    began = time.monotonic()
    while True:
        items = await events_about(kube, obj, namespace)
        if check(items):
            return items
        if time.monotonic() - began > timeout:
            raise AssertionError(f"events never matched: {[e['message'] for e in items]}")
        await asyncio.sleep(0.05)


def dropped(event_type: str) -> float:
    return REGISTRY.get_sample_value("omed_events_dropped_total", {"type": event_type}) or 0.0


async def test_an_event_appears_with_client_go_fields(
    kube: Any, namespace: str, configmap: dict[str, Any], recorder: Recorder
) -> None:
    rec = await recorder()
    rec.event(configmap, type=NORMAL, reason="InstanceCreated", message="created Instance 0")
    await rec.flush()
    [event] = await poll_events(kube, configmap, namespace, lambda items: len(items) == 1)
    assert re.fullmatch(r"chat\.[0-9a-f]{16}", event["metadata"]["name"])
    assert event["metadata"]["namespace"] == namespace
    involved = event["involvedObject"]
    assert involved["apiVersion"] == "v1"
    assert involved["kind"] == "ConfigMap"
    assert involved["name"] == "chat"
    assert involved["namespace"] == namespace
    assert involved["uid"] == configmap["metadata"]["uid"]
    assert involved["resourceVersion"] == configmap["metadata"]["resourceVersion"]
    assert (event["type"], event["reason"], event["message"]) == (
        "Normal",
        "InstanceCreated",
        "created Instance 0",
    )
    assert event["source"]["component"] == "ome-controller-manager"
    assert event["reportingComponent"] == "ome-controller-manager"
    assert event["reportingInstance"] == "itest-pod"
    assert event["count"] == 1
    assert event["firstTimestamp"] == event["lastTimestamp"]


async def test_an_event_about_a_cluster_scoped_object_lands_in_default(
    kube: Any, namespace: str, recorder: Recorder
) -> None:
    ns_obj = await kube.get(NAMESPACES, namespace)
    ns_obj.setdefault("apiVersion", "v1")
    ns_obj.setdefault("kind", "Namespace")
    rec = await recorder()
    marker = f"marker {uuid.uuid4().hex}"
    rec.event(ns_obj, type=WARNING, reason="Checked", message=marker)
    await rec.flush()
    items = await poll_events(kube, ns_obj, "default", lambda items: len(items) == 1)
    try:
        assert items[0]["message"] == marker
        assert "namespace" not in items[0]["involvedObject"]
    finally:
        for item in items:
            await kube.delete(EVENTS, item["metadata"]["name"], "default")


async def test_a_repeat_bumps_the_count_of_the_same_event(
    kube: Any, namespace: str, configmap: dict[str, Any], recorder: Recorder
) -> None:
    rec = await recorder()
    for _ in range(3):
        rec.event(configmap, type=WARNING, reason="PodFailed", message="pod chat-0 failed")
    await rec.flush()
    [event] = await poll_events(
        kube, configmap, namespace, lambda items: len(items) == 1 and items[0]["count"] == 3
    )
    assert event["type"] == "Warning"
    assert parse_rfc3339(event["lastTimestamp"]) >= parse_rfc3339(event["firstTimestamp"])


async def test_the_budget_drops_after_the_burst_and_refills(
    kube: Any, namespace: str, configmap: dict[str, Any], recorder: Recorder
) -> None:
    rec = await recorder(burst=3, refill_interval=1.0)
    before = dropped(NORMAL)
    for i in range(5):
        rec.event(configmap, type=NORMAL, reason="Step", message=f"step {i}")
    # A repeat also spends the budget: this one is dropped too.
    rec.event(configmap, type=NORMAL, reason="Step", message="step 0")
    # Warning events have their own bucket.
    rec.event(configmap, type=WARNING, reason="Slow", message="slow")
    await rec.flush()
    items = await poll_events(kube, configmap, namespace, lambda items: len(items) >= 4)
    assert sorted(e["message"] for e in items) == ["slow", "step 0", "step 1", "step 2"]
    assert all(e["count"] == 1 for e in items)
    assert dropped(NORMAL) - before == 3

    began = time.monotonic()
    while rec.available(configmap, type=NORMAL) < 1:
        assert time.monotonic() - began < 5, "the bucket never refilled"
        await asyncio.sleep(0.05)
    refill = time.monotonic() - began
    print(f"\n[events] one event regained after {refill:.2f}s of polling")
    rec.event(configmap, type=NORMAL, reason="Step", message="after refill")
    rec.event(configmap, type=NORMAL, reason="Step", message="too soon")
    await rec.flush()
    items = await poll_events(kube, configmap, namespace, lambda items: len(items) >= 5)
    messages = sorted(e["message"] for e in items)
    assert messages == ["after refill", "slow", "step 0", "step 1", "step 2"]
    assert dropped(NORMAL) - before == 4
