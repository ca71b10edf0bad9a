"""The InferenceService controller: one InferenceReplica per OMENative component, and the
InferenceService's status aggregated from them.

It is the only writer of InferenceReplica specs (the InferenceReplica controller writes their
status); each replica carries ``spec.parentRef``, the ``ome.io/inferenceservice`` label, a
controller owner reference and ``ome.io/controller-write: "true"``. Level-triggered: a
reconcile reads the InferenceService, its runtime and its replicas from the caches, projects
(:mod:`.project`) and writes only what differs. A reconcile that changes nothing writes
nothing.

Deletion beside the garbage collector (docs/controllers.md, "Deletion and the garbage
collector"): the finalizer ``ome.io/inferenceservice-cleanup`` holds the InferenceService
until its replicas are gone, and this controller deletes them itself rather than leave them
to the collector's background deletion, which would start only once the InferenceService is
gone: the service stays visible (Terminating) while its pods drain, its name isn't taken
again over replicas still draining, and the teardown doesn't wait on the collector's
timing. The InferenceReplica controller drains each replica's pods before it lets the
replica go. A deletion with ``propagationPolicy: Orphan`` is honoured: no replica is
deleted, and the finalizer goes once the collector has taken the replicas' owner
references off; an InferenceService created again adopts those replicas (no controller
owns them, and their label, ``spec.parentRef`` and component name it), after a fresh read
shows it isn't being deleted itself. Under ``propagationPolicy: Foreground`` the collector
deletes the replicas, and their pods, itself: omed's drain can't come before that.

A write the API server refuses for good (:mod:`omed.controllers.refusals`: the finalizer
patches, an InferenceReplica's create, update or delete, the status write) doesn't stop the
other components' writes; the pass reports it (a Warning ``WriteRefused`` event on the
InferenceService, a WARNING line), shows it as condition ``WriteRefused`` in the status it
writes at its end (a refused finalizer patch also makes Ready False with reason
WriteRefused, since nothing may be created before it), and the key goes back through the
workqueue's rate limiter. The pass that meets no refusal writes the status without it.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final

from omed.api.constants import (
    CONDITION_READY,
    DEPLOYMENT_MODE_OME_NATIVE,
    KIND_CLUSTER_SERVING_RUNTIME,
    KIND_INFERENCE_SERVICE,
    LABEL_INFERENCE_SERVICE,
)
from omed.clock import Clock, RealClock
from omed.controllers.deletion import controller_ref, orphaning
from omed.controllers.inferenceservice.project import (
    ProjectionError,
    needs_update,
    project,
    resolve_mode,
    update_patch,
)
from omed.controllers.inferenceservice.status import (
    ComponentReadiness,
    build_status,
    replica_readiness,
    status_changed,
    status_urgent,
    with_write_refused,
)
from omed.controllers.pacing import BUSY_WINDOW, StatusPacer
from omed.controllers.refusals import (
    REASON_WRITE_REFUSED,
    RefusedWrite,
    failed_test,
    first_of_each_kind,
    refused_write,
    report,
)
from omed.events import EventSink
from omed.informers import (
    NAMESPACE,
    OWNER_UID,
    Handlers,
    InformerFactory,
    SharedInformer,
    object_key,
    owner_uid_index,
)
from omed.informers.transform import Obj
from omed.kube.client import JSON_PATCH, KubeClient
from omed.kube.errors import AlreadyExists, ApiError, Conflict, NotFound
from omed.kube.resources import (
    CLUSTER_SERVING_RUNTIMES,
    INFERENCE_REPLICAS,
    INFERENCE_SERVICES,
    SERVING_RUNTIMES,
)
from omed.log import kv
from omed.workqueue import Controller, Result

log = logging.getLogger("omed.controllers.inferenceservice")

CONTROLLER_NAME: Final = "inferenceservice"
FINALIZER: Final = "ome.io/inferenceservice-cleanup"
DELETION_POLL: Final = 1.0
"""Seconds between looks at replicas being drained during a deletion (events drive it too)."""

DefaultMode = Callable[[], Awaitable[str | None]]

Refusals = list[RefusedWrite]
"""The writes one pass had refused, in the order met."""


def _refusal(err: ApiError, *, verb: str, resource: str, name: str) -> RefusedWrite:
    """``err`` as a refusal, or ``err`` raised again when it is something else (the
    controller's other failures, a finalizer patch whose resourceVersion test failed
    included, are retried as errors)."""
    refusal = (
        None if failed_test(err) else refused_write(err, verb=verb, resource=resource, name=name)
    )
    if refusal is None:
        raise err
    return refusal


async def _no_default_mode() -> str | None:
    return None


def _parent_of(irep: Mapping[str, Any]) -> str | None:
    meta = irep.get("metadata") or {}
    for owner in meta.get("ownerReferences") or []:
        if owner.get("controller") and owner.get("kind") == KIND_INFERENCE_SERVICE:
            return f"{meta.get('namespace')}/{owner.get('name')}"
    label = (meta.get("labels") or {}).get(LABEL_INFERENCE_SERVICE)
    return f"{meta.get('namespace')}/{label}" if label else None


def _ready(status: Mapping[str, Any]) -> bool:
    return any(
        c.get("type") == CONDITION_READY and c.get("status") == "True"
        for c in status.get("conditions") or ()
    )


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


def _adoptable(current: Mapping[str, Any], wanted: Mapping[str, Any]) -> bool:
    """Whether ``current`` (the replica of the wanted name) is one an InferenceService may
    adopt: no controller owns it, it isn't being deleted, and its ``ome.io/inferenceservice``
    label, ``spec.parentRef`` and component are the ones the projection wants."""
    meta = current.get("metadata") or {}
    if controller_ref(current) is not None or meta.get("deletionTimestamp"):
        return False
    spec = current.get("spec") or {}
    want_spec = wanted.get("spec") or {}
    label = (meta.get("labels") or {}).get(LABEL_INFERENCE_SERVICE)
    return bool(
        label == wanted["metadata"]["labels"][LABEL_INFERENCE_SERVICE]
        and (spec.get("parentRef") or {}).get("name") == want_spec["parentRef"]["name"]
        and spec.get("component") == want_spec["component"]
    )


def _owned_by(irep: Mapping[str, Any], uid: str) -> bool:
    owners = (irep.get("metadata") or {}).get("ownerReferences") or []
    return any(o.get("controller") and o.get("uid") == uid for o in owners)


class InferenceServiceReconciler:
    def __init__(
        self,
        *,
        client: KubeClient,
        services: SharedInformer,
        replicas: SharedInformer,
        runtimes: SharedInformer,
        cluster_runtimes: SharedInformer,
        default_mode: DefaultMode,
        clock: Clock,
        busy: Callable[[], bool] = lambda: False,
        events: EventSink | None = None,
        requeues: Callable[[str], int] = lambda _key: 0,
    ) -> None:
        self._client = client
        self._events = events
        self._requeues = requeues
        """The key's back-off step in the workqueue's rate limiter (for the refusal log)."""
        self._pacer = StatusPacer(clock=clock, busy=busy)
        self._services = services.store
        self._replicas = replicas.store
        self._runtimes = runtimes.store
        self._cluster_runtimes = cluster_runtimes.store
        self._default_mode = default_mode
        self._clock = clock
        """monotonic time of each InferenceService's last status write, or of its first sight
        while its first status waits (for the pacing)"""

    def _runtime(self, isvc: Mapping[str, Any]) -> Mapping[str, Any] | None:
        ref = (isvc.get("spec") or {}).get("runtime") or {}
        name = ref.get("name")
        if not name:
            return None
        namespace = (isvc.get("metadata") or {}).get("namespace")
        if ref.get("kind") != KIND_CLUSTER_SERVING_RUNTIME:
            found = self._runtimes.get(f"{namespace}/{name}")
            if found is not None or ref.get("kind"):
                return found
        return self._cluster_runtimes.get(str(name))

    async def reconcile(self, key: str) -> Result:
        isvc: Mapping[str, Any] | None = self._services.get(key)
        if isvc is None:
            self._pacer.forget(key)
            return Result()
        refusals: Refusals = []
        if (isvc.get("metadata") or {}).get("deletionTimestamp"):
            result = await self._finalize(isvc, refusals)
        else:
            result = await self._reconcile(isvc, refusals)
        if not refusals:
            return result
        report(
            refusals,
            key=key,
            involved=isvc,
            events=self._events,
            logger=log,
            requeues=self._requeues(key),
        )
        return Result(requeue=True)  # the rate limiter's back-off, not the pace's timer

    async def _reconcile(self, isvc: Mapping[str, Any], refusals: Refusals) -> Result:
        meta = isvc.get("metadata") or {}
        runtime = self._runtime(isvc)
        default_mode = await self._default_mode()
        mode, _ = resolve_mode(isvc, runtime, default_mode)
        if mode != DEPLOYMENT_MODE_OME_NATIVE:
            return Result()  # another mode's controller owns it
        if FINALIZER not in (meta.get("finalizers") or []):
            try:
                patched = await self._patch_finalizers(
                    isvc, [*(meta.get("finalizers") or []), FINALIZER]
                )
            except ApiError as err:
                refusal = _refusal(
                    err, verb="patch", resource=INFERENCE_SERVICES.plural, name=str(meta["name"])
                )
                refusals.append(refusal)
                # Nothing may be created before the finalizer: the status says why.
                await self._write_status(
                    isvc,
                    components=(),
                    failure=(REASON_WRITE_REFUSED, refusal.message()),
                    refusals=refusals,
                )
                return Result()
            if patched is None:
                return Result()  # gone
            # The finalizer is on before anything is created: carry on in this pass with the
            # object the API server returned (not after a trip through the watch and the back
            # of the queue, which in a fleet put every service's replicas behind every other
            # service's finalizer).
            isvc = patched
            meta = isvc.get("metadata") or {}
        try:
            projection = project(isvc, runtime, default_mode=default_mode)
        except ProjectionError as err:
            wait = await self._write_status(
                isvc, components=(), failure=(err.reason, str(err)), refusals=refusals
            )
            return Result(requeue_after=wait) if wait else Result()
        namespace = str(meta.get("namespace"))
        uid = str(meta.get("uid"))
        readiness: list[ComponentReadiness] = []
        for component, wanted in projection.replicas.items():
            name = wanted["metadata"]["name"]
            current = self._replicas.get(f"{namespace}/{name}")
            if current is None:
                try:
                    await self._client.create(INFERENCE_REPLICAS, wanted, namespace)
                    log.info(
                        "Created InferenceReplica",
                        extra=kv(namespace=namespace, inferenceReplica=name),
                    )
                except AlreadyExists:
                    pass  # the cache is behind; the next pass compares
                except ApiError as err:
                    refusals.append(
                        _refusal(err, verb="create", resource=INFERENCE_REPLICAS.plural, name=name)
                    )
            elif not _owned_by(current, uid) and _adoptable(current, wanted):
                try:
                    adopted = await self._adopt(isvc, current, wanted)
                except (Conflict, NotFound):
                    return Result(requeue=True)
                except ApiError as err:
                    refusals.append(
                        _refusal(err, verb="patch", resource=INFERENCE_REPLICAS.plural, name=name)
                    )
                else:
                    if adopted is None:
                        return Result(requeue_after=DELETION_POLL)  # going away: look again
                    current = adopted
            elif not _owned_by(current, uid):
                wait = await self._write_status(
                    isvc,
                    components=(),
                    failure=(
                        "InferenceReplicaConflict",
                        f"InferenceReplica {name} exists and is not controlled by this "
                        "InferenceService",
                    ),
                    refusals=refusals,
                )
                return Result(requeue_after=wait) if wait else Result()
            elif needs_update(current, wanted):
                try:
                    current = await self._client.patch(
                        INFERENCE_REPLICAS, name, update_patch(current, wanted), namespace
                    )
                except Conflict:
                    return Result(requeue=True)
                except NotFound:
                    return Result(requeue=True)  # gone meanwhile: the next pass creates it
                except ApiError as err:
                    refusals.append(
                        _refusal(err, verb="patch", resource=INFERENCE_REPLICAS.plural, name=name)
                    )
            readiness.append(replica_readiness(component, current))
        for irep in self._replicas.by_index(OWNER_UID, uid):
            owned_component = (irep.get("spec") or {}).get("component")
            if _owned_by(irep, uid) and owned_component not in projection.replicas:
                await self._delete_replica(irep, refusals)
        fronted = [
            replica_readiness(name, self._replicas.get(f"{namespace}/{name}"))
            for name in projection.fronted
        ]
        for item, name in zip(fronted, projection.fronted, strict=True):
            item.summary.setdefault("inferenceReplica", name)
        wait = await self._write_status(
            isvc, components=readiness, fronted=fronted, refusals=refusals
        )
        return Result(requeue_after=wait) if wait else Result()

    async def _finalize(self, isvc: Mapping[str, Any], refusals: Refusals) -> Result:
        meta = isvc.get("metadata") or {}
        if FINALIZER not in (meta.get("finalizers") or []):
            return Result()
        namespace = str(meta.get("namespace"))
        uid = str(meta.get("uid"))
        owned = [i for i in self._replicas.by_index(OWNER_UID, uid) if _owned_by(i, uid)]
        # Under propagationPolicy Orphan the replicas stay: the collector takes the owner
        # references off, and the finalizer goes once none is left owned.
        for irep in () if orphaning(isvc) else owned:
            if not (irep.get("metadata") or {}).get("deletionTimestamp"):
                await self._delete_replica(irep, refusals)
        if owned:
            await self._show_refusal(isvc, refusals)
            return Result(requeue_after=DELETION_POLL)
        # The cache says none is left: confirm with the API server before letting go.
        listed = await self._client.list_page(
            INFERENCE_REPLICAS,
            namespace,
            labelSelector=f"{LABEL_INFERENCE_SERVICE}={meta.get('name')}",
        )
        if any(_owned_by(i, uid) for i in listed.get("items") or []):
            await self._show_refusal(isvc, refusals)
            return Result(requeue_after=DELETION_POLL)
        try:
            await self._patch_finalizers(
                isvc, [f for f in meta.get("finalizers") or [] if f != FINALIZER]
            )
        except ApiError as err:
            refusals.append(
                _refusal(
                    err, verb="patch", resource=INFERENCE_SERVICES.plural, name=str(meta["name"])
                )
            )
            await self._show_refusal(isvc, refusals)
            return Result()
        log.info("Released InferenceService", extra=kv(namespace=namespace, name=meta.get("name")))
        return Result()

    async def _show_refusal(self, isvc: Mapping[str, Any], refusals: Refusals) -> None:
        """While the InferenceService is deleted (no other status is written then): set
        condition WriteRefused from this pass's refusals, or remove it when there are none."""
        shown = first_of_each_kind(refusals)
        conditions = with_write_refused(isvc, shown[0] if shown else None, now=self._clock.now())
        old = (isvc.get("status") or {}).get("conditions") or []
        if conditions == old:
            return
        meta = isvc.get("metadata") or {}
        body = {
            "apiVersion": isvc.get("apiVersion"),
            "kind": isvc.get("kind"),
            "metadata": {
                "name": meta.get("name"),
                "namespace": meta.get("namespace"),
                "resourceVersion": meta.get("resourceVersion"),
            },
            "status": {**(isvc.get("status") or {}), "conditions": conditions},
        }
        await self._replace_status(body, refusals)

    async def _replace_status(self, body: Mapping[str, Any], refusals: Refusals) -> bool:
        """Send a status write; False when it didn't go through. On Conflict a newer object is
        on its way through the informer, and its event brings the next pass; a refusal joins
        ``refusals`` (only the event and the log can tell it: the status can't)."""
        meta = body["metadata"]
        try:
            await self._client.replace_status(INFERENCE_SERVICES, body, meta.get("namespace"))
        except (Conflict, NotFound):
            return False
        except ApiError as err:
            refusals.append(
                _refusal(
                    err,
                    verb="update",
                    resource=f"{INFERENCE_SERVICES.plural}/status",
                    name=str(meta.get("name")),
                )
            )
            return False
        return True

    async def _adopt(
        self, isvc: Mapping[str, Any], current: Mapping[str, Any], wanted: Mapping[str, Any]
    ) -> dict[str, Any] | None:
        """Make ``isvc`` the controller of ``current``, a replica of its name that no
        controller owns (an earlier InferenceService of the name was deleted with
        propagationPolicy Orphan): the replace that sets the wanted spec also sets the
        controller reference (a merge patch of what omed owns, :func:`.project.update_patch`),
        guarded by the resourceVersion read. ``None`` when a fresh
        read shows the InferenceService being deleted or replaced (it adopts nothing)."""
        meta = isvc.get("metadata") or {}
        try:
            fresh = await self._client.get(
                INFERENCE_SERVICES, str(meta.get("name")), str(meta.get("namespace"))
            )
        except NotFound:
            return None
        fresh_meta = fresh.get("metadata") or {}
        if fresh_meta.get("uid") != meta.get("uid") or fresh_meta.get("deletionTimestamp"):
            return None
        namespace = str(meta.get("namespace"))
        name = str(wanted["metadata"]["name"])
        adopted: dict[str, Any] = await self._client.patch(
            INFERENCE_REPLICAS, name, update_patch(current, wanted), namespace
        )
        log.info(
            "Adopted InferenceReplica",
            extra=kv(namespace=namespace, inferenceReplica=wanted["metadata"]["name"]),
        )
        return adopted

    async def _delete_replica(self, irep: Mapping[str, Any], refusals: Refusals) -> None:
        meta = irep.get("metadata") or {}
        try:
            await self._client.delete(
                INFERENCE_REPLICAS,
                str(meta.get("name")),
                str(meta.get("namespace")),
                uid=meta.get("uid"),
            )
            log.info(
                "Deleting InferenceReplica",
                extra=kv(namespace=meta.get("namespace"), inferenceReplica=meta.get("name")),
            )
        except (NotFound, Conflict):
            pass
        except ApiError as err:
            refusals.append(
                _refusal(
                    err,
                    verb="delete",
                    resource=INFERENCE_REPLICAS.plural,
                    name=str(meta.get("name")),
                )
            )

    async def _patch_finalizers(
        self, isvc: Mapping[str, Any], finalizers: list[str]
    ) -> Mapping[str, Any] | None:
        """Set the finalizers, guarded by the resourceVersion read; the patched object, or
        ``None`` when the InferenceService is gone."""
        meta = isvc.get("metadata") or {}
        patch = [
            {"op": "test", "path": "/metadata/resourceVersion", "value": meta["resourceVersion"]},
            {"op": "add", "path": "/metadata/finalizers", "value": finalizers},
        ]
        try:
            patched: Mapping[str, Any] = await self._client.patch(
                INFERENCE_SERVICES,
                str(meta.get("name")),
                patch,
                str(meta.get("namespace")),
                content_type=JSON_PATCH,
            )
        except NotFound:
            return None
        return patched

    async def _write_status(
        self,
        isvc: Mapping[str, Any],
        *,
        components: list[ComponentReadiness] | tuple[()],
        fronted: list[ComponentReadiness] | None = None,
        failure: tuple[str, str] | None = None,
        refusals: Refusals | None = None,
    ) -> float | None:
        """Write the status when it changed; the seconds to wait when the write is paced.

        ``refusals`` are the pass's refused writes so far: the first is shown as condition
        WriteRefused; a refused status write joins them."""
        refusals = [] if refusals is None else refusals
        shown = first_of_each_kind(refusals)
        status = build_status(
            isvc=isvc,
            components=list(components),
            fronted=fronted or [],
            failure=failure,
            refused=shown[0] if shown else None,
            now=self._clock.now(),
        )
        if not status_changed(isvc.get("status"), status):
            return None
        meta = isvc.get("metadata") or {}
        key = f"{meta.get('namespace')}/{meta.get('name')}"
        now = self._clock.monotonic()
        old = isvc.get("status")
        busy = self._pacer.busy()
        urgent = status_urgent(old, status)
        if not old and busy and failure is None and not _ready(status):
            # Under load, a first status that only says "not ready yet" waits like a count
            # change, paced from the moment this manager first saw the InferenceService;
            # Ready or a failure, when it comes first, is written at once.
            urgent = False
            self._pacer.pace_from_now(key)
        if not urgent:
            wait = self._pacer.wait(key, busy=busy)
            if wait > 0:
                return wait
        body = {
            "apiVersion": isvc.get("apiVersion"),
            "kind": isvc.get("kind"),
            "metadata": {
                "name": meta.get("name"),
                "namespace": meta.get("namespace"),
                "resourceVersion": meta.get("resourceVersion"),
            },
            "status": {**(isvc.get("status") or {}), **status},
        }
        if await self._replace_status(body, refusals):
            self._pacer.written(key, at=now)
        return None


class InferenceServiceController:
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
    ) -> None:
        """``events`` records the WriteRefused Warning events on InferenceServices (without
        it a refused write is told by the log line and the condition only)."""
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
        self.reconciler = InferenceServiceReconciler(
            client=client,
            services=self.services,
            replicas=self.replicas,
            runtimes=self.runtimes,
            cluster_runtimes=self.cluster_runtimes,
            default_mode=default_mode,
            clock=self._clock,
            busy=lambda: self.controller.busy(),  # noqa: PLW0108 - made below
            events=events,
            requeues=lambda key: self.controller.queue.num_requeues(key),  # noqa: PLW0108 - below
        )
        self.controller = Controller(
            name=CONTROLLER_NAME,
            reconciler=self.reconciler,
            workers=workers,
            clock=self._clock,
            busy_window=BUSY_WINDOW,
        )
        enqueue = self.controller.queue.add
        self._registrations = [
            (
                self.services,
                self.services.add_event_handler(
                    Handlers(
                        on_add=lambda o: enqueue(object_key(o)),
                        on_update=lambda _o, n: enqueue(object_key(n)),
                        on_delete=lambda o: enqueue(object_key(o)),
                    )
                ),
            ),
            (
                self.replicas,
                self.replicas.add_event_handler(
                    Handlers(
                        on_add=self._replica_event,
                        on_update=lambda _o, n: self._replica_event(n),
                        on_delete=self._replica_event,
                    )
                ),
            ),
            (
                self.runtimes,
                self.runtimes.add_event_handler(
                    Handlers(
                        on_add=self._runtime_event,
                        on_update=lambda _o, n: self._runtime_event(n),
                        on_delete=self._runtime_event,
                    )
                ),
            ),
            (
                self.cluster_runtimes,
                self.cluster_runtimes.add_event_handler(
                    Handlers(
                        on_add=self._runtime_event,
                        on_update=lambda _o, n: self._runtime_event(n),
                        on_delete=self._runtime_event,
                    )
                ),
            ),
        ]

    def _replica_event(self, irep: Obj) -> None:
        parent = _parent_of(irep)
        if parent is not None:
            self.controller.queue.add(parent)
        # Standalone replicas may be fronted through spec.replicaRefs.
        meta = irep.get("metadata") or {}
        ref = f"{meta.get('namespace')}/{meta.get('name')}"
        for isvc in self.services.store.by_index(REPLICA_REF, ref):
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

    async def run(self) -> None:
        await self.controller.run()

    async def shutdown(self, *, drain: bool = True) -> None:
        await self.controller.shutdown(drain=drain)

    def close(self) -> None:
        for informer, registration in self._registrations:
            informer.remove_event_handler(registration)
