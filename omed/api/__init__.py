"""omed's API: the ome.io/v1beta1 kinds as pydantic models, their names, and their CRDs.

This package is the bottom layer of omed (it imports nothing from the rest of omed), pure and
free of I/O: every other layer reads and writes objects
through these models, and ``deploy/crds`` is generated from them by :mod:`omed.api.crdgen`, so
the code and the installed schema can't disagree. The names a user or a tool can see (labels,
annotations, condition types) are in :mod:`omed.api.constants`; revision names in
:mod:`omed.api.revision`.
"""

from omed.api.base import ApiModel, Condition, ObjectMeta, OwnerReference
from omed.api.component import ComponentSpec, LeaderSpec, RuntimeComponentConfig, WorkerSpec
from omed.api.inferencereplica import (
    InferenceReplica,
    InferenceReplicaSpec,
    InferenceReplicaStatus,
    InstanceStatus,
    LastFailure,
    MigrationStatus,
    Operation,
    RetryBlock,
    RowCondition,
    Runner,
    inference_replica_name,
)
from omed.api.inferenceservice import (
    ComponentStatus,
    InferenceService,
    InferenceServiceSpec,
    InferenceServiceStatus,
)
from omed.api.lifecycle import Lifecycle
from omed.api.revision import payload_hash, revision_name, revision_payload
from omed.api.servingruntime import ClusterServingRuntime, ServingRuntime, ServingRuntimeSpec

__all__ = [
    "ApiModel",
    "ClusterServingRuntime",
    "ComponentSpec",
    "ComponentStatus",
    "Condition",
    "InferenceReplica",
    "InferenceReplicaSpec",
    "InferenceReplicaStatus",
    "InferenceService",
    "InferenceServiceSpec",
    "InferenceServiceStatus",
    "InstanceStatus",
    "LastFailure",
    "LeaderSpec",
    "Lifecycle",
    "MigrationStatus",
    "ObjectMeta",
    "Operation",
    "OwnerReference",
    "RetryBlock",
    "RowCondition",
    "Runner",
    "RuntimeComponentConfig",
    "ServingRuntime",
    "ServingRuntimeSpec",
    "WorkerSpec",
    "inference_replica_name",
    "payload_hash",
    "revision_name",
    "revision_payload",
]
