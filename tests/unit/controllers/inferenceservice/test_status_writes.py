"""When the InferenceService core writes a status, and when it waits: its decisions on a
service whose one engine replica moves, the pacing memory carried from pass to pass as the
shell carries it."""

from __future__ import annotations

import dataclasses
import datetime as dt
from typing import Any

from omed.controllers.inferenceservice.core.actions import Decision, WriteStatus
from omed.controllers.inferenceservice.core.decide import decide
from omed.controllers.inferenceservice.core.model import (
    DecideInput,
    Moment,
    Observed,
    Progress,
    Settings,
)
from omed.controllers.inferenceservice.core.names import FINALIZER
from omed.controllers.inferenceservice.core.pacing import Pace, PaceMemory
from omed.controllers.inferenceservice.shell.read import read_replica, read_service
from omed.controllers.pacing import STATUS_PACE, STATUS_PACE_BUSY

NOW = dt.datetime(2026, 11, 30, 8, 0, tzinfo=dt.UTC)
SETTINGS = Settings(pace=Pace(quiet=STATUS_PACE, busy=STATUS_PACE_BUSY), deletion_poll=1.0)
OWNER = {
    "apiVersion": "ome.io/v1beta1",
    "kind": "InferenceService",
    "name": "chat",
    "uid": "isvc-uid",
    "controller": True,
}


def _isvc(status: dict[str, Any] | None = None, *, spec: dict[str, Any] | None = None) -> Any:
    isvc: dict[str, Any] = {
        "apiVersion": "ome.io/v1beta1",
        "kind": "InferenceService",
        "metadata": {
            "name": "chat",
            "namespace": "ns",
            "uid": "isvc-uid",
            "generation": 1,
            "resourceVersion": "5",
            "finalizers": [FINALIZER],
        },
        "spec": spec
        or {
            "deploymentMode": "OMENative",
            "engine": {"runner": {"name": "ome-container", "image": "ome/srt:1"}},
        },
    }
    if status is not None:
        isvc["status"] = status
    return read_service(isvc)


def _irep(ready: int) -> Any:
    return read_replica(
        {
            "metadata": {"name": "chat-engine", "generation": 1, "ownerReferences": [OWNER]},
            "spec": {
                "component": "engine",
                "replicas": 4,
                "runners": [{"name": "default", "template": {}}],
            },
            "status": {"observedGeneration": 1, "replicas": 4, "readyReplicas": ready},
        }
    )


class Pacing:
    """The core's status decisions, one pass at a time, with the memory the shell keeps."""

    def __init__(self, busy: bool = False) -> None:
        self.busy = busy
        self.monotonic = 0.0
        self.memory = PaceMemory()
        self.bodies: list[dict[str, Any]] = []

    def advance(self, seconds: float) -> None:
        self.monotonic += seconds

    def write(self, service: Any, ready: int) -> float | None:
        """One pass; the seconds it waits when the write is paced (``None``: written or
        nothing to write)."""
        observed = Observed(
            service=service,
            runtime=None,
            replicas={"chat-engine": _irep(ready)},
            owned=(_irep(ready),),
            default_mode=None,
        )
        given = DecideInput(
            observed=observed,
            settings=SETTINGS,
            moment=Moment(now=NOW, monotonic=self.monotonic, busy=self.busy),
            memory=self.memory,
            progress=Progress(replicas_done=True),  # the replica's spec isn't the question
        )
        decision: Decision = decide(given)
        self.memory = decision.memory
        if decision.final:
            return decision.requeue_after
        (write,) = decision.actions
        assert isinstance(write, WriteStatus)
        self.bodies.append(write.body)
        after = decide(
            dataclasses.replace(
                given, memory=self.memory, progress=Progress(replicas_done=True, status="written")
            )
        )
        assert after.final and after.actions == () and after.requeue_after is None
        self.memory = after.memory
        return None


def test_first_status_is_written_at_once_when_the_queue_is_empty() -> None:
    pacing = Pacing()
    assert pacing.write(_isvc(), ready=0) is None
    assert len(pacing.bodies) == 1


def test_count_changes_are_paced() -> None:
    pacing = Pacing()
    assert pacing.write(_isvc(), ready=1) is None
    stored = _isvc(pacing.bodies[-1]["status"])
    pacing.advance(1)
    assert pacing.write(stored, ready=2) == STATUS_PACE - 1
    pacing.busy = True
    assert pacing.write(stored, ready=2) == STATUS_PACE_BUSY - 1
    assert len(pacing.bodies) == 1
    pacing.busy = False
    pacing.advance(STATUS_PACE)
    assert pacing.write(stored, ready=2) is None
    assert len(pacing.bodies) == 2
    assert pacing.bodies[-1]["status"]["components"]["engine"]["readyReplicas"] == 2


def test_under_load_a_first_not_ready_status_waits_but_ready_does_not() -> None:
    pacing = Pacing(busy=True)
    assert pacing.write(_isvc(), ready=1) == STATUS_PACE_BUSY
    pacing.advance(10)
    assert pacing.write(_isvc(), ready=3) == STATUS_PACE_BUSY - 10
    assert pacing.bodies == []
    assert pacing.write(_isvc(), ready=4) is None  # Ready: written at once
    conditions = {c["type"]: c["status"] for c in pacing.bodies[-1]["status"]["conditions"]}
    assert conditions["Ready"] == "True"


def test_under_load_the_first_status_is_written_once_its_pace_has_passed() -> None:
    pacing = Pacing(busy=True)
    assert pacing.write(_isvc(), ready=0) == STATUS_PACE_BUSY
    pacing.advance(STATUS_PACE_BUSY)
    assert pacing.write(_isvc(), ready=0) is None
    assert len(pacing.bodies) == 1


def test_under_load_a_first_failure_is_written_at_once() -> None:
    pacing = Pacing(busy=True)
    # A runtime the service names that isn't there: a failure, which is news.
    service = _isvc(spec={"deploymentMode": "OMENative", "runtime": {"name": "srt"}, "engine": {}})
    assert pacing.write(service, ready=0) is None
    assert [c["reason"] for c in pacing.bodies[-1]["status"]["conditions"]] == ["RuntimeUnresolved"]
