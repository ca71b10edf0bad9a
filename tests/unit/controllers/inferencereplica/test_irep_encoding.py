"""The controller's status-encoding decisions: which form a write stores, when it converts,
what a stored status decodes to, and how the reconciler reacts to undecodable or oversized
statuses (against the recording fake of the API client)."""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Mapping
from typing import Any

import pytest
from test_irep_execute import FakeKube

from omed.api.inferencereplica import InferenceReplicaStatus, InstanceStatus
from omed.clock import FakeClock
from omed.config import OMENativeStatusConfig
from omed.controllers.inferencereplica.core import names
from omed.controllers.inferencereplica.core.actions import Plan, WriteStatus
from omed.controllers.inferencereplica.core.encoding import (
    STATUS_SIZE_LIMIT,
    StatusEncodingSettings,
    needs_conversion,
    status_write,
)
from omed.controllers.inferencereplica.core.model import PlanSettings
from omed.controllers.inferencereplica.core.observe import replica_target
from omed.controllers.inferencereplica.core.status import (
    StatusDecodeFailed,
    decode_rows_from_status,
    encode_rows_into_status,
    in_list_form,
    observed_rows,
)
from omed.controllers.inferencereplica.shell import statusmetrics
from omed.controllers.inferencereplica.shell.executor import Executor
from omed.controllers.inferencereplica.shell.expectations import Expectations
from omed.controllers.inferencereplica.shell.reconciler import InferenceReplicaReconciler
from omed.informers.transform import Obj
from omed.kube.errors import TooLarge
from omed.metrics import REGISTRY
from omed.statuscodec import COLUMNAR_V2, DENSE_V1, encode_columnar, encoded_size
from omed.workqueue import Result, TerminalError

COLUMNAR = StatusEncodingSettings(encoding=COLUMNAR_V2, max_decoded_instances=20000)
DENSE = StatusEncodingSettings(encoding=DENSE_V1, max_decoded_instances=20000)
KEY = "prod/chat-engine"


def rows(count: int, *, message: str = "") -> list[dict[str, Any]]:
    return [
        {
            "index": i,
            "incarnation": 1,
            "phase": "Ready",
            "runningRevision": "chat-engine-2f32f6fe",
            "targetRevision": "chat-engine-2f32f6fe",
            "podCount": 1,
            "servingPodCount": 1,
            "availablePodCount": 1,
            "admitted": True,
            "conditions": [{"type": "Ready", "status": "True", "message": message}],
        }
        for i in range(count)
    ]


def listed(count: int) -> dict[str, Any]:
    return {"replicas": count, "instanceStatuses": rows(count)}


def columns(count: int) -> dict[str, Any]:
    return {
        "replicas": count,
        "instanceStatusEncoding": COLUMNAR_V2,
        "instanceStatusColumns": encode_columnar(rows(count)),
    }


# -- the write decision ------------------------------------------------------------------------


def test_columnar_v2_writes_columns_for_a_uniform_fleet_and_converts_a_stored_list() -> None:
    write = status_write({"replicas": 50}, rows(50), stored=listed(50), settings=COLUMNAR)
    assert write.encoding == COLUMNAR_V2
    assert write.status["instanceStatusEncoding"] == COLUMNAR_V2
    assert write.status["instanceStatusColumns"]["rowCount"] == 50
    assert "instanceStatuses" not in write.status
    assert write.status["replicas"] == 50
    assert write.converted == (DENSE_V1, COLUMNAR_V2)


def test_columnar_v2_writes_the_list_when_it_is_no_larger_and_converts_nothing() -> None:
    write = status_write({}, rows(1), stored=listed(1), settings=COLUMNAR)
    assert (write.encoding, write.converted) == (DENSE_V1, None)
    assert write.status == {"instanceStatuses": rows(1)}


def test_columnar_v2_writes_the_list_past_the_bound_or_without_one() -> None:
    small = StatusEncodingSettings(encoding=COLUMNAR_V2, max_decoded_instances=10)
    unbounded = StatusEncodingSettings(encoding=COLUMNAR_V2, max_decoded_instances=0)
    for settings in (small, unbounded):
        write = status_write({}, rows(50), stored=columns(5), settings=settings)
        assert write.encoding == DENSE_V1
        assert write.converted == (COLUMNAR_V2, DENSE_V1)
        assert set(write.status) == {"instanceStatuses"}


def test_dense_v1_converts_stored_columns_to_the_list() -> None:
    write = status_write({"replicas": 50}, rows(50), stored=columns(50), settings=DENSE)
    assert write.encoding == DENSE_V1
    assert write.status == {"replicas": 50, "instanceStatuses": rows(50)}
    assert write.converted == (COLUMNAR_V2, DENSE_V1)


def test_dense_v1_keeps_columns_whose_list_would_be_too_large_to_store() -> None:
    small = dataclasses.replace(DENSE, size_limit=encoded_size(rows(50)) - 1)
    write = status_write({}, rows(50), stored=columns(50), settings=small)
    assert (write.encoding, write.converted) == (COLUMNAR_V2, None)
    assert not needs_conversion(rows(50), stored=columns(50), settings=small)
    # ... but not columns it couldn't read back under its own bound
    tight = dataclasses.replace(small, max_decoded_instances=49)
    write = status_write({}, rows(50), stored=columns(40), settings=tight)
    assert write.encoding == DENSE_V1


def test_dense_v1_writes_a_too_large_list_over_a_stored_list_for_the_api_server_to_refuse() -> None:
    small = dataclasses.replace(DENSE, size_limit=100)
    write = status_write({}, rows(50), stored=listed(50), settings=small)
    assert (write.encoding, write.converted) == (DENSE_V1, None)


def test_no_rows_write_no_list_key() -> None:
    for settings in (DENSE, COLUMNAR):
        write = status_write({"replicas": 0}, [], stored={"replicas": 1}, settings=settings)
        assert write.status == {"replicas": 0}
        assert write.converted is None


def test_conversion_is_needed_exactly_when_a_write_would_change_the_stored_form() -> None:
    assert needs_conversion(rows(50), stored=listed(50), settings=COLUMNAR)
    assert not needs_conversion(rows(50), stored=columns(50), settings=COLUMNAR)
    assert needs_conversion(rows(50), stored=columns(50), settings=DENSE)
    assert not needs_conversion(rows(50), stored=listed(50), settings=DENSE)
    assert not needs_conversion(rows(1), stored=listed(1), settings=COLUMNAR)
    assert not needs_conversion([], stored={}, settings=COLUMNAR)
    unknown = {"instanceStatusEncoding": "DenseV3", "instanceStatuses": rows(2)}
    assert not needs_conversion(rows(2), stored=unknown, settings=DENSE)


def test_the_size_limit_stays_under_etcds_request_limit() -> None:
    assert 1_000_000 < STATUS_SIZE_LIMIT < 1_572_864


def test_settings_come_from_the_omenative_status_block() -> None:
    config = OMENativeStatusConfig.model_validate(
        {"instanceStatusEncoding": "ColumnarV2", "maxDecodedInstances": 300}
    )
    settings = StatusEncodingSettings.from_config(config)
    assert (settings.encoding, settings.bound) == (COLUMNAR_V2, 300)
    assert StatusEncodingSettings().encoding == DENSE_V1
    assert StatusEncodingSettings(max_decoded_instances=0).bound is None


# -- reading -----------------------------------------------------------------------------------


def test_both_forms_decode_to_the_same_models() -> None:
    from_list = decode_rows_from_status(listed(7), max_rows=10)
    from_columns = decode_rows_from_status(columns(7), max_rows=10)
    assert from_list == from_columns
    assert [row.index for row in from_columns] == list(range(7))


@pytest.mark.parametrize("bound", [6, 0, None])
def test_columns_past_the_bound_or_without_one_are_a_cardinality_limit(bound: int | None) -> None:
    with pytest.raises(StatusDecodeFailed) as caught:
        decode_rows_from_status(columns(7), max_rows=bound)
    assert caught.value.reason == "cardinality_limit"


def test_damaged_columns_fail_with_the_codecs_reason() -> None:
    damaged = columns(7)
    damaged["instanceStatusColumns"]["index"] = "0-5"
    with pytest.raises(StatusDecodeFailed) as caught:
        decode_rows_from_status(damaged, max_rows=10)
    assert caught.value.reason == "coverage"


def test_the_rows_for_the_planner_are_read_once_and_leave_the_cached_object_alone() -> None:
    irep = {"metadata": {"name": "x", "uid": "u-cols"}, "status": columns(3)}
    before = copy.deepcopy(irep)
    assert in_list_form(irep, max_rows=10) is irep
    assert irep == before
    assert [row.to_dict() for row in observed_rows(irep).values()] == rows(3)
    plain = {"metadata": {"name": "x", "uid": "u-list"}, "status": listed(3)}
    assert in_list_form(plain, max_rows=10) is plain
    assert [row.to_dict() for row in observed_rows(plain).values()] == rows(3)


# -- the reconciler and the executor -----------------------------------------------------------

IREP: dict[str, Any] = {
    "apiVersion": "ome.io/v1beta1",
    "kind": "InferenceReplica",
    "metadata": {
        "name": "chat-engine",
        "namespace": "prod",
        "uid": "irep-uid",
        "generation": 1,
        "resourceVersion": "5",
        "finalizers": [names.FINALIZER],
    },
    "spec": {
        "component": "engine",
        "replicas": 2,
        "runners": [
            {"name": "default", "template": {"spec": {"containers": [{"name": "c", "image": "i"}]}}}
        ],
    },
}


class Sink:
    def __init__(self) -> None:
        self.seen: list[tuple[str, str, str, str]] = []

    def event(self, obj: Mapping[str, Any], *, type: str, reason: str, message: str) -> None:
        self.seen.append((obj["metadata"]["name"], type, reason, message))


class Cache:
    def __init__(self, *objects: Obj) -> None:
        self.objects = {f"{o['metadata']['namespace']}/{o['metadata']['name']}": o for o in objects}

    def get(self, key: str) -> Obj | None:
        return self.objects.get(key)

    def by_index(self, index: str, value: str) -> list[Obj]:
        return []


def reconciler(
    kube: FakeKube, irep: Obj, settings: StatusEncodingSettings
) -> tuple[InferenceReplicaReconciler, Sink]:
    clock = FakeClock()
    sink = Sink()
    run = InferenceReplicaReconciler(
        client=kube,
        replicas=Cache(irep),
        pods=Cache(),
        events=sink,
        settings=PlanSettings(),
        expectations=Expectations(clock=clock),
        clock=clock,
        status_encoding=settings,
    )
    return run, sink


async def left_alone(run: Any) -> None:
    """One pass over an unreadable replica: a terminal error that it has reported itself."""
    with pytest.raises(TerminalError) as caught:
        await run.reconcile(KEY)
    assert caught.value.reported


async def test_an_undecodable_status_stops_management_with_one_event_per_version() -> None:
    damaged = copy.deepcopy(IREP)
    damaged["status"] = columns(2)
    damaged["status"]["instanceStatusColumns"]["rowClass"] = "0*3"
    kube = FakeKube()
    run, sink = reconciler(kube, damaged, COLUMNAR)
    await left_alone(run)
    await left_alone(run)
    assert kube.calls == []  # no pod, no status write
    assert sink.seen == [
        (
            "chat-engine",
            "Warning",
            "InstanceStatusDecodeFailed",
            "InferenceReplica prod/chat-engine: per-Instance status cannot be decoded (coverage)",
        )
    ]
    damaged["metadata"]["resourceVersion"] = "6"  # an edit: said again, once
    await left_alone(run)
    assert len(sink.seen) == 2 and kube.calls == []


async def test_columns_past_the_bound_are_a_decode_failure_of_the_replica() -> None:
    stored = copy.deepcopy(IREP)
    stored["status"] = columns(3)
    kube = FakeKube()
    tight = StatusEncodingSettings(encoding=COLUMNAR_V2, max_decoded_instances=2)
    run, sink = reconciler(kube, stored, tight)
    await left_alone(run)
    assert kube.calls == []
    assert [s[3] for s in sink.seen] == [
        "InferenceReplica prod/chat-engine: per-Instance status cannot be decoded "
        "(cardinality_limit)"
    ]


async def test_a_status_write_rejected_as_too_large_stalls_the_pass_with_one_event() -> None:
    kube = FakeKube()
    kube.fail[("status", "chat-engine")] = TooLarge(500, "", "etcdserver: request is too large")
    run, sink = reconciler(kube, IREP, DENSE)
    assert await run.reconcile(KEY) == Result(requeue=True)
    assert await run.reconcile(KEY) == Result(requeue=True)
    assert [verb for verb, _ in kube.calls] == ["status", "status"]  # no pod created
    assert [(s[1], s[2]) for s in sink.seen] == [("Warning", "StatusSizeExceeded")]
    assert sink.seen[0][3].startswith("InferenceReplica prod/chat-engine: status write of ")
    assert "bytes (DenseV1) was rejected as too large" in sink.seen[0][3]


async def test_a_write_that_converts_records_one_normal_event() -> None:
    kube = FakeKube()
    sink = Sink()
    clock = FakeClock()
    executor = Executor(
        client=kube,
        events=sink,
        expectations=Expectations(clock=clock),
        clock=clock,
        status_encoding=COLUMNAR,
    )
    stored = {**IREP, "status": listed(50)}
    models = tuple(InstanceStatus.model_validate(r) for r in rows(50))
    plan = Plan(
        actions=(WriteStatus(status=InferenceReplicaStatus(replicas=50), rows=models),),
        rows=models,
        status=InferenceReplicaStatus(replicas=50),
    )
    written: list[Mapping[str, Any]] = []
    replace = kube.replace_status

    async def recording(resource: Any, body: Mapping[str, Any], namespace: Any = None) -> Any:
        written.append(body)
        return await replace(resource, body, namespace)

    kube.replace_status = recording  # type: ignore[method-assign]
    outcome = await executor.execute(key=KEY, irep=stored, target=replica_target(stored), plan=plan)
    assert outcome.stopped is None
    assert written[0]["status"]["instanceStatusEncoding"] == COLUMNAR_V2
    assert "instanceStatuses" not in written[0]["status"]
    assert encode_rows_into_status({}, models)["instanceStatuses"] == rows(50)
    assert sink.seen == [
        (
            "chat-engine",
            "Normal",
            "InstanceStatusConverted",
            "InferenceReplica prod/chat-engine: per-Instance status was rewritten "
            "from DenseV1 to ColumnarV2",
        )
    ]


# -- metrics -----------------------------------------------------------------------------------


def sample(name: str, **labels: str) -> float:
    value = REGISTRY.get_sample_value(name, labels)
    return 0.0 if value is None else value


def test_the_encoding_gauge_counts_each_replica_once_by_its_stored_encoding() -> None:
    gauge = statusmetrics.ENCODING_GAUGE
    dense0 = sample(gauge, encoding="dense_v1")
    columnar0 = sample(gauge, encoding="columnar_v2")
    statusmetrics.stored("metrics-test/a", DENSE_V1)
    statusmetrics.stored("metrics-test/a", DENSE_V1)
    statusmetrics.stored("metrics-test/b", DENSE_V1)
    assert sample(gauge, encoding="dense_v1") == dense0 + 2
    statusmetrics.stored("metrics-test/a", COLUMNAR_V2)
    assert sample(gauge, encoding="dense_v1") == dense0 + 1
    assert sample(gauge, encoding="columnar_v2") == columnar0 + 1
    statusmetrics.stored("metrics-test/a", None)
    statusmetrics.stored("metrics-test/b", None)
    assert (sample(gauge, encoding="dense_v1"), sample(gauge, encoding="columnar_v2")) == (
        dense0,
        columnar0,
    )


def test_conversions_are_counted_with_the_codecs_labels() -> None:
    name = statusmetrics.CONVERSIONS
    before = sample(name, **{"from": "columnar_v2", "to": "dense_v1"})
    statusmetrics.converted(COLUMNAR_V2, DENSE_V1)
    assert sample(name, **{"from": "columnar_v2", "to": "dense_v1"}) == before + 1
