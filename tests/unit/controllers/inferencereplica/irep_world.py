"""Builders and a pure in-memory world for the InferenceReplica planner's unit tests.

:class:`World` holds pods as :class:`PodView` values and the stored rows, applies a plan the
way the executor and a kubelet would (status first, then gates, creations, deletions), and
moves pods along (created -> running with containers ready -> Ready when the gate is True;
Terminating -> gone) one :meth:`World.tick` at a time. Nothing sleeps; time is a field.

:meth:`World.decide` and :meth:`World.pass_` drive the whole core instead of the planner
alone, as the shell does: the clock's monotonic reading and "busy" are fields, the key's
:class:`KeyMemory` is kept between passes and handed back through ``settle``, the status is
stored in the form the manager's ``omenativeStatus`` settings choose (so conversion is
decided by the core), and pods no controller owns (raw JSON, as the cache has them) are
adopted the way the shell adopts them, once the core has put the finalizer on.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Iterable
from typing import Any

from omed.api.inferencereplica import InferenceReplicaStatus, InstanceStatus
from omed.config import BatchSize, Percent
from omed.controllers.inferencereplica.core import orphans
from omed.controllers.inferencereplica.core.actions import (
    AddFinalizer,
    CreatePods,
    DeletePods,
    Plan,
    SetServingGate,
    WriteStatus,
)
from omed.controllers.inferencereplica.core.conversion import StoredForm
from omed.controllers.inferencereplica.core.decide import (
    Decision,
    PassInput,
    PassReport,
    decide,
    settle,
)
from omed.controllers.inferencereplica.core.encoding import StatusEncodingSettings, status_write
from omed.controllers.inferencereplica.core.memory import EMPTY, KeyMemory
from omed.controllers.inferencereplica.core.model import (
    ObservedState,
    ParentRef,
    PlanSettings,
    PodView,
    ReplicaTarget,
    RunnerShape,
)
from omed.controllers.inferencereplica.core.observe import pod_revision
from omed.controllers.inferencereplica.core.plan import plan
from omed.controllers.inferencereplica.core.status import status_body

NOW = dt.datetime(2026, 9, 14, 20, 0, 0, tzinfo=dt.UTC)
TEMPLATE = {"spec": {"containers": [{"name": "ome-container", "image": "ome/serving:1.0"}]}}
REVISION = "chat-engine-6c4f8b1d"


def target(
    replicas: int = 4,
    *,
    runners: Iterable[tuple[str, int]] = (("default", 1),),
    paused: bool = False,
    deleting: bool = False,
    has_finalizer: bool = True,
    ready_policy: str = "AllPodReady",
    min_ready_seconds: int = 0,
    parent: str | None = "chat",
) -> ReplicaTarget:
    return ReplicaTarget(
        namespace="prod",
        name="chat-engine",
        uid="irep-uid",
        generation=3,
        isvc=parent or "chat-engine",
        component="engine",
        parent=ParentRef(parent, "isvc-uid") if parent else None,
        replicas=replicas,
        runners=tuple(RunnerShape(name, size, TEMPLATE) for name, size in runners),
        update_revision=REVISION,
        paused=paused,
        deleting=deleting,
        has_finalizer=has_finalizer,
        ready_policy=ready_policy,  # type: ignore[arg-type]
        min_ready_seconds=min_ready_seconds,
    )


def pod(
    spec: ReplicaTarget,
    index: int,
    runner: str = "default",
    ordinal: int = 0,
    *,
    ready: bool = True,
    serving: bool | None = None,
    containers_ready: bool | None = None,
    terminating: bool = False,
    node: str | None = "sim-node-0",
    incarnation: int = 1,
    failing: bool = False,
) -> PodView:
    name = f"{spec.name}-{index}-{runner}-{ordinal}"
    return PodView(
        name=name,
        uid=f"uid-{name}-{incarnation}",
        index=index,
        runner=runner,
        ordinal=ordinal,
        incarnation=incarnation,
        revision=spec.update_revision,
        terminating=terminating,
        node=node,
        phase="Running" if node else "Pending",
        ready=ready,
        ready_since=NOW - dt.timedelta(minutes=5) if ready else None,
        containers_ready=ready if containers_ready is None else containers_ready,
        serving=(True if ready else None) if serving is None else serving,
        failing=failing,
    )


def instance(spec: ReplicaTarget, index: int, **kw: object) -> list[PodView]:
    """Every pod Instance ``index`` should have, built with ``pod``'s keywords."""
    return [
        pod(spec, index, slot.runner, slot.ordinal, **kw)  # type: ignore[arg-type]
        for slot in spec.slots(index)
    ]


def settings(
    up: BatchSize | str | None = None,
    down: BatchSize | str | None = None,
    interval: float | None = 5.0,
) -> PlanSettings:
    def parse(value: BatchSize | str | None) -> BatchSize | None:
        if isinstance(value, str):
            return Percent(int(value.removesuffix("%")))
        return value

    return PlanSettings(
        scale_up_pod_batch_size=parse(up),
        scale_down_pod_batch_size=parse(down),
        scale_down_requeue_interval=interval,
    )


@dataclasses.dataclass
class World:
    """Pods and stored status of one InferenceReplica; see the module docstring."""

    spec: ReplicaTarget
    pods: dict[str, PodView] = dataclasses.field(default_factory=dict)
    rows: dict[int, InstanceStatus] = dataclasses.field(default_factory=dict)
    status: InferenceReplicaStatus = dataclasses.field(default_factory=InferenceReplicaStatus)
    now: dt.datetime = NOW
    uids: int = 0
    deleted: list[str] = dataclasses.field(default_factory=list)
    created: list[str] = dataclasses.field(default_factory=list)
    already_exists: int = 0
    monotonic: float = 1000.0
    """The clock's monotonic reading (the status pace counts on it)."""
    busy: bool = False
    memory: KeyMemory = EMPTY
    encoding: StatusEncodingSettings = dataclasses.field(default_factory=StatusEncodingSettings)
    """The manager's omenativeStatus settings: the form a status write stores."""
    stored: dict[str, Any] | None = None
    """The status as stored (rows in their stored form); None before the first write."""
    version: int = 1
    """The replica's resourceVersion: moves with every stored write."""
    unowned: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    """Pods in the cache that no controller owns (raw JSON), by name."""
    status_writes: list[tuple[float, bool]] = dataclasses.field(default_factory=list)
    """(monotonic time, busy) of every status write stored."""

    def add(self, pods: Iterable[PodView]) -> World:
        for item in pods:
            self.pods[item.name] = item
        return self

    def observed(self) -> ObservedState:
        grouped: dict[int, list[PodView]] = {}
        for item in self.pods.values():
            grouped.setdefault(item.index, []).append(item)
        return ObservedState(
            pods={i: tuple(sorted(v, key=lambda p: p.name)) for i, v in grouped.items()},
            rows=dict(self.rows),
            status=self.status,
        )

    def plan(self, config: PlanSettings | None = None) -> Plan:
        return plan(
            target=self.spec, observed=self.observed(), settings=config or settings(), now=self.now
        )

    def apply(self, decided: Plan, *, status_fails: bool = False) -> None:
        """What the executor does with ``decided`` (no pod action when the status write fails)."""
        for write in decided.of_type(WriteStatus):
            if status_fails:
                return
            self.rows = {row.index: row for row in write.rows}
            self.status = write.status
        for gate in decided.of_type(SetServingGate):
            current = self.pods.get(gate.pod.name)
            if current is not None and current.uid == gate.pod.uid:
                self.pods[current.name] = dataclasses.replace(current, serving=gate.serving)
        for create in decided.of_type(CreatePods):
            for item in create.pods:
                if item.name in self.pods:
                    self.already_exists += 1
                    continue
                labels = item.body["metadata"]["labels"]
                self.uids += 1
                self.created.append(item.name)
                self.pods[item.name] = PodView(
                    name=item.name,
                    uid=f"u{self.uids}",
                    index=int(labels["ome.io/instance-index"]),
                    runner=item.name.split("-")[-2],
                    ordinal=int(item.name.split("-")[-1]),
                    incarnation=int(labels["ome.io/instance-incarnation"]),
                    revision=pod_revision(labels),
                    operation_id=create.operation_id,
                )
        for delete in decided.of_type(DeletePods):
            for ref in delete.pods:
                current = self.pods.get(ref.name)
                assert current is not None and current.uid == ref.uid
                assert not current.ready and current.serving is not True, ref
                self.deleted.append(ref.name)
                self.pods[ref.name] = dataclasses.replace(current, terminating=True)

    def decide(self, config: PlanSettings | None = None) -> Decision:
        """What the core decides for the world as the shell would show it."""
        cached = orphans.adoptable(self.spec, self.unowned)
        return decide(
            PassInput(
                target=self.spec,
                observed=self.observed(),
                settings=config or settings(),
                now=self.now,
                monotonic=self.monotonic,
                busy=self.busy,
                memory=self.memory,
                stored=StoredForm(
                    version=str(self.version), status=self.stored, settings=self.encoding
                ),
                adoptable=bool(cached),
            )
        )

    def store(self, decided: Plan) -> bool:
        """The executor's side of ``decided``: the finalizer, the status in the form the
        settings choose, then the pod actions; True when a status write was stored."""
        if decided.of_type(AddFinalizer):
            self.spec = dataclasses.replace(self.spec, has_finalizer=True)
            self.version += 1
        writes = decided.of_type(WriteStatus)
        for write in writes:
            rows = [row.to_dict() for row in sorted(write.rows, key=lambda row: row.index)]
            chosen = status_write(
                status_body(write.status, ()), rows, stored=self.stored, settings=self.encoding
            )
            self.stored = chosen.status
            self.version += 1
            self.status_writes.append((self.monotonic, self.busy))
        self.apply(decided)
        return bool(writes)

    def adopt(self) -> list[str]:
        """The shell's adoption (after the core put the finalizer on): the adoptable pods
        become the replica's, running as the cache showed them."""
        if not self.spec.has_finalizer:
            return []
        taken = orphans.adoptable(self.spec, self.unowned)
        names = {str(pod["metadata"]["name"]) for pod in taken}
        for pod in taken:
            meta = pod["metadata"]
            labels = meta["labels"]
            runner, ordinal = meta["name"].rsplit("-", 2)[-2:]
            self.pods[meta["name"]] = PodView(
                name=meta["name"],
                uid=meta["uid"],
                index=int(labels["ome.io/instance-index"]),
                runner=runner,
                ordinal=int(ordinal),
                incarnation=int(
                    labels.get("ome.io/instance-incarnation", labels.get("ome.io/incarnation", "1"))
                ),
                revision=pod_revision(labels),
                node="sim-node-0",
                phase="Running",
                containers_ready=True,
                ready=True,
                serving=True,
                ready_since=self.now,
            )
        self.unowned = [pod for pod in self.unowned if pod["metadata"]["name"] not in names]
        return sorted(names)

    def pass_(self, config: PlanSettings | None = None, *, seconds: float = 1.0) -> Decision:
        """One reconcile as the shell runs it (adopt, decide, store, settle), then a tick."""
        if self.adopt():
            self.tick(seconds)
            return Decision(plan=Plan(actions=(), rows=(), status=self.status), memory=self.memory)
        decision = self.decide(config)
        stored = self.store(decision.plan)
        report = PassReport(status_stored=stored, monotonic=self.monotonic)
        self.memory = settle(decision.memory, decision.plan, report).memory
        self.tick(seconds)
        return decision

    def tick(self, seconds: float = 1.0) -> None:
        """A kubelet step: Terminating pods go, new pods run, Ready follows gate and containers."""
        self.now += dt.timedelta(seconds=seconds)
        self.monotonic += seconds
        for name, item in list(self.pods.items()):
            if item.terminating:
                del self.pods[name]
                continue
            containers = True
            ready = containers and item.serving is True
            self.pods[name] = dataclasses.replace(
                item,
                node=item.node or "sim-node-0",
                phase="Running",
                containers_ready=containers,
                ready=ready,
                ready_since=(item.ready_since or self.now) if ready else None,
            )

    def step(self, config: PlanSettings | None = None) -> Plan:
        decided = self.plan(config)
        self.apply(decided)
        self.tick()
        return decided

    def live(self) -> list[PodView]:
        return [item for item in self.pods.values() if not item.terminating]
