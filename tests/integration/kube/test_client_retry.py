"""The client sends a request again when the real API server answers 429 with Retry-After.

API Priority and Fairness makes the 429s: a FlowSchema puts one user's requests in a
priority level of the smallest share that rejects rather than queues, and that user lists
a namespace of 600 ConfigMaps fifty (then eight) times at once. client-go waits and
retries such answers (up to ten times); so does omed's client, and a caller sees the list,
not the 429.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator
from urllib.parse import urlsplit

import pytest

from omed.kube.client import KubeClient, Resource, load_config
from omed.kube.errors import NotFound, TooManyRequests
from omed.kube.resources import CONFIGMAPS
from omed.metrics import REGISTRY

pytestmark = pytest.mark.integration

PRIORITY_LEVELS = Resource(
    "flowcontrol.apiserver.k8s.io",
    "v1",
    "prioritylevelconfigurations",
    "PriorityLevelConfiguration",
    namespaced=False,
)
FLOW_SCHEMAS = Resource(
    "flowcontrol.apiserver.k8s.io", "v1", "flowschemas", "FlowSchema", namespaced=False
)
CLUSTER_ROLES = Resource(
    "rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", namespaced=False
)
CLUSTER_ROLE_BINDINGS = Resource(
    "rbac.authorization.k8s.io", "v1", "clusterrolebindings", "ClusterRoleBinding", namespaced=False
)
CONCURRENT = 50
RETRIED_AT_ONCE = 8


@pytest.fixture
async def squeezed_user(kube: KubeClient, namespace: str) -> AsyncIterator[str]:
    """A user whose requests go to a priority level that rejects what it can't run now,
    allowed to list ConfigMaps (not through system:masters, which APF exempts)."""
    user = f"squeezed-{uuid.uuid4().hex[:8]}"
    await kube.create(
        PRIORITY_LEVELS,
        {
            "metadata": {"name": user},
            "spec": {
                "type": "Limited",
                "limited": {
                    "nominalConcurrencyShares": 1,
                    "lendablePercent": 0,
                    "limitResponse": {"type": "Reject"},
                },
            },
        },
    )
    await kube.create(
        FLOW_SCHEMAS,
        {
            "metadata": {"name": user},
            "spec": {
                "priorityLevelConfiguration": {"name": user},
                "matchingPrecedence": 100,
                "rules": [
                    {
                        "subjects": [{"kind": "User", "user": {"name": user}}],
                        "resourceRules": [
                            {
                                "verbs": ["*"],
                                "apiGroups": ["*"],
                                "resources": ["*"],
                                "namespaces": ["*"],
                                "clusterScope": True,
                            }
                        ],
                    }
                ],
            },
        },
    )
    await kube.create(
        CLUSTER_ROLES,
        {
            "metadata": {"name": user},
            "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["list"]}],
        },
    )
    await kube.create(
        CLUSTER_ROLE_BINDINGS,
        {
            "metadata": {"name": user},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": user,
            },
            "subjects": [{"kind": "User", "name": user, "apiGroup": "rbac.authorization.k8s.io"}],
        },
    )
    await asyncio.gather(
        *(
            kube.create(
                CONFIGMAPS, {"metadata": {"name": f"cm-{i}"}, "data": {"k": "v" * 200}}, namespace
            )
            for i in range(600)
        )
    )
    try:
        yield user
    finally:
        for resource in (CLUSTER_ROLE_BINDINGS, CLUSTER_ROLES, FLOW_SCHEMAS, PRIORITY_LEVELS):
            with contextlib.suppress(NotFound):
                await kube.delete(resource, user)


def _count_429(client: KubeClient) -> float:
    labels = {"code": "429", "method": "GET", "host": urlsplit(client.config.host).netloc}
    return REGISTRY.get_sample_value("rest_client_requests_total", labels) or 0.0


def _ours(listed: object) -> list[object]:
    """The test's ConfigMaps of a list answer."""
    assert isinstance(listed, dict)
    return [i for i in listed["items"] if i["metadata"]["name"].startswith("cm-")]


async def _list_at_once(client: KubeClient, namespace: str, count: int) -> list[object]:
    results: list[object] = await asyncio.gather(
        *(client.list_page(CONFIGMAPS, namespace) for _ in range(count)),
        return_exceptions=True,
    )
    return results


async def test_429_with_retry_after_is_retried(
    kubeconfig: str, namespace: str, squeezed_user: str
) -> None:
    config = (await load_config(kubeconfig)).impersonating(squeezed_user)
    # Without retries, the squeeze shows: some lists fail with 429 (the API server's
    # priority-and-fairness configuration takes a moment to apply, hence the loop).
    async with KubeClient(config, qps=1000, burst=1000, max_retries=0) as bare:
        for _ in range(40):
            results = await _list_at_once(bare, namespace, CONCURRENT)
            refused = [r for r in results if isinstance(r, TooManyRequests)]
            if refused:
                break
            await asyncio.sleep(0.5)
        assert refused, "the priority level never rejected a request"
        assert all(isinstance(r, dict | TooManyRequests) for r in results), results
        assert all(r.retry_after >= 0 for r in refused)

    # With retries every list succeeds. Few enough at once that ten retries cover them even if
    # the level runs one list at a time (a loaded CI machine: 3 of 25 at once ran out);
    # repeated until some first tries were answered 429, so that the retry is what is tested.
    async with KubeClient(config, qps=1000, burst=1000) as client:
        retried = 0.0
        for _ in range(20):
            before = _count_429(client)
            results = await _list_at_once(client, namespace, RETRIED_AT_ONCE)
            retried = _count_429(client) - before
            failures = [r for r in results if not isinstance(r, dict)]
            assert not failures, failures[:3]
            # The 600 and the namespace's kube-root-ca.crt (published by the controller manager).
            assert all(len(_ours(r)) == 600 for r in results), [len(_ours(r)) for r in results]
            if retried:
                break
    assert retried > 0, "no request was answered 429: the retry went untested"
