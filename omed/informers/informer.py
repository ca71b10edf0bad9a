"""One watch, one cache, many handlers: the shared informer.

Every controller that cares about pods shares one :class:`SharedInformer` for pods (the
factory sees to it), so the API server serves one LIST and one WATCH per resource and
selector, however many handlers read them. The informer applies what its
:class:`~omed.informers.reflector.Reflector` learns to its :class:`IndexedStore` and then
tells every handler, synchronously, in the order the API server sent the events. Handlers
are meant to be cheap (a controller enqueues a key) and are called on the event loop; an
exception in one is logged and does not reach the others or the watch.

Invariants:

- a handler is called only after the store holds what the event describes, so a handler
  that reads the store sees the object it was told about (or a newer one);
- ``has_synced()`` turns true once the first fill (a watch-list's initial events up to
  their bookmark, or a LIST) is in the store and its events have been delivered, and stays
  true; a relist replaces the store in one synchronous step, so a reader sees the old
  contents or the new, never a mix;
- a handler added after the informer synced first gets an ``on_add`` for every object in
  the store, then the live events, as client-go does.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Callable, Mapping
from typing import Protocol

from omed.clock import Clock, RealClock
from omed.informers.indexers import DEFAULT_INDEXERS
from omed.informers.reflector import (
    PAGE_SIZE,
    SILENCE_TIMEOUT,
    ListWatchClient,
    Reflector,
    resource_label,
)
from omed.informers.relist import relist_diff
from omed.informers.store import IndexedStore, IndexFunc
from omed.informers.transform import Obj, Transform, strip_managed_fields
from omed.kube.client import Resource
from omed.log import kv

log = logging.getLogger("omed.informers")


class EventHandler(Protocol):
    """What an informer calls. ``on_delete`` may receive a ``DeletedFinalStateUnknown``."""

    def on_add(self, obj: Obj) -> None: ...

    def on_update(self, old: Obj, new: Obj) -> None: ...

    def on_delete(self, obj: Obj) -> None: ...


def _ignore(*_: Obj) -> None:
    return None


@dataclasses.dataclass(frozen=True)
class Handlers:
    """An :class:`EventHandler` from plain callables; the ones left out ignore their event."""

    on_add: Callable[[Obj], None] = _ignore
    on_update: Callable[[Obj, Obj], None] = _ignore
    on_delete: Callable[[Obj], None] = _ignore


@dataclasses.dataclass(eq=False)
class HandlerRegistration:
    """Returned by :meth:`SharedInformer.add_event_handler`; pass it to remove the handler."""

    handler: EventHandler
    resync_period: float | None
    task: asyncio.Task[None] | None = None


class SharedInformer:
    """A reflector, an indexed store and the handlers of one (resource, scope, selectors)."""

    def __init__(
        self,
        client: ListWatchClient,
        resource: Resource,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        transform: Transform | None = None,
        indexers: Mapping[str, IndexFunc] | None = None,
        clock: Clock | None = None,
        silence_timeout: float | None = None,
        watch_list: bool = True,
        page_size: int = PAGE_SIZE,
    ) -> None:
        self.resource = resource
        self.namespace = namespace if resource.namespaced else None
        self.label_selector = label_selector
        self.field_selector = field_selector
        self.transform: Transform = transform or strip_managed_fields
        self._clock: Clock = clock or RealClock()
        self.store = IndexedStore(indexers={**DEFAULT_INDEXERS, **(indexers or {})})
        self.reflector = Reflector(
            client,
            resource,
            self,
            namespace=self.namespace,
            label_selector=label_selector,
            field_selector=field_selector,
            transform=self.transform,
            key_func=self.store.key_of,
            clock=self._clock,
            silence_timeout=SILENCE_TIMEOUT if silence_timeout is None else silence_timeout,
            watch_list=watch_list,
            cached=self.store.get,
            page_size=page_size,
        )
        self._label = resource_label(resource)
        self._registrations: list[HandlerRegistration] = []
        self._handlers: tuple[EventHandler, ...] = ()
        self.synced_event = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def __repr__(self) -> str:
        scope = self.namespace or "*"
        return (
            f"SharedInformer({self._label}, namespace={scope}, "
            f"labels={self.label_selector!r}, fields={self.field_selector!r})"
        )

    # -- handlers ----------------------------------------------------------------------------
    def add_event_handler(
        self, handler: EventHandler, *, resync_period: float | None = None
    ) -> HandlerRegistration:
        """Call ``handler`` for every event from now on (and ``on_add`` for what is cached).

        With ``resync_period``, every cached object is also redelivered to this handler as
        ``on_update(obj, obj)`` that often.
        """
        registration = HandlerRegistration(handler=handler, resync_period=resync_period)
        if self.synced_event.is_set():
            for obj in self.store.list():
                self._call(handler.on_add, obj)
        self._registrations.append(registration)
        self._handlers = (*self._handlers, handler)
        if resync_period and self._task is not None:
            registration.task = asyncio.ensure_future(self._resync(registration))
        return registration

    def remove_event_handler(self, registration: HandlerRegistration) -> None:
        if registration in self._registrations:
            self._registrations.remove(registration)
            self._handlers = tuple(r.handler for r in self._registrations)
        if registration.task is not None:
            registration.task.cancel()
            registration.task = None

    def add_indexers(self, indexers: Mapping[str, IndexFunc]) -> None:
        self.store.add_indexers(indexers)

    # -- lifecycle ---------------------------------------------------------------------------
    @property
    def started(self) -> bool:
        return self._task is not None

    def start(self) -> None:
        """Start listing and watching in the background (idempotent)."""
        if self._task is not None:
            return
        self._task = asyncio.ensure_future(self._run())
        for registration in self._registrations:
            if registration.resync_period and registration.task is None:
                registration.task = asyncio.ensure_future(self._resync(registration))

    async def stop(self) -> None:
        """Stop watching; the store keeps its last contents."""
        tasks = [r.task for r in self._registrations if r.task is not None]
        for registration in self._registrations:
            registration.task = None
        if self._task is not None:
            tasks.append(self._task)
            self._task = None
        for task in tasks:
            task.cancel()
        for task in tasks:
            try:
                await task
            except asyncio.CancelledError:
                pass
            except Exception:
                log.debug("Informer task ended with an error", exc_info=True)

    async def _run(self) -> None:
        try:
            await self.reflector.run()
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("Informer stopped", extra=kv(resource=self._label))
            raise

    def has_synced(self) -> bool:
        return self.synced_event.is_set()

    async def wait_synced(self, *, timeout: float | None = None) -> bool:
        """Wait until the first LIST is delivered; False when ``timeout`` (on the informer's
        clock) passes first."""
        if self.synced_event.is_set():
            return True
        return await wait_all([self.synced_event], clock=self._clock, timeout=timeout)

    # -- ReflectorSink -----------------------------------------------------------------------
    def replace(self, items: dict[str, Obj], resource_version: str) -> None:
        """The store now holds exactly ``items``, in one synchronous step.

        A first fill takes ``items`` as the store's mapping. A relist applies only the
        difference to the store (deletes, adds, updates): an object the reflector reused
        keeps its index entries, so a relist of a cache that barely changed builds no
        second set of indexes, and ``items`` is dropped once applied."""
        store = self.store
        diff = relist_diff(store.view(), items) if len(store) else None
        if diff is None:
            store.replace(items)
        else:
            for tombstone in diff.deleted:
                store.delete_key(tombstone.key)
            for obj in diff.added:
                store.upsert(obj)
            for _, obj in diff.updated:
                store.upsert(obj)
        if diff is None:
            for obj in items.values():
                for handler in self._handlers:
                    self._call(handler.on_add, obj)
        else:
            if diff:
                log.info(
                    "Relist changed the cache",
                    extra=kv(
                        resource=self._label,
                        resourceVersion=resource_version,
                        added=len(diff.added),
                        updated=len(diff.updated),
                        deleted=len(diff.deleted),
                    ),
                )
            for tombstone in diff.deleted:
                for handler in self._handlers:
                    self._call(handler.on_delete, tombstone)
            for obj in diff.added:
                for handler in self._handlers:
                    self._call(handler.on_add, obj)
            for old, new in diff.updated:
                for handler in self._handlers:
                    self._call2(handler.on_update, old, new)
        self.synced_event.set()

    def upsert(self, obj: Obj) -> None:
        _, old = self.store.upsert(obj)
        if old is None:
            for handler in self._handlers:
                try:
                    handler.on_add(obj)
                except Exception:
                    self._handler_failed(handler)
        else:
            for handler in self._handlers:
                try:
                    handler.on_update(old, obj)
                except Exception:
                    self._handler_failed(handler)

    def remove(self, obj: Obj) -> None:
        self.store.delete(obj)
        for handler in self._handlers:
            self._call(handler.on_delete, obj)

    def _call(self, method: Callable[[Obj], None], obj: Obj) -> None:
        try:
            method(obj)
        except Exception:
            self._handler_failed(method)

    def _call2(self, method: Callable[[Obj, Obj], None], old: Obj, new: Obj) -> None:
        try:
            method(old, new)
        except Exception:
            self._handler_failed(method)

    def _handler_failed(self, handler: object) -> None:
        log.exception(
            "Informer event handler failed",
            extra=kv(resource=self._label, handler=getattr(handler, "__qualname__", handler)),
        )

    async def _resync(self, registration: HandlerRegistration) -> None:
        assert registration.resync_period
        while True:
            await self._clock.sleep(registration.resync_period)
            if not self.synced_event.is_set():
                continue
            for obj in self.store.list():
                self._call2(registration.handler.on_update, obj, obj)


async def wait_all(events: list[asyncio.Event], *, clock: Clock, timeout: float | None) -> bool:
    """Wait until every event is set; False when ``timeout`` on ``clock`` passes first."""

    async def all_set() -> None:
        for event in events:
            await event.wait()

    waiter = asyncio.ensure_future(all_set())
    if timeout is None:
        await waiter
        return True
    sleeper = asyncio.ensure_future(clock.sleep(timeout))
    try:
        await asyncio.wait({waiter, sleeper}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        waiter.cancel()
        sleeper.cancel()
    return all(event.is_set() for event in events)
