"""Fuzzing the webhook server over real HTTPS: whatever the body and content type, the answer
is 200, 400, 413 or 415, never a 500, a 200 always echoes the uid, and the server keeps
answering a valid review afterwards."""

from __future__ import annotations

import http.client
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from webhook_world import IREP, ISVC, ThreadedServer, client_context

from omed.config import DeployConfig
from omed.webhooks import (
    FeatureGates,
    InferenceReplicaValidator,
    InferenceServiceDefaulter,
    InferenceServiceValidator,
    WebhookServer,
)
from omed_devcluster.certs import CertificateAuthority

PATHS = (
    "/validate-ome-io-v1beta1-inferenceservice",
    "/validate-ome-io-v1beta1-inferencereplica",
    "/mutate-ome-io-v1beta1-inferenceservice",
)
ALLOWED_STATUSES = {200, 400, 413, 415}


async def deploy_entry() -> DeployConfig:
    return DeployConfig.model_validate(
        {"defaultDeploymentMode": "OMENative", "replicas": {"minReplicas": 1, "maxReplicas": 3}}
    )


class Client:
    """One keep-alive HTTPS connection, opened again when the server closed it."""

    def __init__(self, port: int, authority: CertificateAuthority) -> None:
        self.port = port
        self.context = client_context(authority)
        self.connection: http.client.HTTPSConnection | None = None

    def _connect(self) -> http.client.HTTPSConnection:
        if self.connection is None:
            self.connection = http.client.HTTPSConnection(
                "127.0.0.1", self.port, context=self.context, timeout=30
            )
        return self.connection

    def post(self, path: str, body: bytes, *, content_type: str | None) -> tuple[int, bytes]:
        headers = {"Content-Type": content_type} if content_type is not None else {}
        for attempt in (1, 2):
            connection = self._connect()
            try:
                connection.request("POST", path, body=body, headers=headers)
                response = connection.getresponse()
                answer = response.read()
            except (http.client.RemoteDisconnected, ConnectionError):
                connection.close()
                self.connection = None
                if attempt == 2:
                    raise
                continue
            if response.getheader("Connection", "").lower() == "close":
                connection.close()
                self.connection = None
            return response.status, answer
        raise AssertionError("unreachable")


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Client]:
    authority = CertificateAuthority.create("fuzz-ca")
    directory: Path = tmp_path_factory.mktemp("fuzz-certs")
    pair = authority.issue(common_name="fuzz", ip_addresses=["127.0.0.1"], server=True)
    (directory / "tls.crt").write_bytes(pair.cert_pem)
    (directory / "tls.key").write_bytes(pair.key_pem)
    server = WebhookServer(
        handlers=[
            InferenceServiceValidator(gates=FeatureGates(rollout_policy=True)),
            InferenceReplicaValidator(),
            InferenceServiceDefaulter(deploy_config=deploy_entry),
        ],
        port=0,
        host="127.0.0.1",
        cert_dir=directory,
    )
    with ThreadedServer(server):
        yield Client(server.port, authority)


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=4)
    ),
    max_leaves=20,
)

FIELD_NAMES = st.sampled_from(
    [
        "metadata",
        "spec",
        "annotations",
        "engine",
        "decoder",
        "router",
        "minReplicas",
        "maxReplicas",
        "lifecycle",
        "updateStrategy",
        "rollingUpdate",
        "maxSurge",
        "readyPolicy",
        "migrationPolicy",
        "worker",
        "leader",
        "runtime",
        "model",
        "name",
        "kind",
        "rollout",
        "groups",
        "policyRef",
        "autoscalerPolicyRef",
        "deletionTimestamp",
        "ome.io/controller-write",
        "ome.io/release-held-revision",
        "ome.io/migration-request-v1-7c9e6679-7425-40de-944b-e07fc1f90ae7",
    ]
)
shaped_values = st.recursive(
    json_values,
    lambda children: st.dictionaries(FIELD_NAMES, children, max_size=5),
    max_leaves=25,
)


def mutate(base: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in patch.items():
        out[key] = (
            mutate(out[key], value)
            if isinstance(out.get(key), dict) and isinstance(value, dict)
            else value
        )
    return out


@st.composite
def reviews(draw: st.DrawFn) -> dict[str, Any]:
    base = draw(st.sampled_from([ISVC, IREP]))
    obj = mutate(base, draw(st.dictionaries(FIELD_NAMES, shaped_values, max_size=3)))
    request: dict[str, Any] = {
        "uid": draw(st.text(min_size=1, max_size=36)),
        "operation": draw(st.sampled_from(["CREATE", "UPDATE", "DELETE", "CONNECT"])),
        "kind": {"group": "ome.io", "version": "v1beta1", "kind": base["kind"]},
        "object": draw(st.sampled_from([obj, None])) if draw(st.booleans()) else obj,
    }
    if draw(st.booleans()):
        request["oldObject"] = mutate(
            base, draw(st.dictionaries(FIELD_NAMES, shaped_values, max_size=2))
        )
    if draw(st.booleans()):
        request[draw(FIELD_NAMES)] = draw(json_values)
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}


bodies = st.one_of(
    st.binary(max_size=512),
    json_values.map(orjson.dumps),
    reviews().map(orjson.dumps),
    reviews().map(lambda r: orjson.dumps(r)[: len(orjson.dumps(r)) // 2]),
)
content_types = st.sampled_from(
    ["application/json", "application/json; charset=utf-8", "text/plain", None, "", "json"]
)


def check_answer(status: int, body: bytes, *, sent: bytes) -> None:
    assert status in ALLOWED_STATUSES, (status, body)
    if status == 200:
        doc = orjson.loads(body)
        assert doc["kind"] == "AdmissionReview"
        assert doc["response"]["uid"] == orjson.loads(sent)["request"]["uid"]
        assert isinstance(doc["response"]["allowed"], bool)


@settings(
    max_examples=200,
    deadline=None,
    suppress_health_check=list(HealthCheck),
)
@given(path=st.sampled_from(PATHS), body=bodies, content_type=content_types)
def test_any_body_gets_a_well_formed_answer(
    client: Client, path: str, body: bytes, content_type: str | None
) -> None:
    status, answer = client.post(path, body, content_type=content_type)
    check_answer(status, answer, sent=body)


@settings(
    max_examples=100,
    deadline=None,
    suppress_health_check=list(HealthCheck),
)
@given(path=st.sampled_from(PATHS), review=reviews())
def test_review_shaped_bodies_are_answered_200(
    client: Client, path: str, review: dict[str, Any]
) -> None:
    body = orjson.dumps(review)
    status, answer = client.post(path, body, content_type="application/json")
    check_answer(status, answer, sent=body)
    assert status in {200, 400}


def test_server_still_answers_after_the_fuzzing(client: Client) -> None:
    body = orjson.dumps(
        {
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": {"uid": "after", "operation": "CREATE", "object": ISVC},
        }
    )
    status, answer = client.post(PATHS[0], body, content_type="application/json")
    assert status == 200
    assert orjson.loads(answer)["response"] == {"uid": "after", "allowed": True}
