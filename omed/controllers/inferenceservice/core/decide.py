"""The one entry of the InferenceService core: :func:`decide`, from what is observed (and what
this pass has written so far) to the next :class:`~.actions.Decision`.

A pass is at most four decisions, each a pure function of its input:

1. *Finalizer.* A live OMENative service without ``ome.io/inferenceservice-cleanup`` gets it
   before anything is created (a JSON patch guarded by the resourceVersion read). The pass goes
   on with the service the patch returned, not after a trip through the watch and the back of
   the queue. A refused patch creates nothing: the status says why (Ready False, reason
   WriteRefused).
2. *Replicas.* One InferenceReplica per OMENative component: created when missing, adopted when
   no controller owns it and its label, ``spec.parentRef`` and component are the projection's,
   patched (a JSON merge patch of what differs, guarded by the resourceVersion read) when what
   omed owns of it differs; then owned replicas of components no longer wanted are deleted. A
   replica of a wanted name owned by another controller stops the step there: the status says
   InferenceReplicaConflict. A Conflict or NotFound on a patch ends the pass (the caches are
   behind), as does an adoption a fresh read refused.
3. *Status.* Written when it says something the stored one doesn't, at once when that is news,
   else once its pace has passed (:mod:`.pacing`); the pass's refused writes are shown as
   condition WriteRefused.
4. *End.* The status write's outcome goes into the pacing memory; refused writes are reported
   and the key backs off through the rate limiter.

A deleted service: its owned replicas are deleted (none under propagationPolicy Orphan, where
the collector takes their owner references off), the condition WriteRefused alone is kept
current, and the finalizer goes once the caches and a fresh list show no owned replica left.

Invariants: nothing is created before the finalizer is on; the finalizer goes only after no
replica is owned; a decision on an unchanged, converged world writes nothing.
"""

from __future__ import annotations

from typing import Any

from omed.api.constants import CONDITION_READY, DEPLOYMENT_MODE_OME_NATIVE, LABEL_INFERENCE_SERVICE
from omed.api.inferencereplica import InferenceReplica
from omed.api.inferenceservice import InferenceService
from omed.controllers.deletion import FINALIZER_ORPHAN
from omed.controllers.inferenceservice.core.actions import (
    Action,
    AddFinalizer,
    AdoptReplica,
    CreateReplica,
    Decision,
    DeleteReplica,
    PatchReplica,
    RemoveFinalizer,
    ReportRefusals,
    WriteStatus,
)
from omed.controllers.inferenceservice.core.model import DecideInput, first_refusal
from omed.controllers.inferenceservice.core.names import FINALIZER, REASON_REPLICA_CONFLICT
from omed.controllers.inferenceservice.core.owned import (
    adoptable,
    needs_update,
    owned_by,
    replica_json,
    update_patch,
)
from omed.controllers.inferenceservice.core.pacing import PaceMemory, decide_pace
from omed.controllers.inferenceservice.core.project import (
    Projection,
    ProjectionError,
    project,
    resolve_mode,
)
from omed.controllers.inferenceservice.core.status import (
    ComponentReadiness,
    build_status,
    replica_readiness,
    status_changed,
    status_urgent,
    stored_status,
    with_write_refused,
)
from omed.controllers.refusedwrite import REASON_WRITE_REFUSED


def decide(given: DecideInput) -> Decision:
    """The next step of the pass ``given.progress`` describes."""
    service = given.progress.service or given.observed.service
    if service.metadata.deletion_timestamp is not None:
        return _finalize(given, service)
    return _reconcile(given, service)


def _end(
    given: DecideInput,
    *,
    requeue: bool = False,
    requeue_after: float | None = None,
    memory: PaceMemory | None = None,
) -> Decision:
    """The final decision: refused writes reported and backed off, else the pass's own look."""
    memory = given.memory if memory is None else memory
    refusals = given.progress.refusals
    if refusals:
        return Decision(actions=(ReportRefusals(refusals),), memory=memory, requeue=True)
    return Decision(actions=(), memory=memory, requeue=requeue, requeue_after=requeue_after)


def _step(given: DecideInput, actions: tuple[Action, ...]) -> Decision:
    return Decision(actions=actions, memory=given.memory, final=False)


def _finalizers_patch(service: InferenceService, finalizers: list[str]) -> list[dict[str, Any]]:
    return [
        {
            "op": "test",
            "path": "/metadata/resourceVersion",
            "value": service.metadata.resource_version,
        },
        {"op": "add", "path": "/metadata/finalizers", "value": finalizers},
    ]


def _status_body(service: InferenceService, status: dict[str, Any]) -> dict[str, Any]:
    meta = service.metadata
    return {
        "apiVersion": service.api_version,
        "kind": service.kind,
        "metadata": {
            "name": meta.name,
            "namespace": meta.namespace,
            "resourceVersion": meta.resource_version,
        },
        "status": {**(stored_status(service) or {}), **status},
    }


# -- A live service ---------------------------------------------------------------------------


def _reconcile(given: DecideInput, service: InferenceService) -> Decision:
    observed, progress = given.observed, given.progress
    meta = service.metadata
    mode, _ = resolve_mode(service, observed.runtime, observed.default_mode)
    if mode != DEPLOYMENT_MODE_OME_NATIVE:
        return _end(given)  # another mode's controller owns it
    finalizers = list(meta.finalizers or ())
    if FINALIZER not in finalizers:
        if progress.finalizer is None:
            patch = _finalizers_patch(service, [*finalizers, FINALIZER])
            return _step(given, (AddFinalizer(str(meta.namespace), str(meta.name), patch),))
        if progress.finalizer == "gone":
            return _end(given)
        # Refused: nothing may be created before the finalizer; the status says why.
        refusal = first_refusal(progress.refusals)
        message = refusal.message() if refusal is not None else ""
        return _status(
            given, service, components=(), failure=(REASON_WRITE_REFUSED, message), paced=False
        )
    pin = observed.pin
    if pin is not None and pin.source == "missing" and pin.drift is not None:
        # No fall-back to the live runtime: the replicas stay as they are.
        failure = (pin.drift.reason, pin.drift.message)
        return _status(given, service, components=(), failure=failure)
    try:
        projection = project(service, observed.runtime, default_mode=observed.default_mode)
    except ProjectionError as err:
        return _status(given, service, components=(), failure=(err.reason, str(err)))
    if not progress.replicas_done:
        actions = _replica_writes(given, service, projection)
        if actions:
            return _step(given, actions)
    if progress.stop == "requeue":
        return _end(given, requeue=True)
    if progress.stop == "poll":
        return _end(given, requeue_after=given.settings.deletion_poll)
    conflict = _conflict(given, service, projection)
    if conflict is not None:
        failure = (
            REASON_REPLICA_CONFLICT,
            f"InferenceReplica {conflict} exists and is not controlled by this InferenceService",
        )
        return _status(given, service, components=(), failure=failure)
    readiness = [
        replica_readiness(component, _current(given, wanted.metadata.name))
        for component, wanted in projection.replicas.items()
    ]
    fronted = [replica_readiness(name, observed.replicas.get(name)) for name in projection.fronted]
    for item, name in zip(fronted, projection.fronted, strict=True):
        item.summary.setdefault("inferenceReplica", name)
    return _status(given, service, components=readiness, fronted=fronted)


def _current(given: DecideInput, name: str | None) -> InferenceReplica | None:
    """The replica of ``name`` as this pass last saw it: a write's answer, else the cache's
    (a replica created in this pass is still missing: the next pass reads it)."""
    if name is None:
        return None
    written = given.progress.written.get(name)
    return written if written is not None else given.observed.replicas.get(name)


def _conflict(given: DecideInput, service: InferenceService, projection: Projection) -> str | None:
    """The first wanted name whose replica another controller owns (not adoptable)."""
    uid = service.metadata.uid
    for wanted in projection.replicas.values():
        current = given.observed.replicas.get(str(wanted.metadata.name))
        if current is not None and not owned_by(current, uid) and not adoptable(current, wanted):
            return str(wanted.metadata.name)
    return None


def _replica_writes(
    given: DecideInput, service: InferenceService, projection: Projection
) -> tuple[Action, ...]:
    """The replica writes, in order: per component, up to a conflict; then the deletes of
    owned replicas of components no longer wanted (none when a conflict stopped the step)."""
    meta = service.metadata
    namespace, uid = str(meta.namespace), meta.uid
    actions: list[Action] = []
    for wanted in projection.replicas.values():
        name = str(wanted.metadata.name)
        current = given.observed.replicas.get(name)
        if current is None:
            actions.append(CreateReplica(namespace, name, replica_json(wanted)))
        elif not owned_by(current, uid) and adoptable(current, wanted):
            actions.append(
                AdoptReplica(
                    namespace,
                    name,
                    update_patch(current, wanted),
                    service_name=str(meta.name),
                    service_uid=str(uid),
                )
            )
        elif not owned_by(current, uid):
            return tuple(actions)
        elif needs_update(current, wanted):
            actions.append(PatchReplica(namespace, name, update_patch(current, wanted)))
    for irep in given.observed.owned:
        if owned_by(irep, uid) and irep.spec.component not in projection.replicas:
            actions.append(_delete(irep))
    return tuple(actions)


def _delete(irep: InferenceReplica) -> DeleteReplica:
    meta = irep.metadata
    return DeleteReplica(str(meta.namespace), str(meta.name), meta.uid)


def _status(
    given: DecideInput,
    service: InferenceService,
    *,
    components: list[ComponentReadiness] | tuple[()],
    fronted: list[ComponentReadiness] | None = None,
    failure: tuple[str, str] | None = None,
    paced: bool = True,
) -> Decision:
    """Write the status when it changed, at once or once its pace has passed; then end.

    ``paced`` False: the pass ends without asking for a timed look when the write waits (the
    refusal that made the status sends the key through the rate limiter anyway)."""
    progress, moment = given.progress, given.moment
    if progress.status is not None:
        memory = given.memory
        if progress.status == "written":
            memory = memory.written(moment.monotonic)
        return _end(given, memory=memory)
    status = build_status(
        isvc=service,
        components=list(components),
        fronted=fronted or [],
        failure=failure,
        refused=first_refusal(progress.refusals),
        pin=given.observed.pin,
        now=moment.now,
    )
    old = stored_status(service)
    if not status_changed(old, status):
        return _end(given)
    pace = decide_pace(
        given.memory,
        urgent=status_urgent(old, status),
        first_not_ready=not old and failure is None and not _ready(status),
        now=moment.monotonic,
        busy=moment.busy,
        pace=given.settings.pace,
    )
    if pace.wait > 0:
        return _end(given, requeue_after=pace.wait if paced else None, memory=pace.memory)
    write = WriteStatus(
        str(service.metadata.namespace),
        str(service.metadata.name),
        _status_body(service, status),
    )
    return Decision(actions=(write,), memory=pace.memory, final=False)


def _ready(status: dict[str, Any]) -> bool:
    return any(
        c.get("type") == CONDITION_READY and c.get("status") == "True"
        for c in status.get("conditions") or ()
    )


# -- A deleted service ------------------------------------------------------------------------


def _orphaning(service: InferenceService) -> bool:
    return FINALIZER_ORPHAN in (service.metadata.finalizers or ())


def _finalize(given: DecideInput, service: InferenceService) -> Decision:
    progress = given.progress
    meta = service.metadata
    finalizers = list(meta.finalizers or ())
    if FINALIZER not in finalizers:
        return _end(given)
    owned = [i for i in given.observed.owned if owned_by(i, meta.uid)]
    if not progress.deletes_done and not _orphaning(service):
        # Under propagationPolicy Orphan the replicas stay: the collector takes the owner
        # references off, and the finalizer goes once none is left owned.
        deletes = tuple(_delete(i) for i in owned if i.metadata.deletion_timestamp is None)
        if deletes:
            return _step(given, deletes)
    poll = given.settings.deletion_poll
    if owned or progress.finalizer == "held":
        return _show_refusal(given, service, requeue_after=poll)
    if progress.finalizer is None:
        # The caches say none is left: the executor confirms with a fresh list first.
        patch = _finalizers_patch(service, [f for f in finalizers if f != FINALIZER])
        selector = f"{LABEL_INFERENCE_SERVICE}={meta.name}"
        remove = RemoveFinalizer(
            str(meta.namespace), str(meta.name), patch, uid=str(meta.uid), label_selector=selector
        )
        return _step(given, (remove,))
    if progress.finalizer == "refused":
        return _show_refusal(given, service, requeue_after=None)
    return _end(given)


def _show_refusal(
    given: DecideInput, service: InferenceService, *, requeue_after: float | None
) -> Decision:
    """While the service is deleted no other status is written: the condition WriteRefused is
    set from this pass's refusals, or removed when there are none."""
    progress = given.progress
    if progress.status is None:
        conditions = with_write_refused(
            service, first_refusal(progress.refusals), now=given.moment.now
        )
        old = (stored_status(service) or {}).get("conditions") or []
        if conditions != old:
            body = _status_body(service, {"conditions": conditions})
            write = WriteStatus(str(service.metadata.namespace), str(service.metadata.name), body)
            return _step(given, (write,))
    return _end(given, requeue_after=requeue_after)
