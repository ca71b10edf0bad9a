"""The InferenceReplica controller: informers in, reconciles by a worker pool out.

Why: this module wires the reconciler (:mod:`.reconciler`) to the product: its shared
informers (InferenceReplicas in every namespace, the product's pod cache of pods labelled
``ome.io/inferenceservice``, the InferenceReplica ControllerRevisions, labelled
``ome.io/managed-by=OMENative`` with a ``component``, the EndpointSlices of omed's Services,
the InferenceServices (their migration request annotations, the replicas' mailbox),
the stripped node cache, :mod:`omed.informers.nodes`, and, when the PodGroup CRD was present
at start, the PodGroups labelled as the revisions are), maps pod, revision, slice, node and
PodGroup events to the InferenceReplicas they concern (a pod's by its controller owner
reference), keeps the expectations current, and runs a workqueue
:class:`~omed.workqueue.Controller` whose reconciler is :class:`InferenceReplicaReconciler`.

Wiring, for the manager::

    factory = InformerFactory(client)
    irep = InferenceReplicaController(
        client=client, factory=factory, events=recorder,
        settings=PlanSettings.from_config(startup.lifecycle_scale),
        workers=options.inferencereplica_max_concurrent_reconciles,
    )
    factory.start()
    await factory.wait_for_cache_sync()
    await irep.run()            # until irep.shutdown()

Deletion beside the garbage collector (docs/controllers.md, "Deletion and the garbage
collector"): omed's finalizer holds a deleted InferenceReplica, and so the collector's
background deletion of its pods, until omed has drained them. Pods whose ownership the
collector or a user decided are sorted by :mod:`..core.orphans` and read again by
:mod:`.ownership`: pods no controller owns, named
and labelled as this InferenceReplica's (an earlier one of its name was deleted with
``propagationPolicy: Orphan``), are adopted before anything is planned; pods still
controlled by an earlier or gone InferenceReplica of the name (its finalizer was removed by
hand, and the collector, which deletes them at once, hasn't yet: it lags, or there is none)
are drained and deleted, once a read from the API server confirms the InferenceReplica is
gone or replaced and the pod still names it as its controller.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from omed.api.migrationrequest import requests_of
from omed.clock import Clock, RealClock
from omed.config.lifecycle import LifecycleConfig
from omed.controllers.inferencereplica.core import names
from omed.controllers.inferencereplica.core.encoding import (
    StatusEncodingSettings,
)
from omed.controllers.inferencereplica.core.migrationview import request_components
from omed.controllers.inferencereplica.core.model import PlanSettings
from omed.controllers.inferencereplica.core.orphans import (
    candidate_keys,
    owner_key,
    unowned,
)
from omed.controllers.inferencereplica.core.podgroups import POD_GROUP_SELECTOR
from omed.controllers.inferencereplica.core.revisions import REVISION_SELECTOR
from omed.controllers.inferencereplica.shell import statusmetrics
from omed.controllers.inferencereplica.shell.expectations import DEFAULT_TIMEOUT, Expectations
from omed.controllers.inferencereplica.shell.reconciler import InferenceReplicaReconciler
from omed.controllers.wiring import WiredController, each_event, worker_pool
from omed.events import EventSink
from omed.informers import (
    NAMESPACE,
    Handlers,
    InformerFactory,
    SharedInformer,
    inference_pod_informer,
    namespace_index,
    object_key,
)
from omed.informers.endpoints import endpoint_slice_informer
from omed.informers.nodes import POD_NODE, node_informer, pod_node_index
from omed.informers.transform import Obj
from omed.kube.api import KubeApi
from omed.kube.resources import (
    CONTROLLER_REVISIONS,
    INFERENCE_REPLICAS,
    INFERENCE_SERVICES,
    POD_GROUPS,
)
from omed.workqueue.ratelimit import RateLimiter


class InferenceReplicaController(WiredController):
    """Informers, expectations and the worker pool of the InferenceReplica controller.

    ``status_encoding`` is the omenativeStatus block (DenseV1 and no bound by default) and
    the write size above which a ColumnarV2-stored InferenceReplica stays ColumnarV2 under
    DenseV1 (:data:`~..core.encoding.STATUS_SIZE_LIMIT`; tests lower it); ``lifecycle`` reads
    the fleet-wide ``lifecycle`` settings at each pass (the manager reads them through the
    config cache; ``None``: none configured).
    """

    def __init__(
        self,
        *,
        client: KubeApi,
        factory: InformerFactory,
        events: EventSink,
        settings: PlanSettings,
        workers: int = 4,
        namespace: str | None = None,
        clock: Clock | None = None,
        expectation_timeout: float = DEFAULT_TIMEOUT,
        rate_limiter: RateLimiter | None = None,
        status_encoding: StatusEncodingSettings | None = None,
        lifecycle: Callable[[], Awaitable[LifecycleConfig]] | None = None,
        endpoints: bool = True,
        nodes: bool = True,
    ) -> None:
        super().__init__()
        self._clock: Clock = clock or RealClock()
        self.replicas: SharedInformer = factory.informer(INFERENCE_REPLICAS, namespace=namespace)
        self.pods: SharedInformer = inference_pod_informer(factory, namespace=namespace)
        self.slices: SharedInformer | None = (
            endpoint_slice_informer(factory, namespace=namespace) if endpoints else None
        )
        self.nodes: SharedInformer | None = node_informer(factory) if nodes else None
        if self.nodes is not None:
            self.pods.add_indexers({POD_NODE: pod_node_index})
        # InferenceReplica revisions only: runtime revisions (ome.io/runtime-of) carry no
        # component label and stay out of this cache.
        self.revisions: SharedInformer = factory.informer(
            CONTROLLER_REVISIONS,
            namespace=namespace,
            label_selector=REVISION_SELECTOR,
            indexers={NAMESPACE: namespace_index},
        )
        # Only when the PodGroup CRD was there at start: without it the list would fail for
        # good, and the caches would never sync.
        self.pod_groups: SharedInformer | None = (
            factory.informer(
                POD_GROUPS,
                namespace=namespace,
                label_selector=POD_GROUP_SELECTOR,
                indexers={NAMESPACE: namespace_index},
            )
            if settings.pod_groups
            else None
        )
        # The parent InferenceServices: their migration request annotations are the mailbox
        # the replicas take requests from (shared with the InferenceService controller).
        self.services: SharedInformer = factory.informer(INFERENCE_SERVICES, namespace=namespace)
        self.expectations = Expectations(clock=self._clock, timeout=expectation_timeout)
        self.reconciler = InferenceReplicaReconciler(
            client=client,
            replicas=self.replicas.store,
            pods=self.pods.store,
            revisions=self.revisions.store,
            pod_groups=self.pod_groups.store if self.pod_groups is not None else None,
            events=events,
            settings=settings,
            expectations=self.expectations,
            clock=self._clock,
            status_encoding=status_encoding,
            busy=lambda: self.controller.busy(),  # noqa: PLW0108 - made below
            requeues=lambda key: self.controller.queue.num_requeues(key),  # noqa: PLW0108 - below
            lifecycle=lifecycle,
            slices=self.slices.store if self.slices is not None else None,
            nodes=self.nodes if self.nodes is not None else None,
            services=self.services.store,
        )
        self.controller = worker_pool(
            names.CONTROLLER_NAME,
            self.reconciler,
            workers=workers,
            clock=self._clock,
            rate_limiter=rate_limiter,
        )
        self.watch(self.replicas, each_event(self._replica_event))
        self.watch(
            self.pods,
            Handlers(
                on_add=self._pod_seen,
                on_update=lambda _old, new: self._pod_seen(new),
                on_delete=self._pod_gone,
            ),
        )
        self.watch(self.revisions, each_event(self._revision_event))
        self.watch(
            self.services,
            Handlers(
                on_add=lambda new: self._service_event(None, new),
                on_update=self._service_event,
                on_delete=lambda _old: None,
            ),
        )
        if self.nodes is not None:
            self.watch(
                self.nodes,
                Handlers(
                    on_add=lambda new: self._node_event(None, new),
                    on_update=self._node_event,
                    on_delete=lambda old: self._node_event(None, old),
                ),
            )
        if self.slices is not None:
            self.watch(self.slices, each_event(self._wake_candidates))
        if self.pod_groups is not None:
            self.watch(self.pod_groups, each_event(self._revision_event))

    def _service_event(self, old: Obj | None, new: Obj) -> None:
        """An InferenceService with migration requests (or whose requests changed): wake its
        InferenceReplicas, which take them (an annotation-only change reaches no replica's
        spec, so nothing else would wake them)."""
        wanted = request_components(new)
        if wanted is None:
            return
        if old is not None and requests_of(
            (old.get("metadata") or {}).get("annotations")
        ) == requests_of((new.get("metadata") or {}).get("annotations")):
            return
        meta = new.get("metadata") or {}
        for component in sorted(wanted):
            key = f"{meta.get('namespace')}/{meta.get('name')}-{component}"
            if self.replicas.store.get(key) is not None:
                self.controller.queue.add(key)

    def _node_event(self, old: Obj | None, new: Obj) -> None:
        """A node changed (its Ready condition or lifecycle taints; an equal object is a
        heartbeat and wakes nothing), or went: wake every InferenceReplica with a pod on it."""
        if old is not None and old == new:
            return
        name = str((new.get("metadata") or {}).get("name") or "")
        for pod in self.pods.store.by_index(POD_NODE, name):
            key = owner_key(pod)
            if key is not None:
                self.controller.queue.add(key)

    def _wake_candidates(self, obj: Obj) -> None:
        """Wake the cached InferenceReplica that ``obj``'s labels name: the one whose traffic
        Service a slice serves (the slice carries the Service's ``ome.io/inferenceservice``
        and ``component`` labels), or the one of an orphan pod's name, which may adopt it."""
        for key in candidate_keys(obj):
            if self.replicas.store.get(key) is not None:
                self.controller.queue.add(key)

    def _revision_event(self, obj: Obj) -> None:
        """A ControllerRevision or PodGroup changed: wake the replica that controls it."""
        key = owner_key(obj)
        if key is not None:
            self.controller.queue.add(key)

    def _replica_event(self, obj: Obj) -> None:
        self.controller.queue.add(object_key(obj))

    def _pod_seen(self, pod: Obj) -> None:
        key = owner_key(pod)
        if key is not None:
            self.expectations.observe(key, pod)
            self.controller.queue.add(key)
        elif unowned(pod):
            # An orphan (an Orphan deletion left it): the replica of its name may adopt it.
            self._wake_candidates(pod)

    def _pod_gone(self, pod: Obj) -> None:
        key = owner_key(pod)
        if key is not None:
            self.expectations.observe_gone(key, pod)
            self.controller.queue.add(key)

    async def run(self) -> None:
        """Run the workers until :meth:`shutdown` (the manager has started the informers and
        waited for their caches). Only the leader runs it, so only the leader exports the
        status-encoding series."""
        statusmetrics.leading()
        await super().run()
