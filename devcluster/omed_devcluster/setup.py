"""Installing omed's CRDs and registering its webhooks in a local cluster."""

from __future__ import annotations

import asyncio
import base64
from pathlib import Path
from typing import Any, Final

import yaml

from omed.kube.client import KubeClient, retry_on_conflict
from omed.kube.errors import AlreadyExists
from omed.kube.resources import CRDS, MUTATING_WEBHOOKS, VALIDATING_WEBHOOKS


async def apply(
    client: KubeClient, resource: Any, body: dict[str, Any], namespace: str | None = None
) -> Any:
    """Create, or replace with the current resourceVersion when it exists.

    The replace reads and writes again on a Conflict: a controller of the real control plane
    (the Deployment controller writing a Deployment's status, say) may change the object
    between the read and the write.
    """
    try:
        return await client.create(resource, body, namespace)
    except AlreadyExists:
        pass

    async def replace() -> Any:
        current = await client.get(resource, body["metadata"]["name"], namespace)
        version = current["metadata"]["resourceVersion"]
        metadata = dict(body["metadata"], resourceVersion=version)
        return await client.replace(resource, dict(body, metadata=metadata), namespace)

    return await retry_on_conflict(replace)


def load_documents(directory: Path, kind: str) -> list[dict[str, Any]]:
    """Every YAML document of one kind in a directory's ``*.yaml`` files, in name order."""
    docs = []
    for path in sorted(directory.glob("*.yaml")):
        docs += [d for d in yaml.safe_load_all(path.read_text()) if d and d.get("kind") == kind]
    return docs


async def install_crds(client: KubeClient, directory: Path, *, timeout: float = 60.0) -> None:
    names = []
    for doc in load_documents(directory, "CustomResourceDefinition"):
        await apply(client, CRDS, doc)
        names.append(doc["metadata"]["name"])
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    for name in names:
        while True:
            crd = await client.get(CRDS, name)
            conditions = {
                c["type"]: c["status"] for c in (crd.get("status") or {}).get("conditions") or []
            }
            if conditions.get("Established") == "True":
                break
            if loop.time() > deadline:
                raise TimeoutError(f"CRD {name} not Established: {conditions}")
            await asyncio.sleep(0.1)


WEBHOOK_CONFIGURATION: Final = "ome-webhook-configuration"
"""Names as the ome-resources chart and docs/webhooks.md give them."""
_VALIDATING = (
    (
        "inferenceservice.ome-webhook-server.validator",
        "/validate-ome-io-v1beta1-inferenceservice",
        "inferenceservices",
    ),
    (
        "inferencereplica.ome-webhook-server.validator",
        "/validate-ome-io-v1beta1-inferencereplica",
        "inferencereplicas",
    ),
)
_MUTATING = (
    (
        "inferenceservice.ome-webhook-server.defaulter",
        "/mutate-ome-io-v1beta1-inferenceservice",
        "inferenceservices",
    ),
)


def _webhook(name: str, path: str, plural: str, *, base_url: str, ca_pem: bytes) -> dict[str, Any]:
    return {
        "name": name,
        "clientConfig": {"url": base_url + path, "caBundle": base64.b64encode(ca_pem).decode()},
        "rules": [
            {
                "apiGroups": ["ome.io"],
                "apiVersions": ["v1beta1"],
                "operations": ["CREATE", "UPDATE"],
                "resources": [plural],
            }
        ],
        "failurePolicy": "Fail",
        "sideEffects": "None",
        "admissionReviewVersions": ["v1"],
        "timeoutSeconds": 10,
    }


async def register_webhooks(client: KubeClient, *, base_url: str, ca_pem: bytes) -> None:
    """Point the API server at a webhook server reachable at ``base_url`` (the chart does the
    same through a Service; a local control plane calls the URL directly)."""
    validating = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": WEBHOOK_CONFIGURATION},
        "webhooks": [
            _webhook(n, p, r, base_url=base_url, ca_pem=ca_pem) for n, p, r in _VALIDATING
        ],
    }
    mutating = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": WEBHOOK_CONFIGURATION},
        "webhooks": [_webhook(n, p, r, base_url=base_url, ca_pem=ca_pem) for n, p, r in _MUTATING],
    }
    await apply(client, VALIDATING_WEBHOOKS, validating)
    await apply(client, MUTATING_WEBHOOKS, mutating)
