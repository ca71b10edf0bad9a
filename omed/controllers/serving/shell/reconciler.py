"""One pass of the serving controller: the caches and the config into the core, its writes out.

Level-triggered: a pass reads the InferenceReplica, its pods, the Services and the
PodDisruptionBudget as the caches hold them, and the ``podDisruptionBudget`` entry through the
config cache, whatever woke it; a pass that finds everything as wanted writes nothing.
A create the caches don't show yet is expected (:mod:`.expectations`): the pass neither
sends it again nor reports its name, and looks again when the expectation would expire (the
object's add event wakes the key sooner).

The entry is read on every pass (an edit applies the next time each component is
reconciled, within the cache's TTL, as for every reconcile-time entry). An entry that can't
be used is logged once per distinct text, at ERROR, and each PodDisruptionBudget is kept as
it is until the entry is fixed; the Services are reconciled as usual.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from omed.clock import Clock, RealClock
from omed.config.disruption import disruption_budget_entry
from omed.config.reconcile import ReconcileConfigError
from omed.controllers.refusals import report
from omed.controllers.serving.core import names
from omed.controllers.serving.core.decide import decide
from omed.controllers.serving.core.model import BUDGET_INVALID, BudgetSetting, Observed
from omed.controllers.serving.core.observe import (
    component_of,
    revision_selectors,
    runner_labelled,
)
from omed.controllers.serving.core.wanted import base_of
from omed.controllers.serving.shell.executor import Executor
from omed.controllers.serving.shell.expectations import CreateExpectations, Name
from omed.events import EventSink
from omed.informers import OWNER_UID, IndexedStore
from omed.kube.api import KubeApi
from omed.log import kv
from omed.workqueue import Result

log = logging.getLogger("omed.controllers.serving")

COMPONENT = "component"
"""Index of Services by ``namespace/<ome.io/inferenceservice>/<component>`` labels."""

ConfigData = Callable[[], Awaitable[Mapping[str, str]]]

MIN_EXPECTATION_WAIT = 0.05
"""Seconds: the shortest look-again while a create is expected (never a busy loop)."""


class ServingReconciler:
    def __init__(
        self,
        *,
        client: KubeApi,
        replicas: IndexedStore,
        pods: IndexedStore,
        services: IndexedStore,
        budgets: IndexedStore,
        config: ConfigData,
        events: EventSink | None = None,
        requeues: Callable[[str], int] = lambda _key: 0,
        clock: Clock | None = None,
    ) -> None:
        self.expectations = CreateExpectations(clock=clock or RealClock())
        self._executor = Executor(client=client, expectations=self.expectations)
        self._replicas = replicas
        self._pods = pods
        self._services = services
        self._budgets = budgets
        self._config = config
        self._report = functools.partial(report, events=events, logger=log)
        self._requeues = requeues
        self._invalid_entry: str | None = None
        """The text of the last unusable entry logged (said once until it changes)."""
        self._taken: dict[str, frozenset[tuple[str, str]]] = {}
        """Per key, the taken names last logged (said once while they stay taken)."""

    async def _budget_setting(self) -> BudgetSetting:
        data = await self._config()
        try:
            setting = disruption_budget_entry(data)
        except ReconcileConfigError as err:
            if self._invalid_entry != str(err):
                self._invalid_entry = str(err)
                log.error(names.LogLine.PDB_ENTRY_INVALID, extra=kv(error=str(err)))
            return BUDGET_INVALID
        self._invalid_entry = None
        return setting

    def _observe(self, raw: Mapping[str, Any], setting: BudgetSetting) -> Observed | None:
        component = component_of(raw)
        if component is None:
            return None
        ns = component.namespace
        services: dict[str, Mapping[str, Any]] = {}
        identity = f"{ns}/{component.isvc}/{component.component}"
        for obj in (
            *self._services.by_index(COMPONENT, identity),
            *self._services.by_index(OWNER_UID, component.uid),
        ):
            services[str(obj["metadata"]["name"])] = obj
        pods = self._pods.by_index(OWNER_UID, component.uid)
        return Observed(
            component=component,
            revisions=revision_selectors(pods),
            runner_labelled=runner_labelled(pods),
            services=services,
            budget=self._budgets.get(f"{ns}/{base_of(component)}"),
            budget_setting=setting,
        )

    async def reconcile(self, key: str) -> Result:
        raw = self._replicas.get(key)
        if raw is None:
            self._taken.pop(key, None)
            self.expectations.forget(key)
            return Result()  # gone: the garbage collector removes what it owned
        observed = self._observe(raw, await self._budget_setting())
        if observed is None:
            return Result()
        services, budget = observed.services, observed.budget

        def shown(name: Name) -> bool:
            kind, object_name = name
            if kind == "Service":
                return object_name in services
            return budget is not None and (budget.get("metadata") or {}).get("name") == object_name

        creating = self.expectations.outstanding(key, shown)
        observed = dataclasses.replace(observed, creating=creating)
        decision = decide(observed)
        outcome = await self._executor.run(
            observed.component.namespace,
            decision.actions,
            replica=observed.component.name,
            key=key,
        )
        taken = frozenset((*decision.taken, *outcome.taken))
        for kind, name in sorted(taken - self._taken.get(key, frozenset())):
            log.warning(names.LogLine.NAME_TAKEN, extra=kv(key=key, kind=kind, name=name))
        if taken:
            self._taken[key] = taken
        else:
            self._taken.pop(key, None)
        if outcome.refusals:
            self._report(outcome.refusals, key=key, involved=raw, requeues=self._requeues(key))
            return Result(requeue=True)
        if outcome.moved or outcome.taken:
            return Result(requeue=True)
        if creating:
            wait = self.expectations.remaining(key)
            return Result(requeue_after=max(wait, MIN_EXPECTATION_WAIT))
        return Result()
