"""Does the writes of one :class:`~..core.actions.Decision` step, in order, and returns what
they came back with as the next :class:`~..core.model.Progress`.

It adds nothing to what the core decided: each write is sent as decided, and each answer is
told back as a value (the object the API server returned, a refusal, a stop). A write that
ends the pass (a Conflict or NotFound on a replica patch, an adoption a fresh read refuses)
stops the step there, so the writes after it aren't sent. The guards the core asked for (a
fresh read of the InferenceService before an adoption, a fresh list of the replicas before
the finalizer goes) are read here, just before their write. The log lines say what was done.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final

from omed.controllers.inferenceservice.core import names
from omed.controllers.inferenceservice.core.actions import (
    Action,
    AddFinalizer,
    AdoptReplica,
    CreateReplica,
    DeleteReplica,
    PatchReplica,
    RemoveFinalizer,
    WriteStatus,
)
from omed.controllers.inferenceservice.core.model import Progress
from omed.controllers.inferenceservice.core.owned import owned_by
from omed.controllers.inferenceservice.shell.read import read_replica, read_service
from omed.controllers.refusals import RefusedWrite, failed_test, refused_write
from omed.kube.client import JSON_PATCH, KubeClient
from omed.kube.errors import AlreadyExists, ApiError, Conflict, NotFound
from omed.kube.resources import INFERENCE_REPLICAS, INFERENCE_SERVICES
from omed.log import kv

log = logging.getLogger("omed.controllers.inferenceservice")


def _refusal(err: ApiError, *, verb: str, resource: str, name: str) -> RefusedWrite:
    """``err`` as a refusal, or ``err`` raised again when it is something else (the
    controller's other failures, a finalizer patch whose resourceVersion test failed
    included, are retried as errors)."""
    refusal = (
        None if failed_test(err) else refused_write(err, verb=verb, resource=resource, name=name)
    )
    if refusal is None:
        raise err
    return refusal


_REPLICA_WRITES: Final = (CreateReplica, AdoptReplica, PatchReplica, DeleteReplica)


class Executor:
    def __init__(self, *, client: KubeClient) -> None:
        self._client = client

    async def run(self, actions: tuple[Action, ...], progress: Progress) -> Progress:
        """Do ``actions`` in order; the progress after them."""
        handlers: dict[type, Callable[[Any, Progress], Awaitable[Progress]]] = {
            AddFinalizer: self._add_finalizer,
            RemoveFinalizer: self._remove_finalizer,
            CreateReplica: self._create,
            AdoptReplica: self._adopt,
            PatchReplica: self._patch,
            DeleteReplica: self._delete,
            WriteStatus: self._write_status,
        }
        for action in actions:
            handle = handlers.get(type(action))
            if handle is None:
                continue  # ReportRefusals: the reconciler reports, once the pass is over
            progress = await handle(action, progress)
            if progress.stop is not None:
                break
        if any(isinstance(a, _REPLICA_WRITES) for a in actions):
            progress = dataclasses.replace(progress, replicas_done=True)
        return progress

    @staticmethod
    def _refused(progress: Progress, refusal: RefusedWrite) -> Progress:
        return dataclasses.replace(progress, refusals=(*progress.refusals, refusal))

    @classmethod
    def _refused_replica(
        cls, progress: Progress, err: ApiError, *, verb: str, name: str
    ) -> Progress:
        refusal = _refusal(err, verb=verb, resource=INFERENCE_REPLICAS.plural, name=name)
        return cls._refused(progress, refusal)

    async def _patch_service(
        self, namespace: str, name: str, patch: list[dict[str, Any]]
    ) -> Mapping[str, Any] | None:
        try:
            patched: Mapping[str, Any] = await self._client.patch(
                INFERENCE_SERVICES, name, patch, namespace, content_type=JSON_PATCH
            )
        except NotFound:
            return None
        return patched

    async def _add_finalizer(self, action: AddFinalizer, progress: Progress) -> Progress:
        try:
            patched = await self._patch_service(action.namespace, action.name, action.patch)
        except ApiError as err:
            refusal = _refusal(
                err, verb="patch", resource=INFERENCE_SERVICES.plural, name=action.name
            )
            return dataclasses.replace(self._refused(progress, refusal), finalizer="refused")
        if patched is None:
            return dataclasses.replace(progress, finalizer="gone")
        return dataclasses.replace(progress, finalizer="added", service=read_service(patched))

    async def _remove_finalizer(self, action: RemoveFinalizer, progress: Progress) -> Progress:
        # The caches said none is left: confirm with the API server before letting go.
        listed = await self._client.list_page(
            INFERENCE_REPLICAS, action.namespace, labelSelector=action.label_selector
        )
        if any(owned_by(read_replica(i), action.uid) for i in listed.get("items") or []):
            return dataclasses.replace(progress, finalizer="held")
        try:
            await self._patch_service(action.namespace, action.name, action.patch)
        except ApiError as err:
            refusal = _refusal(
                err, verb="patch", resource=INFERENCE_SERVICES.plural, name=action.name
            )
            return dataclasses.replace(self._refused(progress, refusal), finalizer="refused")
        log.info(names.MSG_RELEASED, extra=kv(namespace=action.namespace, name=action.name))
        return dataclasses.replace(progress, finalizer="released")

    async def _create(self, action: CreateReplica, progress: Progress) -> Progress:
        try:
            await self._client.create(INFERENCE_REPLICAS, action.body, action.namespace)
            log.info(
                names.MSG_CREATED,
                extra=kv(namespace=action.namespace, inferenceReplica=action.name),
            )
        except AlreadyExists:
            pass  # the cache is behind; the next pass compares
        except ApiError as err:
            return self._refused_replica(progress, err, verb="create", name=action.name)
        return progress

    async def _adopt(self, action: AdoptReplica, progress: Progress) -> Progress:
        """Make the service the controller of a replica of its name that no controller owns
        (an earlier InferenceService of the name was deleted with propagationPolicy Orphan):
        the patch that sets the wanted spec also sets the controller reference. Nothing is
        adopted when a fresh read shows the service being deleted or replaced."""
        try:
            fresh = await self._client.get(
                INFERENCE_SERVICES, action.service_name, action.namespace
            )
        except NotFound:
            return dataclasses.replace(progress, stop="poll")
        fresh_meta = fresh.get("metadata") or {}
        if fresh_meta.get("uid") != action.service_uid or fresh_meta.get("deletionTimestamp"):
            return dataclasses.replace(progress, stop="poll")  # going away: look again
        after = await self._patch(
            PatchReplica(action.namespace, action.name, action.patch), progress
        )
        if action.name in after.written:
            log.info(
                names.MSG_ADOPTED,
                extra=kv(namespace=action.namespace, inferenceReplica=action.name),
            )
        return after

    async def _patch(self, action: PatchReplica, progress: Progress) -> Progress:
        try:
            patched = await self._client.patch(
                INFERENCE_REPLICAS, action.name, action.patch, action.namespace
            )
        except (Conflict, NotFound):
            # Moved on, or gone meanwhile (the next pass creates it).
            return dataclasses.replace(progress, stop="requeue")
        except ApiError as err:
            return self._refused_replica(progress, err, verb="patch", name=action.name)
        return dataclasses.replace(
            progress, written={**progress.written, action.name: read_replica(patched)}
        )

    async def _delete(self, action: DeleteReplica, progress: Progress) -> Progress:
        try:
            await self._client.delete(
                INFERENCE_REPLICAS, action.name, action.namespace, uid=action.uid
            )
            log.info(
                names.MSG_DELETING,
                extra=kv(namespace=action.namespace, inferenceReplica=action.name),
            )
        except (NotFound, Conflict):
            pass
        except ApiError as err:
            progress = self._refused_replica(progress, err, verb="delete", name=action.name)
        return dataclasses.replace(progress, deletes_done=True)

    async def _write_status(self, action: WriteStatus, progress: Progress) -> Progress:
        """On Conflict a newer object is on its way through the informer, and its event
        brings the next pass; a refusal can be told only by the event and the log."""
        try:
            await self._client.replace_status(INFERENCE_SERVICES, action.body, action.namespace)
        except (Conflict, NotFound):
            return dataclasses.replace(progress, status="failed")
        except ApiError as err:
            refusal = _refusal(
                err, verb="update", resource=f"{INFERENCE_SERVICES.plural}/status", name=action.name
            )
            return dataclasses.replace(self._refused(progress, refusal), status="failed")
        return dataclasses.replace(progress, status="written")
