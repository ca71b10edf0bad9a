"""One pass for one runtime name: read the caches, ask
:func:`~omed.controllers.runtimerevision.core.plan.plan`, write what it decided.

Writes, in this order: snapshots (create), then unmarks, marks and deletes. Every mark and
unmark is a merge patch that carries the revision's resourceVersion, and every delete carries
its uid and resourceVersion as preconditions, so a write based on a cache that has fallen
behind is refused (409) rather than applied to a revision that changed; the change's own
watch event brings the name back for a pass on fresher state. A revision already gone (404)
is what a delete wanted.

A snapshot just created is expected in the cache before this name gets another one: until it
arrives (or :data:`EXPECTATION_TIMEOUT` passes) a pass creates nothing, so a lagging cache
can't make two revisions with the same ``revision`` number.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Iterable, Mapping
from enum import StrEnum
from typing import Any, Final

from omed.api.constants import ANNOTATION_GC_ELIGIBLE_SINCE
from omed.clock import Clock
from omed.controllers.runtimerevision.core import observe
from omed.controllers.runtimerevision.core.model import Observed, Plan, Settings
from omed.controllers.runtimerevision.core.plan import plan
from omed.informers import IndexedStore
from omed.informers.transform import Obj
from omed.kube.client import KubeClient
from omed.kube.errors import AlreadyExists, Conflict, NotFound
from omed.kube.resources import CONTROLLER_REVISIONS
from omed.log import kv
from omed.workqueue import Result

log = logging.getLogger("omed.controllers.runtimerevision")

EXPECTATION_TIMEOUT: Final = 30.0
"""Seconds a created snapshot may take to reach the cache before creates resume."""


class LogLine(StrEnum):
    """The messages of the controller's log lines (their key-values are separate)."""

    CREATED = "Created runtime revision"
    MARKED = "Marked runtime revision for garbage collection"
    UNMARKED = "Runtime revision kept again; removed its garbage collection mark"
    DELETED = "Deleted runtime revision"
    SKIPPED = "Runtime revision not written"


class Index(StrEnum):
    """The informer indexes a pass looks a runtime name up by, never scanning a cache."""

    RUNTIME_NAME = "runtime-name"
    """InferenceServices by ``spec.runtime.name``; ServingRuntimes by ``metadata.name``."""
    PINNED = "pinned-runtime-revision"
    """InferenceServices by the revision names they pin."""
    RUNTIME_OF = "runtime-of"
    """Runtime ControllerRevisions by ``ome.io/runtime-of``."""


class RuntimeRevisionReconciler:
    def __init__(
        self,
        *,
        client: KubeClient,
        namespace: str,
        revisions: IndexedStore,
        runtimes: IndexedStore,
        cluster_runtimes: IndexedStore,
        services: IndexedStore,
        settings: Settings,
        clock: Clock,
    ) -> None:
        self._client = client
        self._namespace = namespace
        self._revisions = revisions
        self._runtimes = runtimes
        self._cluster_runtimes = cluster_runtimes
        self._services = services
        self._settings = settings
        self._clock = clock
        self._expected: dict[str, dict[str, float]] = {}
        """Per runtime name: created revision names not seen in the cache yet -> deadline."""

    @property
    def namespace(self) -> str:
        return self._namespace

    def observe(self, name: str) -> Observed:
        revisions = [
            observe.revision(obj) for obj in self._revisions.by_index(Index.RUNTIME_OF, name)
        ]
        runtimes = [
            observe.live_runtime(obj) for obj in self._runtimes.by_index(Index.RUNTIME_NAME, name)
        ]
        cluster = self._cluster_runtimes.get(name)
        if cluster is not None:
            runtimes.append(observe.live_runtime(cluster))
        services: dict[str, Obj] = {}
        for obj in self._services.by_index(Index.RUNTIME_NAME, name):
            services[_key(obj)] = obj
        for rev in revisions:
            for obj in self._services.by_index(Index.PINNED, rev.name):
                services[_key(obj)] = obj
        return Observed(
            runtime_name=name,
            namespace=self._namespace,
            runtimes=tuple(runtimes),
            revisions=tuple(revisions),
            services=tuple(observe.service_use(obj) for obj in services.values()),
        )

    def _creates_paused(self, name: str, seen: Iterable[str]) -> bool:
        pending = self._expected.get(name)
        if not pending:
            return False
        now = self._clock.monotonic()
        for done in [n for n in pending if n in set(seen) or pending[n] <= now]:
            del pending[done]
        if not pending:
            del self._expected[name]
        return bool(pending)

    async def reconcile(self, key: str) -> Result:
        observed = self.observe(key)
        decided = plan(observed, self._settings, self._clock.now())
        await self.execute(
            key, decided, paused=self._creates_paused(key, (r.name for r in observed.revisions))
        )
        return _result(decided.requeue_after)

    async def execute(self, key: str, decided: Plan, *, paused: bool) -> None:
        for skip in decided.skipped:
            log.warning(
                LogLine.SKIPPED,
                extra=kv(
                    kind=skip.source.kind,
                    namespace=skip.source.namespace,
                    runtime=skip.source.name,
                    reason=skip.reason,
                ),
            )
        if not paused:
            for create in decided.creates:
                await self._create(create.body)
                self._expected.setdefault(key, {})[create.name] = (
                    self._clock.monotonic() + EXPECTATION_TIMEOUT
                )
                log.info(LogLine.CREATED, extra=kv(revision=create.name, runtime=key))
        for unmark in decided.unmarks:
            if await self._annotate(unmark.revision.name, unmark.revision.resource_version, None):
                log.info(LogLine.UNMARKED, extra=kv(revision=unmark.revision.name, runtime=key))
        for mark in decided.marks:
            if await self._annotate(mark.revision.name, mark.revision.resource_version, mark.since):
                log.info(
                    LogLine.MARKED,
                    extra=kv(revision=mark.revision.name, runtime=key, since=mark.since),
                )
        for delete in decided.deletes:
            rev = delete.revision
            try:
                await self._client.delete(
                    CONTROLLER_REVISIONS,
                    rev.name,
                    self._namespace,
                    uid=rev.uid or None,
                    resource_version=rev.resource_version or None,
                )
            except (NotFound, Conflict):
                continue
            log.info(LogLine.DELETED, extra=kv(revision=rev.name, runtime=key, since=rev.mark))

    async def _create(self, body: Mapping[str, Any]) -> None:
        try:
            await self._client.create(CONTROLLER_REVISIONS, body, self._namespace)
        except AlreadyExists:
            return

    async def _annotate(self, name: str, resource_version: str, value: str | None) -> bool:
        """Set (or, with ``None``, remove) the mark; False when the revision changed or went."""
        patch = {
            "metadata": {
                "resourceVersion": resource_version,
                "annotations": {ANNOTATION_GC_ELIGIBLE_SINCE: value},
            }
        }
        try:
            await self._client.patch(CONTROLLER_REVISIONS, name, patch, self._namespace)
        except (NotFound, Conflict):
            return False
        return True


def _key(obj: Obj) -> str:
    meta = obj.get("metadata") or {}
    return f"{meta.get('namespace')}/{meta.get('name')}"


def _result(after: dt.timedelta | None) -> Result:
    if after is None:
        return Result()
    # A deadline already reached is handled by the pass its mark's own event starts; a floor
    # keeps requeue_after positive so the workqueue schedules it rather than forgetting it.
    return Result(requeue_after=max(after.total_seconds(), 0.01))
