"""Certificate rotation that changes the key type, on a running webhook server over real TLS.

OpenSSL keeps one certificate per key type in a context, so loading an ECDSA pair into the
context that served an RSA pair would keep the RSA certificate for every client that
negotiates RSA. These tests rotate RSA -> ECDSA and ECDSA -> RSA, and check that a client
restricted to the old key type can no longer connect, and that every other client sees the new
certificate: with and without SNI, with the same TLS settings as before the rotation.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import ipaddress
import logging
import ssl
import warnings
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import aiohttp
import orjson
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from webhook_world import ISVC, client_context

from omed.webhooks import InferenceServiceValidator, WebhookServer
from omed_devcluster.certs import CertificateAuthority

KeyType = Literal["rsa", "ecdsa"]
ONLY: dict[KeyType, str] = {
    "rsa": "ECDHE-RSA-AES128-GCM-SHA256",
    "ecdsa": "ECDHE-ECDSA-AES128-GCM-SHA256",
}
"""A TLS 1.2 cipher suite that only a server with that key type can serve."""
OTHER: dict[KeyType, KeyType] = {"rsa": "ecdsa", "ecdsa": "rsa"}
HOSTS = ["127.0.0.1", "localhost"]
"""How the client names the server: an IP address sends no SNI, a host name does."""


@dataclass(frozen=True)
class Pair:
    cert: x509.Certificate
    cert_pem: bytes
    key_pem: bytes


def issue(authority: CertificateAuthority, key_type: KeyType, common_name: str) -> Pair:
    """A serving certificate for 127.0.0.1 and localhost with an RSA 2048 or ECDSA P-256 key,
    signed by ``authority``."""
    key: rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey = (
        rsa.generate_private_key(public_exponent=65537, key_size=2048)
        if key_type == "rsa"
        else ec.generate_private_key(ec.SECP256R1())
    )
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)]))
        .issuer_name(authority.cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            ),
            critical=False,
        )
        .sign(authority.key, hashes.SHA256())
    )
    key_pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    return Pair(cert=cert, cert_pem=cert.public_bytes(serialization.Encoding.PEM), key_pem=key_pem)


def install(pair: Pair, directory: Path) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "tls.crt").write_bytes(pair.cert_pem)
    (directory / "tls.key").write_bytes(pair.key_pem)


def only(authority: CertificateAuthority, key_type: KeyType) -> ssl.SSLContext:
    """A TLS 1.2 client that accepts only a certificate with a ``key_type`` key."""
    context = client_context(authority)
    context.maximum_version = ssl.TLSVersion.TLSv1_2
    context.set_ciphers(ONLY[key_type])
    return context


async def served(port: int, context: ssl.SSLContext, host: str) -> x509.Certificate:
    """The certificate the server presents to a client with ``context`` naming it ``host``."""
    _, writer = await asyncio.open_connection("127.0.0.1", port, ssl=context, server_hostname=host)
    try:
        ssl_object = writer.get_extra_info("ssl_object")
        der = ssl_object.getpeercert(binary_form=True)
        assert der is not None
        return x509.load_der_x509_certificate(der)
    finally:
        writer.close()
        await writer.wait_closed()


async def refused(port: int, context: ssl.SSLContext, host: str) -> None:
    with pytest.raises((ssl.SSLError, ConnectionError)):
        await served(port, context, host)


def same(seen: x509.Certificate, pair: Pair) -> bool:
    return seen.serial_number == pair.cert.serial_number and seen.subject == pair.cert.subject


@pytest.fixture
async def running(
    tmp_path: Path, authority: CertificateAuthority, request: pytest.FixtureRequest
) -> AsyncIterator[tuple[WebhookServer, Pair, Path]]:
    """A server started with a pair of the parametrized key type (``first``)."""
    first: KeyType = request.param
    pair = issue(authority, first, f"first-{first}")
    cert_dir = tmp_path / "certs"
    install(pair, cert_dir)
    server = WebhookServer(
        handlers=[InferenceServiceValidator()],
        port=0,
        host="127.0.0.1",
        cert_dir=cert_dir,
        cert_poll_interval=3600,  # the tests reload by hand
    )
    await server.start()
    try:
        yield server, pair, cert_dir
    finally:
        await server.stop()


@pytest.mark.parametrize("running", ["rsa", "ecdsa"], indirect=True)
@pytest.mark.parametrize("host", HOSTS)
async def test_rotation_to_another_key_type_drops_the_old_certificate(
    running: tuple[WebhookServer, Pair, Path], authority: CertificateAuthority, host: str
) -> None:
    server, old, cert_dir = running
    old_type: KeyType = "rsa" if isinstance(old.cert.public_key(), rsa.RSAPublicKey) else "ecdsa"
    new_type = OTHER[old_type]
    # Before: a client restricted to the old key type gets the old certificate.
    assert same(await served(server.port, only(authority, old_type), host), old)
    await refused(server.port, only(authority, new_type), host)

    new = issue(authority, new_type, f"second-{new_type}")
    install(new, cert_dir)
    assert server.reload_certificate() is True

    # After: the old certificate is gone for every client; the new one is served.
    await refused(server.port, only(authority, old_type), host)
    assert same(await served(server.port, only(authority, new_type), host), new)
    assert same(await served(server.port, client_context(authority), host), new)


@pytest.mark.parametrize("running", ["rsa"], indirect=True)
async def test_rotating_back_and_forth_serves_only_the_latest(
    running: tuple[WebhookServer, Pair, Path], authority: CertificateAuthority
) -> None:
    server, _, cert_dir = running
    steps: list[KeyType] = ["ecdsa", "rsa", "ecdsa", "ecdsa", "rsa"]
    for step, key_type in enumerate(steps):
        pair = issue(authority, key_type, f"step-{step}")
        install(pair, cert_dir)
        assert server.reload_certificate() is True
        for host in HOSTS:
            assert same(await served(server.port, client_context(authority), host), pair)
            await refused(server.port, only(authority, OTHER[key_type]), host)
    assert server.certificate.loads == 6


@pytest.mark.parametrize("running", ["rsa"], indirect=True)
async def test_rotated_server_keeps_its_tls_settings_and_answers(
    running: tuple[WebhookServer, Pair, Path], authority: CertificateAuthority
) -> None:
    server, _, cert_dir = running
    new = issue(authority, "ecdsa", "second")
    install(new, cert_dir)
    assert server.reload_certificate() is True

    # ALPN still offers http/1.1 only.
    alpn = client_context(authority)
    alpn.set_alpn_protocols(["h2", "http/1.1"])
    _, writer = await asyncio.open_connection("127.0.0.1", server.port, ssl=alpn)
    assert writer.get_extra_info("ssl_object").selected_alpn_protocol() == "http/1.1"
    writer.close()
    await writer.wait_closed()
    # TLS 1.2 is still the minimum.
    old_tls = client_context(authority)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        old_tls.minimum_version = ssl.TLSVersion.TLSv1
        old_tls.maximum_version = ssl.TLSVersion.TLSv1_1
    await refused(server.port, old_tls, "127.0.0.1")
    # And reviews are answered over the new certificate.
    body = orjson.dumps(
        {
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": {"uid": "after-rotation", "operation": "CREATE", "object": ISVC},
        }
    )
    async with (
        aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(ssl=client_context(authority))
        ) as session,
        session.post(
            f"https://127.0.0.1:{server.port}/validate-ome-io-v1beta1-inferenceservice",
            data=body,
            headers={"Content-Type": "application/json"},
        ) as response,
    ):
        assert response.status == 200
        answer = orjson.loads(await response.read())
    assert answer["response"] == {"uid": "after-rotation", "allowed": True}


@pytest.mark.parametrize("running", ["rsa"], indirect=True)
async def test_a_bad_rotation_keeps_serving_the_previous_pair(
    running: tuple[WebhookServer, Pair, Path],
    authority: CertificateAuthority,
    caplog: pytest.LogCaptureFixture,
) -> None:
    server, old, cert_dir = running
    new = issue(authority, "ecdsa", "second")
    (cert_dir / "tls.crt").write_bytes(new.cert_pem)  # the RSA key is still the old one
    with caplog.at_level(logging.ERROR, logger="webhooks.certwatcher"):
        assert server.reload_certificate() is False
    assert [r.getMessage() for r in caplog.records] == [
        "Failed to reload the webhook certificate; keeping the current one"
    ]
    for host in HOSTS:
        assert same(await served(server.port, client_context(authority), host), old)
        assert same(await served(server.port, only(authority, "rsa"), host), old)
    (cert_dir / "tls.key").write_bytes(b"not a key")
    assert server.reload_certificate() is False
    assert same(await served(server.port, client_context(authority), "127.0.0.1"), old)

    install(new, cert_dir)  # the pair completes: served from now on
    assert server.reload_certificate() is True
    assert same(await served(server.port, client_context(authority), "127.0.0.1"), new)
    await refused(server.port, only(authority, "rsa"), "127.0.0.1")


@pytest.mark.parametrize("running", ["ecdsa"], indirect=True)
async def test_ecdsa_p256_is_served_to_a_client_that_accepts_only_ecdsa(
    running: tuple[WebhookServer, Pair, Path], authority: CertificateAuthority
) -> None:
    """The chart's certificates are ECDSA P-256: nothing in the server needs RSA."""
    server, pair, _ = running
    seen = await served(server.port, only(authority, "ecdsa"), "127.0.0.1")
    assert same(seen, pair)
    public_key = seen.public_key()
    assert isinstance(public_key, ec.EllipticCurvePublicKey)
    assert public_key.curve.name == "secp256r1"
    tls13 = client_context(authority)
    tls13.minimum_version = ssl.TLSVersion.TLSv1_3
    assert same(await served(server.port, tls13, "localhost"), pair)
