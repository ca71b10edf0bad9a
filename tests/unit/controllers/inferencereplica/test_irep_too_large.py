"""Writes of an InferenceReplica that the API server rejects as too large.

StatusSizeExceeded (the event users filter for) describes a *status write*: its real bytes and
encoding, and the size metric by that encoding. A rejected add-finalizer or remove-finalizer
patch is a WriteSizeExceeded that names the write (no status write happened, so there is no
status size or encoding to report). And each way the API server says "too large" (its 413,
with a Status body, a proxy's text or no body; etcd's 500 ``request is too large``) is
recognised as such, through the same mapping the client uses."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

import pytest
from test_irep_encoding import COLUMNAR, DENSE, IREP, KEY, columns, reconciler
from test_irep_execute import FakeKube

from omed.controllers.inferencereplica.core import names
from omed.controllers.inferencereplica.shell import statusmetrics
from omed.kube.errors import TooLarge, error_from_response
from omed.metrics import REGISTRY
from omed.statuscodec import encoded_size
from omed.workqueue import Result

ETCD_TOO_LARGE = (500, {"reason": "InternalError", "message": "etcdserver: request is too large"})


def size_exceeded(encoding: str) -> float:
    value = REGISTRY.get_sample_value(statusmetrics.SIZE_EXCEEDED, {"encoding": encoding})
    return 0.0 if value is None else value


def counts() -> tuple[float, float]:
    return size_exceeded("dense_v1"), size_exceeded("columnar_v2")


def recording_status_writes(kube: FakeKube) -> list[Mapping[str, Any]]:
    sent: list[Mapping[str, Any]] = []
    replace = kube.replace_status

    async def recording(resource: Any, body: Mapping[str, Any], namespace: Any = None) -> Any:
        sent.append(copy.deepcopy(body))
        return await replace(resource, body, namespace)

    kube.replace_status = recording  # type: ignore[method-assign]
    return sent


@pytest.mark.parametrize(
    ("status", "body"),
    [
        pytest.param(
            413,
            {
                "kind": "Status",
                "apiVersion": "v1",
                "status": "Failure",
                "message": "Request entity too large: limit is 3145728",
                "reason": "RequestEntityTooLarge",
                "code": 413,
            },
            id="apiserver-413-status",
        ),
        pytest.param(
            413,
            b"<html><head><title>413 Request Entity Too Large</title></head></html>",
            id="proxy-413-text",
        ),
        pytest.param(413, None, id="413-no-body"),
        pytest.param(*ETCD_TOO_LARGE, id="etcd-500"),
        pytest.param(
            500,
            {"reason": "InternalError", "message": "Request entity too large: limit is 3145728"},
            id="500-request-entity-too-large",
        ),
    ],
)
async def test_each_too_large_answer_to_a_status_write_is_a_status_size_exceeded_event(
    status: int, body: object
) -> None:
    error = error_from_response(status, body)
    assert isinstance(error, TooLarge)
    kube = FakeKube()
    kube.fail[("status", "chat-engine")] = error
    sent = recording_status_writes(kube)
    run, sink = reconciler(kube, IREP, DENSE)
    before = counts()
    assert await run.reconcile(KEY) == Result(requeue=True)
    assert [verb for verb, _ in kube.calls] == ["status"]  # no pod created
    assert sink.seen == [
        (
            "chat-engine",
            "Warning",
            "StatusSizeExceeded",
            f"InferenceReplica prod/chat-engine: status write of {encoded_size(sent[0])} bytes "
            "(DenseV1) was rejected as too large",
        )
    ]
    assert counts() == (before[0] + 1, before[1])


async def test_the_event_and_metric_carry_the_encoding_of_the_write_that_was_rejected() -> None:
    stored = copy.deepcopy(IREP)
    stored["status"] = columns(2)
    kube = FakeKube()
    kube.fail[("status", "chat-engine")] = error_from_response(*ETCD_TOO_LARGE)
    sent = recording_status_writes(kube)
    run, sink = reconciler(kube, stored, COLUMNAR)
    before = counts()
    assert await run.reconcile(KEY) == Result(requeue=True)
    assert sent[0]["status"]["instanceStatusEncoding"] == "ColumnarV2"
    assert [s[3] for s in sink.seen] == [
        f"InferenceReplica prod/chat-engine: status write of {encoded_size(sent[0])} bytes "
        "(ColumnarV2) was rejected as too large"
    ]
    assert counts() == (before[0], before[1] + 1)


async def test_a_rejected_add_finalizer_patch_is_its_own_event_not_a_status_size() -> None:
    new = copy.deepcopy(IREP)
    del new["metadata"]["finalizers"]
    kube = FakeKube()
    kube.fail[("patch-inferencereplicas", "chat-engine")] = error_from_response(
        413, {"reason": "RequestEntityTooLarge", "message": "Request entity too large"}
    )
    run, sink = reconciler(kube, new, DENSE)
    before = counts()
    assert await run.reconcile(KEY) == Result(requeue=True)
    assert await run.reconcile(KEY) == Result(requeue=True)  # said once per resourceVersion
    # The pass stopped at the patch: no status write, no pod.
    assert kube.calls == [("patch-inferencereplicas", "chat-engine")] * 2
    patch = {"metadata": {"finalizers": [names.FINALIZER], "resourceVersion": "5"}}
    assert kube.patches == []  # the fake records only patches it accepted
    assert sink.seen == [
        (
            "chat-engine",
            "Warning",
            "WriteSizeExceeded",
            f"InferenceReplica prod/chat-engine: add-finalizer patch of {encoded_size(patch)} "
            f"bytes was rejected as too large (the object is {encoded_size(new)} bytes)",
        )
    ]
    assert counts() == before  # the status-size metric counts status writes only
    new["metadata"]["resourceVersion"] = "6"  # an edit: said again, once
    assert await run.reconcile(KEY) == Result(requeue=True)
    assert [s[2] for s in sink.seen] == ["WriteSizeExceeded"] * 2


async def test_a_rejected_remove_finalizer_patch_is_its_own_event() -> None:
    deleted = copy.deepcopy(IREP)
    deleted["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    kube = FakeKube()
    kube.fail[("patch-inferencereplicas", "chat-engine")] = error_from_response(*ETCD_TOO_LARGE)
    run, sink = reconciler(kube, deleted, DENSE)
    before = counts()
    assert await run.reconcile(KEY) == Result(requeue=True)
    assert ("patch-inferencereplicas", "chat-engine") in kube.calls
    assert [(s[1], s[2]) for s in sink.seen] == [("Warning", "WriteSizeExceeded")]
    assert sink.seen[0][3].startswith(
        "InferenceReplica prod/chat-engine: remove-finalizer patch of "
    )
    assert counts() == before
