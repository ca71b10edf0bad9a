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

from omed.clock import FakeClock
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
        self.bodies: dict[tuple[str, str], dict[str, Any]] = {}

    async def create(self, resource: Resource, body: Mapping[str, Any], namespace: Any) -> Any:
        name = body["metadata"]["name"]
        self.calls.append(("create", resource.plural, name))
        self.bodies[(resource.plural, name)] = {
            **body,
            "metadata": {**body["metadata"], "namespace": namespace, "uid": f"uid-{name}"},
        }
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


def service_store() -> IndexedStore:
    return IndexedStore(indexers={OWNER_UID: owner_uid_index, COMPONENT: component_index})


def reconciler(
    client: Client,
    config: dict[str, str],
    *,
    clock: FakeClock | None = None,
    services: IndexedStore | None = None,
    budgets: IndexedStore | None = None,
) -> ServingReconciler:
    replicas = IndexedStore()
    replicas.upsert(replica())

    async def data() -> Mapping[str, str]:
        return config

    return ServingReconciler(
        client=client,  # type: ignore[arg-type]
        replicas=replicas,
        pods=IndexedStore(indexers={OWNER_UID: owner_uid_index}),
        services=service_store() if services is None else services,
        budgets=IndexedStore() if budgets is None else budgets,
        config=data,
        clock=clock or FakeClock(),
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


def creates(client: Client) -> list[tuple[str, str]]:
    return [(c[1], c[2]) for c in client.calls if c[0] == "create"]


def never_shown(_name: tuple[str, str]) -> bool:
    return False


async def test_a_create_the_cache_does_not_show_yet_is_not_sent_again(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A second pass on a cache that lags the first pass's creates sends none of them again
    (each would meet AlreadyExists and be reported as taken), and looks again when the
    expectations would expire; once the cache shows the objects, they are compared."""
    client, clock = Client(), FakeClock()
    services, budgets = service_store(), IndexedStore()
    config = {"podDisruptionBudget": json.dumps({"omeNative": {"maxUnavailable": 1}})}
    pass_ = reconciler(client, config, clock=clock, services=services, budgets=budgets)
    assert await pass_.reconcile(KEY) == Result()
    first = creates(client)
    assert ("services", "chat-engine") in first
    assert ("poddisruptionbudgets", "chat-engine") in first
    clock.advance(1.0)
    with caplog.at_level(logging.WARNING, logger="omed.controllers.serving"):
        again = await pass_.reconcile(KEY)
    assert creates(client) == first
    assert again.requeue_after == pytest.approx(59.0)
    assert not [r for r in caplog.records if r.getMessage() == names.LogLine.NAME_TAKEN]

    for plural, name in first:
        (services if plural == "services" else budgets).upsert(client.bodies[(plural, name)])
    assert await pass_.reconcile(KEY) == Result()
    assert creates(client) == first
    assert pass_.expectations.outstanding(KEY, never_shown) == frozenset()


async def test_an_unobserved_create_expires_and_is_sent_again() -> None:
    """A lost watch event costs one expectation timeout, never a missing Service for good."""
    client, clock = Client(), FakeClock()
    pass_ = reconciler(client, {}, clock=clock)
    await pass_.reconcile(KEY)
    first = creates(client)
    clock.advance(61.0)
    assert await pass_.reconcile(KEY) == Result()
    assert creates(client) == first + first


async def test_a_failed_create_is_not_expected() -> None:
    """AlreadyExists means nothing will be observed: the name is reported and tried again on
    the next pass, while the creates that went through are expected."""
    client = Client()
    client.exists = {"chat-engine"}
    pass_ = reconciler(client, {})
    assert await pass_.reconcile(KEY) == Result(requeue=True)
    assert pass_.expectations.outstanding(KEY, never_shown) == {("Service", "chat-engine-headless")}
    await pass_.reconcile(KEY)
    assert creates(client).count(("services", "chat-engine")) == 2
    assert creates(client).count(("services", "chat-engine-headless")) == 1
