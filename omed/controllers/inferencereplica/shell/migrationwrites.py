"""The writes of migrations beyond the InferenceReplica: audit rows and consumed requests.

Why a module of its own: both leave the replica's own objects (the InferenceService's audit
ConfigMap, its annotations), and the executor runs them at fixed points of its order: audit
rows before the status write (a record never says more than its row), consumed requests after
it (a request leaves the mailbox only once its record or rejection is stored; a crash between
the two re-delivers it, which the record answers).
"""

from __future__ import annotations

from typing import Any

from omed.controllers.inferencereplica.core.migrationactions import (
    ConsumeMigrationRequests,
    WriteAuditRow,
)
from omed.controllers.ledger import document as ledger
from omed.controllers.ledger.writer import write_entry
from omed.controllers.refusals import RefusedWrite, refused_write
from omed.kube.api import KubeApi
from omed.kube.client import MERGE_PATCH
from omed.kube.errors import ApiError, NotFound
from omed.kube.resources import CONFIGMAPS, INFERENCE_SERVICES


async def write_audit_row(
    client: KubeApi, *, namespace: str, action: WriteAuditRow
) -> RefusedWrite | None:
    """Write one row (a compare-and-swap, :mod:`omed.controllers.ledger.writer`); a refusal
    is returned, Conflict and other errors raised (the pass stops and is retried)."""
    owner = ledger.Owner(name=action.isvc, uid=action.uid)
    try:
        await write_entry(client, namespace=namespace, owner=owner, entry=action.entry)
    except ApiError as err:
        refusal = refused_write(
            err, verb="update", resource=CONFIGMAPS.plural, name=ledger.ledger_name(action.isvc)
        )
        if refusal is None:
            raise
        return refusal
    return None


async def consume_requests(
    client: KubeApi, *, namespace: str, action: ConsumeMigrationRequests
) -> RefusedWrite | None:
    """Remove the consumed request annotations (a merge patch setting each to null: removing
    one already gone is no change, so a repeat needs no read)."""
    patch: dict[str, Any] = {"metadata": {"annotations": dict.fromkeys(action.keys)}}
    try:
        await client.patch(
            INFERENCE_SERVICES, action.isvc, patch, namespace, content_type=MERGE_PATCH
        )
    except NotFound:
        return None
    except ApiError as err:
        refusal = refused_write(
            err, verb="patch", resource=INFERENCE_SERVICES.plural, name=action.isvc
        )
        if refusal is None:
            raise
        return refusal
    return None
