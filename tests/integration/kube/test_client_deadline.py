"""One deadline for all the tries of a request, against the real API server's 429s.

API Priority and Fairness answers them. A FlowSchema sends one user's requests to a
priority level with no seats of its own and none to borrow (``nominalConcurrencyShares: 0``,
the "jail" the API documents) that rejects rather than queues. Such a level still runs one
request when it runs none, so one is kept running: a LIST by that user of some 7 MB of
ConfigMaps, sent through a socket with a 4 KiB receive buffer and never read, blocks the
API server's write, and the request holds the level until its connection closes. Every
other request of that user is then answered ``429`` with a ``Retry-After``, which APF
raises while the level keeps dropping requests, doubling it up to 32 s, above the 30 s the
client waits at most (the informers' cap). A request is retried until its next wait would
end past its deadline and then fails there, naming the deadline and the last answer.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import os
import re
import socket
import time
import uuid
from collections.abc import AsyncIterator
from urllib.parse import urlsplit

import aiohttp
import pytest

from omed.kube.client import ClusterConfig, KubeClient, Resource, load_config
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
BIG_CONFIGMAPS = 8
"""Of some 930 kB each (random, so that a gzip answer is as big): more than the API
server's socket send buffer (4 MiB at most here) and the holder's receive buffer."""


@pytest.fixture
async def jailed_user(kube: KubeClient, namespace: str) -> AsyncIterator[str]:
    """A user whose requests go to a priority level of no seats that rejects, allowed to
    list ConfigMaps, and ConfigMaps in ``namespace`` to fill a LIST that is never read."""
    user = f"jailed-{uuid.uuid4().hex[:8]}"
    await kube.create(
        PRIORITY_LEVELS,
        {
            "metadata": {"name": user},
            "spec": {
                "type": "Limited",
                "limited": {
                    "nominalConcurrencyShares": 0,
                    "lendablePercent": 0,
                    "borrowingLimitPercent": 0,
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
    for i in range(BIG_CONFIGMAPS):
        noise = base64.b64encode(os.urandom(700_000)).decode()
        await kube.create(
            CONFIGMAPS, {"metadata": {"name": f"big-{i}"}, "data": {"k": noise}}, namespace
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


class SmallWindowClient(KubeClient):
    """A client whose connections receive through a 4 KiB socket buffer, so that an answer
    it doesn't read stalls the API server's write within a few megabytes."""

    def _http(self) -> aiohttp.ClientSession:
        if self._session is None:

            def small_window(
                address: tuple[int, int, int, str, tuple[object, ...]],
            ) -> socket.socket:
                family, kind, proto, _, _ = address
                sock = socket.socket(family, kind, proto)
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
                return sock

            connector = aiohttp.TCPConnector(
                ssl=self.config.ssl_context,
                socket_factory=small_window,
            )
            self._session = aiohttp.ClientSession(connector=connector)
        return self._session


@contextlib.asynccontextmanager
async def jail_held(config: ClusterConfig, namespace: str) -> AsyncIterator[None]:
    """While the jailed user's never-read LIST holds the level's only request, so that
    every other request of that user is answered 429. The API server applies a new
    FlowSchema a moment after it is created, hence the tries (two a second at most, slow
    enough that APF's Retry-After stays at its first second)."""
    async with (
        KubeClient(config, qps=1000, burst=1000, max_retries=0) as bare,
        SmallWindowClient(config, qps=1000, burst=1000) as holder,
    ):
        for _ in range(60):
            async with holder.stream(CONFIGMAPS.path(namespace)):
                try:
                    await bare.request("GET", CONFIGMAPS.path(namespace), params={"limit": 1})
                except TooManyRequests:
                    held = True
                else:
                    held = False
                if held:
                    yield
                    return
            await asyncio.sleep(0.5)
    raise AssertionError("the priority level never rejected a request")


async def test_a_request_refused_until_its_deadline_fails_there(
    kubeconfig: str, namespace: str, jailed_user: str
) -> None:
    config = (await load_config(kubeconfig)).impersonating(jailed_user)
    async with KubeClient(config, qps=1000, burst=1000) as client, jail_held(config, namespace):
        before = _count_429(client)
        started = time.monotonic()
        with pytest.raises(TooManyRequests) as caught:
            await client.request("GET", CONFIGMAPS.path(namespace), deadline=3.5)
        took = time.monotonic() - started
        answered = _count_429(client) - before

    message = str(caught.value)
    found = re.search(r": (\d+) tries in [\d.]+s; Retry-After: (\d+) waits (\d+)s", message)
    assert found, message
    tries, header, wait = (int(g) for g in found.groups())
    assert "past the request's 3.5s deadline" in message, message
    assert message.startswith("429 TooManyRequests"), message
    # Retried while its waits fit (APF asks for 1 s here, 2 s if it counted three drops
    # in a second), then failed without waiting out the last one: before the deadline.
    assert header == wait <= 2, message
    assert tries == answered >= 2, (message, answered)
    assert (tries - 1) * wait <= took < 3.5, (message, took)


@pytest.mark.slow
async def test_apf_asks_for_more_than_the_cap_and_the_client_waits_only_the_cap(
    kubeconfig: str, namespace: str, jailed_user: str
) -> None:
    """Kept dropping requests, the level's Retry-After doubles up to APF's maximum, 32 s
    (k8s.io/apiserver's dropped-requests tracker), about half a minute in. The client waits
    30 s at most: a probe whose deadline is shorter than that fails at its first answer."""
    config = (await load_config(kubeconfig)).impersonating(jailed_user)
    async with (
        KubeClient(config, qps=1000, burst=1000, max_retries=0) as flood,
        KubeClient(config, qps=1000, burst=1000) as probe,
        jail_held(config, namespace),
    ):

        async def keep_dropping() -> None:
            while True:
                with contextlib.suppress(TooManyRequests):
                    await flood.list_page(CONFIGMAPS, namespace)
                await asyncio.sleep(0.05)

        flooding = asyncio.ensure_future(keep_dropping())
        try:
            header = 0
            for _ in range(90):
                started = time.monotonic()
                with pytest.raises(TooManyRequests) as caught:
                    await probe.request("GET", CONFIGMAPS.path(namespace), deadline=1.0)
                took = time.monotonic() - started
                message = str(caught.value)
                found = re.search(r"Retry-After: (\d+) waits (\d+)s", message)
                assert found, message
                header, wait = (int(g) for g in found.groups())
                if header > 30:
                    break
                await asyncio.sleep(max(0.0, 1.0 - took))
        finally:
            flooding.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await flooding
    assert header == 32, message
    assert wait == 30, message
    assert ": 1 try in" in message, message
    assert took < 5.0, (message, took)  # failed at its first answer, without waiting
    assert caught.value.retry_after == 30.0
