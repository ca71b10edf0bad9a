"""Hands out shared informers: one per (resource, namespace, label selector, field selector).

Controllers ask the factory for what they watch; two controllers asking for pods labelled
``ome.io/inferenceservice`` get the same :class:`SharedInformer`, so the API server serves
one LIST and one WATCH for both and the process holds one cache. The manager starts the
factory once its controllers have registered their handlers, and waits for the caches to
sync before it starts workers.

Invariant: for a given key there is at most one informer, with one transform; asking again
with a different transform is an error rather than a second watch or a cache whose shape
depends on who asked first.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping

from omed.api.constants import LABEL_INFERENCE_SERVICE
from omed.clock import Clock, RealClock
from omed.informers.indexers import POD_INDEXERS
from omed.informers.informer import SharedInformer, wait_all
from omed.informers.reflector import ListWatchClient
from omed.informers.store import IndexFunc
from omed.informers.transform import Transform, strip_managed_fields, transform_pod
from omed.kube.client import Resource
from omed.kube.resources import PODS

InformerKey = tuple[Resource, str | None, str | None, str | None]

INFERENCE_POD_SELECTOR = LABEL_INFERENCE_SERVICE
"""Label selector of the product's pod cache: pods that carry ``ome.io/inferenceservice``."""


class InformerFactory:
    """Creates, starts and stops the process's shared informers."""

    def __init__(
        self,
        client: ListWatchClient,
        *,
        clock: Clock | None = None,
        silence_timeout: float | None = None,
        watch_list: bool = True,
    ) -> None:
        self._client = client
        self._watch_list = watch_list
        self._clock = clock
        self._silence_timeout = silence_timeout
        self._informers: dict[InformerKey, SharedInformer] = {}
        self._started = False

    def informer(
        self,
        resource: Resource,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        transform: Transform | None = None,
        indexers: Mapping[str, IndexFunc] | None = None,
    ) -> SharedInformer:
        """The shared informer for this scope and selectors, created on first use.

        ``transform`` defaults to :func:`~omed.informers.transform.strip_managed_fields`;
        ``indexers`` are added to the informer (existing ones must be the same functions).
        """
        scope = namespace if resource.namespaced else None
        key: InformerKey = (resource, scope or None, label_selector or None, field_selector or None)
        wanted = transform or strip_managed_fields
        existing = self._informers.get(key)
        if existing is not None:
            if existing.transform is not wanted:
                raise ValueError(
                    f"{existing!r} already exists with transform "
                    f"{getattr(existing.transform, '__qualname__', existing.transform)}"
                )
            if indexers:
                existing.add_indexers(indexers)
            return existing
        informer = SharedInformer(
            self._client,
            resource,
            namespace=key[1],
            label_selector=key[2],
            field_selector=key[3],
            transform=wanted,
            indexers=indexers,
            clock=self._clock,
            silence_timeout=self._silence_timeout,
            watch_list=self._watch_list,
        )
        self._informers[key] = informer
        return informer

    def informers(self) -> list[SharedInformer]:
        return list(self._informers.values())

    def start(self) -> None:
        """Start every informer not started yet (call again after asking for more)."""
        self._started = True
        for informer in self._informers.values():
            informer.start()

    async def stop(self) -> None:
        await asyncio.gather(*(informer.stop() for informer in self._informers.values()))
        self._started = False

    async def wait_for_cache_sync(self, *, timeout: float | None = None) -> bool:
        """Wait until every started informer has synced; False when ``timeout`` (on the
        factory's clock) passes first."""
        events = [i.synced_event for i in self._informers.values() if i.started]
        return await wait_all(events, clock=self._clock or RealClock(), timeout=timeout)


def inference_pod_informer(
    factory: InformerFactory, *, namespace: str | None = None
) -> SharedInformer:
    """The product's pod cache: pods labelled ``ome.io/inferenceservice``, projected by
    :data:`~omed.informers.transform.transform_pod`, indexed by namespace, owner UID,
    InferenceService and Instance (:data:`~omed.informers.indexers.POD_INDEXERS`)."""
    return factory.informer(
        PODS,
        namespace=namespace,
        label_selector=INFERENCE_POD_SELECTOR,
        transform=transform_pod,
        indexers=POD_INDEXERS,
    )
