"""The webhook server over real HTTPS on loopback: status codes, metrics, a failing handler,
TLS 1.2 minimum, and certificate rotation."""

from __future__ import annotations

import asyncio
import ssl
import warnings
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest
from webhook_world import ISVC, client_context

from omed.metrics import REGISTRY
from omed.webhooks import CertificateError, InferenceServiceValidator, WebhookServer
from omed.webhooks.review import AdmissionRequest, AdmissionResponse
from omed.webhooks.server import MAX_BODY_BYTES
from omed_devcluster.certs import CertificateAuthority

ISVC_PATH = "/validate-ome-io-v1beta1-inferenceservice"
BOOM_PATH = "/validate-boom"


class Boom:
    """A webhook with a bug."""

    path = BOOM_PATH

    async def admit(self, request: AdmissionRequest) -> AdmissionResponse:
        raise KeyError("spec")


def review(obj: dict[str, Any] | None = None, *, uid: str = "u-1") -> bytes:
    return orjson.dumps(
        {
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": {
                "uid": uid,
                "kind": {"group": "ome.io", "version": "v1beta1", "kind": "InferenceService"},
                "operation": "CREATE",
                "object": obj if obj is not None else ISVC,
            },
        }
    )


def sample(name: str, labels: dict[str, str]) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


@pytest.fixture
async def server(cert_dir: Path) -> AsyncIterator[WebhookServer]:
    srv = WebhookServer(
        handlers=[InferenceServiceValidator(), Boom()],
        port=0,
        host="127.0.0.1",
        cert_dir=cert_dir,
        cert_poll_interval=0.05,
    )
    await srv.start()
    try:
        yield srv
    finally:
        await srv.stop()


Post = Callable[..., Any]


@pytest.fixture
async def post(
    server: WebhookServer, authority: CertificateAuthority
) -> AsyncIterator[Callable[..., Any]]:
    async with aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(ssl=client_context(authority))
    ) as session:

        async def send(
            body: bytes, *, path: str = ISVC_PATH, content_type: str = "application/json"
        ) -> tuple[int, bytes]:
            headers = {"Content-Type": content_type} if content_type else {}
            url = f"https://127.0.0.1:{server.port}{path}"
            async with session.post(url, data=body, headers=headers) as response:
                return response.status, await response.read()

        yield send


async def test_answers_a_review(server: WebhookServer, post: Post) -> None:
    assert server.ready
    status, body = await post(review(uid="abc"))
    assert status == 200
    doc = orjson.loads(body)
    assert doc["apiVersion"] == "admission.k8s.io/v1" and doc["kind"] == "AdmissionReview"
    assert doc["response"] == {"uid": "abc", "allowed": True}


async def test_refusal_over_http(post: Post) -> None:
    bad = {**ISVC, "spec": {**ISVC["spec"], "engine": {"minReplicas": -1}}}
    status, body = await post(review(bad))
    assert status == 200
    response = orjson.loads(body)["response"]
    assert response["allowed"] is False
    assert response["status"]["message"] == "spec.engine.minReplicas: must be >= 0, got -1"


@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded", ""])
async def test_content_type_must_be_json(post: Post, content_type: str) -> None:
    status, _ = await post(review(), content_type=content_type)
    assert status == 415


@pytest.mark.parametrize(
    "content_type", ["application/json; charset=utf-8", "Application/JSON", "application/json "]
)
async def test_json_with_parameters_or_other_case_is_accepted(
    post: Post, content_type: str
) -> None:
    """Only an exact ``application/json`` skips aiohttp's parse; the rest is parsed as before."""
    status, _ = await post(review(), content_type=content_type)
    assert status == 200


async def test_body_over_7_mib_is_413(post: Post) -> None:
    status, _ = await post(b" " * (MAX_BODY_BYTES + 1))
    assert status == 413
    status, _ = await post(review())
    assert status == 200


async def test_body_of_exactly_7_mib_is_read(post: Post) -> None:
    body = review()
    status, _ = await post(body + b" " * (MAX_BODY_BYTES - len(body)))
    assert status == 200


@pytest.mark.parametrize(
    "body",
    [b"", b"{", b"[]", b"null", b'{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}'],
)
async def test_malformed_reviews_are_400(post: Post, body: bytes) -> None:
    status, text = await post(body)
    assert status == 400
    assert text.startswith(b"malformed AdmissionReview: ")


async def test_a_failing_handler_is_a_refusal_not_a_500(post: Post) -> None:
    panics = sample("controller_runtime_webhook_panics_total", {})
    allowed = sample(
        "controller_runtime_webhook_requests_total", {"webhook": ISVC_PATH, "code": "200"}
    )
    status, body = await post(review(uid="x"), path=BOOM_PATH)
    assert status == 200
    response = orjson.loads(body)["response"]
    assert response["allowed"] is False
    assert response["status"] == {
        "code": 500,
        "message": f"internal error in webhook {BOOM_PATH}; see the manager's log",
        "reason": "InternalError",
    }
    assert (await post(review()))[0] == 200
    # controller-runtime's webhook panic counter: the failing handler's request alone.
    assert sample("controller_runtime_webhook_panics_total", {}) == panics + 1
    after = sample(
        "controller_runtime_webhook_requests_total", {"webhook": ISVC_PATH, "code": "200"}
    )
    assert after == allowed + 1


async def test_unknown_path_and_method(
    server: WebhookServer, post: Post, authority: CertificateAuthority
) -> None:
    assert (await post(review(), path="/validate-nothing"))[0] == 404
    assert (await post(review(), path=ISVC_PATH + "/more"))[0] == 404
    async with aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(ssl=client_context(authority))
    ) as session:
        url = f"https://127.0.0.1:{server.port}{ISVC_PATH}"
        for method in ("GET", "PUT", "DELETE"):
            async with session.request(method, url) as response:
                assert response.status == 405, method
                assert response.headers["Allow"] == "POST"
        # The API server adds its timeout as a query: the path alone picks the webhook.
        async with session.post(
            url + "?timeout=10s", data=review(), headers={"Content-Type": "application/json"}
        ) as response:
            assert response.status == 200
            assert orjson.loads(await response.read())["response"]["uid"] == "u-1"


async def test_metrics(post: Post) -> None:
    labels = {"webhook": ISVC_PATH}
    ok_before = sample("controller_runtime_webhook_requests_total", {**labels, "code": "200"})
    bad_before = sample("controller_runtime_webhook_requests_total", {**labels, "code": "415"})
    count_before = sample("controller_runtime_webhook_latency_seconds_count", labels)
    await post(review())
    await post(review(), content_type="text/plain")
    assert sample("controller_runtime_webhook_requests_total", {**labels, "code": "200"}) == (
        ok_before + 1
    )
    assert sample("controller_runtime_webhook_requests_total", {**labels, "code": "415"}) == (
        bad_before + 1
    )
    assert sample("controller_runtime_webhook_latency_seconds_count", labels) == count_before + 2
    assert sample("controller_runtime_webhook_requests_in_flight", labels) == 0


async def test_tls_1_2_is_the_minimum(
    server: WebhookServer, authority: CertificateAuthority
) -> None:
    assert server.certificate.context.minimum_version == ssl.TLSVersion.TLSv1_2
    tls12 = client_context(authority)
    tls12.maximum_version = ssl.TLSVersion.TLSv1_2
    _, writer = await asyncio.open_connection("127.0.0.1", server.port, ssl=tls12)
    writer.close()
    old = client_context(authority)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        old.minimum_version = ssl.TLSVersion.TLSv1
        old.maximum_version = ssl.TLSVersion.TLSv1_1
    with pytest.raises((ssl.SSLError, ConnectionError)):
        await asyncio.open_connection("127.0.0.1", server.port, ssl=old)


async def test_stop_clears_ready(cert_dir: Path) -> None:
    srv = WebhookServer(handlers=[], port=0, host="127.0.0.1", cert_dir=cert_dir)
    assert not srv.ready
    await srv.start()
    assert srv.ready and srv.port > 0
    await srv.stop()
    assert not srv.ready


async def test_start_without_certificates_fails(tmp_path: Path) -> None:
    srv = WebhookServer(handlers=[], port=0, host="127.0.0.1", cert_dir=tmp_path)
    with pytest.raises(CertificateError, match="reading the webhook certificate"):
        await srv.start()
    assert not srv.ready


def test_two_handlers_on_one_path_are_refused() -> None:
    with pytest.raises(ValueError, match="two webhooks serve one path"):
        WebhookServer(handlers=[InferenceServiceValidator(), InferenceServiceValidator()])


# -- Certificate rotation ------------------------------------------------------------------


async def handshake_ok(port: int, authority: CertificateAuthority) -> bool:
    try:
        _, writer = await asyncio.open_connection("127.0.0.1", port, ssl=client_context(authority))
    except (ssl.SSLError, ConnectionError):
        return False
    writer.close()
    await writer.wait_closed()
    return True


async def test_rotation_is_picked_up_by_the_poller(
    server: WebhookServer,
    cert_dir: Path,
    authority: CertificateAuthority,
    rotate: Callable[..., bytes],
) -> None:
    new_ca = CertificateAuthority.create("rotated-ca")
    assert await handshake_ok(server.port, authority)
    loads = server.certificate.loads
    rotate(cert_dir, new_ca)
    deadline = asyncio.get_running_loop().time() + 10
    while server.certificate.loads == loads:  # the poller runs every 0.05 s here
        assert asyncio.get_running_loop().time() < deadline, "rotation never picked up"
        await asyncio.sleep(0.01)
    assert await handshake_ok(server.port, new_ca)
    assert not await handshake_ok(server.port, authority)


async def test_half_rotated_pair_keeps_the_old_one(
    server: WebhookServer, cert_dir: Path, authority: CertificateAuthority
) -> None:
    other = CertificateAuthority.create("other-ca").issue(
        common_name="x", ip_addresses=["127.0.0.1"], server=True
    )
    (cert_dir / "tls.crt").write_bytes(other.cert_pem)  # the key is still the old one
    assert server.reload_certificate() is False
    assert server.reload_certificate() is False  # tried again (a failed check always is)
    assert await handshake_ok(server.port, authority)
    (cert_dir / "tls.key").write_bytes(other.key_pem)  # now the pair matches
    assert server.reload_certificate() is True
    assert not await handshake_ok(server.port, authority)


async def test_reload_without_change_does_nothing(server: WebhookServer) -> None:
    loads = server.certificate.loads
    assert server.reload_certificate() is False
    assert server.certificate.loads == loads


async def test_missing_files_keep_serving(
    server: WebhookServer, cert_dir: Path, authority: CertificateAuthority
) -> None:
    (cert_dir / "tls.key").unlink()
    assert server.reload_certificate() is False
    assert await handshake_ok(server.port, authority)
