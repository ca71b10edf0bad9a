"""The controllers' client fenced by the Lease: a refused write is never handed to aiohttp.

Pure: the client's HTTP session is a double that records each request it is asked to send
and answers ``{}``, so what reaches the wire is exactly what it recorded. The fence is a
flag the test opens and shuts; time is a FakeClock, which the client's rate limiter waits
on, so a request can be held in the limiter while the fence shuts behind it. (The same
client against the real API server, with a stalled leader: tests/e2e/test_manager_process.py.)
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest

from omed.clock import FakeClock
from omed.kube.client import ClusterConfig, KubeClient
from omed.kube.resources import INFERENCE_REPLICAS, PODS
from omed.leaderelection import WriteFenced
from omed.manager.fencing import FencedKubeClient

POD = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ns"}}
CLUSTER = ClusterConfig(host="https://api.invalid", ssl_context=False)


class Fence:
    def __init__(self) -> None:
        self.open = True
        self.checks = 0

    def __call__(self) -> None:
        self.checks += 1
        if not self.open:
            raise WriteFenced("write refused: fenced")


class Answer:
    status = 200
    headers: dict[str, str] = {}

    async def read(self) -> bytes:
        return b'{"items": [], "metadata": {}}'


class Session:
    """What the client hands to aiohttp: ``METHOD path`` of every request."""

    def __init__(self) -> None:
        self.sent: list[str] = []

    @asynccontextmanager
    async def request(self, method: str, url: str, **_: Any) -> AsyncIterator[Answer]:
        self.sent.append(f"{method} {url.removeprefix(CLUSTER.host).partition('?')[0]}")
        yield Answer()


def fenced(fence: Fence, **options: Any) -> tuple[FencedKubeClient, Session]:
    client = FencedKubeClient(CLUSTER, fence=fence, **options)
    session = Session()
    client._http = lambda: session  # type: ignore[assignment,method-assign,return-value]
    return client, session


async def every_verb(client: KubeClient) -> list[str]:
    """Send one request of each kind the controllers send; the ones the fence refused."""
    sends = {
        "create": client.create(PODS, POD, "ns"),
        "replace": client.replace(PODS, POD, "ns"),
        "replace_status": client.replace_status(INFERENCE_REPLICAS, POD, "ns"),
        "patch": client.patch(PODS, "p", {"metadata": {"labels": {"a": "b"}}}, "ns"),
        "delete": client.delete(PODS, "p", "ns", uid="u"),
        "get": client.get(PODS, "p", "ns"),
        "list": client.list_all(PODS, "ns"),
    }
    refused = []
    for verb, send in sends.items():
        try:
            await send
        except WriteFenced:
            refused.append(verb)
    return refused


async def test_writes_pass_an_open_fence_and_a_shut_one_stops_them_unsent() -> None:
    fence = Fence()
    client, session = fenced(fence, qps=0)
    assert await every_verb(client) == []
    assert len(session.sent) == 7
    assert fence.checks == 5  # the five writes; reads are never fenced
    session.sent.clear()
    fence.open = False
    assert await every_verb(client) == ["create", "replace", "replace_status", "patch", "delete"]
    assert session.sent == ["GET /api/v1/namespaces/ns/pods/p", "GET /api/v1/namespaces/ns/pods"]


async def test_the_fence_is_checked_after_the_rate_limiters_wait() -> None:
    """A write that waited in the limiter across the moment the fence shut is refused: the
    check is made when the request is about to leave, not when it was asked for (which is
    where a check in the executors would have been)."""
    clock, fence = FakeClock(), Fence()
    client, session = fenced(fence, qps=1, burst=1, clock=clock)
    await client.create(PODS, POD, "ns")  # takes the one token
    waiting = asyncio.ensure_future(client.create(PODS, POD, "ns"))
    for _ in range(20):
        await asyncio.sleep(0)
    assert not waiting.done()  # in the limiter, for a second of the fake clock
    assert fence.checks == 1
    fence.open = False  # meanwhile the Lease got too old (the loop stalled, say)
    clock.advance(1.0)
    with pytest.raises(WriteFenced):
        await waiting
    assert session.sent == ["POST /api/v1/namespaces/ns/pods"]


def test_without_leader_election_the_client_is_not_fenced() -> None:
    """process.py builds the plain client when there is no Lease to fence with."""
    from omed.config import Options
    from omed.manager.process import _client

    options = Options()
    plain = _client(options, CLUSTER, clock=FakeClock(), user_agent="omed")
    with_fence = _client(options, CLUSTER, clock=FakeClock(), user_agent="omed", fence=Fence())
    assert type(plain) is KubeClient
    assert isinstance(with_fence, FencedKubeClient)
