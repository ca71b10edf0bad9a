"""The InferenceReplica controller: the Instances of one OMENative component.

observe (:mod:`.observe`) -> plan (:mod:`.plan`, pure) -> execute (:mod:`.execute`), wired to
the informers and a worker pool by :mod:`.controller`. docs/controllers.md describes every
rule and every decision the product pages leave open.

Invariant of the package: every multi-step Instance operation is recorded in the Instance's
row before its first side effect, so a manager killed at any point resumes it, without a
duplicate pod and without losing a delete.
"""

from omed.controllers.inferencereplica.actions import Plan, ScaleDownWave
from omed.controllers.inferencereplica.controller import (
    InferenceReplicaController,
    InferenceReplicaReconciler,
)
from omed.controllers.inferencereplica.model import ObservedState, PlanSettings, ReplicaTarget
from omed.controllers.inferencereplica.names import FINALIZER, MSG_SCALE_DOWN_WAVE
from omed.controllers.inferencereplica.plan import plan
from omed.controllers.inferencereplica.status import (
    RowsUnreadable,
    decode_rows_from_status,
    encode_rows_into_status,
)

__all__ = [
    "FINALIZER",
    "MSG_SCALE_DOWN_WAVE",
    "InferenceReplicaController",
    "InferenceReplicaReconciler",
    "ObservedState",
    "Plan",
    "PlanSettings",
    "ReplicaTarget",
    "RowsUnreadable",
    "ScaleDownWave",
    "decode_rows_from_status",
    "encode_rows_into_status",
    "plan",
]
