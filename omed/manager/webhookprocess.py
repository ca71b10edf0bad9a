"""The admission webhooks served from a process of their own, so reconciles can't delay them.

Why: with ``failurePolicy: Fail`` and the chart's 10 s ``timeoutSeconds``, a slow webhook
fails InferenceService and InferenceReplica writes cluster-wide. The manager's event loop runs
the leader's reconciles, which are CPU work in Python: a pass over a 20,000-Instance replica
holds the loop for about a second, and a 20,000-row status of 32 conditions a row held it
for 14 s. On that loop every admission waited behind them: p99 2.8 s (13.3 s with 32
conditions a row). The choices, measured (docs/performance.md, "Huge statuses and
admission"):

* yielding inside a reconcile (``await asyncio.sleep(0)`` every N rows) needs the pure planner
  to become a coroutine, and bounds the wait only by the costliest step between two yields;
* a thread with its own loop shares the GIL with the reconcile: p99 0.4-0.5 s;
* a process pool for the reconciles ships every replica and its pods across a pipe both ways;
* a process for the webhook server (this module) runs it on its own core and GIL, whatever
  the leader does: p99 under 10 ms beside the worst status the bounds admit, for one more
  Python process (about 60 MiB).

:class:`WebhookProcess` is the manager's webhook :class:`~omed.manager.lifecycle.Server`: it
starts ``python -m omed.manager.webhookchild`` (:mod:`omed.manager.webhookchild`, which runs
the same server the manager ran, built by :func:`omed.manager.webhooks.build_webhook_server`
from the same flags) and returns once it listens, or raises with its error (a certificate that
can't be used fails the start as before: ``Failed to start manager`` and exit 1). It exports
the child's request, handler failure and certificate counts on the manager's ``/metrics``
(under the same names, at most a second late; the counters of a child started again continue
from the last one's), answers ``/readyz``'s ``webhook`` check, starts a child that exits on
its own again (after 1 s, doubling up to 30 s,
with ``Webhook server process exited; starting it again``), and at the stop asks it to stop
(it lets requests in flight finish, at most 5 s) and kills it if it hasn't gone within
:data:`STOP_TIMEOUT`.

Invariants: at most one child runs at a time; the child never outlives the manager's stop (a
manager killed outright closes the child's stdin, which stops it); the counters this process
exports never go backwards.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import logging
import pickle
import sys
from collections.abc import Mapping
from typing import Any, Final

import orjson

from omed.config import Options
from omed.log import kv
from omed.webhooks import metrics
from omed.webhooks.policies import FeatureGates

__all__ = [
    "MSG_PROCESS_EXITED",
    "MSG_PROCESS_STARTED",
    "RESTART_DELAYS",
    "START_TIMEOUT",
    "STOP_TIMEOUT",
    "WebhookProcess",
    "WebhookProcessFailed",
]

log = logging.getLogger("webhooks")

CHILD_MODULE: Final = "omed.manager.webhookchild"
START_TIMEOUT: Final = 30.0
"""Seconds for the child to import, load the certificate and listen."""
STOP_TIMEOUT: Final = 7.0
"""Seconds for the child to stop (its server lets requests in flight finish for up to 5 s)."""
RESTART_DELAYS: Final = (1.0, 2.0, 4.0, 8.0, 16.0, 30.0)
"""Seconds before starting a child that exited on its own again, one after another; the last
repeats. A child that served for :data:`HEALTHY_AFTER` seconds starts the sequence over."""
HEALTHY_AFTER: Final = 60.0
MSG_PROCESS_STARTED: Final = "Started the webhook server process"
MSG_PROCESS_EXITED: Final = "Webhook server process exited; starting it again"
MSG_PROCESS_RESTART_FAILED: Final = "Webhook server process failed to start again"


class WebhookProcessFailed(Exception):
    """The child couldn't start serving: its error (a certificate that can't be used, a port
    in use), or how it ended."""


class _Counts:
    """One path's numbers, as a child reports them."""

    __slots__ = ("latency_counts", "latency_sum", "requests")

    def __init__(self) -> None:
        self.requests: dict[int, int] = {}
        self.latency_counts: list[int] = []
        self.latency_sum = 0.0

    def add(self, other: _Counts) -> None:
        for code, count in other.requests.items():
            self.requests[code] = self.requests.get(code, 0) + count
        if len(self.latency_counts) < len(other.latency_counts):
            self.latency_counts += [0] * (len(other.latency_counts) - len(self.latency_counts))
        for i, count in enumerate(other.latency_counts):
            self.latency_counts[i] += count
        self.latency_sum += other.latency_sum


class WebhookProcess:
    """The webhook server of ``--webhook``, run as a child process; see the module docstring.

    ``options`` are the manager's flags (``--webhook-port``, ``--webhook-cert-dir``, the API
    client's and the config cache's); ``namespace`` the manager's own (the ConfigMap's);
    ``gates`` the policy features found at start.
    """

    def __init__(
        self,
        *,
        options: Options,
        namespace: str,
        gates: FeatureGates,
        python: str = sys.executable,
        start_timeout: float = START_TIMEOUT,
        stop_timeout: float = STOP_TIMEOUT,
        restart_delays: tuple[float, ...] = RESTART_DELAYS,
    ) -> None:
        self._spec = orjson.dumps(
            {"spec": base64.b64encode(pickle.dumps((options, namespace, gates))).decode()}
        )
        self._python = python
        self._start_timeout = start_timeout
        self._stop_timeout = stop_timeout
        self._restart_delays = restart_delays
        self._child: asyncio.subprocess.Process | None = None
        self._supervisor: asyncio.Task[None] | None = None
        self._port: int | None = None
        self._ready = False
        self._stopping = False
        self._base: dict[str, _Counts] = {}
        """Counts of the children that have ended, per path."""
        self._base_reads = 0
        self._base_errors = 0
        self._base_panics = 0
        self._last: dict[str, Any] | None = None
        """The running child's last snapshot."""

    @property
    def ready(self) -> bool:
        """A child is listening with a certificate loaded: the /readyz ``webhook`` check."""
        return self._ready

    @property
    def port(self) -> int:
        if self._port is None:
            raise RuntimeError("the webhook server has not started")
        return self._port

    @property
    def pid(self) -> int | None:
        """The running child's process id."""
        return None if self._child is None else self._child.pid

    async def start(self) -> None:
        """Start the child; return once it listens. Raises :class:`WebhookProcessFailed`."""
        if self._supervisor is not None:
            raise RuntimeError("the webhook server process is already running")
        child = await self._spawn()
        self._supervisor = asyncio.create_task(self._supervise(child), name="webhook-process")

    async def stop(self) -> None:
        """Ask the child to stop, wait for it (at most ``stop_timeout``), else kill it."""
        self._stopping = True
        self._ready = False
        supervisor, self._supervisor = self._supervisor, None
        child = self._child
        try:
            if child is not None and child.returncode is None and child.stdin is not None:
                with contextlib.suppress(ConnectionError, RuntimeError):
                    child.stdin.write(b'{"stop":true}\n')
                    await child.stdin.drain()
            if supervisor is not None:
                try:
                    await asyncio.wait_for(asyncio.shield(supervisor), self._stop_timeout)
                except TimeoutError:
                    log.error(
                        "Webhook server process didn't stop in time; killing it",
                        extra=kv(pid=child.pid if child else None),
                    )
        finally:
            if child is not None and child.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    child.kill()
                await child.wait()
            if supervisor is not None and not supervisor.done():
                supervisor.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await supervisor

    async def _spawn(self) -> asyncio.subprocess.Process:
        child = await asyncio.create_subprocess_exec(
            self._python,
            "-m",
            CHILD_MODULE,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
        )
        assert child.stdin is not None and child.stdout is not None
        try:
            child.stdin.write(self._spec + b"\n")
            await child.stdin.drain()
            line = await asyncio.wait_for(child.stdout.readline(), self._start_timeout)
        except (TimeoutError, ConnectionError) as err:
            await _kill(child)
            raise WebhookProcessFailed(
                f"the webhook server process didn't start within {self._start_timeout:g} s"
                if isinstance(err, TimeoutError)
                else f"the webhook server process went away: {err}"
            ) from err
        except BaseException:
            await _kill(child)
            raise
        message = _parse(line)
        if message is None or "ready" not in message:
            await _kill(child)
            if message is not None and "failed" in message:
                raise WebhookProcessFailed(str(message["failed"]))
            raise WebhookProcessFailed(
                f"the webhook server process exited with code {child.returncode}"
            )
        self._child = child
        self._port = int(message["ready"])
        self._ready = True
        log.info(MSG_PROCESS_STARTED, extra=kv(pid=child.pid, port=self._port))
        return child

    async def _supervise(self, child: asyncio.subprocess.Process) -> None:
        loop = asyncio.get_running_loop()
        failures = 0
        while True:
            started = loop.time()
            await self._follow(child)
            code = await child.wait()
            self._ready = False
            self._fold()
            if self._stopping:
                return
            if loop.time() - started >= HEALTHY_AFTER:
                failures = 0
            while True:
                delay = self._restart_delays[min(failures, len(self._restart_delays) - 1)]
                failures += 1
                log.error(MSG_PROCESS_EXITED, extra=kv(pid=child.pid, code=code, after=delay))
                await asyncio.sleep(delay)
                if self._stopping:
                    return
                try:
                    child = await self._spawn()
                except WebhookProcessFailed as err:
                    log.error(MSG_PROCESS_RESTART_FAILED, extra=kv(error=str(err)))
                    continue
                break

    async def _follow(self, child: asyncio.subprocess.Process) -> None:
        """Apply the child's metric snapshots until its stdout ends."""
        assert child.stdout is not None
        while True:
            try:
                line = await child.stdout.readline()
            except (ValueError, asyncio.LimitOverrunError):  # a line past the reader's limit
                continue
            if not line:
                return
            message = _parse(line)
            if message is not None and isinstance(message.get("metrics"), dict):
                self._last = message["metrics"]
                self._apply(self._last)

    def _apply(self, snapshot: Mapping[str, Any]) -> None:
        """Export ``snapshot`` (the running child's counts) on top of the ended children's."""
        for path, numbers in (snapshot.get("webhooks") or {}).items():
            counts = _counts(numbers)
            total = _Counts()
            total.add(self._base.get(path, _Counts()))
            total.add(counts)
            series = metrics.COLLECTOR.series(path)
            series.in_flight = int(numbers.get("inFlight") or 0)
            series.requests = total.requests
            if len(total.latency_counts) == len(series.latency.counts):
                series.latency.counts = total.latency_counts
                series.latency.sum = total.latency_sum
        metrics.CERTWATCHER.reads = self._base_reads + int(snapshot.get("certReads") or 0)
        metrics.CERTWATCHER.errors = self._base_errors + int(snapshot.get("certErrors") or 0)
        metrics.COLLECTOR.panics = self._base_panics + int(snapshot.get("panics") or 0)

    def _fold(self) -> None:
        """The running child ended: its last counts become the base of the next one's."""
        last, self._last = self._last, None
        if last is None:
            return
        for path, numbers in (last.get("webhooks") or {}).items():
            self._base.setdefault(path, _Counts()).add(_counts(numbers))
            metrics.COLLECTOR.series(path).in_flight = 0
        self._base_reads += int(last.get("certReads") or 0)
        self._base_errors += int(last.get("certErrors") or 0)
        self._base_panics += int(last.get("panics") or 0)


def _counts(numbers: Mapping[str, Any]) -> _Counts:
    counts = _Counts()
    counts.requests = {int(code): int(n) for code, n in (numbers.get("requests") or {}).items()}
    counts.latency_counts = [int(n) for n in numbers.get("latencyCounts") or ()]
    counts.latency_sum = float(numbers.get("latencySum") or 0.0)
    return counts


def _parse(line: bytes) -> dict[str, Any] | None:
    if not line:
        return None
    try:
        message = orjson.loads(line)
    except orjson.JSONDecodeError:
        return None
    return message if isinstance(message, dict) else None


async def _kill(child: asyncio.subprocess.Process) -> None:
    if child.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            child.kill()
    await child.wait()
