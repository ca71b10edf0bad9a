"""The plain-HTTP servers every replica runs: health probes and Prometheus metrics.

Why: the kubelet probes every manager pod (``/healthz`` for liveness, ``/readyz`` for
readiness) and Prometheus scrapes every pod's ``/metrics``, leader or standby. Both are
served on the event loop with aiohttp, like the webhooks, so that a wedged loop fails the
probes instead of hiding behind a healthy side thread.

Invariants:

* ``/healthz`` answers ``ok`` whenever the server runs: liveness means "the loop serves",
  and restarting a standby or a draining leader would only lose work.
* ``/readyz`` runs its named checks on every request and answers 200 ``ok`` only when
  all pass; otherwise 500 with one ``[+]``/``[-]`` line per check and
  ``readyz check failed``, in the layout of controller-runtime's ``healthz`` handler
  (``?verbose`` lists the checks on success too; ``/readyz/<check>`` runs one).
* ``/metrics`` is :func:`prometheus_client.generate_latest` of :data:`omed.metrics.REGISTRY`,
  the one registry every module registers on.
* An address of ``"0"`` or ``""`` turns a server off, as in controller-runtime.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Final

from aiohttp import web
from prometheus_client import CollectorRegistry, generate_latest

from omed.log import kv
from omed.manager.startup import split_bind_address
from omed.metrics import REGISTRY

__all__ = ["HealthCheck", "HttpServer", "MetricsServer", "ProbeServer"]

log = logging.getLogger("omed.manager.http")

HealthCheck = Callable[[], str | None]
"""A named check: ``None`` when it passes, else why it fails."""

SHUTDOWN_TIMEOUT: Final = 3.0
METRICS_CONTENT_TYPE: Final = "text/plain; version=0.0.4; charset=utf-8"
"""The text format every Prometheus reads (controller-runtime's); the names omed registers
need nothing newer."""
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class HttpServer:
    """One aiohttp site on ``address`` (``host:port``; ``"0"`` or ``""``: never binds)."""

    def __init__(self, *, name: str, address: str, routes: Mapping[str, Handler]) -> None:
        self.name = name
        self.address = address
        self._bind = split_bind_address(address)
        self._routes = dict(routes)
        self._runner: web.AppRunner | None = None
        self._port: int | None = None

    @property
    def enabled(self) -> bool:
        return self._bind is not None

    @property
    def port(self) -> int | None:
        """The bound port once started (useful with port 0)."""
        return self._port

    def app(self) -> web.Application:
        app = web.Application()
        for path, handler in self._routes.items():
            app.router.add_get(path, handler)
        return app

    async def start(self) -> None:
        """Bind and serve; raises OSError when the address can't be bound."""
        if self._bind is None or self._runner is not None:
            return
        host, port = self._bind
        runner = web.AppRunner(self.app(), access_log=None, handle_signals=False)
        await runner.setup()
        site = web.TCPSite(runner, host, port, shutdown_timeout=SHUTDOWN_TIMEOUT)
        try:
            await site.start()
        except BaseException:
            await runner.cleanup()
            raise
        self._runner = runner
        self._port = next(
            (int(a[1]) for a in runner.addresses if isinstance(a, tuple) and len(a) >= 2), port
        )
        log.info(f"Starting {self.name} server", extra=kv(address=self.address, port=self._port))

    async def stop(self) -> None:
        if self._runner is not None:
            runner, self._runner = self._runner, None
            await runner.cleanup()


def _checks_response(
    kind: str, checks: Mapping[str, HealthCheck], *, verbose: bool
) -> web.Response:
    lines: list[str] = []
    failed = False
    for name, check in checks.items():
        try:
            why = check()
        except Exception as err:  # a broken check fails readiness, never the server
            why = str(err) or type(err).__name__
        if why is None:
            lines.append(f"[+]{name} ok")
        else:
            failed = True
            lines.append(f"[-]{name} failed: {why}")
    if failed:
        log.info(f"{kind} check failed", extra=kv(checks=[ln for ln in lines if ln[1] == "-"]))
        return web.Response(status=500, text="\n".join([*lines, f"{kind} check failed"]) + "\n")
    if verbose:
        return web.Response(text="\n".join([*lines, f"{kind} check passed"]) + "\n")
    return web.Response(text="ok")


class ProbeServer(HttpServer):
    """``/healthz`` (always ok) and ``/readyz`` (the ``ready_checks``, in order)."""

    def __init__(self, *, address: str, ready_checks: Mapping[str, HealthCheck]) -> None:
        self.ready_checks = dict(ready_checks)
        self.health_checks: dict[str, HealthCheck] = {"ping": lambda: None}
        super().__init__(
            name="health probe",
            address=address,
            routes={
                "/healthz": self.healthz,
                "/healthz/{check}": self.healthz,
                "/readyz": self.readyz,
                "/readyz/{check}": self.readyz,
            },
        )

    async def healthz(self, request: web.Request) -> web.Response:
        return self._answer("healthz", self.health_checks, request)

    async def readyz(self, request: web.Request) -> web.Response:
        return self._answer("readyz", self.ready_checks, request)

    @staticmethod
    def _answer(kind: str, checks: Mapping[str, HealthCheck], request: web.Request) -> web.Response:
        one = request.match_info.get("check")
        if one is not None:
            if one not in checks:
                return web.Response(status=404, text=f"no {kind} check named {one!r}\n")
            checks = {one: checks[one]}
        return _checks_response(kind, checks, verbose="verbose" in request.query)


class MetricsServer(HttpServer):
    """``/metrics`` in the Prometheus text format."""

    def __init__(self, *, address: str, registry: CollectorRegistry = REGISTRY) -> None:
        self.registry = registry
        super().__init__(name="metrics", address=address, routes={"/metrics": self.metrics})

    async def metrics(self, request: web.Request) -> web.Response:
        body = generate_latest(self.registry)
        response = web.Response(body=body)
        response.headers["Content-Type"] = METRICS_CONTENT_TYPE
        return response
