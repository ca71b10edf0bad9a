"""Properties of the whole core over arbitrary histories (hypothesis): what ``decide`` and
``settle`` add to the planner, with the clock, "busy" and the per-key memory as values.

Pacing: a status write that only moves observation goes out no sooner than the pace after
the last stored one, news never waits, and a fleet converges all the same. Conversion: after
at most one write of unchanged rows, the stored form is the one the settings choose, and it
is never written again for that alone. Orphans: the finalizer goes on before any pod is
adopted, only pods no controller owns and named as the replica's are adopted, and adopted
Ready Instances are kept, not rebuilt. Left-overs and freed names: a drain never deletes a
routed pod, and only pods an earlier replica of the name controls are held to blame.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from irep_world import REVISION, World, target
from irep_world import settings as plan_settings

from omed.api.constants import KIND_INFERENCE_REPLICA
from omed.api.inferencereplica import InferenceReplicaStatus, InstanceStatus, Operation
from omed.controllers.inferencereplica.core import names, orphans
from omed.controllers.inferencereplica.core.actions import (
    RETRY_SOON,
    AddFinalizer,
    CreatePods,
    DeletePods,
    Plan,
    RecordEvent,
    SetServingGate,
    WriteStatus,
)
from omed.controllers.inferencereplica.core.decide import PassReport, settle
from omed.controllers.inferencereplica.core.encoding import StatusEncodingSettings, choose_form
from omed.controllers.inferencereplica.core.memory import EMPTY, KeyMemory
from omed.controllers.inferencereplica.core.model import CreateRefusal, PodView
from omed.controllers.inferencereplica.core.plan import plan
from omed.controllers.pacing import STATUS_PACE, STATUS_PACE_BUSY
from omed.controllers.refusedwrite import RefusedWrite
from omed.statuscodec import COLUMNAR_V2, DENSE_V1, stored_encoding

shapes = st.sampled_from([(("default", 1),), (("leader", 1), ("worker", 1))])
encodings = st.sampled_from(
    [
        StatusEncodingSettings(),
        StatusEncodingSettings(encoding=DENSE_V1, max_decoded_instances=100),
        StatusEncodingSettings(encoding=COLUMNAR_V2, max_decoded_instances=100),
    ]
)


def _pace(busy: bool) -> float:
    return STATUS_PACE_BUSY if busy else STATUS_PACE


def _converge(world: World, passes: int = 200) -> None:
    for _ in range(passes):
        world.pass_()
        rows = world.rows.values()
        ready = len(world.rows) == world.spec.replicas and all(r.phase == "Ready" for r in rows)
        if ready and not world.decide().plan.of_type(WriteStatus):
            return
    raise AssertionError(f"no convergence: {[r.phase for r in world.rows.values()]}")


# -- pacing, with the clock as an input ----------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(
    replicas=st.integers(1, 6),
    shape=shapes,
    history=st.lists(st.tuples(st.booleans(), st.floats(0.1, 12.0)), min_size=1, max_size=60),
)
def test_informational_writes_keep_the_pace_news_never_waits_and_the_fleet_converges(
    replicas: int, shape: tuple[tuple[str, int], ...], history: list[tuple[bool, float]]
) -> None:
    world = World(target(replicas, runners=shape))
    for busy, seconds in history:
        world.busy = busy
        before = world.memory
        unpaced = plan(
            target=world.spec, observed=world.observed(), settings=plan_settings(), now=world.now
        )
        decision = world.decide()
        written = decision.plan.of_type(WriteStatus)
        last = before.last_status_write
        for write in written:
            if write.paceable and last is not None:
                assert world.monotonic - last >= _pace(busy)
        news = [w for w in unpaced.of_type(WriteStatus) if not w.paceable]
        if news:  # a write that carries news is never held
            assert written == news
        if unpaced.of_type(WriteStatus) and not written:
            # Held: its events wait with it, and the pass looks again by the end of the pace.
            assert last is not None
            assert not decision.plan.of_type(RecordEvent)
            assert decision.plan.requeue_after is not None
            assert decision.plan.requeue_after <= last + _pace(busy) - world.monotonic + 1e-9
        # Pod actions are never paced.
        for kind in (CreatePods, DeletePods, SetServingGate):
            assert decision.plan.of_type(kind) == unpaced.of_type(kind)
        stored = world.store(decision.plan)
        world.memory = settle(
            decision.memory,
            decision.plan,
            PassReport(status_stored=stored, monotonic=world.monotonic),
        ).memory
        assert world.memory.last_status_write == (world.monotonic if stored else last)
        world.tick(seconds)
    world.busy = False
    _converge(world)
    assert world.status.ready_replicas == replicas


# -- conversion -----------------------------------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(replicas=st.integers(1, 8), first=encodings, then=encodings, remembered=st.booleans())
def test_at_most_one_write_converts_the_stored_form_to_the_one_the_settings_choose(
    replicas: int, first: StatusEncodingSettings, then: StatusEncodingSettings, remembered: bool
) -> None:
    world = World(target(replicas), encoding=first)
    _converge(world)
    assert world.stored is not None
    # A restart with other settings: the memory is new, or (a second look) already current.
    world.encoding = then
    world.memory = KeyMemory(form_current=str(world.version)) if remembered else EMPTY
    rows = [row.to_dict() for row in sorted(world.rows.values(), key=lambda r: r.index)]
    chosen, _ = choose_form(rows, stored=world.stored, settings=then)
    before = stored_encoding(world.stored)
    decision = world.decide()
    writes = decision.plan.of_type(WriteStatus)
    if remembered:
        assert not writes  # this version was found current: no write for the form alone
        return
    assert bool(writes) == (chosen != before)
    if writes:
        assert writes[0].rows == tuple(sorted(world.rows.values(), key=lambda r: r.index))
    world.store(decision.plan)
    world.memory = settle(
        decision.memory, decision.plan, PassReport(status_stored=bool(writes))
    ).memory
    assert stored_encoding(world.stored) == chosen
    again = world.decide()
    assert not again.plan.of_type(WriteStatus)
    assert again.memory.form_current == str(world.version)


# -- orphans: adoption after an Orphan deletion ------------------------------------------------


def _raw_pod(
    name: str, index: int, *, uid: str, owner: str | None, terminating: bool, labels_ok: bool
) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": name,
        "namespace": "prod",
        "uid": uid,
        "labels": {
            "ome.io/inferenceservice": "chat" if labels_ok else "other",
            "component": "engine",
            "ome.io/instance-index": str(index),
            "ome.io/incarnation": "1",
            "ome.io/revision": REVISION,
        },
    }
    if owner is not None:
        kind = "ReplicaSet" if owner == "rs" else KIND_INFERENCE_REPLICA
        meta["ownerReferences"] = [{"kind": kind, "name": owner, "uid": "x", "controller": True}]
    if terminating:
        meta["deletionTimestamp"] = "2026-09-14T19:59:00Z"
    return {"metadata": meta}


orphan_pods = st.lists(
    st.tuples(
        st.integers(0, 5),
        st.sampled_from([None, None, None, "rs", "chat-engine"]),
        st.booleans(),
        st.sampled_from([True, True, False]),
        st.booleans(),
    ),
    max_size=6,
    unique_by=lambda t: t[0],
)


@settings(max_examples=100, deadline=None)
@given(replicas=st.integers(1, 5), found=orphan_pods, finalizer=st.booleans())
def test_adoption_takes_only_unowned_named_pods_after_the_finalizer_and_keeps_them(
    replicas: int, found: list[tuple[int, str | None, bool, bool, bool]], finalizer: bool
) -> None:
    world = World(target(replicas, has_finalizer=finalizer))
    for index, owner, terminating, labels_ok, misnamed in found:
        name = f"chat-engine-{index}-default-0" if not misnamed else f"chat-other-{index}-x-0"
        world.unowned.append(
            _raw_pod(
                name,
                index,
                uid=f"orphan-{index}",
                owner=owner,
                terminating=terminating,
                labels_ok=labels_ok,
            )
        )
    adoptable = orphans.adoptable(world.spec, world.unowned)
    for pod in adoptable:  # the rules, checked independently
        meta = pod["metadata"]
        assert "ownerReferences" not in meta and "deletionTimestamp" not in meta
        assert meta["labels"]["ome.io/inferenceservice"] == "chat"
        assert meta["name"].startswith(f"chat-engine-{meta['labels']['ome.io/instance-index']}-")
    paused = dataclasses.replace(world.spec, paused=True)
    assert orphans.adoptable(paused, world.unowned) == []

    first = world.decide()
    if adoptable and not finalizer:
        assert first.plan.actions == (AddFinalizer(),)  # the finalizer first, nothing else
    adopted = {p["metadata"]["name"] for p in adoptable}
    kept = {n for n in adopted if int(n.split("-")[2]) < replicas}
    _converge(world)
    assert world.spec.has_finalizer
    assert not kept & set(world.deleted)  # adopted Ready Instances are kept, not rebuilt
    assert not kept & set(world.created)
    assert kept <= set(world.pods)
    # replicas Instances, the lowest established ones (an adopted Ready one past a gap stays)
    assert len(world.rows) == replicas
    assert {int(n.split("-")[2]) for n in kept} <= set(world.rows)
    assert world.already_exists == 0


# -- left-over pods and freed names ---------------------------------------------------------------


views = st.lists(
    st.builds(
        PodView,
        name=st.sampled_from([f"chat-engine-{i}-default-0" for i in range(6)]),
        uid=st.sampled_from(["u1", "u2", "u3"]),
        index=st.just(-1),
        terminating=st.booleans(),
        ready=st.booleans(),
        serving=st.sampled_from([True, False, None]),
    ),
    max_size=6,
    unique_by=lambda p: p.name,
)


@settings(max_examples=200, deadline=None)
@given(pods=views)
def test_a_drain_of_left_over_pods_never_deletes_a_routed_one_and_looks_again(
    pods: list[PodView],
) -> None:
    decided = orphans.drain_left_over(pods)
    by_name = {pod.name: pod for pod in pods}
    gated = {g.pod.name for g in decided.of_type(SetServingGate)}
    assert all(not g.serving for g in decided.of_type(SetServingGate))
    for delete in decided.of_type(DeletePods):
        for ref in delete.pods:
            pod = by_name[ref.name]
            assert not pod.terminating and not pod.ready and pod.serving is not True
    for pod in pods:
        if pod.serving is True and not pod.terminating:
            assert pod.name in gated  # a routed pod is gated off first
    assert decided.requeue_after == RETRY_SOON
    assert not decided.of_type(WriteStatus) and decided.rows == ()


holders = st.lists(
    st.tuples(
        st.sampled_from([f"chat-engine-{i}-default-0" for i in range(5)]),
        st.sampled_from(["none", "gone", "current", "other-kind", "absent", "elsewhere"]),
    ),
    max_size=5,
    unique_by=lambda t: t[0],
)


@settings(max_examples=200, deadline=None)
@given(found=holders)
def test_freed_names_blame_only_pods_an_earlier_replica_of_the_name_controls(
    found: list[tuple[str, str]],
) -> None:
    cached: dict[str, dict[str, Any] | None] = {}
    for name, holder in found:
        if holder == "absent":
            cached[name] = None
            continue
        meta: dict[str, Any] = {"name": name, "namespace": "prod", "uid": f"pod-{name}"}
        refs = {
            "gone": [{"kind": KIND_INFERENCE_REPLICA, "name": "chat-engine", "uid": "old"}],
            "current": [{"kind": KIND_INFERENCE_REPLICA, "name": "chat-engine", "uid": "irep-uid"}],
            "other-kind": [{"kind": "ReplicaSet", "name": "chat-engine", "uid": "rs"}],
            "elsewhere": [{"kind": KIND_INFERENCE_REPLICA, "name": "chat-other", "uid": "old"}],
        }.get(holder)
        if refs is not None:
            meta["ownerReferences"] = [{**ref, "controller": True} for ref in refs]
        cached[name] = {"metadata": meta}
    taken = [name for name, _ in found]
    result = orphans.earlier_holders(taken, cached, key="prod/chat-engine", uid="irep-uid")
    blamed = {pod["metadata"]["name"] for pod in result.earlier}
    assert blamed == {name for name, holder in found if holder == "gone"}
    assert result.unowned == any(holder == "none" for _, holder in found)
    assert result.look_again == bool(blamed or result.unowned)


# -- the memory: refused creates and refused writes ---------------------------------------------


refusal_maps = st.dictionaries(
    st.integers(0, 4),
    st.builds(
        CreateRefusal,
        token=st.sampled_from([names.WAITING_QUOTA, names.WAITING_ADMISSION]),
        pod=st.just("p"),
    ),
    max_size=4,
)


@settings(max_examples=200, deadline=None)
@given(
    old=refusal_maps,
    new=refusal_maps,
    held=st.sets(st.integers(0, 4)),
    attempted=st.sets(st.integers(0, 4)),
    refused_status=st.booleans(),
    refused_pod=st.booleans(),
)
def test_settle_keeps_a_refusal_only_while_it_holds_and_never_shows_the_status_writes_own(
    *,
    old: dict[int, CreateRefusal],
    new: dict[int, CreateRefusal],
    held: set[int],
    attempted: set[int],
    refused_status: bool,
    refused_pod: bool,
) -> None:
    op = Operation(type="Create", step=names.STEP_CREATE_PODS, id="create-0-1-1")
    rows = tuple(InstanceStatus(index=i, operation=op if i in held else None) for i in range(5))
    creates = tuple(CreatePods(index=i, operation_id="c", pods=()) for i in sorted(attempted))
    decided = Plan(actions=creates, rows=rows, status=InferenceReplicaStatus())
    refusals = []
    if refused_status:
        refusals.append(_refusal(names.RESOURCE_STATUS))
    if refused_pod:
        refusals.append(_refusal("pods/status"))
    settled = settle(
        KeyMemory(refused=old), decided, PassReport(refused=new, write_refused=tuple(refusals))
    )
    kept = settled.memory.refused
    for index in kept:
        assert index in new or (index in held and index not in attempted)
    for index, refusal in new.items():
        assert kept[index] == refusal
    assert settled.backoff == bool(refusals)
    shown = settled.memory.write_refused
    assert shown is None or shown.resource != names.RESOURCE_STATUS
    assert (shown is not None) == refused_pod
    if not refusals and new:
        fresh = any(old.get(i) != r for i, r in new.items())
        assert settled.requeue_after == (RETRY_SOON if fresh else 5.0)


def _refusal(resource: str) -> RefusedWrite:
    return RefusedWrite(
        verb="patch", resource=resource, name="n", status=403, reason="Forbidden", error="no"
    )
