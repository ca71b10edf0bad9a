"""The admission webhook server: HTTPS, AdmissionReview v1 in and out, on every replica.

Why: the API server calls the webhooks for every InferenceService and InferenceReplica
write, through the Service ``ome-webhook-server-service`` (443 -> 9443) that selects every
manager replica, leader or not. With ``failurePolicy: Fail`` a webhook that is down, slow or
crashing stops those writes cluster-wide, so the server is built to answer every request,
fast:

* the body is capped at 7 MiB (413 beyond, before it is read when the length is declared),
  must be ``application/json`` (415 otherwise), and must be an AdmissionReview v1 request
  (400 otherwise, :mod:`omed.webhooks.review`);
* a handler that raises is answered 200 with a refusal (``status.code`` 500), never an HTTP
  500, and the server keeps serving;
* validation is pure CPU work of well under a millisecond, done on the event loop.

Why bounds: anyone who can reach the Service can open connections to it, and aiohttp's
defaults trust them (no deadline for a head or a body, an hour for an idle connection,
every body buffered whole, no limit on connections). A few hundred stalled 7 MiB uploads,
or a few thousand idle connections, would use all of a replica's memory, on every replica,
and then every InferenceService write fails. So:

* at most :data:`MAX_CONNECTIONS` connections are open (:class:`Connections`); a new one
  over it closes one from the address with the most, the least recently active there;
* a connection must finish its TLS handshake within :data:`TLS_HANDSHAKE_TIMEOUT` and
  deliver a complete request head within :data:`IDLE_TIMEOUT` of its handshake or of its
  previous answer, or it is closed; a head is at most 32 fields of 8190 bytes each;
* a request's body must arrive within :data:`REQUEST_TIMEOUT` of its head (408 otherwise);
* bodies are read only into a fixed amount of memory, :data:`BODY_MEMORY`, reserved by
  declared length (:class:`BodyBudget`). When it is used up, a new request takes the
  memory of the body that has been arriving the longest (that one is answered 503), if it
  has been arriving for at least :data:`EVICT_AFTER`; otherwise it waits up to
  :data:`BODY_WAIT` and is answered 503 with ``Retry-After``. The API server sends a whole
  body at once, so its requests are never the ones cut, and always find memory.

Invariant: whatever the clients do, the server holds at most :data:`BODY_MEMORY` of
reserved bodies (aiohttp's buffer growth and the copy of the body being finished on top) and
:data:`MAX_CONNECTIONS` connections (at most about 700 KiB each, read-ahead included).

Every request is counted under controller-runtime's metric names
(:mod:`omed.webhooks.metrics`). The certificate is reloaded when its files rotate
(:mod:`omed.webhooks.tls`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Final, Protocol

from aiohttp import hdrs, web
from aiohttp.http_exceptions import HttpProcessingError

from omed.log import kv
from omed.webhooks import metrics
from omed.webhooks.review import (
    STATUS_INTERNAL,
    AdmissionRequest,
    AdmissionResponse,
    MalformedReview,
    deny,
    encode_response,
    parse_review,
)
from omed.webhooks.tls import CERT_NAME, KEY_NAME, ServingCertificate

DEFAULT_PORT: Final = 9443
DEFAULT_CERT_DIR: Final = Path("/tmp/k8s-webhook-server/serving-certs")
DEFAULT_CERT_POLL_INTERVAL: Final = 3.0
MAX_BODY_BYTES: Final = 7 * 1024 * 1024
"""controller-runtime's cap on a request body: an AdmissionReview holds at most two objects
(old and new), each at most 3 MiB once JSON-encoded (etcd's 1.5 MiB, doubled for escaping),
and less than 1 MiB besides."""
CONTENT_TYPE: Final = "application/json"
SHUTDOWN_TIMEOUT: Final = 5.0

TLS_HANDSHAKE_TIMEOUT: Final = 10.0
"""Seconds from accepting a connection to the end of its TLS handshake (Go's server allows
its ReadHeaderTimeout, 32 s; asyncio 60 s)."""
IDLE_TIMEOUT: Final = 30.0
"""Seconds a connection may go without a complete request head: from its handshake, or from
its previous answer. Both controller-runtime bounds in one, tighter than each (Go's
ReadHeaderTimeout 32 s, IdleTimeout 90 s): aiohttp has one timer for the two."""
REQUEST_TIMEOUT: Final = 30.0
"""Seconds from a request's head to the end of its body (408 after). The API server waits
at most 30 s for a webhook (``timeoutSeconds``), so a later body is one nobody waits for."""
MAX_HEADERS: Final = 32
"""Header fields in a request head (aiohttp's default is 128). The API server sends about
ten; a mesh sidecar adds a dozen more."""
MAX_FIELD_SIZE: Final = 8190
"""Bytes in one header field (name and value) and in the request line (aiohttp's default):
a head is at most 33 x 8190 bytes, 264 KiB, against Go's MaxHeaderBytes of 1 MiB."""
BODY_MEMORY: Final = 16 * MAX_BODY_BYTES
"""Bytes of request bodies held at once (112 MiB): 16 bodies of the largest size, or
thousands of ordinary reviews (a few KiB each)."""
EVICT_AFTER: Final = 0.5
"""Seconds a body must have been arriving before a newer request may take its memory. The
API server writes a 7 MiB body in well under that."""
BODY_WAIT: Final = 1.0
"""Seconds a request waits for body memory before it is answered 503."""
RETRY_AFTER: Final = "1"
LINGER: Final = 2.0
"""Seconds the server reads and drops the rest of a body it answered without reading, before
it closes the connection (so the client sees the answer; aiohttp's default is 10 s)."""
MAX_CONNECTIONS: Final = 512
"""Connections open at once. An idle one costs about 50 KiB on uvloop, which the manager
runs on (about 290 KiB on asyncio's own loop); one sending as much as the bounds let it (a
head of the largest size, or a body waiting for memory) about 700 KiB, TLS buffers and
read-ahead included: 512 cost at most about 360 MiB. Over it, a new connection closes
another (see :class:`Connections`). The API server keeps a pool of a few dozen per
replica, and at most a few hundred busy ones."""
READ_BUFFER: Final = 64 * 1024
"""Bytes read ahead of the handler per connection, twice over: by TLS (asyncio and uvloop:
256 KiB) and by aiohttp's body stream (which pauses at twice this; aiohttp: 256 KiB). A
request waiting for body memory thus holds at most about 200 KiB of its body."""
TLS_SHUTDOWN_TIMEOUT: Final = 5.0
"""Seconds a closing connection waits for the client's TLS close_notify (asyncio: 30 s)."""
BACKLOG: Final = 4096
"""Connections waiting to be accepted (the kernel caps it at ``net.core.somaxconn``), so a
flood of connections doesn't leave the API server's SYN waiting for a retransmit."""

log = logging.getLogger("webhooks")


class _ServerLog(logging.LoggerAdapter[logging.Logger]):
    """aiohttp's per-connection logger, with a request it could not parse (a malformed head,
    too many or too long header fields) logged at DEBUG in one line, without a traceback.

    Why: aiohttp logs each such request at ERROR with a traceback of its parser, so any
    client that reaches the webhook Service could flood the manager's log, one ERROR a
    request. The request is the client's fault and is answered 400 (431 where aiohttp says
    so); Go's net/http answers it and logs nothing. Anything else aiohttp reports stays an
    ERROR with its traceback (the handlers catch their own errors, so that is aiohttp's)."""

    def exception(self, msg: object, *args: object, **kwargs: object) -> None:
        exc = kwargs.get("exc_info")
        if isinstance(exc, HttpProcessingError):
            self.logger.debug(
                "Refused a request that could not be parsed",
                extra=kv(remote=args[0] if args else "", error=str(exc).strip()[:200]),
            )
            return
        self.logger.exception(msg, *args, **kwargs)  # type: ignore[arg-type]


SERVER_LOG: Final = _ServerLog(logging.getLogger("webhooks.http"), {})


class AdmissionHandler(Protocol):
    """One webhook: the path it serves and how it answers a request."""

    @property
    def path(self) -> str: ...

    async def admit(self, request: AdmissionRequest) -> AdmissionResponse: ...


_JSON_HEADERS: Final = {hdrs.CONTENT_TYPE: CONTENT_TYPE}
"""The headers of every AdmissionReview answer (status 200), as ``content_type=`` sets them."""


def _text(status: int, message: str) -> web.Response:
    return web.Response(status=status, text=message + "\n")


def _refuse(status: int, message: str, *, retry: bool = False) -> web.Response:
    """An answer to a request whose body the server won't (or no longer will) read: the
    connection closes after it."""
    response = _text(status, message)
    if retry:
        response.headers[hdrs.RETRY_AFTER] = RETRY_AFTER
    response.force_close()
    return response


class Body:
    """The memory reserved for one request body, while its request is served."""

    __slots__ = ("evicted", "size", "started", "timeout")

    def __init__(self, size: int, started: float) -> None:
        self.size = size
        self.started = started
        self.timeout: asyncio.Timeout | None = None
        """The deadline of the read while the body is arriving; None before and after."""
        self.evicted = False
        """Its memory was given to a newer request: the read is cut, the answer is 503."""


class BodyBudget:
    """A fixed amount of memory for request bodies, shared by every request in flight.

    A request reserves its declared length (the largest body when it declares none) before
    reading; :meth:`reserve` gives the reservation, or None when none could be had in time.
    When the memory is used up, the body that has been arriving the longest, and at least
    ``evict_after`` seconds, is cut (its read times out at once, and :attr:`Body.evicted`
    says why) and its memory goes to the new request. A request's reservation lasts until
    it is answered, parse and admission included.
    """

    def __init__(self, capacity: int, *, evict_after: float, wait: float) -> None:
        self.capacity = capacity
        self._free = capacity
        self._evict_after = evict_after
        self._wait = wait
        self._bodies: dict[Body, None] = {}
        """Reservations, oldest first."""
        self._waiters: list[asyncio.Future[None]] = []
        self.evictions = 0
        self.refusals = 0

    @property
    def free(self) -> int:
        return self._free

    async def reserve(self, size: int) -> Body | None:
        """Memory for a body of ``size`` bytes (at most :attr:`capacity`)."""
        loop = asyncio.get_running_loop()
        now = loop.time()
        give_up = now + self._wait
        while True:
            if size > self._free:
                self._evict(size, now)
            if size <= self._free:
                body = Body(size, now)
                self._free -= size
                self._bodies[body] = None
                return body
            if now >= give_up:
                self.refusals += 1
                return None
            # Wake when memory is released, or when the oldest body arriving can be cut
            # (every one that could be was: those left are younger).
            wake = give_up
            for body in self._bodies:
                if body.timeout is not None and not body.timeout.expired():
                    wake = min(wake, max(now, body.started + self._evict_after))
                    break
            released = loop.create_future()
            self._waiters.append(released)
            try:
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout_at(wake):
                        await released
            finally:
                with contextlib.suppress(ValueError):
                    self._waiters.remove(released)
            now = loop.time()

    def _evict(self, size: int, now: float) -> None:
        for body in list(self._bodies):
            if self._free >= size:
                return
            if body.started > now - self._evict_after:
                return  # this one and every later one are too young
            timeout = body.timeout
            if timeout is None or timeout.expired():
                continue  # not arriving (queued, or being answered), or already cut
            body.evicted = True
            self.evictions += 1
            timeout.reschedule(now)  # its read ends at the next turn of the loop
            self.release(body)

    def release(self, body: Body) -> None:
        """Give a reservation back (again is a no-op)."""
        if body in self._bodies:
            del self._bodies[body]
            self._free += body.size
            waiters, self._waiters = self._waiters, []
            for waiter in waiters:
                if not waiter.done():
                    waiter.set_result(None)


class Connection(asyncio.Protocol):
    """One client connection: aiohttp's protocol, wrapped to keep what :class:`Connections`
    needs. Every protocol call is passed on unchanged."""

    __slots__ = ("_inner", "_pool", "answering", "peer", "task", "transport")

    def __init__(self, inner: asyncio.Protocol, pool: Connections, peer: str) -> None:
        self._inner = inner
        self._pool = pool
        self.peer = peer
        """The client's address."""
        self.transport: asyncio.BaseTransport | None = None
        """None until the TLS handshake is done."""
        self.task: asyncio.Task[None] | None = None
        """The handshake, while it runs."""
        self.answering = False
        """A request's body is in and it is being answered: never closed for another."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport
        limit = getattr(transport, "set_read_buffer_limits", None)
        if limit is not None:  # the TLS transport's read-ahead (asyncio's and uvloop's)
            limit(high=READ_BUFFER)
        self._pool.established(self)
        self._inner.connection_made(transport)

    def connection_lost(self, exc: Exception | None) -> None:
        self._pool.discard(self)
        self._inner.connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        self._inner.data_received(data)

    def eof_received(self) -> bool | None:
        return self._inner.eof_received()

    def pause_writing(self) -> None:
        self._inner.pause_writing()

    def resume_writing(self) -> None:
        self._inner.resume_writing()

    def close(self) -> None:
        """Drop the connection now (no TLS goodbye: it would keep its buffers)."""
        if self.transport is not None:
            self.transport.abort()  # type: ignore[attr-defined]
        elif self.task is not None:
            self.task.cancel()


class Connections:
    """The open connections, at most ``limit`` of them, by client address.

    When a new connection would go over the limit, one is closed for it: from the address
    with the most connections open, the least recently active one (accepted, or a request
    started or answered on it) that isn't being answered: an idle or stalled connection, a
    handshake that doesn't finish, a body that doesn't come. So a client that opens many
    connections loses its own first, and the API server, which keeps a few, keeps them.
    Among connections from one address, one is closed only after ``limit`` newer ones came.
    When every connection is being answered, the new one is refused.
    """

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._count = 0
        self._by_peer: dict[str, dict[Connection, None]] = {}
        """Each address's connections, least recently active first."""
        self._by_transport: dict[asyncio.BaseTransport, Connection] = {}
        self.evictions = 0
        self.refusals = 0

    def __len__(self) -> int:
        return self._count

    def admit(self, connection: Connection) -> bool:
        """Count a new connection in, closing another one when needed; False when full."""
        if self._count >= self.limit and not self._evict():
            self.refusals += 1
            return False
        self._by_peer.setdefault(connection.peer, {})[connection] = None
        self._count += 1
        return True

    def _evict(self) -> bool:
        for peer in sorted(self._by_peer, key=lambda p: len(self._by_peer[p]), reverse=True):
            for connection in self._by_peer[peer]:
                if not connection.answering:
                    self.evictions += 1
                    self.discard(connection)
                    connection.close()
                    return True
        return False

    def established(self, connection: Connection) -> None:
        if connection.transport is not None and connection in self._by_peer.get(
            connection.peer, ()
        ):
            self._by_transport[connection.transport] = connection

    def of(self, transport: asyncio.BaseTransport | None) -> Connection | None:
        return None if transport is None else self._by_transport.get(transport)

    def touch(self, connection: Connection) -> None:
        """Something happened on ``connection``: it is its address's most recently active."""
        mine = self._by_peer.get(connection.peer)
        if mine is not None and connection in mine:
            del mine[connection]
            mine[connection] = None

    def discard(self, connection: Connection) -> None:
        """``connection`` closed (again is a no-op)."""
        mine = self._by_peer.get(connection.peer)
        if mine is not None and connection in mine:
            del mine[connection]
            self._count -= 1
            if not mine:
                del self._by_peer[connection.peer]
        if connection.transport is not None:
            self._by_transport.pop(connection.transport, None)

    def all(self) -> list[Connection]:
        return [connection for mine in self._by_peer.values() for connection in mine]


class WebhookServer:
    """Serves ``handlers`` over HTTPS on ``host:port`` with the pair in ``cert_dir``.

    ``port=0`` binds a free port (tests); :attr:`port` is the bound one after :meth:`start`.
    The bounds default to the module's constants; tests shorten them.
    """

    def __init__(
        self,
        *,
        handlers: Sequence[AdmissionHandler],
        port: int = DEFAULT_PORT,
        cert_dir: Path | str = DEFAULT_CERT_DIR,
        host: str = "0.0.0.0",
        cert_name: str = CERT_NAME,
        key_name: str = KEY_NAME,
        cert_poll_interval: float = DEFAULT_CERT_POLL_INTERVAL,
        handshake_timeout: float = TLS_HANDSHAKE_TIMEOUT,
        idle_timeout: float = IDLE_TIMEOUT,
        request_timeout: float = REQUEST_TIMEOUT,
        body_memory: int = BODY_MEMORY,
        evict_after: float = EVICT_AFTER,
        body_wait: float = BODY_WAIT,
        max_connections: int = MAX_CONNECTIONS,
    ) -> None:
        paths = [handler.path for handler in handlers]
        if len(set(paths)) != len(paths):
            raise ValueError(f"two webhooks serve one path: {paths}")
        if body_memory < MAX_BODY_BYTES:
            raise ValueError(f"body_memory must hold one body of {MAX_BODY_BYTES} bytes")
        self._handlers = tuple(handlers)
        self._host = host
        self._requested_port = port
        self._port: int | None = None
        self.certificate = ServingCertificate(
            cert_dir=Path(cert_dir), cert_name=cert_name, key_name=key_name
        )
        self._poll_interval = cert_poll_interval
        self._handshake_timeout = handshake_timeout
        self._idle_timeout = idle_timeout
        self._request_timeout = request_timeout
        self.bodies = BodyBudget(body_memory, evict_after=evict_after, wait=body_wait)
        self.connections = Connections(max_connections)
        self._listener: socket.socket | None = None
        self._acceptor: asyncio.Task[None] | None = None
        self._accept_errors: set[int] = set()
        self._runner: web.AppRunner | None = None
        self._poller: asyncio.Task[None] | None = None
        self._ready = False

    @property
    def ready(self) -> bool:
        """Listening with a certificate loaded: the /readyz check of the webhook server."""
        return self._ready

    @property
    def port(self) -> int:
        """The bound port (known after :meth:`start`)."""
        if self._port is None:
            raise RuntimeError("the webhook server has not started")
        return self._port

    @property
    def paths(self) -> tuple[str, ...]:
        return tuple(handler.path for handler in self._handlers)

    def _app(self) -> web.Application:
        app = web.Application(client_max_size=MAX_BODY_BYTES)
        for handler in self._handlers:
            app.router.add_post(handler.path, self._endpoint(handler))
        return app

    def _endpoint(
        self, handler: AdmissionHandler
    ) -> Callable[[web.Request], Awaitable[web.Response]]:
        series = metrics.COLLECTOR.series(handler.path)
        now = time.perf_counter

        connections = self.connections

        async def serve(request: web.Request) -> web.Response:
            series.in_flight += 1
            started = now()
            connection = connections.of(request.transport)
            if connection is not None:
                connections.touch(connection)
            try:
                response = await self._answer(handler, request, connection)
            finally:
                series.in_flight -= 1
                if connection is not None:
                    connection.answering = False
                    connections.touch(connection)
            series.answered(response.status, now() - started)
            return response

        return serve

    async def _answer(
        self, handler: AdmissionHandler, request: web.Request, connection: Connection | None
    ) -> web.Response:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._request_timeout
        # The API server sends exactly "application/json": compare the raw header first, and
        # parse it (parameters such as charset) only when it is anything else.
        if (
            request.headers.get(hdrs.CONTENT_TYPE) != CONTENT_TYPE
            and request.content_type != CONTENT_TYPE
        ):
            return _refuse(415, f"content type must be {CONTENT_TYPE}")
        declared = request.content_length
        if declared is not None and declared > MAX_BODY_BYTES:
            return _refuse(413, f"request body is larger than {MAX_BODY_BYTES} bytes")
        body = await self.bodies.reserve(MAX_BODY_BYTES if declared is None else declared)
        if body is None:
            return _refuse(503, "too many request bodies in flight; retry", retry=True)
        try:
            return await self._read_and_admit(handler, request, connection, body, deadline)
        finally:
            self.bodies.release(body)

    async def _read_and_admit(
        self,
        handler: AdmissionHandler,
        request: web.Request,
        connection: Connection | None,
        reserved: Body,
        deadline: float,
    ) -> web.Response:
        try:
            async with asyncio.timeout_at(deadline) as timeout:
                reserved.timeout = timeout
                body = await request.read()
        except TimeoutError:
            if reserved.evicted:
                return _refuse(503, "request body too slow for a busy server; retry", retry=True)
            return _refuse(408, f"request body not received within {self._request_timeout:g} s")
        except web.HTTPRequestEntityTooLarge:
            return _refuse(413, f"request body is larger than {MAX_BODY_BYTES} bytes")
        except Exception as exc:  # a broken upload is the client's problem, not a 500
            return _refuse(400, f"could not read the request body: {exc}")
        finally:
            reserved.timeout = None
        if reserved.evicted:  # cut as its last bytes came in: its memory is given away
            return _refuse(503, "request body too slow for a busy server; retry", retry=True)
        if connection is not None:
            connection.answering = True
        try:
            review = parse_review(body)
        except MalformedReview as exc:
            return _text(400, f"malformed AdmissionReview: {exc}")
        try:
            answer = await handler.admit(review)
        except Exception:  # a bug in one rule must not take the webhook down
            metrics.COLLECTOR.panics += 1
            log.exception(
                "Webhook failed to handle an admission request",
                extra=kv(
                    webhook=handler.path,
                    uid=review.uid,
                    name=review.name,
                    namespace=review.namespace,
                ),
            )
            answer = deny(
                f"internal error in webhook {handler.path}; see the manager's log",
                code=STATUS_INTERNAL,
            )
        if not answer.allowed and log.isEnabledFor(logging.DEBUG):
            log.debug(
                "Admission refused",
                extra=kv(
                    webhook=handler.path,
                    uid=review.uid,
                    operation=review.operation,
                    name=review.name,
                    namespace=review.namespace,
                    message=answer.message,
                ),
            )
        return web.Response(body=encode_response(review.uid, answer), headers=_JSON_HEADERS)

    async def start(self) -> None:
        """Load the certificate (raises :class:`omed.webhooks.tls.CertificateError` when it
        can't be used), bind, and start watching the certificate files."""
        if self._runner is not None:
            raise RuntimeError("the webhook server is already running")
        log.info("Starting webhook server", extra=kv(paths=list(self.paths)))
        self.certificate.load()
        runner = web.AppRunner(
            self._app(),
            access_log=None,
            logger=SERVER_LOG,
            handle_signals=False,
            shutdown_timeout=SHUTDOWN_TIMEOUT,
            keepalive_timeout=self._idle_timeout,
            max_line_size=MAX_FIELD_SIZE,
            max_field_size=MAX_FIELD_SIZE,
            max_headers=MAX_HEADERS,
            lingering_time=LINGER,
            read_bufsize=READ_BUFFER,
        )
        await runner.setup()
        try:
            listener = self._listen()
        except BaseException:
            await runner.cleanup()
            raise
        self._listener = listener
        self._runner = runner
        self._port = int(listener.getsockname()[1])
        self._acceptor = asyncio.create_task(self._accept(), name="webhook-accept")
        self._poller = asyncio.create_task(self._watch_certificate(), name="webhook-certwatcher")
        self._ready = True
        log.info("Serving webhook server", extra=kv(host=self._host, port=self._port))

    def _listen(self) -> socket.socket:
        family = socket.getaddrinfo(
            self._host, self._requested_port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0][0]
        listener = socket.create_server(
            (self._host, self._requested_port), family=family, backlog=BACKLOG
        )
        listener.setblocking(False)
        return listener

    async def _accept(self) -> None:
        """Accept connections, within :attr:`connections`' limit, and shake hands with each.

        Why not ``loop.create_server`` (or aiohttp's sites on it): it can't count a
        connection before its handshake ends, nor tell when a handshake failed, so it can't
        keep connections under a limit; nor does aiohttp pass a handshake timeout on.
        """
        loop = asyncio.get_running_loop()
        assert self._listener is not None and self._runner is not None
        listener, factory = self._listener, self._runner.server
        assert factory is not None
        while True:
            try:
                sock, address = await loop.sock_accept(listener)
            except OSError as exc:  # out of descriptors or memory: let some close first
                if exc.errno not in self._accept_errors:
                    self._accept_errors.add(exc.errno or 0)
                    log.error("Webhook server can't accept connections", extra=kv(error=str(exc)))
                await asyncio.sleep(0.1)
                continue
            peer = address[0] if isinstance(address, tuple) else str(address)
            connection = Connection(factory(), self.connections, peer)
            if not self.connections.admit(connection):
                sock.close()
                continue
            connection.task = asyncio.create_task(self._handshake(connection, sock))

    async def _handshake(self, connection: Connection, sock: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        try:
            await loop.connect_accepted_socket(
                lambda: connection,
                sock,
                ssl=self.certificate.context,
                ssl_handshake_timeout=self._handshake_timeout,
                ssl_shutdown_timeout=TLS_SHUTDOWN_TIMEOUT,
            )
        except (Exception, asyncio.CancelledError):  # failed, timed out or cut: asyncio closed it
            self.connections.discard(connection)
        finally:
            connection.task = None

    async def _watch_certificate(self) -> None:
        """Check the certificate files every poll, for as long as the server runs: a check
        that fails is counted and logged by :meth:`ServingCertificate.reload_if_changed`,
        which never raises; should it ever, this loop logs it and polls on."""
        while True:
            await asyncio.sleep(self._poll_interval)
            try:
                self.certificate.reload_if_changed()
            except Exception:
                log.exception("Webhook certificate check failed; checking again at the next poll")

    def reload_certificate(self) -> bool:
        """Check the certificate files now (the poller does it every few seconds)."""
        return self.certificate.reload_if_changed()

    async def stop(self) -> None:
        """Stop accepting, let requests in flight finish (up to a few seconds), close."""
        self._ready = False
        if self._poller is not None:
            self._poller.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._poller
            self._poller = None
        if self._acceptor is not None:
            self._acceptor.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._acceptor
            self._acceptor = None
        if self._listener is not None:
            self._listener.close()
            self._listener = None
        for connection in self.connections.all():
            if connection.task is not None:  # handshakes; the runner closes the rest
                connection.close()
        if self._runner is not None:
            runner, self._runner = self._runner, None
            await runner.cleanup()
            log.info("Stopped webhook server", extra=kv(port=self._port))
