"""Properties of the InferenceService core over arbitrary histories (hypothesis).

A history is a service with some components, then a run of passes (some while the controller
is busy), other controllers' ticks, edits of the components, time passing, and maybe a
deletion (Background or Orphan), driven through :class:`isvc_world.World`. The invariants
hold over every write the core decided, and at the end.
"""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from isvc_world import PACE, World, service

from omed.controllers.inferenceservice.core.actions import (
    AddFinalizer,
    CreateReplica,
    DeleteReplica,
    RemoveFinalizer,
    WriteStatus,
)
from omed.controllers.inferenceservice.core.names import FINALIZER
from omed.controllers.inferenceservice.core.status import status_urgent

COMPONENTS = ("engine", "decoder", "router")

components_ = st.dictionaries(st.sampled_from(COMPONENTS), st.integers(0, 3), min_size=1)

steps_ = st.lists(
    st.one_of(
        st.tuples(st.just("pass"), st.booleans()),
        st.tuples(st.just("tick"), st.none()),
        st.tuples(st.just("advance"), st.floats(0, 40)),
        st.tuples(st.just("edit"), components_),
    ),
    max_size=25,
)


def _finalizers(obj: dict[str, Any] | None) -> list[str]:
    return list(((obj or {}).get("metadata") or {}).get("finalizers") or ())


def _converge(world: World) -> None:
    """Passes and ticks, with time enough for any pace, until nothing changes."""
    for _ in range(12):
        world.advance(PACE.busy)
        writes = len(world.trace)
        world.reconcile()
        moved = world.tick()
        if world.service_obj is None or (not moved and len(world.trace) == writes):
            return


def check_trace(world: World) -> None:
    last_status: float | None = None
    for applied in world.trace:
        action = applied.action
        if isinstance(action, CreateReplica):
            # The finalizer is on before any replica is created, and nothing is created for a
            # service being deleted.
            assert FINALIZER in _finalizers(applied.service)
            assert applied.service is not None
            assert not applied.service["metadata"].get("deletionTimestamp")
        if isinstance(action, AddFinalizer):
            assert applied.service is not None
            assert not applied.service["metadata"].get("deletionTimestamp")
        if isinstance(action, RemoveFinalizer):
            # Deletion removes (or, under Orphan, lets the collector release) every owned
            # replica before the finalizer goes.
            assert applied.service is not None
            uid = applied.service["metadata"]["uid"]
            owned = [
                r
                for r in applied.replicas.values()
                if any(
                    o.get("controller") and o.get("uid") == uid
                    for o in r["metadata"].get("ownerReferences") or ()
                )
            ]
            assert owned == []
        if isinstance(action, DeleteReplica):
            assert applied.service is not None
            if applied.service["metadata"].get("deletionTimestamp"):
                assert "orphan" not in _finalizers(applied.service)
        if isinstance(action, WriteStatus) and not (applied.service or {}).get("metadata", {}).get(
            "deletionTimestamp"
        ):
            old = (applied.service or {}).get("status")
            pace = PACE.busy if applied.busy else PACE.quiet
            if last_status is not None and applied.monotonic - last_status < pace:
                # Within the pace only news is written.
                assert status_urgent(old, action.body["status"])
            last_status = applied.monotonic


def check_converged(world: World) -> None:
    """Exactly one replica per wanted component, and a pass on the converged world decides no
    write at all."""
    assert world.service_obj is not None
    by_component = world.replicas_by_component()
    assert set(by_component) == world.wanted_components()
    assert all(len(names) == 1 for names in by_component.values())
    spec = world.service_obj["spec"]
    for component, (name,) in by_component.items():
        # Each one as the service wants it now (edits included), and Ready says so.
        irep = world.replicas[name]["spec"]
        assert irep["replicas"] == spec[component]["minReplicas"]
        assert irep.get("paused", False) == spec.get("paused", False)
    conditions = {c["type"]: c for c in world.service_obj["status"]["conditions"]}
    assert conditions["Ready"]["status"] == "True"
    assert (
        world.service_obj["status"]["observedGeneration"]
        == (world.service_obj["metadata"]["generation"])
    )
    before = len(world.trace)
    world.advance(PACE.busy)
    final = world.reconcile()
    assert len(world.trace) == before, [a.action for a in world.trace[before:]]
    assert final.actions == () and not final.requeue and final.requeue_after is None


def run(world: World, steps: list[tuple[str, Any]]) -> None:
    for kind, value in steps:
        if world.service_obj is None:
            return
        if kind == "pass":
            world.reconcile(busy=value)
        elif kind == "tick":
            world.tick()
        elif kind == "advance":
            world.advance(value)
        else:
            world.edit(value)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(components_, st.booleans(), steps_)
def test_a_live_service_converges_to_one_replica_per_component(
    components: dict[str, int], paused: bool, steps: list[tuple[str, Any]]
) -> None:
    world = World(service(components, paused=paused))
    run(world, steps)
    _converge(world)
    check_trace(world)
    check_converged(world)
    check_trace(world)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(components_, steps_, st.booleans(), steps_)
def test_a_deleted_service_lets_go_only_after_its_replicas(
    components: dict[str, int],
    before: list[tuple[str, Any]],
    orphan: bool,
    after: list[tuple[str, Any]],
) -> None:
    world = World(service(components))
    run(world, before)
    world.delete(orphan=orphan)
    run(world, after)
    _converge(world)
    check_trace(world)
    assert world.service_obj is None  # the finalizer went, and the service with it
    if not orphan:
        assert world.labelled() == []  # under Orphan they stay (check_trace: none deleted)


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(components_, steps_)
def test_a_service_created_again_after_an_orphan_deletion_adopts_its_replicas(
    components: dict[str, int], steps: list[tuple[str, Any]]
) -> None:
    world = World(service(components))
    _converge(world)
    uids = {name: r["metadata"]["uid"] for name, r in world.replicas.items()}
    world.delete(orphan=True)
    _converge(world)
    assert world.service_obj is None and set(world.replicas) == set(uids)
    again = service(components)
    again["metadata"]["uid"] = "isvc-uid-2"
    world.service_obj = again
    run(world, steps)
    _converge(world)
    check_trace(world)
    check_converged(world)
    for component in world.wanted_components() & set(components):
        (name,) = world.replicas_by_component()[component]
        assert world.replicas[name]["metadata"]["uid"] == uids[name]  # adopted, not created
