"""The controllers the leader runs, as a list of factories.

Why: the manager must not know how each controller is wired (which informers, which
settings, which config entries); it knows only that a controller is built from the shared
parts, runs until shut down, and can drain. A new controller is one more entry in
:data:`CONTROLLERS`, built from :class:`ControllerContext`.

Invariant: a factory only *builds*: it registers its informers and handlers with
``context.informers`` and returns a controller whose workers have not started. The manager
starts the informers once every controller is built, waits for their caches, and only then
calls :meth:`ManagedController.run`, so no reconcile ever reads a cache that hasn't synced.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from omed.clock import Clock
from omed.config import (
    ConfigCache,
    LifecycleConfig,
    Options,
    StartupConfig,
    deploy_entry,
    lifecycle_entry,
)
from omed.controllers.inferencereplica.core.encoding import StatusEncodingSettings
from omed.controllers.inferencereplica.core.model import PlanSettings
from omed.controllers.inferencereplica.shell.controller import InferenceReplicaController
from omed.controllers.inferenceservice.shell.controller import InferenceServiceController
from omed.controllers.runtimerevision.shell.controller import RuntimeRevisionController
from omed.controllers.serving.shell.controller import ServingController
from omed.events import EventSink
from omed.informers import InformerFactory
from omed.kube.client import KubeClient

__all__ = ["CONTROLLERS", "ControllerContext", "ControllerFactory", "ManagedController"]


@dataclass(frozen=True, kw_only=True)
class ControllerContext:
    """The shared parts a controller is built from."""

    client: KubeClient
    """The controllers' API client: ``--kube-api-qps`` / ``--kube-api-burst``."""
    informers: InformerFactory
    events: EventSink
    config: ConfigCache
    """The ``inferenceservice-config`` ConfigMap through the ``--config-cache-ttl`` cache."""
    startup: StartupConfig
    options: Options
    clock: Clock
    namespace: str
    """The manager's namespace (``POD_NAMESPACE``): where runtime revisions live."""
    pod_groups: bool = False
    """The PodGroup CRD was present at start: multi-pod Instances get PodGroups."""


class ManagedController(Protocol):
    """What the manager needs of a controller (``InferenceReplicaController`` has it)."""

    async def run(self) -> None:
        """Run the workers until :meth:`shutdown`."""
        ...

    async def shutdown(self, *, drain: bool = True) -> None:
        """Stop taking keys; with ``drain`` let in-flight reconciles finish."""
        ...

    def close(self) -> None:
        """Detach from the shared informers."""
        ...


@dataclass(frozen=True)
class ControllerFactory:
    name: str
    build: Callable[[ControllerContext], ManagedController]


def _inference_replica(context: ControllerContext) -> ManagedController:
    async def lifecycle() -> LifecycleConfig:
        # Through the TTL cache at every pass: a kubectl edit of the lifecycle entry reaches
        # each replica's next pass within --config-cache-ttl. Invalid keys are unconfigured
        # (and logged), never a failed pass; the other entries aren't read here.
        return lifecycle_entry(await context.config.get())

    return InferenceReplicaController(
        client=context.client,
        factory=context.informers,
        events=context.events,
        settings=PlanSettings.from_config(
            context.startup.lifecycle_scale, pod_groups=context.pod_groups
        ),
        workers=context.options.inferencereplica_max_concurrent_reconciles,
        clock=context.clock,
        status_encoding=StatusEncodingSettings.from_config(context.startup.omenative_status),
        lifecycle=lifecycle,
    )


def _inference_service(context: ControllerContext) -> ManagedController:
    async def default_mode() -> str | None:
        # Read through the TTL cache on every reconcile: a kubectl edit of the deploy entry
        # reaches the next reconcile within --config-cache-ttl. A bad deploy entry fails the
        # reconcile (and is retried), never the manager; the other entries aren't read here.
        return deploy_entry(await context.config.get()).default_deployment_mode

    return InferenceServiceController(
        client=context.client,
        factory=context.informers,
        workers=context.options.inferenceservice_max_concurrent_reconciles,
        default_mode=default_mode,
        clock=context.clock,
        events=context.events,
        revision_namespace=context.namespace,
    )


def _runtime_revision(context: ControllerContext) -> ManagedController:
    return RuntimeRevisionController(
        client=context.client,
        factory=context.informers,
        namespace=context.namespace,
        retention=context.options.runtime_revision_retention,
        grace_period=context.options.runtime_revision_grace_period,
        clock=context.clock,
    )


def _serving(context: ControllerContext) -> ManagedController:
    # Keyed by InferenceReplica, as the InferenceReplica controller, and sized by the same
    # flag: its passes are one per component, like that controller's, and much cheaper.
    return ServingController(
        client=context.client,
        factory=context.informers,
        config=context.config.get,
        workers=context.options.inferencereplica_max_concurrent_reconciles,
        clock=context.clock,
        events=context.events,
    )


CONTROLLERS: tuple[ControllerFactory, ...] = (
    ControllerFactory("inferenceservice", _inference_service),
    ControllerFactory("inferencereplica", _inference_replica),
    ControllerFactory("runtimerevision", _runtime_revision),
    ControllerFactory("serving", _serving),
)
"""Built in this order; they run together, and stop together."""
