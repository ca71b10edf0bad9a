"""AdmissionReview v1 parsing and encoding, and the findings' paths and ratcheting."""

from __future__ import annotations

import base64
from typing import Any

import orjson
import pytest

from omed.webhooks.findings import Findings, format_loc, show
from omed.webhooks.review import (
    ALLOWED,
    AdmissionResponse,
    MalformedReview,
    allow,
    deny,
    encode_response,
    parse_review,
)


def review_body(request: Any, **top: Any) -> bytes:
    doc = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}
    doc.update(top)
    return orjson.dumps(doc)


REQUEST = {
    "uid": "705ab4f5-6393-11e8-b7cc-42010a800002",
    "kind": {"group": "ome.io", "version": "v1beta1", "kind": "InferenceService"},
    "resource": {"group": "ome.io", "version": "v1beta1", "resource": "inferenceservices"},
    "name": "chat",
    "namespace": "prod",
    "operation": "UPDATE",
    "userInfo": {"username": "admin"},
    "object": {"metadata": {"name": "chat"}},
    "oldObject": {"metadata": {"name": "chat"}},
    "dryRun": True,
}


def test_parse_a_full_request() -> None:
    request = parse_review(review_body(REQUEST))
    assert request.uid == REQUEST["uid"]
    assert (request.operation, request.kind, request.group, request.version) == (
        "UPDATE",
        "InferenceService",
        "ome.io",
        "v1beta1",
    )
    assert (request.name, request.namespace, request.username) == ("chat", "prod", "admin")
    assert request.object == {"metadata": {"name": "chat"}} and request.dry_run


@pytest.mark.parametrize(
    ("body", "why"),
    [
        (b"", "body is not valid JSON"),
        (b"{", "body is not valid JSON"),
        (b"[]", "body must be a JSON object (an AdmissionReview)"),
        (b'"x"', "body must be a JSON object (an AdmissionReview)"),
        (
            orjson.dumps({"kind": "AdmissionReview", "request": REQUEST}),
            "expected apiVersion admission.k8s.io/v1 and kind AdmissionReview",
        ),
        (
            review_body(REQUEST, apiVersion="admission.k8s.io/v1beta1"),
            "expected apiVersion admission.k8s.io/v1 and kind AdmissionReview",
        ),
        (
            review_body(REQUEST, kind="Review"),
            "expected apiVersion admission.k8s.io/v1 and kind AdmissionReview",
        ),
        (review_body(None), "AdmissionReview has no request object"),
        (review_body({**REQUEST, "uid": ""}), "request.uid must be a non-empty string"),
        (
            review_body({k: v for k, v in REQUEST.items() if k != "uid"}),
            "request.uid must be a non-empty string",
        ),
        (
            review_body({**REQUEST, "operation": "PATCH"}),
            "request.operation must be one of CREATE, UPDATE, DELETE, CONNECT",
        ),
        (review_body({**REQUEST, "object": [1]}), "request.object must be an object or null"),
        (review_body({**REQUEST, "oldObject": "x"}), "request.oldObject must be an object or null"),
    ],
)
def test_malformed_reviews(body: bytes, why: str) -> None:
    with pytest.raises(MalformedReview) as raised:
        parse_review(body)
    assert str(raised.value).startswith(why)


def decode(body: bytes) -> dict[str, Any]:
    doc: dict[str, Any] = orjson.loads(body)
    assert (doc["apiVersion"], doc["kind"]) == ("admission.k8s.io/v1", "AdmissionReview")
    return doc["response"]  # type: ignore[no-any-return]


def test_encode_allowed() -> None:
    assert decode(encode_response("u1", allow())) == {"uid": "u1", "allowed": True}
    assert decode(encode_response("u1", allow(warnings=["w"]))) == {
        "uid": "u1",
        "allowed": True,
        "warnings": ["w"],
    }


def test_a_plain_admission_is_shared_and_anything_else_is_not() -> None:
    assert allow() is ALLOWED and allow(warnings=[], patch=[]) is ALLOWED
    assert allow(warnings=["w"]) == AdmissionResponse(allowed=True, warnings=("w",))
    patch = [{"op": "add", "path": "/x", "value": 1}]
    assert allow(patch=patch) == AdmissionResponse(allowed=True, patch=patch)


def test_encode_denied() -> None:
    response = decode(encode_response("u2", deny("spec.x: bad", warnings=["w"])))
    assert response == {
        "uid": "u2",
        "allowed": False,
        "status": {"code": 403, "message": "spec.x: bad", "reason": "Forbidden"},
        "warnings": ["w"],
    }
    assert decode(encode_response("u", deny("x", code=400)))["status"]["reason"] == "BadRequest"
    assert decode(encode_response("u", deny("x", code=500)))["status"]["reason"] == "InternalError"


def test_encode_patch() -> None:
    ops = [{"op": "add", "path": "/spec/engine/minReplicas", "value": 1}]
    response = decode(encode_response("u3", AdmissionResponse(allowed=True, patch=ops)))
    assert response["patchType"] == "JSONPatch"
    assert orjson.loads(base64.b64decode(response["patch"])) == ops


def test_format_loc() -> None:
    assert format_loc(("spec", "engine", "minReplicas")) == "spec.engine.minReplicas"
    assert format_loc(("spec", "rollout", "groups", 0, "policyRef")) == (
        "spec.rollout.groups[0].policyRef"
    )
    assert format_loc(("metadata", "annotations", "ome.io/x", "reason")) == (
        "metadata.annotations[ome.io/x].reason"
    )


def test_show_cuts_long_values() -> None:
    assert show("a" * 100) == '"' + "a" * 60 + "..."
    assert show({"a": 1}) == '{"a":1}'


def test_ratchet_keeps_changed_and_unratchetable() -> None:
    findings = Findings()
    findings.error(("spec", "a"), "bad a")
    findings.error(("spec", "b"), "bad b")
    findings.error(("spec", "c"), "bad c", ratchet=False)
    findings.ratchet(new={"spec": {"a": 1, "b": 2, "c": 3}}, old={"spec": {"a": 1, "b": 9, "c": 3}})
    assert [issue.message for issue in findings.errors] == ["spec.b: bad b", "spec.c: bad c"]
    assert findings.warnings == [
        "spec.a: bad a (admitted because the value is unchanged from the stored object)"
    ]


def test_ratchet_treats_missing_as_a_value() -> None:
    findings = Findings()
    findings.error(("spec", "a"), "bad a")
    findings.ratchet(new={"spec": {}}, old={"spec": {"a": None}})
    assert len(findings.errors) == 1
