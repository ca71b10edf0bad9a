"""Every name the InferenceService controller writes or reports: one place, so the log lines,
condition reasons and finalizer stay what docs/controllers.md and the tests quote."""

from __future__ import annotations

from typing import Final

CONTROLLER_NAME: Final = "inferenceservice"
FINALIZER: Final = "ome.io/inferenceservice-cleanup"
"""Holds a deleted InferenceService until its InferenceReplicas are gone (or, under
propagationPolicy Orphan, no longer owned)."""

DELETION_POLL: Final = 1.0
"""Seconds between looks at replicas being drained during a deletion (events drive it too)."""

REASON_REPLICA_CONFLICT: Final = "InferenceReplicaConflict"
REASON_RUNTIME_UNRESOLVED: Final = "RuntimeUnresolved"
REASON_INVALID_TEMPLATE: Final = "InvalidTemplate"
EVENT_SPEC_INVALID: Final = "InvalidSpec"
"""The Warning event on a live InferenceService whose spec the models refuse (stored before
the webhook checked it, or with the webhook off)."""

MSG_SPEC_INVALID: Final = "Cannot read the InferenceService's spec; leaving it alone"
MSG_CREATED: Final = "Created InferenceReplica"
MSG_ADOPTED: Final = "Adopted InferenceReplica"
MSG_DELETING: Final = "Deleting InferenceReplica"
MSG_RELEASED: Final = "Released InferenceService"
