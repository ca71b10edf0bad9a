"""The PodGroup writes of a plan: creates, patches and deletes.

Why apart: the core holds a gang's pods back until the cache shows its PodGroup, so these
writes need no ordering guard of their own beyond going ahead of the pod creations; what they
must get right is which answers count as done. A create that meets ``AlreadyExists`` is a
repeat (the cache hasn't shown the first yet) and is done, unless the object read back is
another controller's (one without OMENative labels never reaches the label-scoped cache): that
create fails the pass, and the key backs off.
A patch carries the resourceVersion it was decided on: a ``Conflict`` is a newer object the
next pass decides about again. A delete carries the uid: gone or replaced counts as done.
"""

from __future__ import annotations

from omed.api.constants import KIND_INFERENCE_REPLICA
from omed.controllers.inferencereplica.core.podgroupactions import (
    CreatePodGroup,
    DeletePodGroup,
    UpdatePodGroup,
)
from omed.controllers.inferencereplica.shell import objectwrites
from omed.controllers.inferencereplica.shell.objectwrites import Failure
from omed.controllers.owners import controller_uid
from omed.kube.api import KubeApi
from omed.kube.errors import AlreadyExists, ApiError, Conflict, NotFound
from omed.kube.resources import POD_GROUPS


async def create(client: KubeApi, *, namespace: str, action: CreatePodGroup) -> Failure:
    """Create an Instance's PodGroup; ``None`` when it exists now."""

    async def taken(err: AlreadyExists) -> Failure:
        return await _taken(client, namespace=namespace, action=action, err=err)

    return await objectwrites.create(
        client, POD_GROUPS, namespace=namespace, name=action.name, body=action.body, taken=taken
    )


async def _taken(
    client: KubeApi, *, namespace: str, action: CreatePodGroup, err: AlreadyExists
) -> Failure:
    """A repeat (ours, not in the cache yet) is done; another controller's object is the
    pass's error, so the key backs off instead of trying every second."""
    try:
        existing = await client.get(POD_GROUPS, action.name, namespace)
    except NotFound:
        return None  # gone meanwhile: the next pass creates it
    except ApiError as read:
        return read
    refs = (action.body.get("metadata") or {}).get("ownerReferences") or [{}]
    if controller_uid(existing, kind=KIND_INFERENCE_REPLICA) == refs[0].get("uid"):
        return None
    return err


async def update(client: KubeApi, *, namespace: str, action: UpdatePodGroup) -> Failure:
    """Patch a PodGroup to what it should be; a newer or deleted object counts as done."""
    try:
        await client.patch(POD_GROUPS, action.name, action.patch, namespace)
    except (NotFound, Conflict):
        return None
    except ApiError as err:
        return objectwrites.failure(err, verb="patch", resource=POD_GROUPS, name=action.name)
    return None


async def delete(client: KubeApi, *, namespace: str, action: DeletePodGroup) -> Failure:
    """Delete a PodGroup (uid precondition); gone or replaced counts as done."""
    return await objectwrites.delete(client, POD_GROUPS, namespace=namespace, ref=action)
