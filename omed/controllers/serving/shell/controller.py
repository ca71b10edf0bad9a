"""The serving controller's wiring: informers, the events that enqueue InferenceReplicas, and
the workqueue's workers that run :class:`~.reconciler.ServingReconciler`.

Watches, all label-scoped or shared:

* InferenceReplicas (the informer the other controllers share): every event is the key;
* the product's pod cache (pods labelled ``ome.io/inferenceservice``, shared with the
  InferenceReplica controller): a pod's add and delete, and an update that changes its
  revision or runner labels, wake its controlling InferenceReplica (the revisions pods run,
  and whether they all carry ``ome.io/runner``, are all this controller reads of pods; a
  status change can't move them);
* Services and PodDisruptionBudgets labelled ``ome.io/inferenceservice``: an event wakes the
  InferenceReplica that controls the object, or, for one no controller owns, the replica of
  its identity (``{isvc}-{component}``, or a standalone one named ``{isvc}``) that may adopt it.

The config cache is read on each pass, not watched: an edit of the ``podDisruptionBudget``
entry reaches each component the next time it is reconciled, as for every reconcile-time
entry.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from omed.api.constants import (
    KIND_INFERENCE_REPLICA,
    LABEL_COMPONENT,
    LABEL_INFERENCE_SERVICE,
    LABEL_REVISION,
    LABEL_REVISION_HASH,
    LABEL_RUNNER,
)
from omed.clock import Clock, RealClock
from omed.controllers.owners import controller_name
from omed.controllers.serving.core import names
from omed.controllers.serving.shell.reconciler import COMPONENT, ConfigData, ServingReconciler
from omed.controllers.wiring import WiredController, each_event, worker_pool
from omed.events import EventSink
from omed.informers import (
    OWNER_UID,
    Handlers,
    InformerFactory,
    SharedInformer,
    inference_pod_informer,
    object_key,
    owner_uid_index,
)
from omed.informers.transform import Obj
from omed.kube.api import KubeApi
from omed.kube.resources import INFERENCE_REPLICAS, POD_DISRUPTION_BUDGETS, SERVICES


def component_index(obj: Obj) -> tuple[str, ...]:
    """``namespace/<ome.io/inferenceservice>/<component>`` of a labelled object."""
    meta = obj["metadata"]
    labels = meta.get("labels") or {}
    isvc, component = labels.get(LABEL_INFERENCE_SERVICE), labels.get(LABEL_COMPONENT)
    if isvc is None or component is None:
        return ()
    return (f"{meta.get('namespace')}/{isvc}/{component}",)


_REVISION_LABELS = (LABEL_REVISION, LABEL_REVISION_HASH, LABEL_RUNNER)


def _revision_labels(pod: Mapping[str, Any]) -> tuple[Any, ...]:
    labels = (pod.get("metadata") or {}).get("labels") or {}
    return tuple(labels.get(label) for label in _REVISION_LABELS)


class ServingController(WiredController):
    """Informers and the worker pool of the serving controller."""

    def __init__(
        self,
        *,
        client: KubeApi,
        factory: InformerFactory,
        config: ConfigData,
        events: EventSink | None = None,
        workers: int = 1,
        namespace: str | None = None,
        clock: Clock | None = None,
    ) -> None:
        """``config`` returns the inferenceservice-config data (through the TTL cache);
        ``events`` records the WriteRefused Warning events on InferenceReplicas."""
        super().__init__()
        self._clock: Clock = clock or RealClock()
        self.replicas: SharedInformer = factory.informer(INFERENCE_REPLICAS, namespace=namespace)
        self.pods: SharedInformer = inference_pod_informer(factory, namespace=namespace)
        indexers = {OWNER_UID: owner_uid_index, COMPONENT: component_index}
        self.services: SharedInformer = factory.informer(
            SERVICES, namespace=namespace, label_selector=LABEL_INFERENCE_SERVICE, indexers=indexers
        )
        self.budgets: SharedInformer = factory.informer(
            POD_DISRUPTION_BUDGETS, namespace=namespace, label_selector=LABEL_INFERENCE_SERVICE
        )
        self.reconciler = ServingReconciler(
            client=client,
            replicas=self.replicas.store,
            pods=self.pods.store,
            services=self.services.store,
            budgets=self.budgets.store,
            config=config,
            events=events,
            requeues=lambda key: self.controller.queue.num_requeues(key),  # noqa: PLW0108 - below
            clock=self._clock,
        )
        self.controller = worker_pool(
            names.CONTROLLER_NAME, self.reconciler, workers=workers, clock=self._clock
        )
        self.watch(self.replicas, each_event(self._replica_event))
        self.watch(
            self.pods,
            Handlers(on_add=self._pod_event, on_update=self._pod_update, on_delete=self._pod_event),
        )
        self.watch(self.services, each_event(self._owned_event))
        self.watch(self.budgets, each_event(self._owned_event))

    def _replica_event(self, irep: Obj) -> None:
        self.controller.queue.add(object_key(irep))

    def _owner(self, obj: Mapping[str, Any]) -> str | None:
        name = controller_name(obj, kind=KIND_INFERENCE_REPLICA)
        if name is None:
            return None
        return f"{(obj.get('metadata') or {}).get('namespace')}/{name}"

    def _pod_event(self, pod: Obj) -> None:
        key = self._owner(pod)
        if key is not None:
            self.controller.queue.add(key)

    def _pod_update(self, old: Obj, new: Obj) -> None:
        if _revision_labels(old) != _revision_labels(new):
            self._pod_event(new)

    def _owned_event(self, obj: Obj) -> None:
        key = self._owner(obj)
        if key is not None:
            self.controller.queue.add(key)
            return
        if obj["metadata"].get("ownerReferences") and any(
            ref.get("controller") for ref in obj["metadata"]["ownerReferences"]
        ):
            return  # another controller's
        labels = obj["metadata"].get("labels") or {}
        isvc, component = labels.get(LABEL_INFERENCE_SERVICE), labels.get(LABEL_COMPONENT)
        namespace = obj["metadata"].get("namespace")
        for name in (f"{isvc}-{component}", isvc):
            candidate = f"{namespace}/{name}"
            if isvc and component and self.replicas.store.get(candidate) is not None:
                self.controller.queue.add(candidate)
