"""Migration request annotations: upstream OME's body, its admission rules and messages."""

from __future__ import annotations

import copy
from typing import Any

import orjson
import pytest
from webhook_world import REQUEST_KEY, REQUEST_UUID, Request

from omed.webhooks.inferenceservice import InferenceServiceValidator
from omed.webhooks.review import AdmissionResponse

VALIDATOR = InferenceServiceValidator()
PATH = f"metadata.annotations[{REQUEST_KEY}]"
PREFIX = f"migration request {REQUEST_UUID}: "


def request_doc(**changes: Any) -> dict[str, Any]:
    """A request in the field order upstream's CLI writes it."""
    doc: dict[str, Any] = {
        "schemaVersion": "v1",
        "component": "engine",
        "instance": 3,
        "from_node": "node-a",
        "hint_target_nodes": ["node-b"],
        "reason": "node-a maintenance",
        "requested_at": "2026-09-28T10:12:04Z",
        "requested_by": "kubectl-ome",
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


def test_upstream_request_is_admitted(request_for: Request, isvc: dict) -> None:
    answer = admit(request_for, isvc, value=request_doc())
    assert answer.allowed and answer.warnings == ()


def test_minimal_request_is_admitted(request_for: Request, isvc: dict) -> None:
    """The CLI leaves out empty hints, reason and requester; from_node is always there."""
    doc = request_doc(hint_target_nodes=..., reason=..., requested_at=..., requested_by=...)
    assert admit(request_for, isvc, value=doc).allowed


def test_unknown_fields_are_ignored(request_for: Request, isvc: dict) -> None:
    answer = admit(request_for, isvc, value=request_doc(lookupOnly=False, requestUUID="x"))
    assert answer.allowed and answer.warnings == ()


def test_reason_text_is_the_clis_business(request_for: Request, isvc: dict) -> None:
    """Upstream's webhook admits a hand-written reason with a URL in it."""
    doc = request_doc(reason="see https://runbooks.example/node-a")
    assert admit(request_for, isvc, value=doc).allowed


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"schemaVersion": "v2"}, f'{PREFIX}UnsupportedSchemaVersion: "v2"'),
        ({"schemaVersion": ...}, f'{PREFIX}UnsupportedSchemaVersion: ""'),
        (
            {"component": "predictor"},
            f'migration request {REQUEST_UUID}: component "predictor" does not exist on this '
            "InferenceService",
        ),
        ({"instance": -1}, f"migration request {REQUEST_UUID}: instance must be >= 0, got -1"),
        (
            {"instance": "3"},
            f"migration request {REQUEST_UUID}: parse migration request: json: cannot unmarshal "
            "string into Go struct field MigrationRequest.instance of type int32",
        ),
        (
            {"hint_target_nodes": "node-b"},
            f"migration request {REQUEST_UUID}: parse migration request: json: cannot unmarshal "
            "string into Go struct field MigrationRequest.hint_target_nodes of type []string",
        ),
    ],
)
def test_refusals(request_for: Request, isvc: dict, changes: dict[str, Any], message: str) -> None:
    answer = admit(request_for, isvc, value=request_doc(**changes))
    assert not answer.allowed
    assert answer.message == message


def test_component_must_be_declared(request_for: Request, isvc: dict) -> None:
    del isvc["spec"]["router"]
    answer = admit(request_for, isvc, value=request_doc(component="router"))
    assert answer.message == (
        f'migration request {REQUEST_UUID}: component "router" does not exist on this '
        "InferenceService"
    )


def test_engine_counts_as_declared(request_for: Request, isvc: dict) -> None:
    answer = admit(request_for, isvc, value=request_doc())
    assert answer.allowed


def test_component_with_migrations_off_warns(request_for: Request, isvc: dict) -> None:
    answer = admit(request_for, isvc, value=request_doc(component="decoder"))
    assert answer.allowed
    assert answer.warnings == (
        f"{PATH}: decoder has lifecycle.migrationPolicy.mode Never, so OME fails this request "
        "(migrations disabled by MigrationPolicy Mode=Never)",
    )


def test_value_must_be_json(request_for: Request, isvc: dict) -> None:
    answer = admit(request_for, isvc, value="{not json")
    assert answer.message is not None
    assert answer.message.startswith(f"migration request {REQUEST_UUID}: parse migration request: ")
    answer = admit(request_for, isvc, value="[1, 2]")
    assert answer.message == (
        f"migration request {REQUEST_UUID}: parse migration request: json: cannot unmarshal "
        "array into Go value of type audit.MigrationRequest"
    )


def test_key_must_end_in_a_uuid(request_for: Request, isvc: dict) -> None:
    key = "ome.io/migration-request-v1-not-a-uuid"
    answer = admit(request_for, isvc, value=request_doc(), key=key)
    assert answer.message == f"migration request {key}: annotation key carries no request UUID"


def test_other_annotations_are_ignored(request_for: Request, isvc: dict) -> None:
    answer = admit(request_for, isvc, value="anything", key="ome.io/migration-request-v2-abc")
    assert answer.allowed


def test_unchanged_request_is_not_checked_again(request_for: Request, isvc: dict) -> None:
    admit(request_for, isvc, value=request_doc(component="router"))
    stored = isvc
    updated = {**stored, "spec": {k: v for k, v in stored["spec"].items() if k != "router"}}
    answer = VALIDATOR.review(request_for(updated, operation="UPDATE", old=stored))
    assert answer.allowed


def test_changed_request_is_checked(request_for: Request, isvc: dict) -> None:
    admit(request_for, isvc, value=request_doc())
    stored = copy.deepcopy(isvc)
    isvc["metadata"]["annotations"][REQUEST_KEY] = orjson.dumps(request_doc(instance=-2)).decode()
    answer = VALIDATOR.review(request_for(isvc, operation="UPDATE", old=stored))
    assert answer.message == f"migration request {REQUEST_UUID}: instance must be >= 0, got -2"


def test_removing_a_request_is_admitted(request_for: Request, isvc: dict) -> None:
    admit(request_for, isvc, value=request_doc(instance=-1))
    stored = copy.deepcopy(isvc)
    isvc["metadata"]["annotations"] = {}
    answer = VALIDATOR.review(request_for(isvc, operation="UPDATE", old=stored))
    assert answer.allowed


def test_the_webhook_benchs_review_is_admitted() -> None:
    """bench/webhook.py (and bench/hostile_status.py, which sends its bodies) times whole
    reviews of an InferenceService carrying a migration request: were it refused, the bench
    would time a refusal's path and count every answer as failed."""
    import importlib.util
    import sys
    from pathlib import Path

    from omed.webhooks.review import parse_review

    path = Path(__file__).resolve().parents[3] / "bench" / "webhook.py"
    spec = importlib.util.spec_from_file_location("omed_bench_webhook", path)
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("omed_bench_webhook", bench)
    spec.loader.exec_module(bench)
    answer = VALIDATOR.review(parse_review(bench.review_body("uid-0")))
    assert answer.allowed, answer
