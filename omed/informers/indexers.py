"""The secondary indexes controllers look objects up by.

An index function maps an object to the values it is filed under; the store keeps the
reverse map. Each function here is pure and cheap (it runs on every stored event, twice on
an update) and returns a tuple, empty when the object has nothing to file.

Index values carry the namespace wherever the thing they name is namespaced, so that one
cluster-wide cache never mixes ``prod/chat`` with ``dev/chat``:

- :data:`NAMESPACE` -> ``namespace``;
- :data:`OWNER_UID` -> the UID of every owner reference (UIDs are unique cluster-wide);
- :data:`INFERENCE_SERVICE` -> ``namespace/<ome.io/inferenceservice label>``;
- :data:`INSTANCE` -> ``namespace/<isvc>/<component>/<instance index>`` from the labels
  ``ome.io/inferenceservice``, ``component`` and ``ome.io/instance-index``.
"""

from __future__ import annotations

from collections.abc import Callable

from omed.api.constants import LABEL_COMPONENT, LABEL_INFERENCE_SERVICE, LABEL_INSTANCE_INDEX
from omed.informers.store import IndexFunc
from omed.informers.transform import Obj

NAMESPACE = "namespace"
OWNER_UID = "owner-uid"
INFERENCE_SERVICE = "inferenceservice"
INSTANCE = "instance"

_NONE: tuple[str, ...] = ()


def namespace_index(obj: Obj) -> tuple[str, ...]:
    namespace = obj["metadata"].get("namespace")
    return (namespace,) if namespace else _NONE


def owner_uid_index(obj: Obj) -> tuple[str, ...]:
    owners = obj["metadata"].get("ownerReferences")
    if not owners:
        return _NONE
    return tuple([ref["uid"] for ref in owners if ref.get("uid")])


def label_index(label: str) -> Callable[[Obj], tuple[str, ...]]:
    """Index by ``namespace/<value of label>`` (or the bare value for cluster-scoped objects)."""

    def index(obj: Obj) -> tuple[str, ...]:
        metadata = obj["metadata"]
        labels = metadata.get("labels")
        if not labels:
            return _NONE
        value = labels.get(label)
        if value is None:
            return _NONE
        namespace = metadata.get("namespace")
        return (f"{namespace}/{value}",) if namespace else (value,)

    return index


inference_service_index = label_index(LABEL_INFERENCE_SERVICE)


def instance_key(namespace: str, inference_service: str, component: str, index: int | str) -> str:
    """The :data:`INSTANCE` index value of an Instance's pods."""
    return f"{namespace}/{inference_service}/{component}/{index}"


def instance_index(obj: Obj) -> tuple[str, ...]:
    metadata = obj["metadata"]
    labels = metadata.get("labels")
    if not labels:
        return _NONE
    isvc = labels.get(LABEL_INFERENCE_SERVICE)
    component = labels.get(LABEL_COMPONENT)
    index = labels.get(LABEL_INSTANCE_INDEX)
    if isvc is None or component is None or index is None:
        return _NONE
    return (f"{metadata.get('namespace')}/{isvc}/{component}/{index}",)


DEFAULT_INDEXERS: dict[str, IndexFunc] = {NAMESPACE: namespace_index}
"""Every informer has the namespace index."""

POD_INDEXERS: dict[str, IndexFunc] = {
    NAMESPACE: namespace_index,
    OWNER_UID: owner_uid_index,
    INFERENCE_SERVICE: inference_service_index,
    INSTANCE: instance_index,
}
"""The indexes of the product's pod cache."""
