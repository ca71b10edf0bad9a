"""A small list+watch loop, a deduplicating key queue and timed wake-ups, for the simulator.

The simulator must see what controllers see, so it reads only through the API server: one
list, then a watch from the list's resourceVersion with bookmarks, re-watching from the last
version it saw when the server ends a watch, and relisting when that version is gone (410).
A relist hands the handler the complete new state (:meth:`WatchHandler.replace`), so objects
deleted while the watch was down are noticed.

This deliberately does not use :mod:`omed.informers`: the simulator plays the cluster under
the product, and sharing the product's caching code would let a bug in it hide itself.

:class:`KeyQueue` is client-go's work queue in miniature: a key waits in the queue at most
once, and a key being processed is not handed to a second worker; added again meanwhile, it
is processed again afterwards. :class:`Wakeups` holds, per key, the earliest time it wants
another look, and adds due keys to a queue from one sleeping task, so nothing polls.
"""

from __future__ import annotations

import asyncio
import heapq
import logging
import random
from collections import deque
from collections.abc import Callable
from typing import Any, Protocol

import orjson

from omed.clock import Clock
from omed.kube.client import KubeClient, Resource
from omed.kube.errors import Gone
from omed.log import kv

log = logging.getLogger("omed_devcluster.simulator")


class WatchHandler(Protocol):
    def replace(self, namespace: str | None, items: list[dict[str, Any]]) -> None:
        """The complete current state in ``namespace`` (None: every namespace)."""

    def upsert(self, obj: dict[str, Any]) -> None: ...

    def delete(self, obj: dict[str, Any]) -> None: ...


SILENCE_TIMEOUT = 70.0
"""Seconds without an event or a bookmark after which a watch is restarted (the API server
sends a bookmark about every minute to a watch that asks for them)."""


async def list_watch(
    client: KubeClient,
    resource: Resource,
    handler: WatchHandler,
    *,
    namespace: str | None = None,
    label_selector: str | None = None,
    synced: asyncio.Event | None = None,
    timeout_seconds: int = 300,
    page_size: int = 500,
    silence_timeout: float = SILENCE_TIMEOUT,
) -> None:
    """List, then watch ``resource`` forever, feeding ``handler``; set ``synced`` once listed.

    A watch that delivers nothing, not even a bookmark, for ``silence_timeout`` is ended and
    resumed from the last version seen (as the product's reflector does): a connection that
    died without a reset would otherwise hang until the server-side timeout, minutes later,
    with every pod change in between unseen."""
    version: str | None = None
    delay = 0.1
    path = resource.path(namespace)
    while True:
        try:
            if version is None:
                items, version = await _list(client, resource, namespace, label_selector, page_size)
                handler.replace(namespace, items)
                if synced is not None:
                    synced.set()
            params = {
                "watch": 1,
                "allowWatchBookmarks": True,
                "resourceVersion": version,
                "timeoutSeconds": timeout_seconds + random.randint(0, timeout_seconds // 5),
                "labelSelector": label_selector,
            }
            loop = asyncio.get_running_loop()
            async with (
                client.stream(path, params=params) as lines,
                asyncio.timeout(silence_timeout) as silence,
            ):
                async for line in lines:
                    silence.reschedule(loop.time() + silence_timeout)
                    event = orjson.loads(line)
                    kind, obj = event.get("type"), event.get("object") or {}
                    if kind == "ERROR":
                        if obj.get("code") == 410:
                            raise Gone(410, "Expired", str(obj.get("message")), obj)
                        raise RuntimeError(f"watch error: {obj.get('message')}")
                    version = (obj.get("metadata") or {}).get("resourceVersion") or version
                    if kind in ("ADDED", "MODIFIED"):
                        handler.upsert(obj)
                    elif kind == "DELETED":
                        handler.delete(obj)
            delay = 0.1
        except asyncio.CancelledError:
            raise
        except Gone:
            version = None
        except TimeoutError:
            log.info(
                "Watch silent, restarting it",
                extra=kv(resource=resource.plural, namespace=namespace, after=silence_timeout),
            )
        except Exception as err:  # a broken connection or a restarted API server
            log.info(
                "Watch failed, retrying",
                extra=kv(resource=resource.plural, namespace=namespace, error=str(err)),
            )
            await asyncio.sleep(delay)
            delay = min(delay * 2, 5.0)


async def _list(
    client: KubeClient,
    resource: Resource,
    namespace: str | None,
    label_selector: str | None,
    page_size: int,
) -> tuple[list[dict[str, Any]], str]:
    items: list[dict[str, Any]] = []
    token: str | None = None
    version = ""
    while True:
        page = await client.list_page(
            resource, namespace, limit=page_size, _continue=token, labelSelector=label_selector
        )
        items.extend(page.get("items") or [])
        meta = page.get("metadata") or {}
        version = meta.get("resourceVersion") or version
        token = meta.get("continue")
        if not token:
            return items, version


class KeyQueue:
    """A deduplicating queue of keys; one worker at a time per key."""

    def __init__(self) -> None:
        self._queue: deque[str] = deque()
        self._dirty: set[str] = set()
        self._processing: set[str] = set()
        self._ready = asyncio.Event()

    def __len__(self) -> int:
        return len(self._queue)

    def add(self, key: str) -> None:
        if key in self._dirty:
            return
        self._dirty.add(key)
        if key not in self._processing:
            self._queue.append(key)
            self._ready.set()

    async def get(self) -> str:
        while not self._queue:
            self._ready.clear()
            await self._ready.wait()
        key = self._queue.popleft()
        self._dirty.discard(key)
        self._processing.add(key)
        return key

    def done(self, key: str) -> None:
        self._processing.discard(key)
        if key in self._dirty:
            self._queue.append(key)
            self._ready.set()

    def idle(self) -> bool:
        return not self._queue and not self._processing


class Wakeups:
    """Calls ``on_due(key)`` once the time asked for a key has come (monotonic seconds)."""

    def __init__(self, clock: Clock, on_due: Callable[[str], None]) -> None:
        self._clock = clock
        self._on_due = on_due
        self._heap: list[tuple[float, str]] = []
        self._wanted: dict[str, float] = {}
        self._changed = asyncio.Event()

    def at(self, key: str, when: float) -> None:
        """Wake ``key`` at ``when`` (or earlier, if it already asked for an earlier time)."""
        current = self._wanted.get(key)
        if current is not None and current <= when:
            return
        self._wanted[key] = when
        heapq.heappush(self._heap, (when, key))
        if self._heap[0] == (when, key):
            self._changed.set()

    def after(self, key: str, seconds: float) -> None:
        self.at(key, self._clock.monotonic() + max(0.0, seconds))

    def cancel(self, key: str) -> None:
        self._wanted.pop(key, None)

    async def run(self) -> None:
        while True:
            now = self._clock.monotonic()
            while self._heap and self._heap[0][0] <= now:
                when, key = heapq.heappop(self._heap)
                if self._wanted.get(key) == when:
                    del self._wanted[key]
                    self._on_due(key)
            self._changed.clear()
            delay = self._heap[0][0] - now if self._heap else 3600.0
            sleeper = asyncio.ensure_future(self._clock.sleep(delay))
            changed = asyncio.ensure_future(self._changed.wait())
            try:
                await asyncio.wait({sleeper, changed}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                # Not awaited: awaiting here could absorb a cancel meant for this loop.
                sleeper.cancel()
                changed.cancel()
