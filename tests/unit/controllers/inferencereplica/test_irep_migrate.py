"""Migrations in the pure planner: the record's state machine, its guards, its durability.

A :class:`MoveWorld` is the planner's in-memory world (:class:`irep_world.World`) with the
parent InferenceService's mailbox, the audit ledger the plans write, and a scheduler that
honours the surge's required node affinity (pods land on the first node it allows).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import settings as settings_
from hypothesis import strategies as st
from irep_world import World, instance, settings, target

from omed.api.inferencereplica import InferenceReplicaStatus, MigrationStatus, RetryBlock
from omed.api.migrationrequest import parse
from omed.config.lifecycle import (
    AutoMigrateConfig,
    ForceDeleteConfig,
    LifecycleConfig,
    MigrationAuditConfig,
    RequeueConfig,
)
from omed.controllers.inferencereplica.core.actions import (
    CreatePods,
    DeletePods,
    Plan,
    RecordEvent,
    WriteStatus,
)
from omed.controllers.inferencereplica.core.decide import PassReport, settle
from omed.controllers.inferencereplica.core.migrationactions import (
    ConsumeMigrationRequests,
    Mailbox,
    WriteAuditRow,
)
from omed.controllers.inferencereplica.core.model import (
    ContainerFailure,
    CreateRefusal,
    ObservedState,
    PodStall,
    ReplicaTarget,
)
from omed.controllers.inferencereplica.core.ops.migratenames import go_duration
from omed.controllers.inferencereplica.core.ops.migratepods import pinned_to, with_overlay
from omed.controllers.inferencereplica.core.plan import plan
from omed.controllers.inferencereplica.core.policy import UpdatePolicy
from omed.controllers.inferencereplica.core.waiting import permanent_refusal
from omed.controllers.ledger.document import with_entry

UUID = "7c9e6679-7425-40de-944b-e07fc1f90ae7"
KEY = f"ome.io/migration-request-v1-{UUID}"
NODES = ("node-a", "node-b", "node-c", "node-d", "node-e")
AUDIT = MigrationAuditConfig(maxInFlightMigrations=3, maxMigrationsPerWindow=10, window="1h")
FLEET = LifecycleConfig(
    instance_ready_timeout=1800.0,
    audit=AUDIT,
    audit_problem=None,
    requeue=RequeueConfig(operation="5s", gate="3s"),
)


def request(**changes: Any) -> str:
    """A request body as upstream's CLI writes it (Go struct order, empty fields left out)."""
    doc: dict[str, Any] = {
        "schemaVersion": "v1",
        "component": "engine",
        "instance": 3,
        "from_node": "node-d",
        "reason": "node-d maintenance",
        "requested_at": "2026-09-14T19:59:00Z",
        "requested_by": "kubectl-ome",
    }
    doc.update(changes)
    return orjson.dumps({k: v for k, v in doc.items() if v is not ...}).decode()


def spec_for(fleet: LifecycleConfig = FLEET, **kw: Any) -> ReplicaTarget:
    base = target(4)
    return dataclasses.replace(
        base, fleet=fleet, update=UpdatePolicy(ready_timeout=fleet.instance_ready_timeout), **kw
    )


@dataclasses.dataclass
class MoveWorld(World):
    annotations: dict[str, str] = dataclasses.field(default_factory=dict)
    ledger: dict[tuple[str, str | None], dict[str, Any]] = dataclasses.field(default_factory=dict)
    ledger_log: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    events: list[RecordEvent] = dataclasses.field(default_factory=list)
    phases: list[str] = dataclasses.field(default_factory=list)
    min_ready: int = 99
    bodies: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)
    undeletable: set[str] = dataclasses.field(default_factory=set)

    def observed(self) -> ObservedState:
        requests = tuple(parse(key, value) for key, value in sorted(self.annotations.items()))
        mailbox = Mailbox(
            isvc="chat", uid="isvc-uid", requests=requests, declared=frozenset({"engine"})
        )
        return dataclasses.replace(super().observed(), mailbox=mailbox)

    def apply(self, decided: Plan, *, status_fails: bool = False) -> None:
        for row in decided.of_type(WriteAuditRow):
            rows = with_entry(list(self.ledger.values()), row.entry)
            if rows is not None:
                self.ledger = {(r["requestUUID"], r.get("reason")): dict(r) for r in rows}
            self.ledger_log.append(self.ledger[(row.entry.request_uuid, row.entry.reason)])
        if not status_fails:
            self.events.extend(decided.of_type(RecordEvent))
            for consumed in decided.of_type(ConsumeMigrationRequests):
                for key in consumed.keys:
                    self.annotations.pop(key, None)
        for create in decided.of_type(CreatePods):
            for item in create.pods:
                self.bodies[item.name] = dict(item.body)
        super().apply(decided, status_fails=status_fails)
        for record in self.status.migrations or ():
            if not self.phases or self.phases[-1] != record.phase:
                self.phases.append(str(record.phase))

    def tick(self, seconds: float = 1.0) -> None:
        unplaced = {name for name, pod in self.pods.items() if pod.node is None}
        wedged = {  # a dead kubelet: their deletion is never confirmed
            name: dataclasses.replace(pod, deleted_at=pod.deleted_at or self.now)
            for name, pod in self.pods.items()
            if pod.terminating and name in self.undeletable
        }
        super().tick(seconds)
        self.pods.update(wedged)
        for name in unplaced:  # the scheduler: the first node the pod's affinity allows
            if name in self.pods:
                node = next(n for n in NODES if n not in _excluded(self.bodies.get(name)))
                self.pods[name] = dataclasses.replace(self.pods[name], node=node)
        serving = {
            pod.index
            for pod in self.pods.values()
            if pod.ready and pod.serving is True and not pod.terminating
        }
        self.min_ready = min(self.min_ready, len(serving))

    def run(self, passes: int) -> None:
        for _ in range(passes):
            self.step(settings())

    def record(self) -> MigrationStatus:
        (found,) = [r for r in self.status.migrations or () if r.request_uuid == UUID]
        return found

    def events_of(self, reason: str) -> list[str]:
        return [e.message for e in self.events if e.reason == reason]


def _excluded(body: dict[str, Any] | None) -> set[str]:
    if body is None:
        return set()
    affinity = (body.get("spec") or {}).get("affinity") or {}
    required = (affinity.get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    ) or {}
    return {
        value
        for term in required.get("nodeSelectorTerms") or ()
        for expr in term.get("matchExpressions") or ()
        if expr.get("operator") == "NotIn"
        for value in expr.get("values") or ()
    }


def converged(spec: ReplicaTarget | None = None) -> MoveWorld:
    """Four Ready Instances, Instance i on node NODES[i]."""
    spec = spec or spec_for()
    world = MoveWorld(spec)
    for index in range(4):
        world.add(instance(spec, index, node=NODES[index]))
    world.run(3)
    assert sorted(world.rows) == [0, 1, 2, 3]
    assert all(row.phase == "Ready" for row in world.rows.values())
    world.min_ready = 99
    return world


def test_a_request_moves_instance_3_off_its_node_without_a_dip() -> None:
    world = converged()
    world.annotations[KEY] = request()
    world.run(30)
    record = world.record()
    assert record.phase == "Completed"
    assert record.message == "migrated to instance=4"
    assert record.surge_instance == 4 and record.source_instance == 3
    assert record.from_node == "node-d" and record.trigger == "Manual"
    assert record.reason == "node-d maintenance"
    assert world.phases == ["Accepted", "SurgePending", "SurgeReady", "Draining", "Completed"]
    assert sorted(world.rows) == [0, 1, 2, 4]
    assert all(row.phase == "Ready" and row.operation is None for row in world.rows.values())
    moved = [pod for pod in world.pods.values() if pod.index == 4]
    assert moved and all(pod.node != "node-d" for pod in moved)
    assert world.min_ready >= 4  # serving capacity never dipped
    assert KEY not in world.annotations
    assert world.events_of("MigrationRequestAccepted") == [
        f"OMENative component=engine instance=3 migration accepted (uuid={UUID}, "
        "source-node=node-d, surge-index=4)"
    ]
    assert world.events_of("MigrationCompleted") == [
        f"OMENative migration uuid={UUID} complete: component=engine instance=3 -> instance=4 "
        "(revision=chat-engine-6c4f8b1d)"
    ]
    started = [e for e in world.ledger_log if e["phase"] == "Started"]
    assert [e.get("surgeInstance") for e in started] == [-1, 4]
    assert started[0]["startedAt"] == "2026-09-14T19:59:00Z"  # the request's requested_at
    final = world.ledger[(UUID, "node-d maintenance")]
    assert final["phase"] == "Completed" and final["outcome"] == "migrated"
    assert final["surgeInstance"] == 4 and final["revision"] == "chat-engine-6c4f8b1d"
    assert final["startedAt"] == "2026-09-14T19:59:00Z"
    # a later scale-up fills the gap first
    world.spec = dataclasses.replace(world.spec, replicas=5)
    world.run(5)
    assert sorted(world.rows) == [0, 1, 2, 3, 4]


def _ready_condition(status: InferenceReplicaStatus) -> tuple[str, str | None]:
    (ready,) = [c for c in status.conditions or () if c.type == "Ready"]
    return ready.status, ready.message


def test_the_source_and_its_surge_count_once_so_ready_holds_through_the_move() -> None:
    """The pair counts as the one Instance that moves: the source until SurgeReady, the surge
    from then on, so the source's drain drops no count and Ready stays True; ``replicas``
    counts both while both have pods (one over the wanted count, as upstream's is)."""
    world = converged()
    world.annotations[KEY] = request()
    seen: dict[str, set[tuple[int | None, int | None, tuple[str, str | None]]]] = {}
    replicas: set[int | None] = set()
    source_drained = False
    for _ in range(30):
        world.run(1)
        status = world.status
        phase = str(world.record().phase)
        ready = (status.ready_replicas, status.available_replicas, _ready_condition(status))
        seen.setdefault(phase, set()).add(ready)
        replicas.add(status.replicas)
        source = world.rows.get(3)
        if phase == "Draining" and source is not None and source.ready_since is None:
            source_drained = True  # Ready no more: the surge counts in its place
    assert world.record().phase == "Completed"
    assert list(seen) == ["Accepted", "SurgePending", "SurgeReady", "Draining", "Completed"]
    assert all(s == {(4, 4, ("True", "4/4 Instances are Ready"))} for s in seen.values()), seen
    assert replicas == {4, 5}
    assert source_drained


def test_the_pairs_rows_ride_with_the_records_phase_writes() -> None:
    """Through the whole core (the pace included): the surge's pods appearing, its gate and
    Ready, the source's gate and drain move only the pair's rows and counts, so they wait for
    the record's next phase write; each phase is stored once, and nothing else is."""
    world = converged()
    world.annotations[KEY] = request()
    before = len(world.status_writes)
    paced = 0
    for _ in range(40):
        unpaced = world.plan()  # the planner alone, on the state the pass reads
        decided = world.pass_(seconds=0.2).plan
        if unpaced.of_type(WriteStatus) and not decided.of_type(WriteStatus):
            paced += 1
    assert world.record().phase == "Completed"
    assert world.phases == ["Accepted", "SurgePending", "SurgeReady", "Draining", "Completed"]
    assert len(world.status_writes) - before == 5
    assert paced > 0  # a write of the pair's rows waited, and a phase write carried it
    assert sorted(world.rows) == [0, 1, 2, 4]
    assert all(row.phase == "Ready" and row.operation is None for row in world.rows.values())


def test_a_request_still_cached_after_its_removal_is_not_removed_again() -> None:
    """The removal of a request and the status write that answers it reach the caches apart:
    a pass that reads the new record beside the InferenceService as it was before the removal
    neither patches it again nor answers it again; once the cache shows the removal, the key
    is forgotten."""
    world = converged()
    world.annotations[KEY] = request()
    cached = dict(world.annotations)
    first = world.decide()
    (consumed,) = first.plan.of_type(ConsumeMigrationRequests)
    assert consumed.keys == (KEY,)
    stored = world.store(first.plan)
    report = PassReport(status_stored=stored, monotonic=world.monotonic, removed_requests=(KEY,))
    world.memory = settle(first.memory, first.plan, report).memory
    assert KEY not in world.annotations
    world.tick()
    world.annotations = cached  # the InferenceService's cache hasn't seen the removal yet
    stale = world.decide()
    assert stale.plan.of_type(ConsumeMigrationRequests) == []
    assert len(stale.plan.status.migrations or ()) == 1
    # Without what the pass remembers, the same view removes the request a second time.
    forgetful = dataclasses.replace(world.memory, removed_requests=frozenset())
    world.memory, remembered = forgetful, world.memory
    assert world.decide().plan.of_type(ConsumeMigrationRequests)
    world.memory = remembered
    world.annotations = {}  # the cache catches up
    assert world.decide().memory.removed_requests == frozenset()


def test_the_surge_is_kept_off_the_source_node_and_drawn_to_the_hints() -> None:
    world = converged()
    world.annotations[KEY] = request(hint_target_nodes=["node-e"])
    world.run(4)
    body = world.bodies["chat-engine-4-default-0"]
    affinity = body["spec"]["affinity"]["nodeAffinity"]
    assert affinity["requiredDuringSchedulingIgnoredDuringExecution"] == {
        "nodeSelectorTerms": [
            {
                "matchExpressions": [
                    {"key": "kubernetes.io/hostname", "operator": "NotIn", "values": ["node-d"]}
                ]
            }
        ]
    }
    assert affinity["preferredDuringSchedulingIgnoredDuringExecution"] == [
        {
            "weight": 50,
            "preference": {
                "matchExpressions": [
                    {"key": "kubernetes.io/hostname", "operator": "In", "values": ["node-e"]}
                ]
            },
        }
    ]
    assert body["metadata"]["labels"]["ome.io/revision-hash"] == "6c4f8b1d"


def test_overlay_adds_the_exclusion_to_every_existing_term() -> None:
    pod = {
        "spec": {
            "affinity": {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {"matchExpressions": [{"key": "gpu", "operator": "Exists"}]},
                            {"matchFields": [{"key": "metadata.name", "operator": "In"}]},
                        ]
                    }
                }
            }
        }
    }
    out = with_overlay(pod, from_node="n1", hints=())
    terms = out["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]
    avoid = {"key": "kubernetes.io/hostname", "operator": "NotIn", "values": ["n1"]}
    assert all(avoid in term["matchExpressions"] for term in terms["nodeSelectorTerms"])
    assert pod["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]["nodeSelectorTerms"][0]["matchExpressions"] == [
        {"key": "gpu", "operator": "Exists"}
    ]  # the input is kept


def _pinned_payload(key: str, *terms: Any) -> bytes:
    required = {"nodeSelectorTerms": list(terms)}
    spec = {
        "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": required}}
    }
    return orjson.dumps({"podSpec": {}, key: spec})


def _host_in(*values: str) -> dict[str, Any]:
    expression = {"key": "kubernetes.io/hostname", "operator": "In", "values": list(values)}
    return {"matchExpressions": [expression]}


@pytest.mark.parametrize(
    ("payload", "pinned"),
    [
        (_pinned_payload("podSpec", _host_in("node-a")), True),
        (_pinned_payload("workerPodSpec", None, {}, _host_in("node-a")), True),
        (_pinned_payload("podSpec", _host_in("node-a", "node-b")), False),
        (_pinned_payload("podSpec", _host_in("node-b")), False),
        (_pinned_payload("podSpec", None, {}, {"matchExpressions": None}), False),
        (b"", False),
    ],
    ids=[
        "alone",
        "worker, after null and empty terms",
        "among others",
        "another node",
        "empty",
        "no payload",
    ],
)
def test_a_source_is_pinned_only_by_a_required_hostname_in_of_that_node_alone(
    payload: bytes, pinned: bool
) -> None:
    """A requirement that also allows other nodes leaves the surge somewhere to go (the CLI's
    migration start refuses it all the same: tests/unit/cli/test_migration_start.py)."""
    assert pinned_to(payload, "node-a") is pinned


def test_a_restarted_manager_resumes_without_a_second_surge_or_delete() -> None:
    """Every pass is planned twice on the same state (a manager killed after its status write
    plans again from what it wrote): the second plan never creates or deletes again."""
    world = converged()
    world.annotations[KEY] = request()
    for _ in range(30):
        first = world.plan(settings())
        world.apply(first)
        again = world.plan(settings())
        created = {p.name for c in first.of_type(CreatePods) for p in c.pods}
        recreated = {p.name for c in again.of_type(CreatePods) for p in c.pods}
        assert not (created & recreated & set(world.pods))
        surges = {r.surge_instance for r in again.status.migrations or ()}
        assert surges <= {None, 4}
        deleted = {p.name for d in first.of_type(DeletePods) for p in d.pods}
        for d in again.of_type(DeletePods):
            for ref in d.pods:
                assert ref.name not in deleted or not world.pods[ref.name].terminating
        world.tick()
    assert world.record().phase == "Completed"
    assert sorted(world.rows) == [0, 1, 2, 4]


def test_a_re_delivered_request_is_only_consumed() -> None:
    world = converged()
    world.annotations[KEY] = request()
    world.run(1)
    assert world.record().phase in ("Accepted", "SurgePending")
    world.annotations[KEY] = request()  # the removal was lost: the request comes again
    world.run(1)
    assert KEY not in world.annotations
    assert len(world.status.migrations or ()) == 1


def test_one_request_is_accepted_per_pass_lowest_key_first() -> None:
    world = converged()
    other = "0aaaaaaa-7425-40de-944b-e07fc1f90ae7"
    world.annotations[KEY] = request()
    world.annotations[f"ome.io/migration-request-v1-{other}"] = request(instance=1)
    decided = world.plan(settings())
    (record,) = decided.status.migrations or ()
    assert record.request_uuid == other
    world.apply(decided)
    assert KEY in world.annotations


def test_mode_never_writes_a_born_terminal_failed_record() -> None:
    world = converged(spec_for(migration_mode="Never"))
    world.annotations[KEY] = request()
    world.run(2)
    record = world.record()
    assert record.phase == "Failed"
    assert record.message == "migrations disabled by MigrationPolicy Mode=Never"
    assert record.started_at == record.completed_at == record.deadline
    assert world.events_of("MigrationRequestRejected") == [
        f"OMENative migration uuid={UUID} rejected: migrations disabled by MigrationPolicy "
        "Mode=Never"
    ]
    assert world.ledger[(UUID, "node-d maintenance")]["phase"] == "Failed"
    assert sorted(world.rows) == [0, 1, 2, 3]


def test_an_invalid_request_is_rejected_with_an_audit_row_and_no_record() -> None:
    world = converged()
    world.annotations[KEY] = request(component="router")
    world.run(1)
    assert not world.status.migrations
    assert KEY not in world.annotations
    assert world.events_of("MigrationRequestRejected") == [
        f'OMENative migration uuid={UUID} rejected: component "router" does not exist on this '
        "InferenceService"
    ]
    assert world.ledger[(UUID, None)]["phase"] == "Failed"
    world.annotations[KEY] = request(schemaVersion="v2")
    world.run(1)
    assert world.events_of("UnsupportedSchemaVersion") == [
        f'OMENative migration uuid={UUID} rejected: UnsupportedSchemaVersion: "v2"'
    ]


def test_without_caps_the_request_is_held_and_warned_once() -> None:
    fleet = dataclasses.replace(FLEET, audit=None, audit_problem="lifecycle.audit is not set")
    world = converged(spec_for(fleet))
    world.annotations[KEY] = request()
    world.run(5)
    record = world.record()
    assert record.phase == "Accepted"
    assert record.message == "waiting for migration capacity policy (no lifecycle.audit configured)"
    assert world.events_of("MigrationPolicyUnconfigured") == [
        f"OMENative migration uuid={UUID} held: waiting for migration capacity policy (no "
        "lifecycle.audit configured)"
    ]
    condition = {c.type: c for c in world.status.conditions or ()}["MigrationPolicyUnconfigured"]
    assert (condition.status, condition.reason) == ("True", "MigrationCapacityUnconfigured")
    assert condition.message == (
        "lifecycle.audit is not configured; migration requests wait instead of executing"
    )
    assert sorted(world.rows) == [0, 1, 2, 3]


def test_with_caps_a_request_in_flight_shows_the_capacity_condition_false() -> None:
    world = converged()
    world.annotations[KEY] = request()
    world.run(1)
    assert world.record().phase in ("Accepted", "SurgePending")
    condition = {c.type: c for c in world.status.conditions or ()}["MigrationPolicyUnconfigured"]
    assert (condition.status, condition.reason, condition.message) == (
        "False",
        "MigrationCapacityConfigured",
        "Migration capacity policy is configured",
    )


def test_no_ready_timeout_expires_the_request_at_once() -> None:
    """The known bug: the deadline is instanceReadyTimeout from the accept, 0 when unset."""
    fleet = dataclasses.replace(FLEET, instance_ready_timeout=None)
    world = converged(spec_for(fleet))
    world.annotations[KEY] = request()
    world.run(2)
    record = world.record()
    assert record.phase == "Failed"
    assert record.message == "deadline exceeded in phase Accepted: surge never allocated"
    assert world.events_of("MigrationExpired") == [
        f"OMENative migration uuid={UUID} expired: deadline exceeded in phase Accepted: surge "
        "never allocated"
    ]


def test_a_surge_that_never_gets_ready_expires_and_the_source_is_restored() -> None:
    world = converged()
    world.annotations[KEY] = request()
    for _ in range(40):  # the surge's pods never get their containers ready
        decided = world.plan(settings())
        world.apply(decided)
        world.now += dt.timedelta(seconds=60)
        for name, pod in list(world.pods.items()):
            if pod.terminating:
                del world.pods[name]
            elif pod.index == 4:
                world.pods[name] = dataclasses.replace(
                    pod, node="node-a", phase="Running", containers_ready=False, ready=False
                )
        if world.record().phase != "Accepted":
            assert world.record().phase in ("SurgePending", "Failed")
    record = world.record()
    assert record.phase == "Failed"
    assert (
        record.message == "deadline exceeded in phase SurgePending: surge pods never became ready"
    )
    assert world.events_of("MigrationExpired") == [
        f"OMENative migration uuid={UUID} expired: deadline exceeded in phase SurgePending: surge "
        "pods never became ready; tearing down surge instance=4"
    ]
    assert sorted(world.rows) == [0, 1, 2, 3]
    assert world.rows[3].phase == "Ready" and world.rows[3].operation is None
    assert not [p for p in world.pods.values() if p.index == 4]
    assert world.ledger[(UUID, "node-d maintenance")]["outcome"] == record.message


def test_the_rate_cap_fails_the_request() -> None:
    fleet = dataclasses.replace(
        FLEET,
        audit=MigrationAuditConfig(maxInFlightMigrations=3, maxMigrationsPerWindow=1, window="1h"),
    )
    world = converged(spec_for(fleet))
    earlier = MigrationStatus(
        request_uuid="11111111-7425-40de-944b-e07fc1f90ae7",
        trigger="Manual",
        source_instance=0,
        surge_instance=5,
        allocated_at=world.now - dt.timedelta(minutes=10),
        phase="Completed",
        started_at=world.now - dt.timedelta(minutes=10),
        deadline=world.now + dt.timedelta(minutes=20),
        completed_at=world.now - dt.timedelta(minutes=5),
    )
    world.status = world.status.model_copy(update={"migrations": [earlier]})
    world.annotations[KEY] = request()
    world.run(3)
    record = world.record()
    assert record.phase == "Failed"
    assert record.message == "migration rate cap reached (1/1 in the last 1h0m0s)"
    assert world.events_of("RateLimited") == [
        f"OMENative migration uuid={UUID} rejected: migration rate cap reached (1/1 in the last "
        "1h0m0s)"
    ]
    assert world.events_of("MigrationRequestRejected")


def test_a_source_that_moved_is_migrated_off_the_node_it_occupies() -> None:
    world = converged()
    world.annotations[KEY] = request(from_node="node-a")
    world.run(30)
    record = world.record()
    assert record.phase == "Completed" and record.from_node == "node-d"
    assert world.events_of("MigrationFromNodeMismatch") == [
        "request.FromNode=node-a does not match observed source node=node-d; component=engine "
        "instance=3 leaves node-d"
    ]


def test_a_source_that_is_not_ready_defers_the_move() -> None:
    world = converged()
    for name in [n for n, p in world.pods.items() if p.index == 3]:
        world.pods[name] = dataclasses.replace(world.pods[name], failing=True, ready=False)
    world.annotations[KEY] = request()
    for _ in range(3):
        world.apply(world.plan(settings()))
    record = world.record()
    assert record.phase == "Accepted" and record.surge_instance is None
    assert not [p for p in world.pods.values() if p.index == 4]


def test_go_durations() -> None:
    assert go_duration(3600) == "1h0m0s"
    assert go_duration(90) == "1m30s"
    assert go_duration(5) == "5s"


def test_terminal_records_leave_status_after_the_window() -> None:
    world = converged()
    world.annotations[KEY] = request()
    world.run(30)
    assert world.record().phase == "Completed"
    world.now += dt.timedelta(hours=2)
    world.run(1)
    assert not world.status.migrations


def _fail_source(world: MoveWorld) -> None:
    """Instance 3's pods crash-loop (a rebuilt one as soon as it runs); terminating ones go."""
    for name in [n for n, p in world.pods.items() if p.index == 3]:
        if world.pods[name].terminating:
            del world.pods[name]
            continue
        world.pods[name] = dataclasses.replace(
            world.pods[name],
            node="node-d",
            phase="Running",
            failing=True,
            ready=False,
            containers_ready=False,
            restarts=3,
            failure=ContainerFailure(container="ome-container", reason="CrashLoopBackOff"),
        )


def test_a_source_failed_on_its_running_revision_defers_with_what_holds_it() -> None:
    world = converged()
    world.annotations[KEY] = request()
    world.apply(world.plan(settings()))  # accepted
    for _ in range(12):
        _fail_source(world)
        world.apply(world.plan(settings()))
        world.now += dt.timedelta(seconds=5)
    record = world.record()
    assert record.phase == "Accepted"
    prefix = (
        "waiting for source component=engine instance=3, Failed on its running revision "
        "chat-engine-6c4f8b1d (pod chat-engine-3-default-0 container ome-container stuck "
        "(CrashLoopBackOff)), to be Ready again: "
    )
    assert record.message is not None and record.message.startswith(prefix), record.message
    assert record.message.removeprefix(prefix) in (
        "its repair is parked until the retry ladder re-arms it",
        "its repair is parked and no retry ladder is configured to re-arm it; reset the "
        "Instance or publish a corrected revision",
        "no repair is open on it",
    )
    assert world.events_of("MigrationDeferred")[-1] == record.message
    assert len(set(world.events_of("MigrationDeferred"))) == len(
        world.events_of("MigrationDeferred")
    )  # once per cause


def test_a_source_on_a_held_revision_is_rejected() -> None:
    world = converged()
    held = RetryBlock(
        target_revision="chat-engine-6c4f8b1d",
        state="Held",
        attempts_started=3,
        reason="ImagePullBackOff",
    )
    world.status = world.status.model_copy(update={"retry_blocks": [held]})
    world.annotations[KEY] = request()
    world.apply(world.plan(settings()))
    world.apply(world.plan(settings()))
    record = world.record()
    message = (
        "source component=engine instance=3 runs revision chat-engine-6c4f8b1d, which is held "
        "after its attempts (retry block Held after 3 failed attempt(s): ImagePullBackOff); the "
        "move would rebuild that revision elsewhere; correct or release the revision, then "
        "request the move again"
    )
    assert (record.phase, record.message) == ("Failed", message)
    assert world.events_of("MigrationRequestRejected") == [
        f"OMENative migration uuid={UUID} rejected: {message}"
    ]


def test_a_single_pod_source_on_two_nodes_fails_the_move() -> None:
    """A leftover pod of Instance 3 on node-e beside its own on node-d: the source names no
    single node to leave."""
    world = converged()
    (own,) = [p for p in world.pods.values() if p.index == 3]
    leftover = dataclasses.replace(own, name=f"{own.name}-leftover", uid="uid-leftover")
    world.add([dataclasses.replace(leftover, node="node-e")])
    world.annotations[KEY] = request()
    world.apply(world.plan(settings()))
    world.apply(world.plan(settings()))
    record = world.record()
    message = "source pods span multiple nodes (node-d, node-e)"
    assert (record.phase, record.message, record.surge_instance) == ("Failed", message, None)
    assert world.events_of("MigrationFromNodeMismatch") == [
        f"OMENative migration uuid={UUID} rejected: {message}"
    ]
    assert not [p for p in world.pods.values() if p.index == 4]


def test_a_source_whose_pods_are_gone_fails_the_move() -> None:
    """Instance 3's pod deleted while its request waits (no caps: held): its row still reads
    Ready, and the source names no node to leave."""
    world = converged(spec_for(dataclasses.replace(FLEET, audit=None)))
    world.annotations[KEY] = request()
    world.apply(world.plan(settings()))
    world.apply(world.plan(settings()))
    held = "waiting for migration capacity policy (no lifecycle.audit configured)"
    assert (world.record().phase, world.record().message) == ("Accepted", held)
    for name in [n for n, p in world.pods.items() if p.index == 3]:
        del world.pods[name]
    world.apply(world.plan(settings()))
    record = world.record()
    message = "source instance has no live pods"
    assert (record.phase, record.message) == ("Failed", message)
    assert world.events_of("MigrationFromNodeMismatch") == [
        f"OMENative migration uuid={UUID} rejected: {message}"
    ]
    world.run(5)  # the Instance is rebuilt where it was: the failed move left it alone
    assert sorted(world.rows) == [0, 1, 2, 3]
    assert not [p for p in world.pods.values() if p.index == 4]


def test_a_source_whose_pods_are_terminating_defers_the_move() -> None:
    world = converged()
    world.annotations[KEY] = request()
    world.apply(world.plan(settings()))
    for name in [n for n, p in world.pods.items() if p.index == 3]:
        world.pods[name] = dataclasses.replace(world.pods[name], terminating=True, ready=False)
    world.apply(world.plan(settings()))
    record = world.record()
    assert (record.phase, record.surge_instance) == ("Accepted", None)
    assert not world.events_of("MigrationFromNodeMismatch")


def test_a_source_failed_on_a_revision_that_never_started_is_rejected() -> None:
    """Instance 3's update to chat-engine-7f9c4d2b failed before it ever ran (a Backoff block):
    waiting could only park the request until its deadline."""
    world = converged()
    world.annotations[KEY] = request()
    world.apply(world.plan(settings()))
    new = "chat-engine-7f9c4d2b"
    block = RetryBlock(
        target_revision=new,
        state="Backoff",
        attempts_started=1,
        reason="CrashLoopBackOff",
        next_retry_at=world.now + dt.timedelta(minutes=5),
        first_failure_at=world.now,
        last_failure_at=world.now,
    )
    world.status = world.status.model_copy(update={"retry_blocks": [block]})
    world.rows[3] = world.rows[3].model_copy(update={"phase": "Failed", "target_revision": new})
    world.apply(world.plan(settings()))
    record = world.record()
    message = (
        f"source component=engine instance=3 is Failed on revision {new}, which has not started "
        "(retry block Backoff after 1 failed attempt(s): CrashLoopBackOff); correct or release "
        "the revision, then request the move again"
    )
    assert (record.phase, record.message) == ("Failed", message)
    assert world.events_of("MigrationRequestRejected") == [
        f"OMENative migration uuid={UUID} rejected: {message}"
    ]
    assert not world.events_of("MigrationDeferred")


@settings_(max_examples=40, deadline=None)
@given(crashes=st.lists(st.sampled_from(["ok", "after-status", "before-status"]), max_size=40))
def test_a_manager_killed_anywhere_moves_the_instance_exactly_once(crashes: list[str]) -> None:
    """A pass killed before its status write does nothing; one killed after it has stored the
    record and rows but sent no pod write. Either way the migration completes with one surge,
    every pod created once, and serving capacity never below four."""
    world = converged()
    world.annotations[KEY] = request()
    for crash in [*crashes, *["ok"] * 40]:
        decided = world.plan(settings())
        if crash == "before-status":
            pass
        elif crash == "after-status":
            world.apply(dataclasses.replace(decided, actions=_status_only(decided)))
        else:
            world.apply(decided)
        world.tick()
    record = world.record()
    assert (record.phase, record.surge_instance) == ("Completed", 4)
    assert sorted(world.rows) == [0, 1, 2, 4]
    assert world.already_exists == 0
    assert world.created.count("chat-engine-4-default-0") == 1
    assert world.deleted.count("chat-engine-3-default-0") == 1
    assert world.min_ready >= 4


def _status_only(decided: Plan) -> tuple[Any, ...]:
    return tuple(
        a
        for a in decided.actions
        if isinstance(a, WriteStatus | WriteAuditRow | RecordEvent | ConsumeMigrationRequests)
    )


def test_a_surge_create_refused_by_quota_is_retried_with_a_warning() -> None:
    world = converged()
    world.annotations[KEY] = request()
    world.apply(world.plan(settings()))  # accepted
    refusal = CreateRefusal(token="QuotaExceeded", pod="chat-engine-4-default-0")
    observed = dataclasses.replace(world.observed(), refused={4: refusal})
    first = plan(target=world.spec, observed=observed, settings=settings(), now=world.now)
    world.apply(dataclasses.replace(first, actions=_status_only(first)))  # the create refused
    observed = dataclasses.replace(world.observed(), refused={4: refusal})
    decided = plan(target=world.spec, observed=observed, settings=settings(), now=world.now)
    assert [p.name for c in decided.of_type(CreatePods) for p in c.pods] == [
        "chat-engine-4-default-0"
    ]
    warned = [e.message for e in first.of_type(RecordEvent) if e.type == "Warning"]
    assert warned == [
        f"OMENative migration uuid={UUID} waiting to create surge pod chat-engine-4-default-0 "
        "before its deadline"
    ]
    assert not decided.of_type(RecordEvent)  # once per cause: the retry writes nothing new


def _run_to(world: MoveWorld, phase: str, passes: int = 30) -> None:
    for _ in range(passes):
        if world.status.migrations and world.record().phase == phase:
            return
        world.step(settings())
    raise AssertionError(f"never reached {phase}: {world.phases}")


def test_an_expiry_restores_an_unhealthy_source_with_migration_expired() -> None:
    world = converged()
    world.annotations[KEY] = request()
    _run_to(world, "SurgePending")
    source = [n for n, p in world.pods.items() if p.index == 3]
    for _ in range(40):  # the surge never gets ready; the source's containers stop being ready
        for name in source:
            world.pods[name] = dataclasses.replace(
                world.pods[name], containers_ready=False, ready=False
            )
        for name, pod in list(world.pods.items()):
            if pod.index == 4 and not pod.terminating:
                world.pods[name] = dataclasses.replace(
                    pod, node="node-a", phase="Running", containers_ready=False, ready=False
                )
            elif pod.terminating:
                del world.pods[name]
        world.apply(world.plan(settings()))
        world.now += dt.timedelta(seconds=60)
        if world.record().phase == "Failed":
            break
    assert world.record().message == (
        "deadline exceeded in phase SurgePending: surge pods never became ready"
    )
    row = world.rows[3]
    assert row.operation is None
    assert row.last_failure is not None and row.last_failure.reason == "MigrationExpired"
    assert row.last_failure.pod == "chat-engine-3-default-0"
    (ready,) = [c for c in row.conditions or () if c.type == "Ready"]
    assert (ready.status, ready.reason, ready.message) == (
        "False",
        "MigrationExpired",
        "migration expired; source pods unhealthy",
    )
    world.apply(world.plan(settings()))  # kept while the source stays not Ready
    (ready,) = [c for c in world.rows[3].conditions or () if c.type == "Ready"]
    assert ready.reason == "MigrationExpired"


def test_an_expiry_restores_a_healthy_source_as_it_was() -> None:
    world = converged()
    world.annotations[KEY] = request()
    _run_to(world, "SurgePending")
    for _ in range(40):
        for name, pod in list(world.pods.items()):
            if pod.index == 4 and not pod.terminating:
                world.pods[name] = dataclasses.replace(
                    pod, node="node-a", phase="Running", containers_ready=False, ready=False
                )
        world.apply(world.plan(settings()))
        world.now += dt.timedelta(seconds=60)
        if world.record().phase == "Failed":
            break
    assert world.record().phase == "Failed"
    assert world.rows[3].last_failure is None


def test_a_surge_create_refused_for_good_fails_the_request_and_restores_the_source() -> None:
    world = converged()
    world.annotations[KEY] = request()
    world.apply(world.plan(settings()))  # accepted
    message = 'Pod "chat-engine-4-default-0" is invalid: spec.containers[0].image: Required value'
    refusal = CreateRefusal(
        token="InvalidPodSpec", pod="chat-engine-4-default-0", message=message, permanent=True
    )
    first = world.plan(settings())
    assert first.of_type(CreatePods)
    world.apply(dataclasses.replace(first, actions=_status_only(first)))  # the create refused
    assert world.record().phase == "SurgePending"
    observed = dataclasses.replace(world.observed(), refused={4: refusal})
    decided = plan(target=world.spec, observed=observed, settings=settings(), now=world.now)
    assert not decided.of_type(CreatePods)
    world.apply(decided)
    record = world.record()
    expected = (
        "surge pod chat-engine-4-default-0 rejected by the apiserver (InvalidPodSpec): " + message
    )
    assert (record.phase, record.message) == ("Failed", expected)
    assert world.events_of("MigrationRequestRejected") == [
        f"OMENative migration uuid={UUID} rejected: {expected}"
    ]
    assert not world.events_of("MigrationSurgeCreateBlocked")
    world.run(3)
    assert sorted(world.rows) == [0, 1, 2, 3]
    assert world.rows[3].phase == "Ready" and world.rows[3].operation is None
    assert world.ledger[(UUID, "node-d maintenance")]["outcome"] == expected


def _parked_world(fleet: LifecycleConfig = FLEET) -> MoveWorld:
    """A migration Draining whose source pod's kubelet never confirms the delete."""
    world = converged(spec_for(fleet))
    world.undeletable.add("chat-engine-3-default-0")
    world.annotations[KEY] = request()
    _run_to(world, "Draining")
    world.run(10)
    return world


def test_a_source_terminating_past_its_deadline_parks_the_record() -> None:
    world = _parked_world()
    record = world.record()
    assert record.phase == "Draining"
    parked = (
        "source drain parked: Terminating past their deletion deadline: chat-engine-3-default-0"
    )
    assert record.message == parked
    assert world.events_of("MigrationParked") == [
        f"OMENative migration uuid={UUID} parked: {parked}; surge instance=4 keeps serving"
    ]
    world.now += dt.timedelta(hours=1)  # past the deadline: the serving surge is kept
    other = "0aaaaaaa-7425-40de-944b-e07fc1f90ae7"
    world.annotations[f"ome.io/migration-request-v1-{other}"] = request(
        instance=1, from_node="node-b"
    )
    world.run(30)
    assert world.record().phase == "Draining"
    assert len(world.events_of("MigrationParked")) == 1
    later = next(r for r in world.status.migrations or () if r.request_uuid == other)
    assert later.phase == "Completed"  # dispatched ahead of the parked record
    assert world.rows[4].operation is not None  # the surge still waits to take over
    world.undeletable.clear()
    world.run(5)
    assert world.record().phase == "Completed"


def test_a_source_pod_its_kubelet_is_removing_does_not_park_the_record() -> None:
    """The kubelet's confirming delete moves the source pod's deletionTimestamp to that
    moment, already past at the next pass; the pod is removed, so the record stays
    ``source draining`` and completes, with no MigrationParked."""
    world = converged()
    source = "chat-engine-3-default-0"
    world.undeletable.add(source)
    world.annotations[KEY] = request()
    _run_to(world, "Draining")
    for _ in range(5):
        if source in world.pods and world.pods[source].terminating:
            world.pods[source] = dataclasses.replace(
                world.pods[source], deleted_at=world.now - dt.timedelta(seconds=1), removed=True
            )
        world.apply(world.plan(settings()))
        assert world.record().message == "source draining"
        world.now += dt.timedelta(seconds=1)
    world.undeletable.clear()
    world.run(5)
    assert world.record().phase == "Completed"
    assert not world.events_of("MigrationParked")


def test_with_force_deletes_configured_a_parked_record_expires() -> None:
    fleet = dataclasses.replace(
        FLEET, force_delete=ForceDeleteConfig(overdueSlack="30s", nodeUnreachableThreshold="1m")
    )
    world = _parked_world(fleet)
    world.now += dt.timedelta(hours=1)
    world.run(2)
    record = world.record()
    assert (record.phase, record.message) == (
        "Failed",
        "deadline exceeded in phase Draining: source drain incomplete",
    )


def test_which_create_refusals_are_for_good() -> None:
    assert permanent_refusal(422, 'Pod "p" is invalid: spec') == "InvalidPodSpec"
    terminating = "unable to create new content in namespace x because it is being terminated"
    assert permanent_refusal(403, terminating) == "NamespaceTerminating"
    assert permanent_refusal(403, "forbidden", ("NamespaceTerminating",)) == "NamespaceTerminating"
    assert permanent_refusal(403, "exceeded quota: q") is None
    assert permanent_refusal(500, "boom") is None


def _relocating_world(*, mode: str = "Auto", budget: int = 2) -> MoveWorld:
    fleet = dataclasses.replace(
        FLEET,
        stuck_pod_grace_period=60.0,
        auto_migrate=AutoMigrateConfig(maxAttempts=budget),
    )
    world = converged(spec_for(fleet, migration_mode=mode))
    world.spec = dataclasses.replace(world.spec, replicas=5)
    return world


def _run_stuck_on(world: MoveWorld, bad: set[str], passes: int) -> None:
    """Pods of Instance 4 on a ``bad`` node never start (RunContainerError: not the image's
    fault, so it may be the node's)."""
    for _ in range(passes):
        world.step(settings())
        for name, pod in list(world.pods.items()):
            if pod.index == 4 and pod.node in bad and not pod.terminating:
                stall = pod.stall or PodStall(
                    kind="Stuck", reason="RunContainerError", since=world.now
                )
                world.pods[name] = dataclasses.replace(
                    pod, containers_ready=False, ready=False, stall=stall
                )
        world.now += dt.timedelta(seconds=10)


def _relocations(world: MoveWorld) -> list[MigrationStatus]:
    return [r for r in world.status.migrations or () if r.phase == "Relocated"]


def test_a_create_stuck_on_one_node_is_rebuilt_elsewhere_until_the_budget_runs_out() -> None:
    world = _relocating_world()
    _run_stuck_on(world, {"node-a", "node-b", "node-c"}, 60)
    first, second = sorted(_relocations(world), key=lambda r: r.attempt or 0)
    assert (first.trigger, first.attempt, first.from_node) == ("Auto", 1, "node-a")
    assert (second.attempt, second.from_node) == (2, "node-b")
    assert first.reason == "AutoRecover" and first.surge_instance is None
    assert first.message == "relocation directive recorded; rebuild steered off node node-a"
    assert first.started_at == first.completed_at == first.deadline
    assert world.events_of("AutoMigrationTriggered") == [
        f"OMENative component=engine instance=4 relocation directive recorded: attempt 1/2, "
        f"rebuild steered off node node-a (uuid={first.request_uuid})",
        f"OMENative component=engine instance=4 relocation directive recorded: attempt 2/2, "
        f"rebuild steered off node node-b (uuid={second.request_uuid})",
    ]
    assert world.events_of("AutoMigrationCapReached") == [
        "OMENative component=engine instance=4 relocation budget exhausted (2/2 attempts); "
        "further expiries dispose terminal without relocation"
    ]
    (pod,) = [p for p in world.pods.values() if p.index == 4]
    assert pod.node == "node-c"  # kept off both suspects
    assert _excluded(world.bodies[pod.name]) == {"node-a", "node-b"}
    assert world.rows[4].operation is None  # the third failure: the budget is spent
    rows = [world.ledger[(r.request_uuid, "AutoRecover")] for r in (first, second)]
    assert [(r["phase"], r["outcome"], r["fromNode"]) for r in rows] == [
        ("Completed", "relocate-recreate", "node-a"),
        ("Completed", "relocate-recreate", "node-b"),
    ]


def test_a_relocated_instance_that_gets_ready_confirms_its_record() -> None:
    world = _relocating_world()
    _run_stuck_on(world, {"node-a"}, 30)
    (record,) = _relocations(world)
    assert record.succeeded is True
    (pod,) = [p for p in world.pods.values() if p.index == 4]
    assert pod.node == "node-b" and world.rows[4].phase == "Ready"


def test_mode_never_turns_relocation_off() -> None:
    world = _relocating_world(mode="Never")
    _run_stuck_on(world, {"node-a", "node-b"}, 30)
    assert not _relocations(world)
    assert not world.events_of("AutoMigrationTriggered")
    (pod,) = [p for p in world.pods.values() if p.index == 4]
    assert pod.node == "node-a"  # the failed attempt's pod stays where it is


def test_an_image_that_cannot_be_pulled_is_not_relocated() -> None:
    world = _relocating_world()
    for _ in range(20):
        world.step(settings())
        for name, pod in list(world.pods.items()):
            if pod.index == 4 and not pod.terminating:
                stall = pod.stall or PodStall(
                    kind="Stuck", reason="ImagePullBackOff", since=world.now
                )
                world.pods[name] = dataclasses.replace(
                    pod, containers_ready=False, ready=False, stall=stall
                )
        world.now += dt.timedelta(seconds=10)
    assert not _relocations(world)


NEW = "chat-engine-7f9c4d2b"


def _updating_world(*, runners: tuple[tuple[str, int], ...] = (("default", 1),)) -> MoveWorld:
    """Four Ready Instances (Instance i on NODES[i]) whose spec moves to revision ``NEW``
    (RecreatePod), stuck pods failing at the 60 s grace, a relocation budget of 2."""
    fleet = dataclasses.replace(
        FLEET, stuck_pod_grace_period=60.0, auto_migrate=AutoMigrateConfig(maxAttempts=2)
    )
    base = dataclasses.replace(target(4, runners=runners), fleet=fleet)
    world = MoveWorld(base)
    for index in range(4):
        world.add(instance(base, index, node=NODES[index]))
    world.run(3)
    assert all(row.phase == "Ready" for row in world.rows.values())
    world.spec = dataclasses.replace(
        base,
        update_revision=NEW,
        update=UpdatePolicy(strategy="RecreatePod", ready_timeout=1800.0),
    )
    return world


def _run_update_stuck_on(world: MoveWorld, bad: str, passes: int, *, spared: int | None) -> None:
    """Pods on ``NEW`` that land on ``bad`` never start (RunContainerError), except those of
    Instance ``spared``."""
    for _ in range(passes):
        world.step(settings())
        for name, pod in list(world.pods.items()):
            if (
                (pod.revision, pod.node) == (NEW, bad)
                and pod.index != spared
                and not pod.terminating
            ):
                stall = pod.stall or PodStall(
                    kind="Stuck", reason="RunContainerError", since=world.now
                )
                world.pods[name] = dataclasses.replace(
                    pod, containers_ready=False, ready=False, stall=stall
                )
        world.now += dt.timedelta(seconds=10)


def test_a_single_pod_update_stuck_on_one_node_is_rebuilt_off_it() -> None:
    world = _updating_world()
    _run_update_stuck_on(world, "node-a", 150, spared=3)  # Instance 3 goes first: it serves NEW
    assert {row.index: row.running_revision for row in world.rows.values()} == {
        i: NEW for i in range(4)
    }
    assert all(row.phase == "Ready" and row.operation is None for row in world.rows.values())
    relocated = sorted(_relocations(world), key=lambda r: r.source_instance)
    assert [(r.source_instance, r.attempt, r.from_node) for r in relocated] == [
        (0, 1, "node-a"),
        (1, 1, "node-a"),
        (2, 1, "node-a"),
    ]
    assert all(r.succeeded is True and r.trigger == "Auto" for r in relocated)
    for index in (0, 1, 2):
        (pod,) = [p for p in world.pods.values() if p.index == index]
        assert pod.node != "node-a" and "node-a" in _excluded(world.bodies[pod.name])
    assert not world.status.retry_blocks  # the node was the suspect, not the revision
    assert [world.ledger[(r.request_uuid, "AutoRecover")]["revision"] for r in relocated] == [
        NEW
    ] * 3
    assert len(world.events_of("AutoMigrationTriggered")) == 3
    assert world.events_of("AutoMigrationTriggered")[0] == (
        "OMENative component=engine instance=2 relocation directive recorded: attempt 1/2, "
        f"rebuild steered off node node-a (uuid={relocated[2].request_uuid})"
    )


def test_an_update_to_a_revision_that_never_served_is_not_relocated() -> None:
    world = _updating_world()
    _run_update_stuck_on(world, "node-a", 12, spared=None)  # the first attempt fails at once
    assert not _relocations(world)
    (block,) = world.status.retry_blocks or ()
    assert (block.target_revision, block.reason) == (NEW, "RunContainerError")
    assert (block.attempts_started or 0) >= 1  # charged to the revision's ladder


def test_a_multi_pod_update_is_not_relocated() -> None:
    world = _updating_world(runners=(("leader", 1), ("worker", 1)))
    _run_update_stuck_on(world, "node-a", 150, spared=3)
    assert not _relocations(world)
    assert world.status.retry_blocks
