"""A live InferenceService whose spec the models refuse (stored before the webhook checked
it): left alone, replicas and status, with one ERROR line and one Warning ``InvalidSpec``
event per resourceVersion; fixed, it converges; deleted, it is finalized."""

from __future__ import annotations

import logging

import pytest
from test_isvc_write_refused import World, service

from omed.controllers.inferenceservice.core.names import (
    EVENT_SPEC_INVALID,
    FINALIZER,
    MSG_SPEC_INVALID,
)
from omed.workqueue import TerminalError

REFUSED = "spec.engine: maxReplicas (1) must not be less than minReplicas (3)"


def invalid() -> dict[str, object]:
    body = service()
    body["spec"] = {"runtime": {"name": "srt"}, "engine": {"minReplicas": 3, "maxReplicas": 1}}
    return body


async def test_an_invalid_spec_is_said_once_per_version_and_nothing_is_written(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="omed.controllers.inferenceservice")
    world = World(invalid())
    for _ in range(3):  # left alone until it is edited: not retried
        with pytest.raises(TerminalError) as caught:
            await world.reconcile()
        assert caught.value.reported
    assert world.api.writes == []
    assert world.events.seen == [
        ("InferenceService", "chat", "Warning", EVENT_SPEC_INVALID, REFUSED)
    ]
    lines = [r for r in caplog.records if r.getMessage() == MSG_SPEC_INVALID]
    assert [r.levelname for r in lines] == ["ERROR"]
    assert "maxReplicas (1) must not be less than minReplicas (3)" in lines[0].kv["error"]  # type: ignore[attr-defined]

    # An edit that is still invalid is said again; one that fixes it converges as usual.
    assert world.api.isvc is not None
    world.api.isvc["metadata"]["resourceVersion"] = "6"
    with pytest.raises(TerminalError):
        await world.reconcile()
    assert len(world.events.seen) == 2
    world.api.isvc["spec"]["engine"] = {"minReplicas": 1, "maxReplicas": 1}
    world.api.isvc["metadata"]["resourceVersion"] = "7"
    await world.reconcile()
    assert ("create", "inferencereplicas", "chat-engine") in world.api.writes
    assert len(world.events.seen) == 2


async def test_a_deleted_invalid_service_is_finalized() -> None:
    world = World(invalid())
    assert world.api.isvc is not None
    world.api.isvc["metadata"]["deletionTimestamp"] = "2026-12-01T09:00:00Z"
    await world.reconcile()
    assert world.events.seen == []
    assert FINALIZER not in world.api.isvc["metadata"]["finalizers"]
