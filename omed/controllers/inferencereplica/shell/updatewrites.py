"""The executor's part of updates: in-place image patches and the release annotation.

Why: these two writes exist only for updates and retry blocks, and unlike every other write
they are JSON patches that *test* before they write, so a stale plan never hits a newer
object:

* :class:`~.actions.PatchPodImages` tests the pod's uid and each container's name at its
  position, then replaces the images and the ``ome.io/revision-hash`` label (pod name kept);
* :class:`~.actions.RemoveReleaseAnnotation` tests that the annotation still holds the
  released value, then removes it (a metadata patch; the status write that removed the
  Held block came first).

A failed test, a missing object or a conflict is not an error: the next pass looks again
(``"stale"``). A refusal for good (RBAC, a validation the patch can't pass) comes back as the
:class:`~omed.controllers.refusals.RefusedWrite` for the executor to report.
"""

from __future__ import annotations

import logging
from typing import Any, Literal

from omed.api.constants import ANNOTATION_RELEASE_HELD_REVISION, LABEL_REVISION_HASH
from omed.api.revision import revision_hash
from omed.controllers.inferencereplica.core.actions import PatchPodImages, RemoveReleaseAnnotation
from omed.controllers.refusals import RefusedWrite, failed_test, refused_write
from omed.kube.api import Patcher
from omed.kube.client import JSON_PATCH
from omed.kube.errors import ApiError
from omed.kube.resources import INFERENCE_REPLICAS, PODS

log = logging.getLogger("omed.controllers.inferencereplica")

Applied = Literal["applied", "stale"] | RefusedWrite
"""What became of a patch: sent, not applied to the object as it is now, or refused."""


def _pointer(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")


async def patch_pod_images(client: Patcher, *, namespace: str, action: PatchPodImages) -> Applied:
    """Send one in-place patch; ``"stale"`` when it didn't apply (look again soon)."""
    ops: list[dict[str, Any]] = [{"op": "test", "path": "/metadata/uid", "value": action.pod.uid}]
    for position, name, image in action.containers:
        path = f"/spec/containers/{position}"
        ops.append({"op": "test", "path": f"{path}/name", "value": name})
        ops.append({"op": "replace", "path": f"{path}/image", "value": image})
    # A pod made before upstream's labels keeps its stale ome.io/revision: the hash label wins.
    label = f"/metadata/labels/{_pointer(LABEL_REVISION_HASH)}"
    ops.append({"op": "add", "path": label, "value": revision_hash(action.revision)})
    try:
        await client.patch(PODS, action.pod.name, ops, namespace, content_type=JSON_PATCH)
    except ApiError as err:
        refusal = _refusal(err, resource=PODS.plural, name=action.pod.name)
        if refusal is not None:
            return refusal
        log.info("in-place patch of pod %s not applied: %s", action.pod.name, err)
        return "stale"
    return "applied"


async def remove_release_annotation(
    client: Patcher, *, namespace: str, name: str, action: RemoveReleaseAnnotation
) -> Applied:
    """Delete the release annotation while it still holds the released value."""
    path = f"/metadata/annotations/{_pointer(ANNOTATION_RELEASE_HELD_REVISION)}"
    ops = [{"op": "test", "path": path, "value": action.value}, {"op": "remove", "path": path}]
    try:
        await client.patch(INFERENCE_REPLICAS, name, ops, namespace, content_type=JSON_PATCH)
    except ApiError as err:
        refusal = _refusal(err, resource=INFERENCE_REPLICAS.plural, name=name)
        if refusal is not None:
            return refusal
        log.info("release annotation of %s/%s not removed: %s", namespace, name, err)
        return "stale"
    return "applied"


def _refusal(err: ApiError, *, resource: str, name: str) -> RefusedWrite | None:
    """A refusal for good; a failed ``test`` (the object moved on) is not one."""
    if failed_test(err):
        return None
    return refused_write(err, verb="patch", resource=resource, name=name)
