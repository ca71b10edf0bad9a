"""One reconcile of one InferenceReplica: read the caches, let the core decide, carry it out.

Why: this is the imperative shell around :func:`..core.decide.decide`. It reads what the
core needs (the replica and its pods from the caches, the clock, whether the controller is
busy, the key's :class:`~..core.memory.KeyMemory`), hands it over as one
:class:`~..core.decide.PassInput`, executes the plan it gets back (:mod:`.executor`), folds
the outcome back through :func:`~..core.decide.settle`, and tells what happened in events,
log lines and metrics. Nothing here chooses what to do with an InferenceReplica.

Level-triggered: a reconcile reads the whole state of one InferenceReplica from the caches,
never the event that woke it. A key whose writes aren't observed yet is not planned for
(:mod:`.expectations`); it is looked at again when they are, or when they expire.

The fleet-wide ``lifecycle`` settings come from ``lifecycle``, a read of the ConfigMap through
the config cache at every pass, so an edit reaches each replica's next pass within the cache
TTL. A key that is set but invalid is unconfigured (:mod:`omed.config.lifecycle`); the first
pass to see a set of such problems logs them in one ERROR line, and the next distinct set
again.

The per-key memory is held here, one value per key, and only between passes: the workqueue
never gives one key to two workers, so a pass reads and replaces its key's memory alone.

A write the API server refuses for good (:mod:`omed.controllers.refusals`) is reported once
per kind of write per pass (a Warning ``WriteRefused`` event on the InferenceReplica, a
WARNING line), shown as condition ``WriteRefused`` from the next status write on, and the key
goes back through the workqueue's rate limiter (``Result(requeue=True)``), so its attempts
back off exponentially instead of coming every second.

An InferenceReplica that can't be read (a status that can't be decoded, a spec or status the
models refuse) is left alone until it changes: after its ERROR line and Warning event (once per
resourceVersion) the pass raises :class:`~omed.workqueue.TerminalError`, so the key isn't
retried and ``controller_runtime_terminal_reconcile_errors_total`` counts it. A deleted one is
drained from what its pods show instead (:meth:`Reconciler._teardown_from_pods`).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping
from itertools import chain
from typing import Any, Final, Protocol

from omed.api.constants import KIND_INFERENCE_REPLICA, LABEL_INFERENCE_SERVICE
from omed.clock import Clock
from omed.config.lifecycle import LifecycleConfig
from omed.controllers.deletion import orphaning
from omed.controllers.inferencereplica.core import names, orphans
from omed.controllers.inferencereplica.core.actions import (
    RETRY_SOON,
    DeletePods,
    Plan,
    SetServingGate,
)
from omed.controllers.inferencereplica.core.assemble import (
    labelled,
    observe_replica,
    with_migrations,
)
from omed.controllers.inferencereplica.core.conversion import StoredForm
from omed.controllers.inferencereplica.core.decide import (
    PassInput,
    PassReport,
    decide,
    settle,
)
from omed.controllers.inferencereplica.core.encoding import (
    StatusEncodingSettings,
)
from omed.controllers.inferencereplica.core.memory import EMPTY, KeyMemory
from omed.controllers.inferencereplica.core.model import (
    ObservedState,
    PlanSettings,
    PodView,
    ReplicaTarget,
)
from omed.controllers.inferencereplica.core.nodes import NodeView, node_view
from omed.controllers.inferencereplica.core.observe import POD_VIEWS, InvalidReplica, pod_view
from omed.controllers.inferencereplica.core.rows import forget_replica
from omed.controllers.inferencereplica.core.status import (
    ROWS,
    RowsUnreadable,
    StatusDecodeFailed,
    collector_paused,
)
from omed.controllers.inferencereplica.core.teardown import (
    escalate_from_pods,
    teardown_from_pods,
    teardown_target,
)
from omed.controllers.inferencereplica.shell import ownership, statusmetrics
from omed.controllers.inferencereplica.shell.executor import Executor, Outcome
from omed.controllers.inferencereplica.shell.expectations import Expectations
from omed.controllers.owners import controller_uid
from omed.controllers.refusals import RefusedWrite, report
from omed.events import NORMAL, WARNING, EventSink
from omed.informers import INFERENCE_SERVICE, NAMESPACE, OWNER_UID, split_key
from omed.informers.endpoints import SERVICE_NAME
from omed.informers.transform import Obj
from omed.kube.api import KubeApi
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
from omed.workqueue import Result, TerminalError

log = logging.getLogger("omed.controllers.inferencereplica")

MIN_EXPECTATION_WAIT: Final = 0.05


async def _unconfigured() -> LifecycleConfig:
    return LifecycleConfig()


class ObjectCache(Protocol):
    """The part of :class:`omed.informers.IndexedStore` a reconcile reads."""

    def get(self, key: str) -> Obj | None: ...

    def by_index(self, index: str, value: str) -> list[Obj]: ...


class NodeCache(Protocol):
    """The part of a :class:`~omed.informers.SharedInformer` of nodes a reconcile reads."""

    @property
    def store(self) -> ObjectCache: ...

    def has_synced(self) -> bool: ...


class InferenceReplicaReconciler:
    """One reconcile: observe the caches, decide, execute. Implements the ``Reconciler``."""

    def __init__(
        self,
        *,
        client: KubeApi,
        replicas: ObjectCache,
        status_encoding: StatusEncodingSettings | None = None,
        events: EventSink,
        pods: ObjectCache,
        revisions: ObjectCache | None = None,
        pod_groups: ObjectCache | None = None,
        busy: Callable[[], bool] = lambda: False,
        expectations: Expectations,
        settings: PlanSettings,
        clock: Clock,
        requeues: Callable[[str], int] = lambda _key: 0,
        lifecycle: Callable[[], Awaitable[LifecycleConfig]] | None = None,
        slices: ObjectCache | None = None,
        nodes: NodeCache | None = None,
        services: ObjectCache | None = None,
    ) -> None:
        self._client = client
        self._services = services
        """The InferenceService cache: the parent's migration requests (None: none read)."""
        self._nodes = nodes
        """The node cache (:mod:`omed.informers.nodes`); None: nothing is judged from nodes."""
        self._slices = slices
        """The EndpointSlice cache (:mod:`omed.informers.endpoints`); None: routing is judged
        by the pods' conditions alone."""
        self._lifecycle = lifecycle or _unconfigured
        self._lifecycle_problems: tuple[str, ...] = ()
        """The problems last logged, so each distinct set is logged once."""
        self._requeues = requeues
        """The key's back-off step in the workqueue's rate limiter (for the refusal log)."""
        self._busy = busy
        self._replicas = replicas
        self._pods = pods
        self._revisions = revisions
        self._pod_groups = pod_groups
        self._events = events
        self._settings = settings
        self._expectations = expectations
        self._clock = clock
        self._encoding = status_encoding or StatusEncodingSettings()
        self._executor = Executor(
            client=client,
            events=events,
            expectations=expectations,
            clock=clock,
            status_encoding=self._encoding,
        )
        self._pod_nodes: tuple[object, object, frozenset[str]] | None = None
        """The pods (their map by Instance, the strays) of the last pass that read nodes, and
        the names of their nodes: the pods' objects are immutable and held here, so the very
        same objects name the same nodes."""
        self._uids: dict[str, str] = {}
        """key -> the uid of the replica last planned under it (its memos are forgotten with
        it)."""
        self.memory: dict[str, KeyMemory] = {}
        """key -> what the core remembers of it between passes (the one holder)."""

    def _remember(self, key: str, memory: KeyMemory) -> None:
        if memory == EMPTY:
            self.memory.pop(key, None)
        else:
            self.memory[key] = memory

    async def reconcile(self, key: str) -> Result:
        irep = self._replicas.get(key)
        if irep is None:
            return await self._gone(key)
        # Under an Orphan deletion no pod is written: writes still unobserved (the collector
        # took the pods, and their events, away from this key) need no waiting for.
        if not self._expectations.satisfied(key) and not orphaning(irep):
            log.debug(
                names.LogLine.WAITING_FOR_CACHE,
                extra=kv(key=key, pending=self._expectations.pending(key)),
            )
            return Result(
                requeue_after=max(self._expectations.remaining(key), MIN_EXPECTATION_WAIT)
            )
        meta = irep.get("metadata") or {}
        version = str(meta.get("resourceVersion") or "")
        if not self._expectations.replica_current(key, version):
            return Result(requeue_after=RETRY_SOON)  # its update event comes first, usually
        uid = str(meta.get("uid") or "")
        self._uids[key] = uid
        statusmetrics.stored(key, _stored_encoding(irep))
        memory = self.memory.get(key, EMPTY)
        fleet = await self._fleet_settings()
        try:
            with collector_paused():  # a burst of allocation: see collector_paused
                target, observed = observe_replica(
                    irep,
                    fleet,
                    max_rows=self._encoding.bound,
                    pods=self._pods.by_index(OWNER_UID, uid),
                    revisions=self._revisions_of(irep),
                    slices=self._slices_of,
                    pod_groups=(
                        self._labelled(self._pod_groups, irep)
                        if self._pod_groups is not None
                        else None
                    ),
                )
        except StatusDecodeFailed as err:
            self._decode_failed(key, irep, err, memory)
            return await self._left_alone(key, irep, err, fleet)
        except (InvalidReplica, RowsUnreadable) as err:
            self._unreadable(key, irep, err, memory)
            return await self._left_alone(key, irep, err, fleet)
        observed = self._with_nodes(observed)
        observed = self._with_migrations(observed, target, irep)
        memory = dataclasses.replace(memory, reported=None)
        self._remember(key, memory)
        adoptable = self._adoptable(target)
        adoption_refused: list[RefusedWrite] = []
        if adoptable and target.has_finalizer:
            adoption = await ownership.adopt(self._client, target=target, pods=adoptable)
            if adoption.errors:
                raise adoption.errors[0]
            if adoption.adopted:
                self._adopted(key, irep, adoption.adopted)
            if adoption.adopted or adoption.retry:
                # Plan once the cache shows them as ours (their update events wake the key).
                return Result(requeue_after=RETRY_SOON)
            adoption_refused = adoption.refused
        with collector_paused():  # the pass's burst of allocation
            decision = decide(
                PassInput(
                    target=target,
                    observed=observed,
                    settings=self._settings,
                    now=self._clock.now(),
                    monotonic=self._clock.monotonic(),
                    busy=self._busy(),
                    memory=memory,
                    stored=StoredForm(
                        version=version,
                        status=irep.get("status"),
                        settings=self._encoding,
                        own_write=ROWS.is_own_write(irep),
                    ),
                    adoptable=bool(adoptable),
                )
            )
        decided, memory = decision.plan, decision.memory
        self._log_wave(decided, namespace=target.namespace, name=target.name)
        outcome = await self._executor.execute(key=key, irep=irep, target=target, plan=decided)
        outcome.write_refused[:0] = adoption_refused
        self._expectations.expect_replica_past(key, outcome.superseded)
        if outcome.stopped == "too_large":
            settled = settle(memory, decided, self._report(key, irep, outcome))
            self._remember(key, self._too_large(key, irep, outcome, settled.memory))
            return Result(requeue=True)  # with the key's backoff, until the status fits
        memory = dataclasses.replace(memory, size_reported=None)
        if outcome.names_taken:
            await self._free_names(key, target.uid, outcome)
        settled = settle(memory, decided, self._report(key, irep, outcome))
        self._remember(key, settled.memory)
        result = self._result(key, outcome, settled.requeue_after)
        if settled.backoff:
            return Result(requeue=True)  # the rate limiter's back-off, not the plan's timers
        return result

    def _with_migrations(
        self, observed: ObservedState, target: ReplicaTarget, irep: Mapping[str, Any]
    ) -> ObservedState:
        parent = None
        if self._services is not None and target.parent is not None:
            parent = self._services.get(f"{target.namespace}/{target.parent.name}")
        return with_migrations(observed, revisions=self._revisions_of(irep), parent=parent)

    def _with_nodes(self, observed: ObservedState) -> ObservedState:
        """``observed`` with the cached nodes of its pods; none known (``nodes`` None) until
        the node cache has synced, so a node not listed yet is never taken for gone."""
        if self._nodes is None or not self._nodes.has_synced():
            return observed  # (what _cached_nodes finds: nothing, before the pods are read)
        last = self._pod_nodes
        if last is not None and last[0] is observed.pods and last[1] is observed.stray_pods:
            named = last[2]  # the very same pods as the pass before (the memos hand them out)
        else:
            pods = chain(chain.from_iterable(observed.pods.values()), observed.stray_pods)
            named = frozenset(pod.node for pod in pods if pod.node)
            self._pod_nodes = (observed.pods, observed.stray_pods, named)
        found = self._cached_nodes_named(named)
        if found is None:
            return observed
        return dataclasses.replace(observed, nodes=found)

    def _cached_nodes(self, pods: Iterable[PodView]) -> dict[str, NodeView] | None:
        """The cached nodes of ``pods`` by name (a node missing is gone); None until the node
        cache has synced, or without one."""
        return self._cached_nodes_named({pod.node for pod in pods if pod.node})

    def _cached_nodes_named(self, named: Iterable[str]) -> dict[str, NodeView] | None:
        if self._nodes is None or not self._nodes.has_synced():
            return None
        store = self._nodes.store
        found: dict[str, NodeView] = {}
        for name in named:
            cached = store.get(name)
            if cached is not None:
                found[name] = node_view(cached)
        return found

    def _slices_of(self, namespace: str, service: str) -> list[Obj]:
        """The cached EndpointSlices of the Service ``service`` (none without a cache)."""
        if self._slices is None:
            return []
        return self._slices.by_index(SERVICE_NAME, f"{namespace}/{service}")

    async def _fleet_settings(self) -> LifecycleConfig:
        """This pass's ``lifecycle`` settings; a failed ConfigMap read fails the pass (it is
        retried), since stale settings are never used in place of a read."""
        fleet = await self._lifecycle()
        if fleet.problems and fleet.problems != self._lifecycle_problems:
            log.error(names.LogLine.LIFECYCLE_INVALID, extra=kv(errors=list(fleet.problems)))
        self._lifecycle_problems = fleet.problems
        return fleet

    def _revisions_of(self, irep: Mapping[str, Any]) -> list[Obj]:
        """The cached ControllerRevisions labelled as this replica's (another object's of
        the same labels included: a name it holds is a collision)."""
        if self._revisions is None:
            return []
        return self._labelled(self._revisions, irep)

    @staticmethod
    def _labelled(cache: ObjectCache, irep: Mapping[str, Any]) -> list[Obj]:
        """The cached objects in ``irep``'s namespace labelled with its InferenceService and
        component (ControllerRevisions, PodGroups)."""
        namespace = str((irep.get("metadata") or {}).get("namespace") or "")
        return labelled(cache.by_index(NAMESPACE, namespace), irep)

    def _report(self, key: str, irep: Mapping[str, Any] | None, outcome: Outcome) -> PassReport:
        """What the pass came to, for :func:`~..core.decide.settle`; its refused writes
        reported first: one WARNING line and one Warning event (on the InferenceReplica,
        through the budgeted recorder, which aggregates repeats) per kind of write, naming
        the first object refused."""
        firsts: list[RefusedWrite] = []
        if outcome.write_refused:
            firsts = report(
                outcome.write_refused,
                key=key,
                involved=irep,
                events=self._events,
                logger=log,
                requeues=self._requeues(key),
            )
        return PassReport(
            stopped=outcome.stopped,
            status_stored=outcome.status_stored,
            refused=dict(outcome.refused),
            write_refused=tuple(firsts),
            retry_soon=outcome.retry_soon,
            monotonic=self._clock.monotonic(),
            removed_requests=tuple(outcome.removed_requests),
        )

    def _log_wave(self, decided: Plan, *, namespace: Any, name: Any) -> None:
        if decided.wave_log is not None:
            log.info(
                names.LogLine.SCALE_DOWN_WAVE,
                extra=kv(
                    namespace=namespace, inferenceReplica=name, **decided.wave_log.log_values()
                ),
            )

    def _adoptable(self, target: ReplicaTarget) -> list[Mapping[str, Any]]:
        """Cached pods no controller owns that ``target`` may adopt (:mod:`..core.orphans`)."""
        if target.deleting or target.paused:
            return []  # the core adopts none then; the cache needn't be read
        cached = self._pods.by_index(INFERENCE_SERVICE, f"{target.namespace}/{target.isvc}")
        return orphans.adoptable(target, cached)

    def _adopted(self, key: str, irep: Mapping[str, Any], pods: list[str]) -> None:
        log.info(names.LogLine.PODS_ADOPTED, extra=kv(key=key, pods=len(pods), first=pods[0]))
        message = names.pods_adopted_message(pods)
        self._events.event(irep, type=NORMAL, reason=names.EVENT_PODS_ADOPTED, message=message)

    async def _free_names(self, key: str, uid: str, outcome: Outcome) -> None:
        """Drain the pods the core found holding our pod names for an earlier
        InferenceReplica of this name (:func:`..core.orphans.earlier_holders`), once a fresh
        list confirms each; look again soon either way."""
        namespace, name = split_key(key)
        cached = {taken: self._pods.get(f"{namespace}/{taken}") for taken in outcome.names_taken}
        holders = orphans.earlier_holders(outcome.names_taken, cached, key=key, uid=uid)
        if holders.look_again:
            outcome.retry_soon = True
        if not holders.earlier:
            return
        left = await ownership.leftovers(
            self._client,
            namespace=namespace or "",
            replica=name,
            pods=holders.earlier,
            current_uid=uid,
        )
        if not left.pods:
            return
        log.info(
            names.LogLine.DRAINING_LEFTOVERS,
            extra=kv(key=key, pods=len(left.pods), first=left.pods[0]["metadata"]["name"]),
        )
        drained = orphans.drain_left_over([pod_view(pod, replica=name) for pod in left.pods])
        await self._executor.run_pod_actions(
            outcome, key=key, namespace=namespace or "", plan=drained
        )

    def _result(self, key: str, outcome: Outcome, requeue_after: float | None) -> Result:
        if outcome.stopped == "conflict":
            log.debug(names.LogLine.STATUS_CONFLICT, extra=kv(key=key))
            return Result(requeue=True)
        if outcome.stopped in ("gone", "refused"):
            # A refused pass is reported and requeued with back-off by the caller.
            return Result()
        if outcome.errors:
            first = outcome.errors[0]
            if len(outcome.errors) > 1:
                first.add_note(f"and {len(outcome.errors) - 1} more failed write(s) in this pass")
            raise first
        return Result(requeue_after=requeue_after) if requeue_after is not None else Result()

    def _first_report(self, key: str, irep: Mapping[str, Any], memory: KeyMemory) -> bool:
        """Whether this version of ``irep`` is yet to be reported unreadable (and it now
        is): said once per version, since pod events would repeat it endlessly."""
        version = str((irep.get("metadata") or {}).get("resourceVersion") or "")
        after = memory.report_once(version)
        if after is not None:
            self._remember(key, after)
        return after is not None

    def _decode_failed(
        self, key: str, irep: Mapping[str, Any], err: StatusDecodeFailed, memory: KeyMemory
    ) -> None:
        if not self._first_report(key, irep, memory):
            return
        namespace, name = split_key(key)
        statusmetrics.decode_failed(err.reason)
        log.error(
            names.LogLine.STATUS_DECODE_FAILED,
            extra=kv(key=key, reason=err.reason, detail=err.detail[:1000]),
        )
        message = decode_failed_message(
            namespace=namespace or "", name=name, reason=err.reason, detail=err.detail
        )
        self._events.event(irep, type=WARNING, reason=REASON_DECODE_FAILED, message=message)

    def _too_large(
        self, key: str, irep: Mapping[str, Any], outcome: Outcome, memory: KeyMemory
    ) -> KeyMemory:
        """A write rejected as too large: the status write is StatusSizeExceeded (its own
        bytes and encoding, and the metric); any other write is a WriteSizeExceeded that
        names it. Logged and recorded once per resourceVersion and write."""
        rejected = outcome.too_large
        assert rejected is not None, "stopped as too_large without the rejected write"
        encoding = rejected.encoding
        if encoding is not None:
            statusmetrics.size_exceeded(encoding)
        version = str((irep.get("metadata") or {}).get("resourceVersion") or "")
        after = memory.report_too_large_once(rejected.write, version)
        if after is None:
            return memory
        namespace, name = split_key(key)
        if encoding is not None:
            log.error(
                names.LogLine.STATUS_TOO_LARGE,
                extra=kv(key=key, bytes=rejected.size, encoding=encoding, error=rejected.error),
            )
            message = size_exceeded_message(
                namespace=namespace or "", name=name, size=rejected.size, encoding=encoding
            )
            self._events.event(irep, type=WARNING, reason=REASON_SIZE_EXCEEDED, message=message)
            return after
        log.error(names.LogLine.WRITE_TOO_LARGE, extra=kv(key=key, **rejected.log_fields()))
        message = rejected.message(namespace=namespace or "", name=name)
        self._events.event(
            irep, type=WARNING, reason=names.EVENT_WRITE_SIZE_EXCEEDED, message=message
        )
        return after

    def _unreadable(
        self, key: str, irep: Mapping[str, Any], err: Exception, memory: KeyMemory
    ) -> None:
        if not self._first_report(key, irep, memory):
            return
        spec = isinstance(err, InvalidReplica)
        log.error(
            names.LogLine.SPEC_INVALID if spec else names.LogLine.STATUS_UNREADABLE,
            extra=kv(key=key, error=str(err)),
        )
        reason = names.EVENT_SPEC_INVALID if spec else names.EVENT_STATUS_UNREADABLE
        self._events.event(irep, type=WARNING, reason=reason, message=str(err)[:1000])

    async def _left_alone(
        self, key: str, irep: Mapping[str, Any], err: Exception, fleet: LifecycleConfig
    ) -> Result:
        """An unreadable replica, already reported: a terminal error until it is edited (its
        update event wakes the key), unless it is deleted and its pods are to be drained."""
        if (irep.get("metadata") or {}).get("deletionTimestamp"):
            return await self._teardown_from_pods(key, irep, fleet)
        raise TerminalError(f"{key}: {err}"[:1000], reported=True) from err

    async def _teardown_from_pods(
        self, key: str, irep: Mapping[str, Any], fleet: LifecycleConfig
    ) -> Result:
        """A replica that can't be read is left alone, unless it is deleted: then its pods are
        drained in the teardown's waves from what they show (:mod:`..core.teardown`), pods
        that don't go are escalated (force-delete, the teardown deadline) as on any teardown,
        and the finalizer comes off, or the replica, its pods and its InferenceService would
        wait for a repair for ever."""
        meta = irep.get("metadata") or {}
        finalizers = meta.get("finalizers") or ()
        if not meta.get("deletionTimestamp") or names.FINALIZER not in finalizers:
            return Result()
        uid = str(meta.get("uid") or "")
        raw = [
            pod
            for pod in self._pods.by_index(OWNER_UID, uid)
            if controller_uid(pod, kind=KIND_INFERENCE_REPLICA) == uid
        ]
        pods = [pod_view(pod, replica=str(meta.get("name") or "")) for pod in raw]
        target = teardown_target(irep, raw, fleet=fleet)
        decided = teardown_from_pods(pods, settings=self._settings, orphaning=orphaning(irep))
        decided, memory = escalate_from_pods(
            decided,
            target=target,
            pods=pods,
            nodes=self._cached_nodes(pods),
            memory=self.memory.get(key, EMPTY),
            now=self._clock.now(),
        )
        self._log_wave(decided, namespace=meta.get("namespace"), name=meta.get("name"))
        gates, deletions = len(decided.of_type(SetServingGate)), len(decided.of_type(DeletePods))
        if gates or deletions:
            log.info(
                names.LogLine.TEARDOWN_FROM_PODS,
                extra=kv(key=key, pods=len(pods), gates=gates, deletions=deletions),
            )
        outcome = await self._executor.execute(
            key=key, irep=irep, target=target, plan=decided, selector=_pods_selector(irep)
        )
        if outcome.stopped == "too_large":
            self._remember(key, self._too_large(key, irep, outcome, memory))
            return Result(requeue=True)
        settled = settle(memory, decided, self._report(key, irep, outcome))
        self._remember(key, settled.memory)
        if settled.backoff:
            return Result(requeue=True)
        return self._result(key, outcome, settled.requeue_after)

    async def _gone(self, key: str) -> Result:
        """Drain the pods of an InferenceReplica that no longer exists (its finalizer was
        removed by hand; the garbage collector deletes such pods too, at once, and omed
        drains those it finds first: while the collector lags, or where there is none)."""
        namespace, name = split_key(key)
        pods = [
            pod
            for pod in self._pods.by_index(NAMESPACE, namespace or "")
            if orphans.owner_key(pod) == key
        ]
        if not pods:
            self._expectations.forget(key)
            self.memory.pop(key, None)
            uid = self._uids.pop(key, None)
            if uid is not None:  # what the pass memos keep of it goes with it
                ROWS.forget(uid)
                POD_VIEWS.forget(uid)
                forget_replica(uid)
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
        drained = orphans.drain_left_over([pod_view(pod, replica=name) for pod in left.pods])
        outcome = Outcome()
        await self._executor.run_pod_actions(
            outcome, key=key, namespace=namespace or "", plan=drained
        )
        if outcome.errors:
            raise outcome.errors[0]
        # No object is left to carry an event or a condition.
        settled = settle(self.memory.get(key, EMPTY), drained, self._report(key, None, outcome))
        self._remember(key, settled.memory)
        if settled.backoff:
            return Result(requeue=True)
        return Result(requeue_after=settled.requeue_after)


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


__all__ = ["InferenceReplicaReconciler", "ObjectCache"]
