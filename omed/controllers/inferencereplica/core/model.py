"""What the planner sees: the desired InferenceReplica, its pods and its previous rows.

Why: the planner is a pure function and must be testable without an API server or a cache.
Its inputs are these frozen dataclasses, built once per pass by :mod:`.observe` from the
informer caches (JSON dicts stop at that boundary) and built by hand in unit tests.

Invariants:

* a :class:`PodView` holds only facts read from one version of one pod: nothing here is
  derived from time or from other pods;
* a :class:`ReplicaTarget` holds the desired state and the identity the controller writes on
  its pods; defaults that the user left out are resolved here (``readyPolicy`` AllPodReady,
  runner size 1), so the planner never guesses;
* pods are grouped by the ``ome.io/instance-index`` label; pods of the InferenceReplica that
  lack a usable index are kept apart in ``ObservedState.stray_pods`` and never acted on.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from omed.api.inferencereplica import InferenceReplicaStatus, InstanceStatus
from omed.api.lifecyclechoices import MigrationMode, ReadyPolicy
from omed.config import BatchSize, LifecycleScaleConfig
from omed.config.lifecycle import LifecycleConfig
from omed.controllers.inferencereplica.core.migrationactions import Mailbox
from omed.controllers.inferencereplica.core.names import RUNNER_ORDER, pod_name
from omed.controllers.inferencereplica.core.objectrefs import ObjectRef
from omed.controllers.inferencereplica.core.podgroupactions import PodGroupView
from omed.controllers.inferencereplica.core.policy import (
    DEFAULT_REVISION_HISTORY_LIMIT,
    UpdatePolicy,
)
from omed.controllers.refusedwrite import RefusedWrite

DEFAULT_SCALE_UP_REQUEUE: float = 1.0
"""Seconds before the next scale-up batch is looked at when no pod event comes first."""


@dataclass(frozen=True, slots=True)
class ContainerFailure:
    """The failure a pod shows now or showed last."""

    container: str
    reason: str
    """The waiting reason (CrashLoopBackOff, ImagePullBackOff, ...) or the termination's."""
    exit_code: int | None = None
    time: dt.datetime | None = None
    """The container's ``finishedAt``, when it reports one."""


StallKind = Literal["Stuck", "Unschedulable"]


@dataclass(frozen=True, slots=True)
class PodStall:
    """What keeps a pod from coming up by itself, and since when: read off the pod alone,
    so every pass and every leader reads the same time (the graces of :mod:`.graces`)."""

    kind: StallKind
    """Stuck: a container waits in a terminal kubelet reason; Unschedulable: no node fits."""
    reason: str
    """The kubelet's waiting reason (ErrImagePull read as ImagePullBackOff), or Unschedulable."""
    since: dt.datetime
    """Stuck: the pod's creation, or the last time its ContainersReady left True, whichever
    is later; Unschedulable: the PodScheduled condition's lastTransitionTime."""
    container: str = ""
    """The stuck container (Stuck only)."""
    message: str = ""
    """The scheduler's message (Unschedulable only), such as ``0/2 nodes are available: ...``."""


@dataclass(frozen=True, slots=True)
class PodView(ObjectRef):
    """One pod of the InferenceReplica, as the cache last saw it."""

    index: int
    runner: str | None = None
    ordinal: int | None = None
    incarnation: int | None = None
    revision: str | None = None
    operation_id: str | None = None
    resource_version: str = ""
    terminating: bool = False
    deleted_at: dt.datetime | None = None
    """The pod's deletionTimestamp: when its grace period ends (the kubelet should have
    confirmed the deletion by then)."""
    finalizers: tuple[str, ...] = ()
    removed: bool = False
    """Its deletion's grace is 0 and no finalizer holds it: the API server removed it in the
    request that set that grace (the kubelet's own confirmation, or a force delete), and its
    DELETED event follows. Terminating, but not waiting on anyone."""
    node: str | None = None
    phase: str | None = None
    ready: bool = False
    """The pod's Ready condition is True: Services route to it."""
    ready_since: dt.datetime | None = None
    """lastTransitionTime of the Ready condition while it is True."""
    containers_ready: bool = False
    serving: bool | None = None
    """The ome.io/serving condition: True, False, or None when the pod has none."""
    failing: bool = False
    """A container is crash-looping or can't start, or the pod has failed."""
    failure: ContainerFailure | None = None
    """The failure shown now, or the last termination of a restarted container."""
    restarts: int = 0
    """Sum of the restartCount of the pod's (non-init) containers."""
    images: tuple[tuple[str, str], ...] = ()
    """(container, image) of the pod's spec.containers, in order (in-place updates)."""
    runs_spec_images: bool = True
    """Every container's status reports the image its spec names (see :mod:`.images`): an
    in-place image patch has been acted on by the kubelet. Where a status can't tell (only a
    digest, or no status for a container yet), the kubelet has observed the pod's
    generation (``status.observedGeneration``), or that isn't reported either."""
    unschedulable: bool = False
    """PodScheduled is False with reason Unschedulable: no node fits it."""
    node_lost: bool = False
    """Its node stopped reporting: from the node cache (:func:`.nodes.with_node_facts`), its
    node is not Ready, tainted ``node.kubernetes.io/unreachable``, or gone; or the pod says so
    itself (Ready not True with reason NodeNotReady, or status reason NodeLost). The node
    lifecycle controller of Kubernetes 1.36 marks such pods Ready False with no reason, so
    the node cache is what finds them there."""
    stall: PodStall | None = None
    """What keeps the pod from coming up by itself, if anything does (see :class:`PodStall`)."""
    endpoint_ready: bool | None = None
    """What the EndpointSlices of the component's traffic Service say of the pod: True, a
    ready endpoint (traffic goes to it); False, listed but not ready; None, not listed (or the
    Service has no EndpointSlices)."""

    @property
    def routed(self) -> bool:
        """Whether traffic may reach the pod now or as soon as its containers are ready: its
        Ready condition or gate is True, or the traffic Service's EndpointSlices still list
        it as ready (they lag the pod's conditions). A pod is deleted only when neither
        holds."""
        return self.ready or self.serving is True or self.endpoint_ready is True


@dataclass(frozen=True, slots=True)
class CreateRefusal:
    """A pod create the API server refused for a reason that holds the operation, or (
    ``permanent``) for good."""

    token: str
    """The waiting token: QuotaExceeded or AdmissionUnavailable; for a permanent refusal, its
    class: InvalidPodSpec (422) or NamespaceTerminating."""
    pod: str
    message: str = ""
    permanent: bool = False
    """Sending the same pod again can only meet the same answer: a migration's surge fails
    on it; every other create is paced by the refused write's back-off as before."""


@dataclass(frozen=True, slots=True)
class RunnerShape:
    """One runner of every Instance: its name, pods per Instance and pod template."""

    name: str
    size: int
    """Pods of this runner per Instance (1 unless the spec says otherwise)."""
    template: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class PodSlot:
    """One pod an Instance should have."""

    runner: str
    ordinal: int
    """The pod's place among its runner's pods, from 0."""
    name: str


@dataclass(frozen=True, slots=True)
class ParentRef:
    """The InferenceService that events go to: name, and uid when the owner reference has it."""

    name: str
    uid: str | None = None


@dataclass(frozen=True, kw_only=True)
class ReplicaTarget:
    """The desired state of one InferenceReplica and the identity written on its pods."""

    namespace: str
    name: str
    uid: str
    generation: int
    isvc: str
    """Value of the ome.io/inferenceservice label: the parent's name, or the replica's own."""
    component: str
    parent: ParentRef | None
    replicas: int
    runners: tuple[RunnerShape, ...]
    update_revision: str
    revision_payload: bytes = b""
    """The update revision's payload, its ControllerRevision's ``data``: the pods are built
    from it (empty: from the runner templates, as hand-built targets in tests have it)."""
    legacy_revision: str | None = None
    """The name omed gave the current templates before upstream's hash: pods, rows, blocks and
    a release naming it mean the update revision."""
    hash_owner_uid: str = ""
    """The uid the revision hash is scoped to: the InferenceReplica's own, the owner of its
    ControllerRevisions. An InferenceService deleted with ``propagationPolicy: Orphan`` and
    made again adopts the same replica, so its pods keep their revision."""
    collision_count: int = 0
    """``status.collisionCount``: bumped when another object holds the update revision's name."""
    paused: bool = False
    deleting: bool = False
    deleted_at: dt.datetime | None = None
    """The replica's deletionTimestamp: when its teardown started (``teardown.deadline``)."""
    orphaning: bool = False
    """Deleted with ``propagationPolicy: Orphan`` (the collector's ``orphan`` finalizer is on):
    its pods are to be left running, not drained."""
    has_finalizer: bool = True
    ready_policy: ReadyPolicy = "AllPodReady"
    min_ready_seconds: int = 0
    update: UpdatePolicy = field(default_factory=UpdatePolicy)
    release_held: str | None = None
    """The ome.io/release-held-revision annotation, when set."""
    revision_history_limit: int = DEFAULT_REVISION_HISTORY_LIMIT
    """Revisions kept beyond the ones in use (:mod:`.revisions`): the replica's own
    ``revisionHistoryLimit``, else the ConfigMap's, else the default."""
    migration_mode: MigrationMode = "Auto"
    """``lifecycle.migrationPolicy.mode``: Never fails every manual request."""
    fleet: LifecycleConfig = field(default_factory=LifecycleConfig)
    """The fleet-wide ``lifecycle`` settings of this pass's config read: the graces,
    escalations and migration settings that no component field overrides."""

    @property
    def pods_per_instance(self) -> int:
        return sum(runner.size for runner in self.runners)

    def slots(self, index: int) -> tuple[PodSlot, ...]:
        """The pods Instance ``index`` should have, leader first."""
        ordered = sorted(
            self.runners,
            key=lambda r: RUNNER_ORDER.index(r.name) if r.name in RUNNER_ORDER else 99,
        )
        return tuple(
            PodSlot(runner.name, ordinal, pod_name(self.name, index, runner.name, ordinal))
            for runner in ordered
            for ordinal in range(runner.size)
        )

    def runner(self, name: str) -> RunnerShape | None:
        for runner in self.runners:
            if runner.name == name:
                return runner
        return None


@dataclass(frozen=True, kw_only=True)
class ObservedState:
    """The InferenceReplica's pods and previous status, read from the caches in one pass."""

    pods: Mapping[int, tuple[PodView, ...]] = field(default_factory=dict)
    rows: Mapping[int, InstanceStatus] = field(default_factory=dict)
    status: InferenceReplicaStatus = field(default_factory=InferenceReplicaStatus)
    """The previous status summary (rows are in ``rows``)."""
    stray_pods: tuple[PodView, ...] = ()
    service_routes: bool = False
    """The component's traffic Service has EndpointSlices: an Instance is in rotation only
    once they list one of its pods as ready. Without any, pods' own Ready conditions judge."""
    refused: Mapping[int, CreateRefusal] = field(default_factory=dict)
    """Instance index -> the last refusal of one of its pod creations (kept by the
    controller between passes; the API server's answer isn't in any cache)."""
    write_refused: RefusedWrite | None = None
    """A write the API server refused for good in the last pass that met one, kept by the
    controller until a pass completes without a refusal; the planner shows it as condition
    WriteRefused. Never the status write's own refusal (that write can't carry it)."""
    revisions: tuple[Any, ...] = ()
    """The replica's ControllerRevisions in the cache (:class:`~.revisions.RevisionView`)."""
    nodes: Mapping[str, Any] | None = None
    """The nodes of its pods by name (:class:`~.nodes.NodeView`), from the node cache; a name
    missing from the map is a node that is gone. None: no node cache (nothing is known of
    nodes, and nothing is judged from them)."""
    pod_groups: tuple[PodGroupView, ...] = ()
    """The replica's PodGroups in the cache (empty unless PodGroups are enabled)."""
    mailbox: Mailbox | None = None
    """The parent InferenceService's migration requests (None: no parent in the cache, or a
    standalone replica, which takes none)."""
    revision_payloads: Mapping[str, bytes] = field(default_factory=dict)
    """ControllerRevision name -> its ``data`` as JSON, for the replica's cached revisions: a
    migration's surge is built from its source's running revision."""

    def pods_of(self, index: int) -> tuple[PodView, ...]:
        return self.pods.get(index, ())


@dataclass(frozen=True, kw_only=True)
class PlanSettings:
    """The lifecycle batch settings (read once at startup) and the controller's own pacing."""

    scale_up_pod_batch_size: BatchSize | None = None
    scale_down_pod_batch_size: BatchSize | None = None
    scale_down_requeue_interval: float | None = None
    repair_batch_size: BatchSize | None = None
    """The manager-wide pace of crash-loop repairs (the entry's ``repairBatchSize``), for a
    component whose own ``lifecycle.repairBatchSize`` is unset; 1 when neither is set."""
    scale_up_requeue_interval: float = DEFAULT_SCALE_UP_REQUEUE
    pod_groups: bool = False
    """The PodGroup CRD (``podgroups.scheduling.x-k8s.io``) was present when the manager
    started: multi-pod Instances get PodGroups (:mod:`.podgroups`)."""

    @classmethod
    def from_config(cls, config: LifecycleScaleConfig, *, pod_groups: bool = False) -> PlanSettings:
        """The settings of the ``lifecycle`` entry (see ``StartupConfig.lifecycle_scale``)."""
        return cls(
            pod_groups=pod_groups,
            scale_up_pod_batch_size=config.scale_up_pod_batch_size,
            scale_down_pod_batch_size=config.scale_down_pod_batch_size,
            scale_down_requeue_interval=config.scale_down_requeue_interval,
            repair_batch_size=config.repair_batch_size,
        )
