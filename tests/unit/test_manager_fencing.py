"""The controllers' client fenced by the Lease: a refused write is never handed to aiohttp.

Mostly pure: the client's HTTP session is a double that records each request it is asked to
send and answers ``{}``, so what reaches the wire is exactly what it recorded. The fence is
a flag the test opens and shuts; time is a FakeClock, which the client's rate limiter waits
on, so a request can be held in the limiter while the fence shuts behind it. The last check,
inside aiohttp's own write, needs aiohttp itself: those tests send through a real session to
a local socket that records every byte it receives. (The same client against the real API
server, with a stalled leader: tests/e2e/test_manager_process.py.)
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


class Socket:
    """A local TCP listener that records every byte it receives and answers each request
    ``201 {}``; enough HTTP to let a real aiohttp session finish a request."""

    def __init__(self) -> None:
        self.received = bytearray()
        self.closed = asyncio.Event()
        self._server: asyncio.Server | None = None

    async def __aenter__(self) -> str:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        port = self._server.sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}"

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            try:
                head = await reader.readuntil(b"\r\n\r\n")
            except asyncio.IncompleteReadError as partial:
                self.received += partial.partial
                break
            length = int(head.lower().partition(b"content-length:")[2].split(b"\r\n")[0] or 0)
            self.received += head + await reader.readexactly(length)
            writer.write(b"HTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\n{}")
            await writer.drain()
        writer.close()
        self.closed.set()


class ShutsAfter(Fence):
    """Open for the first ``passes`` checks, shut from then on: a loop that stalled past the
    fence between one check of a write and the next."""

    def __init__(self, passes: int) -> None:
        super().__init__()
        self.passes = passes

    def __call__(self) -> None:
        self.open = self.checks < self.passes
        super().__call__()


async def send_through_aiohttp(fence: Fence) -> tuple[bytes, Exception | None]:
    """One create through a real aiohttp session: every byte that reached the socket, and
    what the call raised."""
    socket = Socket()
    raised: Exception | None = None
    async with socket as url:
        client = FencedKubeClient(ClusterConfig(host=url, ssl_context=False), fence=fence)
        try:
            await client.create(PODS, POD, "ns")
        except Exception as err:
            raised = err
        finally:
            await client.close()
        async with asyncio.timeout(5):
            await socket.closed.wait()  # the connection is gone: nothing more can arrive
    return bytes(socket.received), raised


async def test_an_open_fence_lets_the_write_reach_the_socket() -> None:
    fence = Fence()
    received, raised = await send_through_aiohttp(fence)
    assert raised is None
    assert received.startswith(b"POST /api/v1/namespaces/ns/pods HTTP/1.1\r\n")
    assert received.endswith(b'"name":"p","namespace":"ns"}}')
    assert fence.checks == 2  # before taking a connection, and as the bytes are written


async def test_a_write_checked_before_a_stall_is_checked_again_as_its_bytes_are_written() -> None:
    """aiohttp writes a request (headers and body in one write) from a task of its own, a
    loop iteration or more after the request was handed over: the stall that matters can
    fall right there. The fence passed when the request took its connection and shut
    before the write: no byte of the request reaches the socket, and the call raises
    WriteFenced, not a connection error."""
    fence = ShutsAfter(1)
    received, raised = await send_through_aiohttp(fence)
    assert isinstance(raised, WriteFenced), repr(raised)
    assert received == b""
    assert fence.checks == 2
