"""The cache boundary: objects the models refuse are read with less, never not at all where a
deletion depends on them."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from omed.controllers.inferenceservice.shell.read import (
    read_replica,
    read_runtime_spec,
    read_service,
)


def _replica(**status: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "chat-engine", "namespace": "prod", "generation": 2},
        "spec": {
            "component": "engine",
            "replicas": 2,
            "runners": [{"name": "default", "template": {}}],
            "lifecycle": {"instanceReadyTimeout": "10m"},
        },
        "status": {"observedGeneration": 2, "readyReplicas": 2, **status},
    }


def test_a_replicas_rows_are_never_read() -> None:
    rows = [{"index": i, "phase": "NotAPhase"} for i in range(3)]  # the models would refuse
    irep = read_replica(_replica(instanceStatuses=rows, instanceStatusColumns={"x": 1}))
    assert irep.status is not None and irep.status.ready_replicas == 2
    assert irep.status.instance_statuses is None and irep.status.instance_status_columns is None


def test_a_status_the_models_refuse_is_read_as_absent() -> None:
    irep = read_replica(_replica(readyReplicas=-1))
    assert irep.status is None and irep.spec.replicas == 2


def test_a_lifecycle_the_models_refuse_is_left_out() -> None:
    raw = _replica()
    raw["spec"]["lifecycle"] = {"instanceReadyTimeout": "99999999999h"}  # beyond Go's range
    irep = read_replica(raw)
    assert irep.spec.lifecycle is None and irep.spec.component == "engine"


def _service(**meta: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "chat", "namespace": "prod", "uid": "u", **meta},
        "spec": {"engine": {"minReplicas": 9, "maxReplicas": 3}},  # the webhook refuses it
    }


def test_a_live_service_the_models_refuse_fails_the_pass() -> None:
    with pytest.raises(ValidationError):
        read_service(_service())


def test_a_deleted_service_the_models_refuse_is_read_for_its_metadata() -> None:
    isvc = read_service(_service(deletionTimestamp="2026-12-01T09:00:00Z", finalizers=["f"]))
    assert isvc.metadata.finalizers == ["f"] and isvc.spec.components() == {}


def test_a_runtimes_replica_bounds_the_models_refuse_are_left_out() -> None:
    spec = read_runtime_spec(
        {
            "metadata": {"uid": "ignored"},
            "spec": {
                "engineConfig": {"minReplicas": 3, "maxReplicas": 2, "runner": {"image": "x"}}
            },
        }
    )
    assert spec is not None and spec.engine_config is not None
    assert spec.engine_config.runner == {"image": "x"} and spec.engine_config.min_replicas is None
