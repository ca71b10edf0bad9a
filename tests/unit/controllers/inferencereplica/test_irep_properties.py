"""Properties of the planner over arbitrary states (hypothesis)."""

from __future__ import annotations

import dataclasses
import datetime as dt

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from irep_world import NOW, World, target
from irep_world import settings as plan_settings

from omed.api.inferencereplica import InstanceStatus, Operation
from omed.config import BatchSize, Percent
from omed.controllers.inferencereplica.core import names
from omed.controllers.inferencereplica.core.actions import (
    CreatePods,
    DeletePods,
    Plan,
    SetServingGate,
    WriteStatus,
)
from omed.controllers.inferencereplica.core.batching import budget_of
from omed.controllers.inferencereplica.core.model import (
    ObservedState,
    PlanSettings,
    PodView,
    ReplicaTarget,
)
from omed.controllers.inferencereplica.core.ops.migrate import wanted_indexes
from omed.controllers.inferencereplica.core.plan import plan
from omed.controllers.inferencereplica.core.rows import instance_facts

MAX_INDEX = 9

shapes = st.sampled_from(
    [(("default", 1),), (("leader", 1), ("worker", 1)), (("leader", 1), ("worker", 2))]
)
budgets: st.SearchStrategy[BatchSize | None] = st.one_of(
    st.none(), st.integers(1, 6), st.builds(Percent, st.integers(1, 100))
)


@st.composite
def targets(draw: st.DrawFn) -> ReplicaTarget:
    return target(
        draw(st.integers(0, MAX_INDEX)),
        runners=draw(shapes),
        paused=draw(st.booleans()),
        deleting=draw(st.booleans()),
        ready_policy=draw(st.sampled_from(["AllPodReady", "None"])),
    )


@st.composite
def pods_for(draw: st.DrawFn, spec: ReplicaTarget) -> dict[int, tuple[PodView, ...]]:
    grouped: dict[int, tuple[PodView, ...]] = {}
    for index in draw(st.sets(st.integers(0, MAX_INDEX), max_size=6)):
        pods = []
        for slot in spec.slots(index):
            if not draw(st.booleans()):
                continue
            ready = draw(st.booleans())
            pods.append(
                PodView(
                    name=slot.name,
                    uid=f"uid-{slot.name}",
                    index=index,
                    runner=slot.runner,
                    ordinal=slot.ordinal,
                    incarnation=1,
                    revision=spec.update_revision,
                    terminating=draw(st.booleans()),
                    node=draw(st.sampled_from([None, "sim-node-0"])),
                    ready=ready,
                    ready_since=NOW - dt.timedelta(seconds=30) if ready else None,
                    containers_ready=draw(st.booleans()),
                    serving=draw(st.sampled_from([None, True, False])),
                )
            )
        if pods:
            grouped[index] = tuple(pods)
    return grouped


operations_ = st.sampled_from(
    [
        None,
        ("Create", names.STEP_CREATE_PODS),
        ("Create", names.STEP_WAIT_READY),
        ("Delete", names.STEP_DRAIN),
        ("Delete", names.STEP_DELETE_PODS),
        ("Delete", names.STEP_WAIT_PODS_GONE),
    ]
)


@st.composite
def rows_for(draw: st.DrawFn) -> dict[int, InstanceStatus]:
    rows = {}
    for index in draw(st.sets(st.integers(0, MAX_INDEX), max_size=6)):
        op = draw(operations_)
        rows[index] = InstanceStatus(
            index=index,
            incarnation=1,
            phase="Creating",
            operation=None
            if op is None
            else Operation(id=f"op-{index}", type=op[0], step=op[1], started_at=NOW),
        )
    return rows


@st.composite
def states(draw: st.DrawFn) -> tuple[ReplicaTarget, ObservedState, PlanSettings]:
    spec = draw(targets())
    observed = ObservedState(pods=draw(pods_for(spec)), rows=draw(rows_for()))
    config = PlanSettings(
        scale_up_pod_batch_size=draw(budgets), scale_down_pod_batch_size=draw(budgets)
    )
    return spec, observed, config


def run(spec: ReplicaTarget, observed: ObservedState, config: PlanSettings) -> Plan:
    return plan(target=spec, observed=observed, settings=config, now=NOW)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(states())
def test_creations_stay_within_wanted_instances_and_free_names(state: tuple) -> None:  # type: ignore[type-arg]
    spec, observed, config = state
    decided = run(spec, observed, config)
    existing = {p.name for pods in observed.pods.values() for p in pods}
    created = [p for c in decided.of_type(CreatePods) for p in c.pods]
    if spec.deleting or spec.paused:
        assert not created
    ready = [
        index
        for index, pods in observed.pods.items()
        if instance_facts(spec, index, pods).ready
        and instance_facts(spec, index, pods).runs_spec_images
    ]
    keep = wanted_indexes(replicas=spec.replicas, rows=observed.rows, extra=set(), ready=ready)
    wanted = {slot.name for i in keep for slot in spec.slots(i)}
    names_created = [p.name for p in created]
    assert len(names_created) == len(set(names_created))
    assert set(names_created) <= wanted - existing
    for index in keep:  # pods planned for a wanted Instance: at most its shape
        planned = [p for p in observed.pods.get(index, ()) if not p.terminating]
        planned += [p for c in decided.of_type(CreatePods) if c.index == index for p in c.pods]
        assert len(planned) <= spec.pods_per_instance


@settings(max_examples=200, deadline=None)
@given(states())
def test_a_pass_never_deletes_a_routed_pod(state: tuple) -> None:  # type: ignore[type-arg]
    spec, observed, config = state
    decided = run(spec, observed, config)
    by_name = {p.name: p for pods in observed.pods.values() for p in pods}
    for delete in decided.of_type(DeletePods):
        for ref in delete.pods:
            pod = by_name[ref.name]
            assert pod.uid == ref.uid
            assert not pod.terminating
            assert not pod.ready
            assert pod.serving is not True
            assert not (spec.paused and not spec.deleting)


@settings(max_examples=200, deadline=None)
@given(states())
def test_every_pod_action_belongs_to_an_operation_in_the_rows(state: tuple) -> None:  # type: ignore[type-arg]
    spec, observed, config = state
    decided = run(spec, observed, config)
    rows = {row.index: row for row in decided.rows}
    for action in [*decided.of_type(CreatePods), *decided.of_type(DeletePods)]:
        row = rows[action.index]
        assert row.operation is not None
        assert row.operation.id == action.operation_id
        assert row.operation.type == ("Create" if isinstance(action, CreatePods) else "Delete")


@settings(max_examples=200, deadline=None)
@given(states())
def test_batches_respect_the_budget_unless_one_instance_goes_alone(state: tuple) -> None:  # type: ignore[type-arg]
    spec, observed, config = state
    decided = run(spec, observed, config)
    wave = decided.wave_log
    if wave is not None and wave.started_instances:
        costs = [len(observed.pods.get(i, ())) for i in wave.started_instances]
        assert wave.pod_budget is None or sum(costs) <= wave.pod_budget or len(costs) == 1
        assert wave.pod_budget == budget_of(config.scale_down_pod_batch_size, wave.pod_footprint)
    creates = decided.of_type(CreatePods)
    wanted_pods = (0 if spec.deleting else spec.replicas) * spec.pods_per_instance
    live = sum(len(pods) for pods in observed.pods.values())
    budget = budget_of(config.scale_up_pod_batch_size, max(live, wanted_pods))
    created = sum(len(c.pods) for c in creates)
    assert budget is None or created <= budget or len(creates) == 1


@settings(max_examples=200, deadline=None)
@given(states())
def test_planning_again_on_the_state_a_plan_produced_changes_nothing(state: tuple) -> None:  # type: ignore[type-arg]
    spec, observed, config = state
    first = run(spec, observed, config)
    again = dataclasses.replace(
        observed, rows={row.index: row for row in first.rows}, status=first.status
    )
    second = run(spec, again, config)
    assert not second.of_type(WriteStatus)
    assert second.rows == first.rows

    def pod_actions(p: Plan) -> set[tuple[object, ...]]:
        out: set[tuple[object, ...]] = set()
        for c in p.of_type(CreatePods):
            out |= {("create", c.operation_id, x.name) for x in c.pods}
        for d in p.of_type(DeletePods):
            out |= {("delete", d.operation_id, x.name) for x in d.pods}
        for g in p.of_type(SetServingGate):
            out.add(("gate", g.pod.name, g.serving))
        return out

    assert pod_actions(second) == pod_actions(first)


@settings(max_examples=60, deadline=None)
@given(
    start=st.integers(0, 8),
    end=st.integers(0, 8),
    shape=shapes,
    up=budgets,
    down=budgets,
)
def test_any_scale_converges_without_ever_deleting_a_routed_pod(
    start: int,
    end: int,
    shape: tuple[tuple[str, int], ...],
    up: BatchSize | None,
    down: BatchSize | None,
) -> None:
    world = World(target(start, runners=shape))
    config = plan_settings(up=up, down=down)
    for _ in range(40):
        world.step(config)
    world.spec = dataclasses.replace(world.spec, replicas=end)
    for _ in range(120):  # World.apply asserts that no deleted pod is routed
        world.step(config)
        if len(world.rows) == end and all(r.phase == "Ready" for r in world.rows.values()):
            break
    assert sorted(world.rows) == list(range(end))
    assert len(world.live()) == end * world.spec.pods_per_instance
    assert all(r.operation is None and r.phase == "Ready" for r in world.rows.values())
    assert world.already_exists == 0  # never planned a pod whose name was taken
