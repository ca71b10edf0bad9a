"""Writes one row to an InferenceService's audit ledger (:mod:`.document`).

Why a module of its own: the ledger is shared by every writer of audit rows (force deletes
now, migrations later), each from its own controller pass; what they share is the one way
to write it safely. A row is written by a read of the ConfigMap, the row added to what the
read holds (:func:`~.document.with_entry`), and a create (none yet) or an update that carries
the resourceVersion of the read: a compare-and-swap, so two writers never lose each other's
rows. A Conflict, or AlreadyExists from a create race, reads again, at most
:data:`ATTEMPTS` times; then :class:`~omed.kube.errors.Conflict` goes to the caller, whose
pass is retried. The label and the controller reference to the InferenceService are set on
every write (a foreign or stale controller reference is replaced), so the garbage collector
removes the ledger with the service.

A ledger whose document can't be read (:class:`~.document.LedgerUnreadable`) is not
overwritten: the error goes to the caller.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from omed.api.constants import LABEL_MANAGED_BY, MANAGED_BY_OME_NATIVE
from omed.controllers.ledger.document import (
    LedgerEntry,
    Owner,
    configmap_body,
    ledger_name,
    owned_by,
    read_entries,
    updated_configmap,
    with_entry,
)
from omed.kube.api import ObjectWriter
from omed.kube.errors import AlreadyExists, Conflict, NotFound
from omed.kube.resources import CONFIGMAPS

ATTEMPTS: Final = 3


LedgerClient = ObjectWriter
"""The reads and writes the ledger takes: get, create and replace of its ConfigMap."""


def _current(existing: Mapping[str, Any], owner: Owner) -> bool:
    meta = existing.get("metadata") or {}
    labels = meta.get("labels") or {}
    managed = labels.get(LABEL_MANAGED_BY) == MANAGED_BY_OME_NATIVE
    return managed and owned_by(meta.get("ownerReferences") or (), owner)


async def write_entry(
    client: LedgerClient, *, namespace: str, owner: Owner, entry: LedgerEntry
) -> None:
    """Write ``entry`` to ``owner``'s ledger in ``namespace`` (see the module docstring)."""
    name = ledger_name(owner.name)
    for _ in range(ATTEMPTS):
        try:
            existing = await client.get(CONFIGMAPS, name, namespace)
        except NotFound:
            fresh = with_entry([], entry) or []
            try:
                await client.create(
                    CONFIGMAPS,
                    configmap_body(namespace=namespace, owner=owner, rows=fresh),
                    namespace,
                )
            except AlreadyExists:
                continue  # another writer created it first: add to theirs
            return
        rows_before = read_entries(existing.get("data"))
        rows = with_entry(rows_before, entry)
        if rows is None and _current(existing, owner):
            return  # already written, by an earlier try of this write
        body = updated_configmap(
            existing, owner=owner, rows=rows if rows is not None else rows_before
        )
        try:
            await client.replace(CONFIGMAPS, body, namespace)
        except Conflict:
            continue
        return
    raise Conflict(409, "Conflict", f"configmaps {name!r}: still changing after {ATTEMPTS} tries")


__all__ = ["ATTEMPTS", "LedgerClient", "write_entry"]
