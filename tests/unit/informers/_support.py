"""A scripted stand-in for the API client, so reflector rules are tested without a network.

:class:`ScriptedApi` answers ``list_page`` from a queue of pages (or errors) and ``stream``
from a queue of :class:`ScriptedWatch` objects (or errors raised at open). A test pushes
events into the open watch and closes or breaks it. Time runs on ``FakeClock``: ``until``
and ``advance_until`` give the loop turns (``sleep(0)``), never wall-clock sleeps.

The integration tests in tests/integration/informers check the same rules against the real
API server; these pin the exact requests and the order of what handlers see.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

import orjson

from omed.clock import FakeClock
from omed.informers.transform import Obj
from omed.kube.client import Resource


def pod(
    name: str,
    rv: str | int,
    *,
    namespace: str = "ns",
    uid: str | None = None,
    labels: Mapping[str, str] | None = None,
    **extra: Any,
) -> Obj:
    obj: Obj = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": uid or f"uid-{name}",
            "resourceVersion": str(rv),
        },
    }
    if labels is not None:
        obj["metadata"]["labels"] = dict(labels)
    obj.update(extra)
    return obj


def page(items: list[Obj], rv: str | int, *, cont: str | None = None) -> Obj:
    meta: Obj = {"resourceVersion": str(rv)}
    if cont:
        meta["continue"] = cont
    # List items come without apiVersion/kind, as the API server sends them.
    stripped = []
    for item in items:
        copy = dict(item)
        copy.pop("apiVersion", None)
        copy.pop("kind", None)
        stripped.append(copy)
    return {"kind": "PodList", "apiVersion": "v1", "metadata": meta, "items": stripped}


def status(code: int, reason: str, message: str = "") -> Obj:
    return {"kind": "Status", "status": "Failure", "code": code, "reason": reason,
            "message": message}  # fmt: skip


_CLOSE = object()


class ScriptedWatch:
    """One watch stream: push lines, then close (clean end) or break (an error)."""

    def __init__(self) -> None:
        self._queue: asyncio.Queue[Any] = asyncio.Queue()
        self.params: dict[str, Any] | None = None
        self.opened = asyncio.Event()
        self.finished = False

    def event(self, kind: str, obj: Obj) -> None:
        self._queue.put_nowait(orjson.dumps({"type": kind, "object": obj}))

    def raw(self, line: bytes) -> None:
        self._queue.put_nowait(line)

    def bookmark(self, rv: str | int) -> None:
        self.event("BOOKMARK", {"kind": "Pod", "metadata": {"resourceVersion": str(rv)}})

    def error(self, code: int, reason: str, message: str = "") -> None:
        self.event("ERROR", status(code, reason, message))

    def close(self) -> None:
        self._queue.put_nowait(_CLOSE)

    def fail(self, exc: BaseException) -> None:
        self._queue.put_nowait(exc)

    async def lines(self) -> AsyncIterator[bytes]:
        while True:
            item = await self._queue.get()
            if item is _CLOSE:
                return
            if isinstance(item, BaseException):
                raise item
            yield item


class ScriptedApi:
    """``list_page`` and ``stream`` answered from scripts; every request is recorded."""

    def __init__(self) -> None:
        self.pages: list[Obj | BaseException | Callable[[dict[str, Any]], Obj]] = []
        self.watches: list[ScriptedWatch | BaseException] = []
        self.list_calls: list[dict[str, Any]] = []
        self.watch_calls: list[dict[str, Any]] = []
        self.idle = asyncio.Event()  # never set: an unscripted request waits forever

    async def list_page(
        self, resource: Resource, namespace: str | None = None, **params: Any
    ) -> Any:
        self.list_calls.append({"namespace": namespace, **params})
        if not self.pages:
            await self.idle.wait()
        answer = self.pages.pop(0)
        if isinstance(answer, BaseException):
            raise answer
        if callable(answer):
            return answer(params)
        return answer

    @contextlib.asynccontextmanager
    async def stream(
        self,
        path: str,
        *,
        params: Mapping[str, Any] | None = None,
        timeout: float | None = None,
    ) -> AsyncIterator[AsyncIterator[bytes]]:
        call = {"path": path, "timeout": timeout, **(params or {})}
        self.watch_calls.append(call)
        if not self.watches:
            await self.idle.wait()
        script = self.watches.pop(0)
        if isinstance(script, BaseException):
            raise script
        script.params = call
        script.opened.set()
        try:
            yield script.lines()
        finally:
            script.finished = True  # the reflector closed the stream

    def watch(self) -> ScriptedWatch:
        """Script the next watch and return it."""
        scripted = ScriptedWatch()
        self.watches.append(scripted)
        return scripted


async def until(condition: Callable[[], bool], *, turns: int = 3000) -> None:
    """Yield to the loop until ``condition()`` holds; fail if it never does."""
    for _ in range(turns):
        if condition():
            return
        await asyncio.sleep(0)
    raise AssertionError("condition not reached")


async def advance_until(
    clock: FakeClock, condition: Callable[[], bool], *, step: float = 0.1, limit: float = 600.0
) -> float:
    """Advance fake time in steps until ``condition()`` holds; return the time advanced."""
    advanced = 0.0
    while advanced <= limit:
        for _ in range(50):
            if condition():
                return round(advanced, 6)
            await asyncio.sleep(0)
        clock.advance(step)
        advanced += step
    raise AssertionError(f"condition not reached within {limit}s of fake time")


class Recorder:
    """An event handler that records what it is told, as (event, key, resourceVersion)."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str, str]] = []
        self.objects: list[tuple[str, Obj]] = []

    @staticmethod
    def _id(obj: Obj) -> str:
        meta = obj["metadata"]
        return f"{meta.get('namespace')}/{meta['name']}"

    def on_add(self, obj: Obj) -> None:
        self.events.append(("add", self._id(obj), obj["metadata"]["resourceVersion"]))
        self.objects.append(("add", obj))

    def on_update(self, old: Obj, new: Obj) -> None:
        self.events.append(("update", self._id(new), new["metadata"]["resourceVersion"]))
        self.objects.append(("update", new))

    def on_delete(self, obj: Obj) -> None:
        self.events.append(("delete", self._id(obj), obj["metadata"]["resourceVersion"]))
        self.objects.append(("delete", obj))
