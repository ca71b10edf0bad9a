"""Which API answers are refusals for good, and what a refusal says."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import pytest

from omed.controllers.refusals import (
    FAILED_TEST_MESSAGE,
    MSG_WRITE_REFUSED,
    REASON_WRITE_REFUSED,
    RefusedWrite,
    failed_test,
    first_of_each_kind,
    refused_write,
    report,
    uid_changed,
)
from omed.events import MAX_MESSAGE_BYTES
from omed.kube.errors import (
    AlreadyExists,
    Conflict,
    Gone,
    NotFound,
    ServerError,
    TooManyRequests,
    error_from_response,
)

FORBIDDEN = (
    'pods "chat-engine-0-1" is forbidden: User "system:serviceaccount:ome:ome-controller-manager" '
    'cannot patch resource "pods" in API group "" in the namespace "demo"'
)


@pytest.mark.parametrize(
    ("status", "reason"),
    [
        (403, "Forbidden"),
        (401, "Unauthorized"),
        (400, "BadRequest"),
        (422, "Invalid"),
        (405, "MethodNotAllowed"),
    ],
)
def test_permanent_answers_are_refusals(status: int, reason: str) -> None:
    err = error_from_response(status, {"reason": reason, "message": "no"})
    refusal = refused_write(err, verb="patch", resource="pods", name="p")
    assert refusal == RefusedWrite("patch", "pods", "p", status, reason, "no")


@pytest.mark.parametrize(
    "err",
    [
        NotFound(404, "NotFound", "gone"),
        Conflict(409, "Conflict", "changed"),
        AlreadyExists(409, "AlreadyExists", "taken"),
        Gone(410, "Gone", "compacted"),
        TooManyRequests(429, "TooManyRequests", "slow down"),
        ServerError(500, "InternalError", "etcd timed out"),
        error_from_response(413, {"reason": "RequestEntityTooLarge", "message": "too large"}),
        error_from_response(500, {"message": "etcdserver: request is too large"}),
        OSError("connection reset"),
    ],
)
def test_transient_or_otherwise_handled_answers_are_not(err: BaseException) -> None:
    assert refused_write(err, verb="patch", resource="pods", name="p") is None


def test_the_message_names_the_verb_resource_object_and_the_api_servers_words() -> None:
    err = error_from_response(403, {"reason": "Forbidden", "message": FORBIDDEN})
    refusal = refused_write(err, verb="patch", resource="pods", name="chat-engine-0-1")
    assert refusal is not None
    assert refusal.message() == (
        f'patch pods "chat-engine-0-1" refused by the API server (403 Forbidden): {FORBIDDEN}'
    )
    assert refusal.condition_reason == "Forbidden"


def test_a_long_message_is_cut_to_an_events_size_and_an_odd_reason_is_replaced() -> None:
    refusal = RefusedWrite("create", "pods", "p", 400, "Bad Request!", "x" * 5000)
    assert len(refusal.message().encode()) == MAX_MESSAGE_BYTES
    assert refusal.condition_reason == REASON_WRITE_REFUSED


def test_a_failed_json_patch_test_and_a_replaced_pod_are_told_apart_from_refusals() -> None:
    stale = error_from_response(422, {"reason": "Invalid", "message": FAILED_TEST_MESSAGE})
    replaced = error_from_response(
        422, {"reason": "Invalid", "message": 'Pod "p" is invalid: metadata.uid: immutable'}
    )
    invalid = error_from_response(
        422, {"reason": "Invalid", "message": 'Pod "p" is invalid: spec: Forbidden: pod updates'}
    )
    assert failed_test(stale) and not uid_changed(stale)
    assert uid_changed(replaced) and not failed_test(replaced)
    assert not failed_test(invalid) and not uid_changed(invalid)
    assert not failed_test(ServerError(500, "InternalError", FAILED_TEST_MESSAGE))


def test_a_pass_reports_each_kind_once_naming_the_first_object() -> None:
    gates = [
        RefusedWrite("patch", "pods/status", f"p{i}", 403, "Forbidden", f"m{i}") for i in (2, 1)
    ]
    create = RefusedWrite("create", "pods", "p3", 403, "Forbidden", "m3")
    assert first_of_each_kind([*gates, create]) == [create, gates[1]]


class Sink:
    def __init__(self) -> None:
        self.seen: list[tuple[str, str, str]] = []

    def event(self, obj: Mapping[str, Any], *, type: str, reason: str, message: str) -> None:
        self.seen.append((type, reason, message))


def test_report_logs_at_warning_and_records_a_warning_event_per_kind(
    caplog: pytest.LogCaptureFixture,
) -> None:
    logger = logging.getLogger("omed.controllers.test")
    caplog.set_level(logging.INFO, logger=logger.name)
    refusals = [RefusedWrite("patch", "pods", f"p{i}", 403, "Forbidden", "no") for i in range(3)]
    sink = Sink()
    obj = {"kind": "InferenceReplica", "metadata": {"name": "r"}}
    report(refusals, key="ns/r", involved=obj, events=sink, logger=logger, requeues=4)
    assert sink.seen == [("Warning", REASON_WRITE_REFUSED, refusals[0].message())]
    (line,) = caplog.records
    assert (line.levelname, line.getMessage()) == ("WARNING", MSG_WRITE_REFUSED)
    assert line.kv["refused"] == 3 and line.kv["requeues"] == 4  # type: ignore[attr-defined]
    report(refusals, key="ns/r", involved=None, events=sink, logger=logger, requeues=5)
    assert len(sink.seen) == 1  # nothing to put an event on
