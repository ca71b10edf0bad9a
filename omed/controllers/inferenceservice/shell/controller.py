"""The InferenceService controller's wiring: its informers, the event handlers that enqueue
InferenceServices, and the workqueue's workers that run the
:class:`~.reconciler.InferenceServiceReconciler`.

Replicas and runtimes are looked up by index, never by a scan: every replica event and every
pass would otherwise read all InferenceServices or replicas (quadratic in a fleet).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from omed.api.constants import KIND_INFERENCE_SERVICE, LABEL_INFERENCE_SERVICE, LABEL_RUNTIME_OF
from omed.clock import Clock, RealClock
from omed.controllers.inferenceservice.core.names import CONTROLLER_NAME
from omed.controllers.inferenceservice.shell.reconciler import (
    DefaultMode,
    InferenceServiceReconciler,
)
from omed.controllers.owners import controller_name
from omed.controllers.wiring import WiredController, each_event, worker_pool
from omed.events import EventSink
from omed.informers import (
    NAMESPACE,
    OWNER_UID,
    InformerFactory,
    SharedInformer,
    object_key,
    owner_uid_index,
)
from omed.informers.transform import Obj
from omed.kube.client import KubeClient
from omed.kube.resources import (
    CLUSTER_SERVING_RUNTIMES,
    CONTROLLER_REVISIONS,
    INFERENCE_REPLICAS,
    INFERENCE_SERVICES,
    SERVING_RUNTIMES,
)


async def _no_default_mode() -> str | None:
    return None


def _parent_of(irep: Mapping[str, Any]) -> str | None:
    """The key of the InferenceService an InferenceReplica event is for: its controller, else
    the one its ``ome.io/inferenceservice`` label names."""
    meta = irep.get("metadata") or {}
    name = controller_name(irep, kind=KIND_INFERENCE_SERVICE) or (
        (meta.get("labels") or {}).get(LABEL_INFERENCE_SERVICE)
    )
    return f"{meta.get('namespace')}/{name}" if name else None


REPLICA_REF: Final = "replica-ref"
"""Index of InferenceServices by the replicas they front: ``namespace/<replicaRefs[].name>``."""


def replica_ref_index(isvc: Obj) -> tuple[str, ...]:
    spec = isvc.get("spec")
    refs = spec.get("replicaRefs") if isinstance(spec, dict) else None
    if not refs or not isinstance(refs, list):
        return ()
    namespace = isvc["metadata"].get("namespace")
    return tuple(
        dict.fromkeys(
            f"{namespace}/{ref['name']}"
            for ref in refs
            if isinstance(ref, dict) and isinstance(ref.get("name"), str)
        )
    )


class InferenceServiceController(WiredController):
    """Informers and the worker pool of the InferenceService controller."""

    def __init__(
        self,
        *,
        client: KubeClient,
        factory: InformerFactory,
        workers: int = 1,
        default_mode: DefaultMode = _no_default_mode,
        namespace: str | None = None,
        clock: Clock | None = None,
        events: EventSink | None = None,
        revision_namespace: str | None = None,
    ) -> None:
        """``events`` records the WriteRefused Warning events on InferenceServices (without
        it a refused write is told by the log line and the condition only).
        ``revision_namespace`` (the manager's) is where the runtime revisions are: with it,
        services may pin one (``autoSync: false``); without it, all render the live
        runtime."""
        super().__init__()
        self._clock: Clock = clock or RealClock()
        # Looked up by index, not by a scan of the namespace: every replica event and every
        # pass would otherwise read all InferenceServices or replicas (quadratic in a fleet).
        self.services = factory.informer(
            INFERENCE_SERVICES, namespace=namespace, indexers={REPLICA_REF: replica_ref_index}
        )
        self.replicas = factory.informer(
            INFERENCE_REPLICAS, namespace=namespace, indexers={OWNER_UID: owner_uid_index}
        )
        self.runtimes = factory.informer(SERVING_RUNTIMES, namespace=namespace)
        self.cluster_runtimes = factory.informer(CLUSTER_SERVING_RUNTIMES)
        # The runtime revision controller's informer (same scope and selector: one cache).
        self.revisions: SharedInformer | None = (
            factory.informer(
                CONTROLLER_REVISIONS, namespace=revision_namespace, label_selector=LABEL_RUNTIME_OF
            )
            if revision_namespace
            else None
        )
        self.reconciler = InferenceServiceReconciler(
            client=client,
            services=self.services,
            replicas=self.replicas,
            busy=lambda: self.controller.busy(),  # noqa: PLW0108 - made below
            runtimes=self.runtimes,
            cluster_runtimes=self.cluster_runtimes,
            requeues=lambda key: self.controller.queue.num_requeues(key),  # noqa: PLW0108 - below
            default_mode=default_mode,
            clock=self._clock,
            events=events,
            revisions=self.revisions,
            revision_namespace=revision_namespace,
        )
        self.controller = worker_pool(
            CONTROLLER_NAME, self.reconciler, workers=workers, clock=self._clock
        )
        self.watch(self.services, each_event(self._service_event))
        self.watch(self.replicas, each_event(self._replica_event))
        self.watch(self.runtimes, each_event(self._runtime_event))
        self.watch(self.cluster_runtimes, each_event(self._runtime_event))
        if self.revisions is not None:
            self.watch(self.revisions, each_event(self._revision_event))

    def _service_event(self, isvc: Obj) -> None:
        self.controller.queue.add(object_key(isvc))

    def _replica_event(self, irep: Obj) -> None:
        parent = _parent_of(irep)
        if parent is not None:
            self.controller.queue.add(parent)
        # Standalone replicas may be fronted through spec.replicaRefs.
        meta = irep.get("metadata") or {}
        ref = f"{meta.get('namespace')}/{meta.get('name')}"
        for isvc in self.services.store.by_index(REPLICA_REF, ref):
            self.controller.queue.add(object_key(isvc))

    def _revision_event(self, revision: Obj) -> None:
        """A runtime revision written or gone wakes the services that name its runtime (a
        pin waits for the revision of the live spec) and those that pin it by name."""
        meta = revision.get("metadata") or {}
        runtime = (meta.get("labels") or {}).get(LABEL_RUNTIME_OF)
        name = meta.get("name")
        for isvc in self.services.store.list():
            ref = (isvc.get("spec") or {}).get("runtime") or {}
            if ref.get("autoSync") is not False:
                continue
            pinned = (isvc.get("status") or {}).get("pinnedRevisionName")
            if ref.get("name") == runtime or name in (ref.get("revision"), pinned):
                self.controller.queue.add(object_key(isvc))

    def _runtime_event(self, runtime: Obj) -> None:
        meta = runtime.get("metadata") or {}
        name, namespace = meta.get("name"), meta.get("namespace")
        candidates: Any = (
            self.services.store.by_index(NAMESPACE, str(namespace))
            if namespace
            else self.services.store.list()
        )
        for isvc in candidates:
            if ((isvc.get("spec") or {}).get("runtime") or {}).get("name") == name:
                self.controller.queue.add(object_key(isvc))
