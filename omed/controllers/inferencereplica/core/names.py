"""Every name the InferenceReplica controller writes: pod names, steps, reasons, log lines.

Why one module: pod names, operation steps, event reasons and the quoted log line are an
interface. Users grep for ``OMENative scale-down wave``, dashboards count ``InstanceReady``
events, a restarted manager finds its pods again by name and resumes an operation by its
step. So each string is spelled once, here, and tested.

Invariant: :func:`pod_name` is a pure function of (InferenceReplica, index, runner, ordinal).
A create repeated after a crash therefore asks for the same name and meets ``AlreadyExists``
instead of making a second pod. The incarnation is deliberately not part of the name: an
Instance is rebuilt only after all its previous pods are gone, so names never collide across
incarnations, and ``kubectl ome instance status`` shows the same names for every incarnation.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Final

from omed.api import constants
from omed.api.constants import FINALIZER_INFERENCE_REPLICA, LABEL_COMPONENT, LABEL_INFERENCE_SERVICE

FINALIZER: Final = FINALIZER_INFERENCE_REPLICA
"""Held while the InferenceReplica's pods exist; omed removes it once the last pod is gone."""

CONTROLLER_NAME: Final = "inferencereplica"
"""The workqueue and metrics name (controller-runtime uses the lower-case kind)."""

ANNOTATION_OPERATION_ID: Final = "ome.io/operation-id"
"""On pods: the id of the operation that created the pod (kept by the pod cache's transform,
which keeps ``ome.io/`` annotations). It ties a pod to the row that owns its creation."""

# -- Runners --------------------------------------------------------------------------------

RUNNER_ORDER: Final = ("leader", "default", "worker")
"""Creation order of an Instance's runners: a leader exists before its workers."""

# -- Operation steps ------------------------------------------------------------------------

STEP_CREATE_PODS: Final = "CreatePods"
"""Create: some of the Instance's pods are still to be created (or not yet observed)."""
STEP_WAIT_READY: Final = "WaitReady"
"""Create: every pod exists; the operation ends when the Instance is Ready."""
STEP_DRAIN: Final = "Drain"
"""Delete: the pods' ome.io/serving gates are being set False; waiting for Ready False."""
STEP_DELETE_PODS: Final = "DeletePods"
"""Delete: no pod is routed any more; the pods are being deleted."""
STEP_WAIT_PODS_GONE: Final = "WaitPodsGone"
"""Delete: every pod is Terminating; the operation ends when they are gone."""

STEP_SURGE_CREATE: Final = "SurgeCreate"
"""Update (SurgeThenDrain): the surge Instance (``operation.surgeIndex``) is being created."""
STEP_SURGE_WAIT_READY: Final = "SurgeWaitReady"
"""Update (SurgeThenDrain): waiting for the surge Instance to be Ready before draining."""
STEP_SURGE_DRAIN: Final = "SurgeDrain"
"""Update (SurgeThenDrain): the Instance is rebuilt and Ready; the surge drains and goes."""
STEP_SURGE_ABORT: Final = "SurgeAbort"
"""Update (SurgeThenDrain): the surge failed on the revision; it drains, the Instance stays."""
STEP_PATCH_IMAGES: Final = "PatchImages"
"""Update (in place): the pods' container images are being patched."""
STEP_REPAIR_PARKED: Final = "RepairParked"
"""Restart: the rebuilt Instance crash-loops again; the retry ladder re-arms the repair at
``lastProgressAt`` + the ladder's delay for re-arm ``retryCount`` + 1."""
STEP_REPAIR_PARKED_CONFIG: Final = "RepairParkedOnConfig"
"""Restart: the rebuilt Instance waits for its configuration or image (ImagePullBackOff,
CreateContainerConfigError, ...); the kubelet retries in place, nothing is rebuilt."""
STEP_REPAIR_PARKED_NO_LADDER: Final = "RepairParkedNoLadder"
"""Restart: parked for good: no ``lifecycle.updateRetry`` to re-arm it."""
STEP_REPAIR_PARKED_SPENT: Final = "RepairParkedRetriesSpent"
"""Restart: parked for good after ``retryCount`` re-arms, every retry spent."""
PARKED_STEPS: Final = frozenset(
    {
        STEP_REPAIR_PARKED,
        STEP_REPAIR_PARKED_CONFIG,
        STEP_REPAIR_PARKED_NO_LADDER,
        STEP_REPAIR_PARKED_SPENT,
    }
)

# -- Operation reasons ----------------------------------------------------------------------


class OperationReason(StrEnum):
    """Why an operation started (``operation.reason``), by operation type."""

    SCALE_UP = "ScaleUp"
    """Create: a new Instance, or the next incarnation of one."""
    PODS_MISSING = "PodsMissing"
    """Create: pods of an existing Instance vanished and are made again."""
    SCALE_DOWN = "ScaleDown"
    """Delete: the Instance's index is past ``replicas``."""
    TEARDOWN = "InferenceReplicaDeleted"
    """Delete: the InferenceReplica is being deleted."""
    REVISION_CHANGED = "RevisionChanged"
    """Update: the Instance runs another revision than the update revision."""
    RETRY = "RetryRevision"
    """Update: the retry block's next attempt at the update revision."""
    POD_RESTARTED = "PodRestarted"
    """Restart: a container restarted under restartPolicy RecreateInstanceOnPodRestart."""
    CRASH_LOOP = "CrashLoopRepair"
    """Restart: a pod crash-loops on a revision that has been Ready."""
    RELOCATION = "Relocation"
    """Create: the Instance is rebuilt off the node its last Create failed on (an automatic
    relocation)."""
    MIGRATION = "MigrationRequested"
    """Migrate: a migration record moves the Instance (the source) or stands in for it (the
    surge)."""


# -- Waiting tokens (operation.waiting) -----------------------------------------------------

WAITING_PAUSED: Final = "Paused"
"""operation.waiting while the InferenceReplica is paused (a token the CLI knows)."""
WAITING_QUOTA: Final = "QuotaExceeded"
"""operation.waiting: a pod create was refused by ResourceQuota admission (403 exceeded quota)."""
WAITING_NODE_UNKNOWN: Final = "NodeUnknown"
"""operation.waiting: a pod of the Instance is on a node that is NotReady or unreachable."""
WAITING_UNSCHEDULABLE: Final = "Unschedulable"
"""operation.waiting: a pod of the Instance has PodScheduled False, reason Unschedulable."""
WAITING_ADMISSION: Final = "AdmissionUnavailable"
"""operation.waiting: a pod create failed because an admission webhook couldn't be called."""
WAITING_SOURCE_UNROUTED: Final = "SourceUnrouted"
"""operation.waiting: a migration's source still receives traffic (not set: a migration waits on
its record's phase and message, :mod:`.ops.migrate`)."""
WAITING_POD_GROUP_TERMINATING: Final = "PodGroupTerminating"
"""operation.waiting: the Instance's PodGroup is being deleted (deletionTimestamp set); its
pods are created once it is gone and made again."""
WAITING_CAPACITY_PROVISIONING: Final = "CapacityProvisioning"
"""operation.waiting: capacity for the Instance is being provisioned (TPU slices; not set yet)."""
WAITING_TOKENS_SET: Final = frozenset(
    {
        WAITING_PAUSED,
        WAITING_QUOTA,
        WAITING_NODE_UNKNOWN,
        WAITING_UNSCHEDULABLE,
        WAITING_ADMISSION,
        WAITING_POD_GROUP_TERMINATING,
    }
)
"""The tokens omed sets (and so clears). The others belong to migrations and TPU slices,
which omed doesn't set (a migration reports through its record); a token omed doesn't set is
left alone."""
WAITING_TOKENS_SHOWN_BY_NAME: Final = (
    WAITING_QUOTA,
    WAITING_NODE_UNKNOWN,
    WAITING_SOURCE_UNROUTED,
    WAITING_UNSCHEDULABLE,
    WAITING_POD_GROUP_TERMINATING,
    WAITING_PAUSED,
)
"""The tokens ``kubectl ome instance`` shows by name; it shows any other as ``Unknown``.
AdmissionUnavailable and CapacityProvisioning are left out on purpose: the plugin's output
vocabulary, which scripts parse, has no word for them."""

# -- Events -----------------------------------------------------------------------------------

EVENT_INSTANCE_CREATED: Final = "InstanceCreated"
"""Normal, on the parent InferenceService (or the standalone InferenceReplica): every pod of
a new Instance (or a new incarnation) exists."""
EVENT_INSTANCE_READY: Final = "InstanceReady"
"""Normal: an Instance became Ready."""
EVENT_UPDATE_STARTED: Final = "InstanceUpdateStarted"
"""Normal: an Update operation of an Instance started."""
EVENT_UPDATE_COMPLETED: Final = "InstanceUpdated"
"""Normal: an Instance runs the update revision and is Ready."""
EVENT_UPDATE_FAILED: Final = "InstanceUpdateFailed"
"""Warning: an update attempt failed on the revision; the message names its retry block."""
EVENT_REVISION_RELEASED: Final = "RevisionReleased"
"""Normal: a Held revision was released by ome.io/release-held-revision."""
EVENT_RELEASE_IGNORED: Final = "ReleaseHeldIgnored"
"""Warning: ome.io/release-held-revision named no Held block of the update revision."""
EVENT_INSTANCE_RESTARTED: Final = "InstanceRecreated"
"""Normal: a container of the Instance restarted (RecreateInstanceOnPodRestart): it is rebuilt
as a new incarnation."""
EVENT_REPAIR_PARKED: Final = "InstanceRepairParked"
"""Warning: a rebuilt Instance failed again; its repair is parked (the message says until
what)."""
EVENT_PROGRESS_DEADLINE: Final = "ProgressDeadlineExceeded"
"""Warning: an Instance wasn't Ready within instanceReadyTimeout; its Update attempt failed."""
EVENT_STUCK_POD_GRACE: Final = "StuckPodGraceExceeded"
"""Warning: a pod of an attempt (Create, Update, Restart) sat in a terminal waiting reason past
stuckPodGracePeriod; the attempt failed."""
EVENT_UNSCHEDULABLE_GRACE: Final = "UnschedulableGraceExceeded"
"""Warning: a pod of an attempt stayed Unschedulable past unschedulableGracePeriod; the
attempt failed."""
EVENT_RETRY_BLOCK_MALFORMED: Final = "RetryBlockMalformed"
"""Warning: a retry block can't be acted on (see the condition of the same type)."""
EVENT_STATUS_UNREADABLE: Final = "InstanceStatusUnreadable"
"""Warning, on the InferenceReplica: its status (apart from the rows, which give
InstanceStatusDecodeFailed) can't be read, so omed leaves it alone."""
EVENT_SPEC_INVALID: Final = "InvalidSpec"
"""Warning, on the InferenceReplica: its metadata or spec can't be read (a value the models
refuse, stored before a webhook could refuse it), so omed leaves it alone."""
EVENT_PODS_ADOPTED: Final = "PodsAdopted"
"""Normal, on the InferenceReplica: it adopted pods named and labelled as its own that no
controller owned (left by an earlier InferenceReplica of its name deleted with
propagationPolicy Orphan)."""
EVENT_WRITE_SIZE_EXCEEDED: Final = "WriteSizeExceeded"
"""Warning, on the InferenceReplica: a write of it other than the status's was rejected as too
large (a status write is StatusSizeExceeded)."""
EVENT_POD_FORCE_DELETED: Final = "PodForceDeleted"
"""Warning: a pod stuck Terminating on a dead node was deleted with grace 0 (:mod:`.escalation`)."""
EVENT_POD_DELETE_BLOCKED: Final = "PodDeleteBlockedByFinalizer"
"""Warning, once per pod: a pod due for a force delete has finalizers, so it isn't deleted."""
EVENT_TEARDOWN_BLOCKED: Final = "TeardownBlocked"
"""Warning, once per set of pods: a deleted replica's teardown waits on pods that don't go."""
EVENT_TEARDOWN_DEADLINE: Final = "TeardownDeadlineExceeded"
"""Warning: ``teardown.deadline`` passed; the finalizer is lifted with what is left named."""

# -- Conditions ---------------------------------------------------------------------------------

CONDITION_READY: Final = constants.CONDITION_READY
CONDITION_PROGRESSING: Final = "Progressing"

READY_ALL: Final = "AllInstancesReady"
READY_NOT_ALL: Final = "InstancesNotReady"
PROGRESS_SCALING_UP: Final = "ScalingUp"
PROGRESS_SCALING_DOWN: Final = "ScalingDown"
PROGRESS_TERMINATING: Final = "Terminating"
PROGRESS_WAITING: Final = "WaitingForInstances"
PROGRESS_PAUSED: Final = "Paused"
PROGRESS_COMPLETE: Final = "Complete"
PROGRESS_UPDATING: Final = "Updating"
PROGRESS_UPDATE_BLOCKED: Final = "UpdateBlocked"

CONDITION_UPDATE_BLOCKED: Final = "UpdateBlocked"
CONDITION_RETRY_BLOCK_MALFORMED: Final = "RetryBlockMalformed"
REASON_RETRY_BLOCK_MALFORMED: Final = "Malformed"
"""The reason of condition RetryBlockMalformed."""
CONDITION_PROGRESS_DEADLINE: Final = "ProgressDeadlineExceeded"
REASON_PROGRESS_DEADLINE: Final = "ProgressDeadlineExceeded"
CONDITION_STUCK_POD_GRACE: Final = "StuckPodGraceExceeded"
REASON_STUCK_POD_GRACE: Final = "StuckPodGraceExceeded"
CONDITION_UNSCHEDULABLE_GRACE: Final = "UnschedulableGraceExceeded"
REASON_UNSCHEDULABLE_GRACE: Final = "UnschedulableGraceExceeded"
REASON_MIGRATION_EXPIRED: Final = "MigrationExpired"
"""lastFailure reason (and Ready reason) of a migration source restored with pods that are not
runtime-ready when its record expired."""
REASON_MIGRATION_SOURCE_UNHEALTHY: Final = "MigrationClosedSourceUnhealthy"
"""The same for a migration closed for any other failure after its surge was allocated (a
wedged surge, a surge create refused for good)."""
REJECTION_INVALID_POD_SPEC: Final = "InvalidPodSpec"
"""The class of a pod create refused with 422 Invalid: the same body is refused again."""
REJECTION_NAMESPACE_TERMINATING: Final = "NamespaceTerminating"
"""The class of a pod create refused because its namespace is being deleted."""
CREATE_FAILED_REASONS: Final = frozenset(
    {
        REASON_PROGRESS_DEADLINE,
        REASON_STUCK_POD_GRACE,
        REASON_UNSCHEDULABLE_GRACE,
        REASON_MIGRATION_EXPIRED,
        REASON_MIGRATION_SOURCE_UNHEALTHY,
    }
)
"""The reasons of a row's Ready condition after its Create failed (instanceReadyTimeout, or
one of the graces), or after a failed migration restored it unhealthy: kept while the Instance
stays not Ready and no operation starts on it."""
BLOCKED_IN_PLACE_IMPOSSIBLE: Final = "InPlaceUpdateImpossible"
BLOCKED_REVISION_HELD: Final = "RevisionHeld"
BLOCKED_RETRY_BACKOFF: Final = "RetryBackoff"

# -- Reasons of the ome.io/serving gate (the pod condition's reason) --------------------------

GATE_INSTANCE_READY: Final = "InstanceReady"
"""Gate True: the Instance (or, under readyPolicy None, the pod) may serve."""
GATE_INSTANCE_NOT_READY: Final = "InstanceNotReady"
"""Gate False: it may not serve any more."""
GATE_DRAINING: Final = "Draining"
"""Gate False ahead of a delete: the pod is being drained."""
GATE_UPDATING: Final = "Updating"
"""Gate False ahead of an Update's or a Restart's rebuild."""

# -- Reasons of a row's Ready condition -------------------------------------------------------

INSTANCE_READY: Final = "InstanceReady"
INSTANCE_PODS_NOT_READY: Final = "PodsNotReady"
INSTANCE_PODS_MISSING: Final = "PodsMissing"
INSTANCE_PODS_FAILING: Final = "PodsFailing"
INSTANCE_DELETING: Final = "Deleting"

RESOURCE_STATUS: Final = "inferencereplicas/status"
"""The status subresource, as a refused write names it (verb and resource)."""

# -- Log lines ----------------------------------------------------------------------------------


class LogLine(StrEnum):
    """The messages of the controller's log lines (their key-values are separate)."""

    SCALE_DOWN_WAVE = "OMENative scale-down wave"
    """Part of the interface users grep for; one line per pass while a scale-down runs."""
    SKIPPED_UNSAFE_DELETE = "Skipped deleting a pod that is still routed"
    POD_FORCE_DELETED = "Force-deleted a pod stuck Terminating on a dead node"
    STATUS_CONFLICT = "InferenceReplica changed while reconciling; retrying"
    """DEBUG: the status write met a Conflict; the key goes back with back-off."""
    WAITING_FOR_CACHE = "Waiting for the pod cache to show this controller's writes"
    """DEBUG: the key waits for its expectations."""
    STATUS_UNREADABLE = "Cannot read the InferenceReplica's status; leaving it alone"
    SPEC_INVALID = "Cannot read the InferenceReplica's spec; leaving it alone"
    STATUS_DECODE_FAILED = "Cannot decode per-Instance status; not managing the replica"
    """ERROR, with the event InstanceStatusDecodeFailed, once per resourceVersion."""
    STATUS_CONVERTED = "Converted per-Instance status"
    LIFECYCLE_INVALID = "Ignoring invalid lifecycle settings in ConfigMap inferenceservice-config"
    """ERROR, once per distinct set of invalid keys: those keys are unconfigured."""
    STATUS_TOO_LARGE = "Status write rejected as too large; the InferenceReplica stalls"
    WRITE_TOO_LARGE = "InferenceReplica write rejected as too large; the replica stalls"
    PODS_ADOPTED = "Adopted pods that no controller owned"
    """INFO, with the event PodsAdopted."""
    DRAINING_LEFTOVERS = "Draining pods left by an earlier InferenceReplica of this name"
    TEARDOWN_FROM_PODS = (
        "Tearing down a deleted InferenceReplica that can't be read, from what its pods show"
    )


def pods_adopted_message(pods: list[str]) -> str:
    """The PodsAdopted event's message: how many, and the first names."""
    shown = ", ".join(pods[:5])
    more = f" and {len(pods) - 5} more" if len(pods) > 5 else ""
    return f"Adopted {len(pods)} pod(s) that no controller owned: {shown}{more}"


def traffic_service(isvc: str, component: str) -> str:
    """``<isvc>-<component>``: the component's traffic Service, whose EndpointSlices judge
    whether a pod is routed (a standalone replica's ``isvc`` is its own name)."""
    return f"{isvc}-{component}"


def pod_name(replica: str, index: int, runner: str, ordinal: int) -> str:
    """``<irep>-<index>-<runner>-<ordinal>``, such as ``chat-engine-0-default-0``."""
    return f"{replica}-{index}-{runner}-{ordinal}"


def parse_pod_name(name: str, *, replica: str, index: int) -> tuple[str, int] | None:
    """``(runner, ordinal)`` of a pod named by :func:`pod_name`, or ``None``."""
    prefix = f"{replica}-{index}-"
    if not name.startswith(prefix):
        return None
    runner, sep, ordinal = name[len(prefix) :].rpartition("-")
    if not sep or not runner or not ordinal.isdigit():
        return None
    return runner, int(ordinal)


def label_selector(isvc: str, component: str) -> str:
    """The selector of an InferenceReplica's pods, as ``status.labelSelector`` publishes it."""
    return f"{LABEL_INFERENCE_SERVICE}={isvc},{LABEL_COMPONENT}={component}"


# -- PodGroups (gang scheduling) --------------------------------------------------------------

CONDITION_GANG_UNAVAILABLE: Final = "GangSchedulingUnavailable"
"""True on an InferenceReplica with multi-pod Instances while the PodGroup CRD was absent when
the manager started: its pods are created without PodGroups."""
REASON_POD_GROUP_CRD_NOT_INSTALLED: Final = "PodGroupCRDNotInstalled"
MESSAGE_POD_GROUP_CRD_NOT_INSTALLED: Final = (
    "scheduler-plugins scheduling.x-k8s.io/v1alpha1 PodGroup CRD is not installed; "
    "multi-pod Instances may schedule partially"
)
"""Upstream's message. The CRD is looked for once, at start: a manager started before the CRD
was installed keeps this condition until it is restarted."""


@dataclass(frozen=True, slots=True)
class WarningEvent:
    """A Warning event's reason with its message's template, so that a reason never goes out
    with another's message. ``template`` has ``str.format`` fields; the fields in ``quoted``
    are quoted as Go's ``%q`` does (upstream's messages quote some names so)."""

    reason: str
    template: str
    quoted: frozenset[str] = frozenset()

    def message(self, **fields: object) -> str:
        return self.template.format(
            **{k: _go_quote(str(v)) if k in self.quoted else v for k, v in fields.items()}
        )


MAYBE_NO_GANG_SCHEDULER: Final = WarningEvent(
    "MaybeNoGangScheduler",
    "OMENative component={component} created scheduler-plugins PodGroup objects but pod "
    "template's spec.schedulerName is {scheduler} (default kube-scheduler does not enforce "
    "PodGroup gang); set runtime.spec.schedulerName to a gang-aware scheduler (e.g. "
    "scheduler-plugins-scheduler) or install scheduler-plugins as a plugin in the default "
    "scheduler",
    quoted=frozenset({"scheduler"}),
)
"""PodGroups were created, but the pods' schedulerName is the default scheduler's (upstream's
message)."""
POD_GROUP_RESET: Final = WarningEvent(
    "PodGroupReset",
    "OMENative component={component}: deleting PodGroup {name} so the gang can be admitted "
    "again ({reason})",
)
"""A PodGroup the gang scheduler ruled Failed is deleted, to be made again (upstream's
message; ``reason`` is the group's own explanation)."""
GANG_SPLIT_RISK: Final = WarningEvent(
    "GangSplitRisk",
    "OMENative component={component} is a multi-node gang but its worker pods have no "
    "co-location podAffinity: the gang may be scheduled across separate network/NVLink/TPU "
    "topology domains, breaking the tightly-coupled collectives a multi-node runtime needs "
    "(NCCL/RCCL/NIXL all-reduce, multi-host TPU sessions). Declare a required worker "
    "podAffinity that keeps the gang in one topology domain.",
)
"""A gang's worker pods are created with no required podAffinity. Upstream's first sentence;
its advice names the one remedy omed's API has (upstream's also names
``<component>.topologyKey``, which omed doesn't model)."""
POD_GROUP_NAME_TAKEN: Final = WarningEvent(
    "PodGroupNameTaken",
    "PodGroup {name} is controlled by another object: the pods of Instance {index} of "
    "{component} wait until the name is free",
)
"""omed's own: the PodGroup name of an Instance is held by an object another controller owns;
the Instance's pods wait for the name."""


def _go_quote(text: str) -> str:
    import json

    return json.dumps(text, ensure_ascii=False)
