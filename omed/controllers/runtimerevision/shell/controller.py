"""The runtime revision controller's wiring: its informers, the handlers that turn events
into runtime names, and the workers that run the
:class:`~.reconciler.RuntimeRevisionReconciler`.

The key is a runtime *name*, the unit garbage collection counts in. The ControllerRevision
informer is scoped to the manager's namespace and to the label ``ome.io/runtime-of``, so
other ControllerRevisions (StatefulSets', DaemonSets', InferenceReplicas' in the workload
namespaces) are never listed, cached or seen. Lookups are by index, never by a scan: an
InferenceService event must not read every revision, nor a revision event every service.
An InferenceService update wakes a name only when what the core reads of it (its runtime
reference and pins) changed, not on each of its status writes.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import Final

from omed.api.constants import LABEL_RUNTIME_OF
from omed.clock import Clock, RealClock
from omed.controllers.runtimerevision.core import observe
from omed.controllers.runtimerevision.core.model import Settings
from omed.controllers.runtimerevision.shell.reconciler import Index, RuntimeRevisionReconciler
from omed.controllers.wiring import WiredController, worker_pool
from omed.informers import Handlers, InformerFactory
from omed.informers.transform import Obj
from omed.kube.client import KubeClient
from omed.kube.resources import (
    CLUSTER_SERVING_RUNTIMES,
    CONTROLLER_REVISIONS,
    INFERENCE_SERVICES,
    SERVING_RUNTIMES,
)

CONTROLLER_NAME: Final = "runtimerevision"
WORKERS: Final = 1
"""The controller's workers. Upstream OME has no flag for them; a pass for one runtime name
reads caches and sends at most a few writes, and runtimes change rarely."""


def runtime_of_index(obj: Obj) -> tuple[str, ...]:
    value = ((obj.get("metadata") or {}).get("labels") or {}).get(LABEL_RUNTIME_OF)
    return (value,) if isinstance(value, str) and value else ()


def name_index(obj: Obj) -> tuple[str, ...]:
    return (str((obj.get("metadata") or {}).get("name")),)


def service_runtime_index(obj: Obj) -> tuple[str, ...]:
    name = observe.service_use(obj).runtime_name
    return (name,) if name else ()


def pinned_index(obj: Obj) -> tuple[str, ...]:
    return observe.pins(obj)


class RuntimeRevisionController(WiredController):
    """Informers and the worker pool of the runtime revision controller."""

    def __init__(
        self,
        *,
        client: KubeClient,
        factory: InformerFactory,
        namespace: str,
        retention: int,
        grace_period: float,
        clock: Clock | None = None,
    ) -> None:
        """``namespace`` is the manager's, where the revisions live; ``grace_period`` is in
        seconds."""
        super().__init__()
        self._clock: Clock = clock or RealClock()
        self.revisions = factory.informer(
            CONTROLLER_REVISIONS,
            namespace=namespace,
            label_selector=LABEL_RUNTIME_OF,
            indexers={Index.RUNTIME_OF: runtime_of_index},
        )
        self.runtimes = factory.informer(
            SERVING_RUNTIMES, indexers={Index.RUNTIME_NAME: name_index}
        )
        self.cluster_runtimes = factory.informer(CLUSTER_SERVING_RUNTIMES)
        self.services = factory.informer(
            INFERENCE_SERVICES,
            indexers={Index.RUNTIME_NAME: service_runtime_index, Index.PINNED: pinned_index},
        )
        self.reconciler = RuntimeRevisionReconciler(
            client=client,
            namespace=namespace,
            revisions=self.revisions.store,
            runtimes=self.runtimes.store,
            cluster_runtimes=self.cluster_runtimes.store,
            services=self.services.store,
            settings=Settings(retention=retention, grace_period=dt.timedelta(seconds=grace_period)),
            clock=self._clock,
        )
        self.controller = worker_pool(
            CONTROLLER_NAME, self.reconciler, workers=WORKERS, clock=self._clock
        )
        self.watch(self.revisions, self._each(runtime_of_index))
        self.watch(self.runtimes, self._each(name_index))
        self.watch(self.cluster_runtimes, self._each(name_index))
        self.watch(
            self.services,
            Handlers(
                on_add=self._service_event,
                on_update=self._service_update,
                on_delete=self._service_event,
            ),
        )

    def _add(self, names: set[str] | tuple[str, ...]) -> None:
        for name in names:
            self.controller.queue.add(name)

    def _each(self, keys: Callable[[Obj], tuple[str, ...]]) -> Handlers:
        def handle(obj: Obj) -> None:
            self._add(keys(obj))

        def update(old: Obj, new: Obj) -> None:
            self._add(set(keys(old)) | set(keys(new)))

        return Handlers(on_add=handle, on_update=update, on_delete=handle)

    def _service_names(self, isvc: Obj) -> set[str]:
        """The runtime names an InferenceService bears on: the one it names, and those of
        the revisions it pins (found in the revision cache by name)."""
        names = set(service_runtime_index(isvc))
        for pinned in observe.pins(isvc):
            rev = self.revisions.store.get(f"{self.reconciler.namespace}/{pinned}")
            if rev is not None:
                names.update(runtime_of_index(rev))
        return names

    def _service_event(self, isvc: Obj) -> None:
        self._add(self._service_names(isvc))

    def _service_update(self, old: Obj, new: Obj) -> None:
        before, after = observe.service_use(old), observe.service_use(new)
        if before == after:
            return
        self._add(self._service_names(old) | self._service_names(new))
