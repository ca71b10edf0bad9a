"""The ControllerRevision writes of a plan: the update revision's record, and retention.

Why apart: the record must exist before any pod of its revision (a pod is built from its
revision's data, and a later rollback or surge reads it back), so the executor sends it ahead
of the pod creations and holds them back when it fails. Retention deletes carry the uid as a
precondition, so a record made again under the same name is never deleted by an old decision.
"""

from __future__ import annotations

import logging

from omed.controllers.inferencereplica.core.model import ReplicaTarget
from omed.controllers.inferencereplica.core.podtemplate import owner_reference
from omed.controllers.inferencereplica.core.revisionactions import (
    AdoptControllerRevision,
    CreateControllerRevision,
    DeleteControllerRevision,
)
from omed.controllers.refusals import RefusedWrite, refused_write
from omed.kube.api import KubeApi
from omed.kube.errors import AlreadyExists, ApiError, Conflict, NotFound
from omed.kube.resources import CONTROLLER_REVISIONS

log = logging.getLogger("omed.controllers.inferencereplica")


def _failure(err: ApiError, *, verb: str, name: str) -> RefusedWrite | Exception:
    """A refused write of a ControllerRevision (reported as such), or the error itself."""
    refusal = refused_write(err, verb=verb, resource=CONTROLLER_REVISIONS.plural, name=name)
    return refusal if refusal is not None else err


async def record(
    client: KubeApi, *, namespace: str, action: CreateControllerRevision
) -> RefusedWrite | Exception | None:
    """Create the record; ``None`` when it exists now (created, or already there)."""
    try:
        await client.create(CONTROLLER_REVISIONS, action.body, namespace)
    except AlreadyExists:
        return None  # a repeat, or a collision the next pass sees in the cache
    except ApiError as err:
        return _failure(err, verb="create", name=action.name)
    return None


async def prune(
    client: KubeApi, *, namespace: str, action: DeleteControllerRevision
) -> RefusedWrite | Exception | None:
    """Delete an old record (uid precondition); gone or replaced counts as done."""
    try:
        await client.delete(CONTROLLER_REVISIONS, action.name, namespace, uid=action.uid)
    except (NotFound, Conflict):
        return None
    except ApiError as err:
        return _failure(err, verb="delete", name=action.name)
    log.debug("deleted ControllerRevision %s/%s", namespace, action.name)
    return None


async def adopt(
    client: KubeApi, *, target: ReplicaTarget, action: AdoptControllerRevision
) -> RefusedWrite | Exception | None:
    """Take an orphaned record over (uid and resourceVersion preconditions): a merge patch
    that adds the replica's controller reference. One changed since the cache counts as
    done here; the next pass judges it again."""
    patch = {
        "metadata": {
            "ownerReferences": [owner_reference(target)],
            "uid": action.uid,
            "resourceVersion": action.resource_version,
        }
    }
    try:
        await client.patch(CONTROLLER_REVISIONS, action.name, patch, target.namespace)
    except (NotFound, Conflict):
        return None
    except ApiError as err:
        return _failure(err, verb="patch", name=action.name)
    log.info("adopted ControllerRevision %s/%s", target.namespace, action.name)
    return None
