"""The webhook server's own process: ``python -m omed.manager.webhookchild``, started by the
manager (:class:`omed.manager.webhookprocess.WebhookProcess`), never by hand.

Why a process: the manager's event loop runs the leader's reconciles, and a reconcile is CPU
work in Python that holds the loop (and the GIL) for as long as it runs: a 20,000-Instance
pass takes about a second. On the same loop, every admission request waited for it (p99 2.8 s
beside a 20,000-row object of 32 conditions a row, past 10 s), and a thread doesn't
help (the GIL: p99 0.4-0.5 s measured). In a process of its own the server answers from its
own core whatever the leader does: p99 under 10 ms (docs/performance.md).

What it runs is what the manager ran before: :func:`omed.manager.webhooks.build_webhook_server`
with the manager's flags (the port, the certificate directory, the feature gates found at
start) and its own API client and ``--config-cache-ttl`` cache for the defaulter's ``deploy``
entry (on the same credentials), on uvloop, logging to the same stderr in the same format.

The pipe protocol, one JSON object per line. In (stdin): the spec (``{"spec": <base64 of the
pickled (options, namespace, gates)>}``), then ``{"stop": true}``; the end of stdin (the manager
is gone) stops it too. Out (stdout): ``{"ready": <port>}`` or ``{"failed": <error>}`` once,
then ``{"metrics": ...}`` every :data:`METRICS_INTERVAL` and once more after the stop: the
request counts and latency histograms of every path, the handler failures (panics) and the
certificate poller's counts, which the manager exports on its ``/metrics``.

Invariants: the child dies with the manager (``PR_SET_PDEATHSIG``: a manager killed with
SIGKILL leaves no webhook server behind); SIGINT and SIGTERM are the manager's: the child
ignores them (a Ctrl-C or a
process-group signal must not take admissions down before the manager's ordered stop, which
stops the servers last); nothing but the protocol is written to stdout; a line the manager
doesn't read (a stopped manager) never blocks the server (a snapshot is skipped while the pipe
is full).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import ctypes
import gc
import logging
import os
import pickle
import signal
import sys
from collections.abc import Mapping
from typing import Any, Final

import orjson

from omed import log as omed_log
from omed.clock import RealClock
from omed.config import ConfigCache, Options
from omed.kube.client import KubeClient, load_config
from omed.manager.startup import log_level, run_loop
from omed.manager.webhooks import build_webhook_server, configmap_data
from omed.webhooks import metrics
from omed.webhooks.policies import FeatureGates

METRICS_INTERVAL: Final = 1.0
"""Seconds between metric snapshots sent to the manager (its ``/metrics`` lags by at most
this)."""
PIPE_HIGH_WATER: Final = 256 * 1024
"""Bytes of unread lines above which a snapshot is skipped (the manager isn't reading)."""
USER_AGENT: Final = "omed-webhooks"

log = logging.getLogger("webhooks")


def snapshot(paths: tuple[str, ...]) -> dict[str, Any]:
    """The server's counts, as :meth:`WebhookProcess` applies them."""
    series = {}
    for path in paths:
        one = metrics.COLLECTOR.series(path)
        series[path] = {
            "inFlight": one.in_flight,
            "requests": {str(code): count for code, count in dict(one.requests).items()},
            "latencyCounts": list(one.latency.counts),
            "latencySum": one.latency.sum,
        }
    return {
        "webhooks": series,
        "certReads": metrics.CERTWATCHER.reads,
        "certErrors": metrics.CERTWATCHER.errors,
        "panics": metrics.COLLECTOR.panics,
    }


class _Pipe:
    """Lines to the manager, through a non-blocking pipe transport."""

    def __init__(self, transport: asyncio.WriteTransport) -> None:
        self._transport = transport

    def send(self, message: Mapping[str, Any], *, droppable: bool = False) -> None:
        if self._transport.is_closing():
            return
        if droppable and self._transport.get_write_buffer_size() > PIPE_HIGH_WATER:
            return
        self._transport.write(orjson.dumps(message) + b"\n")


async def _pipes() -> tuple[asyncio.StreamReader, _Pipe]:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    transport, _ = await loop.connect_write_pipe(asyncio.BaseProtocol, sys.stdout)
    return reader, _Pipe(transport)


async def run() -> int:
    """Read the spec, then serve until the manager says stop (or goes away); the exit code."""
    reader, pipe = await _pipes()
    line = await reader.readline()
    if not line:
        return 1
    options, namespace, gates = _spec(line)
    omed_log.setup(encoder=options.zap_encoder, level=log_level(options.zap_log_level))
    return await serve(options, namespace=namespace, gates=gates, reader=reader, pipe=pipe)


async def serve(
    options: Options,
    *,
    namespace: str,
    gates: FeatureGates,
    reader: asyncio.StreamReader,
    pipe: _Pipe,
) -> int:
    """Serve the webhooks until the manager says stop (or goes away); the exit code."""
    clock = RealClock()
    client: KubeClient | None = None
    try:
        cluster = await load_config(options.kubeconfig)
        client = KubeClient(
            cluster,
            qps=options.kube_api_qps,
            burst=options.kube_api_burst,
            clock=clock,
            user_agent=USER_AGENT,
        )
        api = client
        config = ConfigCache(
            fetch=lambda: configmap_data(api, namespace),
            ttl=options.config_cache_ttl,
            clock=clock,
        )
        server = build_webhook_server(options=options, config=config, gates=gates)
        await server.start()
    except Exception as err:
        pipe.send({"failed": str(err) or type(err).__name__})
        if client is not None:
            await client.close()
        return 1
    pipe.send({"ready": server.port})
    gc.collect()  # as the manager does: what start-up made stays out of full collections
    gc.freeze()
    reporter = asyncio.create_task(_report(pipe, server.paths), name="webhook-metrics")
    try:
        await _until_stop(reader)
    finally:
        reporter.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await reporter
        await server.stop()
        pipe.send({"metrics": snapshot(server.paths)})
        await client.close()
    return 0


async def _report(pipe: _Pipe, paths: tuple[str, ...]) -> None:
    while True:
        await asyncio.sleep(METRICS_INTERVAL)
        pipe.send({"metrics": snapshot(paths)}, droppable=True)


async def _until_stop(reader: asyncio.StreamReader) -> None:
    while True:
        line = await reader.readline()
        if not line:
            log.info("The manager closed the webhook server's pipe; stopping")
            return
        try:
            message = orjson.loads(line)
        except orjson.JSONDecodeError:
            continue
        if isinstance(message, dict) and message.get("stop"):
            return


def _spec(line: bytes) -> tuple[Options, str, FeatureGates]:
    message = orjson.loads(line)
    # pickle: the manager's own pipe, from the same code (the Options dataclass as parsed)
    options, namespace, gates = pickle.loads(base64.b64decode(message["spec"]))
    assert isinstance(options, Options) and isinstance(gates, FeatureGates)
    return options, str(namespace), gates


def _die_with_the_manager() -> None:
    """Linux: a SIGKILL when the manager's process ends, however it ends, so a manager killed
    outright takes its webhook server with it at once, as when both were one process (the
    end of stdin would stop it too, but only after the requests in flight)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):  # not Linux: the end of stdin stops it
        return
    if os.getppid() == 1:  # the manager ended before the prctl: nobody will read us
        os._exit(1)


PR_SET_PDEATHSIG: Final = 1


def main() -> int:
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, signal.SIG_IGN)
    _die_with_the_manager()
    return run_loop(run())


if __name__ == "__main__":
    sys.exit(main())
