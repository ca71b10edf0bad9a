"""The InferenceReplica validator: only controller writes, and the release-held exception."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from webhook_world import Request

from omed.webhooks.inferencereplica import (
    MSG_NOT_CONTROLLER,
    InferenceReplicaValidator,
    revision_prefix,
)

VALIDATOR = InferenceReplicaValidator()
RELEASE = "ome.io/release-held-revision"


def unmarked(irep: dict[str, Any]) -> dict[str, Any]:
    obj = copy.deepcopy(irep)
    del obj["metadata"]["annotations"]["ome.io/controller-write"]
    return obj


def with_release(obj: dict[str, Any], value: str) -> dict[str, Any]:
    changed = copy.deepcopy(obj)
    changed["metadata"].setdefault("annotations", {})[RELEASE] = value
    changed["metadata"]["resourceVersion"] = "42"
    changed["metadata"]["managedFields"] = [{"manager": "kubectl-ome"}]
    return changed


def release_message(value: str, example: str = "chat-engine-7f9c4d2b") -> str:
    return (
        f"metadata.annotations[{RELEASE}]: must name a full revision of this replica, "
        f'<isvc>-<component>-<8 hex characters> such as {example}, got "{value}"'
    )


def test_controller_writes_are_admitted(request_for: Request, irep: dict) -> None:
    assert VALIDATOR.review(request_for(irep)).allowed
    changed = copy.deepcopy(irep)
    changed["spec"]["replicas"] = 5
    assert VALIDATOR.review(request_for(changed, operation="UPDATE", old=irep)).allowed


def test_write_without_the_mark_is_refused(request_for: Request, irep: dict) -> None:
    answer = VALIDATOR.review(request_for(unmarked(irep)))
    assert not answer.allowed and answer.code == 403
    assert answer.message == MSG_NOT_CONTROLLER
    assert answer.message.startswith(
        'metadata.annotations[ome.io/controller-write]: must be "true": only the OME '
        "controller writes InferenceReplicas"
    )
    mark_removed = unmarked(irep)
    answer = VALIDATOR.review(request_for(mark_removed, operation="UPDATE", old=irep))
    assert answer.message == MSG_NOT_CONTROLLER


@pytest.mark.parametrize("value", ["false", "True", ""])
def test_mark_must_be_exactly_true(request_for: Request, irep: dict, value: str) -> None:
    irep["metadata"]["annotations"]["ome.io/controller-write"] = value
    assert not VALIDATOR.review(request_for(irep)).allowed


def test_release_only_update_is_admitted_without_the_mark(request_for: Request, irep: dict) -> None:
    stored = unmarked(irep)
    released = with_release(stored, "chat-engine-7f9c4d2b")
    assert VALIDATOR.review(request_for(released, operation="UPDATE", old=stored)).allowed
    # Removing it again (as the controller does after the release) is a release-only change too.
    assert VALIDATOR.review(request_for(stored, operation="UPDATE", old=released)).allowed


def test_release_with_other_changes_needs_the_mark(request_for: Request, irep: dict) -> None:
    stored = unmarked(irep)
    released = with_release(stored, "chat-engine-7f9c4d2b")
    released["spec"]["paused"] = True
    answer = VALIDATOR.review(request_for(released, operation="UPDATE", old=stored))
    assert answer.message == MSG_NOT_CONTROLLER
    labelled = with_release(stored, "chat-engine-7f9c4d2b")
    labelled["metadata"]["labels"]["team"] = "a"
    assert not VALIDATOR.review(request_for(labelled, operation="UPDATE", old=stored)).allowed


@pytest.mark.parametrize(
    "value",
    [
        "7f9c4d2b",  # the hash alone: the CLI expands it, the annotation holds the full name
        "chat-decoder-7f9c4d2b",  # another component
        "other-engine-7f9c4d2b",  # another service
        "chat-engine-7F9C4D2B",
        "chat-engine-7f9c4d2",
        "chat-engine-7f9c4d2bb",
        "",
    ],
)
def test_release_must_name_a_full_revision(request_for: Request, irep: dict, value: str) -> None:
    for stored in (irep, unmarked(irep)):
        answer = VALIDATOR.review(
            request_for(with_release(stored, value), operation="UPDATE", old=stored)
        )
        assert not answer.allowed
        assert answer.message == release_message(value)


def test_release_checked_on_create_too(request_for: Request, irep: dict) -> None:
    answer = VALIDATOR.review(request_for(with_release(irep, "nope")))
    assert answer.message == release_message("nope")


def test_unchanged_release_value_is_not_rechecked(request_for: Request, irep: dict) -> None:
    stored = with_release(irep, "legacy")
    changed = copy.deepcopy(stored)
    changed["spec"]["replicas"] = 3
    assert VALIDATOR.review(request_for(changed, operation="UPDATE", old=stored)).allowed


def test_revision_prefix_sources(irep: dict) -> None:
    assert revision_prefix(irep) == "chat-engine"
    del irep["spec"]["parentRef"]
    irep["metadata"]["labels"]["ome.io/inferenceservice"] = "front"
    assert revision_prefix(irep) == "front-engine"
    del irep["metadata"]["labels"]["ome.io/inferenceservice"]
    irep["metadata"]["name"] = "pool-a"
    assert revision_prefix(irep) == "pool-a-engine"
    irep["metadata"]["name"] = "p" * 60
    assert revision_prefix(irep) == "p" * 54  # cut to leave room for -<hash>, as the controller


def test_standalone_replica_release(request_for: Request, irep: dict) -> None:
    del irep["spec"]["parentRef"]
    del irep["metadata"]["labels"]
    irep["metadata"]["name"] = "pool-a"
    ok = with_release(irep, "pool-a-engine-0123abcd")
    assert VALIDATOR.review(request_for(ok, operation="UPDATE", old=irep)).allowed
    bad = with_release(irep, "chat-engine-0123abcd")
    answer = VALIDATOR.review(request_for(bad, operation="UPDATE", old=irep))
    assert answer.message == release_message("chat-engine-0123abcd", "pool-a-engine-7f9c4d2b")


def test_delete_and_deleting_updates_are_admitted(request_for: Request, irep: dict) -> None:
    stored = unmarked(irep)
    assert VALIDATOR.review(request_for(None, operation="DELETE", old=stored)).allowed
    deleting = copy.deepcopy(stored)
    deleting["metadata"]["deletionTimestamp"] = "2026-09-28T10:12:04Z"
    finalized = copy.deepcopy(deleting)
    finalized["metadata"]["finalizers"] = []
    assert VALIDATOR.review(request_for(finalized, operation="UPDATE", old=deleting)).allowed


def test_wrong_kind(request_for: Request, irep: dict) -> None:
    answer = VALIDATOR.review(request_for(irep, kind="InferenceService"))
    assert not answer.allowed and answer.code == 400
    assert answer.message == "this webhook validates InferenceReplicas, got kind InferenceService"
