"""What the writes of the replica's ControllerRevisions and PodGroups share: how a failed
one is reported, the create, and the delete.

Why one home: a create that meets AlreadyExists is most often a repeat (the cache hasn't
shown the first yet), done unless the kind's own check of the object found says otherwise;
both kinds are deleted with the uid the cache showed as a precondition, so a delete that
meets NotFound or Conflict (gone, or replaced by a newer object of the name) is done; a write
refused by the API server (RBAC, an admission webhook, quota) is reported as a refusal, any
other error fails the pass.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from omed.controllers.inferencereplica.core.objectrefs import ObjectRef
from omed.controllers.refusals import RefusedWrite, refused_write
from omed.kube.api import KubeApi
from omed.kube.client import Resource
from omed.kube.errors import AlreadyExists, ApiError, Conflict, NotFound

log = logging.getLogger("omed.controllers.inferencereplica")

Failure = RefusedWrite | Exception | None
"""A write's result: None when done (or counted as done)."""


def failure(err: ApiError, *, verb: str, resource: Resource, name: str) -> RefusedWrite | Exception:
    """A refused write of ``resource`` (reported as such), or the error itself."""
    refusal = refused_write(err, verb=verb, resource=resource.plural, name=name)
    return refusal if refusal is not None else err


async def create(
    client: KubeApi,
    resource: Resource,
    *,
    namespace: str,
    name: str,
    body: Mapping[str, Any],
    taken: Callable[[AlreadyExists], Awaitable[Failure]] | None = None,
) -> Failure:
    """Create ``body``; one that exists already is done, or what ``taken`` finds it is."""
    try:
        await client.create(resource, body, namespace)
    except AlreadyExists as err:
        return None if taken is None else await taken(err)
    except ApiError as err:
        return failure(err, verb="create", resource=resource, name=name)
    log.debug("created %s %s/%s", resource.kind, namespace, name)
    return None


async def delete(client: KubeApi, resource: Resource, *, namespace: str, ref: ObjectRef) -> Failure:
    """Delete ``ref`` (uid precondition); gone or replaced counts as done."""
    try:
        await client.delete(resource, ref.name, namespace, uid=ref.uid)
    except (NotFound, Conflict):
        return None
    except ApiError as err:
        return failure(err, verb="delete", resource=resource, name=ref.name)
    log.debug("deleted %s %s/%s", resource.kind, namespace, ref.name)
    return None
