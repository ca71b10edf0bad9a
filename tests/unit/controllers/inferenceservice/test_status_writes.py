"""When the InferenceService controller writes a status, and when it waits (a stub client)."""

from __future__ import annotations

import asyncio
import types
from typing import Any, cast

from omed.clock import FakeClock
from omed.controllers.inferenceservice.controller import InferenceServiceReconciler
from omed.controllers.inferenceservice.status import replica_readiness
from omed.controllers.pacing import STATUS_PACE, STATUS_PACE_BUSY


class RecordingClient:
    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []

    async def replace_status(self, resource: Any, body: dict[str, Any], namespace: Any) -> Any:
        del resource, namespace
        self.bodies.append(body)
        return body


def _reconciler(client: RecordingClient, clock: FakeClock, busy: list[bool]) -> Any:
    informer = types.SimpleNamespace(store=None)

    async def mode() -> str | None:
        return None

    return InferenceServiceReconciler(
        client=cast(Any, client),
        services=cast(Any, informer),
        replicas=cast(Any, informer),
        runtimes=cast(Any, informer),
        cluster_runtimes=cast(Any, informer),
        default_mode=mode,
        clock=clock,
        busy=lambda: busy[0],
    )


def _isvc(status: dict[str, Any] | None = None) -> dict[str, Any]:
    isvc: dict[str, Any] = {
        "apiVersion": "ome.io/v1beta1",
        "kind": "InferenceService",
        "metadata": {"name": "chat", "namespace": "ns", "generation": 1, "resourceVersion": "5"},
    }
    if status is not None:
        isvc["status"] = status
    return isvc


def _irep(ready: int) -> dict[str, Any]:
    return {
        "metadata": {"name": "chat-engine", "generation": 1},
        "spec": {"replicas": 4},
        "status": {"observedGeneration": 1, "replicas": 4, "readyReplicas": ready},
    }


def _write(reconciler: Any, isvc: dict[str, Any], ready: int) -> float | None:
    wait: float | None = asyncio.run(
        reconciler._write_status(isvc, components=[replica_readiness("engine", _irep(ready))])
    )
    return wait


def test_first_status_is_written_at_once_when_the_queue_is_empty() -> None:
    client, clock = RecordingClient(), FakeClock()
    reconciler = _reconciler(client, clock, [False])
    assert _write(reconciler, _isvc(), ready=0) is None
    assert len(client.bodies) == 1


def test_count_changes_are_paced() -> None:
    client, clock = RecordingClient(), FakeClock()
    busy = [False]
    reconciler = _reconciler(client, clock, busy)
    assert _write(reconciler, _isvc(), ready=1) is None
    stored = _isvc(client.bodies[-1]["status"])
    clock.advance(1)
    assert _write(reconciler, stored, ready=2) == STATUS_PACE - 1
    busy[0] = True
    assert _write(reconciler, stored, ready=2) == STATUS_PACE_BUSY - 1
    assert len(client.bodies) == 1
    busy[0] = False
    clock.advance(STATUS_PACE)
    assert _write(reconciler, stored, ready=2) is None
    assert len(client.bodies) == 2
    assert client.bodies[-1]["status"]["components"]["engine"]["readyReplicas"] == 2


def test_under_load_a_first_not_ready_status_waits_but_ready_does_not() -> None:
    client, clock = RecordingClient(), FakeClock()
    reconciler = _reconciler(client, clock, [True])
    assert _write(reconciler, _isvc(), ready=1) == STATUS_PACE_BUSY
    clock.advance(10)
    assert _write(reconciler, _isvc(), ready=3) == STATUS_PACE_BUSY - 10
    assert client.bodies == []
    assert _write(reconciler, _isvc(), ready=4) is None  # Ready: written at once
    conditions = {c["type"]: c["status"] for c in client.bodies[-1]["status"]["conditions"]}
    assert conditions["Ready"] == "True"


def test_under_load_the_first_status_is_written_once_its_pace_has_passed() -> None:
    client, clock = RecordingClient(), FakeClock()
    reconciler = _reconciler(client, clock, [True])
    assert _write(reconciler, _isvc(), ready=0) == STATUS_PACE_BUSY
    clock.advance(STATUS_PACE_BUSY)
    assert _write(reconciler, _isvc(), ready=0) is None
    assert len(client.bodies) == 1


def test_under_load_a_first_failure_is_written_at_once() -> None:
    client, clock = RecordingClient(), FakeClock()
    reconciler = _reconciler(client, clock, [True])
    wait = asyncio.run(
        reconciler._write_status(
            _isvc(), components=(), failure=("InferenceReplicaConflict", "exists")
        )
    )
    assert wait is None
    assert [c["reason"] for c in client.bodies[-1]["status"]["conditions"]] == [
        "InferenceReplicaConflict"
    ]
