"""omed's API: the ome.io/v1beta1 kinds as pydantic models, their names, and their CRDs.

This package is the bottom layer of omed (it imports nothing from the rest of omed but
:mod:`omed.lazy`, its lazy exports), pure and free of I/O: every other layer reads and writes
objects through these models, and ``deploy/crds`` is generated from them by
:mod:`omed.api.crdgen`, so the code and the installed schema can't disagree. The names a user
or a tool can see (labels, annotations, condition types) are in :mod:`omed.api.constants`;
revision names in :mod:`omed.api.revision`.
"""

from typing import TYPE_CHECKING

from omed.lazy import exports

if TYPE_CHECKING:
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

_WHERE: dict[str, str] = {
    "ApiModel": "omed.api.base",
    "Condition": "omed.api.base",
    "ObjectMeta": "omed.api.base",
    "OwnerReference": "omed.api.base",
    "ComponentSpec": "omed.api.component",
    "LeaderSpec": "omed.api.component",
    "RuntimeComponentConfig": "omed.api.component",
    "WorkerSpec": "omed.api.component",
    "InferenceReplica": "omed.api.inferencereplica",
    "InferenceReplicaSpec": "omed.api.inferencereplica",
    "InferenceReplicaStatus": "omed.api.inferencereplica",
    "InstanceStatus": "omed.api.inferencereplica",
    "LastFailure": "omed.api.inferencereplica",
    "MigrationStatus": "omed.api.inferencereplica",
    "Operation": "omed.api.inferencereplica",
    "RetryBlock": "omed.api.inferencereplica",
    "RowCondition": "omed.api.inferencereplica",
    "Runner": "omed.api.inferencereplica",
    "inference_replica_name": "omed.api.inferencereplica",
    "ComponentStatus": "omed.api.inferenceservice",
    "InferenceService": "omed.api.inferenceservice",
    "InferenceServiceSpec": "omed.api.inferenceservice",
    "InferenceServiceStatus": "omed.api.inferenceservice",
    "Lifecycle": "omed.api.lifecycle",
    "payload_hash": "omed.api.revision",
    "revision_name": "omed.api.revision",
    "revision_payload": "omed.api.revision",
    "ClusterServingRuntime": "omed.api.servingruntime",
    "ServingRuntime": "omed.api.servingruntime",
    "ServingRuntimeSpec": "omed.api.servingruntime",
}
"""Each name of ``__all__`` and the module it comes from. They are imported on first use,
so that importing one light module of the package (:mod:`omed.api.constants`, which
``kubectl ome`` reads) doesn't build every pydantic model."""


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


__getattr__ = exports(__name__, _WHERE, globals())
