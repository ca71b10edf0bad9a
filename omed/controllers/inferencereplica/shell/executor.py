"""The executor: does what a :class:`~.actions.Plan` says, in the one safe order.

Why: the planner decides from a cache; the executor talks to the API server and must make
each decision safe against what the cache didn't know. Order and guards:

1. ``AddFinalizer`` (optimistic lock on the cached resourceVersion): before omed owns a
   pod, so a deleted InferenceReplica waits for its pods to be drained; then the migration
   audit rows (:mod:`.migrationwrites`), so a record never says more than its row; a ledger
   that keeps changing stops the pass as a Conflict would;
2. ``WriteStatus`` (optimistic lock): the rows, with every new operation, are durable before
   any side effect, in the form :mod:`..core.encoding` picks (a write that changes the stored form
   records InstanceStatusConverted). If this write fails (Conflict: the cache was stale;
   NotFound; TooLarge: the status doesn't fit; a refusal, :mod:`omed.controllers.refusals`),
   the pass stops here and no pod is touched; the same holds for step 1, except that a
   refused finalizer patch still lets the status write (and its events) go, so the status
   can say why nothing else moves;
3. events (only after the status that records their transition is stored), then the
   migration requests the status answers are removed from the InferenceService;
4. the update revision's ControllerRevision (a failure holds this pass's pod creations back:
   a pod is built from its revision's record), then serving gates, pod creations, pod
   deletions, each first *expected* (:mod:`.expectations`,
   whose timeout for it starts again when the API server answers);
   creations tolerate ``AlreadyExists`` (fixed names: a repeat after a crash), deletions
   tolerate ``NotFound``;
5. PodGroup creates and patches go ahead of the pod actions, their deletes (uid
   precondition) after them (:mod:`.podgroupwrites`);
6. old ControllerRevisions past the history limit (uid precondition);
7. ``RemoveFinalizer`` after re-listing the pods from the API server.

Every write the API server refuses for good (403, 401, 400, 405, a 422 that isn't a stale
patch) is recorded as a :class:`~omed.controllers.refusals.RefusedWrite` on the
:class:`Outcome` (``write_refused``), not raised: the reconciler reports it and backs off.

A write of the InferenceReplica that the API server rejects as too large (steps 1, 2 and 7)
is recorded as a :class:`~..core.rejectedwrite.RejectedWrite` on the :class:`Outcome`: which
write it was, the bytes sent, and for a status write its encoding. Only a status write is a
StatusSizeExceeded (the event users filter for, with that write's own size and encoding); the
others are :data:`~..core.names.EVENT_WRITE_SIZE_EXCEEDED`, whose message names the write.

Destructive steps re-read what they act on: before deleting an Instance's pods, each pod is
read from the API server, and so are the EndpointSlices of the component's traffic Service
when it has any; the deletion goes ahead only if every pod is still the same pod (uid) and
not routed (Ready not True, gate not True, and no slice lists it as a ready endpoint); each
delete then carries uid and resourceVersion preconditions, so a pod that changed after the
read is not deleted.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from omed.api.constants import (
    API_VERSION,
    KIND_INFERENCE_REPLICA,
    KIND_INFERENCE_SERVICE,
    READINESS_GATE_SERVING,
)
from omed.clock import Clock, rfc3339
from omed.controllers.inferencereplica.core import escalation, names
from omed.controllers.inferencereplica.core.actions import (
    AddFinalizer,
    CreatePods,
    DeletePods,
    ForceDeletePod,
    PatchPodImages,
    Plan,
    PodRef,
    RecordEvent,
    RemoveFinalizer,
    RemoveReleaseAnnotation,
    SetServingGate,
    WriteStatus,
)
from omed.controllers.inferencereplica.core.encoding import (
    ROW_CELLS,
    StatusEncodingSettings,
    status_write,
)
from omed.controllers.inferencereplica.core.migrationactions import (
    ConsumeMigrationRequests,
    WriteAuditRow,
)
from omed.controllers.inferencereplica.core.model import CreateRefusal, ReplicaTarget
from omed.controllers.inferencereplica.core.nodes import (
    HEALTHY,
    NODE_GONE,
    NodeState,
    node_state_of,
    node_view,
)
from omed.controllers.inferencereplica.core.observe import endpoint_readiness, pod_view
from omed.controllers.inferencereplica.core.podgroupactions import (
    CreatePodGroup,
    DeletePodGroup,
    UpdatePodGroup,
)
from omed.controllers.inferencereplica.core.rejectedwrite import RejectedWrite, ReplicaWriteKind
from omed.controllers.inferencereplica.core.revisionactions import (
    AdoptControllerRevision,
    CreateControllerRevision,
    DeleteControllerRevision,
)
from omed.controllers.inferencereplica.core.status import (
    ROWS,
    collector_paused,
    encode_rows_into_status,
)
from omed.controllers.inferencereplica.core.waiting import permanent_refusal, refusal_token
from omed.controllers.inferencereplica.shell import (
    migrationwrites,
    podgroupwrites,
    revisionwrites,
    statusmetrics,
    updatewrites,
)
from omed.controllers.inferencereplica.shell.expectations import Expectations
from omed.controllers.ledger import document as ledger
from omed.controllers.ledger.writer import write_entry
from omed.controllers.owners import controller_uid
from omed.controllers.refusals import RefusedWrite, refused_write, uid_changed
from omed.events import NORMAL, EventSink
from omed.informers.endpoints import LABEL_SERVICE_NAME
from omed.kube.api import KubeApi
from omed.kube.client import STRATEGIC_MERGE_PATCH
from omed.kube.errors import AlreadyExists, ApiError, Conflict, NotFound, TooLarge
from omed.kube.resources import CONFIGMAPS, ENDPOINT_SLICES, INFERENCE_REPLICAS, NODES, PODS
from omed.log import kv
from omed.statuscodec import REASON_CONVERTED, Encoding, converted_message, encoded_size

log = logging.getLogger("omed.controllers.inferencereplica")

A = TypeVar("A")

WRITE_CONCURRENCY = 16
"""Pod writes one pass keeps in flight at once (the client's limiter paces them further)."""


class _TooLarge(Exception):
    def __init__(self, rejected: RejectedWrite) -> None:
        super().__init__(rejected.write)
        self.rejected = rejected


@dataclass(slots=True)
class Outcome:
    """What executing a plan came to."""

    stopped: str | None = None
    """``conflict``, ``gone``, ``too_large`` or ``refused`` when the pass stopped before its
    side effects."""
    status_sent: tuple[int, Encoding] | None = None
    """Bytes and encoding of the last status write sent."""
    status_stored: bool = False
    """A status write was accepted (what the status pace counts; a refused one doesn't)."""
    too_large: RejectedWrite | None = None
    """The write rejected as too large, when ``stopped`` is ``too_large``."""
    retry_soon: bool = False
    """Something was skipped for safety or lost a race; look again shortly."""
    errors: list[Exception] = field(default_factory=list)
    names_taken: list[str] = field(default_factory=list)
    """Pods whose create met AlreadyExists (a repeat, or a pod of someone else)."""
    superseded: list[str] = field(default_factory=list)
    """resourceVersions of the InferenceReplica that this pass's writes replaced."""
    created: int = 0
    deleted: int = 0
    refused: dict[int, CreateRefusal] = field(default_factory=dict)
    """Instance index -> a pod create refused by quota or an unreachable webhook (a hold,
    not an error: the planner records it as the operation's waiting token)."""
    write_refused: list[RefusedWrite] = field(default_factory=list)
    """Writes the API server refused for good (RBAC, validation), in the order met."""
    removed_requests: list[str] = field(default_factory=list)
    """The migration request annotations removed from the parent InferenceService."""


def event_object(target: ReplicaTarget) -> dict[str, Any]:
    """What events are about: the parent InferenceService, or the standalone replica."""
    if target.parent is not None:
        meta = {"name": target.parent.name, "namespace": target.namespace}
        if target.parent.uid:
            meta["uid"] = target.parent.uid
        return {"apiVersion": API_VERSION, "kind": KIND_INFERENCE_SERVICE, "metadata": meta}
    return {
        "apiVersion": API_VERSION,
        "kind": "InferenceReplica",
        "metadata": {"name": target.name, "namespace": target.namespace, "uid": target.uid},
    }


class Executor:
    """Runs plans for one controller; shares its expectations with the event handlers."""

    def __init__(
        self,
        *,
        client: KubeApi,
        events: EventSink,
        expectations: Expectations,
        clock: Clock,
        status_encoding: StatusEncodingSettings | None = None,
    ) -> None:
        self._client = client
        self._events = events
        self._expectations = expectations
        self._clock = clock
        self._encoding = status_encoding or StatusEncodingSettings()

    async def execute(
        self,
        *,
        key: str,
        irep: Mapping[str, Any],
        target: ReplicaTarget,
        plan: Plan,
        selector: str | None = None,
    ) -> Outcome:
        """Run ``plan`` in the module's order. ``selector`` finds the replica's pods for the
        list ``RemoveFinalizer`` waits on (filtered by its uid); None: its ``isvc`` and
        ``component`` labels. A teardown planned from the pods alone (:mod:`..core.teardown`,
        ``target`` from :func:`~..core.teardown.teardown_target`) holds only events, pod
        actions, force deletes and ``RemoveFinalizer``, and gives the selector read off the
        raw spec: no status write, the rows being what can't be read."""
        outcome = Outcome()
        current: Mapping[str, Any] = irep
        finalizer_refused = False
        for action in plan.of_type(AddFinalizer):
            del action
            current = await self._guarded(
                outcome, current, self._add_finalizer(current), verb="patch", resource=None
            )
            if outcome.stopped == "refused":
                # Without the finalizer no pod may be touched, but the status may still be
                # written: it is where the WriteRefused condition says why nothing moves.
                finalizer_refused, outcome.stopped = True, None
            elif outcome.stopped:
                return outcome
        for row in plan.of_type(WriteAuditRow):
            try:
                refused = await migrationwrites.write_audit_row(
                    self._client, namespace=target.namespace, action=row
                )
            except Conflict:
                outcome.stopped = "conflict"
                return outcome
            if refused is not None:
                outcome.write_refused.append(refused)
                outcome.stopped = "refused"
                return outcome
        for write in plan.of_type(WriteStatus):
            current = await self._guarded(
                outcome,
                current,
                self._write_status(outcome, current, write),
                verb="update",
                resource=names.RESOURCE_STATUS,
            )
            if outcome.stopped:
                return outcome
        involved = event_object(target)
        for event in plan.of_type(RecordEvent):
            self._record(involved, event)
        if finalizer_refused:
            outcome.stopped = "refused"
            return outcome
        for consumed in plan.of_type(ConsumeMigrationRequests):
            refused = await migrationwrites.consume_requests(
                self._client, namespace=target.namespace, action=consumed
            )
            if refused is not None:
                outcome.write_refused.append(refused)
            else:
                outcome.removed_requests.extend(consumed.keys)
        for release in plan.of_type(RemoveReleaseAnnotation):
            self._applied(
                outcome,
                await updatewrites.remove_release_annotation(
                    self._client, namespace=target.namespace, name=target.name, action=release
                ),
            )
        pods_plan = plan
        for adopted in plan.of_type(AdoptControllerRevision):
            failure = await revisionwrites.adopt(self._client, target=target, action=adopted)
            if failure is not None:
                self._failed(outcome, failure)
        for recorded in plan.of_type(CreateControllerRevision):
            failure = await revisionwrites.record(
                self._client, namespace=target.namespace, action=recorded
            )
            if failure is not None:
                # No pod of a revision without its record: they wait for the next pass.
                self._failed(outcome, failure)
                pods_plan = dataclasses.replace(
                    plan, actions=tuple(a for a in plan.actions if not isinstance(a, CreatePods))
                )
        # A gang's pods are planned only once the cache shows its PodGroup, so a failed
        # PodGroup write holds no pod back; it is reported like any other write.
        namespace = target.namespace
        await self._each(outcome, plan.of_type(CreatePodGroup), podgroupwrites.create, namespace)
        await self._each(outcome, plan.of_type(UpdatePodGroup), podgroupwrites.update, namespace)
        await self.run_pod_actions(
            outcome,
            key=key,
            namespace=namespace,
            plan=pods_plan,
            owner=target.uid if target.deleting else None,
        )
        await self._each(outcome, plan.of_type(DeletePodGroup), podgroupwrites.delete, namespace)
        await self._each(
            outcome, plan.of_type(DeleteControllerRevision), revisionwrites.prune, namespace
        )
        for patch in plan.of_type(PatchPodImages):
            self._applied(
                outcome,
                await updatewrites.patch_pod_images(
                    self._client, namespace=target.namespace, action=patch
                ),
            )
        forced = plan.of_type(ForceDeletePod)
        if forced:
            await asyncio.gather(
                *(
                    self._force_delete(outcome, key=key, target=target, action=action)
                    for action in forced
                )
            )
        if selector is None:
            selector = names.label_selector(target.isvc, target.component)
        for remove in plan.of_type(RemoveFinalizer):
            if outcome.errors:
                break
            await self._remove_finalizer(
                outcome,
                current,
                namespace=target.namespace,
                uid=target.uid,
                selector=None if remove.lifted else selector,
            )
        return outcome

    async def run_pod_actions(
        self, outcome: Outcome, *, key: str, namespace: str, plan: Plan, owner: str | None = None
    ) -> None:
        """Gates, then creations, then deletions: each kind fully sent before the next.

        ``owner``: the uid of an InferenceReplica being torn down. Its pods are then drained
        and deleted only while a fresh read still shows them controlled by it: when an
        ``propagationPolicy: Orphan`` deletion ends, the collector has taken the pods'
        references off before it takes its ``orphan`` finalizer off the replica, but the
        replica's watch can deliver that before the pods' watch delivers theirs, and the
        cache then shows orphaned pods as the dying replica's."""
        semaphore = asyncio.Semaphore(WRITE_CONCURRENCY)
        now = self._clock.now()
        gates = plan.of_type(SetServingGate)
        if owner is not None:
            gates = await self._still_owned(
                outcome, gates, namespace=namespace, owner=owner, semaphore=semaphore
            )
        await asyncio.gather(
            *(
                self._set_gate(
                    outcome, key=key, namespace=namespace, gate=gate, now=now, semaphore=semaphore
                )
                for gate in gates
            )
        )
        await asyncio.gather(
            *(
                self._create(
                    outcome, key=key, namespace=namespace, action=pods, semaphore=semaphore
                )
                for pods in plan.of_type(CreatePods)
            )
        )
        await asyncio.gather(
            *(
                self._delete_instance(
                    outcome,
                    key=key,
                    namespace=namespace,
                    action=pods,
                    semaphore=semaphore,
                    owner=owner,
                )
                for pods in plan.of_type(DeletePods)
            )
        )

    async def _still_owned(
        self,
        outcome: Outcome,
        gates: Sequence[SetServingGate],
        *,
        namespace: str,
        owner: str,
        semaphore: asyncio.Semaphore,
    ) -> list[SetServingGate]:
        """The gates whose pod a fresh read shows still controlled by ``owner`` (and the
        same pod); for any other, look again soon (the cache catches up)."""

        async def owned(gate: SetServingGate) -> bool:
            async with semaphore:
                try:
                    pod = await self._client.get(PODS, gate.pod.name, namespace)
                except NotFound:
                    return False
            same = (pod.get("metadata") or {}).get("uid") == gate.pod.uid
            return same and controller_uid(pod, kind=KIND_INFERENCE_REPLICA) == owner

        verdicts = await asyncio.gather(*(owned(gate) for gate in gates))
        if not all(verdicts):
            outcome.retry_soon = True
        return [gate for gate, ok in zip(gates, verdicts, strict=True) if ok]

    @staticmethod
    def _failed(outcome: Outcome, failure: RefusedWrite | Exception) -> None:
        if isinstance(failure, RefusedWrite):
            outcome.write_refused.append(failure)
        else:
            outcome.errors.append(failure)

    async def _each(
        self,
        outcome: Outcome,
        actions: Sequence[A],
        write: Callable[..., Awaitable[RefusedWrite | Exception | None]],
        namespace: str,
    ) -> None:
        """Send ``write`` for each action in turn; a refusal or error is reported and the
        rest still go (each is an independent object)."""
        for action in actions:
            failure = await write(self._client, namespace=namespace, action=action)
            if failure is not None:
                self._failed(outcome, failure)

    @staticmethod
    def _applied(outcome: Outcome, result: updatewrites.Applied) -> None:
        """Note what became of an update's patch: look again soon after a stale one."""
        if isinstance(result, RefusedWrite):
            outcome.write_refused.append(result)
        elif result == "stale":
            outcome.retry_soon = True

    # -- the InferenceReplica ---------------------------------------------------------------
    async def _guarded(
        self,
        outcome: Outcome,
        base: Mapping[str, Any],
        write: Any,
        *,
        verb: str,
        resource: str | None,
    ) -> Mapping[str, Any]:
        """Await ``write`` of the InferenceReplica ``base``; on a failure that stops the pass,
        set ``outcome.stopped`` and return ``{}`` (``base`` itself when it was refused)."""
        try:
            result: Mapping[str, Any] = await write
            outcome.superseded.append(str((base.get("metadata") or {}).get("resourceVersion")))
        except Conflict:
            outcome.stopped = "conflict"
            return {}
        except NotFound:
            outcome.stopped = "gone"
            return {}
        except _TooLarge as err:
            outcome.stopped = "too_large"
            outcome.too_large = err.rejected
            return {}
        except ApiError as err:
            name = str((base.get("metadata") or {}).get("name") or "")
            refusal = refused_write(
                err, verb=verb, resource=resource or INFERENCE_REPLICAS.plural, name=name
            )
            if refusal is None:
                raise
            outcome.write_refused.append(refusal)
            outcome.stopped = "refused"
            return base
        return result

    async def _add_finalizer(self, irep: Mapping[str, Any]) -> Mapping[str, Any]:
        meta = irep.get("metadata") or {}
        finalizers = [*(meta.get("finalizers") or ()), names.FINALIZER]
        patch = {"metadata": {"finalizers": finalizers, "resourceVersion": meta["resourceVersion"]}}
        try:
            result: Mapping[str, Any] = await self._client.patch(
                INFERENCE_REPLICAS, meta["name"], patch, meta.get("namespace")
            )
        except TooLarge as err:
            raise _TooLarge(
                RejectedWrite(
                    write=ReplicaWriteKind.ADD_FINALIZER,
                    size=encoded_size(patch),
                    object_size=encoded_size(irep),
                    error=err.message,
                )
            ) from err
        return result

    async def _write_status(
        self, outcome: Outcome, irep: Mapping[str, Any], write: WriteStatus
    ) -> Mapping[str, Any]:
        meta = irep.get("metadata") or {}
        body: dict[str, Any] = {
            "apiVersion": irep.get("apiVersion"),
            "kind": irep.get("kind"),
            "metadata": dict(meta),
            "spec": irep.get("spec"),
        }
        with collector_paused():  # every row encoded: see collector_paused
            rows = encode_rows_into_status({}, write.rows).get("instanceStatuses") or []
            decided = status_write(
                write.status.to_dict(),
                rows,
                stored=irep.get("status"),
                settings=self._encoding,
                overhead=encoded_size(body),
                memo=ROW_CELLS,
            )
            body["status"] = decided.status
            size = encoded_size(body)
        outcome.status_sent = (size, decided.encoding)
        try:
            result: Mapping[str, Any] = await self._client.replace_status(
                INFERENCE_REPLICAS, body, meta.get("namespace")
            )
        except TooLarge as err:
            raise _TooLarge(
                RejectedWrite(
                    write=ReplicaWriteKind.STATUS,
                    size=size,
                    object_size=encoded_size(irep),
                    encoding=decided.encoding,
                    error=err.message,
                )
            ) from err
        outcome.status_stored = True
        ROWS.wrote(
            str(meta.get("uid") or ""), decided.status, write.rows, max_rows=self._encoding.bound
        )
        namespace, name = str(meta.get("namespace") or ""), str(meta.get("name") or "")
        statusmetrics.written(decided.encoding, size)
        statusmetrics.stored(f"{namespace}/{name}", decided.encoding)
        if decided.converted is not None:
            old, new = decided.converted
            statusmetrics.converted(old, new)
            message = converted_message(namespace=namespace, name=name, old=old, new=new)
            log.info(
                names.LogLine.STATUS_CONVERTED,
                extra=kv(namespace=namespace, inferenceReplica=name, old=old, new=new),
            )
            self._events.event(
                result or irep, type=NORMAL, reason=REASON_CONVERTED, message=message
            )
        return result

    async def _remove_finalizer(
        self,
        outcome: Outcome,
        irep: Mapping[str, Any],
        *,
        namespace: str,
        uid: str,
        selector: str | None,
    ) -> None:
        """Remove omed's finalizer once a fresh list (``selector``) shows no pod of the
        replica; ``selector`` None: at once (the teardown deadline lifts it)."""
        left = (
            [
                pod
                for pod in await self._client.list_all(PODS, namespace, labelSelector=selector)
                if controller_uid(pod, kind=KIND_INFERENCE_REPLICA) == uid
            ]
            if selector is not None
            else []
        )
        if left:  # the cache is behind: not yet
            outcome.retry_soon = True
            return
        meta = irep.get("metadata") or {}
        kept = [f for f in meta.get("finalizers") or () if f != names.FINALIZER]
        patch = {
            "metadata": {"finalizers": kept or None, "resourceVersion": meta["resourceVersion"]}
        }
        try:
            await self._client.patch(INFERENCE_REPLICAS, meta["name"], patch, namespace)
        except Conflict:
            outcome.retry_soon = True
        except NotFound:
            pass
        except TooLarge as err:
            outcome.stopped = "too_large"
            outcome.too_large = RejectedWrite(
                write=ReplicaWriteKind.REMOVE_FINALIZER,
                size=encoded_size(patch),
                object_size=encoded_size(irep),
                error=err.message,
            )
        except ApiError as err:
            refusal = refused_write(
                err, verb="patch", resource=INFERENCE_REPLICAS.plural, name=str(meta["name"])
            )
            if refusal is None:
                raise
            outcome.write_refused.append(refusal)

    def _record(self, involved: Mapping[str, Any], event: RecordEvent) -> None:
        self._events.event(involved, type=event.type, reason=event.reason, message=event.message)

    # -- pods ---------------------------------------------------------------------------------
    async def _set_gate(
        self,
        outcome: Outcome,
        *,
        key: str,
        namespace: str,
        gate: SetServingGate,
        now: dt.datetime,
        semaphore: asyncio.Semaphore,
    ) -> None:
        status = "True" if gate.serving else "False"
        patch = {
            "metadata": {"uid": gate.pod.uid},
            "status": {
                "conditions": [
                    {
                        "type": READINESS_GATE_SERVING,
                        "status": status,
                        "reason": gate.reason,
                        "message": "",
                        "lastTransitionTime": rfc3339(now),
                    }
                ]
            },
        }
        self._expectations.expect_gate(key, gate.pod.uid, gate.serving)
        async with semaphore:
            try:
                await self._client.patch(
                    PODS,
                    gate.pod.name,
                    patch,
                    namespace,
                    content_type=STRATEGIC_MERGE_PATCH,
                    subresource="status",
                )
                self._expectations.sent(key, gate=gate.pod.uid)
            except (NotFound, Conflict):
                self._expectations.gate_failed(key, gate.pod.uid)  # gone or replaced
                outcome.retry_soon = True
            except BaseException as err:
                self._expectations.gate_failed(key, gate.pod.uid)
                if not isinstance(err, Exception):
                    raise
                if uid_changed(err):  # another pod holds the name now
                    outcome.retry_soon = True
                    return
                self._failed_write(
                    outcome, err, verb="patch", resource=f"{PODS.plural}/status", name=gate.pod.name
                )

    async def _create(
        self,
        outcome: Outcome,
        *,
        key: str,
        namespace: str,
        action: CreatePods,
        semaphore: asyncio.Semaphore,
    ) -> None:
        self._expectations.expect_creations(key, (pod.name for pod in action.pods))

        async def one(name: str, body: Mapping[str, Any]) -> None:
            async with semaphore:
                try:
                    await self._client.create(PODS, body, namespace)
                    self._expectations.sent(key, creation=name)
                    outcome.created += 1
                except AlreadyExists:
                    self._expectations.creation_failed(key, name)
                    outcome.names_taken.append(name)
                except ApiError as err:
                    self._expectations.creation_failed(key, name)
                    token = refusal_token(err.status, err.message)
                    if token is not None:
                        refusal = CreateRefusal(token, name, err.message[:500])
                        outcome.refused.setdefault(action.index, refusal)
                        return
                    rejected = permanent_refusal(err.status, err.message, _causes(err.body))
                    if rejected is not None:
                        refusal = CreateRefusal(rejected, name, err.message[:500], permanent=True)
                        outcome.refused.setdefault(action.index, refusal)
                    self._failed_write(outcome, err, verb="create", resource=PODS.plural, name=name)
                except BaseException as err:
                    self._expectations.creation_failed(key, name)
                    if not isinstance(err, Exception):
                        raise
                    outcome.errors.append(err)

        await asyncio.gather(*(one(pod.name, pod.body) for pod in action.pods))

    async def _delete_instance(
        self,
        outcome: Outcome,
        *,
        key: str,
        namespace: str,
        action: DeletePods,
        semaphore: asyncio.Semaphore,
        owner: str | None = None,
    ) -> None:
        """Re-read every pod, and the traffic Service's EndpointSlices; delete them all only
        if none is routed any more (and, ``owner`` given, those still controlled by it)."""
        try:
            listed = await self._ready_endpoints(namespace, action.service, semaphore)
        except Exception as err:
            outcome.errors.append(err)
            return
        fresh: list[tuple[PodRef, str]] = []
        for ref in action.pods:
            async with semaphore:
                try:
                    pod = await self._client.get(PODS, ref.name, namespace)
                except NotFound:
                    continue
            meta = pod.get("metadata") or {}
            if meta.get("uid") != ref.uid or meta.get("deletionTimestamp"):
                continue
            if owner is not None and controller_uid(pod, kind=KIND_INFERENCE_REPLICA) != owner:
                outcome.retry_soon = True  # orphaned behind the cache: never deleted
                continue
            if _routed(pod) or ref.uid in listed:
                log.info(
                    names.LogLine.SKIPPED_UNSAFE_DELETE,
                    extra=kv(namespace=namespace, pod=ref.name, instance=action.index),
                )
                outcome.retry_soon = True
                return
            fresh.append((ref, str(meta.get("resourceVersion") or "")))

        async def one(ref: PodRef, version: str) -> None:
            self._expectations.expect_deletion(key, ref.uid)
            async with semaphore:
                try:
                    await self._client.delete(
                        PODS, ref.name, namespace, uid=ref.uid, resource_version=version
                    )
                    self._expectations.sent(key, deletion=ref.uid)
                    outcome.deleted += 1
                except (NotFound, Conflict):
                    self._expectations.deletion_failed(key, ref.uid)
                    outcome.retry_soon = True
                except BaseException as err:
                    self._expectations.deletion_failed(key, ref.uid)
                    if not isinstance(err, Exception):
                        raise
                    self._failed_write(
                        outcome, err, verb="delete", resource=PODS.plural, name=ref.name
                    )

        await asyncio.gather(*(one(ref, version) for ref, version in fresh))

    async def _force_delete(
        self, outcome: Outcome, *, key: str, target: ReplicaTarget, action: ForceDeletePod
    ) -> None:
        """Read the pod and its node again; if the escalation still finds the pod due
        (:func:`~..core.escalation.judge`), write its ForceDelete audit row, then delete it with
        grace 0 and a uid precondition, then record PodForceDeleted."""
        namespace, ref = target.namespace, action.pod
        try:
            pod = await self._client.get(PODS, ref.name, namespace)
        except NotFound:
            return  # gone meanwhile
        if (pod.get("metadata") or {}).get("uid") != ref.uid:
            return
        state = await self._node_state(action.node)
        view = pod_view(pod, replica=target.name)
        verdict = escalation.judge(
            view,
            state,
            overdue_slack=action.overdue_slack,
            threshold=action.node_unreachable_threshold,
            now=self._clock.now(),
        )
        if not verdict.due:
            return  # not any more, or not yet (the plan's requeue comes at its time)
        if target.parent is not None and target.parent.uid:
            owner = ledger.Owner(name=target.parent.name, uid=target.parent.uid)
            entry = ledger.own_entry(
                ledger.REASON_FORCE_DELETE,
                key=ref.uid,
                component=target.component,
                index=action.index,
                node=action.node,
                revision=action.revision,
                now=self._clock.now(),
            )
            try:  # the audit row first: no force delete without its trace
                await write_entry(self._client, namespace=namespace, owner=owner, entry=entry)
            except Conflict:
                outcome.retry_soon = True
                return
            except Exception as err:
                self._failed_write(
                    outcome,
                    err,
                    verb="update",
                    resource=CONFIGMAPS.plural,
                    name=ledger.ledger_name(owner.name),
                )
                return
        self._expectations.expect_deletion(key, ref.uid)
        try:
            await self._client.delete(
                PODS, ref.name, namespace, grace_period_seconds=0, uid=ref.uid
            )
        except (NotFound, Conflict):
            self._expectations.deletion_failed(key, ref.uid)
            outcome.retry_soon = True
            return
        except BaseException as err:
            self._expectations.deletion_failed(key, ref.uid)
            if not isinstance(err, Exception):
                raise
            self._failed_write(outcome, err, verb="delete", resource=PODS.plural, name=ref.name)
            return
        self._expectations.sent(key, deletion=ref.uid)
        log.info(
            names.LogLine.POD_FORCE_DELETED,
            extra=kv(key=key, pod=ref.name, node=action.node, cause=action.cause),
        )
        self._record(event_object(target), action.event)

    @staticmethod
    def _failed_write(
        outcome: Outcome, err: Exception, *, verb: str, resource: str, name: str
    ) -> None:
        """``err`` reported as a refusal of ``verb resource name`` where it is one, else as
        an error."""
        refusal = refused_write(err, verb=verb, resource=resource, name=name)
        Executor._failed(outcome, refusal if refusal is not None else err)

    async def _node_state(self, node: str | None) -> NodeState:
        """The state of ``node`` as the API server has it now (gone on NotFound)."""
        if node is None:
            return HEALTHY
        try:
            fresh = await self._client.get(NODES, node)
        except NotFound:
            return NodeState(NODE_GONE)
        return node_state_of(node, node_view(fresh))

    async def _ready_endpoints(
        self, namespace: str, service: str | None, semaphore: asyncio.Semaphore
    ) -> set[str]:
        """The uids of the pods that ``service``'s EndpointSlices list as ready endpoints now,
        read from the API server (the cache may lag the slices it judged by)."""
        if service is None:
            return set()
        async with semaphore:
            slices = await self._client.list_all(
                ENDPOINT_SLICES, namespace, labelSelector=f"{LABEL_SERVICE_NAME}={service}"
            )
        return {uid for uid, ready in endpoint_readiness(slices).items() if ready}


def _routed(pod: Mapping[str, Any]) -> bool:
    """Ready True or gate True on the pod as the API server has it now."""
    for cond in (pod.get("status") or {}).get("conditions") or ():
        if cond.get("type") in ("Ready", READINESS_GATE_SERVING) and cond.get("status") == "True":
            return True
    return False


def _causes(body: Any) -> tuple[str, ...]:
    """The ``details.causes[].type`` of an API server's Status answer."""
    details = body.get("details") if isinstance(body, dict) else None
    causes = details.get("causes") if isinstance(details, dict) else None
    return tuple(str(c.get("type") or "") for c in causes or () if isinstance(c, dict))


__all__ = ["Executor", "Outcome", "event_object"]
