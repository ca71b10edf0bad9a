"""Builders for the webhook unit tests: InferenceServices, InferenceReplicas, requests, and
serving certificates written to a temporary directory."""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from webhook_world import IREP, ISVC, Request, write_pair

from omed.webhooks.review import AdmissionRequest
from omed_devcluster.certs import CertificateAuthority


@pytest.fixture
def isvc() -> dict[str, Any]:
    """A valid InferenceService (``chat`` in ``prod``), fresh for each test."""
    return copy.deepcopy(ISVC)


@pytest.fixture
def irep() -> dict[str, Any]:
    """A valid InferenceReplica as the controller writes it."""
    return copy.deepcopy(IREP)


@pytest.fixture
def request_for() -> Request:
    def make(
        obj: dict[str, Any] | None,
        *,
        operation: str = "CREATE",
        old: dict[str, Any] | None = None,
        kind: str | None = None,
    ) -> AdmissionRequest:
        return AdmissionRequest(
            uid="uid-1",
            operation=operation,
            group="ome.io",
            version="v1beta1",
            kind=kind if kind is not None else (obj or old or {}).get("kind", ""),
            name=(obj or old or {}).get("metadata", {}).get("name", ""),
            namespace="prod",
            object=obj,
            old_object=old,
        )

    return make


@pytest.fixture(scope="session")
def authority() -> CertificateAuthority:
    return CertificateAuthority.create("omed-webhook-test-ca")


@pytest.fixture
def cert_dir(tmp_path: Path, authority: CertificateAuthority) -> Path:
    directory = tmp_path / "certs"
    write_pair(authority, directory)
    return directory


@pytest.fixture
def rotate(authority: CertificateAuthority) -> Callable[..., bytes]:
    """Write a new pair into a directory: ``rotate(directory, ca=None) -> cert PEM``."""

    def write(directory: Path, ca: CertificateAuthority | None = None) -> bytes:
        return write_pair(ca or authority, directory)

    return write
