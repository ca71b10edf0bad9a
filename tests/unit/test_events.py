"""The event recorder: the per-object budget, correlation of repeats, the Event it writes,
and that recording never blocks or fails the caller. Time is a FakeClock."""

from __future__ import annotations

import asyncio
import copy
import logging
import re
from collections.abc import Mapping
from typing import Any

import pytest

from omed.clock import FakeClock, rfc3339
from omed.events import (
    DEFAULT_BURST,
    DEFAULT_REFILL_INTERVAL,
    MSG_UNSUPPORTED_TYPE,
    NORMAL,
    WARNING,
    EventBudget,
    EventRecorder,
    EventSink,
    ObjectRef,
    event_name,
    truncate_message,
)
from omed.kube.errors import Forbidden, NotFound, ServerError
from omed.metrics import REGISTRY


class FakeEvents:
    """Records creates and patches; ``failures`` are raised, one per call, before writing."""

    def __init__(self) -> None:
        self.objects: dict[tuple[str, str], dict[str, Any]] = {}
        self.creates: list[dict[str, Any]] = []
        self.patches: list[tuple[str, str, dict[str, Any]]] = []
        self.failures: list[BaseException] = []
        self.always: BaseException | None = None

    def _fail(self) -> None:
        if self.always is not None:
            raise self.always
        if self.failures:
            raise self.failures.pop(0)

    async def create(
        self, resource: Any, body: Mapping[str, Any], namespace: str | None = None
    ) -> Any:
        self._fail()
        assert namespace is not None
        assert namespace == body["metadata"]["namespace"]
        obj = copy.deepcopy(dict(body))
        self.creates.append(obj)
        self.objects[(namespace, body["metadata"]["name"])] = obj
        return obj

    async def patch(
        self, resource: Any, name: str, patch: Any, namespace: str | None = None
    ) -> Any:
        self._fail()
        assert namespace is not None
        if (namespace, name) not in self.objects:
            raise NotFound(404, "NotFound", "gone")
        self.patches.append((namespace, name, dict(patch)))
        self.objects[(namespace, name)].update(patch)
        return self.objects[(namespace, name)]

    def events(self) -> list[dict[str, Any]]:
        return list(self.objects.values())


def isvc(name: str = "chat", uid: str = "uid-chat", namespace: str = "team") -> dict[str, Any]:
    return {
        "apiVersion": "ome.io/v1beta1",
        "kind": "InferenceService",
        "metadata": {"name": name, "namespace": namespace, "uid": uid, "resourceVersion": "42"},
    }


def dropped(event_type: str) -> float:
    return REGISTRY.get_sample_value("omed_events_dropped_total", {"type": event_type}) or 0.0


async def recorder_with(client: FakeEvents, clock: FakeClock, **kwargs: Any) -> EventRecorder:
    recorder = EventRecorder(client, clock=clock, instance="pod-a", **kwargs)
    await recorder.start()
    return recorder


# -- the Event ----------------------------------------------------------------------------------


async def test_an_event_has_the_fields_of_a_client_go_event() -> None:
    client, clock = FakeEvents(), FakeClock()
    recorder = await recorder_with(client, clock)
    recorder.event(isvc(), type=NORMAL, reason="InstanceCreated", message="created Instance 0")
    await recorder.stop()
    [event] = client.creates
    assert re.fullmatch(r"chat\.[0-9a-f]{16}", event["metadata"]["name"])
    assert event["metadata"]["namespace"] == "team"
    assert event["involvedObject"] == {
        "apiVersion": "ome.io/v1beta1",
        "kind": "InferenceService",
        "name": "chat",
        "namespace": "team",
        "uid": "uid-chat",
        "resourceVersion": "42",
    }
    assert event["reason"] == "InstanceCreated"
    assert event["message"] == "created Instance 0"
    assert event["type"] == "Normal"
    assert event["source"] == {"component": "ome-controller-manager"}
    assert event["firstTimestamp"] == event["lastTimestamp"] == rfc3339(clock.now())
    assert event["count"] == 1
    assert event["reportingComponent"] == "ome-controller-manager"
    assert event["reportingInstance"] == "pod-a"


async def test_a_cluster_scoped_object_gets_its_events_in_default() -> None:
    client, clock = FakeEvents(), FakeClock()
    recorder = await recorder_with(client, clock, component="ome-runtime-controller")
    runtime = {
        "apiVersion": "ome.io/v1beta1",
        "kind": "ClusterServingRuntime",
        "metadata": {"name": "srt", "uid": "u1"},
    }
    recorder.event(runtime, type=WARNING, reason="Invalid", message="bad")
    await recorder.stop()
    [event] = client.creates
    assert event["metadata"]["namespace"] == "default"
    assert "namespace" not in event["involvedObject"]
    assert event["source"] == {"component": "ome-runtime-controller"}


def test_messages_are_cut_to_1024_bytes_on_a_character_boundary() -> None:
    assert truncate_message("short") == "short"
    cut = truncate_message("é" * 600)  # 1200 bytes
    assert len(cut.encode()) <= 1024
    assert cut == "é" * 512
    assert len(truncate_message("x" * 5000).encode()) == 1024


def test_event_names_stay_valid_for_long_object_names() -> None:
    name = event_name("a" * 253)
    assert len(name) <= 253
    assert re.fullmatch(r"a+\.[0-9a-f]{16}", name)
    assert event_name("chat") != event_name("chat")


async def test_an_unsupported_type_is_refused_with_an_error_log(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.ERROR, logger="omed.events")
    client, clock = FakeEvents(), FakeClock()
    recorder = await recorder_with(client, clock)
    recorder.event(isvc(), type="Info", reason="X", message="y")
    await recorder.stop()
    assert client.creates == []
    assert MSG_UNSUPPORTED_TYPE in [r.getMessage() for r in caplog.records]


# -- correlation ----------------------------------------------------------------------------------


async def test_a_repeat_patches_the_count_and_last_timestamp() -> None:
    client, clock = FakeEvents(), FakeClock()
    recorder = await recorder_with(client, clock)
    recorder.event(isvc(), type=NORMAL, reason="Scaled", message="scaled to 2")
    await recorder.flush()
    first = rfc3339(clock.now())
    clock.advance(30)
    recorder.event(isvc(), type=NORMAL, reason="Scaled", message="scaled to 2")
    clock.advance(30)
    recorder.event(isvc(), type=NORMAL, reason="Scaled", message="scaled to 2")
    await recorder.stop()
    [event] = client.events()
    assert len(client.creates) == 1
    assert [p[2]["count"] for p in client.patches] == [2, 3]
    assert event["count"] == 3
    assert event["firstTimestamp"] == first
    assert event["lastTimestamp"] == rfc3339(clock.now())


@pytest.mark.parametrize(
    "change",
    [
        {"message": "scaled to 3"},
        {"reason": "Rescaled"},
        {"type": WARNING},
        {"obj": isvc(uid="uid-other")},
        {"obj": isvc(name="other", uid="uid-other")},
    ],
)
async def test_a_different_event_is_a_new_event(change: dict[str, Any]) -> None:
    client, clock = FakeEvents(), FakeClock()
    recorder = await recorder_with(client, clock)
    base: dict[str, Any] = {
        "obj": isvc(),
        "type": NORMAL,
        "reason": "Scaled",
        "message": "scaled to 2",
    }
    recorder.event(base.pop("obj"), **base)
    other = {**base, "obj": isvc(), **change}
    recorder.event(other.pop("obj"), **other)
    await recorder.stop()
    assert len(client.creates) == 2
    assert client.patches == []


async def test_a_repeat_of_an_expired_event_writes_it_again() -> None:
    client, clock = FakeEvents(), FakeClock()
    recorder = await recorder_with(client, clock)
    recorder.event(isvc(), type=NORMAL, reason="Scaled", message="m")
    await recorder.flush()
    client.objects.clear()  # the API server's event TTL removed it
    recorder.event(isvc(), type=NORMAL, reason="Scaled", message="m")
    await recorder.stop()
    assert len(client.creates) == 2
    assert client.creates[1]["metadata"]["name"] == client.creates[0]["metadata"]["name"]
    assert client.creates[1]["count"] == 2


# -- the budget -----------------------------------------------------------------------------------


async def test_the_burst_passes_then_events_drop_until_the_bucket_refills() -> None:
    client, clock = FakeEvents(), FakeClock()
    recorder = await recorder_with(client, clock, burst=3, refill_interval=10.0)
    before = dropped(NORMAL)
    for i in range(5):
        recorder.event(isvc(), type=NORMAL, reason="Step", message=f"step {i}")
    await recorder.flush()
    assert [e["message"] for e in client.creates] == ["step 0", "step 1", "step 2"]
    assert dropped(NORMAL) - before == 2
    clock.advance(9.9)
    recorder.event(isvc(), type=NORMAL, reason="Step", message="too early")
    clock.advance(0.1)  # 10 s since the bucket ran dry: one event regained
    recorder.event(isvc(), type=NORMAL, reason="Step", message="refilled")
    recorder.event(isvc(), type=NORMAL, reason="Step", message="empty again")
    await recorder.stop()
    assert [e["message"] for e in client.creates][3:] == ["refilled"]
    assert dropped(NORMAL) - before == 4


async def test_a_long_pause_refills_at_most_the_burst() -> None:
    budget = EventBudget(burst=3, refill_interval=1.0, clock=(clock := FakeClock()))
    assert [budget.take("k") for _ in range(3)] == [True] * 3
    clock.advance(1000)
    assert budget.available("k") == 3
    assert [budget.take("k") for _ in range(4)] == [True, True, True, False]


async def test_repeats_spend_the_budget_too() -> None:
    client, clock = FakeEvents(), FakeClock()
    recorder = await recorder_with(client, clock, burst=2, refill_interval=60.0)
    for _ in range(4):
        recorder.event(isvc(), type=NORMAL, reason="Same", message="same")
    await recorder.stop()
    [event] = client.events()
    assert event["count"] == 2


async def test_normal_and_warning_have_separate_buckets() -> None:
    client, clock = FakeEvents(), FakeClock()
    recorder = await recorder_with(client, clock, burst=1, refill_interval=60.0)
    recorder.event(isvc(), type=NORMAL, reason="A", message="1")
    recorder.event(isvc(), type=NORMAL, reason="A", message="2")
    recorder.event(isvc(), type=WARNING, reason="B", message="3")
    recorder.event(isvc(), type=WARNING, reason="B", message="4")
    await recorder.stop()
    assert [e["message"] for e in client.creates] == ["1", "3"]


async def test_each_object_has_its_own_budget() -> None:
    client, clock = FakeEvents(), FakeClock()
    recorder = await recorder_with(client, clock, burst=1, refill_interval=60.0)
    chat, code = isvc("chat", "u1"), isvc("code", "u2")
    replica: dict[str, Any] = {
        "apiVersion": "ome.io/v1beta1",
        "kind": "InferenceReplica",
        "metadata": {"name": "chat-engine", "namespace": "team"},  # no uid yet
    }
    for obj in (chat, code, replica, chat, code, replica):
        recorder.event(obj, type=NORMAL, reason="R", message=obj["metadata"]["name"])
    await recorder.stop()
    assert [e["message"] for e in client.creates] == ["chat", "code", "chat-engine"]
    assert recorder.available(chat, type=NORMAL) == 0
    assert recorder.available(chat, type=WARNING) == 1


def test_objects_are_budgeted_by_uid_else_by_kind_namespace_name() -> None:
    assert ObjectRef.of(isvc(uid="u1")).identity == ObjectRef.of(isvc("renamed", "u1")).identity
    assert ObjectRef.of(isvc(uid="u1")).identity != ObjectRef.of(isvc(uid="u2")).identity
    no_uid = {"kind": "InferenceReplica", "metadata": {"name": "a", "namespace": "n"}}
    assert ObjectRef.of(no_uid).identity == ("ref", "InferenceReplica", "n", "a")


def test_defaults_are_client_go_and_bad_values_are_refused() -> None:
    recorder = EventRecorder(FakeEvents(), clock=FakeClock())
    assert recorder.budget.burst == DEFAULT_BURST == 25
    assert recorder.budget.refill_interval == DEFAULT_REFILL_INTERVAL == 300.0
    partial = EventRecorder(FakeEvents(), clock=FakeClock(), burst=400)
    assert (partial.budget.burst, partial.budget.refill_interval) == (400, 300.0)
    with pytest.raises(ValueError, match="burst"):
        EventBudget(burst=0)
    with pytest.raises(ValueError, match="refill"):
        EventBudget(refill_interval=-1.0)


def test_the_budget_keeps_a_bounded_number_of_keys_evicting_full_buckets_first() -> None:
    clock = FakeClock()
    budget = EventBudget(burst=2, refill_interval=10.0, clock=clock, max_keys=2)
    budget.take("spent")
    budget.take("spent")
    budget.take("full-soon")
    clock.advance(10)  # "full-soon" is full again; "spent" has one of two
    budget.take("new")
    assert len(budget) == 2
    assert budget.available("spent") == 1  # kept: its state still matters
    assert budget.available("new") == 1


# -- never blocking, never failing the caller ---------------------------------------------


async def test_a_full_queue_drops_and_counts() -> None:
    client, clock = FakeEvents(), FakeClock()
    recorder = EventRecorder(client, clock=clock, queue_size=2)  # not started: nothing drains
    before = dropped(WARNING)
    for i in range(3):
        recorder.event(isvc(), type=WARNING, reason="R", message=str(i))
    assert dropped(WARNING) - before == 1
    await recorder.start()
    await recorder.stop()
    assert [e["message"] for e in client.creates] == ["0", "1"]


async def test_events_after_stop_are_dropped() -> None:
    client, clock = FakeEvents(), FakeClock()
    recorder = await recorder_with(client, clock)
    await recorder.stop()
    before = dropped(NORMAL)
    recorder.event(isvc(), type=NORMAL, reason="Late", message="late")
    assert dropped(NORMAL) - before == 1
    assert client.creates == []


async def test_stop_without_flush_drops_the_queue() -> None:
    client, clock = FakeEvents(), FakeClock()
    recorder = EventRecorder(client, clock=clock)
    recorder.event(isvc(), type=NORMAL, reason="R", message="m")
    before = dropped(NORMAL)
    await recorder.stop(flush=False)
    assert client.creates == []
    assert dropped(NORMAL) - before == 1


async def test_transient_write_failures_are_retried() -> None:
    client, clock = FakeEvents(), FakeClock()
    recorder = await recorder_with(client, clock)
    client.failures = [ServerError(503, "ServiceUnavailable", "busy")]
    recorder.event(isvc(), type=NORMAL, reason="R", message="m")
    for _ in range(50):
        await asyncio.sleep(0)
    assert client.creates == []
    clock.advance(1.0)
    await recorder.stop()
    assert len(client.creates) == 1


async def test_a_write_that_keeps_failing_is_dropped_and_later_events_still_go() -> None:
    client, clock = FakeEvents(), FakeClock()
    recorder = await recorder_with(client, clock)
    before = dropped(NORMAL)
    client.always = ServerError(503, "ServiceUnavailable", "down")
    recorder.event(isvc(), type=NORMAL, reason="R", message="lost")
    for _ in range(10):
        for _ in range(50):
            await asyncio.sleep(0)
        clock.advance(1.0)
    await recorder.flush()
    assert dropped(NORMAL) - before == 1
    client.always = None
    recorder.event(isvc(), type=NORMAL, reason="R", message="kept")
    await recorder.stop()
    assert [e["message"] for e in client.creates] == ["kept"]


async def test_a_refused_write_is_not_retried() -> None:
    client, clock = FakeEvents(), FakeClock()
    recorder = await recorder_with(client, clock)
    client.failures = [Forbidden(403, "Forbidden", "namespace team is being terminated")]
    before = dropped(NORMAL)
    recorder.event(isvc(), type=NORMAL, reason="R", message="m")
    recorder.event(isvc(), type=NORMAL, reason="R", message="next")
    await recorder.stop()
    assert dropped(NORMAL) - before == 1
    assert [e["message"] for e in client.creates] == ["next"]


class ListSink:
    """A fake sink, as a controller's unit test would use."""

    def __init__(self) -> None:
        self.recorded: list[tuple[str, str, str]] = []

    def event(self, obj: Mapping[str, Any], *, type: str, reason: str, message: str) -> None:
        self.recorded.append((type, reason, message))


def _controller_step(events: EventSink, obj: Mapping[str, Any]) -> None:
    events.event(obj, type=NORMAL, reason="InstanceReady", message="Instance 0 is ready")


async def test_controllers_take_any_event_sink() -> None:
    sink = ListSink()
    _controller_step(sink, isvc())
    assert sink.recorded == [("Normal", "InstanceReady", "Instance 0 is ready")]
    client, clock = FakeEvents(), FakeClock()
    recorder = await recorder_with(client, clock)
    _controller_step(recorder, isvc())
    await recorder.stop()
    assert client.creates[0]["reason"] == "InstanceReady"
