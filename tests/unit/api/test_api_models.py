"""The API models read and write the camelCase wire shape, and refuse what the CRDs refuse."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from pydantic import ValidationError

from omed.api import constants
from omed.api.base import (
    Condition,
    ObjectMeta,
    format_time,
    parse_duration,
    resolve_int_or_percent,
)
from omed.api.component import ComponentSpec
from omed.api.inferencereplica import (
    MAX_ROW_LIST_ITEMS,
    InferenceReplica,
    InferenceReplicaStatus,
    InstanceStatus,
    MigrationStatus,
    Operation,
    inference_replica_name,
)
from omed.api.inferenceservice import InferenceService
from omed.api.lifecycle import Lifecycle
from omed.api.servingruntime import ClusterServingRuntime, ServingRuntime


@pytest.mark.parametrize(
    ("model", "fixture"),
    [(InferenceService, "isvc_document"), (InferenceReplica, "irep_document")],
    ids=["InferenceService", "InferenceReplica"],
)
def test_a_full_object_round_trips_through_its_model(
    model: Any, fixture: str, request: pytest.FixtureRequest
) -> None:
    document = request.getfixturevalue(fixture)
    parsed = model.model_validate(document)
    assert parsed.model_dump(by_alias=True, exclude_none=True, mode="json") == document
    assert parsed.to_dict() == document
    assert model.model_validate(parsed.to_dict()) == parsed


def test_python_names_map_to_camel_case_json_names() -> None:
    row = InstanceStatus(
        index=2,
        phase="Ready",
        serving_pod_count=1,
        ready_since=dt.datetime(2026, 9, 28, 10, 0, tzinfo=dt.UTC),
        operation=Operation(id="op", type="Create", request_uuid="u-1", hint_target_nodes=["n"]),
    )
    assert row.to_dict() == {
        "index": 2,
        "phase": "Ready",
        "servingPodCount": 1,
        "readySince": "2026-09-28T10:00:00Z",
        "operation": {"id": "op", "type": "Create", "hintTargetNodes": ["n"], "requestUUID": "u-1"},
    }
    record = MigrationStatus(
        request_uuid="u-2",
        trigger="Manual",
        source_instance=0,
        started_at=dt.datetime(2026, 9, 28, 10, tzinfo=dt.UTC),
        deadline=dt.datetime(2026, 9, 28, 10, 30, tzinfo=dt.UTC),
    )
    assert record.to_dict() == {
        "requestUUID": "u-2",
        "trigger": "Manual",
        "sourceInstance": 0,
        "startedAt": "2026-09-28T10:00:00Z",
        "deadline": "2026-09-28T10:30:00Z",
    }


def test_migration_records_of_the_old_shape_still_read() -> None:
    old = {
        "requestUUID": "u-3",
        "component": "engine",
        "instance": 3,
        "hintNodes": ["node-b"],
        "surgeIndex": 4,
        "phase": "SurgePending",
        "startedAt": "2026-09-28T10:12:04Z",
    }
    record = MigrationStatus.model_validate(old)
    assert record.to_dict() == {
        "requestUUID": "u-3",
        "trigger": "Manual",
        "sourceInstance": 3,
        "surgeInstance": 4,
        "hintTargetNodes": ["node-b"],
        "phase": "SurgePending",
        "startedAt": "2026-09-28T10:12:04Z",
        "deadline": "2026-09-28T10:12:04Z",
    }
    assert not record.terminal
    assert MigrationStatus.model_validate({**old, "phase": "Relocated"}).terminal


def test_unset_fields_are_not_written() -> None:
    status = InferenceReplicaStatus(replicas=0)
    assert status.to_dict() == {"replicas": 0}
    assert Lifecycle().to_dict() == {}


def test_objects_default_their_api_version_and_kind() -> None:
    irep = InferenceReplica.model_validate(
        {
            "spec": {
                "component": "router",
                "replicas": 1,
                "runners": [{"name": "default", "template": {}}],
            }
        }
    )
    dumped = irep.to_dict()
    assert (dumped["apiVersion"], dumped["kind"]) == ("ome.io/v1beta1", "InferenceReplica")
    runtime = ServingRuntime.model_validate({"spec": {}})
    assert runtime.to_dict()["kind"] == "ServingRuntime"
    assert (
        ClusterServingRuntime.model_validate({"spec": {}}).to_dict()["kind"]
        == "ClusterServingRuntime"
    )


@pytest.mark.parametrize("value", ["abc", -1, 1.5, [1]])
def test_min_replicas_must_be_a_non_negative_integer(value: object) -> None:
    with pytest.raises(ValidationError) as error:
        ComponentSpec.model_validate({"minReplicas": value})
    assert error.value.errors()[0]["loc"] == ("minReplicas",)


def test_max_replicas_below_min_replicas_is_refused() -> None:
    with pytest.raises(
        ValidationError, match=r"maxReplicas \(1\) must not be less than minReplicas \(2\)"
    ):
        ComponentSpec.model_validate({"minReplicas": 2, "maxReplicas": 1})


def test_max_replicas_zero_means_unbounded() -> None:
    spec = ComponentSpec.model_validate({"minReplicas": 2, "maxReplicas": 0})
    assert spec.max_replicas == 0


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("maxSurge", "abc"),
        ("maxSurge", "10"),
        ("maxSurge", -1),
        ("maxUnavailable", "1.5%"),
        ("partition", -1),
    ],
)
def test_rolling_update_bounds_are_validated(field: str, value: object) -> None:
    with pytest.raises(ValidationError):
        Lifecycle.model_validate({"updateStrategy": {"rollingUpdate": {field: value}}})


@pytest.mark.parametrize("value", [1, 50, "1%", "10%", "100%"])
def test_repair_batch_size_accepts_counts_and_percentages(value: object) -> None:
    assert Lifecycle.model_validate({"repairBatchSize": value}).repair_batch_size == value


@pytest.mark.parametrize("value", [0, "0%", "101%", "100", " 5%", "-5%"])
def test_repair_batch_size_refuses_what_the_chart_refuses(value: object) -> None:
    with pytest.raises(ValidationError):
        Lifecycle.model_validate({"repairBatchSize": value})


@pytest.mark.parametrize("value", ["5m", "1h30m", "0", "1.5s", "250ms"])
def test_durations_in_go_syntax_are_accepted(value: str) -> None:
    assert Lifecycle.model_validate({"instanceReadyTimeout": value}).instance_ready_timeout == value


@pytest.mark.parametrize("value", ["5", "5 m", "-5m", "1d", ""])
def test_other_durations_are_refused(value: str) -> None:
    with pytest.raises(ValidationError):
        Lifecycle.model_validate({"instanceReadyTimeout": value})


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("0", 0.0), ("90s", 90.0), ("1h30m", 5400.0), ("1.5s", 1.5), ("250ms", 0.25)],
)
def test_parse_duration(text: str, seconds: float) -> None:
    assert parse_duration(text).total_seconds() == pytest.approx(seconds)


def test_parse_duration_refuses_garbage() -> None:
    with pytest.raises(ValueError, match="invalid duration"):
        parse_duration("soon")


@pytest.mark.parametrize(
    ("value", "total", "round_up", "expected"),
    [(3, 10, True, 3), ("10%", 15, True, 2), ("10%", 15, False, 1), ("100%", 7, False, 7)],
)
def test_resolve_int_or_percent(
    value: int | str, total: int, round_up: bool, expected: int
) -> None:
    assert resolve_int_or_percent(value, total=total, round_up=round_up) == expected


def test_enums_refuse_unknown_values() -> None:
    with pytest.raises(ValidationError):
        InstanceStatus.model_validate({"index": 0, "phase": "Sleeping"})
    with pytest.raises(ValidationError):
        Operation.model_validate({"id": "x", "type": "ScaleDown"})
    with pytest.raises(ValidationError):
        Lifecycle.model_validate({"updateStrategy": {"type": "BlueGreen"}})
    with pytest.raises(ValidationError):
        InferenceReplicaStatus.model_validate({"instanceStatusEncoding": "DenseV1"})


def test_times_are_held_at_whole_seconds_in_utc() -> None:
    east = dt.timezone(dt.timedelta(hours=2))
    row = InstanceStatus(
        index=0, phase="Ready", ready_since=dt.datetime(2026, 1, 1, 12, 0, 0, 999_999, tzinfo=east)
    )
    assert row.ready_since == dt.datetime(2026, 1, 1, 10, 0, 0, tzinfo=dt.UTC)
    assert row.to_dict()["readySince"] == "2026-01-01T10:00:00Z"
    assert InstanceStatus.model_validate(row.to_dict()) == row


def test_naive_times_are_refused() -> None:
    with pytest.raises(ValidationError, match="timezone"):
        InstanceStatus(index=0, phase="Ready", ready_since=dt.datetime(2026, 1, 1))


def test_condition_reason_follows_metav1() -> None:
    with pytest.raises(ValidationError):
        Condition.model_validate(
            {
                "type": "Ready",
                "status": "True",
                "reason": "",
                "lastTransitionTime": "2026-01-01T00:00:00Z",
            }
        )
    with pytest.raises(ValidationError):
        Condition.model_validate(
            {
                "type": "Ready",
                "status": "Yes",
                "reason": "Ok",
                "lastTransitionTime": "2026-01-01T00:00:00Z",
            }
        )


def test_unknown_fields_are_kept_where_upstream_defines_more(isvc_document: dict[str, Any]) -> None:
    isvc = InferenceService.model_validate(isvc_document)
    assert isvc.spec.model_extra == {"predictor": {"model": {"modelFormat": {"name": "x"}}}}
    engine = isvc.spec.engine
    assert engine is not None
    assert engine.model_extra == {"hostIPC": True, "scaleTarget": 80}
    assert isvc.status is not None
    assert isvc.status.model_extra == {"url": "http://chat.prod.example"}
    assert isvc.metadata.model_extra == {
        "managedFields": [{"manager": "kubectl", "operation": "Update"}]
    }


def test_a_row_needs_only_its_index() -> None:
    # Both encodings hold exactly the same rows, and the column form lets a row leave out any
    # field but its index.
    row = InstanceStatus.model_validate({"index": 7, "conditions": [{"type": "Stalled"}]})
    assert row.to_dict() == {"index": 7, "conditions": [{"type": "Stalled"}]}
    assert Operation.model_validate({"step": "Drain"}).to_dict() == {"step": "Drain"}
    with pytest.raises(ValidationError):
        InstanceStatus.model_validate({"phase": "Ready"})


def test_row_lists_are_bounded_like_the_column_form() -> None:
    limit = MAX_ROW_LIST_ITEMS
    Operation.model_validate({"hintTargetNodes": [f"n{i}" for i in range(limit)]})
    with pytest.raises(ValidationError):
        Operation.model_validate({"hintTargetNodes": [f"n{i}" for i in range(limit + 1)]})
    with pytest.raises(ValidationError):
        InstanceStatus.model_validate({"index": 0, "conditions": [{}] * (limit + 1)})


def test_unknown_fields_are_dropped_where_omed_owns_the_schema() -> None:
    row = InstanceStatus.model_validate({"index": 0, "phase": "Ready", "bogus": 1})
    assert row.to_dict() == {"index": 0, "phase": "Ready"}


def test_pod_spec_keeps_only_pod_spec_fields(isvc_document: dict[str, Any]) -> None:
    engine = InferenceService.model_validate(isvc_document).spec.engine
    assert engine is not None
    assert engine.pod_spec() == {
        "containers": [{"name": "ome-container", "image": "example/sglang:v0.4.9"}],
        "nodeSelector": {"gpu": "h100"},
        "hostIPC": True,
    }


def test_multi_pod_components_are_recognised(isvc_document: dict[str, Any]) -> None:
    spec = InferenceService.model_validate(isvc_document).spec
    decoder, engine = spec.decoder, spec.engine
    assert decoder is not None and engine is not None
    assert decoder.is_multi_pod
    assert not engine.is_multi_pod
    assert decoder.worker is not None and decoder.worker.size == 3


def test_components_come_in_reporting_order(isvc_document: dict[str, Any]) -> None:
    spec = InferenceService.model_validate(isvc_document).spec
    assert list(spec.components()) == ["engine", "decoder", "router"]
    only_router = InferenceService.model_validate({"spec": {"router": {}}}).spec
    assert list(only_router.components()) == ["router"]
    assert only_router.component("engine") is None


def test_annotation_wins_over_spec_deployment_mode(isvc_document: dict[str, Any]) -> None:
    isvc = InferenceService.model_validate(isvc_document)
    assert isvc.declared_deployment_mode() == "OMENative"
    plain = InferenceService.model_validate({"spec": {"deploymentMode": "RawDeployment"}})
    assert plain.declared_deployment_mode() == "RawDeployment"
    assert InferenceService.model_validate({"spec": {}}).declared_deployment_mode() is None


def test_deployment_mode_stays_open_for_newer_upstream_modes() -> None:
    isvc = InferenceService.model_validate({"spec": {"deploymentMode": "SomethingNew"}})
    assert isvc.spec.deployment_mode == "SomethingNew"


def test_lifecycle_defaults_apply_only_where_read(isvc_document: dict[str, Any]) -> None:
    lifecycle = Lifecycle()
    assert lifecycle.effective_update_strategy_type == "SurgeThenDrain"
    assert lifecycle.effective_migration_mode == "Auto"
    assert lifecycle.effective_max_attempts == 3
    assert lifecycle.to_dict() == {}
    engine = InferenceService.model_validate(isvc_document).spec.engine
    assert engine is not None and engine.lifecycle is not None
    assert engine.lifecycle.effective_update_strategy_type == "RecreatePod"
    assert engine.lifecycle.effective_max_attempts == 5


def test_model_kind_defaults_to_cluster_base_model_when_read() -> None:
    isvc = InferenceService.model_validate({"spec": {"model": {"name": "m"}}})
    assert isvc.spec.model is not None
    assert isvc.spec.model.effective_kind == "ClusterBaseModel"
    assert isvc.to_dict()["spec"] == {"model": {"name": "m"}}


def test_replica_identity_helpers(irep_document: dict[str, Any]) -> None:
    irep = InferenceReplica.model_validate(irep_document)
    assert inference_replica_name("chat", "engine") == irep.metadata.name
    assert irep.metadata.label(constants.LABEL_INFERENCE_SERVICE) == "chat"
    assert irep.metadata.annotation(constants.ANNOTATION_CONTROLLER_WRITE) == "true"
    owner = irep.metadata.controller_ref()
    assert owner is not None and owner.kind == "InferenceService"
    assert irep.spec.runner("worker") is not None
    assert irep.spec.runner("default") is None
    assert irep.status is not None
    ready = irep.status.condition("Ready")
    assert ready is not None and ready.status == "False"
    assert ObjectMeta().controller_ref() is None


def test_runtime_component_config_lookup() -> None:
    runtime = ServingRuntime.model_validate(
        {
            "metadata": {"name": "srt"},
            "spec": {
                "supportedModelFormats": [{"name": "safetensors", "autoSelect": True}],
                "engineConfig": {"runner": {"name": "ome-container"}, "leader": {}},
                "protocolVersions": ["openAI"],
            },
        }
    )
    engine = runtime.spec.component_config("engine")
    assert engine is not None and engine.is_multi_pod
    assert runtime.spec.component_config("router") is None
    assert runtime.to_dict()["spec"]["protocolVersions"] == ["openAI"]


def test_runners_need_at_least_one_entry() -> None:
    with pytest.raises(ValidationError):
        InferenceReplica.model_validate(
            {"spec": {"component": "engine", "replicas": 1, "runners": []}}
        )


def test_component_names_are_fixed() -> None:
    assert constants.COMPONENTS == ("engine", "decoder", "router")
    assert set(constants.COMPONENT_READY_CONDITIONS) == set(constants.COMPONENTS)
    with pytest.raises(ValidationError):
        InferenceReplica.model_validate(
            {
                "spec": {
                    "component": "predictor",
                    "replicas": 1,
                    "runners": [{"name": "default", "template": {}}],
                }
            }
        )


@pytest.mark.parametrize(
    ("value", "written"),
    [
        (dt.datetime(2026, 1, 2, 3, 4, 5, 999999, tzinfo=dt.UTC), "2026-01-02T03:04:05Z"),
        (dt.datetime(1, 1, 1, tzinfo=dt.UTC), "0001-01-01T00:00:00Z"),
        (dt.datetime(999, 12, 31, 23, 59, 59, tzinfo=dt.UTC), "0999-12-31T23:59:59Z"),
        (
            dt.datetime(2026, 1, 2, 5, 4, 5, tzinfo=dt.timezone(dt.timedelta(hours=2))),
            "2026-01-02T03:04:05Z",
        ),
    ],
)
def test_a_time_is_written_as_go_writes_it_and_reads_back(value: dt.datetime, written: str) -> None:
    assert format_time(value) == written  # Go pads the year to four digits
    condition = Condition.model_validate(
        {"type": "Ready", "status": "True", "reason": "Ready", "lastTransitionTime": written}
    )
    assert condition.to_dict()["lastTransitionTime"] == written
