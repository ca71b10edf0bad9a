"""The InferenceService's status, aggregated from its InferenceReplicas. Pure.

Invariant: Ready is True only when every OMENative component's InferenceReplica reports, for
its *current* generation, at least as many Ready Instances as it wants. A replica whose status
lags its spec (``status.observedGeneration`` below ``metadata.generation``) is not ready yet,
whatever its counts say: this is how omed avoids upstream's early Ready (an InferenceReplica
created a moment ago has no status and reads as 0/0, which is not "all ready").
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Mapping, Sequence
from typing import Any, Final

from omed.api.base import Condition, format_time, transition_time
from omed.api.constants import COMPONENT_READY_CONDITIONS, CONDITION_READY
from omed.api.inferencereplica import InferenceReplica
from omed.api.inferenceservice import InferenceService
from omed.controllers.inferenceservice.core.pinning import (
    CONDITION_RUNTIME_DRIFTED,
    STATUS_PINNED,
    Pin,
)
from omed.controllers.refusedwrite import CONDITION_WRITE_REFUSED, RefusedWrite

_READY_CONDITION: Final[Mapping[str, str]] = {
    str(k): v for k, v in COMPONENT_READY_CONDITIONS.items()
}

REASON_READY: Final = "InstancesReady"
REASON_NOT_READY: Final = "InstancesNotReady"
REASON_STALE: Final = "StatusNotObserved"
REASON_MISSING: Final = "InferenceReplicaMissing"
REASON_COMPONENTS_READY: Final = "ComponentsReady"
REASON_COMPONENTS_NOT_READY: Final = "ComponentsNotReady"
REASON_NO_COMPONENTS: Final = "NoOMENativeComponents"
REASON_FRONTED_READY: Final = "FrontedReplicasReady"
REASON_FRONTED_NOT_READY: Final = "FrontedReplicasNotReady"


@dataclasses.dataclass(frozen=True)
class ComponentReadiness:
    component: str
    ready: bool
    reason: str
    message: str
    summary: dict[str, Any]


def replica_readiness(component: str, irep: InferenceReplica | None) -> ComponentReadiness:
    if irep is None:
        return ComponentReadiness(
            component, False, REASON_MISSING, "InferenceReplica not created yet", {}
        )
    meta = irep.metadata
    status = irep.status
    wanted = irep.spec.replicas
    ready = (status.ready_replicas if status else None) or 0
    summary: dict[str, Any] = {
        "inferenceReplica": meta.name,
        "replicas": (status.replicas if status else None) or 0,
        "readyReplicas": ready,
        "servingReplicas": (status.serving_replicas if status else None) or 0,
        "updatedReplicas": (status.updated_replicas if status else None) or 0,
    }
    if status is not None and status.current_revision:
        summary["currentRevision"] = status.current_revision
    if status is not None and status.update_revision:
        summary["updateRevision"] = status.update_revision
    observed = status.observed_generation if status else None
    generation = meta.generation
    if observed is None or (generation is not None and observed < generation):
        return ComponentReadiness(
            component,
            False,
            REASON_STALE,
            f"status of generation {generation} not observed yet",
            summary,
        )
    message = f"{ready}/{wanted} Instances ready"
    if ready >= wanted:
        return ComponentReadiness(component, True, REASON_READY, message, summary)
    return ComponentReadiness(component, False, REASON_NOT_READY, message, summary)


def stored_status(service: InferenceService) -> dict[str, Any] | None:
    """The service's status as stored (fields omed doesn't model kept), or ``None``."""
    return service.status.to_dict() if service.status is not None else None


@dataclasses.dataclass(frozen=True)
class _Conditions:
    """What every condition a status write sets is built against: the generation it is
    computed from, the stored conditions (whose transition times stay while their status
    does: :func:`omed.api.base.transition_time`), and the time of the write."""

    generation: int | None
    previous: tuple[Condition, ...]
    now: dt.datetime

    @classmethod
    def of(cls, isvc: InferenceService, now: dt.datetime) -> _Conditions:
        stored = tuple(isvc.status.conditions or ()) if isvc.status is not None else ()
        return cls(generation=isvc.metadata.generation, previous=stored, now=now)

    def refused(self, refusal: RefusedWrite) -> dict[str, Any]:
        """Condition WriteRefused for ``refusal``: True, the API server's reason."""
        return self.condition(
            CONDITION_WRITE_REFUSED, True, refusal.condition_reason, refusal.message()
        )

    def condition(self, kind: str, ready: bool, reason: str, message: str) -> dict[str, Any]:
        status = "True" if ready else "False"
        since = transition_time(self.previous, type=kind, status=status, now=self.now)
        condition: dict[str, Any] = {
            "type": kind,
            "status": status,
            "reason": reason,
            "message": message,
            "lastTransitionTime": format_time(since),
        }
        if self.generation is not None:
            condition["observedGeneration"] = self.generation
        return condition


def build_status(
    *,
    isvc: InferenceService,
    components: Sequence[ComponentReadiness],
    fronted: Sequence[ComponentReadiness] = (),
    failure: tuple[str, str] | None = None,
    refused: RefusedWrite | None = None,
    pin: Pin | None = None,
    now: dt.datetime,
) -> dict[str, Any]:
    """The status to store: conditions keep their transition time while unchanged.

    ``refused`` is a write of this pass the API server refused for good: it is shown as
    condition WriteRefused (True, the API server's reason, the event's message); without
    one the condition is left out, which removes it. ``pin`` (:mod:`.pinning`) adds
    ``pinnedRevisionName``, ``lastRuntimeSyncToken`` and condition RuntimeDrifted; without
    one the stored pin fields are left as they are."""
    at = _Conditions.of(isvc, now)
    generation = at.generation
    conditions = []
    for item in components:
        kind = _READY_CONDITION.get(item.component)
        if kind is None:
            continue
        conditions.append(at.condition(kind, item.ready, item.reason, item.message))
    if failure is not None:
        ready, reason, message = False, failure[0], failure[1]
    elif fronted:
        not_ready = [
            f.summary.get("inferenceReplica") or f.component for f in fronted if not f.ready
        ]
        ready = not not_ready
        reason = REASON_FRONTED_READY if ready else REASON_FRONTED_NOT_READY
        message = (
            "all fronted InferenceReplicas ready"
            if ready
            else "not ready: " + ", ".join(str(n) for n in not_ready)
        )
    elif not components:
        ready, reason, message = False, REASON_NO_COMPONENTS, "no OMENative component"
    else:
        not_ready = [c.component for c in components if not c.ready]
        ready = not not_ready
        reason = REASON_COMPONENTS_READY if ready else REASON_COMPONENTS_NOT_READY
        message = "all components ready" if ready else "not ready: " + ", ".join(not_ready)
    conditions.append(at.condition(CONDITION_READY, ready, reason, message))
    if refused is not None:
        conditions.append(at.refused(refused))
    if pin is not None and pin.drift is not None:
        drift = pin.drift
        conditions.append(
            at.condition(CONDITION_RUNTIME_DRIFTED, drift.drifted, drift.reason, drift.message)
        )
    status: dict[str, Any] = {"conditions": conditions}
    if pin is not None:
        stored = stored_status(isvc) or {}
        fields = pin.status_fields()
        if not fields.get(STATUS_PINNED) and not stored.get(STATUS_PINNED):
            del fields[STATUS_PINNED]  # never pinned: nothing to empty
        status.update(fields)
    if generation is not None:
        status["observedGeneration"] = generation
    summaries = {c.component: c.summary for c in components if c.summary}
    if summaries:
        status["components"] = summaries
    return status


def with_write_refused(
    isvc: InferenceService, refused: RefusedWrite | None, *, now: dt.datetime
) -> list[dict[str, Any]]:
    """The stored conditions with WriteRefused set from ``refused`` (its transition time
    kept while it stays True), or without it: what a pass that writes no other status (a
    deletion) stores."""
    old = [dict(c) for c in (stored_status(isvc) or {}).get("conditions") or ()]
    kept = [c for c in old if c.get("type") != CONDITION_WRITE_REFUSED]
    if refused is None:
        return kept
    return [*kept, _Conditions.of(isvc, now).refused(refused)]


def status_changed(old: Mapping[str, Any] | None, new: Mapping[str, Any]) -> bool:
    """Whether ``new`` says anything ``old`` does not (fields omed does not own are kept)."""
    old = old or {}
    return any(old.get(key) != value for key, value in new.items())


def _conditions_by_type(status: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    return {str(c.get("type")): c for c in status.get("conditions") or [] if isinstance(c, Mapping)}


def _revisions(status: Mapping[str, Any]) -> dict[str, tuple[Any, Any]]:
    components = status.get("components") or {}
    return {
        str(name): (summary.get("currentRevision"), summary.get("updateRevision"))
        for name, summary in components.items()
        if isinstance(summary, Mapping)
    }


def status_urgent(old: Mapping[str, Any] | None, new: Mapping[str, Any]) -> bool:
    """Whether a status change must be written now rather than paced.

    Urgent: the first status; a new ``observedGeneration``; a condition that appears,
    disappears or flips its status; a change of the Ready condition's reason (a failure such
    as an InferenceReplica conflict, or a projection error, is news); a component's revision
    replaced by another (a rollout starts or ends; its first revision is not news). Not
    urgent: the counts in ``components`` and the messages and reasons of component conditions
    that stay False (``InferenceReplicaMissing`` -> ``StatusNotObserved`` ->
    ``InstancesNotReady`` with ``2/4 Instances ready``), which a paced write carries a moment
    later.
    """
    if not old:
        return True
    if old.get("observedGeneration") != new.get("observedGeneration"):
        return True
    before, after = _conditions_by_type(old), _conditions_by_type(new)
    if before.keys() != after.keys():
        return True
    for kind, condition in after.items():
        if before[kind].get("status") != condition.get("status"):
            return True
    ready = after.get(CONDITION_READY)  # the keys are equal: both have it or neither
    if ready is not None and before[CONDITION_READY].get("reason") != ready.get("reason"):
        return True
    revisions_before = _revisions(old)
    for name, revisions in _revisions(new).items():
        for was, now in zip(revisions_before.get(name, (None, None)), revisions, strict=True):
            if was and now != was:
                return True  # a revision replaced (a rollout starts or ends), not a first one
    return False
