"""Status writes that only move observation wait a moment; news is written at once."""

from __future__ import annotations

from irep_world import World, target
from test_irep_execute import FakeKube
from test_irep_reconciler import KEY, reconciler

from omed.api.inferencereplica import InferenceReplicaStatus
from omed.controllers.inferencereplica.core import names
from omed.controllers.inferencereplica.core.actions import (
    Plan,
    PodRef,
    RecordEvent,
    SetServingGate,
    WriteStatus,
)
from omed.controllers.inferencereplica.core.memory import EMPTY
from omed.controllers.inferencereplica.core.pacing import pace
from omed.controllers.pacing import STATUS_PACE, STATUS_PACE_BUSY


def _passes() -> list[Plan]:
    world = World(target(4))
    decided = []
    for i in range(4):
        decided.append(world.plan())
        world.apply(decided[-1])
        if i >= 1:
            world.tick()
    return decided


def test_only_passes_that_record_nothing_ahead_of_a_pod_write_may_wait() -> None:
    record, appeared, gates, ready = _passes()
    # The Create operations go down before the pods are created: never paced.
    assert [w.paceable for w in record.of_type(WriteStatus)] == [False]
    # The pods exist now: counts and steps of the same operations move, and InstanceCreated
    # is due; nothing is recorded ahead of a side effect.
    assert [w.paceable for w in appeared.of_type(WriteStatus)] == [True]
    assert {e.reason for e in appeared.of_type(RecordEvent)} == {names.EVENT_INSTANCE_CREATED}
    # Gates need no record ahead of them: the pass that sets them (its rows only say the pods
    # were admitted) may wait too. Ready rows end the operations and move the ready count.
    assert gates.of_type(SetServingGate)
    assert [w.paceable for w in gates.of_type(WriteStatus)] == [True]
    assert [w.paceable for w in ready.of_type(WriteStatus)] == [False]


def test_a_write_held_back_loses_no_event() -> None:
    world = World(target(2))
    world.apply(world.plan())  # Create operations and pods
    appeared = world.plan()
    assert all(w.paceable for w in appeared.of_type(WriteStatus))
    world.tick()  # the write is held back: the stored rows stay as they were
    later = world.plan()
    reasons = [e.reason for e in later.of_type(RecordEvent)]
    assert reasons.count(names.EVENT_INSTANCE_CREATED) == 2


def _plan(*, paceable: bool, requeue_after: float | None = None) -> Plan:
    write = WriteStatus(status=InferenceReplicaStatus(), rows=(), paceable=paceable)
    created = RecordEvent(type="Normal", reason=names.EVENT_INSTANCE_CREATED, message="m")
    pod = PodRef(name="chat-engine-0-default-0", uid="u1")
    gate = SetServingGate(index=0, pod=pod, serving=True, reason="Ready")
    return Plan(
        actions=(write, created, gate),
        rows=(),
        status=InferenceReplicaStatus(),
        requeue_after=requeue_after,
    )


def test_a_paceable_write_is_held_back_for_the_rest_of_the_pace() -> None:
    paceable = _plan(paceable=True)
    now = 100.0
    assert pace(paceable, last_write=None, now=now, busy=False) is paceable  # none written yet
    held = pace(paceable, last_write=now - 1.0, now=now, busy=False)
    assert held.of_type(WriteStatus) == []
    assert held.of_type(RecordEvent) == []  # reported by the pass that writes, not twice
    assert len(held.of_type(SetServingGate)) == 1
    assert held.requeue_after == STATUS_PACE - 1.0
    sooner = pace(_plan(paceable=True, requeue_after=0.5), last_write=now - 1, now=now, busy=False)
    assert sooner.requeue_after == 0.5
    news = _plan(paceable=False)
    assert pace(news, last_write=now - 1.0, now=now, busy=False) is news
    assert pace(paceable, last_write=now - STATUS_PACE, now=now, busy=False) is paceable


def test_held_back_writes_still_end_in_the_ready_rows() -> None:
    world = World(target(3))
    for _ in range(8):
        decided = world.plan()
        writes = decided.of_type(WriteStatus)
        if writes and writes[0].paceable:  # the controller holds every such write back
            decided = Plan(
                actions=tuple(a for a in decided.actions if not isinstance(a, WriteStatus)),
                rows=decided.rows,
                status=decided.status,
            )
        world.apply(decided)
        world.tick()
    assert [row.phase for row in world.rows.values()] == ["Ready"] * 3
    assert world.status.ready_replicas == 3
    assert all(row.operation is None for row in world.rows.values())


def test_a_busy_controller_holds_a_paceable_write_for_the_busy_pace() -> None:
    paceable = _plan(paceable=True)
    now = 100.0
    last = now - STATUS_PACE
    held = pace(paceable, last_write=last, now=now, busy=True)
    assert held.of_type(WriteStatus) == []
    assert held.requeue_after == STATUS_PACE_BUSY - STATUS_PACE
    news = _plan(paceable=False)
    assert pace(news, last_write=last, now=now, busy=True) is news  # news never waits
    # The fleet is done: the write goes out on the next pass.
    assert pace(paceable, last_write=last, now=now, busy=False) is paceable


async def test_the_reconciler_paces_with_the_busy_flag_it_reads() -> None:
    from test_irep_reconciler import IREP

    busy = [True]
    kube = FakeKube()
    run, _, _ = reconciler(kube, IREP, busy=lambda: busy[0])
    await run.reconcile(KEY)
    last = run.memory[KEY].last_status_write
    assert last is not None  # the first write starts the pace
    assert run.memory[KEY].last_status_write == run._clock.monotonic()


async def test_a_refused_status_write_does_not_start_the_pace() -> None:
    from test_irep_reconciler import IREP

    from omed.kube.errors import Conflict

    kube = FakeKube()
    kube.fail[("status", IREP["metadata"]["name"])] = Conflict(409, "Conflict", "changed")
    run, _, _ = reconciler(kube, IREP)
    await run.reconcile(KEY)
    assert ("status", IREP["metadata"]["name"]) in kube.calls
    # The next write may go out at once.
    assert run.memory.get(KEY, EMPTY).last_status_write is None
    del kube.fail[("status", IREP["metadata"]["name"])]
    await run.reconcile(KEY)
    assert run.memory[KEY].last_status_write is not None  # an accepted write starts it
