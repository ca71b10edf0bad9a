"""migration drain-node's decisions, from objects as the API server returns them: which
Instances a node holds, their request IDs (the same in every run), where a later run picks
up, when a request may be sent (the in-flight cap, one per component, the rate window), and
the report and exit code."""

from __future__ import annotations

import io
import uuid
from collections.abc import Iterable
from dataclasses import replace
from typing import Any

import pytest

from omed.api import migrationrequest
from omed.cli import drain_node as drain
from omed.cli import migration_start as core
from omed.cli.kubectl_ome import run

NODE = "node-a"
UID_CHAT = "5f0c8a52-3b1e-4c8d-9f27-6a1d0e4b7c93"


def pod(
    name: str,
    *,
    service: str = "chat",
    component: str = "engine",
    index: int | str = 0,
    node: str = NODE,
    namespace: str = "prod",
    deleting: bool = False,
    managed: bool = True,
) -> dict[str, Any]:
    labels = {
        "ome.io/inferenceservice": service,
        "component": component,
        "ome.io/instance-index": str(index),
    }
    if managed:
        labels["ome.io/managed-by"] = "OMENative"
    meta: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "uid": f"uid-{namespace}-{name}",
        "labels": labels,
    }
    if deleting:
        meta["deletionTimestamp"] = "2026-09-28T10:00:00Z"
    return {"metadata": meta, "spec": {"nodeName": node}}


def subject(service: str = "chat", index: int = 0, component: str = "engine") -> drain.Subject:
    return drain.Subject(
        namespace="prod",
        service=service,
        component=component,
        instance=index,
        pods=(f"{service}-{component}-{index}-default-0",),
        pod_uids=(f"uid-{service}-{index}",),
    )


NONE_KNOWN = drain.Known(waiting=frozenset(), phases={}, others=frozenset())


# -- selection ----------------------------------------------------------------------------------


def test_the_node_s_instances_one_per_service_component_and_index_sorted() -> None:
    pods = [
        pod("chat-engine-3-default-0", index=3),
        pod("chat-engine-0-leader-0", index=0),
        pod("chat-engine-0-worker-0", index=0),
        pod("chat-engine-1-default-0", index=1, node="node-b"),  # another node
        pod("chat-engine-2-default-0", index=2, deleting=True),  # leaving on its own
        pod("web-0", managed=False),  # not OME's
        pod("chat-decoder-0-default-0", component="decoder"),
        pod("ask-engine-0-default-0", service="ask", namespace="dev"),
        pod("broken", index="x"),
    ]
    found = drain.subjects_on_node(pods, NODE)
    assert [s.key for s in found] == [
        ("dev", "ask", "engine", 0),
        ("prod", "chat", "decoder", 0),
        ("prod", "chat", "engine", 0),
        ("prod", "chat", "engine", 3),
    ]
    gang = found[2]
    assert gang.pods == ("chat-engine-0-leader-0", "chat-engine-0-worker-0")
    assert gang.pod_uids == tuple(
        sorted(["uid-prod-chat-engine-0-leader-0", "uid-prod-chat-engine-0-worker-0"])
    )
    assert gang.name == "prod/chat engine/0"


def test_an_empty_node_holds_nothing() -> None:
    assert drain.subjects_on_node([pod("x", node="node-b")], NODE) == []


# -- request IDs --------------------------------------------------------------------------------


def test_request_ids_are_the_same_in_every_run_and_differ_by_what_they_move() -> None:
    base = subject()
    rid = drain.request_id(base, node=NODE, service_uid=UID_CHAT, attempt=1)
    assert rid == drain.request_id(base, node=NODE, service_uid=UID_CHAT, attempt=1)
    others = {
        drain.request_id(base, node=NODE, service_uid=UID_CHAT, attempt=2),
        drain.request_id(base, node="node-b", service_uid=UID_CHAT, attempt=1),
        drain.request_id(base, node=NODE, service_uid="other-uid", attempt=1),
        drain.request_id(replace(base, instance=1), node=NODE, service_uid=UID_CHAT, attempt=1),
        drain.request_id(
            replace(base, pod_uids=("rebuilt",)), node=NODE, service_uid=UID_CHAT, attempt=1
        ),
        drain.request_id(
            replace(base, component="decoder"), node=NODE, service_uid=UID_CHAT, attempt=1
        ),
    }
    assert rid not in others and len(others) == 6
    assert uuid.UUID(rid).version == 5
    key = core.request_key(rid)
    assert migrationrequest.request_uuid(key) == rid  # the webhook and controller read it
    assert (
        core.check_flags(  # and migration start's --request-id takes it
            name="chat",
            namespace="prod",
            component="engine",
            instance="0",
            from_node=NODE,
            hints=(),
            reason="",
            requested_by="kubectl-ome",
            request_id=rid,
            dry_run="none",
            output="table",
            ome_namespace="ome",
            yes=True,
        ).request_id
        == rid
    )


# -- resume -------------------------------------------------------------------------------------


def _ids(s: drain.Subject, n: int) -> list[str]:
    return [
        drain.request_id(s, node=NODE, service_uid=UID_CHAT, attempt=a) for a in range(1, n + 1)
    ]


def test_a_first_run_sends_attempt_1() -> None:
    s = subject()
    got = drain.resume(s, node=NODE, service_uid=UID_CHAT, known=NONE_KNOWN)
    assert (got.state, got.attempt, got.request_id, got.ended) == (
        drain.PENDING,
        1,
        _ids(s, 1)[0],
        (),
    )


@pytest.mark.parametrize(
    ("waiting", "phase", "state"),
    [
        (True, None, drain.SENT),
        (False, "Accepted", drain.IN_FLIGHT),
        (False, "SurgePending", drain.IN_FLIGHT),
        (False, "Draining", drain.IN_FLIGHT),
    ],
)
def test_a_later_run_follows_the_request_it_sent(
    waiting: bool, phase: str | None, state: str
) -> None:
    s = subject()
    (rid,) = _ids(s, 1)
    known = drain.Known(
        waiting=frozenset({rid} if waiting else ()),
        phases={rid: phase} if phase else {},
        others=frozenset(),
    )
    got = drain.resume(s, node=NODE, service_uid=UID_CHAT, known=known)
    assert (got.state, got.request_id, got.attempt, got.phase) == (state, rid, 1, phase or "")


def test_an_ended_attempt_is_never_sent_again_the_next_one_is() -> None:
    s = subject()
    first, second, third = _ids(s, 3)
    known = drain.Known(
        waiting=frozenset(), phases={first: "Failed"}, others=frozenset({second})
    )  # the second only in the audit ConfigMap: its record aged out
    got = drain.resume(s, node=NODE, service_uid=UID_CHAT, known=known)
    assert (got.state, got.request_id, got.attempt) == (drain.PENDING, third, 3)
    assert got.ended == ((first, "Failed"), (second, "Ended"))


def test_every_attempt_ended_is_refused() -> None:
    s = subject()
    ids = _ids(s, drain.MAX_ATTEMPTS)
    known = drain.Known(
        waiting=frozenset(), phases=dict.fromkeys(ids, "Failed"), others=frozenset()
    )
    got = drain.resume(s, node=NODE, service_uid=UID_CHAT, known=known)
    assert (got.state, got.request_id) == (drain.REFUSED, None)
    assert len(got.ended) == drain.MAX_ATTEMPTS


# -- the caps -----------------------------------------------------------------------------------


def rows_of(*subjects: drain.Subject) -> list[drain.Row]:
    return [drain.Row(subject=s, state=drain.PENDING, request_id=f"id-{s.key}") for s in subjects]


def test_two_in_flight_one_per_component() -> None:
    rows = rows_of(subject("chat", 0), subject("chat", 1), subject("web", 0), subject("web", 1))
    loads = {
        ("prod", "chat", "engine"): drain.ReplicaLoad(in_flight=0),
        ("prod", "web", "engine"): drain.ReplicaLoad(in_flight=0),
    }
    picks = drain.next_sends(rows, loads=loads, max_in_flight=2)
    assert [p.subject.key for p in picks] == [
        ("prod", "chat", "engine", 0),
        ("prod", "web", "engine", 0),
    ]
    # A cap of 1: only the first.
    assert [p.subject.key for p in drain.next_sends(rows, loads=loads, max_in_flight=1)] == [
        ("prod", "chat", "engine", 0)
    ]


def test_anyone_s_migration_in_flight_counts_and_busies_its_component() -> None:
    rows = rows_of(subject("chat", 0), subject("web", 0), subject("ask", 0))
    loads = {
        ("prod", "chat", "engine"): drain.ReplicaLoad(in_flight=1),  # someone else's
        ("prod", "web", "engine"): drain.ReplicaLoad(in_flight=0),
        ("prod", "ask", "engine"): drain.ReplicaLoad(in_flight=0),
    }
    picks = drain.next_sends(rows, loads=loads, max_in_flight=2)
    assert [p.subject.service for p in picks] == ["web"]
    assert drain.next_sends(rows, loads=loads, max_in_flight=1) == []


def test_a_spent_rate_window_sends_nothing_and_defers() -> None:
    rows = rows_of(subject("chat", 0), subject("web", 0))
    loads = {
        ("prod", "chat", "engine"): drain.ReplicaLoad(in_flight=0, window_left=0),
        ("prod", "web", "engine"): drain.ReplicaLoad(in_flight=0, window_left=1),
    }
    assert [p.subject.service for p in drain.next_sends(rows, loads=loads, max_in_flight=3)] == [
        "web"
    ]
    assert [r.subject.service for r in drain.rate_spent(rows, loads)] == ["chat"]


def test_only_pending_rows_are_sent() -> None:
    rows = [replace(r, state=drain.SKIPPED) for r in rows_of(subject("chat", 0))]
    assert drain.next_sends(rows, loads={}, max_in_flight=5) == []


def _controller(
    rows: list[drain.Row], sent: dict[tuple[str, str, str], list[int]], ticks_per_move: int
) -> Iterable[tuple[dict[tuple[str, str, str], drain.ReplicaLoad], int]]:
    """A controller that takes a component's requests one at a time, each ``ticks_per_move``
    rounds long."""
    clock: dict[tuple[str, str, str, int], int] = {}
    while True:
        loads: dict[tuple[str, str, str], drain.ReplicaLoad] = {}
        for key in {r.subject.replica_key for r in rows}:
            loads[key] = drain.ReplicaLoad(in_flight=len(sent.get(key, [])))
        yield loads, sum(load.in_flight for load in loads.values())
        for key, queue in sent.items():
            if queue:
                head = (*key, queue[0])
                clock[head] = clock.get(head, 0) + 1
                if clock[head] >= ticks_per_move:
                    done = queue.pop(0)
                    for i, row in enumerate(rows):
                        if row.subject.replica_key == key and row.subject.instance == done:
                            rows[i] = replace(row, state=drain.COMPLETED)


@pytest.mark.parametrize("cap", [1, 2, 3])
@pytest.mark.parametrize("ticks", [1, 3])
def test_a_whole_drain_never_exceeds_the_caps_and_ends(cap: int, ticks: int) -> None:
    rows = rows_of(
        subject("chat", 0), subject("chat", 1), subject("web", 0), subject("web", 1),
        subject("ask", 0), subject("chat", 2, component="decoder"),
    )  # fmt: skip
    sent: dict[tuple[str, str, str], list[int]] = {}
    peak = 0
    for rounds, (loads, in_flight) in enumerate(_controller(rows, sent, ticks)):
        assert rounds < 100
        assert in_flight <= cap
        assert all(load.in_flight <= 1 for load in loads.values())
        for pick in drain.next_sends(rows, loads=loads, max_in_flight=cap):
            rows[rows.index(pick)] = replace(pick, state=drain.SENT)
            sent.setdefault(pick.subject.replica_key, []).append(pick.subject.instance)
        peak = max(peak, sum(len(q) for q in sent.values()))
        assert peak <= cap
        if all(r.state == drain.COMPLETED for r in rows):
            break
    assert peak == min(cap, 4)  # four components


def test_the_rate_window_counts_allocations_in_it_and_what_will_allocate() -> None:
    now = 1_790_000_000.0  # 2026-09-21T...
    records = [
        {"requestUUID": "a", "phase": "Completed", "allocatedAt": _at(now - 7200)},  # old
        {"requestUUID": "b", "phase": "Completed", "allocatedAt": _at(now - 600)},
        {"requestUUID": "c", "phase": "SurgePending", "allocatedAt": _at(now - 60)},
        {"requestUUID": "d", "phase": "Accepted"},  # will allocate
        {"requestUUID": "e", "phase": "Failed"},  # never allocated: nothing
    ]
    # "d" is recorded and still on the service (its removal not yet written): counted once.
    left = drain.window_left(
        records, limit=10, window_seconds=3600, now=now, waiting=["d", "x", "y"]
    )
    assert left == 10 - 5


def _at(epoch: float) -> str:
    import datetime as dt

    return dt.datetime.fromtimestamp(epoch, tz=dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def test_in_flight_counts_waiting_requests_and_records_not_ended() -> None:
    phases = ("Accepted", "Draining", "Completed", "Failed", "Relocated")
    records = [{"requestUUID": str(i), "phase": p} for i, p in enumerate(phases)]
    assert drain.in_flight_of(records, ["w"]) == 3
    assert drain.in_flight_of(records, ["0"]) == 2  # recorded and not yet removed: once


# -- following ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("phase", "state"),
    [
        ("Accepted", drain.IN_FLIGHT),
        ("SurgeReady", drain.IN_FLIGHT),
        ("Completed", drain.COMPLETED),
        ("Failed", drain.FAILED),
        ("Relocated", drain.FAILED),
    ],
)
def test_a_sent_row_follows_its_record(phase: str, state: str) -> None:
    (row,) = rows_of(subject())
    row = replace(row, state=drain.SENT)
    record = {"requestUUID": row.request_id, "phase": phase, "message": "m", "surgeInstance": 4}
    got = drain.follow(row, known=NONE_KNOWN, record=record)
    assert (got.state, got.phase, got.message, got.surge) == (state, phase, "m", 4)


def test_a_request_still_waiting_stays_sent() -> None:
    (row,) = rows_of(subject())
    row = replace(row, state=drain.SENT)
    assert row.request_id is not None
    known = drain.Known(waiting=frozenset({row.request_id}), phases={}, others=frozenset())
    assert drain.follow(row, known=known, record=None).state == drain.SENT


# -- report and exit ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("states", "code"),
    [
        ([drain.COMPLETED, drain.SKIPPED], 0),
        ([], 0),
        ([drain.COMPLETED, drain.REFUSED], 3),
        ([drain.DEFERRED], 3),
        ([drain.REFUSED, drain.FAILED], 1),
        ([drain.TIMED_OUT], 1),
        ([drain.UNKNOWN], 1),
        ([drain.PLANNED, drain.SKIPPED], 0),
        ([drain.ERROR, drain.COMPLETED], 1),
    ],
)
def test_exit_codes(states: list[str], code: int) -> None:
    rows = [drain.Row(subject=subject(index=i), state=s) for i, s in enumerate(states)]
    assert drain.exit_code(rows) == code


def test_what_kept_the_node_from_draining() -> None:
    states = [drain.COMPLETED, drain.REFUSED, drain.FAILED, drain.REFUSED, drain.SKIPPED]
    rows = [drain.Row(subject=subject(index=i), state=s) for i, s in enumerate(states)]
    assert drain.not_drained(rows) == "1 Failed, 2 Refused"


def test_the_table_and_the_report() -> None:
    done = drain.Row(
        subject=subject("chat", 3),
        state=drain.COMPLETED,
        request_id="7c9e6679-7425-40de-944b-e07fc1f90ae7",
        attempt=1,
        phase="Completed",
        message="migrated to instance=4",
        surge=4,
    )
    skipped = drain.Row(
        subject=subject("chat", 0, component="decoder"),
        state=drain.SKIPPED,
        detail="migrations disabled by MigrationPolicy Mode=Never",
    )
    resumed = drain.Row(
        subject=subject("web", 1),
        state=drain.IN_FLIGHT,
        request_id="1a2b3c4d-0000-5000-8000-000000000000",
        phase="SurgePending",
        message="surge allocated; waiting for surge pods",
        resumed=True,
    )
    assert drain.table_rows([done, skipped, resumed]) == [
        ["NAMESPACE", "SERVICE", "COMP/INST", "REQUEST", "STATE", "DETAIL"],
        ["prod", "chat", "engine/3", "7c9e6679", "Completed", "migrated to instance=4"],
        [
            "prod",
            "chat",
            "decoder/0",
            "-",
            "Skipped",
            "migrations disabled by MigrationPolicy M...",
        ],
        [
            "prod",
            "web",
            "engine/1",
            "1a2b3c4d",
            "InFlight(resumed)",
            "surge allocated; waiting for surge pods",
        ],
    ]
    got = drain.report(
        [done, skipped],
        node=NODE,
        namespace="prod",
        dry_run="none",
        max_in_flight=2,
        caps_source="ome/inferenceservice-config",
        peak_in_flight=2,
    )
    assert (got["kind"], got["node"], got["exitCode"], got["peakInFlight"]) == (
        "DrainNodeReport",
        NODE,
        0,
        2,
    )
    assert got["summary"] == {"Completed": 1, "Skipped": 1}
    assert got["instances"][0]["requestID"] == done.request_id
    assert got["instances"][1]["detail"] == "migrations disabled by MigrationPolicy Mode=Never"
    assert drain.progress_line(done) == (
        f"prod/chat engine/3: Completed request {done.request_id} (migrated to instance=4)"
    )


# -- flags, before any read ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["node-a", "-A", "-n", "prod"], "-A and -n can't be used together"),
        (["node-a", "--reason", "token=abc"], core.VALUES_INVALID),
        (["Node_A"], core.VALUES_INVALID),
        (["node-a", "--dry-run=sometimes"], core.DRY_RUN_INVALID),
        (["node-a", "-o", "name"], core.OUTPUT_INVALID),
        (["node-a", "--max-in-flight", "0"], 'invalid --max-in-flight "0": want N >= 1'),
    ],
)
async def test_bad_flags_are_refused_before_any_read(argv: list[str], message: str) -> None:
    out, err = io.StringIO(), io.StringIO()
    code = await run(
        ["migration", "drain-node", *argv, "--kubeconfig", "/nonexistent"], out=out, err=err
    )
    assert (code, out.getvalue(), err.getvalue()) == (1, "", f"error: {message}\n")
