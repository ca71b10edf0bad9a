"""Watch caches: reflector (LIST + WATCH + bookmarks + relist), indexed store, shared informers.

Read :mod:`omed.informers.reflector` for the list/watch rules, :mod:`omed.informers.store`
for the cache, :mod:`omed.informers.transform` for what is kept of each object, and
:mod:`omed.informers.factory` for how controllers share informers.
"""

from omed.informers.backoff import Backoff
from omed.informers.factory import (
    INFERENCE_POD_SELECTOR,
    InformerFactory,
    inference_pod_informer,
)
from omed.informers.indexers import (
    INFERENCE_SERVICE,
    INSTANCE,
    NAMESPACE,
    OWNER_UID,
    POD_INDEXERS,
    inference_service_index,
    instance_index,
    instance_key,
    label_index,
    namespace_index,
    owner_uid_index,
)
from omed.informers.informer import EventHandler, HandlerRegistration, Handlers, SharedInformer
from omed.informers.reflector import ListWatchClient, Reflector, ReflectorSink, WatchEnd
from omed.informers.relist import DeletedFinalStateUnknown, RelistDiff, relist_diff
from omed.informers.store import IndexedStore, IndexFunc, KeyFunc, object_key, split_key
from omed.informers.transform import (
    POD_FIELDS,
    Obj,
    SharedValues,
    Transform,
    identity,
    make_pod_transform,
    strip_managed_fields,
    transform_pod,
)

__all__ = [
    "INFERENCE_POD_SELECTOR",
    "INFERENCE_SERVICE",
    "INSTANCE",
    "NAMESPACE",
    "OWNER_UID",
    "POD_FIELDS",
    "POD_INDEXERS",
    "Backoff",
    "DeletedFinalStateUnknown",
    "EventHandler",
    "HandlerRegistration",
    "Handlers",
    "IndexFunc",
    "IndexedStore",
    "InformerFactory",
    "KeyFunc",
    "ListWatchClient",
    "Obj",
    "Reflector",
    "ReflectorSink",
    "RelistDiff",
    "SharedInformer",
    "SharedValues",
    "Transform",
    "WatchEnd",
    "identity",
    "inference_pod_informer",
    "inference_service_index",
    "instance_index",
    "instance_key",
    "label_index",
    "make_pod_transform",
    "namespace_index",
    "object_key",
    "owner_uid_index",
    "relist_diff",
    "split_key",
    "strip_managed_fields",
    "transform_pod",
]
