"""Cached JSON -> the serving controller's models, purely.

Three readings live here, each in one place:

* the component of an InferenceReplica (:func:`component_of`): its identity, its Instance
  count and pods per Instance, and its Services' ports, taken from the serving runner's pod
  template (``default``, or ``leader`` for leader and workers: the leader is the one that
  takes requests);
* the revision a pod runs (:func:`pod_revision`), read from ``ome.io/revision-hash`` (the
  8-hex hash, upstream's label) or, on pods made before omed stamped it, from the hash at
  the end of ``ome.io/revision`` (the full revision name). Both labels are read here and
  nowhere else in this controller;
* how the per-revision Services select each revision's pods (:func:`revision_selectors`): on
  ``ome.io/revision-hash`` when every pod of the revision carries it, else on
  ``ome.io/revision``, which every omed pod carries; so a revision whose older pods lack the
  hash label is still selected whole, and the selector moves to the hash label once they are
  gone.

The ClusterIP Services of a leader-and-workers component should reach the leaders only
(workers take no requests). They do once every pod of the component carries the runner label
``ome.io/runner`` (:func:`runner_labelled`): they then select ``ome.io/runner: leader``.
Until then (pods made before omed stamped it) they select the component's pods, workers
included, and the headless pair always does (peer DNS needs every pod).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from omed.api.constants import LABEL_REVISION, LABEL_REVISION_HASH, LABEL_RUNNER
from omed.api.revision import is_revision_hash, revision_hash
from omed.controllers.serving.core.model import Component, RevisionSelector, ServicePort

_SERVING_RUNNERS = ("default", "leader")


def _as_int(value: Any, default: int) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def service_ports(template: Mapping[str, Any]) -> tuple[ServicePort, ...]:
    """The container ports of a pod template, in container and port order, as Service ports.

    A port is named as its container names it, else ``<protocol>-<port>`` in lower case; a
    second port of the same number and protocol is dropped (one Service port can't target
    two), and a name used twice is replaced by the generated one."""
    spec = template.get("spec") or {}
    ports: list[ServicePort] = []
    seen: set[tuple[int, str]] = set()
    names: set[str] = set()
    for container in spec.get("containers") or ():
        if not isinstance(container, Mapping):
            continue
        for raw in container.get("ports") or ():
            if not isinstance(raw, Mapping):
                continue
            number = _as_int(raw.get("containerPort"), 0)
            given = raw.get("protocol")
            protocol = given if isinstance(given, str) and given else "TCP"
            if not 0 < number < 65536 or (number, protocol) in seen:
                continue
            generated = f"{protocol.lower()}-{number}"
            name = raw.get("name") if isinstance(raw.get("name"), str) and raw["name"] else None
            if name is None or name in names:
                name = generated
            if name in names:
                continue
            seen.add((number, protocol))
            names.add(name)
            ports.append(ServicePort(name=name, port=number, protocol=protocol))
    return tuple(ports)


def component_of(irep: Mapping[str, Any]) -> Component | None:
    """The component an InferenceReplica runs; ``None`` when its spec can't be read (the
    webhook and the CRD schema keep such specs out; nothing is written for one)."""
    meta = irep.get("metadata") or {}
    spec = irep.get("spec") or {}
    name, component = meta.get("name"), spec.get("component")
    runners = [r for r in spec.get("runners") or () if isinstance(r, Mapping)]
    if not isinstance(name, str) or not isinstance(component, str) or not runners:
        return None
    parent = spec.get("parentRef") or {}
    parent_name = parent.get("name")
    isvc = parent_name if isinstance(parent_name, str) and parent_name else name
    serving = next(
        (r for wanted in _SERVING_RUNNERS for r in runners if r.get("name") == wanted),
        runners[0],
    )
    return Component(
        namespace=str(meta.get("namespace") or ""),
        name=name,
        uid=str(meta.get("uid") or ""),
        isvc=isvc,
        component=component,
        replicas=max(0, _as_int(spec.get("replicas"), 0)),
        pods_per_instance=sum(max(0, _as_int(r.get("size"), 1)) for r in runners),
        ports=service_ports(serving.get("template") or {}),
        deleting=bool(meta.get("deletionTimestamp")),
        leader=any(r.get("name") == "leader" for r in runners),
    )


def runner_labelled(pods: Iterable[Mapping[str, Any]]) -> bool:
    """Whether every one of ``pods`` carries ``ome.io/runner`` (and there is one)."""
    found = False
    for pod in pods:
        labels = (pod.get("metadata") or {}).get("labels") or {}
        if not isinstance(labels.get(LABEL_RUNNER), str):
            return False
        found = True
    return found


def pod_revision(pod: Mapping[str, Any]) -> tuple[str, bool] | None:
    """The revision hash a pod runs, and whether it carries ``ome.io/revision-hash``;
    ``None`` for a pod with neither label readable."""
    labels = (pod.get("metadata") or {}).get("labels") or {}
    stamped = labels.get(LABEL_REVISION_HASH)
    if isinstance(stamped, str) and is_revision_hash(stamped):
        return stamped, True
    full = labels.get(LABEL_REVISION)
    if isinstance(full, str):
        try:
            return revision_hash(full), False
        except ValueError:
            return None
    return None


def revision_selectors(pods: Iterable[Mapping[str, Any]]) -> dict[str, RevisionSelector]:
    """Revision hash -> how its Services select its pods, for every revision ``pods`` run."""
    all_stamped: dict[str, bool] = {}
    full_names: dict[str, str] = {}
    for pod in pods:
        found = pod_revision(pod)
        if found is None:
            continue
        digest, stamped = found
        all_stamped[digest] = all_stamped.get(digest, True) and stamped
        full = ((pod.get("metadata") or {}).get("labels") or {}).get(LABEL_REVISION)
        if isinstance(full, str) and full.endswith(digest):
            full_names.setdefault(digest, full)
    selectors: dict[str, RevisionSelector] = {}
    for digest, stamped in all_stamped.items():
        if stamped or digest not in full_names:
            selectors[digest] = RevisionSelector(LABEL_REVISION_HASH, digest)
        else:
            selectors[digest] = RevisionSelector(LABEL_REVISION, full_names[digest])
    return selectors
