"""Retry blocks in the pure planner: the ladder's timing, Held, release, clearing, malformed."""

from __future__ import annotations

import datetime as dt
from typing import Any

from test_irep_update import UpdateWorld, converged, events, revisions, spec

from omed.api.inferencereplica import RetryBlock
from omed.controllers.inferencereplica.core import names, retry
from omed.controllers.inferencereplica.core.actions import (
    CreatePods,
    Plan,
    RemoveReleaseAnnotation,
)
from omed.controllers.inferencereplica.core.model import ContainerFailure, PodView
from omed.controllers.inferencereplica.core.policy import RetryPolicy

BAD = "ome/serving:bad-image"
FAST = RetryPolicy(max_attempts=3, initial_delay=10.0, max_delay=300.0, multiplier=2.0)


def bad_update(world: UpdateWorld, **kw: Any) -> str:
    """Switch ``world`` to a revision whose image can't be pulled; return the old revision."""
    old = world.spec.update_revision
    world.spec = spec(world.spec.replicas, image=BAD, retry=FAST, **kw)
    return old


def run_until_held(world: UpdateWorld, *, wanted: int, limit: int = 400) -> list[Plan]:
    plans = []
    for _ in range(limit):
        decided = world.plan()
        plans.append(decided)
        world.apply(decided)
        assert world.serving() >= wanted - (
            0 if world.spec.update.strategy == "SurgeThenDrain" else 1
        )
        world.tick()
        blocks = world.status.retry_blocks or []
        if blocks and blocks[0].state == "Held":
            break
    return plans


def test_a_bad_image_climbs_the_ladder_to_held_while_the_old_revision_serves() -> None:
    world = converged(3)
    old = bad_update(world)
    seen: list[tuple[str, int | None, dt.datetime | None, dt.datetime | None]] = []
    for _ in range(400):
        decided = world.plan()
        world.apply(decided)
        assert world.serving() >= 3  # SurgeThenDrain: the old Instances never stop serving
        world.tick()
        for block in world.status.retry_blocks or []:
            state = (
                block.state,
                block.attempts_started,
                block.next_retry_at,
                block.last_failure_at,
            )
            if not seen or seen[-1] != state:
                seen.append(state)
        if seen and seen[-1][0] == "Held":
            break
    states = [(s[0], s[1]) for s in seen]
    assert states == [
        ("Backoff", 1),
        ("RetryInProgress", 2),
        ("Backoff", 2),
        ("RetryInProgress", 3),
        ("Held", 3),
    ]
    backoffs = [s for s in seen if s[0] == "Backoff"]
    delays = [(s[2] - s[3]).total_seconds() for s in backoffs if s[2] and s[3]]
    assert delays == [10.0, 20.0]
    assert set(revisions(world).values()) == {old}  # every surge is gone, nothing moved
    blocked = world.status.condition(names.CONDITION_UPDATE_BLOCKED)
    assert blocked is not None and blocked.reason == names.BLOCKED_REVISION_HELD
    (block,) = world.status.retry_blocks or []
    assert block.target_revision == world.spec.update_revision
    assert block.reason == "ImagePullBackOff" and block.first_failure_at is not None

    quiet = [world.plan() for _ in range(3)]  # held: stays held, starts nothing
    world.now += dt.timedelta(hours=1)
    quiet.append(world.plan())
    assert not any(p.of_type(CreatePods) for p in quiet)
    assert all((p.status.retry_blocks or [])[0].state == "Held" for p in quiet)


def test_recreate_pod_keeps_the_other_instances_on_the_old_revision() -> None:
    world = converged(3, strategy="RecreatePod")
    old = bad_update(world, strategy="RecreatePod")
    run_until_held(world, wanted=3)
    assert (world.status.retry_blocks or [])[0].state == "Held"
    moved = {i: r for i, r in revisions(world).items() if r != old}
    assert list(moved.values()) == [world.spec.update_revision]  # only the attempted one


def held_world() -> UpdateWorld:
    world = converged(2)
    bad_update(world)
    run_until_held(world, wanted=2)
    return world


def test_release_removes_the_held_block_deletes_the_annotation_and_retries() -> None:
    world = held_world()
    revision = world.spec.update_revision
    world.spec = spec(2, image=BAD, retry=FAST, release=revision)
    decided = world.plan()
    assert decided.of_type(RemoveReleaseAnnotation) == [RemoveReleaseAnnotation(revision)]
    assert not decided.status.retry_blocks
    assert events([decided], names.EVENT_REVISION_RELEASED)
    started = [r for r in decided.rows if r.operation and r.operation.type == "Update"]
    assert len(started) == 1 and started[0].operation is not None
    assert started[0].operation.reason == names.OperationReason.REVISION_CHANGED


def test_a_release_naming_no_held_block_is_ignored_and_removed() -> None:
    world = held_world()
    world.spec = spec(2, image=BAD, retry=FAST, release="chat-engine-00000000")
    decided = world.plan()
    assert decided.of_type(RemoveReleaseAnnotation) == [
        RemoveReleaseAnnotation("chat-engine-00000000")
    ]
    assert [b.state for b in decided.status.retry_blocks or []] == ["Held"]
    assert events([decided], names.EVENT_RELEASE_IGNORED)


def test_a_template_change_clears_the_block_and_the_update_completes() -> None:
    world = held_world()
    world.spec = spec(2, image="ome/serving:3.0", retry=FAST)
    world.run(120)
    assert not world.status.retry_blocks
    assert set(revisions(world).values()) == {world.spec.update_revision}
    assert world.status.condition(names.CONDITION_UPDATE_BLOCKED) is None


def test_a_malformed_block_is_reported_and_not_acted_on() -> None:
    world = converged(2)
    bad_update(world)
    future = world.now + dt.timedelta(hours=2)
    block = RetryBlock(
        target_revision=world.spec.update_revision,
        state="Backoff",
        attempts_started=1,
        next_retry_at=world.now,
        first_failure_at=future,
        last_failure_at=future,
        reason="ImagePullBackOff",
    )
    world.status = world.status.model_copy(update={"retry_blocks": [block]})
    decided = world.plan()
    assert decided.status.retry_blocks == [block]
    assert all(r.operation is None for r in decided.rows)
    bad = decided.status.condition(names.CONDITION_RETRY_BLOCK_MALFORMED)
    assert bad is not None and "in the future" in (bad.message or "")
    assert events([decided], names.EVENT_RETRY_BLOCK_MALFORMED)


def failing(
    reason: str, *, container: str = "ome-container", exit_code: int | None = None
) -> PodView:
    return PodView(
        name="p",
        uid="u",
        index=0,
        revision="chat-engine-aaaaaaaa",
        failing=True,
        failure=ContainerFailure(container, reason, exit_code),
    )


def test_only_failures_the_revision_causes_count() -> None:
    rev = "chat-engine-aaaaaaaa"
    for reason in (
        "ImagePullBackOff",
        "ErrImagePull",
        "InvalidImageName",
        "CreateContainerConfigError",
    ):
        expected = "ImagePullBackOff" if reason == "ErrImagePull" else reason
        assert (
            retry.revision_failure([failing(reason)], revision=rev, revision_ran=True) == expected
        )
    crash = failing("Error", exit_code=1)
    assert retry.revision_failure([crash], revision=rev, revision_ran=False) == "CrashLoopBackOff"
    assert retry.revision_failure([crash], revision=rev, revision_ran=True) is None
    node = failing("NodeLost", container="")
    assert retry.revision_failure([node], revision=rev, revision_ran=False) is None
    other = failing("ImagePullBackOff")
    assert (
        retry.revision_failure([other], revision="chat-engine-bbbbbbbb", revision_ran=False) is None
    )


def test_the_ladder_in_isolation() -> None:
    now = dt.datetime(2026, 9, 14, 20, 0, tzinfo=dt.UTC)
    first = retry.failed(None, revision="r-aaaaaaaa", reason="X", policy=FAST, now=now)
    assert (first.state, first.attempts_started) == ("Backoff", 1)
    assert first.next_retry_at == now + dt.timedelta(seconds=10)
    assert not retry.due(first, now) and retry.due(first, now + dt.timedelta(seconds=10))
    second = retry.retrying(first)
    assert (second.state, second.attempts_started, second.next_retry_at) == (
        "RetryInProgress", 2, None)  # fmt: skip
    later = now + dt.timedelta(seconds=30)
    third = retry.failed(second, revision="r-aaaaaaaa", reason="X", policy=FAST, now=later)
    assert third.next_retry_at == later + dt.timedelta(seconds=20)
    assert third.first_failure_at == now and third.last_failure_at == later
    held = retry.failed(
        retry.retrying(third), revision="r-aaaaaaaa", reason="X", policy=FAST, now=later
    )
    assert (held.state, held.attempts_started, held.next_retry_at) == ("Held", 3, None)
    assert retry.describe(held) == "Held after 3 failed attempt(s): X"


def test_sort_out_drops_other_revisions_blocks() -> None:
    now = dt.datetime(2026, 9, 14, 20, 0, tzinfo=dt.UTC)
    old = RetryBlock(target_revision="r-aaaaaaaa", state="Held", attempts_started=3)
    out = retry.sort_out([old], update_revision="r-bbbbbbbb", release=None, now=now)
    assert out.kept == () and out.current is None and not out.released


def test_instance_ready_timeout_fails_the_attempt_with_a_condition_and_an_event() -> None:
    world = converged(2)
    old = world.spec.update_revision
    world.spec = spec(2, image="ome/serving:never-ready", retry=FAST, ready_timeout=30.0)
    first = world.plan()
    (op,) = [r.operation for r in first.rows if r.operation]
    assert op is not None and op.deadline == world.now + dt.timedelta(seconds=30)
    plans = [first]
    world.apply(first)
    world.tick()
    for _ in range(40):
        decided = world.plan()
        plans.append(decided)
        world.apply(decided)
        assert world.serving() >= 2
        world.tick()
        if world.status.retry_blocks:
            break
    (block,) = world.status.retry_blocks or []
    assert (block.state, block.reason) == ("Backoff", names.REASON_PROGRESS_DEADLINE)
    assert block.first_failure_at is not None
    assert op.deadline is not None and block.first_failure_at >= op.deadline
    assert len(events(plans, names.EVENT_PROGRESS_DEADLINE)) == 1
    deadline = world.status.condition(names.CONDITION_PROGRESS_DEADLINE)
    assert deadline is not None and deadline.status == "True"
    world.run(6)  # the surge that never got Ready drains within the 10s backoff
    assert revisions(world) == {0: old, 1: old}
    assert world.serving() == 2


def test_without_a_timeout_an_update_waits_for_readiness() -> None:
    world = converged(1)
    world.spec = spec(1, image="ome/serving:never-ready", retry=FAST)
    world.run(200)
    assert not world.status.retry_blocks
    (row,) = [r for r in world.rows.values() if r.operation]
    assert row.operation is not None and row.operation.step == names.STEP_SURGE_WAIT_READY


def test_a_held_revision_stops_progressing() -> None:
    world = held_world()
    world.run(10)  # the last surge drains
    progressing = world.status.condition(names.CONDITION_PROGRESSING)
    assert progressing is not None
    assert (progressing.status, progressing.reason) == ("False", names.PROGRESS_UPDATE_BLOCKED)


def test_a_block_clears_only_when_an_instance_gets_ready_after_the_failure() -> None:
    world = converged(1)
    revision = world.spec.update_revision

    def block(failed_at: dt.datetime) -> RetryBlock:
        return RetryBlock(
            target_revision=revision,
            state="Backoff",
            attempts_started=1,
            next_retry_at=world.now + dt.timedelta(minutes=5),
            first_failure_at=failed_at,
            last_failure_at=failed_at,
            reason="ImagePullBackOff",
        )

    recent = block(world.now)  # the Instance was Ready before this failure
    world.status = world.status.model_copy(update={"retry_blocks": [recent]})
    assert world.plan().status.retry_blocks == [recent]
    old = block(world.now - dt.timedelta(hours=1))  # Ready since: the revision works
    world.status = world.status.model_copy(update={"retry_blocks": [old]})
    assert not world.plan().status.retry_blocks
