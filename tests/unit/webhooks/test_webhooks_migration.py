"""Migration request annotations: schema v1, each field's rule, and the reason text rules."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from webhook_world import REQUEST_KEY, REQUEST_UUID, Request

from omed.webhooks.inferenceservice import InferenceServiceValidator
from omed.webhooks.review import AdmissionResponse

VALIDATOR = InferenceServiceValidator()
PATH = f"metadata.annotations[{REQUEST_KEY}]"
SUBDOMAIN = (
    "must be a DNS-1123 subdomain (lowercase letters, digits, '-' and '.', starting and "
    "ending with a letter or digit, at most 253 characters)"
)


def request_doc(**changes: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "schema": "v1",
        "requestUUID": REQUEST_UUID,
        "component": "engine",
        "instance": 3,
        "fromNode": "node-a",
        "hintNodes": ["node-b", "node-c"],
        "reason": "node-a maintenance",
        "requestedAt": "2026-09-28T10:12:04Z",
        "requestedBy": "kubectl-ome",
    }
    for key, value in changes.items():
        if value is ...:
            doc.pop(key, None)
        else:
            doc[key] = value
    return doc


def admit(
    request_for: Request, isvc: dict[str, Any], *, value: Any, key: str = REQUEST_KEY
) -> AdmissionResponse:
    isvc["spec"]["engine"]["lifecycle"] = {"instanceReadyTimeout": "15m"}
    raw = value if isinstance(value, str) else orjson.dumps(value).decode()
    isvc["metadata"]["annotations"] = {key: raw}
    return VALIDATOR.review(request_for(isvc))


def test_full_request_is_admitted(request_for: Request, isvc: dict) -> None:
    answer = admit(request_for, isvc, value=request_doc())
    assert answer.allowed and answer.warnings == ()


def test_minimal_request_is_admitted(request_for: Request, isvc: dict) -> None:
    doc = request_doc(fromNode=..., hintNodes=..., reason=..., requestedAt=..., requestedBy=...)
    assert admit(request_for, isvc, value=doc).allowed


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"schema": "v2"}, f'{PATH}.schema: must be "v1", got "v2"'),
        ({"schema": ...}, f'{PATH}.schema: must be "v1", got null'),
        (
            {"requestUUID": "6ff01fa3-2a47-4725-9c85-786ed59ac166"},
            f"{PATH}.requestUUID: must equal the UUID that ends the key ({REQUEST_UUID}), "
            'got "6ff01fa3-2a47-4725-9c85-786ed59ac166"',
        ),
        (
            {"component": "predictor"},
            f'{PATH}.component: must be one of engine, decoder, router, got "predictor"',
        ),
        ({"instance": -1}, f"{PATH}.instance: must be an integer >= 0, got -1"),
        ({"instance": "3"}, f'{PATH}.instance: must be an integer >= 0, got "3"'),
        ({"instance": ...}, f"{PATH}.instance: must be an integer >= 0, got null"),
        ({"fromNode": "Node_A"}, f'{PATH}.fromNode: {SUBDOMAIN}, got "Node_A"'),
        (
            {"hintNodes": [f"n{i}" for i in range(9)]},
            f"{PATH}.hintNodes: must list at most 8 nodes, got 9",
        ),
        ({"hintNodes": "node-b"}, f'{PATH}.hintNodes: must be a list of node names, got "node-b"'),
        ({"hintNodes": ["node-b", "B"]}, f'{PATH}.hintNodes[1]: {SUBDOMAIN}, got "B"'),
        ({"hintNodes": ["node-b", "node-b"]}, f"{PATH}.hintNodes[1]: repeats node-b"),
        (
            {"hintNodes": ["node-a"]},
            f"{PATH}.hintNodes[0]: is fromNode (node-a): the replacement must not prefer the "
            "node it leaves",
        ),
        ({"reason": 42}, f"{PATH}.reason: must be a string, got number"),
        ({"reason": "x" * 257}, f"{PATH}.reason: must be at most 256 characters, got 257"),
        (
            {"requestedAt": "yesterday"},
            f"{PATH}.requestedAt: must be an RFC 3339 time such as 2026-09-28T10:12:04Z, "
            'got "yesterday"',
        ),
        (
            {"requestedAt": "2026-09-28T10:12:04"},
            f"{PATH}.requestedAt: must be an RFC 3339 time such as 2026-09-28T10:12:04Z, "
            'got "2026-09-28T10:12:04"',
        ),
        ({"requestedBy": ""}, f"{PATH}.requestedBy: must be a non-empty string, got string"),
    ],
)
def test_field_rules(
    request_for: Request, isvc: dict, changes: dict[str, Any], message: str
) -> None:
    answer = admit(request_for, isvc, value=request_doc(**changes))
    assert not answer.allowed
    assert answer.message == message


def test_every_hint_count_up_to_eight_is_admitted(request_for: Request, isvc: dict) -> None:
    doc = request_doc(hintNodes=[f"node-{i}" for i in range(8)])
    assert admit(request_for, isvc, value=doc).allowed


def test_component_must_be_declared(request_for: Request, isvc: dict) -> None:
    del isvc["spec"]["router"]
    answer = admit(request_for, isvc, value=request_doc(component="router"))
    assert answer.message == f"{PATH}.component: names router, which spec.router doesn't declare"


def test_component_with_migrations_off_warns(request_for: Request, isvc: dict) -> None:
    answer = admit(request_for, isvc, value=request_doc(component="decoder"))
    assert answer.allowed
    assert answer.warnings == (
        f"{PATH}: decoder has lifecycle.migrationPolicy.mode Never, so OME fails this request "
        "(migrations disabled by MigrationPolicy Mode=Never)",
    )


def test_unknown_fields_warn(request_for: Request, isvc: dict) -> None:
    answer = admit(request_for, isvc, value=request_doc(lookupOnly=False, hintNode="x"))
    assert answer.allowed
    assert answer.warnings == (
        f"{PATH}: schema v1 has no field hintNode, lookupOnly (OME ignores them)",
    )


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("{not json", f"{PATH}: must be a JSON object (the migration request), got invalid JSON"),
        ("[1, 2]", f"{PATH}: must be a JSON object (the migration request), got [1,2]"),
        ("x" * 8193, f"{PATH}: must be a JSON object of at most 8192 bytes"),
    ],
)
def test_value_must_be_a_json_object(
    request_for: Request, isvc: dict, value: str, message: str
) -> None:
    answer = admit(request_for, isvc, value=value)
    assert answer.message == message


def test_key_must_end_in_a_uuid(request_for: Request, isvc: dict) -> None:
    key = "ome.io/migration-request-v1-not-a-uuid"
    answer = admit(request_for, isvc, value=request_doc(), key=key)
    assert answer.message == (
        f"metadata.annotations[{key}]: the key must end in a lowercase UUID, such as "
        "ome.io/migration-request-v1-7c9e6679-7425-40de-944b-e07fc1f90ae7"
    )


def test_other_annotations_are_ignored(request_for: Request, isvc: dict) -> None:
    answer = admit(request_for, isvc, value="anything", key="ome.io/migration-request-v2-abc")
    assert answer.allowed


# -- Reason text ---------------------------------------------------------------------------

URL = 'must not contain a URL ("://" or "www.")'


@pytest.mark.parametrize(
    ("reason", "problem"),
    [
        ("see https://runbooks/x", URL),
        ("see WWW.example.org", URL),
        ("ftp://host/path", URL),
        (
            "rotate password=hunter2",
            "must not contain credentials (found what looks like a "
            "secret assignment such as password= or token=)",
        ),
        (
            "token: abc",
            "must not contain credentials (found what looks like a secret assignment "
            "such as password= or token=)",
        ),
        (
            "API_KEY=abc",
            "must not contain credentials (found what looks like a secret "
            "assignment such as password= or token=)",
        ),
        ("Bearer abc.def", "must not contain credentials (found what looks like a bearer token)"),
        (
            "key AKIAIOSFODNN7EXAMPLE leaked",
            "must not contain credentials (found what looks like an access key id)",
        ),
        (
            "-----BEGIN RSA PRIVATE KEY-----",
            "must not contain credentials (found what looks like a private key)",
        ),
        ("ghp_" + "a" * 36, "must not contain credentials (found what looks like a token)"),
        (
            "eyJhbGciOiJIUzI1.eyJzdWIiOiIxMjM0.sig",
            "must not contain credentials (found what looks like a JSON web token)",
        ),
        ("two\nlines", "must be plain text on one line, without control characters"),
        ("bell\x07", "must be plain text on one line, without control characters"),
    ],
)
def test_reason_must_be_plain_text(
    request_for: Request, isvc: dict, reason: str, problem: str
) -> None:
    answer = admit(request_for, isvc, value=request_doc(reason=reason))
    assert answer.message == f"{PATH}.reason: {problem}"
    assert reason not in answer.message  # never echo a possible secret


@pytest.mark.parametrize(
    "reason",
    [
        "node-a maintenance",
        "kernel upgrade on node-a (ticket OPS-1234)",
        "drain: disk pressure, 90% used",
        "token bucket refill tuning",
        "the passport office",
        "x" * 256,
    ],
)
def test_plain_reasons_are_admitted(request_for: Request, isvc: dict, reason: str) -> None:
    assert admit(request_for, isvc, value=request_doc(reason=reason)).allowed


def test_requested_by_follows_the_text_rules(request_for: Request, isvc: dict) -> None:
    answer = admit(request_for, isvc, value=request_doc(requestedBy="bob password=x"))
    assert answer.message == (
        f"{PATH}.requestedBy: must not contain credentials (found what looks like a secret "
        "assignment such as password= or token=)"
    )


def test_unchanged_request_ratchets(request_for: Request, isvc: dict) -> None:
    admit(request_for, isvc, value=request_doc(component="router"))
    stored = isvc
    updated = {**stored, "spec": {k: v for k, v in stored["spec"].items() if k != "router"}}
    answer = VALIDATOR.review(request_for(updated, operation="UPDATE", old=stored))
    assert answer.allowed
    assert answer.warnings[0].startswith(f"{PATH}.component: names router")
