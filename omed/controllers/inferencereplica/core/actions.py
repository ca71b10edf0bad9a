"""What a pass decided to do: the planner's output, the executor's input.

Why: the planner decides and the executor acts, so the decision must be a value that tests
can read. Each action is a frozen dataclass that names its target precisely (a pod by name
*and* uid, so an action never hits a newer pod of the same name).

Invariant of a :class:`Plan`: every operation that a pod action belongs to is already in
``rows``; the executor writes ``WriteStatus`` before any pod action, and skips every pod
action when that write fails, so no side effect ever runs ahead of its durable record.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, TypeVar

from omed.api.inferencereplica import InferenceReplicaStatus, InstanceStatus
from omed.config import BatchSize
from omed.controllers.inferencereplica.core.migrationactions import (
    ConsumeMigrationRequests,
    WriteAuditRow,
)
from omed.controllers.inferencereplica.core.objectrefs import ObjectRef
from omed.controllers.inferencereplica.core.podgroupactions import PodGroupWrite
from omed.controllers.inferencereplica.core.revisionactions import RevisionWrite

T = TypeVar("T")


RETRY_SOON: Final = 1.0
"""Seconds before looking again after a step was skipped for safety or lost a race, or
after a change the next pass must write (a refusal to record, a condition to remove)."""
REFUSED_RETRY: Final = 5.0
"""Seconds between pod creates refused by quota or an unreachable webhook (no watch event
tells when the quota or the webhook comes back)."""


@dataclass(frozen=True, slots=True)
class PodRef(ObjectRef):
    """A pod by name and uid."""


@dataclass(frozen=True, slots=True)
class ReplicaWrite:
    """A write of the InferenceReplica object itself (its metadata or its status), as opposed
    to the pod actions (:class:`InstanceAction`) and events."""


@dataclass(frozen=True, slots=True)
class AddFinalizer(ReplicaWrite):
    """Put omed's finalizer on the InferenceReplica before it owns any pod."""


@dataclass(frozen=True, slots=True)
class WriteStatus(ReplicaWrite):
    """Replace the InferenceReplica's status: the summary and the rows (through the seam)."""

    status: InferenceReplicaStatus
    """The new status without rows; the executor encodes ``rows`` into it."""
    rows: tuple[InstanceStatus, ...]
    paceable: bool = False
    """Only observation moved (pod counts, steps of the same operations, messages): nothing
    is recorded ahead of a pod creation, deletion or image patch (gates need no record), no
    count a parent reads for readiness changed, no condition flipped, and the only events due
    are InstanceCreated (read off the stored rows, so the pass that writes reports them). The
    core may hold such a write back a moment (:mod:`.pacing`) and let a later pass carry
    it."""


@dataclass(frozen=True, slots=True)
class PodToCreate:
    """One pod of a :class:`CreatePods`."""

    name: str
    """``<irep>-<index>-<runner>-<ordinal>``: a repeated create meets AlreadyExists."""
    body: Mapping[str, Any]
    """The full Pod object to POST."""


@dataclass(frozen=True, slots=True)
class InstanceAction:
    """An action on the pods of one Instance: what its log lines and held creates name."""

    index: int
    """The Instance's index; -1 for pods of no Instance (left over, being drained)."""


@dataclass(frozen=True, slots=True)
class OperationAction(InstanceAction):
    """A pod action of an operation, which the Instance's row records before it runs."""

    operation_id: str
    """The operation's id (``ome.io/operation-id`` on the pods it creates); empty where no row
    records one (pods left by an earlier replica, the teardown of one that can't be read)."""


@dataclass(frozen=True, slots=True)
class CreatePods(OperationAction):
    """Create the missing pods of one Instance (all of them, in this pass), for its Create,
    Update or Restart."""

    pods: tuple[PodToCreate, ...]


@dataclass(frozen=True, slots=True)
class SetServingGate(InstanceAction):
    """Set the ome.io/serving readiness-gate condition of one pod."""

    pod: PodRef
    serving: bool
    reason: str


@dataclass(frozen=True, slots=True)
class DeletePods(OperationAction):
    """Delete every live pod of one draining Instance, each only if it is still not routed."""

    pods: tuple[PodRef, ...]
    service: str | None = None
    """The traffic Service whose EndpointSlices are read live before the delete: no pod is
    deleted while one lists it as a ready endpoint. None: the Service has no slices."""


@dataclass(frozen=True, slots=True)
class PatchPodImages(OperationAction):
    """Change the container images (and the revision label) of one live pod, in place.

    ``containers`` are (position in spec.containers, name, image); the patch tests the
    pod's uid and each container's name first, so it never hits a newer pod of the name.
    """

    pod: PodRef
    revision: str
    containers: tuple[tuple[int, str, str], ...]


@dataclass(frozen=True, slots=True)
class RemoveReleaseAnnotation(ReplicaWrite):
    """Delete ome.io/release-held-revision from the InferenceReplica (a metadata patch),
    only while it still holds ``value``."""

    value: str


@dataclass(frozen=True, slots=True)
class RemoveFinalizer(ReplicaWrite):
    """The InferenceReplica is being deleted and no pod of it is left (a fresh list must
    show none), or, ``lifted``, its ``teardown.deadline`` passed: the finalizer goes with
    whatever is left, which the TeardownDeadlineExceeded event names."""

    lifted: bool = False


@dataclass(frozen=True, slots=True)
class ForceDeletePod(InstanceAction):
    """Delete a pod stuck Terminating on a dead node with grace 0 and a uid precondition
    (:mod:`.escalation`), once a fresh read of the pod and its node still shows it due; its
    audit row is written first, its event after."""

    pod: PodRef
    node: str | None
    cause: str
    """Why its node is dead: node-gone, node-unreachable-taint or node-not-ready."""
    revision: str | None
    overdue_slack: float
    node_unreachable_threshold: float | None
    event: RecordEvent
    """PodForceDeleted, recorded once the delete is sent."""


@dataclass(frozen=True, slots=True)
class RecordEvent:
    """A Kubernetes Event, on the parent InferenceService or the standalone replica."""

    type: str
    """Normal or Warning (:mod:`omed.api.events`)."""
    reason: str
    message: str


Action = (
    AddFinalizer
    | WriteAuditRow
    | ConsumeMigrationRequests
    | RevisionWrite
    | WriteStatus
    | CreatePods
    | SetServingGate
    | DeletePods
    | RemoveFinalizer
    | ForceDeletePod
    | RecordEvent
    | PatchPodImages
    | RemoveReleaseAnnotation
    | PodGroupWrite
)


@dataclass(frozen=True, slots=True)
class ScaleDownWave:
    """One pass of a scale-down: what the ``OMENative scale-down wave`` line reports."""

    configured_pod_budget: BatchSize | None
    pod_budget: int | None
    """The budget resolved against the footprint; None when unbounded."""
    pod_footprint: int
    active_instances: tuple[int, ...]
    """Indexes of the Instances the wave drives (Delete operations in flight)."""
    deferred_instances: tuple[int, ...]
    """Indexes of the Instances held back for later passes."""
    started_instances: tuple[int, ...]
    """Indexes whose Delete operation starts in this pass (a subset of the active ones)."""

    def log_values(self) -> dict[str, Any]:
        """The key-values of the log line."""
        configured = self.configured_pod_budget
        return {
            "configuredPodBudget": (
                configured if configured is None or isinstance(configured, int) else str(configured)
            ),
            "podBudget": self.pod_budget,
            "podFootprint": self.pod_footprint,
            "activeInstances": len(self.active_instances),
            "deferredInstances": len(self.deferred_instances),
        }


@dataclass(frozen=True, slots=True)
class Plan:
    """The outcome of one planning pass."""

    actions: tuple[Action, ...]
    rows: tuple[InstanceStatus, ...]
    status: InferenceReplicaStatus
    """The new status summary (rows not included)."""
    requeue_after: float | None = None
    wave_log: ScaleDownWave | None = None

    def of_type(self, kind: type[T]) -> list[T]:
        """The actions of one type, in order."""
        return [action for action in self.actions if isinstance(action, kind)]
