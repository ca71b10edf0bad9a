"""Retry blocks: how failed updates to a revision are counted, backed off, held and released.

Why: a revision that can't run (an image that can't be pulled, a config that can't be
mounted, a binary that crashes before it was ever Ready) must not be retried forever, nor
stop the other Instances from serving. ``status.retryBlocks`` is the durable ladder: each
failed attempt moves the block to Backoff (next try at ``nextRetryAt``), and after
``maxAttempts`` it is Held until the user releases it (annotation
``ome.io/release-held-revision: <revision>``) or changes the pod template (a new revision
clears every block of an older one).

What counts as an attempt's failure (only failures the revision causes): a pod on the
revision waiting in ImagePullBackOff/ErrImagePull, InvalidImageName or
CreateContainerConfigError; or crash-looping while the revision has never been Ready on any
Instance. Node and cluster failures (evictions, lost nodes, scheduling) never count.

Ladder (``attemptsStarted`` counts the update attempts started on the revision, the first
update included): failure after attempt n < maxAttempts -> Backoff, ``nextRetryAt = now +
min(initialDelay * multiplier^(n-1), maxDelay)``; due -> RetryInProgress with n+1; failure
after attempt maxAttempts -> Held. An Instance Ready on the revision removes a block that
isn't Held.

A malformed block (a failure time in the future, Backoff without ``nextRetryAt``, no
attempts count) is reported and never acted on: the update to its revision waits.

Invariant: pure; every function takes ``now`` and returns new values.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from omed.api.inferencereplica import RetryBlock
from omed.controllers.inferencereplica.core.model import PodView
from omed.controllers.inferencereplica.core.policy import RetryPolicy

REVISION_FAILURES: Final = frozenset(
    {"ImagePullBackOff", "ErrImagePull", "InvalidImageName", "CreateContainerConfigError"}
)
CRASH_LOOP: Final = "CrashLoopBackOff"


def revision_failure(pods: Sequence[PodView], *, revision: str, revision_ran: bool) -> str | None:
    """The reason a failure on these pods counts against ``revision``, or None."""
    for pod in pods:
        if pod.terminating or pod.revision != revision or not pod.failing:
            continue
        failure = pod.failure
        if failure is None or not failure.container:
            continue  # a failed pod without a container failure: the node's, not the revision's
        if failure.reason in REVISION_FAILURES:
            return "ImagePullBackOff" if failure.reason == "ErrImagePull" else failure.reason
        crashed = failure.reason == CRASH_LOOP or failure.exit_code is not None
        if crashed and not revision_ran:
            return CRASH_LOOP
    return None


def malformed(block: RetryBlock, now: dt.datetime) -> str | None:
    """Why ``block`` can't be acted on, or None when it is well formed."""
    for label, when in (
        ("firstFailureAt", block.first_failure_at),
        ("lastFailureAt", block.last_failure_at),
    ):
        if when is not None and when > now:
            return f"{label} {when.isoformat()} is in the future"
    if block.attempts_started is None or block.attempts_started < 1:
        return "attemptsStarted is missing"
    if block.state == "Backoff" and block.next_retry_at is None:
        return "a Backoff block has no nextRetryAt"
    return None


@dataclass(frozen=True, slots=True)
class Blocks:
    """The blocks this pass starts from, after pruning and release."""

    current: RetryBlock | None
    """The well-formed block of the update revision, if any."""
    bad: str | None
    """Why the update revision's block is malformed (it is then kept as is)."""
    kept: tuple[RetryBlock, ...]
    """Every block to keep in status (``current`` or the malformed one included)."""
    released: bool
    """The release annotation named a Held block of the update revision: it is gone."""


def sort_out(
    blocks: Sequence[RetryBlock] | None,
    *,
    update_revision: str,
    release: str | None,
    now: dt.datetime,
) -> Blocks:
    """Drop blocks of other revisions (a template change clears them) and apply a release."""
    mine = [block for block in blocks or () if block.target_revision == update_revision]
    block = mine[0] if mine else None
    bad = malformed(block, now) if block is not None else None
    released = False
    if block is not None and bad is None and block.state == "Held" and release == update_revision:
        block, released = None, True
    kept = (block,) if block is not None else ()
    return Blocks(current=None if bad else block, bad=bad, kept=kept, released=released)


def failed(
    block: RetryBlock | None,
    *,
    revision: str,
    reason: str,
    policy: RetryPolicy,
    now: dt.datetime,
) -> RetryBlock:
    """The block after an attempt at ``revision`` failed with ``reason``."""
    attempts = (block.attempts_started or 1) if block is not None else 1
    held = attempts >= policy.max_attempts
    return RetryBlock(
        target_revision=revision,
        state="Held" if held else "Backoff",
        attempts_started=attempts,
        next_retry_at=None if held else now + dt.timedelta(seconds=policy.delay_after(attempts)),
        first_failure_at=(block.first_failure_at if block is not None else None) or now,
        last_failure_at=now,
        reason=reason,
    )


def due(block: RetryBlock, now: dt.datetime) -> bool:
    return (
        block.state == "Backoff" and block.next_retry_at is not None and block.next_retry_at <= now
    )


def retrying(block: RetryBlock) -> RetryBlock:
    """The block once its next attempt starts."""
    return block.model_copy(
        update={
            "state": "RetryInProgress",
            "attempts_started": (block.attempts_started or 0) + 1,
            "next_retry_at": None,
        }
    )


def describe(block: RetryBlock) -> str:
    """``Backoff after 1 failed attempt(s): CrashLoopBackOff``: how events and conditions name
    a block."""
    return f"{block.state} after {block.attempts_started or 0} failed attempt(s): {block.reason}"
