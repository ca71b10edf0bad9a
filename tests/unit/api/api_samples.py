"""Sample objects shared by the API tests: one of each kind, with every field set.

A module of its own (not only fixtures in conftest.py) so that a hypothesis test, which can't
take a function-scoped fixture, can start from them too.
"""

from __future__ import annotations

from typing import Any

ISVC: dict[str, Any] = {
    "apiVersion": "ome.io/v1beta1",
    "kind": "InferenceService",
    "metadata": {
        "name": "chat",
        "namespace": "prod",
        "generation": 4,
        "annotations": {"ome.io/deploymentMode": "OMENative"},
        "managedFields": [{"manager": "kubectl", "operation": "Update"}],
    },
    "spec": {
        "deploymentMode": "RawDeployment",
        "model": {"name": "llama-3-2-1b-instruct"},
        "runtime": {"name": "srt-llama-3-2-1b-instruct-pd"},
        "engine": {
            "minReplicas": 4,
            "maxReplicas": 4,
            "containers": [{"name": "ome-container", "image": "example/sglang:v0.4.9"}],
            "nodeSelector": {"gpu": "h100"},
            "hostIPC": True,
            "scaleTarget": 80,
            "runner": {"name": "ome-container", "resources": {"limits": {"gpu": "8"}}},
            "lifecycle": {
                "restartPolicy": "RecreateInstanceOnPodRestart",
                "updateStrategy": {
                    "type": "RecreatePod",
                    "rollingUpdate": {"partition": 1, "maxUnavailable": "25%", "maxSurge": 1},
                },
                "readyPolicy": "AllPodReady",
                "instanceReadyTimeout": "15m",
                "minReadySeconds": 10,
                "migrationPolicy": {"mode": "Auto"},
                "updateRetry": {
                    "maxAttempts": 5,
                    "initialDelay": "30s",
                    "maxDelay": "10m",
                    "multiplier": 2.0,
                },
                "repairBatchSize": "10%",
            },
        },
        "decoder": {
            "minReplicas": 1,
            "maxReplicas": 1,
            "leader": {"runner": {"name": "leader"}, "tolerations": [{"key": "gpu"}]},
            "worker": {"size": 3, "runner": {"name": "worker"}},
            "lifecycle": {"migrationPolicy": {"mode": "Never"}},
        },
        "router": {"minReplicas": 1, "maxReplicas": 1},
        "paused": True,
        "predictor": {"model": {"modelFormat": {"name": "x"}}},
    },
    "status": {
        "observedGeneration": 3,
        "url": "http://chat.prod.example",
        "conditions": [
            {
                "type": "Ready",
                "status": "True",
                "reason": "AllComponentsReady",
                "message": "",
                "lastTransitionTime": "2026-09-28T10:12:04Z",
                "observedGeneration": 3,
            }
        ],
        "components": {
            "engine": {
                "replicas": 4,
                "readyReplicas": 4,
                "servingReplicas": 4,
                "updatedReplicas": 4,
                "inferenceReplica": "chat-engine",
                "currentRevision": "chat-engine-5d8f7c9b",
                "updateRevision": "chat-engine-5d8f7c9b",
                "latestReadyRevision": "upstream-kept",
            }
        },
    },
}

IREP: dict[str, Any] = {
    "apiVersion": "ome.io/v1beta1",
    "kind": "InferenceReplica",
    "metadata": {
        "name": "chat-engine",
        "namespace": "prod",
        "labels": {"ome.io/inferenceservice": "chat"},
        "annotations": {"ome.io/controller-write": "true"},
        "ownerReferences": [
            {
                "apiVersion": "ome.io/v1beta1",
                "kind": "InferenceService",
                "name": "chat",
                "uid": "5f0c8a52-3b1e-4c8d-9f27-6a1d0e4b7c93",
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ],
        "creationTimestamp": "2026-09-28T10:00:00Z",
    },
    "spec": {
        "parentRef": {"name": "chat"},
        "component": "engine",
        "replicas": 4,
        "runners": [
            {"name": "leader", "size": 1, "template": {"spec": {"containers": [{"name": "a"}]}}},
            {
                "name": "worker",
                "size": 3,
                "template": {"metadata": {"labels": {"x": "y"}}, "spec": {"unknownField": 1}},
            },
        ],
        "lifecycle": {"updateStrategy": {"type": "SurgeThenDrain"}},
        "paused": False,
        "revisionHistoryLimit": 10,
        "minReadySeconds": 0,
    },
    "status": {
        "observedGeneration": 4,
        "replicas": 4,
        "readyReplicas": 3,
        "servingReplicas": 3,
        "availableReplicas": 3,
        "updatedReplicas": 1,
        "currentRevision": "chat-engine-5d8f7c9b",
        "updateRevision": "chat-engine-7f9c4d2b",
        "labelSelector": "ome.io/inferenceservice=chat,component=engine",
        "conditions": [
            {
                "type": "Ready",
                "status": "False",
                "reason": "Updating",
                "message": "1/4 updated",
                "lastTransitionTime": "2026-09-28T10:12:04Z",
            }
        ],
        "instanceStatuses": [
            {
                "index": 0,
                "incarnation": 1,
                "phase": "Ready",
                "runningRevision": "chat-engine-5d8f7c9b",
                "podCount": 4,
                "servingPodCount": 4,
                "availablePodCount": 4,
                "admitted": True,
                "readySince": "2026-09-28T10:05:00Z",
                "activeOrdinal": 0,
            },
            {
                "index": 3,
                "incarnation": 8,
                "phase": "Migrating",
                "runningRevision": "chat-engine-5d8f7c9b",
                "targetRevision": "chat-engine-7f9c4d2b",
                "podCount": 4,
                "servingPodCount": 1,
                "availablePodCount": 1,
                "admitted": True,
                "conditions": [
                    {
                        "type": "ome.io/serving",
                        "status": "Unknown",
                        "reason": "Surging",
                        "message": "",
                        "lastTransitionTime": "2026-09-28T10:12:04Z",
                    }
                ],
                "lastFailure": {
                    "pod": "chat-engine-3-default-0",
                    "container": "ome-container",
                    "reason": "CrashLoopBackOff",
                    "exitCode": 137,
                    "time": "2026-09-28T10:11:00Z",
                },
                "operation": {
                    "id": "op-3-8",
                    "type": "Migrate",
                    "step": "SurgePending",
                    "startedAt": "2026-09-28T10:12:04Z",
                    "lastProgressAt": "2026-09-28T10:12:05Z",
                    "deadline": "2026-09-28T10:42:04Z",
                    "retryCount": 0,
                    "targetRevision": "chat-engine-7f9c4d2b",
                    "reason": "node-a maintenance",
                    "waiting": "CapacityProvisioning",
                    "surgeIndex": 4,
                    "fromNode": "node-a",
                    "hintTargetNodes": ["node-b", "node-c"],
                    "requestUUID": "7c9e6679-7425-40de-944b-e07fc1f90ae7",
                },
            },
        ],
        "retryBlocks": [
            {
                "targetRevision": "chat-engine-7f9c4d2b",
                "state": "Held",
                "attemptsStarted": 3,
                "firstFailureAt": "2026-09-28T09:00:00Z",
                "lastFailureAt": "2026-09-28T09:30:00Z",
                "reason": "ImagePullBackOff",
            }
        ],
        "migrations": [
            {
                "requestUUID": "7c9e6679-7425-40de-944b-e07fc1f90ae7",
                "trigger": "Manual",
                "sourceInstance": 3,
                "surgeInstance": 4,
                "allocatedAt": "2026-09-28T10:12:09Z",
                "fromNode": "node-a",
                "hintTargetNodes": ["node-b"],
                "phase": "SurgePending",
                "reason": "node-a maintenance",
                "message": "surge allocated; waiting for surge pods",
                "startedAt": "2026-09-28T10:12:04Z",
                "deadline": "2026-09-28T10:42:04Z",
            }
        ],
    },
}
