"""The runtime revision core: snapshots, in-use revisions and garbage collection, with the
clock as an input (no sleeping), and properties over arbitrary revision sets (hypothesis)."""

from __future__ import annotations

import datetime as dt
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from omed.api.constants import (
    ANNOTATION_CREATED_BY,
    ANNOTATION_GC_ELIGIBLE_SINCE,
    LABEL_REVISION_HASH,
    LABEL_RUNTIME_OF,
    LABEL_RUNTIME_OF_KIND,
    LABEL_RUNTIME_OF_NAMESPACE,
)
from omed.api.runtimehash import legacy_content_hash
from omed.controllers.runtimerevision.core import observe
from omed.controllers.runtimerevision.core.model import (
    LiveRuntime,
    Observed,
    Revision,
    ServiceUse,
    Settings,
    Source,
)
from omed.controllers.runtimerevision.core.plan import plan
from omed.controllers.runtimerevision.core.snapshot import (
    REASON_LABEL_TOO_LONG,
    content_hash,
    revision_name,
)

T0 = dt.datetime(2026, 9, 28, 14, 0, 0, tzinfo=dt.UTC)
DAY = dt.timedelta(hours=24)
SR = Source("ServingRuntime", "prod", "srt")
CSR = Source("ClusterServingRuntime", "", "srt")
SPEC = {"engineConfig": {"runner": {"name": "ome-container", "image": "srt:1"}}}


def rev(
    number: int,
    *,
    source: Source = SR,
    mark: str | None = None,
    ours: bool = True,
    created: dt.datetime | None = None,
) -> Revision:
    digest = f"{number:08x}"
    return Revision(
        name=revision_name(source, digest),
        uid=f"uid-{source.kind}-{number}",
        resource_version=str(100 + number),
        runtime_name=source.name,
        source=source,
        content_hash=digest,
        number=number,
        created=created or T0 + dt.timedelta(minutes=number),
        mark=mark,
        written_by_ome=ours,
    )


def world(
    revisions: list[Revision],
    *,
    runtimes: tuple[LiveRuntime, ...] = (),
    services: tuple[ServiceUse, ...] = (),
) -> Observed:
    return Observed(
        runtime_name="srt",
        namespace="ome",
        runtimes=runtimes,
        revisions=tuple(revisions),
        services=services,
    )


RETAIN_2 = Settings(retention=2, grace_period=DAY)


def names(items: Any) -> set[str]:
    return {item.revision.name for item in items}


# -- snapshots -------------------------------------------------------------------------------


def test_a_runtime_without_a_revision_of_its_spec_gets_one_numbered_past_its_highest() -> None:
    digest = content_hash(SPEC)
    decided = plan(world([rev(1), rev(4)], runtimes=(LiveRuntime(SR, SPEC),)), RETAIN_2, T0 + DAY)
    (create,) = decided.creates
    body = create.body
    assert body["metadata"]["name"] == f"r-prod-srt-{digest}"
    assert body["metadata"]["namespace"] == "ome"
    assert body["metadata"]["labels"] == {
        LABEL_RUNTIME_OF: "srt",
        LABEL_RUNTIME_OF_KIND: "ServingRuntime",
        LABEL_RUNTIME_OF_NAMESPACE: "prod",
        LABEL_REVISION_HASH: digest,
    }
    assert body["metadata"]["annotations"] == {ANNOTATION_CREATED_BY: "ome-controller"}
    assert body["data"] == SPEC
    assert body["revision"] == 5
    assert "ownerReferences" not in body["metadata"]


def test_a_cluster_runtime_is_named_cr_and_numbered_on_its_own() -> None:
    decided = plan(world([rev(7)], runtimes=(LiveRuntime(CSR, SPEC),)), RETAIN_2, T0)
    (create,) = decided.creates
    assert create.body["metadata"]["name"] == f"cr-srt-{content_hash(SPEC)}"
    assert create.body["metadata"]["labels"][LABEL_RUNTIME_OF_NAMESPACE] == ""
    assert create.body["revision"] == 1


def test_the_hash_ignores_key_order_and_changes_with_the_spec() -> None:
    reordered = {"engineConfig": {"runner": {"image": "srt:1", "name": "ome-container"}}}
    assert content_hash(reordered) == content_hash(SPEC)
    assert content_hash({"engineConfig": {"runner": {"image": "srt:2"}}}) != content_hash(SPEC)
    assert len(content_hash(SPEC)) == 8


def test_a_spec_that_has_its_revision_writes_nothing_again() -> None:
    existing = Revision(**_as(rev(3), content_hash(SPEC)))
    decided = plan(world([existing], runtimes=(LiveRuntime(SR, SPEC),)), RETAIN_2, T0)
    assert decided.writes == 0
    assert existing.name in decided.in_use


def test_a_legacy_named_revision_of_the_live_spec_is_kept_while_pinned_then_collected() -> None:
    # omed's names before upstream's hash: the live spec gets its upstream-named revision, and
    # the old one is kept by a pin, or like any other revision until retention lets it go.
    legacy = Revision(**_as(rev(3), legacy_content_hash(SPEC)))
    assert legacy.name != revision_name(SR, content_hash(SPEC))
    live = (LiveRuntime(SR, SPEC),)
    pinning = ServiceUse("prod", "chat", "srt", "ServingRuntime", pins=(legacy.name,))
    decided = plan(world([legacy], runtimes=live, services=(pinning,)), RETAIN_2, T0)
    assert [c.name for c in decided.creates] == [revision_name(SR, content_hash(SPEC))]
    assert legacy.name in decided.in_use
    newer = [rev(n) for n in (10, 11)]
    decided = plan(world([legacy, *newer], runtimes=live), RETAIN_2, T0 + DAY)
    assert names(decided.marks) == {legacy.name}


def _as(revision: Revision, digest: str) -> dict[str, Any]:
    fields = {name: getattr(revision, name) for name in Revision.__slots__}
    fields["name"] = revision_name(SR, digest)
    fields["content_hash"] = digest
    return fields


def test_a_runtime_name_too_long_for_a_label_is_skipped_with_the_reason() -> None:
    long = Source("ServingRuntime", "prod", "r" * 64)
    observed = Observed(
        runtime_name=long.name, namespace="ome", runtimes=(LiveRuntime(long, SPEC),)
    )
    decided = plan(observed, RETAIN_2, T0)
    assert decided.creates == ()
    assert [(s.source, s.reason) for s in decided.skipped] == [(long, REASON_LABEL_TOO_LONG)]


# -- collection ------------------------------------------------------------------------------


def test_beyond_retention_and_unused_is_marked_now_and_waits_a_grace_period() -> None:
    revisions = [rev(n) for n in range(1, 6)]
    now = T0 + dt.timedelta(hours=1, microseconds=500)
    decided = plan(world(revisions), RETAIN_2, now)
    assert decided.newest == {revisions[4].name, revisions[3].name}
    assert names(decided.marks) == {r.name for r in revisions[:3]}
    assert {m.since for m in decided.marks} == {"2026-09-28T15:00:00Z"}
    assert decided.deletes == ()
    assert decided.requeue_after == dt.timedelta(hours=24) - dt.timedelta(microseconds=500)


def test_a_mark_past_the_grace_period_deletes_and_one_within_it_requeues_at_its_deadline() -> None:
    old = rev(1, mark="2026-09-27T10:00:00Z")
    recent = rev(2, mark="2026-09-28T13:00:00+00:00")
    kept = [rev(3), rev(4)]
    decided = plan(world([old, recent, *kept]), RETAIN_2, T0)
    assert names(decided.deletes) == {old.name}
    assert decided.marks == ()
    assert decided.requeue_after == dt.timedelta(hours=23)


def test_the_deadline_counts_from_the_mark_not_from_when_it_is_read() -> None:
    marked = rev(1, mark="2026-09-28T14:00:00Z")
    others = [rev(2), rev(3)]
    just_before = plan(world([marked, *others]), RETAIN_2, T0 + DAY - dt.timedelta(seconds=1))
    assert just_before.deletes == ()
    assert just_before.requeue_after == dt.timedelta(seconds=1)
    at = plan(world([marked, *others]), RETAIN_2, T0 + DAY)
    assert names(at.deletes) == {marked.name}


def test_a_pinned_revision_is_kept_and_loses_its_mark() -> None:
    pinned = rev(1, mark="2026-09-20T00:00:00Z")
    by_status = rev(2)
    revisions = [pinned, by_status, rev(3), rev(4), rev(5)]
    services = (
        ServiceUse("prod", "a", "srt", "ServingRuntime", pins=(pinned.name,)),
        ServiceUse("dev", "b", "other", None, pins=(by_status.name,)),
    )
    decided = plan(world(revisions, services=services), RETAIN_2, T0 + DAY)
    assert names(decided.unmarks) == {pinned.name}
    assert names(decided.marks) == {revisions[2].name}
    assert decided.deletes == ()
    assert {pinned.name, by_status.name} <= decided.in_use


def test_a_kept_revision_in_the_newest_loses_a_mark_it_was_given() -> None:
    marked = rev(5, mark="not a time")
    decided = plan(world([rev(1), rev(2), marked]), RETAIN_2, T0)
    assert names(decided.unmarks) == {marked.name}


def test_a_mark_that_is_not_a_time_is_written_again() -> None:
    for bad in ("yesterday", "2026-09-28T14:00:00", ""):
        decided = plan(world([rev(1, mark=bad), rev(2), rev(3)]), RETAIN_2, T0)
        assert [m.since for m in decided.marks] == ["2026-09-28T14:00:00Z"], bad
        assert decided.deletes == ()


def test_the_current_spec_of_a_live_runtime_is_in_use_even_when_old() -> None:
    digest = content_hash(SPEC)
    current = Revision(**_as(rev(1), digest))
    decided = plan(
        world([current, rev(2), rev(3), rev(4)], runtimes=(LiveRuntime(SR, SPEC),)),
        RETAIN_2,
        T0,
    )
    assert current.name in decided.in_use
    assert current.name not in names(decided.marks)
    assert names(decided.marks) == {rev(2).name}


def test_a_service_of_a_deleted_runtime_keeps_the_newest_revision_it_was_rendered_from() -> None:
    cluster = [rev(n, source=CSR, created=T0 + dt.timedelta(minutes=10 + n)) for n in (1, 2)]
    namespaced = [rev(n) for n in (1, 2, 3)]
    follows_cluster = ServiceUse("prod", "a", "srt", "ClusterServingRuntime")
    decided = plan(
        world([*namespaced, *cluster], services=(follows_cluster,)),
        Settings(retention=0, grace_period=DAY),
        T0,
    )
    assert decided.in_use == {cluster[1].name}
    unset_kind = ServiceUse("prod", "b", "srt", None)
    decided = plan(
        world([*namespaced, *cluster], services=(unset_kind,)),
        Settings(retention=0, grace_period=DAY),
        T0,
    )
    # kind unset: the ServingRuntime of its namespace wins, here known by its revisions
    assert decided.in_use == {namespaced[2].name}


def test_kind_unset_resolves_to_the_cluster_runtime_when_no_namespaced_one_exists() -> None:
    cluster = rev(1, source=CSR)
    live = (LiveRuntime(CSR, {"other": True}),)
    service = ServiceUse("elsewhere", "a", "srt", None)
    decided = plan(world([cluster], runtimes=live, services=(service,)), RETAIN_2, T0)
    (create,) = decided.creates
    assert create.body["metadata"]["name"] in decided.in_use


def test_revisions_omed_did_not_write_are_never_touched_nor_counted() -> None:
    foreign = [rev(n, ours=False, mark="2000-01-01T00:00:00Z") for n in (8, 9)]
    ours = [rev(1), rev(2), rev(3)]
    decided = plan(world([*foreign, *ours]), RETAIN_2, T0)
    assert names(decided.marks) == {ours[0].name}
    touched = names(decided.marks) | names(decided.unmarks) | names(decided.deletes)
    assert not touched & {r.name for r in foreign}


def test_zero_grace_deletes_on_the_pass_after_the_mark() -> None:
    zero = Settings(retention=1, grace_period=dt.timedelta(0))
    first = plan(world([rev(1), rev(2)]), zero, T0)
    assert names(first.marks) == {rev(1).name}
    assert first.requeue_after == dt.timedelta(0)
    second = plan(world([rev(1, mark=first.marks[0].since), rev(2)]), zero, T0)
    assert names(second.deletes) == {rev(1).name}


# -- the cache boundary ----------------------------------------------------------------------


def test_observe_reads_a_revision_and_a_service_as_stored() -> None:
    obj = {
        "metadata": {
            "name": "cr-srt-0000abcd",
            "namespace": "ome",
            "uid": "u1",
            "resourceVersion": "42",
            "creationTimestamp": "2026-09-28T14:15:57Z",
            "labels": {
                LABEL_RUNTIME_OF: "srt",
                LABEL_RUNTIME_OF_KIND: "ClusterServingRuntime",
                LABEL_RUNTIME_OF_NAMESPACE: "",
                LABEL_REVISION_HASH: "0000abcd",
            },
            "annotations": {
                ANNOTATION_CREATED_BY: "ome-controller",
                ANNOTATION_GC_ELIGIBLE_SINCE: "2026-09-28T15:00:00Z",
            },
        },
        "data": {},
        "revision": 3,
    }
    read = observe.revision(obj)
    assert read.source == CSR
    assert (read.number, read.mark, read.written_by_ome) == (3, "2026-09-28T15:00:00Z", True)
    assert read.created == dt.datetime(2026, 9, 28, 14, 15, 57, tzinfo=dt.UTC)
    service = {
        "metadata": {"name": "chat", "namespace": "prod"},
        "spec": {"runtime": {"name": "srt", "autoSync": False, "revision": "r-prod-srt-1"}},
        "status": {"pinnedRevisionName": "r-prod-srt-2"},
    }
    use = observe.service_use(service)
    assert use == ServiceUse("prod", "chat", "srt", None, pins=("r-prod-srt-1", "r-prod-srt-2"))
    damaged = {"metadata": {"name": "x", "namespace": "p"}, "spec": {"runtime": "srt"}}
    assert observe.service_use(damaged) == ServiceUse("p", "x", None, None)


# -- properties ------------------------------------------------------------------------------

_MARKS = st.one_of(
    st.none(),
    st.just("garbage"),
    st.integers(min_value=-72, max_value=72).map(
        lambda h: (T0 + dt.timedelta(hours=h)).strftime("%Y-%m-%dT%H:%M:%SZ")
    ),
)


@st.composite
def worlds(draw: st.DrawFn) -> tuple[Observed, Settings, dt.datetime]:
    count = draw(st.integers(min_value=0, max_value=12))
    revisions = []
    for number in range(1, count + 1):
        source = draw(st.sampled_from([SR, CSR, Source("ServingRuntime", "dev", "srt")]))
        created = T0 + dt.timedelta(seconds=draw(st.integers(min_value=0, max_value=5)))
        revisions.append(
            rev(
                number,
                source=source,
                mark=draw(_MARKS),
                ours=draw(st.booleans()) or number % 3 != 0,
                created=created,
            )
        )
    names_ = [r.name for r in revisions]
    pinned = draw(st.lists(st.sampled_from(names_), max_size=3)) if names_ else []
    services = tuple(
        ServiceUse("prod", f"svc-{i}", draw(st.sampled_from(["srt", "other"])), None, pins=(n,))
        for i, n in enumerate(pinned)
    )
    live = tuple(
        LiveRuntime(source, {"v": draw(st.integers(min_value=0, max_value=3))})
        for source in draw(st.lists(st.sampled_from([SR, CSR]), unique=True))
    )
    policy = Settings(
        retention=draw(st.integers(min_value=0, max_value=4)),
        grace_period=dt.timedelta(hours=draw(st.integers(min_value=0, max_value=48))),
    )
    now = T0 + dt.timedelta(hours=draw(st.integers(min_value=0, max_value=96)))
    return world(revisions, runtimes=live, services=services), policy, now


@settings(max_examples=300, deadline=None)
@given(worlds())
def test_in_use_is_never_marked_or_deleted_and_at_most_retention_unused_stay_unmarked(
    case: tuple[Observed, Settings, dt.datetime],
) -> None:
    observed, policy, now = case
    decided = plan(observed, policy, now)
    touched = names(decided.marks) | names(decided.deletes)
    pinned = {name for service in observed.services for name in service.pins}
    assert not touched & decided.in_use
    assert pinned & {r.name for r in observed.revisions} <= decided.in_use
    ours = [r for r in observed.revisions if r.written_by_ome]
    # What is left unmarked after the plan: revisions not marked or deleted, whose mark
    # (if any) the plan removes or that had none.
    unmarked_unused = [
        r
        for r in ours
        if r.name not in decided.in_use
        and r.name not in touched
        and (r.mark is None or r.name in names(decided.unmarks))
    ]
    assert len(unmarked_unused) <= policy.retention
    # Every revision of ours ends in exactly one state; foreign ones are never touched.
    for r in ours:
        kept = r.name in decided.in_use or r.name in decided.newest
        assert kept != (
            r.name in touched or (r.mark is not None and r.name not in names(decided.unmarks))
        )
    foreign = {r.name for r in observed.revisions if not r.written_by_ome}
    assert not (touched | names(decided.unmarks)) & foreign
