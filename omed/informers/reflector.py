"""Keeps a cache in step with the API server: LIST once, then WATCH from where it left off.

This is client-go's reflector (``tools/cache/reflector.go``), on asyncio, decoding watch
lines with orjson straight into the cache (no kubernetes-asyncio models on the hot path).

Which resourceVersion a LIST asks for (client-go's ``relistResourceVersion``):

- the first LIST asks for ``"0"``: any version, served from the API server's watch cache
  without touching etcd; it is sent with ``limit=500`` and continue tokens are followed, but
  the watch cache usually answers with everything at once. A paginated answer means the
  watch cache is off, and later LISTs page too;
- a relist after a broken watch asks for the last resourceVersion seen (from an event, a
  bookmark or the previous LIST): "at least as new as", served from the watch cache, so
  paging is off (a limit would force an etcd read), unless the first LIST was paginated;
- a LIST that answers 410 Gone or "Too large resource version" is retried at once with
  ``resourceVersion=""``: a consistent read from etcd, paginated by 500;
- a continue token that expired mid-list (410 on a later page) restarts the list as one
  unpaginated request at the same resourceVersion, as client-go's pager does.

The WATCH resumes from the last resourceVersion seen, with ``allowWatchBookmarks=true`` and
``timeoutSeconds`` drawn from [300, 600) so that watches of many clients do not end
together. What happens when it ends:

- closed by the server (its timeout): watch again at once from the last resourceVersion;
- broken after it delivered something (a reset, an incomplete chunk, a line that is not
  JSON): back off (a WARNING ``Watch failed``, reason ``broken``), then watch again from
  the last resourceVersion, without a relist;
- no event and no bookmark for ``silence_timeout`` (70 s; the API server sends a bookmark
  about every minute): the stream is presumed dead, closed, and watched again;
- the connection is refused or reset when opening, or 429: back off (429: at least its
  Retry-After, at most 30 s, :data:`omed.kube.errors.MAX_RETRY_AFTER`; a value that isn't a
  finite, non-negative number is ignored), then watch again from the same resourceVersion,
  without a relist; a LIST answered 429 waits the same way;
- 410 Gone, at open or as an ``ERROR`` event in the stream: relist (after the backoff),
  from the last resourceVersion seen; any other error or a watch that ends (closed or
  broken) within a second having delivered nothing: the same.

Only a decoded event (``ADDED``, ``MODIFIED``, ``DELETED``, ``BOOKMARK``) counts as
delivered, for the one-second rule and for the silence watchdog: a stream whose first line
is not JSON (a proxy's error page) has delivered nothing.

Failures wait on :class:`~omed.informers.backoff.Backoff` (0.8 s doubling to 30 s, jittered,
reset after two minutes without a failure; client-go's backoff manager), timed by the
injected clock. Nothing else resets it, events included: a stream that breaks after one
event, or answers garbage, every time is opened again after 0.8, 1.6, 3.2 ... 30 s, not at
once, so a bad proxy can't turn the watch into a storm of requests that spends the QPS the
client shares with the reconciles. An isolated break after a healthy stretch costs one
first step (0.8 to 1.6 s), and the watch resumes where it was.

Every watch end is counted in ``omed_informer_watch_ends_total{resource,reason}`` (reasons
``closed``, ``broken``, ``silent``, ``unreachable``, ``throttled``, ``gone``, ``error-event``,
``error``, ``short``) and every LIST that fills the cache in
``omed_informer_lists_total{resource,reason}`` (``initial``, ``watch-error``).

Invariants: the sink receives events in the order the API server sent them, each at most
once per watch; ``last_sync_resource_version`` only moves to a version whose effects the
sink has already received, so resuming from it loses nothing.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import random
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import AbstractAsyncContextManager
from typing import Any, Protocol

import aiohttp
import orjson
from prometheus_client import Counter

from omed.clock import Clock, RealClock
from omed.informers.backoff import Backoff
from omed.informers.store import KeyFunc, object_key
from omed.informers.transform import Obj, Transform, strip_managed_fields
from omed.kube.client import Resource
from omed.kube.errors import ApiError, Gone, TooManyRequests, error_from_response
from omed.kube.errors import is_too_large_resource_version as _too_large
from omed.log import kv
from omed.metrics import REGISTRY

log = logging.getLogger("omed.informers")

RELISTS = Counter(
    "omed_informer_lists_total",
    "LIST requests that (re)filled an informer's cache, by resource and reason.",
    ["resource", "reason"],
    registry=REGISTRY,
)
WATCH_ENDS = Counter(
    "omed_informer_watch_ends_total",
    "Watches that ended, by resource and how they ended.",
    ["resource", "reason"],
    registry=REGISTRY,
)

PAGE_SIZE = 500
MIN_WATCH_TIMEOUT = 300.0
SILENCE_TIMEOUT = 70.0
SHORT_WATCH = 1.0
"""A watch that ends sooner than this having delivered nothing counts as a failure."""

# Connection failures that mean "the API server is not there right now".
CONNECTION_ERRORS: tuple[type[BaseException], ...] = (
    aiohttp.ClientConnectionError,
    aiohttp.ClientPayloadError,
    ConnectionError,
    TimeoutError,
)


class ListWatchClient(Protocol):
    """What a reflector needs of :class:`omed.kube.client.KubeClient`."""

    async def list_page(
        self, resource: Resource, namespace: str | None = None, **params: Any
    ) -> Any: ...

    def stream(
        self,
        path: str,
        *,
        params: Mapping[str, Any] | None = None,
        timeout: float | None = None,
    ) -> AbstractAsyncContextManager[AsyncIterator[bytes]]: ...


class ReflectorSink(Protocol):
    """Where a reflector delivers what it learns (the informer)."""

    def replace(self, items: dict[str, Obj], resource_version: str) -> None:
        """The cache must now hold exactly ``items`` (already transformed)."""

    def upsert(self, obj: Obj) -> None:
        """An object was added or modified (already transformed)."""

    def remove(self, obj: Obj) -> None:
        """An object was deleted; ``obj`` is its final state (already transformed)."""


class WatchEnd(enum.Enum):
    """How one watch ended, and so what the reflector does next."""

    CLOSED = "closed"  # watch again now
    SILENT = "silent"  # watch again now
    RETRY = "retry"  # back off, watch again from the same resourceVersion
    RELIST = "relist"  # back off, list again


class _WatchError(Exception):
    """An ERROR event in the stream."""

    def __init__(self, error: ApiError) -> None:
        super().__init__(str(error))
        self.error = error


def resource_label(resource: Resource) -> str:
    return f"{resource.plural}.{resource.group}" if resource.group else resource.plural


class Reflector:
    """LIST + WATCH of one resource (one namespace or all, optional selectors) into a sink."""

    def __init__(
        self,
        client: ListWatchClient,
        resource: Resource,
        sink: ReflectorSink,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        transform: Transform | None = None,
        key_func: KeyFunc = object_key,
        clock: Clock | None = None,
        page_size: int = PAGE_SIZE,
        min_watch_timeout: float = MIN_WATCH_TIMEOUT,
        silence_timeout: float = SILENCE_TIMEOUT,
        backoff: Backoff | None = None,
        rand: Callable[[], float] = random.random,
    ) -> None:
        self._client = client
        self.resource = resource
        self._sink = sink
        self.namespace = namespace if resource.namespaced else None
        self.label_selector = label_selector
        self.field_selector = field_selector
        self._transform: Transform = transform or strip_managed_fields
        self._key_func = key_func
        self._clock: Clock = clock or RealClock()
        self._page_size = page_size
        self._min_watch_timeout = min_watch_timeout
        self._silence_timeout = silence_timeout
        self._backoff = backoff or Backoff(self._clock)
        self._rand = rand
        self._label = resource_label(resource)
        self._path = resource.path(self.namespace)
        self._last_sync_rv = ""
        self._rv_unavailable = False
        self._paginated = False
        self._activity = 0
        self._silent = False
        self.lists = 0
        self.watches = 0

    @property
    def last_sync_resource_version(self) -> str:
        return self._last_sync_rv

    def _selectors(self) -> dict[str, Any]:
        return {"labelSelector": self.label_selector, "fieldSelector": self.field_selector}

    # -- the loop ----------------------------------------------------------------------------
    async def run(self) -> None:
        """List, then watch, forever; returns only by cancellation."""
        need_list = True
        reason = "initial"
        while True:
            if need_list:
                try:
                    await self.list_and_replace(reason=reason)
                except asyncio.CancelledError:
                    raise
                except TooManyRequests as err:
                    await self._backoff.wait(at_least=err.retry_after)
                    continue
                except Exception as err:
                    log.warning(
                        "Failed to list",
                        extra=kv(resource=self._label, error=str(err) or type(err).__name__),
                    )
                    await self._backoff.wait()
                    continue
                need_list = False
            end, delay_at_least = await self.watch_once()
            if end is WatchEnd.CLOSED or end is WatchEnd.SILENT:
                continue
            await self._backoff.wait(at_least=delay_at_least)
            if end is WatchEnd.RELIST:
                need_list = True
                reason = "watch-error"

    # -- LIST --------------------------------------------------------------------------------
    def relist_resource_version(self) -> str:
        """client-go's choice: "" after a 410 on LIST, "0" before any sync, else the last seen."""
        if self._rv_unavailable:
            return ""
        return self._last_sync_rv or "0"

    async def list_and_replace(self, *, reason: str = "relist") -> None:
        """LIST the resource and replace the sink's contents with the answer."""
        rv = self.relist_resource_version()
        try:
            items, list_rv, paginated = await self._list_at(rv)
        except ApiError as err:
            if not (isinstance(err, Gone) or _too_large(err)):
                raise
            log.info(
                "Resource version unavailable for list, listing the latest",
                extra=kv(resource=self._label, resourceVersion=rv, error=err.message),
            )
            self._rv_unavailable = True
            rv = ""
            items, list_rv, paginated = await self._list_at(rv)
        if rv == "0" and paginated:
            self._paginated = True
        self._rv_unavailable = False
        self.lists += 1
        RELISTS.labels(self._label, reason).inc()
        log.debug(
            "Listed",
            extra=kv(resource=self._label, items=len(items), resourceVersion=list_rv, asked=rv),
        )
        self._sink.replace(items, list_rv)
        self._last_sync_rv = list_rv

    async def _list_at(self, rv: str) -> tuple[dict[str, Obj], str, bool]:
        """All pages at ``rv``: (key -> transformed object, list resourceVersion, paginated)."""
        if self._paginated or rv in ("", "0"):
            limit: int | None = self._page_size
        else:
            limit = None  # served from the watch cache only without a limit
        items: dict[str, Obj] = {}
        params: dict[str, Any] = {
            **self._selectors(),
            "resourceVersion": rv or None,
            "limit": limit,
        }
        page = await self._client.list_page(self.resource, self.namespace, **params)
        paginated = False
        while True:
            self._absorb(page, items)
            token = (page.get("metadata") or {}).get("continue")
            if not token:
                break
            paginated = True
            try:
                page = await self._client.list_page(
                    self.resource,
                    self.namespace,
                    **self._selectors(),
                    limit=limit,
                    _continue=token,
                )
            except Gone:
                # The continue token expired: one unpaginated list at the same version.
                items = {}
                page = await self._client.list_page(
                    self.resource,
                    self.namespace,
                    **self._selectors(),
                    resourceVersion=rv or None,
                )
                self._absorb(page, items)
                break
        list_rv = str((page.get("metadata") or {}).get("resourceVersion") or "")
        return items, list_rv, paginated

    def _absorb(self, page: Any, items: dict[str, Obj]) -> None:
        api_version = self.resource.api_version
        kind = self.resource.kind
        transform = self._transform
        key_func = self._key_func
        for item in page.get("items") or ():
            # List items come without apiVersion and kind; watch objects carry them.
            if "kind" not in item:
                item["apiVersion"] = api_version
                item["kind"] = kind
            obj = transform(item)
            items[key_func(obj)] = obj

    # -- WATCH -------------------------------------------------------------------------------
    async def watch_once(self) -> tuple[WatchEnd, float]:
        """One watch from the last resourceVersion; returns how it ended and a minimum delay."""
        timeout_seconds = int(self._min_watch_timeout * (1.0 + self._rand()))
        params = {
            **self._selectors(),
            "watch": True,
            "resourceVersion": self._last_sync_rv,
            "allowWatchBookmarks": True,
            "timeoutSeconds": timeout_seconds,
        }
        self.watches += 1
        started = self._clock.monotonic()
        activity_before = self._activity
        opened = False
        error: BaseException | None = None
        try:
            async with self._client.stream(
                self._path, params=params, timeout=timeout_seconds + 60.0
            ) as lines:
                opened = True
                end = await self._consume_guarded(lines)
        except asyncio.CancelledError:
            raise
        except TooManyRequests as err:
            return self._ended("throttled", WatchEnd.RETRY, err, err.retry_after)
        except _WatchError as err:
            reason = "gone" if isinstance(err.error, Gone) else "error-event"
            return self._ended(reason, WatchEnd.RELIST, err.error)
        except ApiError as err:
            reason = "gone" if isinstance(err, Gone) else "error"
            return self._ended(reason, WatchEnd.RELIST, err)
        except CONNECTION_ERRORS as err:
            if not opened:
                return self._ended("unreachable", WatchEnd.RETRY, err)
            end, reason = WatchEnd.RETRY, "broken"
            error = err
        except orjson.JSONDecodeError as err:  # a line cut short or garbage: the stream's fault
            end, reason = WatchEnd.RETRY, "broken"
            error = err
        except Exception as err:
            log.exception("Watch event could not be applied", extra=kv(resource=self._label))
            return self._ended("error", WatchEnd.RELIST, err)
        else:
            if end is WatchEnd.SILENT:
                return self._ended("silent", WatchEnd.SILENT, None)
            reason = "closed"
        delivered = self._activity != activity_before
        if not delivered and self._clock.monotonic() - started < SHORT_WATCH:
            return self._ended("short", WatchEnd.RELIST, error)
        if end is WatchEnd.RETRY:
            return self._ended(reason, end, error)
        self._note(reason, error)
        return end, 0.0

    def _note(self, reason: str, err: BaseException | None) -> None:
        WATCH_ENDS.labels(self._label, reason).inc()
        log.debug(
            "Watch ended",
            extra=kv(
                resource=self._label,
                reason=reason,
                resourceVersion=self._last_sync_rv,
                error=_describe(err),
            ),
        )

    def _ended(
        self, reason: str, end: WatchEnd, err: BaseException | None, at_least: float = 0.0
    ) -> tuple[WatchEnd, float]:
        WATCH_ENDS.labels(self._label, reason).inc()
        if end is WatchEnd.SILENT:
            log.info(
                "Watch stream silent, reconnecting",
                extra=kv(resource=self._label, silentFor=f"{self._silence_timeout:g}s"),
            )
        elif reason == "gone":
            log.info(
                "Watch resource version expired, relisting",
                extra=kv(resource=self._label, resourceVersion=self._last_sync_rv),
            )
        else:
            log.warning(
                "Watch failed",
                extra=kv(
                    resource=self._label,
                    reason=reason,
                    resourceVersion=self._last_sync_rv,
                    error=_describe(err),
                ),
            )
        return end, at_least

    async def _consume_guarded(self, lines: AsyncIterator[bytes]) -> WatchEnd:
        """Consume the stream, with a watchdog that ends it after ``silence_timeout``."""
        self._silent = False
        consumer = asyncio.ensure_future(self._consume(lines))
        watchdog = asyncio.ensure_future(self._watchdog(consumer))
        try:
            return await consumer
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if self._silent and (task is None or not task.cancelling()):
                return WatchEnd.SILENT
            raise
        finally:
            watchdog.cancel()
            if not consumer.done():
                consumer.cancel()

    async def _watchdog(self, consumer: asyncio.Future[WatchEnd]) -> None:
        clock = self._clock
        step = self._silence_timeout / 7.0
        seen = self._activity
        since = clock.monotonic()
        while not consumer.done():
            await clock.sleep(step)
            now = clock.monotonic()
            if self._activity != seen:
                seen = self._activity
                since = now
            elif now - since >= self._silence_timeout:
                self._silent = True
                consumer.cancel()
                return

    async def _consume(self, lines: AsyncIterator[bytes]) -> WatchEnd:
        """The hot path: decode each line, transform, hand to the sink, advance the version.

        ``_activity`` counts the events applied, the only progress there is: a line that
        doesn't decode, or an event of a type we don't know, is none."""
        loads = orjson.loads
        transform = self._transform
        upsert = self._sink.upsert
        remove = self._sink.remove
        async for line in lines:
            event = loads(line)
            kind = event.get("type")
            obj = event.get("object")
            if kind == "MODIFIED" or kind == "ADDED":  # noqa: PLR1714 - cheapest first
                rv = obj["metadata"]["resourceVersion"]
                upsert(transform(obj))
                self._last_sync_rv = rv
            elif kind == "DELETED":
                rv = obj["metadata"]["resourceVersion"]
                remove(transform(obj))
                self._last_sync_rv = rv
            elif kind == "BOOKMARK":
                self._last_sync_rv = obj["metadata"]["resourceVersion"]
            elif kind == "ERROR":
                code = obj.get("code") if isinstance(obj, dict) else None
                raise _WatchError(error_from_response(int(code or 500), obj))
            else:
                log.warning(
                    "Unknown watch event type",
                    extra=kv(resource=self._label, type=str(kind)),
                )
                continue
            self._activity += 1
        return WatchEnd.CLOSED


def _describe(err: BaseException | None) -> str | None:
    if err is None:
        return None
    text = str(err)
    return f"{type(err).__name__}: {text}" if text else type(err).__name__
