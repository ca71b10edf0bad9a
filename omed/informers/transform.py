"""What an informer keeps of each object, decided once, before the object reaches the store.

A cache of 100,000 pods as the API server sends them costs gigabytes (a serving pod with
managedFields decodes to ~25 KB of Python objects) while the controllers read perhaps thirty
of its fields. A :data:`Transform` runs on every listed and watched object before it is
stored and before any handler sees it, so the store, the handlers and every later reader see
the same, smaller object. Each informer takes its own transform (``transform=`` of
:meth:`omed.informers.InformerFactory.informer`).

Two transforms ship:

- :func:`strip_managed_fields`, the default for every informer: drops
  ``metadata.managedFields`` and the ``kubectl.kubernetes.io/last-applied-configuration``
  annotation, in place, and keeps everything else;
- :func:`make_pod_transform` (:data:`transform_pod` with the defaults): keeps only the pod
  fields listed in :data:`POD_FIELDS`, interns the strings that repeat between pods
  (namespace, label values, node and host names, images, condition types and timestamps),
  and shares equal small sub-objects between pods (owner references, the kept annotations,
  container names and images, readiness gates, each condition, each container status)
  through a bounded :class:`SharedValues` table. The realistic OME serving pod (4.4 KB of
  JSON, ~25 KB as decoded dicts) costs ~2 KB in the cache this way, indexes included
  (``bench/informer.py`` measures it).

Invariants:

- a transform returns a JSON-shaped ``dict`` (dicts, lists, str, int, bool, float) that
  keeps ``metadata.name``, ``metadata.namespace``, ``metadata.uid`` and
  ``metadata.resourceVersion``: the store's key, the indexers, the relist diff and the
  reflector's resume point depend on them;
- cached objects may share sub-objects with each other, so a reader never mutates a cached
  object: it copies what it changes (``copy.deepcopy`` gives a private copy).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable
from typing import Any

Obj = dict[str, Any]
"""A Kubernetes object as decoded JSON."""

Transform = Callable[[Obj], Obj]
"""Turns a decoded object into what the store keeps; may return its argument, modified."""

LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"

_intern = sys.intern


def strip_managed_fields(obj: Obj) -> Obj:
    """Drop ``metadata.managedFields`` and kubectl's last-applied annotation, in place."""
    metadata = obj.get("metadata")
    if type(metadata) is dict:
        metadata.pop("managedFields", None)
        annotations = metadata.get("annotations")
        if annotations and LAST_APPLIED in annotations:
            del annotations[LAST_APPLIED]
    return obj


def identity(obj: Obj) -> Obj:
    """Keep the object exactly as decoded (managedFields included)."""
    return obj


class SharedValues:
    """One canonical copy of equal small values (hash-consing), with a bounded table.

    Equal sub-objects of different cached objects (the same owner reference, the same
    condition with the same timestamp) then cost one copy. Keys are tuples the caller builds
    from the value's fields, each field at a fixed position (so ``True`` and ``1`` never
    meet at the same position). The table is cleared when it reaches ``limit`` entries,
    so its size never grows with the number of cached objects: a value seen after a clear
    gets a new canonical copy, which loses some sharing and nothing else.
    """

    __slots__ = ("_limit", "_table")

    def __init__(self, *, limit: int = 4096) -> None:
        self._table: dict[tuple[Any, ...], Any] = {}
        self._limit = limit

    def __len__(self) -> int:
        return len(self._table)

    def get(self, key: tuple[Any, ...]) -> Any:
        return self._table.get(key)

    @property
    def lookup(self) -> Callable[[tuple[Any, ...]], Any]:
        """``get`` as the table's bound ``dict.get``, for hot loops (a clear keeps the same
        dict, so it stays valid)."""
        return self._table.get

    def put(self, key: tuple[Any, ...], value: Any) -> Any:
        table = self._table
        if len(table) >= self._limit:
            table.clear()
        table[key] = value
        return value


OME_ANNOTATION_PREFIXES: tuple[str, ...] = ("ome.io/",)
"""Annotation keys a cached pod keeps by default."""

POD_FIELDS = """\
apiVersion, kind
metadata: name, namespace, uid, resourceVersion, generation, creationTimestamp,
          deletionTimestamp, deletionGracePeriodSeconds, labels (all),
          annotations (keys with a kept prefix, ome.io/ by default), ownerReferences
          (apiVersion, kind, name, uid, controller, blockOwnerDeletion), finalizers
spec:     nodeName, hostname, subdomain, readinessGates, containers[] (name, image)
status:   phase, reason, message, podIP, hostIP, startTime, observedGeneration,
          conditions[] (type, status, reason, message, lastTransitionTime),
          containerStatuses[] and initContainerStatuses[]
              (name, ready, started, restartCount, image, state, lastState)
"""
"""The pod fields :func:`make_pod_transform` keeps; everything else is dropped."""

PodExtra = Callable[[Obj, Obj], None]
"""``extra(source, kept)`` copies more fields from the decoded pod into the kept one."""


def make_pod_transform(
    *,
    annotation_prefixes: Iterable[str] = OME_ANNOTATION_PREFIXES,
    extra: PodExtra | None = None,
    shared: SharedValues | None = None,
) -> Transform:
    """Build the pod projection: :data:`POD_FIELDS`, more annotations, more fields.

    ``annotation_prefixes`` chooses the annotations kept (a node simulator or another
    reader adds its own prefix); ``extra`` copies any further field a reader needs.
    """
    prefixes = tuple(annotation_prefixes)
    table = shared if shared is not None else SharedValues()
    get = table.lookup  # the table's own dict.get: no Python frame per lookup
    put = table.put
    intern = _intern

    def annotations_of(source: dict[str, Any]) -> dict[str, str] | None:
        key = ("a", *source.items())
        found: dict[str, str] | None = get(key)
        if found is not None:
            return found or None
        kept = {
            intern(k): intern(v) if type(v) is str else v
            for k, v in source.items()
            if k.startswith(prefixes)
        }
        return put(key, kept) or None

    def owners_of(source: list[Any]) -> list[Obj]:
        key = ("o", *[tuple(ref.values()) for ref in source])
        found: list[Obj] | None = get(key)
        if found is not None:
            return found
        refs = [
            {
                intern(k): intern(v) if type(v) is str else v
                for k, v in ref.items()
                if k in _OWNER_REFERENCE_FIELDS
            }
            for ref in source
        ]
        return put(key, refs)  # type: ignore[no-any-return]

    def strings_of(tag: str, source: list[Any]) -> list[str]:
        key = (tag, *source)
        found: list[str] | None = get(key)
        return found if found is not None else put(key, [intern(s) for s in source])

    def gates_of(source: list[Any]) -> list[Obj]:
        key = ("g", *[gate.get("conditionType") for gate in source])
        found: list[Obj] | None = get(key)
        if found is not None:
            return found
        return put(key, [{"conditionType": intern(t or "")} for t in key[1:]])  # type: ignore[no-any-return]

    def containers_of(source: list[Any]) -> list[Obj]:
        key = ("c", *[(c.get("name"), c.get("image")) for c in source])
        found: list[Obj] | None = get(key)
        if found is not None:
            return found
        kept: list[Obj] = []
        for name, image in key[1:]:
            container: Obj = {"name": intern(name or "")}
            if image is not None:
                container["image"] = intern(image)
            kept.append(container)
        return put(key, kept)  # type: ignore[no-any-return]

    def conditions_of(source: list[Any]) -> list[Obj]:
        keys = []
        for cond in source:
            c = cond.get
            keys.append(
                (c("type"), c("status"), c("lastTransitionTime"), c("reason"), c("message"))
            )
        list_key = ("K", *keys)
        found_list: list[Obj] | None = get(list_key)
        if found_list is not None:
            return found_list
        kept: list[Obj] = []
        for key in keys:
            found: Obj | None = get(key)
            if found is None:
                kind, state, since, reason, message = key
                found = {"type": intern(kind or ""), "status": intern(state or "")}
                if since is not None:
                    found["lastTransitionTime"] = intern(since)
                if reason is not None:
                    found["reason"] = intern(reason)
                if message is not None:
                    found["message"] = message
                put(key, found)
            kept.append(found)
        return put(list_key, kept)  # type: ignore[no-any-return]

    def state_of(source: Any) -> tuple[Any, Any]:
        """A container state ({"running": {"startedAt": ...}}): (canonical value, key)."""
        if type(source) is not dict:
            return source, source
        key = (
            "s",
            *[
                (kind, *detail.items()) if type(detail) is dict else (kind, detail)
                for kind, detail in source.items()
            ],
        )
        try:
            found = get(key)
        except TypeError:  # a nested value the schema does not have: keep it, unshared
            return source, id(source)
        if found is not None:
            return found, key
        value = {
            intern(kind): {intern(k): intern(v) if type(v) is str else v for k, v in detail.items()}
            if type(detail) is dict
            else detail
            for kind, detail in source.items()
        }
        return put(key, value), key

    def container_statuses_of(source: list[Any]) -> list[Obj]:
        kept: list[Obj] = []
        for status in source:
            s = status.get
            state, state_key = state_of(s("state"))
            last, last_key = state_of(s("lastState"))
            ready = s("ready")
            started = s("started")
            name = s("name")
            restarts = s("restartCount")
            image = s("image")
            key = ("S", name, ready, started, restarts, image, state_key, last_key)
            found: Obj | None = get(key)
            if found is None:
                found = {"name": intern(name or "")}
                if ready is not None:
                    found["ready"] = ready
                if started is not None:
                    found["started"] = started
                if restarts is not None:
                    found["restartCount"] = restarts
                if image is not None:
                    found["image"] = intern(image)
                if state is not None:
                    found["state"] = state
                if last is not None:
                    found["lastState"] = last
                put(key, found)
            kept.append(found)
        return kept

    def transform_pod(obj: Obj) -> Obj:
        source_md = obj.get("metadata") or {}
        m = source_md.get
        metadata: Obj = {
            "name": m("name"),
            "namespace": intern(m("namespace") or ""),
            "uid": m("uid"),
            "resourceVersion": m("resourceVersion"),
        }
        value = m("generation")
        if value is not None:
            metadata["generation"] = value
        value = m("creationTimestamp")
        if value is not None:
            metadata["creationTimestamp"] = intern(value)
        value = m("deletionTimestamp")
        if value is not None:
            metadata["deletionTimestamp"] = intern(value)
        value = m("deletionGracePeriodSeconds")
        if value is not None:
            metadata["deletionGracePeriodSeconds"] = value
        value = m("labels")
        if value:
            metadata["labels"] = {k: intern(v) for k, v in value.items()}
        value = m("annotations")
        if value:
            annotations = annotations_of(value)
            if annotations is not None:
                metadata["annotations"] = annotations
        value = m("ownerReferences")
        if value:
            metadata["ownerReferences"] = owners_of(value)
        value = m("finalizers")
        if value:
            metadata["finalizers"] = strings_of("f", value)
        kept: Obj = {
            "apiVersion": intern(obj.get("apiVersion") or "v1"),
            "kind": intern(obj.get("kind") or "Pod"),
            "metadata": metadata,
        }

        source_spec = obj.get("spec")
        if source_spec:
            p = source_spec.get
            spec: Obj = {}
            value = p("nodeName")
            if value is not None:
                spec["nodeName"] = intern(value)
            value = p("hostname")
            if value is not None:
                spec["hostname"] = value
            value = p("subdomain")
            if value is not None:
                spec["subdomain"] = intern(value)
            value = p("readinessGates")
            if value:
                spec["readinessGates"] = gates_of(value)
            value = p("containers")
            if value:
                spec["containers"] = containers_of(value)
            kept["spec"] = spec

        source_status = obj.get("status")
        if source_status:
            t = source_status.get
            status: Obj = {}
            value = t("phase")
            if value is not None:
                status["phase"] = intern(value)
            value = t("reason")
            if value is not None:
                status["reason"] = intern(value)
            value = t("message")
            if value is not None:
                status["message"] = value
            value = t("podIP")
            if value is not None:
                status["podIP"] = value
            value = t("hostIP")
            if value is not None:
                status["hostIP"] = intern(value)
            value = t("startTime")
            if value is not None:
                status["startTime"] = intern(value)
            value = t("observedGeneration")
            if value is not None:
                status["observedGeneration"] = value
            value = t("conditions")
            if value:
                status["conditions"] = conditions_of(value)
            value = t("containerStatuses")
            if value:
                status["containerStatuses"] = container_statuses_of(value)
            value = t("initContainerStatuses")
            if value:
                status["initContainerStatuses"] = container_statuses_of(value)
            kept["status"] = status

        if extra is not None:
            extra(obj, kept)
        return kept

    return transform_pod


_OWNER_REFERENCE_FIELDS = frozenset(
    ("apiVersion", "kind", "name", "uid", "controller", "blockOwnerDeletion")
)

transform_pod: Transform = make_pod_transform()
"""The pod projection with the default settings (one shared table for the process)."""
