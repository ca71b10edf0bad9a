"""In-place updates: which pods can move to the update revision by patching images alone.

Why: InPlaceIfPossible and InPlaceOnly keep pod names, uids and node placement, so they
apply only when nothing but container images changed. Without the old template at hand,
the test is: the current runner templates, with each pod's own images put back, hash to
the pods' revision. Equal hash, equal templates but for images.

Invariant: pure; a patch names its pod by name and uid and each container by position and
name, so the executor's JSON patch can test them first.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from omed.controllers.inferencereplica.core.actions import PatchPodImages, PodRef
from omed.controllers.inferencereplica.core.model import ReplicaTarget, RunnerShape
from omed.controllers.inferencereplica.core.podtemplate import legacy_revision_of, revision_of
from omed.controllers.inferencereplica.core.work import InstanceWork


def in_place_patches(
    target: ReplicaTarget, inst: InstanceWork, *, operation_id: str
) -> tuple[PatchPodImages, ...] | None:
    """The image patches that move ``inst`` in place; None when more than images changed."""
    live = inst.facts.live
    if not live or not inst.facts.complete:
        return None
    revisions = {pod.revision for pod in live}
    if len(revisions) != 1:
        return None
    (pod_revision,) = revisions
    shapes: list[RunnerShape] = []
    for runner in target.runners:
        sample = next((pod for pod in live if pod.runner == runner.name), None)
        if sample is None:
            return None
        swapped = _with_images(runner.template, dict(sample.images))
        if swapped is None:
            return None
        shapes.append(RunnerShape(runner.name, runner.size, swapped))
    swapped_shapes = tuple(shapes)
    names = {
        revision_of(
            isvc=target.isvc,
            component=target.component,
            runners=swapped_shapes,
            owner_uid=target.hash_owner_uid,
            collision_count=cc,
        )
        for cc in range(target.collision_count + 1)
    }
    names.add(
        legacy_revision_of(isvc=target.isvc, component=target.component, runners=swapped_shapes)
    )
    if pod_revision not in names:
        return None
    patches = []
    for pod in live:
        if pod.revision == target.update_revision:
            continue
        runner_shape = target.runner(pod.runner or "")
        wanted = _images(runner_shape.template) if runner_shape is not None else {}
        changes = tuple(
            (position, name, wanted[name])
            for position, (name, image) in enumerate(pod.images)
            if name in wanted and wanted[name] != image
        )
        patches.append(
            PatchPodImages(
                index=inst.index,
                operation_id=operation_id,
                pod=PodRef(pod.name, pod.uid),
                revision=target.update_revision,
                containers=changes,
            )
        )
    return tuple(patches)


def _images(template: Mapping[str, Any]) -> dict[str, str]:
    containers = (template.get("spec") or {}).get("containers") or ()
    return {str(c.get("name")): str(c.get("image") or "") for c in containers}


def _with_images(template: Mapping[str, Any], images: dict[str, str]) -> dict[str, Any] | None:
    swapped = copy.deepcopy(dict(template))
    containers = (swapped.get("spec") or {}).get("containers") or []
    if {str(c.get("name")) for c in containers} != set(images):
        return None
    for container in containers:
        container["image"] = images[str(container.get("name"))]
    return swapped
