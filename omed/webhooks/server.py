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

Every request is counted under controller-runtime's metric names
(:mod:`omed.webhooks.metrics`). The certificate is reloaded when its files rotate
(:mod:`omed.webhooks.tls`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Final, Protocol

from aiohttp import hdrs, web

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
"""The API server's own cap on a request body (and controller-runtime's)."""
CONTENT_TYPE: Final = "application/json"
SHUTDOWN_TIMEOUT: Final = 5.0

log = logging.getLogger("webhooks")


class AdmissionHandler(Protocol):
    """One webhook: the path it serves and how it answers a request."""

    @property
    def path(self) -> str: ...

    async def admit(self, request: AdmissionRequest) -> AdmissionResponse: ...


_JSON_HEADERS: Final = {hdrs.CONTENT_TYPE: CONTENT_TYPE}
"""The headers of every AdmissionReview answer (status 200), as ``content_type=`` sets them."""


def _text(status: int, message: str) -> web.Response:
    return web.Response(status=status, text=message + "\n")


class WebhookServer:
    """Serves ``handlers`` over HTTPS on ``host:port`` with the pair in ``cert_dir``.

    ``port=0`` binds a free port (tests); :attr:`port` is the bound one after :meth:`start`.
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
    ) -> None:
        paths = [handler.path for handler in handlers]
        if len(set(paths)) != len(paths):
            raise ValueError(f"two webhooks serve one path: {paths}")
        self._handlers = tuple(handlers)
        self._host = host
        self._requested_port = port
        self._port: int | None = None
        self.certificate = ServingCertificate(
            cert_dir=Path(cert_dir), cert_name=cert_name, key_name=key_name
        )
        self._poll_interval = cert_poll_interval
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

        async def serve(request: web.Request) -> web.Response:
            series.in_flight += 1
            started = now()
            try:
                response = await self._answer(handler, request)
            finally:
                series.in_flight -= 1
            series.answered(response.status, now() - started)
            return response

        return serve

    async def _answer(self, handler: AdmissionHandler, request: web.Request) -> web.Response:
        # The API server sends exactly "application/json": compare the raw header first, and
        # parse it (parameters such as charset) only when it is anything else.
        if (
            request.headers.get(hdrs.CONTENT_TYPE) != CONTENT_TYPE
            and request.content_type != CONTENT_TYPE
        ):
            return _text(415, f"content type must be {CONTENT_TYPE}")
        if request.content_length is not None and request.content_length > MAX_BODY_BYTES:
            return _text(413, f"request body is larger than {MAX_BODY_BYTES} bytes")
        try:
            body = await request.read()
        except web.HTTPRequestEntityTooLarge:
            return _text(413, f"request body is larger than {MAX_BODY_BYTES} bytes")
        except Exception as exc:  # a broken upload is the client's problem, not a 500
            return _text(400, f"could not read the request body: {exc}")
        try:
            review = parse_review(body)
        except MalformedReview as exc:
            return _text(400, f"malformed AdmissionReview: {exc}")
        try:
            answer = await handler.admit(review)
        except Exception:  # a bug in one rule must not take the webhook down
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
            handle_signals=False,
            shutdown_timeout=SHUTDOWN_TIMEOUT,
        )
        await runner.setup()
        site = web.TCPSite(
            runner,
            self._host,
            self._requested_port,
            ssl_context=self.certificate.context,
        )
        try:
            await site.start()
        except BaseException:
            await runner.cleanup()
            raise
        self._runner = runner
        self._port = self._bound_port(runner)
        self._poller = asyncio.create_task(self._watch_certificate(), name="webhook-certwatcher")
        self._ready = True
        log.info("Serving webhook server", extra=kv(host=self._host, port=self._port))

    def _bound_port(self, runner: web.AppRunner) -> int:
        for address in runner.addresses:
            if isinstance(address, tuple) and len(address) >= 2:
                return int(address[1])
        return self._requested_port

    async def _watch_certificate(self) -> None:
        while True:
            await asyncio.sleep(self._poll_interval)
            self.certificate.reload_if_changed()

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
        if self._runner is not None:
            runner, self._runner = self._runner, None
            await runner.cleanup()
            log.info("Stopped webhook server", extra=kv(port=self._port))
