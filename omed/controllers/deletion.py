"""How an object is being deleted, read off the finalizers the API server puts on it.

Why: a cluster has a garbage collector (kube-controller-manager's), and every delete request
says what it should do with the object's dependents (``propagationPolicy``). The API server
records that choice on the object as a finalizer of the collector's, in the same write that
sets ``deletionTimestamp``:

* ``orphan`` (Orphan): the collector takes the dependents' owner references off and leaves
  them running, then removes the finalizer;
* ``foregroundDeletion`` (Foreground): the collector deletes the dependents first (at once,
  with no regard for anything else holding the owner), and removes the finalizer once no
  dependent with ``blockOwnerDeletion`` is left;
* nothing (Background, the default for custom resources): the collector deletes the
  dependents once the owner is gone from the API server, so an owner held by a finalizer of
  omed's keeps its dependents until omed lets it go.

Both controllers read the choice here, so an Orphan deletion is honoured the same way for
an InferenceService's replicas and for an InferenceReplica's pods (docs/controllers.md,
"Deletion and the garbage collector").
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from omed.controllers.owners import controller_ref

FINALIZER_ORPHAN: Final = "orphan"
"""metav1.FinalizerOrphanDependents: deleted with ``propagationPolicy: Orphan``."""
FINALIZER_FOREGROUND: Final = "foregroundDeletion"
"""metav1.FinalizerDeleteDependents: deleted with ``propagationPolicy: Foreground``."""


def orphaning(obj: Mapping[str, Any]) -> bool:
    """Whether ``obj`` is being deleted with its dependents to be orphaned."""
    meta = obj.get("metadata") or {}
    return bool(meta.get("deletionTimestamp")) and FINALIZER_ORPHAN in (
        meta.get("finalizers") or ()
    )


__all__ = ["FINALIZER_FOREGROUND", "FINALIZER_ORPHAN", "controller_ref", "orphaning"]
