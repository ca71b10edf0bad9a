"""What updates report on the InferenceReplica: release events, block conditions, malformed.

Why: an update's decisions (:mod:`.ops.update`) move Instances; what users are told of the
retry blocks (conditions, events, the annotation's removal) follows from the blocks alone,
whichever decision left them.

Invariant: pure; conditions are flagged with no previous list, and the plan keeps their
stored transition times, as it keeps every flagged condition's (:func:`.plan.plan`).
"""

from __future__ import annotations

from omed.api.constants import ANNOTATION_RELEASE_HELD_REVISION
from omed.api.events import NORMAL, WARNING
from omed.api.inferencereplica import RetryBlock
from omed.controllers.inferencereplica.core import names, retry
from omed.controllers.inferencereplica.core.actions import RecordEvent, RemoveReleaseAnnotation
from omed.controllers.inferencereplica.core.work import PassWork


def release(work: PassWork, released: bool) -> None:
    value = work.target.release_held
    if value is None:
        return
    work.release = RemoveReleaseAnnotation(value)
    event = (
        RecordEvent(
            type=NORMAL,
            reason=names.EVENT_REVISION_RELEASED,
            message=f"released held revision {value}: updating to it again",
        )
        if released
        else RecordEvent(
            type=WARNING,
            reason=names.EVENT_RELEASE_IGNORED,
            message=f"{ANNOTATION_RELEASE_HELD_REVISION}={value} names no Held retry block of "
            f"the update revision {work.target.update_revision}; annotation removed",
        )
    )
    work.release_events.append(event)


def report_malformed(work: PassWork, why: str) -> None:
    message = (
        f"the retry block of {work.target.update_revision} is malformed ({why}); "
        "it is left as is and the update waits"
    )
    work.flag(
        names.CONDITION_RETRY_BLOCK_MALFORMED,
        reason=names.REASON_RETRY_BLOCK_MALFORMED,
        message=message,
    )
    work.warn(names.EVENT_RETRY_BLOCK_MALFORMED, message)


def block_condition(work: PassWork, block: RetryBlock | None) -> None:
    if block is not None and block.reason == names.REASON_PROGRESS_DEADLINE:
        work.flag(
            names.CONDITION_PROGRESS_DEADLINE,
            reason=names.REASON_PROGRESS_DEADLINE,
            message=f"an Instance was not Ready on {block.target_revision} within "
            f"instanceReadyTimeout: retry block {retry.describe(block)}",
        )
    if any(c.type == names.CONDITION_UPDATE_BLOCKED for c in work.conditions):
        return
    if block is None or block.state == "RetryInProgress":
        return
    reason = names.BLOCKED_REVISION_HELD if block.state == "Held" else names.BLOCKED_RETRY_BACKOFF
    work.flag(
        names.CONDITION_UPDATE_BLOCKED,
        reason=reason,
        message=f"revision {block.target_revision}: retry block {retry.describe(block)}",
    )
