"""The reads and writes behind adoption and the draining of left-over pods.

Why: which pods an InferenceReplica adopts, and which left-over pods it drains, is the
core's decision (:mod:`..core.orphans`), made from the cache; acting on it needs the API
server's word first, because the garbage collector changes owner references behind the
cache (docs/controllers.md, "Deletion and the garbage collector").

Invariants:

* a fresh read of the InferenceReplica comes first: one that is being deleted (or was
  replaced meanwhile) adopts nothing, so an adopted pod is never torn down by an owner that
  was already going away;
* the adoption patch carries the pod's uid and resourceVersion, so a pod that changed since
  the cache showed it isn't adopted; the next pass looks again;
* a left-over pod is drained only when a fresh list from the API server still shows it
  (same uid) controlled by an InferenceReplica of that name and another uid: the cache may
  still show a reference the collector has already taken off (an Orphan deletion), and such
  a pod is to be adopted, never drained.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from omed.controllers.inferencereplica.core.model import ReplicaTarget
from omed.controllers.inferencereplica.core.orphans import adoption_patch, selectors_of, still_held
from omed.controllers.refusals import RefusedWrite, refused_write, uid_changed
from omed.kube.api import KubeApi
from omed.kube.errors import ApiError, Conflict, NotFound
from omed.kube.resources import INFERENCE_REPLICAS, PODS

WRITE_CONCURRENCY: Final = 16
"""Adoption patches one pass keeps in flight at once (the client's limiter paces them)."""


@dataclass
class Adoption:
    """What one adoption pass did."""

    adopted: list[str] = field(default_factory=list)
    """Names of the pods now controlled by the InferenceReplica."""
    retry: bool = False
    """A pod changed or went since the cache showed it: look again soon."""
    refused: list[RefusedWrite] = field(default_factory=list)
    errors: list[Exception] = field(default_factory=list)


async def adopt(
    client: KubeApi, *, target: ReplicaTarget, pods: Sequence[Mapping[str, Any]]
) -> Adoption:
    """Make ``target`` the controller of ``pods`` (from :func:`adoptable`), unless a fresh read
    shows it deleted, being deleted, or replaced by another of its name."""
    outcome = Adoption()
    try:
        fresh = await client.get(INFERENCE_REPLICAS, target.name, target.namespace)
    except NotFound:
        return outcome
    meta = fresh.get("metadata") or {}
    if meta.get("uid") != target.uid or meta.get("deletionTimestamp"):
        return outcome
    semaphore = asyncio.Semaphore(WRITE_CONCURRENCY)

    async def one(pod: Mapping[str, Any]) -> None:
        name = str(pod["metadata"].get("name"))
        async with semaphore:
            try:
                await client.patch(PODS, name, adoption_patch(target, pod), target.namespace)
            except (Conflict, NotFound):
                outcome.retry = True
                return
            except ApiError as err:
                if uid_changed(err):  # another pod holds the name now
                    outcome.retry = True
                    return
                refusal = refused_write(err, verb="patch", resource=PODS.plural, name=name)
                if refusal is None:
                    outcome.errors.append(err)
                else:
                    outcome.refused.append(refusal)
                return
        outcome.adopted.append(name)

    await asyncio.gather(*(one(pod) for pod in pods))
    outcome.adopted.sort()
    return outcome


@dataclass(frozen=True)
class Leftovers:
    """Cached pods re-read from the API server before they are drained."""

    pods: tuple[Mapping[str, Any], ...]
    """As the API server has them, still controlled by an earlier (or gone) InferenceReplica
    of the name: to be drained."""
    unowned: bool
    """Some are owned by no controller any more (the collector orphaned them): to be adopted
    by the InferenceReplica of the name, if there is one."""


async def leftovers(
    client: KubeApi,
    *,
    namespace: str,
    replica: str,
    pods: Sequence[Mapping[str, Any]],
    current_uid: str | None,
) -> Leftovers:
    """Of ``pods`` (cached pods whose controller reference names the InferenceReplica
    ``replica``), those a fresh list still shows controlled by an InferenceReplica of that
    name whose uid isn't ``current_uid`` (``None``: the InferenceReplica is gone, any uid)."""
    fresh: dict[str, Mapping[str, Any]] = {}
    for selector in selectors_of(pods):
        for pod in await client.list_all(PODS, namespace, labelSelector=selector):
            fresh[str((pod.get("metadata") or {}).get("uid"))] = pod
    kept, orphaned = still_held(pods, fresh, replica=replica, current_uid=current_uid)
    return Leftovers(pods=kept, unowned=orphaned)


__all__ = ["Adoption", "Leftovers", "adopt", "leftovers"]
