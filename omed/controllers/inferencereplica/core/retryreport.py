"""What updates report on the InferenceReplica: release events, block conditions, malformed.

Why apart from :mod:`.updates`: these only describe state (conditions, events, the
annotation's removal); keeping them here keeps the decisions readable.

Invariant: pure; conditions are built with ``None`` as their previous list, and
:func:`.updates.plan_updates` restores the stored transition times.
"""

from __future__ import annotations

from omed.api.events import NORMAL, WARNING
from omed.api.inferencereplica import RetryBlock
from omed.controllers.inferencereplica.core import names, retry
from omed.controllers.inferencereplica.core.actions import RecordEvent, RemoveReleaseAnnotation
from omed.controllers.inferencereplica.core.rows import condition
from omed.controllers.inferencereplica.core.work import PassWork


def release(work: PassWork, released: bool) -> None:
    value = work.target.release_held
    if value is None:
        return
    work.release = RemoveReleaseAnnotation(value)
    if released:
        work.release_events.append(
            RecordEvent(
                type=NORMAL,
                reason=names.EVENT_REVISION_RELEASED,
                message=f"released held revision {value}: updating to it again",
            )
        )
    else:
        work.release_events.append(
            RecordEvent(
                type=WARNING,
                reason=names.EVENT_RELEASE_IGNORED,
                message=f"ome.io/release-held-revision={value} names no Held retry block of "
                f"the update revision {work.target.update_revision}; annotation removed",
            )
        )


def report_malformed(work: PassWork, why: str) -> None:
    message = (
        f"the retry block of {work.target.update_revision} is malformed ({why}); "
        "it is left as is and the update waits"
    )
    work.conditions.append(
        condition(
            None,
            type=names.CONDITION_RETRY_BLOCK_MALFORMED,
            status="True",
            reason=names.REASON_RETRY_BLOCK_MALFORMED,
            message=message,
            now=work.now,
        )
    )
    work.events.append(
        RecordEvent(type=WARNING, reason=names.EVENT_RETRY_BLOCK_MALFORMED, message=message)
    )


def block_condition(work: PassWork, block: RetryBlock | None) -> None:
    if block is not None and block.reason == names.REASON_PROGRESS_DEADLINE:
        work.conditions.append(
            condition(
                None,
                type=names.CONDITION_PROGRESS_DEADLINE,
                status="True",
                reason=names.REASON_PROGRESS_DEADLINE,
                message=f"an Instance was not Ready on {block.target_revision} within "
                f"instanceReadyTimeout: retry block {retry.describe(block)}",
                now=work.now,
            )
        )
    if any(c.type == names.CONDITION_UPDATE_BLOCKED for c in work.conditions):
        return
    if block is None or block.state == "RetryInProgress":
        return
    reason = names.BLOCKED_REVISION_HELD if block.state == "Held" else names.BLOCKED_RETRY_BACKOFF
    work.conditions.append(
        condition(
            None,
            type=names.CONDITION_UPDATE_BLOCKED,
            status="True",
            reason=reason,
            message=f"revision {block.target_revision}: retry block {retry.describe(block)}",
            now=work.now,
        )
    )
