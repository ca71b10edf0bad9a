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
from omed.controllers.inferencereplica.shell import objectwrites
from omed.controllers.inferencereplica.shell.objectwrites import Failure
from omed.kube.api import KubeApi
from omed.kube.errors import ApiError, Conflict, NotFound
from omed.kube.resources import CONTROLLER_REVISIONS

log = logging.getLogger("omed.controllers.inferencereplica")


async def record(client: KubeApi, *, namespace: str, action: CreateControllerRevision) -> Failure:
    """Create the record; ``None`` when it exists now (created, or already there: a repeat,
    or a collision the next pass sees in the cache)."""
    return await objectwrites.create(
        client, CONTROLLER_REVISIONS, namespace=namespace, name=action.name, body=action.body
    )


async def prune(client: KubeApi, *, namespace: str, action: DeleteControllerRevision) -> Failure:
    """Delete an old record (uid precondition); gone or replaced counts as done."""
    return await objectwrites.delete(client, CONTROLLER_REVISIONS, namespace=namespace, ref=action)


async def adopt(
    client: KubeApi, *, target: ReplicaTarget, action: AdoptControllerRevision
) -> Failure:
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
        return objectwrites.failure(
            err, verb="patch", resource=CONTROLLER_REVISIONS, name=action.name
        )
    log.info("adopted ControllerRevision %s/%s", target.namespace, action.name)
    return None
