"""The InferenceReplica controller: informers in, observe -> plan -> execute, workers out.

Why: this module is the imperative shell around the pure planner. It wires two shared
informers (InferenceReplicas in every namespace, and the product's pod cache of pods
labelled ``ome.io/inferenceservice``), maps pod events to the owning InferenceReplica (its
controller owner reference), keeps the expectations current, and runs a workqueue
:class:`~omed.workqueue.Controller` whose reconciler is :class:`InferenceReplicaReconciler`.

Level-triggered: a reconcile reads the whole state of one InferenceReplica from the caches,
never the event that woke it. A key whose writes aren't observed yet is not planned for
(:mod:`.expectations`); it is looked at again when they are, or when they expire.

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
collector or a user decided are handled by :mod:`.ownership`: pods no controller owns, named
and labelled as this InferenceReplica's (an earlier one of its name was deleted with
``propagationPolicy: Orphan``), are adopted before anything is planned; pods still
controlled by an earlier or gone InferenceReplica of the name (its finalizer was removed by
hand, and the collector, which deletes them at once, hasn't yet: it lags, or there is none)
are drained and deleted, once a read from the API server confirms the InferenceReplica is
gone or replaced and the pod still names it as its controller.

A write the API server refuses for good (:mod:`omed.controllers.refusals`) is reported once
per kind of write per pass (a Warning ``WriteRefused`` event on the InferenceReplica, a
WARNING line), shown as condition ``WriteRefused`` from the next status write on, and the key
goes back through the workqueue's rate limiter (``Result(requeue=True)``), so its attempts
back off exponentially instead of coming every second.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Mapping
from typing import Any, Final, Protocol

from omed.api.constants import KIND_INFERENCE_REPLICA, LABEL_INFERENCE_SERVICE
from omed.api.inferencereplica import InferenceReplicaStatus
from omed.clock import Clock, RealClock
from omed.controllers.deletion import orphaning
from omed.controllers.inferencereplica.core import names
from omed.controllers.inferencereplica.core.actions import (
    AddFinalizer,
    CreatePods,
    DeletePods,
    Plan,
    RecordEvent,
    SetServingGate,
    WriteStatus,
)
from omed.controllers.inferencereplica.core.encoding import (
    STATUS_SIZE_LIMIT,
    StatusEncodingSettings,
    needs_conversion,
)
from omed.controllers.inferencereplica.core.model import (
    CreateRefusal,
    ObservedState,
    PlanSettings,
    ReplicaTarget,
)
from omed.controllers.inferencereplica.core.observe import (
    InvalidReplica,
    controller_name,
    controller_uid,
    observe,
    pod_view,
)
from omed.controllers.inferencereplica.core.plan import drain_orphans, plan
from omed.controllers.inferencereplica.core.status import (
    RowsUnreadable,
    StatusDecodeFailed,
    encode_rows_into_status,
    in_list_form,
)
from omed.controllers.inferencereplica.core.teardown import teardown_from_pods
from omed.controllers.inferencereplica.shell import ownership, statusmetrics
from omed.controllers.inferencereplica.shell.executor import (
    MSG_WRITE_TOO_LARGE,
    REASON_WRITE_SIZE_EXCEEDED,
    RESOURCE_STATUS,
    Executor,
    KubeApi,
    Outcome,
    write_size_exceeded_message,
)
from omed.controllers.inferencereplica.shell.expectations import DEFAULT_TIMEOUT, Expectations
from omed.controllers.pacing import BUSY_WINDOW, StatusPacer
from omed.controllers.refusals import RefusedWrite, report
from omed.events import NORMAL, WARNING, EventSink
from omed.informers import (
    INFERENCE_SERVICE,
    NAMESPACE,
    OWNER_UID,
    Handlers,
    InformerFactory,
    SharedInformer,
    inference_pod_informer,
    object_key,
    split_key,
)
from omed.informers.transform import Obj
from omed.kube.errors import NotFound
from omed.kube.resources import INFERENCE_REPLICAS
from omed.log import kv
from omed.statuscodec import (
    REASON_DECODE_FAILED,
    REASON_SIZE_EXCEEDED,
    DecodeError,
    Encoding,
    decode_failed_message,
    size_exceeded_message,
    stored_encoding,
)
from omed.workqueue import Controller, Result
from omed.workqueue.ratelimit import RateLimiter

log = logging.getLogger("omed.controllers.inferencereplica")

RETRY_SOON: Final = 1.0
"""Seconds before looking again after a step was skipped for safety or lost a race."""
REFUSED_RETRY: Final = 5.0
"""Seconds between pod creates refused by quota or an unreachable webhook (no watch event
tells when the quota or the webhook comes back)."""
MIN_EXPECTATION_WAIT: Final = 0.05


class ObjectCache(Protocol):
    """The part of :class:`omed.informers.IndexedStore` a reconcile reads."""

    def get(self, key: str) -> Obj | None: ...

    def by_index(self, index: str, value: str) -> list[Obj]: ...


def owner_key(pod: Mapping[str, Any]) -> str | None:
    """``namespace/name`` of the InferenceReplica that controls ``pod``, if one does."""
    name = controller_name(pod, kind=KIND_INFERENCE_REPLICA)
    if name is None:
        return None
    namespace = (pod.get("metadata") or {}).get("namespace")
    return f"{namespace}/{name}" if namespace else name


class InferenceReplicaReconciler:
    """One reconcile: observe the caches, plan, execute. Implements the ``Reconciler``."""

    def __init__(
        self,
        *,
        client: KubeApi,
        replicas: ObjectCache,
        pods: ObjectCache,
        events: EventSink,
        settings: PlanSettings,
        expectations: Expectations,
        clock: Clock,
        status_encoding: StatusEncodingSettings | None = None,
        status_size_limit: int = STATUS_SIZE_LIMIT,
        busy: Callable[[], bool] = lambda: False,
        requeues: Callable[[str], int] = lambda _key: 0,
    ) -> None:
        self._client = client
        self._requeues = requeues
        """The key's back-off step in the workqueue's rate limiter (for the refusal log)."""
        self._pacer = StatusPacer(clock=clock, busy=busy)
        self._replicas = replicas
        self._pods = pods
        self._events = events
        self._settings = settings
        self._expectations = expectations
        self._clock = clock
        self._encoding = status_encoding or StatusEncodingSettings()
        self._size_limit = status_size_limit
        self._executor = Executor(
            client=client,
            events=events,
            expectations=expectations,
            clock=clock,
            status_encoding=self._encoding,
            status_size_limit=status_size_limit,
        )
        self._warned: dict[str, str] = {}
        self._size_warned: dict[str, str] = {}
        self._form_current: dict[str, str] = {}
        """key -> resourceVersion whose stored form was found to be the one a write keeps."""
        self._refused: dict[str, dict[int, CreateRefusal]] = {}
        """key -> Instance index -> the last refused create of its pods (a waiting token)."""
        self._write_refused: dict[str, RefusedWrite] = {}
        """key -> the refused write condition WriteRefused shows, until a pass completes
        without a refusal."""

    async def reconcile(self, key: str) -> Result:
        irep = self._replicas.get(key)
        if irep is None:
            return await self._orphans(key)
        # Under an Orphan deletion no pod is written: writes still unobserved (the collector
        # took the pods, and their events, away from this key) need no waiting for.
        if not self._expectations.satisfied(key) and not orphaning(irep):
            log.debug(
                names.MSG_WAITING_FOR_CACHE,
                extra=kv(key=key, pending=self._expectations.pending(key)),
            )
            return Result(
                requeue_after=max(self._expectations.remaining(key), MIN_EXPECTATION_WAIT)
            )
        meta = irep.get("metadata") or {}
        if not self._expectations.replica_current(key, str(meta.get("resourceVersion") or "")):
            return Result(requeue_after=RETRY_SOON)  # its update event comes first, usually
        uid = str(meta.get("uid") or "")
        statusmetrics.stored(key, _stored_encoding(irep))
        try:
            listed = in_list_form(irep, max_rows=self._encoding.bound)
            target, observed = observe(listed, self._pods.by_index(OWNER_UID, uid))
        except StatusDecodeFailed as err:
            self._decode_failed(key, irep, err)
            return await self._teardown_from_pods(key, irep)
        except (InvalidReplica, RowsUnreadable) as err:
            self._unreadable(key, irep, err)
            return await self._teardown_from_pods(key, irep)
        self._warned.pop(key, None)
        orphans = self._adoptable(target)
        adoption_refused: list[RefusedWrite] = []
        if orphans and target.has_finalizer:
            adoption = await ownership.adopt(self._client, target=target, pods=orphans)
            if adoption.errors:
                raise adoption.errors[0]
            if adoption.adopted:
                self._adopted(key, irep, adoption.adopted)
            if adoption.adopted or adoption.retry:
                # Plan once the cache shows them as ours (their update events wake the key).
                return Result(requeue_after=RETRY_SOON)
            adoption_refused = adoption.refused
        refused = self._refused.get(key, {})
        if refused:
            observed = dataclasses.replace(observed, refused=dict(refused))
        shown = self._write_refused.get(key)
        if shown is not None:
            observed = dataclasses.replace(observed, write_refused=shown)
        if orphans and not target.has_finalizer:
            # The finalizer goes on before omed owns a pod, adopted ones included.
            rows = tuple(sorted(observed.rows.values(), key=lambda row: row.index))
            decided = Plan(actions=(AddFinalizer(),), rows=rows, status=observed.status)
        else:
            decided = plan(
                target=target, observed=observed, settings=self._settings, now=self._clock.now()
            )
        if not target.orphaning:  # an Orphan deletion writes nothing but the finalizer's patch
            decided = self._converting(key, irep, observed, decided)
        decided = self._paced(key, decided)
        if decided.wave_log is not None:
            log.info(
                names.MSG_SCALE_DOWN_WAVE,
                extra=kv(
                    namespace=target.namespace,
                    inferenceReplica=target.name,
                    **decided.wave_log.log_values(),
                ),
            )
        outcome = await self._executor.execute(key=key, irep=irep, target=target, plan=decided)
        outcome.write_refused[:0] = adoption_refused
        if outcome.status_stored:
            self._pacer.written(key)
        self._expectations.expect_replica_past(key, outcome.superseded)
        fresh_refusal = self._remember_refusals(key, decided, outcome)
        if outcome.stopped == "too_large":
            self._report_refusals(key, irep, outcome)  # a refused finalizer patch before it
            self._too_large(key, irep, outcome)
            return Result(requeue=True)  # with the key's backoff, until the status fits
        self._size_warned.pop(key, None)
        if outcome.names_taken:
            await self._free_names(key, target.uid, outcome)
        refused_now = self._report_refusals(key, irep, outcome)
        result = self._result(key, decided, outcome)
        if refused_now:
            return Result(requeue=True)  # the rate limiter's back-off, not the plan's timers
        cleared = shown is not None and key not in self._write_refused
        if cleared and (result.requeue_after is None or result.requeue_after > RETRY_SOON):
            # The condition this pass's status carried is no longer true: remove it soon.
            result = Result(requeue_after=RETRY_SOON)
        if outcome.refused:
            wait = RETRY_SOON if fresh_refusal else REFUSED_RETRY
            if result.requeue_after is None or result.requeue_after > wait:
                result = Result(requeue_after=wait)
        return result

    def _paced(self, key: str, decided: Plan) -> Plan:
        """``decided`` without its status write (nor that write's events) when it only moves
        observation and the :class:`~omed.controllers.pacing.StatusPacer` says it must still
        wait (5 s after this manager's last status write of it, 30 s while the controller is
        busy); a requeue for the rest of the pace carries it (or an earlier pass with news
        writes it sooner)."""
        writes = decided.of_type(WriteStatus)
        if not writes or not all(write.paceable for write in writes):
            return decided
        wait = self._pacer.wait(key)
        if wait <= 0:
            return decided
        # Its events (InstanceCreated only, by the planner's rule) go with it: the pass that
        # writes reads them off the stored rows again.
        kept = tuple(a for a in decided.actions if not isinstance(a, WriteStatus | RecordEvent))
        requeue = wait if decided.requeue_after is None else min(wait, decided.requeue_after)
        return dataclasses.replace(decided, actions=kept, requeue_after=requeue)

    def _remember_refusals(self, key: str, decided: Plan, outcome: Outcome) -> bool:
        """Keep the refused creates for the next pass's planner; True when one is new (its
        token isn't in the rows yet: look again soon, to record it)."""
        old = self._refused.get(key, {})
        if outcome.stopped is not None:
            return False
        held = {row.index for row in decided.rows if row.operation is not None}
        attempted = {create.index for create in decided.of_type(CreatePods)}
        kept = {i: r for i, r in old.items() if i in held and i not in attempted}
        kept.update(outcome.refused)
        if kept:
            self._refused[key] = kept
        else:
            self._refused.pop(key, None)
        return any(
            old.get(index) is None or old[index].token != refusal.token
            for index, refusal in outcome.refused.items()
        )

    def _adoptable(self, target: ReplicaTarget) -> list[Mapping[str, Any]]:
        """Cached pods no controller owns that ``target`` may adopt (:mod:`.ownership`); none
        while it is deleted (its pods are drained or, under Orphan, left) or paused (no pod
        write at all: it adopts them once resumed)."""
        if target.deleting or target.paused:
            return []
        cached = self._pods.by_index(INFERENCE_SERVICE, f"{target.namespace}/{target.isvc}")
        return ownership.adoptable(target, cached)

    def _adopted(self, key: str, irep: Mapping[str, Any], pods: list[str]) -> None:
        log.info(names.MSG_PODS_ADOPTED, extra=kv(key=key, pods=len(pods), first=pods[0]))
        message = names.pods_adopted_message(pods)
        self._events.event(irep, type=NORMAL, reason=names.EVENT_PODS_ADOPTED, message=message)

    async def _free_names(self, key: str, uid: str, outcome: Outcome) -> None:
        """Drain pods that hold our pod names for an earlier InferenceReplica of this name.

        Such a pod (the earlier one was deleted without omed's finalizer and created again)
        is the garbage collector's to delete, at once and routed or not; until it has (it
        lags, or there is none) the name is blocked, so omed drains and deletes it. A pod
        that no controller owns any more (an Orphan deletion) is adopted by the next pass
        instead, and one the API server shows otherwise than the cache is left alone.
        """
        namespace, name = split_key(key)
        earlier = []
        for pod_name in outcome.names_taken:
            pod = self._pods.get(f"{namespace}/{pod_name}")
            if pod is None:
                continue  # a repeat of our own create, or a pod the cache doesn't hold
            if ownership.unowned(pod):
                outcome.retry_soon = True  # adopted by the next pass
                continue
            owner = controller_uid(pod, kind=KIND_INFERENCE_REPLICA)
            if owner is not None and owner != uid and owner_key(pod) == key:
                earlier.append(pod)
        if not earlier:
            return
        left = await ownership.leftovers(
            self._client, namespace=namespace or "", replica=name, pods=earlier, current_uid=uid
        )
        outcome.retry_soon = True
        if not left.pods:
            return
        log.info(
            names.MSG_DRAINING_LEFTOVERS,
            extra=kv(key=key, pods=len(left.pods), first=left.pods[0]["metadata"]["name"]),
        )
        views = [pod_view(pod, replica=name) for pod in left.pods]
        drained = Plan(actions=drain_orphans(views), rows=(), status=InferenceReplicaStatus())
        await self._executor.run_pod_actions(
            outcome, key=key, namespace=namespace or "", plan=drained
        )

    def _report_refusals(self, key: str, irep: Mapping[str, Any] | None, outcome: Outcome) -> bool:
        """Report this pass's refused writes; True when there were some.

        One WARNING line and one Warning event (on the InferenceReplica, through the
        budgeted recorder, which aggregates repeats) per kind of write, naming the first
        object refused; the refusal kept for condition WriteRefused is the first that isn't
        the status write's own (a condition that write would have to carry can't be
        stored). A pass that completes with no refusal forgets it; one that stopped
        earlier (a conflict) proves nothing and keeps it."""
        if not outcome.write_refused:
            if outcome.stopped is None:
                self._write_refused.pop(key, None)
            return False
        firsts = report(
            outcome.write_refused,
            key=key,
            involved=irep,
            events=self._events,
            logger=log,
            requeues=self._requeues(key),
        )
        shown = next((r for r in firsts if r.resource != RESOURCE_STATUS), None)
        if shown is not None:
            self._write_refused[key] = shown
        return True

    def _result(self, key: str, decided: Plan, outcome: Outcome) -> Result:
        if outcome.stopped == "conflict":
            log.debug(names.MSG_STATUS_CONFLICT, extra=kv(key=key))
            return Result(requeue=True)
        if outcome.stopped in ("gone", "refused"):
            # A refused pass is reported and requeued with back-off by the caller.
            return Result()
        if outcome.errors:
            first = outcome.errors[0]
            if len(outcome.errors) > 1:
                first.add_note(f"and {len(outcome.errors) - 1} more failed write(s) in this pass")
            raise first
        delays = [d for d in (decided.requeue_after,) if d is not None]
        if outcome.retry_soon:
            delays.append(RETRY_SOON)
        return Result(requeue_after=min(delays)) if delays else Result()

    def _converting(
        self, key: str, irep: Mapping[str, Any], observed: ObservedState, decided: Plan
    ) -> Plan:
        """``decided``, plus a write of the unchanged rows when their stored form isn't the
        one a write would keep now (a restart with another omenativeStatus block)."""
        if decided.of_type(WriteStatus):
            return decided
        version = str((irep.get("metadata") or {}).get("resourceVersion") or "")
        if self._form_current.get(key) == version:
            return decided
        rows = tuple(sorted(observed.rows.values(), key=lambda row: row.index))
        listed = encode_rows_into_status({}, rows).get("instanceStatuses") or []
        if not needs_conversion(
            listed, stored=irep.get("status"), settings=self._encoding, size_limit=self._size_limit
        ):
            self._form_current[key] = version
            return decided
        write = WriteStatus(status=observed.status, rows=rows)
        return dataclasses.replace(decided, actions=(write, *decided.actions))

    def _decode_failed(self, key: str, irep: Mapping[str, Any], err: StatusDecodeFailed) -> None:
        version = str((irep.get("metadata") or {}).get("resourceVersion") or "")
        if self._warned.get(key) == version:
            return  # said once for this version; pod events would repeat it endlessly
        self._warned[key] = version
        namespace, name = split_key(key)
        statusmetrics.decode_failed(err.reason)
        log.error(
            names.MSG_STATUS_DECODE_FAILED,
            extra=kv(key=key, reason=err.reason, detail=err.detail[:1000]),
        )
        message = decode_failed_message(
            namespace=namespace or "", name=name, reason=err.reason, detail=err.detail
        )
        self._events.event(irep, type=WARNING, reason=REASON_DECODE_FAILED, message=message)

    def _too_large(self, key: str, irep: Mapping[str, Any], outcome: Outcome) -> None:
        """A write rejected as too large: the status write is the page's StatusSizeExceeded
        (its own bytes and encoding, and the metric); any other write is a
        WriteSizeExceeded that names it. Logged and recorded once per resourceVersion."""
        rejected = outcome.too_large
        assert rejected is not None, "stopped as too_large without the rejected write"
        encoding = rejected.encoding
        if encoding is not None:
            statusmetrics.size_exceeded(encoding)
        version = str((irep.get("metadata") or {}).get("resourceVersion") or "")
        said = f"{rejected.write}@{version}"
        if self._size_warned.get(key) == said:
            return
        self._size_warned[key] = said
        namespace, name = split_key(key)
        if encoding is not None:
            log.error(
                names.MSG_STATUS_TOO_LARGE,
                extra=kv(key=key, bytes=rejected.size, encoding=encoding, error=rejected.error),
            )
            message = size_exceeded_message(
                namespace=namespace or "", name=name, size=rejected.size, encoding=encoding
            )
            self._events.event(irep, type=WARNING, reason=REASON_SIZE_EXCEEDED, message=message)
            return
        log.error(
            MSG_WRITE_TOO_LARGE,
            extra=kv(
                key=key,
                write=rejected.write,
                bytes=rejected.size,
                objectBytes=rejected.object_size,
                error=rejected.error,
            ),
        )
        message = write_size_exceeded_message(
            namespace=namespace or "", name=name, rejected=rejected
        )
        self._events.event(irep, type=WARNING, reason=REASON_WRITE_SIZE_EXCEEDED, message=message)

    def _unreadable(self, key: str, irep: Mapping[str, Any], err: Exception) -> None:
        version = str((irep.get("metadata") or {}).get("resourceVersion") or "")
        if self._warned.get(key) == version:
            return  # said once for this version; pod events would repeat it endlessly
        self._warned[key] = version
        spec = isinstance(err, InvalidReplica)
        log.error(
            names.MSG_SPEC_INVALID if spec else names.MSG_STATUS_UNREADABLE,
            extra=kv(key=key, error=str(err)),
        )
        reason = names.EVENT_SPEC_INVALID if spec else names.EVENT_STATUS_UNREADABLE
        self._events.event(irep, type=WARNING, reason=reason, message=str(err)[:1000])

    async def _teardown_from_pods(self, key: str, irep: Mapping[str, Any]) -> Result:
        """A replica that can't be read is left alone, unless it is deleted: then its pods are
        drained in the teardown's waves from what they show (:mod:`.teardown`) and the
        finalizer comes off, or the replica, its pods and its InferenceService would wait for
        a repair for ever."""
        meta = irep.get("metadata") or {}
        finalizers = meta.get("finalizers") or ()
        if not meta.get("deletionTimestamp") or names.FINALIZER not in finalizers:
            return Result()
        uid = str(meta.get("uid") or "")
        pods = [
            pod_view(pod, replica=str(meta.get("name") or ""))
            for pod in self._pods.by_index(OWNER_UID, uid)
            if controller_uid(pod, kind=KIND_INFERENCE_REPLICA) == uid
        ]
        decided = teardown_from_pods(pods, settings=self._settings, orphaning=orphaning(irep))
        if decided.wave_log is not None:
            log.info(
                names.MSG_SCALE_DOWN_WAVE,
                extra=kv(
                    namespace=meta.get("namespace"),
                    inferenceReplica=meta.get("name"),
                    **decided.wave_log.log_values(),
                ),
            )
        gates, deletions = len(decided.of_type(SetServingGate)), len(decided.of_type(DeletePods))
        if gates or deletions:
            log.info(
                names.MSG_TEARDOWN_FROM_PODS,
                extra=kv(key=key, pods=len(pods), gates=gates, deletions=deletions),
            )
        outcome = await self._executor.execute_from_pods(
            key=key, irep=irep, plan=decided, selector=_pods_selector(irep)
        )
        if outcome.stopped == "too_large":
            self._too_large(key, irep, outcome)
            return Result(requeue=True)
        if self._report_refusals(key, irep, outcome):
            return Result(requeue=True)
        return self._result(key, decided, outcome)

    async def _orphans(self, key: str) -> Result:
        """Drain the pods of an InferenceReplica that no longer exists (its finalizer was
        removed by hand; the garbage collector deletes such pods too, at once, and omed
        drains those it finds first: while the collector lags, or where there is none)."""
        namespace, name = split_key(key)
        pods = [
            pod for pod in self._pods.by_index(NAMESPACE, namespace or "") if owner_key(pod) == key
        ]
        if not pods:
            self._expectations.forget(key)
            self._warned.pop(key, None)
            self._size_warned.pop(key, None)
            self._form_current.pop(key, None)
            self._refused.pop(key, None)
            self._write_refused.pop(key, None)
            self._pacer.forget(key)
            statusmetrics.stored(key, None)
            return Result()
        if not self._expectations.satisfied(key):
            return Result(
                requeue_after=max(self._expectations.remaining(key), MIN_EXPECTATION_WAIT)
            )
        try:
            await self._client.get(INFERENCE_REPLICAS, name, namespace)
        except NotFound:
            pass
        else:  # the cache hasn't seen it yet: not an orphan
            return Result(requeue_after=RETRY_SOON)
        # The collector may have taken the references off meanwhile (an Orphan deletion):
        # only pods the API server still shows controlled by the gone replica are drained.
        left = await ownership.leftovers(
            self._client, namespace=namespace or "", replica=name, pods=pods, current_uid=None
        )
        if not left.pods:
            return Result(requeue_after=RETRY_SOON)  # the cache catches up, then forgets
        views = [pod_view(pod, replica=name) for pod in left.pods]
        actions = drain_orphans(views)
        outcome = Outcome()
        orphan_plan = Plan(actions=actions, rows=(), status=InferenceReplicaStatus())
        await self._executor.run_pod_actions(
            outcome, key=key, namespace=namespace or "", plan=orphan_plan
        )
        if outcome.errors:
            raise outcome.errors[0]
        if self._report_refusals(key, None, outcome):  # no object left to carry an event
            return Result(requeue=True)
        return Result(requeue_after=RETRY_SOON)


def _pods_selector(irep: Mapping[str, Any]) -> str:
    """The selector of a replica's pods read off its raw spec (the models may refuse it): its
    parent's name (else its own) and its component; only the first when the component isn't
    a string, and any pod omed labels when neither is usable (the list is filtered by the
    replica's uid)."""
    meta = irep.get("metadata") or {}
    spec = irep.get("spec")
    spec = spec if isinstance(spec, Mapping) else {}
    parent = spec.get("parentRef")
    isvc = parent.get("name") if isinstance(parent, Mapping) else meta.get("name")
    component = spec.get("component")
    if not isinstance(isvc, str) or not isvc:
        return LABEL_INFERENCE_SERVICE
    if not isinstance(component, str) or not component:
        return f"{LABEL_INFERENCE_SERVICE}={isvc}"
    return names.label_selector(isvc, component)


def _stored_encoding(irep: Mapping[str, Any]) -> Encoding | None:
    try:
        return stored_encoding(irep.get("status"))
    except DecodeError:
        return None


class InferenceReplicaController:
    """Informers, expectations and the worker pool of the InferenceReplica controller.

    ``status_encoding`` is the omenativeStatus block (DenseV1 and no bound by default);
    ``status_size_limit`` the write size above which a ColumnarV2-stored InferenceReplica
    stays ColumnarV2 under DenseV1 (:data:`~.encoding.STATUS_SIZE_LIMIT`; tests lower it).
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
        status_size_limit: int = STATUS_SIZE_LIMIT,
    ) -> None:
        self._clock: Clock = clock or RealClock()
        self.replicas: SharedInformer = factory.informer(INFERENCE_REPLICAS, namespace=namespace)
        self.pods: SharedInformer = inference_pod_informer(factory, namespace=namespace)
        self.expectations = Expectations(clock=self._clock, timeout=expectation_timeout)
        self.reconciler = InferenceReplicaReconciler(
            client=client,
            replicas=self.replicas.store,
            pods=self.pods.store,
            events=events,
            settings=settings,
            expectations=self.expectations,
            clock=self._clock,
            status_encoding=status_encoding,
            status_size_limit=status_size_limit,
            busy=lambda: self.controller.busy(),  # noqa: PLW0108 - made below
            requeues=lambda key: self.controller.queue.num_requeues(key),  # noqa: PLW0108 - below
        )
        self.controller = Controller(
            name=names.CONTROLLER_NAME,
            reconciler=self.reconciler,
            workers=workers,
            clock=self._clock,
            rate_limiter=rate_limiter,
            busy_window=BUSY_WINDOW,
        )
        self._registrations = [
            self.replicas.add_event_handler(
                Handlers(
                    on_add=self._replica_event,
                    on_update=lambda _old, new: self._replica_event(new),
                    on_delete=self._replica_event,
                )
            ),
            self.pods.add_event_handler(
                Handlers(
                    on_add=self._pod_seen,
                    on_update=lambda _old, new: self._pod_seen(new),
                    on_delete=self._pod_gone,
                )
            ),
        ]

    def _replica_event(self, obj: Obj) -> None:
        self.controller.queue.add(object_key(obj))

    def _pod_seen(self, pod: Obj) -> None:
        key = owner_key(pod)
        if key is not None:
            self.expectations.observe(key, pod)
            self.controller.queue.add(key)
        elif ownership.unowned(pod):
            # An orphan (an Orphan deletion left it): the replica of its name may adopt it.
            for candidate in ownership.candidate_keys(pod):
                if self.replicas.store.get(candidate) is not None:
                    self.controller.queue.add(candidate)

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
        await self.controller.run()

    async def shutdown(self, *, drain: bool = True) -> None:
        await self.controller.shutdown(drain=drain)

    def close(self) -> None:
        """Detach the event handlers from the (shared) informers."""
        self.replicas.remove_event_handler(self._registrations[0])
        self.pods.remove_event_handler(self._registrations[1])
