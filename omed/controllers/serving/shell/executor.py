"""Sends the serving core's writes, as decided, and says how each came back.

Every write names the InferenceReplica's own objects only (the core chose them), so the
answers are few: each create is first expected (:mod:`.expectations`), so no pass sends one
its cache can't show yet; ``AlreadyExists`` on a create then means the name is taken by an
object the label-scoped cache doesn't show (reported as taken), Conflict and NotFound mean
the object moved on (the next pass compares again), and a refusal for good (RBAC, a
webhook, a policy: :mod:`omed.controllers.refusals`) is handed back to be reported.
Anything else raises: the pass fails and the workqueue backs it off.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Final

from omed.controllers.refusals import RefusedWrite, refused_write
from omed.controllers.serving.core import names
from omed.controllers.serving.core.actions import Action, Create, Delete, Kind, Patch
from omed.controllers.serving.shell.expectations import CreateExpectations
from omed.kube.api import KubeApi
from omed.kube.client import Resource
from omed.kube.errors import AlreadyExists, ApiError, Conflict, NotFound
from omed.kube.resources import POD_DISRUPTION_BUDGETS, SERVICES
from omed.log import kv

log = logging.getLogger("omed.controllers.serving")

RESOURCES: Final[dict[Kind, Resource]] = {
    "Service": SERVICES,
    "PodDisruptionBudget": POD_DISRUPTION_BUDGETS,
}


@dataclass
class Outcome:
    """What one pass's writes came back with."""

    refusals: list[RefusedWrite] = field(default_factory=list)
    taken: list[tuple[Kind, str]] = field(default_factory=list)
    moved: bool = False
    """A write met a Conflict or NotFound: look again soon."""


class Executor:
    def __init__(self, *, client: KubeApi, expectations: CreateExpectations) -> None:
        self._client = client
        self._expectations = expectations

    async def run(
        self, namespace: str, actions: tuple[Action, ...], *, replica: str, key: str
    ) -> Outcome:
        outcome = Outcome()
        for action in actions:
            resource = RESOURCES[action.kind]
            fields = kv(namespace=namespace, kind=action.kind, name=action.name, owner=replica)
            try:
                if isinstance(action, Create):
                    self._expectations.expect(key, (action.kind, action.name))
                    try:
                        await self._client.create(resource, action.body, namespace)
                    except BaseException:
                        self._expectations.failed(key, (action.kind, action.name))
                        raise
                    self._expectations.sent(key, (action.kind, action.name))
                    log.info(names.LogLine.CREATED, extra=fields)
                elif isinstance(action, Patch):
                    await self._client.patch(resource, action.name, action.patch, namespace)
                    log.info(
                        names.LogLine.ADOPTED if action.adopt else names.LogLine.UPDATED,
                        extra=fields,
                    )
                elif isinstance(action, Delete):
                    await self._client.delete(resource, action.name, namespace, uid=action.uid)
                    fields["kv"]["reason"] = action.reason
                    log.info(names.LogLine.DELETED, extra=fields)
            except AlreadyExists:
                outcome.taken.append((action.kind, action.name))
            except (Conflict, NotFound):
                outcome.moved = True
            except ApiError as err:
                verb = type(action).__name__.lower()
                refusal = refused_write(err, verb=verb, resource=resource.plural, name=action.name)
                if refusal is None:
                    raise
                outcome.refusals.append(refusal)
        return outcome
