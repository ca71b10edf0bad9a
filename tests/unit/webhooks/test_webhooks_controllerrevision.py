"""The ControllerRevision validator: omed's runtime revisions keep data, labels and revision."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from webhook_world import Request

from omed.webhooks.controllerrevision import ControllerRevisionValidator

VALIDATOR = ControllerRevisionValidator()
REVISION: dict[str, Any] = {
    "apiVersion": "apps/v1",
    "kind": "ControllerRevision",
    "metadata": {
        "name": "r-prod-srt-1a2b3c4d",
        "namespace": "ome",
        "resourceVersion": "7",
        "labels": {"ome.io/runtime-of": "srt", "ome.io/revision-hash": "1a2b3c4d"},
        "annotations": {"ome.io/created-by": "ome-controller"},
    },
    "data": {"spec": {"containers": [{"name": "ome-container", "image": "ome/srt:1.0"}]}},
    "revision": 3,
}


def changed(**edits: Any) -> dict[str, Any]:
    obj = copy.deepcopy(REVISION)
    obj["metadata"]["resourceVersion"] = "8"
    for key, value in edits.items():
        if key in ("labels", "annotations", "finalizers"):
            obj["metadata"][key] = value
        else:
            obj[key] = value
    return obj


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (
            {"data": {"spec": {"containers": []}}},
            "ControllerRevision ome/r-prod-srt-1a2b3c4d is owned by OME; .data is immutable",
        ),
        (
            {"labels": {"ome.io/runtime-of": "other", "ome.io/revision-hash": "1a2b3c4d"}},
            "ControllerRevision ome/r-prod-srt-1a2b3c4d is owned by OME; .labels are immutable",
        ),
        (
            {"revision": 4},
            "ControllerRevision ome/r-prod-srt-1a2b3c4d is owned by OME; .revision is immutable",
        ),
    ],
)
def test_an_update_of_what_identifies_the_revision_is_refused(
    request_for: Request, edit: dict[str, Any], message: str
) -> None:
    answer = VALIDATOR.review(request_for(changed(**edit), operation="UPDATE", old=REVISION))
    assert not answer.allowed
    assert answer.message == message


def test_annotations_and_finalizers_may_change(request_for: Request) -> None:
    marked = changed(
        annotations={
            "ome.io/created-by": "ome-controller",
            "ome.io/gc-eligible-since": "2026-12-01T10:00:00Z",
        },
        finalizers=["example.com/hold"],
    )
    assert VALIDATOR.review(request_for(marked, operation="UPDATE", old=REVISION)).allowed


def test_revisions_omed_did_not_write_pass_through(request_for: Request) -> None:
    foreign = copy.deepcopy(REVISION)
    foreign["metadata"]["annotations"] = {}
    edit = changed(revision=9)
    edit["metadata"]["annotations"] = {}
    assert VALIDATOR.review(request_for(edit, operation="UPDATE", old=foreign)).allowed


@pytest.mark.parametrize("operation", ["CREATE", "DELETE"])
def test_other_operations_are_admitted(request_for: Request, operation: str) -> None:
    assert VALIDATOR.review(request_for(changed(revision=9), operation=operation)).allowed
