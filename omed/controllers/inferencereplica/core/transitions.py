"""Events of an Instance's transitions, read off its previous and new row.

Why: users watch the InferenceService's events for an Instance being created and becoming
ready. Deriving them from the rows (not from the requests sent) makes
them as durable as the rows: the executor records them only after the status write that
stores the transition, so a pass that is retried, or a manager that restarts, doesn't repeat
them, and a transition that never got stored is reported by the pass that stores it.

Invariant: pure; an event is returned only when the new row differs from the previous one
in the way the event reports.
"""

from __future__ import annotations

from omed.api.events import NORMAL
from omed.api.inferencereplica import InstanceStatus
from omed.controllers.inferencereplica.core import names, operations
from omed.controllers.inferencereplica.core.actions import RecordEvent


def transition_events(
    *,
    component: str,
    update_revision: str,
    previous: InstanceStatus | None,
    row: InstanceStatus | None,
    all_pods_exist: bool,
) -> list[RecordEvent]:
    """``InstanceCreated`` when a new Instance (or incarnation) has all its pods;
    ``InstanceReady`` when its row turns Ready."""
    if row is None or previous is None or operations.is_delete(row.operation):
        return []
    events = []
    revision = row.target_revision or update_revision
    before = previous.operation
    was_creating = (  # a new Instance or incarnation, not a repair of missing pods
        before is not None
        and operations.is_create(before)
        and before.step == names.STEP_CREATE_PODS
        and before.reason == names.OperationReason.SCALE_UP
    )
    if was_creating and all_pods_exist:
        events.append(
            RecordEvent(
                type=NORMAL,
                reason=names.EVENT_INSTANCE_CREATED,
                message=(
                    f"Created Instance {row.index} of {component}: incarnation "
                    f"{row.incarnation}, {row.pod_count} pod(s), revision {revision}"
                ),
            )
        )
    if row.phase == "Ready" and previous.phase != "Ready":
        events.append(
            RecordEvent(
                type=NORMAL,
                reason=names.EVENT_INSTANCE_READY,
                message=(
                    f"Instance {row.index} of {component} is Ready: incarnation "
                    f"{row.incarnation}, revision {row.running_revision or revision}"
                ),
            )
        )
    return events
