"""What a pass reuses from the last one, and that reusing it never changes what it decides.

A pass over 20,000 Instances spent most of its CPU reading every pod, measuring every
Instance, building every row and encoding it, and reading its own write back
(``bench/pass_cost.py``). Each of those is now kept for the very same inputs (pod objects,
pod views, previous rows, the status sent); these tests pin that a memo answers what the
uncached function answers, including where only the clock moved.
"""

from __future__ import annotations

import copy
import dataclasses
import datetime as dt
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from irep_world import NOW, World, instance, pod, target

from omed.controllers.inferencereplica.core import plan as plan_module
from omed.controllers.inferencereplica.core import revisions, summary
from omed.controllers.inferencereplica.core.actions import WriteStatus
from omed.controllers.inferencereplica.core.model import PlanSettings, ReplicaTarget
from omed.controllers.inferencereplica.core.observe import PodViewCache, pod_view
from omed.controllers.inferencereplica.core.rows import (
    FactsMemo,
    RowMemo,
    build_row,
    instance_facts,
    ready_reason_indexes,
)
from omed.controllers.inferencereplica.core.samememo import SameMemo
from omed.controllers.inferencereplica.core.status import (
    RowJson,
    RowsCache,
    decode_rows_from_status,
    encode_rows_into_status,
)
from omed.statuscodec import COLUMNAR_V2, encode_columnar


@pytest.fixture(autouse=True)
def fresh_memos(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(plan_module, "ROW_MEMO", RowMemo())
    monkeypatch.setattr(plan_module, "FACTS_MEMO", FactsMemo())


def converged(world: World) -> World:
    for _ in range(5):
        decided = world.plan()
        if not decided.of_type(WriteStatus):
            return world
        world.apply(decided)
    raise AssertionError("no fixed point")


def test_a_row_kept_across_passes_still_turns_available_when_min_ready_seconds_pass() -> None:
    spec = target(2, min_ready_seconds=600)  # the pods are Ready since NOW - 5 min
    world = converged(World(spec).add([*instance(spec, 0), *instance(spec, 1)]))
    assert [row.available_pod_count for row in world.rows.values()] == [0, 0]
    world.now = NOW + dt.timedelta(minutes=6)  # the same pod views and rows; only time moved
    decided = world.plan()
    assert [row.available_pod_count for row in decided.rows] == [1, 1]
    assert decided.of_type(WriteStatus)


def test_reused_rows_are_what_building_them_afresh_gives() -> None:
    spec = target(3)
    world = converged(
        World(spec).add([*instance(spec, 0), pod(spec, 1, ready=False), pod(spec, 2, failing=True)])
    )
    world.now = NOW + dt.timedelta(hours=1)
    memoized = world.plan()
    assert all(row is world.rows[row.index] for row in memoized.rows)  # reused, by identity
    fresh_world = dataclasses.replace(
        world,
        pods={name: dataclasses.replace(view) for name, view in world.pods.items()},
        rows={i: row.model_copy(deep=True) for i, row in world.rows.items()},
    )
    plan_module.ROW_MEMO = RowMemo()
    plan_module.FACTS_MEMO = FactsMemo()
    assert fresh_world.plan() == memoized
    for row in memoized.rows:
        facts = instance_facts(
            spec, row.index, [p for p in world.pods.values() if p.index == row.index]
        )
        rebuilt = build_row(
            target=spec,
            facts=facts,
            incarnation=row.incarnation or 1,
            op=row.operation,
            previous=world.rows[row.index],
            now=world.now,
        )
        assert rebuilt == row


def test_a_ready_flip_is_not_answered_from_the_memo() -> None:
    spec = target(1)
    world = converged(World(spec).add(instance(spec, 0)))
    [before] = world.rows.values()
    world.add([pod(spec, 0, ready=False, serving=True)])
    world.now = NOW + dt.timedelta(minutes=1)
    [row] = world.plan().rows
    assert row.phase != "Ready"
    assert row.conditions is not None and row.conditions[0].status == "False"
    assert row.conditions[0].last_transition_time == world.now.replace(microsecond=0)
    assert before.conditions is not None and before.conditions[0].status == "True"


def raw_pod(name: str, version: str, *, ready: bool) -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "namespace": "prod",
            "uid": f"uid-{name}",
            "resourceVersion": version,
            "labels": {"ome.io/instance-index": "0"},
            "ownerReferences": [
                {
                    "kind": "InferenceReplica",
                    "name": "chat-engine",
                    "uid": "irep-uid",
                    "controller": True,
                }
            ],
        },
        "status": {"conditions": [{"type": "Ready", "status": "True" if ready else "False"}]},
    }


def test_a_pod_view_is_kept_for_the_same_object_and_read_afresh_for_a_new_one() -> None:
    cache = PodViewCache()
    spec = target(1)
    first = raw_pod("chat-engine-0-default-0", "1", ready=True)
    [view] = cache.views(spec, [first])
    assert view == pod_view(first, replica=spec.name)
    assert cache.views(spec, [first])[0] is view
    equal_copy = copy.deepcopy(first)  # a new object: read again (never trusted by value)
    assert cache.views(spec, [equal_copy])[0] is not view
    newer = raw_pod("chat-engine-0-default-0", "2", ready=False)
    [again] = cache.views(spec, [newer])
    assert again == pod_view(newer, replica=spec.name) and not again.ready
    foreign = copy.deepcopy(newer)
    foreign["metadata"]["ownerReferences"][0]["uid"] = "another"
    assert cache.views(spec, [foreign]) == []


def test_a_row_json_is_made_once_per_model_and_is_the_models_dump() -> None:
    memo = RowJson()
    spec = target(2)
    world = converged(World(spec).add([*instance(spec, 0), *instance(spec, 1)]))
    row = world.rows[0]
    assert memo.of(row) == row.to_dict()
    assert memo.of(row) is memo.of(row)
    assert memo.of(row.model_copy()) is not memo.of(row)


def test_a_written_status_read_back_holds_the_written_rows() -> None:
    spec = target(3)
    world = converged(World(spec).add(p for i in range(3) for p in instance(spec, i)))
    rows = list(world.rows.values())
    listed = encode_rows_into_status({}, rows)["instanceStatuses"]
    sent = {
        "replicas": 3,
        "instanceStatusEncoding": COLUMNAR_V2,
        "instanceStatusColumns": encode_columnar(listed),
    }
    cache = RowsCache()
    cache.wrote("uid-1", sent, rows, max_rows=100)
    back = orjson.loads(orjson.dumps(sent))  # as the watch delivers the write's version
    irep = {"metadata": {"uid": "uid-1", "resourceVersion": "9"}, "status": back}
    read = cache.read(irep, max_rows=100)
    assert [read[i] for i in range(3)] == rows and all(read[i] is rows[i] for i in range(3))
    assert [r.to_dict() for r in decode_rows_from_status(back, max_rows=100)] == listed

    cache.wrote("uid-1", sent, rows, max_rows=100)
    changed = orjson.loads(orjson.dumps(sent))
    changed["replicas"] = 2  # not what was sent: read afresh
    again = cache.read(
        {"metadata": {"uid": "uid-1", "resourceVersion": "10"}, "status": changed}, max_rows=100
    )
    assert list(again.values()) == rows and all(again[i] is not rows[i] for i in range(3))


# -- The aggregates kept for the very same rows (SameMemo) ---------------------------------


def test_a_same_memo_answers_for_the_very_same_objects_only() -> None:
    calls: list[tuple[object, ...]] = []

    def count(rows: tuple[object, ...], label: str) -> tuple[int, str]:
        calls.append(rows)
        return len(rows), label

    memo = SameMemo(count)
    a, b = {"index": 0}, {"index": 1}
    assert memo.get("uid", ([a, b],), ("x",)) == (2, "x")
    assert memo.get("uid", ((a, b),), ("x",)) == (2, "x")  # the same objects: no call
    assert len(calls) == 1
    assert memo.get("uid", ([a, {"index": 1}],), ("x",)) == (2, "x")  # an equal object: a call
    assert memo.get("uid", ([a, b],), ("y",)) == (2, "y")  # another value: a call
    assert memo.get("uid", ([a],), ("x",)) == (1, "x")
    assert len(calls) == 4
    memo.forget("uid")
    memo.get("uid", ([a, b],), ("x",))
    assert len(calls) == 5


SMALL = st.integers(1, 6)


@st.composite
def pass_sequences(
    draw: st.DrawFn, sizes: st.SearchStrategy[int] = SMALL
) -> tuple[ReplicaTarget, list[dict[str, Any]]]:
    """A replica and the changes between its passes: pods flipping Ready or their gate, or
    going away, and the clock moving; the rows and pods are what the pass before left."""
    spec = target(draw(sizes), min_ready_seconds=draw(st.sampled_from([0, 30])))
    changes = draw(
        st.lists(
            st.fixed_dictionaries(
                {
                    "flip": st.sets(st.integers(0, 7), max_size=3),
                    "gate": st.sets(st.integers(0, 7), max_size=2),
                    "gone": st.sets(st.integers(0, 7), max_size=1),
                    "seconds": st.sampled_from([0, 1, 20, 40, 3600]),
                }
            ),
            min_size=1,
            max_size=6,
        )
    )
    return spec, changes


def _fresh_memos() -> dict[tuple[Any, str], Any]:
    """Swap every pass memo for an empty one; the ones swapped out, to put back."""
    swapped = {
        (plan_module, "ROW_MEMO"): RowMemo(),
        (plan_module, "FACTS_MEMO"): FactsMemo(),
        (plan_module, "_LATE"): SameMemo(ready_reason_indexes),
        (plan_module, "_NAMED"): SameMemo(revisions.named_by),
        (summary, "_COUNTS"): SameMemo(summary._counts),
        (plan_module, "_WANTED"): SameMemo(plan_module._wanted),
        (plan_module, "_SURGES"): SameMemo(plan_module._surges),
    }
    kept = {}
    for (module, name), fresh in swapped.items():
        kept[module, name] = getattr(module, name)
        setattr(module, name, fresh)
    return kept


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pass_sequences())
def test_memoised_passes_decide_what_fresh_passes_decide(
    sequence: tuple[ReplicaTarget, list[dict[str, Any]]],
) -> None:
    _passes_decide_alike(sequence)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pass_sequences(st.integers(16, 24)))
def test_patched_memos_decide_what_fresh_passes_decide(
    sequence: tuple[ReplicaTarget, list[dict[str, Any]]],
) -> None:
    """As above, over replicas large enough that a change of one to three pods is answered
    by the memos' patches from the pass before (a patch is tried where at most an eighth of
    the positions changed), not by their functions run afresh."""
    _passes_decide_alike(sequence)


def _passes_decide_alike(sequence: tuple[ReplicaTarget, list[dict[str, Any]]]) -> None:
    spec, changes = sequence
    world = World(spec).add([view for i in range(spec.replicas) for view in instance(spec, i)])
    for change in changes:
        names_ = sorted(world.pods)
        for pos in change["flip"]:
            if pos < len(names_):
                view = world.pods[names_[pos]]
                world.pods[names_[pos]] = dataclasses.replace(
                    view, ready=not view.ready, containers_ready=not view.ready
                )
        for pos in change["gate"]:
            if pos < len(names_):
                view = world.pods[names_[pos]]
                world.pods[names_[pos]] = dataclasses.replace(view, serving=not view.serving)
        for pos in change["gone"]:
            if pos < len(names_):
                world.pods.pop(names_[pos])
        world.now += dt.timedelta(seconds=change["seconds"])
        memoised = world.plan()  # the memos as the passes before left them
        kept = _fresh_memos()
        try:
            fresh = world.plan()
        finally:
            for (module, name), memo in kept.items():
                setattr(module, name, memo)
        assert memoised == fresh
        world.apply(memoised)  # the rows written are the next pass's previous rows


@st.composite
def pod_list_sequences(draw: st.DrawFn) -> list[list[tuple[int, int, bool]]]:
    """Lists of (pod, version, foreign) a pass is given in turn: mostly the list before with
    a few pods at new versions, some gone or added, now and then reordered."""
    current = [(n, 0, False) for n in range(draw(st.integers(0, 24)))]
    lists = [list(current)]
    for _ in range(draw(st.integers(1, 6))):
        for pos in draw(st.sets(st.integers(0, 23), max_size=5)):
            if pos < len(current):
                n, version, _ = current[pos]
                current[pos] = (n, version + 1, draw(st.booleans()))
        if current and draw(st.booleans()):
            current.pop(draw(st.integers(0, len(current) - 1)))
        if draw(st.booleans()):
            current.append((len(current) + 100, 0, False))
        if draw(st.integers(0, 4)) == 0:
            current = draw(st.permutations(current))
        lists.append(list(current))
    return lists


@settings(max_examples=100, deadline=None)
@given(pod_list_sequences())
def test_pod_views_are_what_reading_every_pod_afresh_gives(
    lists: list[list[tuple[int, int, bool]]],
) -> None:
    cache = PodViewCache()
    spec = target(1)
    objects: dict[tuple[int, int, bool], dict[str, Any]] = {}
    for given_ in lists:
        pods = []
        for key in given_:
            if key not in objects:  # one object per pod version, as an informer holds it
                n, version, foreign = key
                made = raw_pod(f"chat-engine-0-default-{n}", str(version), ready=version % 2 == 0)
                if foreign:
                    made["metadata"]["ownerReferences"][0]["uid"] = "another"
                objects[key] = made
            pods.append(objects[key])
        expected = [
            pod_view(p, replica=spec.name)
            for p in pods
            if p["metadata"]["ownerReferences"][0]["uid"] == spec.uid
        ]
        assert cache.views(spec, pods) == expected


# -- What the facts settle once, checked against the planner's own rule ----------------------


@settings(max_examples=200, deadline=None)
@given(
    pods=st.lists(
        st.fixed_dictionaries(
            {
                "runner": st.sampled_from(["default", "prefill"]),
                "ready": st.booleans(),
                "containers_ready": st.booleans(),
                "serving": st.sampled_from([True, False, None]),
                "terminating": st.booleans(),
            }
        ),
        max_size=3,
    ),
    runners=st.sampled_from([(("default", 1),), (("default", 1), ("prefill", 1))]),
    policy=st.sampled_from(["AllPodReady", "None"]),
)
def test_settled_gates_are_the_instances_that_get_no_gate_change(
    pods: list[dict[str, Any]], runners: tuple[tuple[str, int], ...], policy: str
) -> None:
    """``InstanceFacts.gates_settled`` (the planner's shortcut past its gate rule) holds only
    where :func:`plan._serving_gates` sets no gate, for both policies: a settled Instance
    that needed a gate change would keep a wrong gate."""
    spec = target(1, runners=runners, ready_policy=policy)
    views = [
        pod(spec, 0, p["runner"], **{k: v for k, v in p.items() if k != "runner"})
        for p in {p["runner"]: p for p in pods}.values()  # one pod per slot name
    ]
    facts = instance_facts(spec, 0, views)
    work = plan_module._Pass(spec, PlanSettings(), NOW, act=True)
    plan_module._serving_gates(work, plan_module._instance(None, facts, True))
    settled = facts.gates_settled[policy == "AllPodReady"]
    if settled:
        assert work.gates == []
    assert settled == (len(facts.live) == 1 and not work.gates)


@settings(max_examples=100, deadline=None)
@given(
    st.lists(
        st.lists(st.tuples(st.integers(0, 5), st.integers(0, 2)), max_size=6),
        min_size=1,
        max_size=6,
    )
)
def test_row_json_lists_are_each_rows_dump_in_order(calls: list[list[tuple[int, int]]]) -> None:
    """``RowJson.many`` answers ``[row.to_dict() ...]`` for each list of rows in turn, where a
    list shares rows with one before (by identity) at some positions and not at others: a
    body kept for a position whose row is another (even an equal one) would be stale."""
    spec = target(6)
    world = converged(World(spec).add(p for i in range(6) for p in instance(spec, i)))
    versions: dict[tuple[int, int], Any] = {}
    for index in range(6):
        base = world.rows[index]
        versions[index, 0] = base
        versions[index, 1] = base.model_copy(update={"pod_count": 7})  # another JSON
        versions[index, 2] = base.model_copy()  # an equal row, another object
    memo = RowJson(lists=2)
    for call in calls:
        rows = [versions[key] for key in call]
        got = memo.many(rows)
        assert got == [row.to_dict() for row in rows]
        got.clear()  # the caller's own list: changing it changes nothing kept
        assert memo.many(rows) == [row.to_dict() for row in rows]
