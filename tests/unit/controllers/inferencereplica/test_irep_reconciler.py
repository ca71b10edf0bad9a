"""The reconciler's guards: stale caches wait, unreadable rows stop, conflicts retry."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest
from test_irep_execute import Events, FakeKube

from omed.clock import FakeClock
from omed.controllers.inferencereplica.core import names
from omed.controllers.inferencereplica.core.actions import RETRY_SOON
from omed.controllers.inferencereplica.core.model import PlanSettings
from omed.controllers.inferencereplica.shell.expectations import Expectations
from omed.controllers.inferencereplica.shell.reconciler import InferenceReplicaReconciler
from omed.informers.transform import Obj
from omed.kube.errors import Conflict
from omed.workqueue import Result, TerminalError

KEY = "prod/chat-engine"
TEMPLATE = {"spec": {"containers": [{"name": "ome-container", "image": "ome/serving:1.0"}]}}
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
        "runners": [{"name": "default", "template": TEMPLATE}],
    },
}


class Cache:
    def __init__(self, *objects: Obj) -> None:
        self.objects = {f"{o['metadata']['namespace']}/{o['metadata']['name']}": o for o in objects}

    def get(self, key: str) -> Obj | None:
        return self.objects.get(key)

    def by_index(self, index: str, value: str) -> list[Obj]:
        return []


def reconciler(
    kube: FakeKube,
    irep: Obj | None = None,
    *,
    busy: Callable[[], bool] = lambda: False,
    services: Cache | None = None,
) -> tuple[InferenceReplicaReconciler, Expectations, Events]:
    clock = FakeClock()
    expectations = Expectations(clock=clock)
    events = Events()
    return (
        InferenceReplicaReconciler(
            client=kube,
            replicas=Cache(irep) if irep is not None else Cache(),
            pods=Cache(),
            events=events,
            settings=PlanSettings(),
            expectations=expectations,
            clock=clock,
            busy=busy,
            services=services,
        ),
        expectations,
        events,
    )


async def left_alone(run: Any) -> None:
    """One pass over an unreadable replica: a terminal error that it has reported itself."""
    with pytest.raises(TerminalError) as caught:
        await run.reconcile(KEY)
    assert caught.value.reported


async def test_a_pass_writes_status_then_creates_and_remembers_the_stale_version() -> None:
    kube = FakeKube()
    run, expectations, _ = reconciler(kube, IREP)
    assert await run.reconcile(KEY) == Result()
    # The status, the update revision's ControllerRevision, then the two pods.
    assert [verb for verb, _ in kube.calls] == ["status", "create", "create", "create"]
    assert kube.calls[1][1].startswith("chat-engine-")
    assert [name for _, name in kube.calls[2:]] == [
        "chat-engine-0-default-0",
        "chat-engine-1-default-0",
    ]
    assert not expectations.replica_current(KEY, "5")


async def test_unobserved_writes_hold_the_key_back_without_a_request() -> None:
    kube = FakeKube()
    run, expectations, _ = reconciler(kube, IREP)
    expectations.expect_creations(KEY, ["chat-engine-0-default-0"])
    result = await run.reconcile(KEY)
    assert result.requeue_after is not None and result.requeue_after > 0
    assert kube.calls == []


async def test_a_cache_behind_the_controllers_own_write_waits_instead_of_conflicting() -> None:
    kube = FakeKube()
    run, expectations, _ = reconciler(kube, IREP)
    expectations.expect_replica_past(KEY, ["5"])
    assert await run.reconcile(KEY) == Result(requeue_after=RETRY_SOON)
    assert kube.calls == []


async def test_a_conflict_is_retried_with_backoff() -> None:
    kube = FakeKube()
    kube.fail[("status", "chat-engine")] = Conflict(409, "Conflict", "changed")
    run, _, _ = reconciler(kube, IREP)
    assert await run.reconcile(KEY) == Result(requeue=True)


async def test_undecodable_rows_stop_management_with_one_warning_per_version() -> None:
    broken = copy.deepcopy(IREP)
    broken["status"] = {"instanceStatusEncoding": "ColumnarV2"}
    kube = FakeKube()
    run, _, events = reconciler(kube, broken)
    await left_alone(run)
    await left_alone(run)
    assert kube.calls == []
    assert events.seen == [("InferenceReplica", "chat-engine", "InstanceStatusDecodeFailed")]


async def test_an_unreadable_spec_or_status_is_named_as_such_and_left_alone(
    caplog: pytest.LogCaptureFixture,
) -> None:
    bad_spec = copy.deepcopy(IREP)  # stored before the webhook refused such a duration
    bad_spec["spec"]["lifecycle"] = {"instanceReadyTimeout": "2562048h"}
    bad_status = copy.deepcopy(IREP)
    bad_status["status"] = {"readyReplicas": "two"}
    for broken, reason, line in (
        (bad_spec, "InvalidSpec", "Cannot read the InferenceReplica's spec; leaving it alone"),
        (
            bad_status,
            "InstanceStatusUnreadable",
            "Cannot read the InferenceReplica's status; leaving it alone",
        ),
    ):
        kube = FakeKube()
        run, _, events = reconciler(kube, broken)
        caplog.clear()
        await left_alone(run)
        await left_alone(run)  # said once per resourceVersion
        assert kube.calls == []
        assert events.seen == [("InferenceReplica", "chat-engine", reason)]
        assert [r.getMessage() for r in caplog.records if r.levelname == "ERROR"] == [line]


@pytest.mark.parametrize(
    "damage",
    [
        {"status": {"instanceStatusEncoding": "ColumnarV2"}},  # columns it can't decode
        {"status": {"readyReplicas": "two"}},  # a status the model refuses
        {"spec": {**IREP["spec"], "lifecycle": {"instanceReadyTimeout": "2562048h"}}},
    ],
)
async def test_a_deleted_replica_that_cant_be_read_still_lets_its_finalizer_go(
    damage: dict[str, Any],
) -> None:
    broken = copy.deepcopy(IREP)
    broken.update(damage)
    broken["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    kube = FakeKube()  # no pod left: a fresh list confirms it, then the finalizer goes
    run, _, events = reconciler(kube, broken)
    assert await run.reconcile(KEY) == Result()
    assert kube.calls == [("list", "pods"), ("patch-inferencereplicas", "chat-engine")]
    assert kube.patches == [{"metadata": {"finalizers": None, "resourceVersion": "5"}}]
    assert len(events.seen) == 1  # the warning still says why it isn't managed


async def test_a_key_without_replica_or_pods_is_forgotten() -> None:
    kube = FakeKube()
    run, expectations, _ = reconciler(kube)
    expectations.expect_creations(KEY, ["x"])
    assert await run.reconcile(KEY) == Result()
    assert expectations.satisfied(KEY)


async def test_the_reconciler_holds_one_memory_value_per_key_and_forgets_a_gone_key() -> None:
    kube = FakeKube()
    run, _, _ = reconciler(kube, IREP)
    await run.reconcile(KEY)
    memory = run.memory[KEY]  # the status write is remembered, for the pace
    assert memory.last_status_write == run._clock.monotonic()
    del run._replicas.objects[KEY]  # the replica and its pods go
    assert await run.reconcile(KEY) == Result()
    assert KEY not in run.memory


class StatusKube(FakeKube):
    """A FakeKube that keeps the replica its last status write stored, each write under a
    resourceVersion of its own."""

    stored: Obj | None = None

    async def replace_status(self, resource: Any, body: Any, namespace: Any = None) -> Any:
        written = await super().replace_status(resource, body, namespace)
        version = str(10 + len(self.calls))
        self.stored = {**written, "metadata": {**written["metadata"], "resourceVersion": version}}
        return self.stored


async def test_a_request_the_cache_still_shows_after_its_removal_is_not_removed_again() -> None:
    request = "ome.io/migration-request-v1-7c9e6679-7425-40de-944b-e07fc1f90ae7"
    body = '{"schemaVersion":"v1","component":"engine","instance":0,"from_node":"node-a"}'
    irep = copy.deepcopy(IREP)
    irep["spec"].update(replicas=0, parentRef={"name": "chat"})
    irep["metadata"]["ownerReferences"] = [
        {"apiVersion": "ome.io/v1beta1", "kind": "InferenceService", "name": "chat",
         "uid": "isvc-uid", "controller": True}
    ]  # fmt: skip
    isvc = {
        "metadata": {
            "name": "chat", "namespace": "prod", "uid": "isvc-uid",
            "annotations": {request: body},
        },
        "spec": {"engine": {}},
    }  # fmt: skip
    kube = StatusKube()
    run, _, _ = reconciler(kube, irep, services=Cache(isvc))
    await run.reconcile(KEY)
    removals = [call for call in kube.calls if call[0] == "patch-inferenceservices"]
    assert removals == [("patch-inferenceservices", "chat")]
    assert kube.patches[-1] == {"metadata": {"annotations": {request: None}}}
    # The replica's cache shows the record; the InferenceService's still shows the request.
    assert kube.stored is not None
    run._replicas.objects[KEY] = kube.stored
    await run.reconcile(KEY)
    assert [call for call in kube.calls if call[0] == "patch-inferenceservices"] == removals
    assert run.memory[KEY].removed_requests == {request}
    isvc["metadata"]["annotations"] = {}  # the cache catches up: nothing left to remember
    run._replicas.objects[KEY] = kube.stored
    await run.reconcile(KEY)
    assert run.memory[KEY].removed_requests == frozenset()
