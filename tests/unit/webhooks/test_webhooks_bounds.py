"""The webhook server's bounds, over real TLS on loopback, with the timeouts shortened:
handshake, idle and head deadlines, the body deadline (408), the body size cap (413), the
memory for bodies (a slow body gives its memory to a new request and is answered 503;
with nothing to give, 503 and ``Retry-After``), the head's size, and the connection limit
(a new connection closes one from the address with the most).

The same bounds at their real values, against 200 stalled uploads and 1,000 idle
connections in a memory-limited process: tests/integration/webhooks/test_webhooks_slow_clients.py.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import orjson
import pytest
from webhook_world import ISVC, client_context

from omed.metrics import REGISTRY
from omed.webhooks import InferenceServiceValidator, WebhookServer
from omed.webhooks.review import AdmissionRequest, AdmissionResponse, allow
from omed.webhooks.server import (
    MAX_BODY_BYTES,
    MAX_FIELD_SIZE,
    MAX_HEADERS,
    BodyBudget,
    Connection,
    Connections,
)
from omed_devcluster.certs import CertificateAuthority

PATH = "/validate-ome-io-v1beta1-inferenceservice"
HOLD_PATH = "/validate-hold"
SHORT = 0.3
"""The shortened timeouts."""


class Hold:
    """A webhook that answers only when :attr:`release` is set."""

    path = HOLD_PATH

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.entered = asyncio.Event()

    async def admit(self, request: AdmissionRequest) -> AdmissionResponse:
        self.entered.set()
        await self.release.wait()
        return allow()


def review(uid: str = "u-1") -> bytes:
    return orjson.dumps(
        {
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": {
                "uid": uid,
                "kind": {"group": "ome.io", "version": "v1beta1", "kind": "InferenceService"},
                "operation": "CREATE",
                "object": ISVC,
            },
        }
    )


def head(length: int | None, *, path: str = PATH, extra: str = "") -> bytes:
    size = f"Content-Length: {length}\r\n" if length is not None else ""
    return (
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        f"{size}{extra}\r\n"
    ).encode()


Streams = tuple[asyncio.StreamReader, asyncio.StreamWriter]


@pytest.fixture
def hold() -> Hold:
    return Hold()


@pytest.fixture
def make_server(cert_dir: Path, hold: Hold) -> Callable[..., WebhookServer]:
    def make(**bounds: Any) -> WebhookServer:
        settings: dict[str, Any] = {
            "handshake_timeout": SHORT,
            "idle_timeout": SHORT,
            "request_timeout": SHORT,
            "cert_poll_interval": 3600,
            **bounds,
        }
        return WebhookServer(
            handlers=[InferenceServiceValidator(), hold],
            port=0,
            host="127.0.0.1",
            cert_dir=cert_dir,
            **settings,
        )

    return make


@pytest.fixture
async def running(
    make_server: Callable[..., WebhookServer], request: pytest.FixtureRequest, hold: Hold
) -> AsyncIterator[WebhookServer]:
    bounds = getattr(request, "param", {})
    server = make_server(**bounds)
    await server.start()
    try:
        yield server
    finally:
        hold.release.set()
        await server.stop()


@pytest.fixture
def connect(running: WebhookServer, authority: CertificateAuthority) -> Callable[..., Any]:
    async def open_(*, tls: bool = True, source: str = "127.0.0.1") -> Streams:
        return await asyncio.open_connection(
            "127.0.0.1",
            running.port,
            ssl=client_context(authority) if tls else None,
            local_addr=(source, 0),
        )

    return open_


async def closed(reader: asyncio.StreamReader, within: float) -> float:
    """Seconds until the server closes the connection (everything it sent is dropped)."""
    started = time.monotonic()
    async with asyncio.timeout(within):
        try:
            while await reader.read(65536):
                pass
        except (ConnectionError, ssl.SSLError):
            pass
    return time.monotonic() - started


async def answer(
    reader: asyncio.StreamReader, within: float = 5.0
) -> tuple[int, dict[str, str], bytes]:
    """The status, headers and body of one HTTP answer."""
    async with asyncio.timeout(within):
        status_line = await reader.readline()
        headers: dict[str, str] = {}
        while (line := await reader.readline()) not in (b"\r\n", b""):
            name, _, value = line.decode().partition(":")
            headers[name.strip().lower()] = value.strip()
        body = await reader.readexactly(int(headers.get("content-length", "0")))
    return int(status_line.split()[1]), headers, body


async def post(connect: Callable[..., Any], body: bytes, **options: Any) -> tuple[int, bytes]:
    reader, writer = await connect(**options)
    try:
        writer.write(head(len(body)) + body)
        status, _, text = await answer(reader)
        return status, text
    finally:
        writer.close()


async def until(condition: Callable[[], bool], within: float = 2.0) -> None:
    deadline = time.monotonic() + within
    while not condition():
        assert time.monotonic() < deadline, "never happened"
        await asyncio.sleep(0.01)


def sample(name: str, labels: dict[str, str]) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


# -- Deadlines -----------------------------------------------------------------------------


async def test_an_idle_connection_is_closed(connect: Callable[..., Any]) -> None:
    reader, writer = await connect()
    took = await closed(reader, within=5)
    assert SHORT * 0.8 <= took < SHORT + 1.5
    writer.close()


async def test_a_head_trickled_in_is_closed_at_the_same_deadline(
    connect: Callable[..., Any],
) -> None:
    """Bytes arriving don't extend it: the head must be complete in time."""
    reader, writer = await connect()
    writer.write(f"POST {PATH} HTTP/1.1\r\n".encode())
    started = time.monotonic()

    async def trickle() -> None:
        for n in range(100):
            writer.write(f"X-Slow-{n}: 1\r\n".encode())
            await asyncio.sleep(0.05)

    trickling = asyncio.create_task(trickle())
    try:
        await closed(reader, within=5)
    finally:
        trickling.cancel()
    assert time.monotonic() - started < SHORT + 1.5
    writer.close()


async def test_the_idle_deadline_starts_again_after_each_answer(
    connect: Callable[..., Any],
) -> None:
    reader, writer = await connect()
    for n in range(3):  # keep-alive works within the deadline
        await asyncio.sleep(SHORT / 3)
        body = review(f"k-{n}")
        writer.write(head(len(body)) + body)
        status, headers, _ = await answer(reader)
        assert status == 200 and headers.get("connection", "").lower() != "close"
    took = await closed(reader, within=5)
    assert SHORT * 0.8 <= took < SHORT + 1.5
    writer.close()


async def test_a_handshake_that_never_starts_is_closed(connect: Callable[..., Any]) -> None:
    reader, writer = await connect(tls=False)
    took = await closed(reader, within=5)
    assert SHORT * 0.8 <= took < SHORT + 1.5
    writer.close()


async def test_a_body_that_doesnt_arrive_in_time_is_408(
    running: WebhookServer, connect: Callable[..., Any]
) -> None:
    before = sample("controller_runtime_webhook_requests_total", {"webhook": PATH, "code": "408"})
    reader, writer = await connect()
    writer.write(head(1000) + b'{"apiVersion"')
    started = time.monotonic()
    status, headers, text = await answer(reader)
    assert status == 408
    assert SHORT * 0.8 <= time.monotonic() - started < SHORT + 1.5
    assert headers["connection"].lower() == "close"
    assert text == b"request body not received within 0.3 s\n"
    await closed(reader, within=5)
    writer.close()
    after = sample("controller_runtime_webhook_requests_total", {"webhook": PATH, "code": "408"})
    assert after == before + 1
    assert running.bodies.free == running.bodies.capacity


async def test_a_body_that_arrives_slowly_but_in_time_is_answered(
    connect: Callable[..., Any],
) -> None:
    body = review("slow")
    reader, writer = await connect()
    writer.write(head(len(body)))
    for start in range(0, len(body), len(body) // 4 + 1):
        writer.write(body[start : start + len(body) // 4 + 1])
        await asyncio.sleep(SHORT / 8)
    status, _, text = await answer(reader)
    assert status == 200 and orjson.loads(text)["response"]["uid"] == "slow"
    writer.close()


# -- Sizes ---------------------------------------------------------------------------------


async def test_a_chunked_body_over_7_mib_is_413(connect: Callable[..., Any]) -> None:
    reader, writer = await connect()
    writer.write(head(None, extra="Transfer-Encoding: chunked\r\n"))
    chunk = b" " * (1024 * 1024)
    for _ in range(MAX_BODY_BYTES // len(chunk) + 1):
        writer.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
    status, headers, _ = await answer(reader)
    assert status == 413 and headers["connection"].lower() == "close"
    writer.close()


async def test_a_declared_body_over_7_mib_is_413_unread(connect: Callable[..., Any]) -> None:
    reader, writer = await connect()
    writer.write(head(MAX_BODY_BYTES + 1))  # and not one byte of it
    status, headers, _ = await answer(reader, within=1)
    assert status == 413 and headers["connection"].lower() == "close"
    writer.close()


@pytest.mark.parametrize(
    ("extra", "status"),
    [
        # With Host, Content-Type and Content-Length: 32 fields in all.
        ("".join(f"X-Field-{n}: v\r\n" for n in range(MAX_HEADERS - 3)), 200),
        ("".join(f"X-Field-{n}: v\r\n" for n in range(MAX_HEADERS - 2)), 400),
        (f"X-Big: {'v' * MAX_FIELD_SIZE}\r\n", 200),
        (f"X-Big: {'v' * (MAX_FIELD_SIZE + 1)}\r\n", 400),
        (f"{'X' * (MAX_FIELD_SIZE + 1)}: v\r\n", 400),
    ],
    ids=["32-fields", "33-fields", "value-8190", "value-8191", "name-8191"],
)
async def test_the_head_is_bounded(connect: Callable[..., Any], extra: str, status: int) -> None:
    body = review()
    reader, writer = await connect()
    writer.write(head(len(body), extra=extra) + body)
    got, _, _ = await answer(reader)
    assert got == status
    writer.close()


@pytest.mark.parametrize(
    "raw",
    [
        b"POST /validate HTTP/1.1\r\nHost: x\r\nNo colon here\r\n\r\n",
        b"POST /validate HTTP/9.9\r\nHost: x\r\n\r\n",
        b"POST /validate HTTP/1.1\r\nContent-Length: -5\r\n\r\n",
        head(10, extra="".join(f"X-Field-{n}: v\r\n" for n in range(MAX_HEADERS))),
    ],
    ids=["no-colon", "version", "negative-length", "too-many-fields"],
)
async def test_a_malformed_request_is_400_and_one_debug_line_not_an_error_traceback(
    connect: Callable[..., Any], caplog: pytest.LogCaptureFixture, raw: bytes
) -> None:
    caplog.set_level(logging.DEBUG, logger="webhooks")
    for _ in range(3):
        reader, writer = await connect()
        writer.write(raw)
        got, _, _ = await answer(reader)
        assert got == 400
        writer.close()
    server = [r for r in caplog.records if r.name.startswith("webhooks")]
    assert [r.levelno for r in server if r.levelno >= logging.WARNING] == []
    refused = [r for r in server if r.getMessage() == "Refused a request that could not be parsed"]
    assert len(refused) == 3
    assert all(r.levelno == logging.DEBUG and r.exc_info is None for r in refused)
    assert all(not r.exc_info for r in caplog.records if r.levelno >= logging.ERROR)


# -- Memory for bodies ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "running",
    [{"body_memory": MAX_BODY_BYTES, "evict_after": 0.2, "body_wait": 2.0}],
    indirect=True,
)
async def test_a_stalled_body_gives_its_memory_to_a_new_request(
    running: WebhookServer, connect: Callable[..., Any]
) -> None:
    """The memory holds one body: a stalled 7 MiB upload has it; a review comes."""
    stalled, stalled_writer = await connect()
    stalled_writer.write(head(MAX_BODY_BYTES) + b" " * 65536)
    await asyncio.sleep(0.05)
    assert running.bodies.free == 0
    started = time.monotonic()
    status, text = await post(connect, review("new"))
    took = time.monotonic() - started
    assert status == 200 and orjson.loads(text)["response"]["uid"] == "new"
    assert took < 1.0  # it waited for the stalled body to be 0.2 s old, not for its deadline
    got, headers, message = await answer(stalled)
    assert got == 503 and headers["retry-after"] == "1"
    assert headers["connection"].lower() == "close"
    assert message == b"request body too slow for a busy server; retry\n"
    assert running.bodies.evictions == 1
    stalled_writer.close()


@pytest.mark.parametrize(
    "running",
    [{"body_memory": MAX_BODY_BYTES, "evict_after": 0.05, "body_wait": 0.3}],
    indirect=True,
)
async def test_with_every_body_being_answered_a_new_request_is_503(
    running: WebhookServer, connect: Callable[..., Any], hold: Hold
) -> None:
    """A request being answered keeps its memory: the new one waits, then 503."""
    body = review("held")
    held, held_writer = await connect()
    held_writer.write(
        head(MAX_BODY_BYTES, path=HOLD_PATH) + body + b" " * (MAX_BODY_BYTES - len(body))
    )
    await asyncio.wait_for(hold.entered.wait(), 5)
    started = time.monotonic()
    reader, writer = await connect(source="127.0.0.2")
    small = review("small")
    writer.write(head(len(small)) + small)
    status, headers, _ = await answer(reader)
    assert status == 503 and headers["retry-after"] == "1"
    assert 0.25 <= time.monotonic() - started < 2
    assert running.bodies.refusals == 1
    hold.release.set()
    got, _, _ = await answer(held)
    assert got == 200
    assert (await post(connect, review("after")))[0] == 200
    writer.close()
    held_writer.close()


async def test_the_budget_cuts_only_bodies_arriving_long_enough() -> None:
    budget = BodyBudget(100, evict_after=0.2, wait=1.0)
    loop = asyncio.get_running_loop()
    old = await budget.reserve(60)
    assert old is not None and budget.free == 40
    cut = asyncio.Event()

    async def arriving() -> None:
        try:
            async with asyncio.timeout(30) as timeout:
                old.timeout = timeout
                await asyncio.sleep(30)
        except TimeoutError:
            cut.set()

    reader = asyncio.create_task(arriving())
    await asyncio.sleep(0)
    started = loop.time()
    new = await budget.reserve(50)  # doesn't fit until `old` has been arriving 0.2 s
    assert new is not None
    assert 0.15 <= loop.time() - started < 0.5
    await asyncio.wait_for(cut.wait(), 1)
    assert old.evicted and budget.free == 50
    budget.release(old)  # its request unwinds: no double count
    assert budget.free == 50
    budget.release(new)
    assert budget.free == 100
    await reader


async def test_the_budget_never_cuts_a_body_being_answered() -> None:
    budget = BodyBudget(100, evict_after=0.0, wait=0.2)
    answering = await budget.reserve(100)  # timeout is None: not arriving
    assert answering is not None
    assert await budget.reserve(1) is None
    assert not answering.evicted and budget.refusals == 1
    waiter = asyncio.create_task(budget.reserve(100))
    await asyncio.sleep(0.05)
    budget.release(answering)  # wakes the waiter
    assert (await waiter) is not None


# -- Connections ---------------------------------------------------------------------------


@pytest.mark.parametrize("running", [{"max_connections": 4, "idle_timeout": 30}], indirect=True)
async def test_over_the_limit_the_busiest_address_loses_its_oldest_connection(
    running: WebhookServer, connect: Callable[..., Any]
) -> None:
    idle = [await connect() for _ in range(4)]
    await asyncio.sleep(0.05)
    assert len(running.connections) == 4
    # A review from another address gets in; the oldest idle connection is closed for it.
    status, _ = await post(connect, review("other"), source="127.0.0.2")
    assert status == 200
    await closed(idle[0][0], within=2)
    await until(lambda: len(running.connections) == 3)  # the review's connection closes too
    # Two more from the busy address: the first fits, the second closes its oldest.
    more = [await connect() for _ in range(2)]
    await closed(idle[1][0], within=2)
    for reader, _ in idle[2:] + more:
        assert not reader.at_eof()
    assert running.connections.evictions == 2
    for _, writer in idle + more:
        writer.close()


def test_connections_close_the_busiest_address_first_and_never_one_being_answered() -> None:
    pool = Connections(3)
    closed_: list[str] = []

    class Recorded(Connection):
        def __init__(self, peer: str, name: str) -> None:
            super().__init__(asyncio.Protocol(), pool, peer)
            self.name = name

        def close(self) -> None:
            closed_.append(self.name)

    conn = Recorded

    a1, a2, b1 = conn("a", "a1"), conn("a", "a2"), conn("b", "b1")
    for c in (a1, a2, b1):
        assert pool.admit(c)
    a1.answering = True
    assert pool.admit(conn("c", "c1"))  # "a" has the most; a1 is being answered: a2 goes
    assert closed_ == ["a2"]
    b2 = conn("b", "b2")
    assert pool.admit(b2)  # now "a" (a1), "b" (b1), "c" (c1): one each; b1 and c1 are free
    assert closed_[-1] in {"b1", "c1"}
    pool.touch(b2)
    for c in pool.all():
        c.answering = True
    assert not pool.admit(conn("d", "d1"))
    assert pool.refusals == 1 and len(pool) == 3


async def test_stop_closes_handshakes_in_progress(
    make_server: Callable[..., WebhookServer],
) -> None:
    server = make_server(handshake_timeout=30)
    await server.start()
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    await asyncio.sleep(0.05)
    assert len(server.connections) == 1
    started = time.monotonic()
    await server.stop()
    await closed(reader, within=5)
    assert time.monotonic() - started < 5
    writer.close()
