"""The product's EndpointSlice cache: what the component Services route to.

Why: whether a pod still receives traffic is decided by the EndpointSlices of its
component's traffic Service, which the EndpointSlice controller updates after the pod's
conditions change. A drain that deletes a pod as soon as the pod says it is not Ready would
race the slices that still list it as ready; an update that trusts a surge pod's Ready
condition alone could drain the old Instance before the surge is in rotation. So the
InferenceReplica controller reads the slices too.

The cache holds only the slices of Services omed made: the EndpointSlice controller copies
a Service's labels onto its slices, and omed's Services carry ``ome.io/inferenceservice``,
so the informer is label-scoped exactly like the pod cache. Each slice is kept as its
identity, labels and, per endpoint, the target pod's name and uid and the three conditions;
addresses, ports, zones and hints are dropped. Slices are indexed by
``namespace/<kubernetes.io/service-name>`` (:data:`SERVICE_NAME`).
"""

from __future__ import annotations

from typing import Any, Final

from omed.api.constants import LABEL_INFERENCE_SERVICE
from omed.informers.factory import InformerFactory
from omed.informers.indexers import label_index
from omed.informers.informer import SharedInformer
from omed.informers.transform import Obj
from omed.kube.resources import ENDPOINT_SLICES

LABEL_SERVICE_NAME: Final = "kubernetes.io/service-name"
"""The label the EndpointSlice controller puts on every slice: the Service it belongs to."""
SERVICE_NAME: Final = "service-name"
"""Index: ``namespace/<kubernetes.io/service-name>``."""

_METADATA: Final = ("name", "namespace", "uid", "resourceVersion", "labels")
_CONDITIONS: Final = ("ready", "serving", "terminating")


def transform_endpoint_slice(obj: Obj) -> Obj:
    """Keep what routing is judged by (see the module docstring)."""
    meta = obj.get("metadata") or {}
    endpoints: list[Obj] = []
    for endpoint in obj.get("endpoints") or ():
        ref = endpoint.get("targetRef") or {}
        conditions = endpoint.get("conditions") or {}
        kept: dict[str, Any] = {
            "conditions": {k: conditions[k] for k in _CONDITIONS if k in conditions},
        }
        if ref:
            kept["targetRef"] = {k: ref[k] for k in ("kind", "name", "uid") if k in ref}
        endpoints.append(kept)
    return {
        "metadata": {k: meta[k] for k in _METADATA if k in meta},
        "endpoints": endpoints,
    }


def endpoint_slice_informer(
    factory: InformerFactory, *, namespace: str | None = None
) -> SharedInformer:
    """The shared cache of the slices of omed's Services (see the module docstring)."""
    return factory.informer(
        ENDPOINT_SLICES,
        namespace=namespace,
        label_selector=LABEL_INFERENCE_SERVICE,
        transform=transform_endpoint_slice,
        indexers={SERVICE_NAME: label_index(LABEL_SERVICE_NAME)},
    )


__all__ = [
    "LABEL_SERVICE_NAME",
    "SERVICE_NAME",
    "endpoint_slice_informer",
    "transform_endpoint_slice",
]
