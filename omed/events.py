"""Kubernetes Events about OME's objects, under a per-object budget.

Why this module exists: controllers explain what they do to an InferenceService through
core/v1 Events, but a busy rollout must not flood the API server with them, and recording an
event must never slow a reconcile down. So :meth:`EventRecorder.event` is synchronous and
never blocks: it charges the budget, then puts the event on a bounded queue that one
background task writes to the API server.

Invariants:

* Budget: each (source component,
  involved object, event type) has a token bucket of ``burst`` events that regains one event
  every ``refill_interval`` (defaults: client-go's 25 and 300 s). Every emission takes a
  token, a repeat included; an emission that finds the bucket empty is dropped silently: a
  debug log line and ``omed_events_dropped_total{type}``, never an error to the caller.
  The object is its uid, or kind/namespace/name when it has none.
* Correlation (client-go's ``EventCorrelator``): a repeat of an event already written, the
  same involved object, type, reason, message and source component, PATCHes that Event's
  ``count`` and ``lastTimestamp`` instead of creating a new Event. The count sent is
  absolute, so a retried patch is idempotent.
* Nothing blocks the caller and memory is bounded: a full queue, a stopped recorder or a
  write that keeps failing drops the event and counts it in ``omed_events_dropped_total``;
  the budget and correlation caches keep at most ``cache_size`` keys each (least recently
  used evicted, full buckets first, since a full bucket is the same as a new one).
* Events are written one at a time, in emission order, so correlation state needs no lock.

Log lines (exact strings, the ``MSG_*`` constants): ``dropped event`` (debug, with ``why``:
over the per-object budget, queue full, recorder stopped), ``failed to write event`` (info,
after the retries or on a refusal such as a terminating namespace), ``unsupported event
type`` (error: a type other than Normal or Warning is a bug of the caller; nothing is
written), ``events left unwritten at stop`` (info, when the flush at stop times out).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import datetime as dt
import logging
import os
import secrets
import socket
from collections import OrderedDict
from collections.abc import Awaitable, Hashable, Mapping
from typing import Any, Protocol, TypeVar

import aiohttp
from prometheus_client import Counter

from omed.api.events import EVENT_TYPES, MAX_MESSAGE_BYTES, NORMAL, WARNING, truncate_message
from omed.clock import Clock, RealClock, rfc3339, within
from omed.kube.api import Patcher
from omed.kube.errors import AlreadyExists, ApiError, NotFound, ServerError, TooManyRequests
from omed.kube.resources import EVENTS
from omed.log import kv
from omed.metrics import REGISTRY

log = logging.getLogger("omed.events")

DEFAULT_COMPONENT = "ome-controller-manager"
DEFAULT_BURST = 25
"""client-go's burst for one object's events, used when the eventRecorder entry has none."""
DEFAULT_REFILL_INTERVAL = 300.0
"""client-go's refill: one event every five minutes."""
DEFAULT_QUEUE_SIZE = 10_000
"""Events waiting for their write. The writer sends one at a time through its own client, so a
burst (800 Instances created at once make 1,600 events) must fit: at 1,000, bench/converge.py
saw 10-13% of such a burst dropped for a full queue rather than by the per-object budget."""
DEFAULT_CACHE_SIZE = 4096
WRITE_ATTEMPTS = 3
RETRY_DELAY = 1.0

MSG_DROPPED = "dropped event"
MSG_WRITE_FAILED = "failed to write event"
MSG_UNSUPPORTED_TYPE = "unsupported event type"
MSG_UNWRITTEN_AT_STOP = "events left unwritten at stop"

DROPPED = Counter(
    "omed_events_dropped_total",
    "Events not written: over the per-object budget, queue full, recorder stopped, or the "
    "write kept failing.",
    ["type"],
    registry=REGISTRY,
)

T = TypeVar("T")

_RETRYABLE: tuple[type[BaseException], ...] = (
    ServerError,
    TooManyRequests,
    aiohttp.ClientError,
    OSError,
    TimeoutError,
)


class EventSink(Protocol):
    """What a controller needs to record an event; tests pass a list-backed fake."""

    def event(self, obj: Mapping[str, Any], *, type: str, reason: str, message: str) -> None:
        """Record an event about ``obj`` (a JSON object with apiVersion, kind, metadata)."""
        ...


class EventClient(Patcher, Protocol):
    """The part of :class:`omed.kube.client.KubeClient` the recorder uses."""

    async def create(
        self, resource: Any, body: Mapping[str, Any], namespace: str | None = None
    ) -> Any: ...


@dataclasses.dataclass(frozen=True, slots=True)
class ObjectRef:
    """The involved object of an event, as core/v1 ``ObjectReference`` has it."""

    api_version: str
    kind: str
    name: str
    namespace: str
    uid: str
    resource_version: str

    @classmethod
    def of(cls, obj: Mapping[str, Any]) -> ObjectRef:
        meta = obj.get("metadata") or {}
        return cls(
            api_version=str(obj.get("apiVersion") or ""),
            kind=str(obj.get("kind") or ""),
            name=str(meta.get("name") or ""),
            namespace=str(meta.get("namespace") or ""),
            uid=str(meta.get("uid") or ""),
            resource_version=str(meta.get("resourceVersion") or ""),
        )

    @property
    def identity(self) -> Hashable:
        """The object the budget is kept for: its uid, else kind/namespace/name."""
        return ("uid", self.uid) if self.uid else ("ref", self.kind, self.namespace, self.name)

    @property
    def event_namespace(self) -> str:
        """Events about cluster-scoped objects live in "default", as client-go writes them."""
        return self.namespace or "default"

    def to_json(self) -> dict[str, str]:
        fields = {
            "apiVersion": self.api_version,
            "kind": self.kind,
            "name": self.name,
            "namespace": self.namespace,
            "uid": self.uid,
            "resourceVersion": self.resource_version,
        }
        return {k: v for k, v in fields.items() if v}


class _Bucket:
    __slots__ = ("last", "tokens")

    def __init__(self, tokens: float, last: float) -> None:
        self.tokens = tokens
        self.last = last


class EventBudget:
    """Token buckets per key: ``burst`` events, one more every ``refill_interval``."""

    def __init__(
        self,
        *,
        burst: int | None = None,
        refill_interval: float | None = None,
        clock: Clock | None = None,
        max_keys: int = DEFAULT_CACHE_SIZE,
    ) -> None:
        self.burst = DEFAULT_BURST if burst is None else burst
        self.refill_interval = (
            DEFAULT_REFILL_INTERVAL if refill_interval is None else refill_interval
        )
        if self.burst <= 0:
            raise ValueError("the event burst size must be positive")
        if self.refill_interval <= 0:
            raise ValueError("the event refill interval must be positive")
        self._clock: Clock = clock or RealClock()
        self._max_keys = max(1, max_keys)
        self._buckets: OrderedDict[Hashable, _Bucket] = OrderedDict()

    def available(self, key: Hashable) -> float:
        """How many events ``key`` may emit now (fractional while refilling)."""
        bucket = self._buckets.get(key)
        if bucket is None:
            return float(self.burst)
        return self._refilled(bucket, self._clock.monotonic())

    def take(self, key: Hashable) -> bool:
        """Spend one event of ``key``'s budget; False (and nothing spent) when it is empty."""
        now = self._clock.monotonic()
        bucket = self._buckets.get(key)
        if bucket is None:
            bucket = _Bucket(float(self.burst), now)
            self._buckets[key] = bucket
            self._evict(now)
        else:
            self._buckets.move_to_end(key)
        bucket.tokens = self._refilled(bucket, now)
        bucket.last = now
        if bucket.tokens < 1.0:
            return False
        bucket.tokens -= 1.0
        return True

    def __len__(self) -> int:
        return len(self._buckets)

    def _refilled(self, bucket: _Bucket, now: float) -> float:
        gained = max(0.0, now - bucket.last) / self.refill_interval
        return min(float(self.burst), bucket.tokens + gained)

    def _evict(self, now: float) -> None:
        if len(self._buckets) <= self._max_keys:
            return
        full = [k for k, b in self._buckets.items() if self._refilled(b, now) >= self.burst]
        for key in full[: len(self._buckets) - self._max_keys]:
            del self._buckets[key]
        while len(self._buckets) > self._max_keys:
            self._buckets.popitem(last=False)


@dataclasses.dataclass(frozen=True, slots=True)
class _Pending:
    ref: ObjectRef
    type: str
    reason: str
    message: str
    at: dt.datetime


@dataclasses.dataclass(slots=True)
class _Written:
    name: str
    namespace: str
    count: int
    first: str


def event_name(object_name: str) -> str:
    """``<object name>.<16 hex>``, cut to stay a valid (253-character) object name."""
    suffix = secrets.token_hex(8)
    base = object_name[: 253 - len(suffix) - 1].rstrip(".-") or "object"
    return f"{base}.{suffix}"


class EventRecorder:
    """Records events asynchronously under the per-object budget; see the module docstring.

    ``burst`` and ``refill_interval`` are the eventRecorder entry's ``burstSize`` and
    ``refillInterval`` (seconds); ``None`` keeps client-go's default. ``instance`` is the
    ``reportingInstance`` (default ``$POD_NAME``, else the host name).
    """

    def __init__(
        self,
        client: EventClient,
        *,
        component: str = DEFAULT_COMPONENT,
        instance: str | None = None,
        burst: int | None = None,
        refill_interval: float | None = None,
        clock: Clock | None = None,
        queue_size: int = DEFAULT_QUEUE_SIZE,
        cache_size: int = DEFAULT_CACHE_SIZE,
    ) -> None:
        self._client = client
        self.component = component
        self.instance = instance or os.environ.get("POD_NAME") or socket.gethostname()
        self._clock: Clock = clock or RealClock()
        self.budget = EventBudget(
            burst=burst, refill_interval=refill_interval, clock=self._clock, max_keys=cache_size
        )
        self._queue: asyncio.Queue[_Pending] = asyncio.Queue(maxsize=max(1, queue_size))
        self._written: OrderedDict[tuple[str, ...], _Written] = OrderedDict()
        self._cache_size = max(1, cache_size)
        self._sender: asyncio.Task[None] | None = None
        self._stopped = False

    # -- EventSink ----------------------------------------------------------------------------
    def event(self, obj: Mapping[str, Any], *, type: str, reason: str, message: str) -> None:
        """Charge the budget and queue the event; never blocks, never raises on a drop."""
        if type not in EVENT_TYPES:
            log.error(MSG_UNSUPPORTED_TYPE, extra=kv(type=type, reason=reason))
            return
        ref = ObjectRef.of(obj)
        if self._stopped:
            self._drop(ref, type, reason, "recorder stopped")
            return
        if not self.budget.take(self._budget_key(ref, type)):
            self._drop(ref, type, reason, "over the per-object budget")
            return
        pending = _Pending(ref, type, reason, truncate_message(message), self._clock.now())
        try:
            self._queue.put_nowait(pending)
        except asyncio.QueueFull:
            self._drop(ref, type, reason, "queue full")

    def available(self, obj: Mapping[str, Any], *, type: str) -> float:
        """How many ``type`` events about ``obj`` the budget lets through now."""
        return self.budget.available(self._budget_key(ObjectRef.of(obj), type))

    # -- lifecycle ----------------------------------------------------------------------------
    async def start(self) -> None:
        """Start the background writer; events recorded before this wait in the queue."""
        if self._sender is None or self._sender.done():
            self._stopped = False
            self._sender = asyncio.create_task(self._run(), name="event-recorder")

    async def flush(self) -> None:
        """Wait until every queued event has been written (or given up)."""
        if self._sender is not None and not self._sender.done():
            await self._queue.join()

    async def stop(self, *, flush: bool = True, timeout: float = 10.0) -> None:
        """Refuse new events; with ``flush``, write the queued ones first (up to ``timeout``)."""
        self._stopped = True
        if flush:
            try:
                await self._within(self.flush(), timeout)
            except TimeoutError:
                log.info(MSG_UNWRITTEN_AT_STOP, extra=kv(events=self._queue.qsize()))
        if self._sender is not None:
            self._sender.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._sender
            self._sender = None
        while not self._queue.empty():
            pending = self._queue.get_nowait()
            self._queue.task_done()
            self._drop(pending.ref, pending.type, pending.reason, "recorder stopped")

    # -- internals ----------------------------------------------------------------------------
    def _budget_key(self, ref: ObjectRef, event_type: str) -> Hashable:
        return (self.component, ref.identity, event_type)

    def _drop(self, ref: ObjectRef, event_type: str, reason: str, why: str) -> None:
        DROPPED.labels(event_type).inc()
        log.debug(
            MSG_DROPPED,
            extra=kv(
                kind=ref.kind,
                namespace=ref.namespace,
                name=ref.name,
                type=event_type,
                reason=reason,
                why=why,
            ),
        )

    async def _run(self) -> None:
        while True:
            pending = await self._queue.get()
            try:
                await self._send(pending)
            except Exception:  # a bug must not stop every later event, nor hang flush()
                log.exception(MSG_WRITE_FAILED, extra=kv(name=pending.ref.name))
                DROPPED.labels(pending.type).inc()
            finally:
                self._queue.task_done()

    async def _send(self, pending: _Pending) -> None:
        """Write one event, retrying transient failures; drop it when they persist."""
        for attempt in range(1, WRITE_ATTEMPTS + 1):
            try:
                await self._write(pending)
                return
            except _RETRYABLE as err:
                if attempt == WRITE_ATTEMPTS:
                    why = str(err) or type(err).__name__
                    log.info(
                        MSG_WRITE_FAILED,
                        extra=kv(name=pending.ref.name, reason=pending.reason, error=why),
                    )
                    break
                await self._clock.sleep(RETRY_DELAY * attempt)
            except ApiError as err:  # refused (namespace terminating, invalid, ...): no retry
                log.info(
                    MSG_WRITE_FAILED,
                    extra=kv(name=pending.ref.name, reason=pending.reason, error=str(err)),
                )
                break
        DROPPED.labels(pending.type).inc()

    async def _write(self, pending: _Pending) -> None:
        """Create the Event, or patch the count of the identical one already written."""
        ref = pending.ref
        key = (
            self.component,
            ref.api_version,
            ref.kind,
            ref.namespace,
            ref.name,
            ref.uid,
            pending.type,
            pending.reason,
            pending.message,
        )
        now = rfc3339(pending.at)
        seen = self._written.get(key)
        if seen is not None:
            count = seen.count + 1
            try:
                await self._client.patch(
                    EVENTS, seen.name, {"count": count, "lastTimestamp": now}, seen.namespace
                )
            except NotFound:
                # Expired (the API server keeps Events an hour): write it again, as client-go.
                await self._create(pending, name=seen.name, count=count, first=seen.first)
            seen.count = count
            self._written.move_to_end(key)
            return
        name = event_name(ref.name)
        await self._create(pending, name=name, count=1, first=now)
        self._written[key] = _Written(name, ref.event_namespace, 1, now)
        while len(self._written) > self._cache_size:
            self._written.popitem(last=False)

    async def _create(self, pending: _Pending, *, name: str, count: int, first: str) -> None:
        namespace = pending.ref.event_namespace
        body = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": name, "namespace": namespace},
            "involvedObject": pending.ref.to_json(),
            "reason": pending.reason,
            "message": pending.message,
            "type": pending.type,
            "source": {"component": self.component},
            "firstTimestamp": first,
            "lastTimestamp": rfc3339(pending.at),
            "count": count,
            "reportingComponent": self.component,
            "reportingInstance": self.instance,
        }
        # A create retried after a lost answer finds its own Event: that is success.
        with contextlib.suppress(AlreadyExists):
            await self._client.create(EVENTS, body, namespace)

    async def _within(self, awaitable: Awaitable[T], seconds: float) -> T:
        return await within(self._clock, awaitable, seconds)


__all__ = [
    "DEFAULT_BURST",
    "DEFAULT_COMPONENT",
    "DEFAULT_REFILL_INTERVAL",
    "DROPPED",
    "EVENT_TYPES",
    "MAX_MESSAGE_BYTES",
    "MSG_DROPPED",
    "MSG_UNSUPPORTED_TYPE",
    "MSG_UNWRITTEN_AT_STOP",
    "MSG_WRITE_FAILED",
    "NORMAL",
    "WARNING",
    "EventBudget",
    "EventClient",
    "EventRecorder",
    "EventSink",
    "ObjectRef",
    "event_name",
    "truncate_message",
]
