"""Keeps a cache in step with the API server: fill it (a streamed watch-list, or a paged
LIST), then WATCH from where it left off.

This is client-go's reflector (``tools/cache/reflector.go``), on asyncio, decoding watch
lines with orjson straight into the cache (no kubernetes-asyncio models on the hot path).

How the cache is filled, at the start and on every relist: a **watch-list** (KEP-3157,
client-go's ``watchList``), a WATCH with ``sendInitialEvents=true``,
``resourceVersionMatch=NotOlderThan`` and ``allowWatchBookmarks=true``. The API server
streams the current state as ``ADDED`` events, one object at a time, then a ``BOOKMARK``
annotated ``k8s.io/initial-events-end: "true"`` whose resourceVersion is the state's. The
objects are collected in a new mapping while the old cache stays as it is; at the bookmark
the sink's contents are replaced with it in one step (the same replace a LIST makes:
deletions, the synced flag, the handlers), and the same stream goes on as the watch. An
object whose resourceVersion is unchanged is not transformed again: the cached object is
reused, so a relist holds one copy of what did not change, not two (``bench/relist.py``
measures the peak). Which resourceVersion it asks for (client-go's
``rewatchResourceVersion``):

- the first one asks for ``""``: a consistent read (the API server checks its watch cache
  is as new as etcd);
- a relist asks for the last resourceVersion seen: "not older than", from the watch cache;
- 410 Gone or "Too large resource version" (when opening or as an ``ERROR`` event before
  the bookmark) asks again at once with ``""``; the same answer to ``""`` (the watch
  cache has not caught up with etcd yet) backs off and asks again;
- 429 or a refused connection when opening backs off and tries the watch-list again.

A watch-list falls back to a LIST for this fill when the stream breaks before the
bookmark, ends before it, or answers another error, as client-go does ("making progress is
better than deadlocking"). A server that **refuses** it (400 or 422 when opening: the
WatchList feature is off, or the server predates it; or a server that sends an ordinary
bookmark before the initial-events-end one, i.e. ignores ``sendInitialEvents``) is
remembered: this reflector lists from then on and does not ask again at every relist.
``watch_list=False`` lists always.

Which resourceVersion a LIST asks for (client-go's ``relistResourceVersion``):

- the first LIST asks for ``"0"``: any version, served from the API server's watch cache
  without touching etcd;
- a relist asks for the last resourceVersion seen (from an event, a bookmark or the
  previous fill): "at least as new as", served from the watch cache;
- a LIST that answers 410 Gone or "Too large resource version" is retried at once with
  ``resourceVersion=""``: a consistent read from etcd;
- every LIST is paged, ``limit=500`` and continue tokens followed, so a relist of a large
  cache holds one page of decoded objects at a time, not the whole answer (client-go drops
  the limit for a relist at a resourceVersion, because an older API server served a
  limited LIST from etcd; since v1.34 it serves paged LISTs from its watch cache
  snapshots). A watch cache that pages a ``"0"`` LIST is noted as ``paginated``;
- a continue token that expired mid-list (410 on a later page: the list outlasted the
  server's window for its tokens) restarts the list once, paged, from the latest state
  (``resourceVersion=""``); a second expiry lists in one unpaginated request at the
  asked resourceVersion, as client-go's pager does at the first. client-go's way holds the
  whole list decoded at once: tens of times the projected cache for pods.

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
``error``, ``short``, ``behind``), every LIST that fills the cache in
``omed_informer_lists_total{resource,reason}`` (``initial``, ``watch-error``), every
watch-list that fills it in ``omed_informer_watch_lists_total{resource,reason}`` (the same
reasons), and every watch-list given up for a LIST in
``omed_informer_watch_list_fallbacks_total{resource,cause}`` (``refused``, ``broken``,
``ended``, ``error``).

Invariants: the sink receives events in the order the API server sent them, each at most
once per watch; ``last_sync_resource_version`` only moves to a version whose effects the
sink has already received, so resuming from it loses nothing (during a watch-list's
initial events it stays where it was: the sink has received none of them until the
replace).
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
from omed.kube.errors import (
    ApiError,
    BadRequest,
    Gone,
    Invalid,
    TooManyRequests,
    error_from_response,
)
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
WATCH_LISTS = Counter(
    "omed_informer_watch_lists_total",
    "Watch-lists (streamed initial events) that (re)filled an informer's cache, by resource "
    "and reason.",
    ["resource", "reason"],
    registry=REGISTRY,
)
WATCH_LIST_FALLBACKS = Counter(
    "omed_informer_watch_list_fallbacks_total",
    "Watch-lists given up for a LIST, by resource and cause.",
    ["resource", "cause"],
    registry=REGISTRY,
)
WATCH_ENDS = Counter(
    "omed_informer_watch_ends_total",
    "Watches that ended, by resource and how they ended.",
    ["resource", "reason"],
    registry=REGISTRY,
)

PAGE_SIZE = 500
INITIAL_EVENTS_END = "k8s.io/initial-events-end"
"""The annotation of the bookmark that ends a watch-list's initial events."""
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
    RESTREAM = "restream"  # a watch-list's version is gone: watch-list again now, from ""
    FALLBACK = "fallback"  # a watch-list did not fill the cache: LIST now


class _NotStreaming(Exception):
    """An ordinary bookmark before the initial-events-end one: the server ignored
    ``sendInitialEvents``."""


class _WatchError(Exception):
    """An ERROR event in the stream."""

    def __init__(self, error: ApiError) -> None:
        super().__init__(str(error))
        self.error = error


def resource_label(resource: Resource) -> str:
    return f"{resource.plural}.{resource.group}" if resource.group else resource.plural


class Reflector:
    """Watch-list (or LIST) + WATCH of one resource (one namespace or all, optional
    selectors) into a sink.

    ``cached`` returns the sink's current object for a key (or None): a relist reuses it
    when the listed resourceVersion is the same, instead of holding a second copy.
    """

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
        watch_list: bool = True,
        cached: Callable[[str], Obj | None] | None = None,
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
        self._watch_list = watch_list
        self._watch_list_refused = False
        self._cached = cached
        self._initial: dict[str, Obj] | None = None  # a watch-list's objects, until its bookmark
        self._fill_reason = "initial"
        self.lists = 0
        self.watch_lists = 0
        self.watches = 0

    @property
    def last_sync_resource_version(self) -> str:
        return self._last_sync_rv

    @property
    def uses_watch_list(self) -> bool:
        """True while the next fill will be a watch-list (asked for, and not refused)."""
        return self._watch_list and not self._watch_list_refused

    @property
    def watch_list_refused(self) -> bool:
        return self._watch_list_refused

    def _selectors(self) -> dict[str, Any]:
        return {"labelSelector": self.label_selector, "fieldSelector": self.field_selector}

    # -- the loop ----------------------------------------------------------------------------
    async def run(self) -> None:
        """List, then watch, forever; returns only by cancellation."""
        need_list = True
        reason = "initial"
        while True:
            if need_list and self.uses_watch_list:
                self._fill_reason = reason
                end, delay_at_least = await self._watch(initial=True)
                if end is WatchEnd.RESTREAM:
                    continue
                if end is not WatchEnd.FALLBACK:
                    if self._initial is None:  # it filled the cache before it ended
                        need_list = False
                    if end is WatchEnd.CLOSED or end is WatchEnd.SILENT:
                        continue
                    await self._backoff.wait(at_least=delay_at_least)
                    if end is WatchEnd.RELIST:
                        need_list = True
                        reason = "watch-error"
                    continue
                self._initial = None
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
        limit = self._page_size
        items: dict[str, Obj] = {}
        params: dict[str, Any] = {
            **self._selectors(),
            "resourceVersion": rv or None,
            "limit": limit,
        }
        page = await self._client.list_page(self.resource, self.namespace, **params)
        paginated = restarted = False
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
                if not restarted:
                    # The continue token expired (the list outlasted the server's window
                    # for it): list again from the latest state, still paged, so that the
                    # peak stays one page of decoded objects over the cache.
                    restarted = True
                    items = {}
                    page = await self._client.list_page(
                        self.resource, self.namespace, **self._selectors(), limit=limit
                    )
                    continue
                # Expired twice: one unpaginated list at the same version (client-go's pager).
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
        cached = self._cached
        for item in page.get("items") or ():
            if cached is not None:
                key = key_func(item)
                old = cached(key)
                if old is not None and _same_version(old, item):
                    items[key] = old
                    continue
            # List items come without apiVersion and kind; watch objects carry them.
            if "kind" not in item:
                item["apiVersion"] = api_version
                item["kind"] = kind
            obj = transform(item)
            items[key_func(obj)] = obj

    # -- WATCH -------------------------------------------------------------------------------
    async def watch_once(self) -> tuple[WatchEnd, float]:
        """One watch from the last resourceVersion; returns how it ended and a minimum delay."""
        return await self._watch(initial=False)

    async def _watch(self, *, initial: bool) -> tuple[WatchEnd, float]:
        """One watch; with ``initial``, a watch-list that fills the cache first.

        Before a watch-list's bookmark the ends are RETRY (back off, watch-list again),
        RESTREAM or FALLBACK; after it, those of a watch."""
        timeout_seconds = int(self._min_watch_timeout * (1.0 + self._rand()))
        params: dict[str, Any] = {
            **self._selectors(),
            "watch": True,
            "resourceVersion": self._last_sync_rv,
            "allowWatchBookmarks": True,
            "timeoutSeconds": timeout_seconds,
        }
        if initial:
            params["resourceVersion"] = "" if self._rv_unavailable else self._last_sync_rv
            params["sendInitialEvents"] = True
            params["resourceVersionMatch"] = "NotOlderThan"
            self._initial = {}
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
            if self._initial is not None:
                return self._watch_list_failed(err.error, opened=True)
            reason = "gone" if isinstance(err.error, Gone) else "error-event"
            return self._ended(reason, WatchEnd.RELIST, err.error)
        except ApiError as err:
            if self._initial is not None:
                return self._watch_list_failed(err, opened=opened)
            reason = "gone" if isinstance(err, Gone) else "error"
            return self._ended(reason, WatchEnd.RELIST, err)
        except CONNECTION_ERRORS as err:
            if not opened:
                return self._ended("unreachable", WatchEnd.RETRY, err)
            if self._initial is not None:
                return self._fall_back("broken", err)
            end, reason = WatchEnd.RETRY, "broken"
            error = err
        except orjson.JSONDecodeError as err:  # a line cut short or garbage: the stream's fault
            if self._initial is not None:
                return self._fall_back("broken", err)
            end, reason = WatchEnd.RETRY, "broken"
            error = err
        except _NotStreaming as err:
            return self._refused(err)
        except Exception as err:
            log.exception("Watch event could not be applied", extra=kv(resource=self._label))
            if self._initial is not None:
                return self._fall_back("error", err)
            return self._ended("error", WatchEnd.RELIST, err)
        else:
            if self._initial is not None:
                return self._fall_back("broken" if end is WatchEnd.SILENT else "ended", None)
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

    def _watch_list_failed(self, err: ApiError, *, opened: bool) -> tuple[WatchEnd, float]:
        """An API error before a watch-list's bookmark."""
        if isinstance(err, Gone) or _too_large(err):
            if self._rv_unavailable:
                # Already a consistent read: the watch cache is behind etcd (it answers
                # "Too large resource version" after waiting a few seconds). client-go
                # streams again; this backs off first, and streams again.
                return self._ended("behind", WatchEnd.RETRY, err)
            log.info(
                "Resource version unavailable for watch-list, streaming the latest",
                extra=kv(resource=self._label, resourceVersion=self._last_sync_rv),
            )
            WATCH_ENDS.labels(self._label, "gone").inc()
            self._rv_unavailable = True
            return WatchEnd.RESTREAM, 0.0
        if not opened and isinstance(err, (BadRequest, Invalid)):
            return self._refused(err)
        return self._fall_back("error", err)

    def _refused(self, err: BaseException) -> tuple[WatchEnd, float]:
        self._watch_list_refused = True
        self._initial = None
        WATCH_LIST_FALLBACKS.labels(self._label, "refused").inc()
        log.info(
            "Watch-list not supported by the API server, listing from now on",
            extra=kv(resource=self._label, error=_describe(err)),
        )
        return WatchEnd.FALLBACK, 0.0

    def _fall_back(self, cause: str, err: BaseException | None) -> tuple[WatchEnd, float]:
        self._initial = None
        WATCH_LIST_FALLBACKS.labels(self._label, cause).inc()
        log.warning(
            "Watch-list did not complete, listing instead",
            extra=kv(resource=self._label, cause=cause, error=_describe(err)),
        )
        return WatchEnd.FALLBACK, 0.0

    def _filled(self, items: dict[str, Obj], resource_version: str) -> None:
        """A watch-list's bookmark: the collected objects become the sink's contents."""
        self._initial = None
        self._rv_unavailable = False
        self.watch_lists += 1
        WATCH_LISTS.labels(self._label, self._fill_reason).inc()
        log.debug(
            "Streamed initial events",
            extra=kv(resource=self._label, items=len(items), resourceVersion=resource_version),
        )
        self._sink.replace(items, resource_version)
        self._last_sync_rv = resource_version

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
        lines = lines.__aiter__()
        if self._initial is not None and not await self._consume_initial(lines):
            return WatchEnd.CLOSED
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
            else:
                self._odd_event(kind, obj)
                continue
            self._activity += 1
        return WatchEnd.CLOSED

    async def _consume_initial(self, lines: AsyncIterator[bytes]) -> bool:
        """A watch-list's initial events into ``_initial``, until the bookmark that ends
        them (True) or the end of the stream (False). The sink sees nothing until then."""
        items = self._initial
        assert items is not None
        loads = orjson.loads
        transform = self._transform
        key_func = self._key_func
        cached = self._cached
        async for line in lines:
            event = loads(line)
            kind = event.get("type")
            obj = event.get("object")
            if kind == "ADDED" or kind == "MODIFIED":  # noqa: PLR1714 - cheapest first
                key = key_func(obj)
                old = cached(key) if cached is not None else None
                items[key] = old if old is not None and _same_version(old, obj) else transform(obj)
            elif kind == "DELETED":
                items.pop(key_func(obj), None)
            elif kind == "BOOKMARK":
                metadata = obj["metadata"]
                annotations = metadata.get("annotations") or {}
                if annotations.get(INITIAL_EVENTS_END) != "true":
                    raise _NotStreaming(f"bookmark at {metadata.get('resourceVersion')}")
                self._activity += 1
                self._filled(items, metadata["resourceVersion"])
                return True
            else:
                self._odd_event(kind, obj)
                continue
            self._activity += 1
        return False

    def _odd_event(self, kind: object, obj: Any) -> None:
        """A watch event that is neither an object's nor a bookmark: an ERROR ends the watch
        (:class:`_WatchError`, the API server's status as the error); any other type is
        logged and skipped."""
        if kind == "ERROR":
            code = obj.get("code") if isinstance(obj, dict) else None
            raise _WatchError(error_from_response(int(code or 500), obj))
        log.warning("Unknown watch event type", extra=kv(resource=self._label, type=str(kind)))


def _same_version(cached: Obj, listed: Obj) -> bool:
    """The cached object is the listed one (same UID and resourceVersion), untransformed."""
    before, after = cached["metadata"], listed["metadata"]
    return bool(
        before.get("resourceVersion") == after.get("resourceVersion")
        and before.get("uid") == after.get("uid")
        and after.get("resourceVersion")
    )


def _describe(err: BaseException | None) -> str | None:
    if err is None:
        return None
    text = str(err)
    return f"{type(err).__name__}: {text}" if text else type(err).__name__
