"""Installing omed's CRDs (and later its webhooks) into a cluster, waiting until they serve."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import yaml

from omed.kube.client import KubeClient
from omed.kube.errors import AlreadyExists
from omed.kube.resources import CRDS


async def apply(
    client: KubeClient, resource: Any, body: dict[str, Any], namespace: str | None = None
) -> Any:
    """Create, or replace with the current resourceVersion when it exists."""
    try:
        return await client.create(resource, body, namespace)
    except AlreadyExists:
        current = await client.get(resource, body["metadata"]["name"], namespace)
        body = dict(
            body,
            metadata=dict(body["metadata"], resourceVersion=current["metadata"]["resourceVersion"]),
        )
        return await client.replace(resource, body, namespace)


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
