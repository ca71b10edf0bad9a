"""The pass's aggregates patched from the pass before answer what computing them afresh does.

A pass where one pod of 20,000 changed computes its summary counts, the revisions its rows
name, the rows late for a deadline, the pods by Instance and the translated rows from the
last pass's, at the few positions that changed (:mod:`..core.samememo`). Each patch is
checked here against its function over random sequences: a patch answers what the function
answers for the new objects, or None (then the function runs).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from irep_world import NOW, pod, target

from omed.api.inferencereplica import InstanceStatus, Operation, RowCondition
from omed.controllers.inferencereplica.core import names, observe, revisions, summary
from omed.controllers.inferencereplica.core import plan as plan_module
from omed.controllers.inferencereplica.core.graces import FAILED_CREATE_REASONS
from omed.controllers.inferencereplica.core.model import PodView
from omed.controllers.inferencereplica.core.revisions import LegacyTranslation
from omed.controllers.inferencereplica.core.rows import (
    instance_facts,
    ready_reason_indexes,
    ready_reason_indexes_patched,
)
from omed.controllers.inferencereplica.core.samememo import SameMemo

REVISIONS = [None, "", "rev-a", "rev-b", "legacy"]
REASONS = (*FAILED_CREATE_REASONS, "InstanceReady", None)
SPEC = target(12)


@st.composite
def rows(draw: st.DrawFn, index: int) -> InstanceStatus:
    op = draw(st.sampled_from([None, "Create", "Delete", "Update"]))
    reasons = draw(st.lists(st.sampled_from(REASONS), max_size=2))
    return InstanceStatus(
        index=index,
        incarnation=1,
        phase=draw(st.sampled_from(["Ready", "Creating", "Migrating", "Deleting"])),
        pod_count=draw(st.integers(0, 2)),
        serving_pod_count=draw(st.sampled_from([None, 0, 1, 2])),
        available_pod_count=draw(st.sampled_from([None, 0, 1, 2])),
        ready_since=draw(st.sampled_from([None, NOW])),
        running_revision=draw(st.sampled_from(REVISIONS)),
        target_revision=draw(st.sampled_from(REVISIONS)),
        operation=None
        if op is None
        else Operation(
            id=f"op-{index}",
            type=op,  # type: ignore[arg-type]
            step="Waiting",
            started_at=NOW,
            target_revision=draw(st.sampled_from(REVISIONS)),
        ),
        conditions=[
            RowCondition(
                type=draw(st.sampled_from([names.CONDITION_READY, "Other"])),
                status="False",
                reason=reason,
                last_transition_time=NOW,
            )
            for reason in reasons
        ]
        or None,
    )


def views(draw: st.DrawFn, index: int) -> PodView:
    """A pod view of a few Instances and names (a new version keeps both, mostly)."""
    return dataclasses.replace(
        pod(SPEC, draw(st.integers(-1, 3)), ordinal=draw(st.integers(0, 2)), ready=True),
        revision=draw(st.sampled_from(["rev-a", "legacy"])),
        uid=f"uid-{index}-{draw(st.integers(0, 3))}",
    )


@st.composite
def sequences(draw: st.DrawFn, make: Callable[[st.DrawFn, int], Any]) -> tuple[list[Any], ...]:
    """A sequence, and the next one: a few positions replaced by new objects."""
    size = draw(st.integers(1, 12))
    old = [make(draw, i) for i in range(size)]
    new = list(old)
    for pos in draw(st.sets(st.integers(0, size - 1), min_size=1, max_size=3)):
        new[pos] = make(draw, pos) if draw(st.booleans()) else old[pos].model_copy()
    return old, new


def _row(draw: st.DrawFn, index: int) -> InstanceStatus:
    return draw(rows(index))


def _changed(old: list[Any], new: list[Any]) -> list[int]:
    return [pos for pos, (a, b) in enumerate(zip(old, new, strict=True)) if a is not b]


def check(
    fn: Callable[..., Any], patch: Callable[..., Any], old: tuple, new: tuple, *values: Any
) -> None:  # type: ignore[type-arg]
    before = fn(*old, *values)
    patched = patch(old, before, new, _changed(old[0], new[0]), *values)
    assert patched is None or patched == fn(*new, *values)


@settings(max_examples=100, deadline=None)
@given(sequences(_row))
def test_named_revisions_patched(pair: tuple[list[InstanceStatus], ...]) -> None:
    old, new = pair
    check(revisions.named_by, revisions.named_by_patched, (tuple(old),), (tuple(new),))


@settings(max_examples=100, deadline=None)
@given(sequences(_row))
def test_late_rows_patched(pair: tuple[list[InstanceStatus], ...]) -> None:
    old, new = pair
    reasons = FAILED_CREATE_REASONS
    check(ready_reason_indexes, ready_reason_indexes_patched, (tuple(old),), (tuple(new),), reasons)


@settings(max_examples=100, deadline=None)
@given(sequences(_row), st.data())
def test_summary_counts_patched(
    pair: tuple[list[InstanceStatus], ...], data: st.DataObject
) -> None:
    old, new = pair
    revision = data.draw(st.sampled_from(["rev-a", "rev-b"]))

    def facts_for(draw: st.DrawFn, index: int) -> Any:
        if draw(st.booleans()):
            return None
        spec = target(12)
        made = [
            dataclasses.replace(
                pod(spec, index), revision=draw(st.sampled_from(["rev-a", "rev-b"]))
            )
            for _ in range(draw(st.integers(0, 2)))
        ]
        return instance_facts(spec, index, made)

    old_facts = [facts_for(data.draw, i) for i in range(len(old))]
    new_facts = [
        facts_for(data.draw, i) if data.draw(st.booleans()) else f for i, f in enumerate(old_facts)
    ]
    keep = frozenset(data.draw(st.sets(st.integers(0, 12))))
    aside = frozenset(data.draw(st.sets(st.integers(0, 12))))
    given_ = (keep, aside, data.draw(st.integers(0, 2)), revision)
    olds, news = (tuple(old), tuple(old_facts)), (tuple(new), tuple(new_facts))
    changed = sorted(set(_changed(old, new)) | set(_changed(old_facts, new_facts)))
    before = summary._counts(*olds, given_)
    patched = summary._counts_patched(olds, before, news, changed, given_)
    assert patched is None or patched == summary._counts(*news, given_)


@settings(max_examples=100, deadline=None)
@given(st.data())
def test_pods_by_instance_patched(data: st.DataObject) -> None:
    size = data.draw(st.integers(1, 12))
    old = [views(data.draw, i) for i in range(size)]
    new = list(old)
    for pos in data.draw(st.sets(st.integers(0, size - 1), min_size=1, max_size=3)):
        if data.draw(st.booleans()):
            new[pos] = views(data.draw, pos)
        else:  # the same pod's new version
            new[pos] = dataclasses.replace(old[pos], ready=not old[pos].ready)
    translate = LegacyTranslation(
        legacy=data.draw(st.sampled_from([None, "legacy"])), update="rev-a"
    )
    endpoints = tuple((f"uid-{i}-0", data.draw(st.booleans())) for i in range(0, size, 2))
    check(
        observe._grouped,
        observe._grouped_patched,
        (tuple(old),),
        (tuple(new),),
        (translate, endpoints),
    )


@settings(max_examples=100, deadline=None)
@given(sequences(_row), st.sampled_from([None, "legacy"]))
def test_translated_rows_patched(
    pair: tuple[list[InstanceStatus], ...], legacy: str | None
) -> None:
    old, new = pair
    given_ = (tuple(range(len(old))), LegacyTranslation(legacy=legacy, update="rev-a"))
    check(observe._translated, observe._translated_patched, (tuple(old),), (tuple(new),), given_)


@settings(max_examples=100, deadline=None)
@given(sequences(_row))
def test_update_surges_patched(pair: tuple[list[InstanceStatus], ...]) -> None:
    old, new = pair
    surged = [
        row.model_copy(update={"operation": row.operation.model_copy(update={"surge_index": 20})})
        if row.operation is not None and row.index % 2
        else row
        for row in new
    ]
    indexes = tuple(range(len(old)))
    check(
        plan_module._surges, plan_module._surges_patched, (tuple(old),), (tuple(surged),), indexes
    )


@settings(max_examples=100, deadline=None)
@given(sequences(_row), st.data())
def test_wanted_instances_patched(
    pair: tuple[list[InstanceStatus], ...], data: st.DataObject
) -> None:
    old, new = pair
    spec = target(12)

    def facts_for(index: int) -> Any:
        ready = data.draw(st.booleans())
        return instance_facts(spec, index, [pod(spec, index, ready=ready)])

    old_facts = [facts_for(i) for i in range(len(old) + 1)]
    new_facts = [facts_for(i) if data.draw(st.booleans()) else f for i, f in enumerate(old_facts)]
    given_ = (
        tuple(range(len(old))),
        tuple(range(len(old_facts))),
        data.draw(st.integers(0, 14)),
        frozenset(data.draw(st.sets(st.integers(0, 12), max_size=2))),
    )
    olds, news = (tuple(old), tuple(old_facts)), (tuple(new), tuple(new_facts))
    changed = sorted(set(_changed(old, new)) | set(_changed(old_facts, new_facts)))
    before = plan_module._wanted(*olds, given_)
    patched = plan_module._wanted_patched(olds, before, news, changed, given_)
    assert patched is None or patched == plan_module._wanted(*news, given_)


def test_a_memo_with_a_patch_answers_from_the_entry_before() -> None:
    calls: list[int] = []

    def total(items: tuple[dict[str, int], ...]) -> int:
        calls.append(len(items))
        return sum(item["n"] for item in items)

    def patch(
        old: tuple[tuple[dict[str, int], ...]],
        was: int,
        new: tuple[tuple[dict[str, int], ...]],
        changed: list[int],
    ) -> int:
        return was - sum(old[0][p]["n"] for p in changed) + sum(new[0][p]["n"] for p in changed)

    memo = SameMemo(total, patch=patch)
    items = [{"n": i} for i in range(16)]
    assert memo.get("uid", (items,)) == sum(range(16))
    items[3] = {"n": 100}
    assert memo.get("uid", (items,)) == sum(range(16)) - 3 + 100
    assert calls == [16]  # patched, not computed again
    assert memo.get("uid", ([{"n": 1}] * 16,)) == 16  # every position changed: computed
    assert calls == [16, 16]
