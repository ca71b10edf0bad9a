"""One pass of the serving controller: observed -> the writes that bring the cluster there.

Rules, in the order they are applied:

* A component being deleted gets no write: its Services keep routing to the pods still being
  drained, and the garbage collector removes every object once the InferenceReplica is gone.
* Each wanted object is created when missing, unless an earlier pass's create of its name
  is still in flight (the caches lag the API server: a second create would only meet
  ``AlreadyExists``); when it exists and the InferenceReplica
  controls it, it is patched only if a field omed owns differs (labels omed sets, the
  selector, the ports, the headless settings, ``minAvailable``); everything else on it (a
  user's labels and annotations, ``appProtocol`` on a port, a PDB's
  ``unhealthyPodEvictionPolicy``) is carried through untouched. A merge patch sets only
  omed's label keys, and removes from a selector only the keys omed's doesn't have.
* An object of a wanted name that no controller owns and that carries the component's
  identity labels (an InferenceReplica of the name deleted with ``propagationPolicy:
  Orphan`` left it) is adopted by the same patch, which adds the controller reference.
  One owned by another controller is left alone and reported.
* A Service whose ``clusterIP: None`` doesn't match what its name wants can't be patched
  into the other kind (the field is immutable): it is deleted, and the next pass creates it.
* A Service the InferenceReplica controls that isn't wanted any more (a revision no pod
  runs, a ClusterIP Service of a component without ports) is deleted.
* The PodDisruptionBudget follows the setting: unconfigured, an owned one is deleted;
  invalid, it is kept as it is (neither created, patched nor deleted); set, it is wanted
  with :func:`~.budget.min_available_pods`.

A pass that finds everything as wanted decides nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from omed.api.constants import KIND_INFERENCE_REPLICA
from omed.config.disruption import DisruptionBudget
from omed.controllers.owners import controller_ref
from omed.controllers.serving.core.actions import Action, Create, Decision, Delete, Kind, Patch
from omed.controllers.serving.core.budget import min_available_pods
from omed.controllers.serving.core.model import Component, Observed
from omed.controllers.serving.core.wanted import (
    WantedBudget,
    WantedService,
    budget_body,
    identity_labels,
    owner_reference,
    service_body,
    wanted_budget,
    wanted_services,
)

_PORT_FIELDS = ("name", "port", "targetPort", "protocol")


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return obj.get("metadata") or {}


def _spec(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return obj.get("spec") or {}


def _control(obj: Mapping[str, Any], component: Component) -> str:
    """``ours``, ``adoptable`` or ``taken``."""
    ref = controller_ref(obj)
    if ref is not None:
        ours = ref.get("kind") == KIND_INFERENCE_REPLICA and ref.get("uid") == component.uid
        return "ours" if ours else "taken"
    labels = _meta(obj).get("labels") or {}
    identity = identity_labels(component)
    return "adoptable" if all(labels.get(k) == v for k, v in identity.items()) else "taken"


def _label_patch(existing: Mapping[str, Any], wanted: Mapping[str, str]) -> dict[str, str]:
    labels = _meta(existing).get("labels") or {}
    return {k: v for k, v in wanted.items() if labels.get(k) != v}


def _map_patch(existing: Any, wanted: Mapping[str, str]) -> dict[str, str | None] | None:
    """The merge patch that turns map ``existing`` into ``wanted`` exactly, or ``None``."""
    current = existing if isinstance(existing, Mapping) else {}
    if dict(current) == dict(wanted):
        return None
    return {**{k: None for k in current if k not in wanted}, **wanted}


def _ports_patch(existing: Any, wanted: WantedService) -> tuple[bool, Any]:
    """Whether ``spec.ports`` must change, and to what (``None`` removes them: a headless
    Service of a component without ports). A port keeps the fields omed doesn't own
    (``appProtocol``) of the existing port of its name."""
    current = [p for p in existing or () if isinstance(p, Mapping)]
    shown = [{k: p.get(k) for k in _PORT_FIELDS} for p in current]
    bodies = [p.body() for p in wanted.ports]
    if shown == bodies:
        return False, None
    if not bodies:
        return True, None
    extras = {p.get("name"): {k: v for k, v in p.items() if k not in _PORT_FIELDS} for p in current}
    return True, [{**extras.get(body["name"], {}), **body} for body in bodies]


def _adoption(existing: Mapping[str, Any], component: Component) -> list[Any]:
    refs = [r for r in _meta(existing).get("ownerReferences") or () if isinstance(r, Mapping)]
    return [*refs, owner_reference(component)]


def _finish(
    kind: Kind,
    existing: Mapping[str, Any],
    component: Component,
    *,
    labels: Mapping[str, str],
    spec: dict[str, Any],
    adopt: bool,
) -> Patch | None:
    meta: dict[str, Any] = {}
    if labels:
        meta["labels"] = dict(labels)
    if adopt:
        meta["ownerReferences"] = _adoption(existing, component)
    if not meta and not spec:
        return None
    meta["resourceVersion"] = _meta(existing).get("resourceVersion")
    patch: dict[str, Any] = {"metadata": meta}
    if spec:
        patch["spec"] = spec
    return Patch(kind, str(_meta(existing).get("name")), patch, adopt=adopt)


def service_patch(
    existing: Mapping[str, Any], wanted: WantedService, component: Component, *, adopt: bool
) -> Patch | None:
    """The patch that makes ``existing`` what ``wanted`` says, or ``None`` when it is."""
    current = _spec(existing)
    spec: dict[str, Any] = {}
    selector = _map_patch(current.get("selector"), wanted.selector)
    if selector is not None:
        spec["selector"] = selector
    change, ports = _ports_patch(current.get("ports"), wanted)
    if change:
        spec["ports"] = ports
    if wanted.headless and current.get("publishNotReadyAddresses") is not True:
        spec["publishNotReadyAddresses"] = True
    labels = _label_patch(existing, wanted.labels)
    return _finish("Service", existing, component, labels=labels, spec=spec, adopt=adopt)


def budget_patch(
    existing: Mapping[str, Any], wanted: WantedBudget, component: Component, *, adopt: bool
) -> Patch | None:
    current = _spec(existing)
    spec: dict[str, Any] = {}
    minimum = current.get("minAvailable")
    if not (isinstance(minimum, int) and minimum == wanted.min_available):
        spec["minAvailable"] = wanted.min_available
    if current.get("maxUnavailable") is not None:
        spec["maxUnavailable"] = None
    selector = current.get("selector") or {}
    match = _map_patch(selector.get("matchLabels"), wanted.selector)
    if match is not None or selector.get("matchExpressions"):
        spec["selector"] = {"matchLabels": match or dict(wanted.selector)}
        if selector.get("matchExpressions"):
            spec["selector"]["matchExpressions"] = None
    labels = _label_patch(existing, wanted.labels)
    return _finish(
        "PodDisruptionBudget", existing, component, labels=labels, spec=spec, adopt=adopt
    )


def _headless(service: Mapping[str, Any]) -> bool:
    return _spec(service).get("clusterIP") == "None"


def _uid(obj: Mapping[str, Any]) -> str:
    return str(_meta(obj).get("uid") or "")


def decide(observed: Observed) -> Decision:
    component = observed.component
    if component.deleting:
        return Decision()
    actions: list[Action] = []
    taken: list[tuple[Kind, str]] = []
    wanted = wanted_services(
        component, observed.revisions, runner_labelled=observed.runner_labelled
    )
    for name, want in wanted.items():
        existing = observed.services.get(name)
        if existing is None:
            if ("Service", name) not in observed.creating:
                actions.append(Create("Service", name, service_body(component, want)))
            continue
        control = _control(existing, component)
        if control == "taken":
            taken.append(("Service", name))
        elif _headless(existing) != want.headless:
            if control == "ours":
                actions.append(Delete("Service", name, _uid(existing), "clusterIP"))
            else:
                taken.append(("Service", name))
        else:
            patch = service_patch(existing, want, component, adopt=control == "adoptable")
            if patch is not None:
                actions.append(patch)
    for name, existing in sorted(observed.services.items()):
        if name not in wanted and _control(existing, component) == "ours":
            actions.append(Delete("Service", name, _uid(existing), "unwanted"))

    setting = observed.budget_setting
    existing_budget = observed.budget
    if setting is None:
        if existing_budget is not None and _control(existing_budget, component) == "ours":
            name = str(_meta(existing_budget).get("name"))
            uid = _uid(existing_budget)
            actions.append(Delete("PodDisruptionBudget", name, uid, "unconfigured"))
    elif isinstance(setting, DisruptionBudget):
        minimum = min_available_pods(
            setting, replicas=component.replicas, pods_per_instance=component.pods_per_instance
        )
        want_budget = wanted_budget(component, min_available=minimum)
        if existing_budget is None:
            if ("PodDisruptionBudget", want_budget.name) not in observed.creating:
                body = budget_body(component, want_budget)
                actions.append(Create("PodDisruptionBudget", want_budget.name, body))
        else:
            control = _control(existing_budget, component)
            if control == "taken":
                taken.append(("PodDisruptionBudget", want_budget.name))
            else:
                patch = budget_patch(
                    existing_budget, want_budget, component, adopt=control == "adoptable"
                )
                if patch is not None:
                    actions.append(patch)
    return Decision(actions=tuple(actions), taken=tuple(taken))
