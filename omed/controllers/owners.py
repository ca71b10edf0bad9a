"""Owner references: which one is an object's controller, and the one omed writes.

Why one module: both controllers, their cores and their shells read "who controls this
object" off cached JSON (to route a pod's event to its InferenceReplica, to tell an orphan
from a left-over, to adopt), and write the reference that makes omed an object's
controller. Read the same way everywhere, a pod is never adopted by one path and drained by
another.

Invariant: an object has at most one controller reference (the API server refuses a
second), so the first found is the one.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from omed.api.constants import API_VERSION


def controller_ref(obj: Mapping[str, Any], *, kind: str | None = None) -> Mapping[str, Any] | None:
    """``obj``'s controller owner reference (of ``kind`` when given), if it has one."""
    for ref in (obj.get("metadata") or {}).get("ownerReferences") or ():
        if ref.get("controller") and (kind is None or ref.get("kind") == kind):
            return ref  # type: ignore[no-any-return]
    return None


def controller_uid(obj: Mapping[str, Any], *, kind: str) -> str | None:
    """The uid of ``obj``'s controller owner reference of ``kind``, if any."""
    ref = controller_ref(obj, kind=kind)
    uid = ref.get("uid") if ref is not None else None
    return str(uid) if uid else None


def controller_name(obj: Mapping[str, Any], *, kind: str) -> str | None:
    """The name in ``obj``'s controller owner reference of ``kind``, if any."""
    ref = controller_ref(obj, kind=kind)
    name = ref.get("name") if ref is not None else None
    return str(name) if name else None


def controller_reference(*, kind: str, name: str, uid: str) -> dict[str, Any]:
    """The reference that makes the ``kind`` object ``name`` (``uid``) the controller of an
    object, holding its deletion back while the garbage collector deletes in the foreground."""
    return {
        "apiVersion": API_VERSION,
        "kind": kind,
        "name": name,
        "uid": uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }
