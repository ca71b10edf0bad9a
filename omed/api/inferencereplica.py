"""The InferenceReplica (``ome.io/v1beta1``, short name ``irep``) and its per-Instance rows.

One InferenceReplica runs the Instances of one component: the InferenceService controller
writes its spec (it is the only spec writer) and the InferenceReplica controller its status (the
only status writer). Its status is the durable memory of the controller: each Instance's row
(:class:`InstanceStatus`) records the Instance's in-flight ``operation`` before the operation's
first side effect, so a manager that restarts resumes the operation instead of repeating it.

The rows live either in ``status.instanceStatuses`` (a list-map keyed by ``index``) or, when
``status.instanceStatusEncoding`` is ``ColumnarV2``, in ``status.instanceStatusColumns``. The
column form is opaque here: :mod:`omed.statuscodec` turns it into :class:`InstanceStatus` rows
and back. Unlike the InferenceService, omed owns this kind outright, so the schema is closed:
the API server prunes what it doesn't know.
"""

from __future__ import annotations

from typing import Any, Final, Literal, get_args

from pydantic import Field, model_validator

from omed.api.base import ApiModel, Condition, ConditionStatus, FreeForm, ObjectMeta, Time
from omed.api.constants import (
    API_VERSION,
    KIND_INFERENCE_REPLICA,
    TERMINAL_MIGRATION_PHASES,
    ComponentName,
    MigrationPhase,
)
from omed.api.lifecycle import Lifecycle

RunnerName = Literal["default", "leader", "worker"]
InstancePhase = Literal[
    "Pending", "Creating", "Ready", "Updating", "Restarting", "Migrating", "Failed", "Deleting"
]
OperationType = Literal["Create", "Update", "Restart", "Migrate", "Delete"]
RetryBlockState = Literal["Backoff", "Held", "RetryInProgress"]
MigrationTrigger = Literal["Manual", "Auto"]
InstanceStatusEncoding = Literal["ColumnarV2"]

INSTANCE_PHASES: Final[tuple[InstancePhase, ...]] = get_args(InstancePhase)
OPERATION_TYPES: Final[tuple[OperationType, ...]] = get_args(OperationType)
RETRY_BLOCK_STATES: Final[tuple[RetryBlockState, ...]] = get_args(RetryBlockState)
ENCODING_COLUMNAR_V2: Final[InstanceStatusEncoding] = "ColumnarV2"

MAX_ROW_LIST_ITEMS: Final = 32
"""Most items in a row's ``conditions`` or an operation's ``hintTargetNodes``: the bound of the
ColumnarV2 row table, repeated here (omed.api sits below omed.statuscodec) so that the list form
can't hold a row the column form can't."""

_CONDITIONS_LIST_MAP: Final[dict[str, Any]] = {
    "x-kubernetes-list-type": "map",
    "x-kubernetes-list-map-keys": ["type"],
}


def inference_replica_name(isvc: str, component: ComponentName) -> str:
    """The name of the InferenceReplica that runs ``component`` of InferenceService ``isvc``."""
    return f"{isvc}-{component}"


# -- Spec ------------------------------------------------------------------------------------


class ParentRef(ApiModel):
    """The InferenceService that owns this InferenceReplica."""

    name: str
    """Name of the InferenceService, in the same namespace."""


class Runner(ApiModel):
    """One kind of pod in each Instance: the single pod, or the leader, or the workers."""

    name: RunnerName
    """default for a single-pod Instance, else leader or worker."""
    size: int | None = Field(default=None, ge=0)
    """Pods of this runner per Instance; 1 when unset."""
    template: FreeForm
    """Pod template of the runner (core/v1 PodTemplateSpec)."""


class InferenceReplicaSpec(ApiModel):
    """Desired state of an InferenceReplica."""

    parent_ref: ParentRef | None = None
    """The owning InferenceService; absent on a standalone InferenceReplica."""
    component: ComponentName
    """engine, decoder or router."""
    replicas: int = Field(ge=0)
    """Number of Instances."""
    runners: list[Runner] = Field(
        min_length=1,
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]},
    )
    """Pod kinds of each Instance: default alone, or leader and worker."""
    lifecycle: Lifecycle | None = None
    """How Instances are restarted, updated, readied and migrated."""
    paused: bool | None = None
    """Hold rollouts: no Instance moves to a new revision until cleared."""
    revision_history_limit: int | None = Field(default=None, ge=0)
    """Old revisions kept for rollback."""
    min_ready_seconds: int | None = Field(default=None, ge=0)
    """Seconds an Instance must stay Ready before it counts as available."""

    def runner(self, name: RunnerName) -> Runner | None:
        """The runner called ``name``, or ``None``."""
        for runner in self.runners:
            if runner.name == name:
                return runner
        return None


# -- Status rows -----------------------------------------------------------------------------


class LastFailure(ApiModel):
    """The last failure seen on an Instance's pods."""

    pod: str | None = None
    """Name of the failing pod."""
    container: str | None = None
    """Name of the failing container."""
    reason: str | None = None
    """Why it failed, such as CrashLoopBackOff, or the token of a hold."""
    exit_code: int | None = None
    """Exit code of the container's last termination."""
    time: Time | None = None
    """When the failure was recorded."""


class Operation(ApiModel):
    """Multi-step work in flight on an Instance, recorded before its first side effect."""

    id: str | None = None
    """Unique id of the operation."""
    type: OperationType | None = None
    """Create, Update, Restart, Migrate or Delete."""
    step: str | None = None
    """The step the operation has reached."""
    started_at: Time | None = None
    """When the operation started."""
    last_progress_at: Time | None = None
    """When the operation last moved forward."""
    deadline: Time | None = None
    """When the operation fails if it hasn't finished."""
    retry_count: int | None = Field(default=None, ge=0)
    """Retries of the current step."""
    target_revision: str | None = None
    """Revision the operation moves the Instance to."""
    reason: str | None = None
    """Why the operation started."""
    waiting: str | None = None
    """Token of what holds the operation, such as QuotaExceeded or Unschedulable."""
    surge_index: int | None = Field(default=None, ge=0)
    """Index of the surge Instance that replaces this one."""
    from_node: str | None = None
    """Node that a migration leaves."""
    hint_target_nodes: list[str] | None = Field(default=None, max_length=MAX_ROW_LIST_ITEMS)
    """Nodes that a migration's replacement should prefer."""
    request_uuid: str | None = Field(default=None, alias="requestUUID")
    """Migration request that started the operation."""


class RowCondition(ApiModel):
    """A condition of one Instance: the shape of ``metav1.Condition``, every field optional, as
    the row table of both encodings allows."""

    type: str | None = None
    """Type of condition, such as Ready."""
    status: ConditionStatus | None = None
    """Status of the condition: True, False or Unknown."""
    observed_generation: int | None = Field(default=None, ge=0)
    """The metadata.generation that the condition was set from."""
    last_transition_time: Time | None = None
    """When the condition last changed from one status to another."""
    reason: str | None = None
    """A CamelCase token for the condition's last transition."""
    message: str | None = None
    """A human-readable message about the transition."""


class InstanceStatus(ApiModel):
    """The row of one Instance: its phase, revisions, pods and in-flight operation.

    Only ``index`` is required: a row may leave out any other field, in the list form as in the
    column form, which must hold exactly the same rows.
    """

    index: int = Field(ge=0)
    """Index of the Instance; its pods carry it in the ome.io/instance-index label."""
    incarnation: int | None = Field(default=None, ge=0)
    """Incarnation of the Instance: grows each time the Instance is rebuilt."""
    phase: InstancePhase | None = None
    """Pending, Creating, Ready, Updating, Restarting, Migrating, Failed or Deleting."""
    running_revision: str | None = None
    """Revision that the Instance's pods run; absent until it first becomes Ready."""
    target_revision: str | None = None
    """Revision that the Instance moves to."""
    pod_count: int | None = Field(default=None, ge=0)
    """Pods of the Instance."""
    serving_pod_count: int | None = Field(default=None, ge=0)
    """Pods whose ome.io/serving readiness gate is True."""
    available_pod_count: int | None = Field(default=None, ge=0)
    """Pods Ready for at least minReadySeconds."""
    admitted: bool | None = None
    """Whether the Instance was admitted for scheduling."""
    conditions: list[RowCondition] | None = Field(default=None, max_length=MAX_ROW_LIST_ITEMS)
    """Conditions of the Instance."""
    ready_since: Time | None = None
    """When the Instance last became Ready."""
    active_ordinal: int | None = Field(default=None, ge=0)
    """Ordinal of the Instance's active pod set."""
    last_failure: LastFailure | None = None
    """The last failure seen on the Instance's pods."""
    operation: Operation | None = None
    """Work in flight on the Instance."""


class RetryBlock(ApiModel):
    """Retry state of a revision whose updates fail."""

    target_revision: str
    """The failing revision, <InferenceService>-<component>-<hash>."""
    state: RetryBlockState
    """Backoff, Held (attempts spent; waits for release-held or a new revision) or
    RetryInProgress."""
    attempts_started: int | None = Field(default=None, ge=0)
    """Attempts started on the revision."""
    next_retry_at: Time | None = None
    """When the next attempt may start."""
    first_failure_at: Time | None = None
    """When the revision first failed."""
    last_failure_at: Time | None = None
    """When the revision last failed."""
    reason: str | None = None
    """Failure behind the block, such as ImagePullBackOff."""


class MigrationStatus(ApiModel):
    """Progress of one migration of an Instance to another node, in upstream OME's record shape.

    The InferenceReplica implies the component, so the record names none. Records written before
    the fields took upstream's names (``instance``, ``hintNodes``, ``surgeIndex``) still read:
    :meth:`_legacy_names` maps them, and a record without ``trigger`` was a manual request.
    """

    request_uuid: str = Field(alias="requestUUID")
    """UUID of the migration request; the key of the list."""
    trigger: MigrationTrigger
    """Manual for a request; Auto for an automatic relocation."""
    source_instance: int = Field(ge=0)
    """Index of the Instance that moves."""
    surge_instance: int | None = Field(default=None, ge=0)
    """Index of the replacement Instance, set when it is allocated."""
    allocated_at: Time | None = None
    """When the replacement was allocated; the rate cap counts it."""
    from_node: str | None = None
    """Node that the Instance leaves."""
    hint_target_nodes: list[str] | None = Field(
        default=None, json_schema_extra={"x-kubernetes-list-type": "atomic"}
    )
    """Nodes that the replacement should prefer."""
    phase: MigrationPhase | None = None
    """Accepted, SurgePending, SurgeReady, Draining, Completed or Failed; Relocated for an
    automatic relocation; Pending and InProgress only in old records."""
    attempt: int | None = Field(default=None, ge=0)
    """Relocation attempt, on Relocated records."""
    reason: str | None = None
    """Why the migration was requested."""
    message: str | None = None
    """What the migration is doing or why it failed."""
    started_at: Time
    """When the migration was accepted."""
    deadline: Time
    """When the migration fails if it hasn't completed."""
    completed_at: Time | None = None
    """When the migration ended."""
    succeeded: bool | None = None
    """True once a relocated Instance is Ready."""

    @model_validator(mode="before")
    @classmethod
    def _legacy_names(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        renamed = dict(data)
        for old, new in _LEGACY_MIGRATION_KEYS:
            if old in renamed:
                value = renamed.pop(old)
                renamed.setdefault(new, value)
        renamed.pop("component", None)
        renamed.setdefault("trigger", "Manual")
        started = renamed.get("startedAt", renamed.get("started_at"))
        if started is not None:
            renamed.setdefault("deadline", started)
        return renamed

    @property
    def terminal(self) -> bool:
        """Whether the migration has ended (Completed, Failed or Relocated)."""
        return self.phase in TERMINAL_MIGRATION_PHASES


_LEGACY_MIGRATION_KEYS: Final = (
    ("instance", "sourceInstance"),
    ("hintNodes", "hintTargetNodes"),
    ("surgeIndex", "surgeInstance"),
)


# -- Status ----------------------------------------------------------------------------------


class InferenceReplicaStatus(ApiModel):
    """Observed state of an InferenceReplica, written only by its controller."""

    observed_generation: int | None = None
    """The metadata.generation that the status was computed from."""
    replicas: int | None = Field(default=None, ge=0)
    """Instances that exist."""
    ready_replicas: int | None = Field(default=None, ge=0)
    """Instances that are Ready."""
    serving_replicas: int | None = Field(default=None, ge=0)
    """Instances whose pods all serve."""
    available_replicas: int | None = Field(default=None, ge=0)
    """Instances Ready for at least minReadySeconds."""
    updated_replicas: int | None = Field(default=None, ge=0)
    """Instances on the update revision."""
    current_revision: str | None = None
    """Revision the Instances ran before the update under way."""
    update_revision: str | None = None
    """Revision the Instances move to."""
    collision_count: int | None = Field(default=None, ge=0)
    """Times the update revision's name was taken by another object; part of the hash."""
    label_selector: str | None = None
    """Selector of the Instances' pods, for the scale subresource."""
    conditions: list[Condition] | None = Field(default=None, json_schema_extra=_CONDITIONS_LIST_MAP)
    """Conditions of the InferenceReplica."""
    instance_statuses: list[InstanceStatus] | None = Field(
        default=None,
        json_schema_extra={
            "x-kubernetes-list-type": "map",
            "x-kubernetes-list-map-keys": ["index"],
        },
    )
    """One row per Instance, when the rows are stored as a list."""
    instance_status_encoding: InstanceStatusEncoding | None = None
    """ColumnarV2 when the rows are stored as columns in instanceStatusColumns; absent when
    they are the list instanceStatuses."""
    instance_status_columns: dict[str, Any] | None = None
    """The rows in the ColumnarV2 column form."""
    retry_blocks: list[RetryBlock] | None = None
    """Revisions that OME retries or holds."""
    migrations: list[MigrationStatus] | None = Field(
        default=None,
        json_schema_extra={
            "x-kubernetes-list-type": "map",
            "x-kubernetes-list-map-keys": ["requestUUID"],
        },
    )
    """Migrations in flight, and recent ones that ended."""

    def condition(self, condition_type: str) -> Condition | None:
        """The condition of type ``condition_type``, or ``None``."""
        for condition in self.conditions or ():
            if condition.type == condition_type:
                return condition
        return None


class InferenceReplica(ApiModel):
    """An InferenceReplica: the Instances of one component."""

    api_version: str = API_VERSION
    kind: Literal["InferenceReplica"] = KIND_INFERENCE_REPLICA
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: InferenceReplicaSpec
    status: InferenceReplicaStatus | None = None
