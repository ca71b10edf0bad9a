"""Waiting tokens end to end: real API server (ResourceQuota admission on), node simulator,
in-process controller. Each hold shows in the row's operation.waiting and lastFailure, and
is cleared when its cause goes."""

from __future__ import annotations

import asyncio
import contextlib
import copy
import socket
from collections.abc import AsyncIterator
from typing import Any

import pytest
from test_inferencereplica import eventually, irep_body
from test_inferencereplica_updates import World, world

from omed.controllers.inferencereplica.core import names
from omed.kube.client import KubeClient, Resource
from omed.kube.errors import ApiError, NotFound
from omed.kube.resources import PODS, VALIDATING_WEBHOOKS

pytestmark = pytest.mark.integration

__all__ = ["world"]

NAME = "chat-engine"
POD0 = f"{NAME}-0-default-0"
RESOURCE_QUOTAS = Resource("", "v1", "resourcequotas", "ResourceQuota")


async def row0(world: World) -> dict[str, Any]:
    rows = (await world.status()).get("instanceStatuses") or []
    return next((r for r in rows if r.get("index") == 0), {})


async def held_on(world: World, token: str) -> bool:
    row = await row0(world)
    op = row.get("operation") or {}
    failure = row.get("lastFailure") or {}
    return op.get("waiting") == token and failure.get("reason") == token


async def not_held(world: World) -> bool:
    row = await row0(world)
    return bool(row) and not (row.get("operation") or {}).get("waiting")


async def test_an_unschedulable_pod_holds_its_create_until_a_node_fits(world: World) -> None:
    irep = copy.deepcopy(irep_body(NAME, replicas=1))  # TEMPLATE is shared: don't change it
    container = irep["spec"]["runners"][0]["template"]["spec"]["containers"][0]
    container["resources"] = {"limits": {"nvidia.com/gpu": "16"}}
    await world.controller()
    await world.create(irep)
    await eventually(
        lambda: held_on(world, names.WAITING_UNSCHEDULABLE), what="the Create held Unschedulable"
    )
    row = await row0(world)
    assert row["operation"]["type"] == "Create" and row["lastFailure"]["pod"] == POD0
    await world.sim.add_node(gpus=16)
    await eventually(lambda: world.converged(NAME, 1), timeout=60, what="1 Ready Instance")
    await eventually(lambda: not_held(world), timeout=10, what="the hold cleared")


async def test_a_pod_on_a_lost_node_holds_its_create_on_node_unknown(world: World) -> None:
    never = world.sim.inject(world.namespace, {"app": "chat"}, "NeverReady")
    await world.controller()
    await world.create(irep_body(NAME, replicas=1))

    async def bound() -> str | None:
        pods = await world.live()
        return pods[0]["spec"].get("nodeName") if pods else None

    await eventually(lambda: _truthy(bound()), what="the pod bound")
    node = await bound()
    assert node is not None
    await world.sim.set_node_ready(node, False)
    await eventually(
        lambda: held_on(world, names.WAITING_NODE_UNKNOWN), what="the Create held NodeUnknown"
    )
    await world.sim.set_node_ready(node, True)
    await eventually(lambda: not_held(world), what="the hold cleared")
    world.sim.clear_injection(never)
    await eventually(lambda: world.converged(NAME, 1), timeout=60, what="1 Ready Instance")


async def _truthy(value: Any) -> bool:
    return bool(await value)


async def test_a_create_refused_by_quota_holds_on_quota_exceeded(world: World) -> None:
    quota = {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": "no-pods"},
        "spec": {"hard": {"pods": "0"}},
    }
    created = await world.kube.create(RESOURCE_QUOTAS, quota, world.namespace)
    # no kube-controller-manager here: the test writes the usage the quota controller would
    created["status"] = {"hard": {"pods": "0"}, "used": {"pods": "0"}}
    await world.kube.replace_status(RESOURCE_QUOTAS, created, world.namespace)
    await world.controller()
    await world.create(irep_body(NAME, replicas=1))
    await eventually(lambda: held_on(world, names.WAITING_QUOTA), what="the Create held")
    row = await row0(world)
    assert row["operation"]["step"] == names.STEP_CREATE_PODS
    assert row["lastFailure"]["pod"] == POD0 and row["podCount"] == 0
    assert not world.watch.uids  # no pod was ever created
    with contextlib.suppress(NotFound):
        await world.kube.delete(RESOURCE_QUOTAS, "no-pods", world.namespace)
    await eventually(lambda: world.converged(NAME, 1), timeout=60, what="1 Ready Instance")
    await eventually(lambda: not_held(world), timeout=10, what="the hold cleared")


def closed_port() -> int:
    """A local port nothing listens on (bound, then released)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


@contextlib.asynccontextmanager
async def unreachable_pod_webhook(kube: KubeClient, namespace: str) -> AsyncIterator[str]:
    """A validating webhook for pod creates in ``namespace`` only, failurePolicy Fail, at a
    closed local port: every pod create there fails with "failed calling webhook". Removed
    on the way out, whatever happens."""
    name = f"omed-unreachable-{namespace}"
    body = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": name},
        "webhooks": [
            {
                "name": "pods.unreachable.omed.dev",
                "clientConfig": {"url": f"https://127.0.0.1:{closed_port()}/validate"},
                "rules": [
                    {
                        "apiGroups": [""],
                        "apiVersions": ["v1"],
                        "operations": ["CREATE"],
                        "resources": ["pods"],  # not pods/status nor pods/binding
                    }
                ],
                "failurePolicy": "Fail",
                "sideEffects": "None",
                "admissionReviewVersions": ["v1"],
                "timeoutSeconds": 2,
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
            }
        ],
    }
    await kube.create(VALIDATING_WEBHOOKS, body)
    try:
        yield name
    finally:
        with contextlib.suppress(NotFound):
            await kube.delete(VALIDATING_WEBHOOKS, name)


PROBE = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "admission-probe"},
    "spec": {"containers": [{"name": "c", "image": "ome/probe:1"}]},
}


async def pod_creates_fail_on_the_webhook(kube: KubeClient, namespace: str) -> bool:
    """A server-side dry run of a pod create fails calling the webhook (the API server picks
    up webhook configurations asynchronously)."""
    try:
        await kube.create(PODS, PROBE, namespace, dryRun="All")
    except ApiError as err:
        return "failed calling webhook" in str(err)
    return False


async def pod_creates_pass(kube: KubeClient, namespace: str) -> bool:
    try:
        await kube.create(PODS, PROBE, namespace, dryRun="All")
    except ApiError:
        return False
    return True


async def test_a_create_refused_by_an_unreachable_webhook_holds_on_admission_unavailable(
    world: World,
) -> None:
    async with unreachable_pod_webhook(world.kube, world.namespace):
        await eventually(
            lambda: pod_creates_fail_on_the_webhook(world.kube, world.namespace),
            what="the webhook in force",
        )
        await world.controller()
        await world.create(irep_body(NAME, replicas=1))
        await eventually(
            lambda: held_on(world, names.WAITING_ADMISSION),
            what="the Create held AdmissionUnavailable",
        )
        row = await row0(world)
        assert row["operation"]["type"] == "Create"
        assert row["operation"]["step"] == names.STEP_CREATE_PODS
        assert row["lastFailure"]["pod"] == POD0 and row["podCount"] == 0
        assert not world.watch.uids  # no pod was ever created
        await asyncio.sleep(2.0)  # still held a few passes later
        assert await held_on(world, names.WAITING_ADMISSION)
    await eventually(lambda: pod_creates_pass(world.kube, world.namespace), what="the webhook gone")
    await eventually(lambda: world.converged(NAME, 1), timeout=60, what="1 Ready Instance")
    await eventually(lambda: not_held(world), timeout=10, what="the hold cleared")
    row = await row0(world)
    assert row["lastFailure"]["reason"] == names.WAITING_ADMISSION  # kept
