"""The Services and the PodDisruptionBudget a component wants, and their bodies.

Every object carries the identity labels ``ome.io/inferenceservice`` and ``component`` (so
the controller's informers watch only these, and the EndpointSlices that the EndpointSlice
controller copies a Service's labels onto carry them too); the per-revision pair also
carries ``ome.io/revision-hash``. Each is controlled by the InferenceReplica, with
``blockOwnerDeletion``: the garbage collector deletes it once the replica is gone.

* ``{isvc}-{comp}``: the traffic Service, selecting the component's pods (the leaders alone
  of a leader-and-workers component, once its pods carry ``ome.io/runner``); omed owns its
  ``selector`` and ``ports``;
* ``{isvc}-{comp}-headless``: the same pods, ``clusterIP: None`` and
  ``publishNotReadyAddresses: true`` (peer DNS for leaders and workers before they are Ready);
* ``{isvc}-{comp}-rev-{hash}`` and ``{isvc}-{comp}-rev-{hash}-headless``: the same pair for
  the pods of one revision;
* the PodDisruptionBudget ``{isvc}-{comp}``: the component's pods; omed owns ``minAvailable``
  (in pods) and ``selector.matchLabels``.

A component whose serving container declares no port has no ClusterIP Service (the API
server refuses one without ports): only the headless pair, which needs none.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from omed.api.constants import (
    KIND_INFERENCE_REPLICA,
    LABEL_COMPONENT,
    LABEL_INFERENCE_SERVICE,
    LABEL_REVISION_HASH,
    LABEL_RUNNER,
)
from omed.controllers.owners import controller_reference
from omed.controllers.serving.core import names
from omed.controllers.serving.core.model import Component, RevisionSelector, ServicePort


@dataclass(frozen=True, slots=True)
class WantedObject:
    """What every object of a component names: its name, its labels, and the pods it selects."""

    name: str
    labels: Mapping[str, str]
    selector: Mapping[str, str]


@dataclass(frozen=True, slots=True)
class WantedService(WantedObject):
    ports: tuple[ServicePort, ...]
    headless: bool


@dataclass(frozen=True, slots=True)
class WantedBudget(WantedObject):
    min_available: int


def identity_labels(component: Component) -> dict[str, str]:
    """The labels of the component's pods that say whose they are; also on every object here."""
    return {LABEL_INFERENCE_SERVICE: component.isvc, LABEL_COMPONENT: component.component}


def base_of(component: Component) -> str:
    return names.base_name(isvc=component.isvc, component=component.component)


def wanted_services(
    component: Component,
    revisions: Mapping[str, RevisionSelector],
    *,
    runner_labelled: bool = False,
) -> dict[str, WantedService]:
    """Name -> the Service wanted under it. ``runner_labelled``: every pod of the component
    carries ``ome.io/runner``, so the ClusterIP Services of a leader-and-workers component
    select its leaders alone."""
    base = base_of(component)
    identity = identity_labels(component)
    serving = (
        {**identity, LABEL_RUNNER: "leader"} if component.leader and runner_labelled else identity
    )
    ports = component.ports
    wanted: list[WantedService] = []
    if ports:
        wanted.append(WantedService(names.traffic_service(base), identity, serving, ports, False))
    wanted.append(WantedService(names.headless_service(base), identity, identity, ports, True))
    for digest in sorted(revisions):
        selector = {**identity, revisions[digest].label: revisions[digest].value}
        labels = {**identity, LABEL_REVISION_HASH: digest}
        if ports:
            name = names.revision_service(base, digest)
            wanted.append(WantedService(name, labels, {**selector, **serving}, ports, False))
        name = names.revision_headless_service(base, digest)
        wanted.append(WantedService(name, labels, selector, ports, True))
    return {w.name: w for w in wanted}


def owner_reference(component: Component) -> dict[str, Any]:
    return controller_reference(kind=KIND_INFERENCE_REPLICA, name=component.name, uid=component.uid)


def _metadata(component: Component, wanted: WantedObject) -> dict[str, Any]:
    """The metadata of every object of the component: in its namespace, controlled by its
    InferenceReplica."""
    return {
        "name": wanted.name,
        "namespace": component.namespace,
        "labels": dict(wanted.labels),
        "ownerReferences": [owner_reference(component)],
    }


def service_body(component: Component, wanted: WantedService) -> dict[str, Any]:
    spec: dict[str, Any] = {"selector": dict(wanted.selector)}
    if wanted.ports:
        spec["ports"] = [p.body() for p in wanted.ports]
    if wanted.headless:
        spec["clusterIP"] = "None"
        spec["publishNotReadyAddresses"] = True
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _metadata(component, wanted),
        "spec": spec,
    }


def wanted_budget(component: Component, *, min_available: int) -> WantedBudget:
    identity = identity_labels(component)
    return WantedBudget(
        name=names.disruption_budget(base_of(component)),
        labels=identity,
        selector=identity,
        min_available=min_available,
    )


def budget_body(component: Component, wanted: WantedBudget) -> dict[str, Any]:
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": _metadata(component, wanted),
        "spec": {
            "minAvailable": wanted.min_available,
            "selector": {"matchLabels": dict(wanted.selector)},
        },
    }
