"""Which InferenceService status changes are written at once, and which are paced."""

from __future__ import annotations

import datetime as dt
from typing import Any

from omed.controllers.inferenceservice.core.status import build_status, status_urgent
from omed.controllers.inferenceservice.core.status import (
    replica_readiness as core_readiness,
)
from omed.controllers.inferenceservice.shell.read import read_replica, read_service

NOW = dt.datetime(2026, 11, 30, 8, 0, tzinfo=dt.UTC)


def _irep(*, wanted: int, ready: int, generation: int = 1, observed: int | None = 1) -> Any:
    status: dict[str, Any] = {"replicas": wanted, "readyReplicas": ready}
    if observed is not None:
        status["observedGeneration"] = observed
    status["currentRevision"] = "chat-engine-0a1b2c3d"
    return {
        "metadata": {"name": "chat-engine", "generation": generation},
        "spec": {
            "component": "engine",
            "replicas": wanted,
            "runners": [{"name": "default", "template": {}}],
        },
        "status": status,
    }


def replica_readiness(component: str, irep: Any) -> Any:
    return core_readiness(component, read_replica(irep) if irep is not None else None)


def _service(isvc_status: Any, *, generation: int = 3) -> Any:
    return read_service({"metadata": {"generation": generation}, "spec": {}, "status": isvc_status})


def _status(isvc_status: Any, irep: Any, *, generation: int = 3) -> dict[str, Any]:
    isvc = _service(isvc_status, generation=generation)
    return build_status(isvc=isvc, components=[replica_readiness("engine", irep)], now=NOW)


def test_first_status_is_urgent() -> None:
    assert status_urgent(None, _status(None, None))
    assert status_urgent({}, _status(None, None))


def test_counts_and_component_reasons_are_paced() -> None:
    missing = _status(None, None)
    stale = _status(missing, _irep(wanted=4, ready=0, generation=2, observed=1))
    two = _status(stale, _irep(wanted=4, ready=2))
    three = _status(two, _irep(wanted=4, ready=3))
    # EngineReady stays False (reason InferenceReplicaMissing -> StatusNotObserved ->
    # InstancesNotReady), the message and counts move: none of it is urgent.
    assert not status_urgent(missing, stale)
    assert not status_urgent(stale, two)
    assert not status_urgent(two, three)
    assert two["components"] != three["components"]


def test_a_condition_flip_is_urgent() -> None:
    three = _status(None, _irep(wanted=4, ready=3))
    four = _status(three, _irep(wanted=4, ready=4))
    assert {c["type"]: c["status"] for c in four["conditions"]} == {
        "EngineReady": "True",
        "Ready": "True",
    }
    assert status_urgent(three, four)
    assert status_urgent(four, _status(four, _irep(wanted=4, ready=3)))


def test_ready_counts_moving_while_ready_stays_true_are_paced() -> None:
    twenty = _status(None, _irep(wanted=20, ready=20))
    two = _status(twenty, _irep(wanted=2, ready=2))
    assert not status_urgent(twenty, two)


def test_new_generation_is_urgent() -> None:
    before = _status(None, _irep(wanted=4, ready=4), generation=3)
    after = _status(before, _irep(wanted=4, ready=4), generation=4)
    assert status_urgent(before, after)


def test_ready_reason_change_is_urgent() -> None:
    before = _status(None, _irep(wanted=4, ready=1))
    isvc = _service(before)
    failed = build_status(
        isvc=isvc, components=[], failure=("InferenceReplicaConflict", "exists"), now=NOW
    )
    assert status_urgent(before, failed)


def test_a_replaced_revision_is_urgent() -> None:
    steady = _irep(wanted=4, ready=4)
    steady["status"]["updateRevision"] = "chat-engine-0a1b2c3d"
    before = _status(None, steady)
    rolling = _irep(wanted=4, ready=4)
    rolling["status"]["updateRevision"] = "chat-engine-99999999"
    after = _status(before, rolling)
    assert status_urgent(before, after)


def test_a_first_revision_is_paced() -> None:
    before = _status(None, _irep(wanted=4, ready=1))
    del before["components"]["engine"]["currentRevision"]
    irep = _irep(wanted=4, ready=2)
    irep["status"]["updateRevision"] = "chat-engine-0a1b2c3d"
    after = _status(before, irep)
    assert after["components"]["engine"]["currentRevision"] == "chat-engine-0a1b2c3d"
    assert not status_urgent(before, after)
