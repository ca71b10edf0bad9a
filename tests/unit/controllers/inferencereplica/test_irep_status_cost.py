"""What reading a stored status costs the controller.

A ColumnarV2 status of 20,000 identical rows with 32 conditions each is 6.6 KB of columns;
validating each row into its own model cost the leader 14 s of CPU and 1 GiB per pass. Now
the codec refuses it (``size``: rows x cells past the bound) through the decode-failure path,
each distinct row (class) is validated once, and a resourceVersion already read is not
validated again. The work is counted (``InstanceStatus.model_validate`` calls), and CPU time is
bounded only loosely, far above what it takes and far below what it took.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Iterator
from typing import Any

import pytest
from pydantic import ValidationError
from test_irep_encoding import IREP, KEY, Cache, Sink
from test_irep_execute import FakeKube

from omed.api.inferencereplica import InstanceStatus
from omed.clock import FakeClock
from omed.controllers.inferencereplica.core import status as status_module
from omed.controllers.inferencereplica.core.encoding import StatusEncodingSettings
from omed.controllers.inferencereplica.core.model import PlanSettings
from omed.controllers.inferencereplica.core.status import (
    ROWS,
    RowsCache,
    StatusDecodeFailed,
    decode_rows_from_status,
)
from omed.controllers.inferencereplica.shell import statusmetrics
from omed.controllers.inferencereplica.shell.expectations import Expectations
from omed.controllers.inferencereplica.shell.reconciler import InferenceReplicaReconciler
from omed.metrics import REGISTRY
from omed.statuscodec import COLUMNAR_V2, encode_columnar
from omed.workqueue import Result, TerminalError
from omed_devcluster.hostile import TIME, ready_conditions

BOUND = 20000
SETTINGS = StatusEncodingSettings(encoding=COLUMNAR_V2, max_decoded_instances=BOUND)


def row(index: int, *, conditions: int) -> dict[str, Any]:
    return {
        "index": index,
        "incarnation": 1,
        "phase": "Ready",
        "runningRevision": "chat-engine-2f32f6fe",
        "targetRevision": "chat-engine-2f32f6fe",
        "podCount": 1,
        "servingPodCount": 1,
        "availablePodCount": 1,
        "admitted": True,
        "conditions": ready_conditions(conditions),
        "readySince": TIME,
    }


def status(count: int, *, conditions: int, classes: int = 1) -> dict[str, Any]:
    rows = [row(i, conditions=conditions) for i in range(count)]
    for i, body in enumerate(rows):
        body["incarnation"] = 1 + i % classes
    return {
        "replicas": count,
        "instanceStatusEncoding": COLUMNAR_V2,
        "instanceStatusColumns": encode_columnar(rows),
    }


def paused(count: int, stored: dict[str, Any]) -> dict[str, Any]:
    """A paused standalone InferenceReplica of ``count`` Instances and no pods, as the hostile
    status was found on: the planner writes no pod, and the pass is all about the status."""
    irep = copy.deepcopy(IREP)
    irep["metadata"]["uid"] = f"uid-{id(stored)}"
    irep["spec"]["replicas"] = count
    irep["spec"]["paused"] = True
    irep["status"] = stored
    return irep


@pytest.fixture
def validations(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """Counts the rows validated (one per row before, one per class now): those the decoder
    validates together (its class adapter, ``status._CLASSES``) and any
    ``InstanceStatus.model_validate`` call."""
    calls = [0]
    original = InstanceStatus.model_validate
    adapter = status_module._CLASSES

    def counting(obj: Any, **kwargs: Any) -> InstanceStatus:
        calls[0] += 1
        return original(obj, **kwargs)

    class Counting:
        def validate_python(self, obj: Any, **kwargs: Any) -> Any:
            calls[0] += len(obj)
            return adapter.validate_python(obj, **kwargs)

    monkeypatch.setattr(InstanceStatus, "model_validate", counting)
    monkeypatch.setattr(status_module, "_CLASSES", Counting())
    yield calls


def reconciler(irep: dict[str, Any]) -> tuple[InferenceReplicaReconciler, FakeKube, Sink]:
    clock = FakeClock()
    kube, sink = FakeKube(), Sink()
    run = InferenceReplicaReconciler(
        client=kube,
        replicas=Cache(irep),
        pods=Cache(),
        events=sink,
        settings=PlanSettings(),
        expectations=Expectations(clock=clock),
        clock=clock,
        status_encoding=SETTINGS,
    )
    return run, kube, sink


def failures(reason: str) -> float:
    value = REGISTRY.get_sample_value(
        statusmetrics.DECODE_FAILURES, {"reason": reason}
    )  # absent before the first failure of that reason
    return value or 0.0


async def test_20000_rows_of_32_conditions_are_refused_as_size_with_the_decode_failure_event(
    validations: list[int], caplog: pytest.LogCaptureFixture
) -> None:
    hostile = paused(BOUND, status(BOUND, conditions=32))
    run, kube, sink = reconciler(hostile)
    before = failures("size")
    started = time.process_time()
    with pytest.raises(TerminalError):  # left alone until it is edited
        await run.reconcile(KEY)
    spent = time.process_time() - started
    assert kube.calls == []  # no status write, no pod
    assert sink.seen == [
        (
            "chat-engine",
            "Warning",
            "InstanceStatusDecodeFailed",
            "InferenceReplica prod/chat-engine: per-Instance status cannot be decoded (size): "
            "20000 rows x 202 cells = 4040000 decoded cells (indexes and leaf values, every "
            "condition's fields included), more than the bound of 1280000 (20000 rows x 64 cells)",
        )
    ]
    assert failures("size") == before + 1
    [line] = [r for r in caplog.records if r.levelname == "ERROR"]
    assert line.getMessage() == "Cannot decode per-Instance status; not managing the replica"
    detail = line.kv["detail"]  # type: ignore[attr-defined]
    assert detail.startswith("20000 rows x 202 cells = 4040000 decoded cells")
    assert detail.endswith("more than the bound of 1280000 (20000 rows x 64 cells)")
    assert validations[0] == 0  # refused before a row was built (was: 20,000 validations)
    assert spent < 1.0, f"the refusal took {spent:.2f} s of CPU (was 14 s)"


async def test_a_status_at_the_bound_is_validated_once_per_class_and_once_per_version(
    validations: list[int],
) -> None:
    stored = status(2000, conditions=1, classes=3)  # (2,000 rows: the planner's pass is per row)
    irep = paused(2000, stored)
    run, kube, _ = reconciler(irep)
    await run.reconcile(KEY)
    assert validations[0] == 3  # one per class (was: one per row, 2,000)
    assert [verb for verb, _ in kube.calls] == ["status"]  # the paused summary
    validations[0] = 0
    rows = ROWS.last_read(irep)
    again = InferenceReplicaReconciler(  # a pod event later: the same version, read again
        client=kube,
        replicas=Cache(irep),
        pods=Cache(),
        events=Sink(),
        settings=PlanSettings(),
        expectations=Expectations(clock=FakeClock()),
        clock=FakeClock(),
        status_encoding=SETTINGS,
    )
    await again.reconcile(KEY)
    assert validations[0] == 0  # nothing validated for a version already read
    assert ROWS.last_read(irep) is rows is not None


async def test_a_replica_whose_rows_the_cache_wont_keep_is_still_managed(
    monkeypatch: pytest.MonkeyPatch, validations: list[int]
) -> None:
    irep = paused(50, status(50, conditions=1, classes=50))  # 100 models: past a cap of 10
    monkeypatch.setattr(ROWS, "_max_models", 10)
    run, kube, sink = reconciler(irep)
    assert await run.reconcile(KEY) == Result()
    assert sink.seen == []  # read under the bound and planned (was: cardinality_limit)
    assert [verb for verb, _ in kube.calls] == ["status"]
    assert validations[0] == 50 and ROWS.last_read(irep) is None


def test_decoding_at_the_bound_shares_each_class_and_stays_cheap(validations: list[int]) -> None:
    stored = status(BOUND, conditions=1, classes=3)
    started = time.process_time()
    models = decode_rows_from_status(stored, max_rows=BOUND)
    spent = time.process_time() - started
    assert validations[0] == 3
    assert [m.index for m in models] == list(range(BOUND))
    assert models[0].conditions is models[3].conditions  # one class, one list of conditions
    assert models[0].conditions is not models[1].conditions
    assert models[7].to_dict() == {**row(7, conditions=1), "incarnation": 2}
    assert models[7] == InstanceStatus.model_validate({**row(7, conditions=1), "incarnation": 2})
    assert spent < 1.0, f"decoding took {spent:.2f} s of CPU"


def test_a_row_the_model_refuses_is_named_by_its_first_row_in_stored_order() -> None:
    rows = [row(i, conditions=1) for i in range(6)]
    for i in (3, 5):
        rows[i]["readySince"] = "yesterday"  # the codec keeps any string; the model doesn't
    with pytest.raises(StatusDecodeFailed) as caught:
        decode_rows_from_status({"instanceStatuses": rows}, max_rows=None)
    assert caught.value.reason == "row_shape"
    assert caught.value.row is not None and caught.value.row["index"] == 3
    assert "readySince" in caught.value.detail
    with pytest.raises(ValidationError) as alone:
        InstanceStatus.model_validate({**rows[3], "index": 0})
    assert caught.value.detail == f"a row is not a valid Instance row: {alone.value}"


def test_a_condition_the_model_refuses_gives_the_message_its_class_gives_alone() -> None:
    rows = [row(i, conditions=2) for i in range(6)]
    for i in range(6):
        rows[i]["readySince"] = f"2026-09-14T20:00:0{i}Z"  # six classes
    rows[4]["conditions"][1]["lastTransitionTime"] = "yesterday"
    with pytest.raises(StatusDecodeFailed) as caught:
        decode_rows_from_status({"instanceStatuses": rows}, max_rows=None)
    assert caught.value.reason == "row_shape"
    assert caught.value.row is not None and caught.value.row["index"] == 4
    with pytest.raises(ValidationError) as alone:
        InstanceStatus.model_validate({**rows[4], "index": 0})
    assert caught.value.detail == f"a row is not a valid Instance row: {alone.value}"
    assert "conditions.1.lastTransitionTime" in caught.value.detail


def test_the_cache_keeps_one_version_per_replica_and_reads_any_other_afresh(
    validations: list[int],
) -> None:
    cache = RowsCache(max_models=25)
    first = paused(10, status(10, conditions=1))  # 10 rows and 1 condition model: 11
    rows = cache.read(first, max_rows=BOUND)
    assert validations[0] == 1
    assert cache.read(first, max_rows=BOUND) is rows and validations[0] == 1
    rebuilt = copy.deepcopy(first)  # the same version, but not the object that was read
    assert cache.read(rebuilt, max_rows=BOUND) == rows and validations[0] == 2
    rebuilt["metadata"]["resourceVersion"] = "6"
    assert cache.last_read(rebuilt) is None
    cache.read(rebuilt, max_rows=BOUND)
    assert validations[0] == 3 and len(cache) == 1
    for n in range(3):  # 11 models each: the least recently read go past 25
        other = paused(10, status(10, conditions=1))
        other["metadata"]["uid"] = f"other-{n}"
        cache.read(other, max_rows=BOUND)
    assert len(cache) == 2
    huge = paused(30, status(30, conditions=1))  # 31 models: read, never kept
    cache.read(huge, max_rows=BOUND)
    assert cache.last_read(huge) is None and len(cache) == 2
    kept = cache.read(other, max_rows=BOUND)
    assert cache.last_read(other) is kept
    with pytest.raises(StatusDecodeFailed):  # a status that can't be read keeps nothing
        cache.read(other, max_rows=5)
    assert cache.last_read(other) is None
