"""The serving controller's shell: one pass from the caches and the config to the writes.

A recording client stands in for the API server; the stores are the informers' own type.
What the shell adds to the core is checked here: an unusable podDisruptionBudget entry is
logged once and leaves the Services reconciled; a name another object holds is logged once;
a refused write backs the key off.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import Any

import pytest

from omed.controllers.serving.core import names
from omed.controllers.serving.shell.controller import component_index
from omed.controllers.serving.shell.reconciler import COMPONENT, ServingReconciler
from omed.informers import OWNER_UID, IndexedStore, owner_uid_index
from omed.kube.client import Resource
from omed.kube.errors import AlreadyExists, Forbidden
from omed.workqueue import Result

KEY = "ns/chat-engine"


class Client:
    def __init__(self) -> None:
        self.calls: list[tuple[str, str, str]] = []
        self.refuse: type[Exception] | None = None
        self.exists: set[str] = set()

    async def create(self, resource: Resource, body: Mapping[str, Any], namespace: Any) -> Any:
        name = body["metadata"]["name"]
        self.calls.append(("create", resource.plural, name))
        if self.refuse is not None:
            raise self.refuse(403, "Forbidden", "no")  # type: ignore[call-arg]
        if name in self.exists:
            raise AlreadyExists(409, "AlreadyExists", "exists")
        return body

    async def patch(self, resource: Resource, name: str, patch: Any, namespace: Any) -> Any:
        self.calls.append(("patch", resource.plural, name))
        return {}

    async def delete(self, resource: Resource, name: str, namespace: Any, *, uid: str) -> Any:
        self.calls.append(("delete", resource.plural, name))
        return {}


def replica() -> dict[str, Any]:
    template = {"spec": {"containers": [{"name": "m", "ports": [{"containerPort": 8080}]}]}}
    return {
        "apiVersion": "ome.io/v1beta1",
        "kind": "InferenceReplica",
        "metadata": {"name": "chat-engine", "namespace": "ns", "uid": "u1"},
        "spec": {
            "parentRef": {"name": "chat"},
            "component": "engine",
            "replicas": 2,
            "runners": [{"name": "default", "template": template}],
        },
    }


def reconciler(client: Client, config: dict[str, str]) -> ServingReconciler:
    replicas = IndexedStore()
    replicas.upsert(replica())

    async def data() -> Mapping[str, str]:
        return config

    return ServingReconciler(
        client=client,  # type: ignore[arg-type]
        replicas=replicas,
        pods=IndexedStore(indexers={OWNER_UID: owner_uid_index}),
        services=IndexedStore(indexers={OWNER_UID: owner_uid_index, COMPONENT: component_index}),
        budgets=IndexedStore(),
        config=data,
    )


async def test_an_unusable_entry_is_logged_once_and_the_services_still_come(
    caplog: pytest.LogCaptureFixture,
) -> None:
    client = Client()
    config = {"podDisruptionBudget": json.dumps({"omeNative": {"minAvailable": -1}})}
    pass_ = reconciler(client, config)
    with caplog.at_level(logging.ERROR, logger="omed.controllers.serving"):
        assert await pass_.reconcile(KEY) == Result()
        await pass_.reconcile(KEY)
    lines = [r for r in caplog.records if r.getMessage() == names.LogLine.PDB_ENTRY_INVALID]
    assert len(lines) == 1
    assert "minAvailable -1 must be at least 0" in lines[0].kv["error"]  # type: ignore[attr-defined]
    assert {c[2] for c in client.calls if c[1] == "services"} == {
        "chat-engine",
        "chat-engine-headless",
    }
    assert not [c for c in client.calls if c[1] == "poddisruptionbudgets"]


async def test_a_configured_entry_creates_the_budget() -> None:
    client = Client()
    config = {"podDisruptionBudget": json.dumps({"omeNative": {"maxUnavailable": 1}})}
    await reconciler(client, config).reconcile(KEY)
    assert ("create", "poddisruptionbudgets", "chat-engine") in client.calls


async def test_a_taken_name_is_logged_once_and_backs_off(caplog: pytest.LogCaptureFixture) -> None:
    client = Client()
    client.exists = {"chat-engine"}
    pass_ = reconciler(client, {})
    with caplog.at_level(logging.WARNING, logger="omed.controllers.serving"):
        assert await pass_.reconcile(KEY) == Result(requeue=True)
        assert await pass_.reconcile(KEY) == Result(requeue=True)
    taken = [r for r in caplog.records if r.getMessage() == names.LogLine.NAME_TAKEN]
    assert len(taken) == 1


async def test_a_refused_write_is_reported_and_backs_off(caplog: pytest.LogCaptureFixture) -> None:
    client = Client()
    client.refuse = Forbidden
    with caplog.at_level(logging.WARNING, logger="omed.controllers"):
        assert await reconciler(client, {}).reconcile(KEY) == Result(requeue=True)
    assert any("Write refused" in r.getMessage() for r in caplog.records)


async def test_a_gone_replica_writes_nothing() -> None:
    client = Client()
    assert await reconciler(client, {}).reconcile("ns/other") == Result()
    assert client.calls == []
