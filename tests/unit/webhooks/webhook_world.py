"""Shared builders of the webhook tests: a valid InferenceService and InferenceReplica,
requests around them, and serving certificates for 127.0.0.1."""

from __future__ import annotations

import asyncio
import ssl
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from omed.webhooks.review import AdmissionRequest
from omed_devcluster.certs import CertificateAuthority

REQUEST_UUID = "7c9e6679-7425-40de-944b-e07fc1f90ae7"
REQUEST_KEY = f"ome.io/migration-request-v1-{REQUEST_UUID}"

ISVC: dict[str, Any] = {
    "apiVersion": "ome.io/v1beta1",
    "kind": "InferenceService",
    "metadata": {"name": "chat", "namespace": "prod"},
    "spec": {
        "deploymentMode": "OMENative",
        "model": {"name": "llama-3-2-1b-instruct"},
        "runtime": {"name": "srt-llama-3-2-1b-instruct-pd"},
        "engine": {"minReplicas": 4, "maxReplicas": 4},
        "decoder": {
            "minReplicas": 1,
            "maxReplicas": 1,
            "lifecycle": {"migrationPolicy": {"mode": "Never"}},
        },
        "router": {"minReplicas": 1, "maxReplicas": 1},
    },
}

IREP: dict[str, Any] = {
    "apiVersion": "ome.io/v1beta1",
    "kind": "InferenceReplica",
    "metadata": {
        "name": "chat-engine",
        "namespace": "prod",
        "resourceVersion": "41",
        "generation": 3,
        "labels": {"ome.io/inferenceservice": "chat"},
        "annotations": {"ome.io/controller-write": "true"},
    },
    "spec": {
        "parentRef": {"name": "chat"},
        "component": "engine",
        "replicas": 2,
        "runners": [{"name": "default", "template": {"spec": {"containers": []}}}],
    },
}


Request = Callable[..., AdmissionRequest]


def write_pair(authority: CertificateAuthority, directory: Path) -> bytes:
    """Write tls.crt/tls.key for 127.0.0.1 and localhost into ``directory``; the cert PEM."""
    pair = authority.issue(
        common_name="omed-webhook",
        dns_names=["localhost"],
        ip_addresses=["127.0.0.1"],
        server=True,
    )
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "tls.crt").write_bytes(pair.cert_pem)
    (directory / "tls.key").write_bytes(pair.key_pem)
    return pair.cert_pem


class ThreadedServer:
    """A :class:`WebhookServer` on its own event loop in a thread, for synchronous clients
    (hypothesis drives plain functions)."""

    def __init__(self, server: Any) -> None:
        self.server = server
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)

    def __enter__(self) -> ThreadedServer:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self.server.start(), self._loop).result(timeout=30)
        return self

    def __exit__(self, *exc: object) -> None:
        asyncio.run_coroutine_threadsafe(self.server.stop(), self._loop).result(timeout=30)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=30)
        self._loop.close()


def client_context(authority: CertificateAuthority) -> ssl.SSLContext:
    """A client TLS context that trusts ``authority`` only."""
    context = ssl.create_default_context(cadata=authority.cert_pem.decode())
    return context
