"""The API client's methods as Protocols: the seams its callers are written against.

Why: controllers and the event recorder take a client as a parameter so that tests give
them a fake that records calls and fails on demand. Each method's signature is spelled once,
here, as :class:`~omed.kube.client.KubeClient` has it; a caller that needs only some of them
names the smaller Protocol.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from omed.kube.client import Resource


class Patcher(Protocol):
    """A client that patches objects (JSON merge patch unless ``content_type`` says
    otherwise)."""

    async def patch(
        self,
        resource: Resource,
        name: str,
        patch: Any,
        namespace: str | None = None,
        *,
        content_type: str = ...,
        subresource: str | None = None,
        **params: Any,
    ) -> Any: ...


class ObjectWriter(Protocol):
    """A client that reads, creates and replaces whole objects: what a read-modify-write of
    one object takes (the audit ledger's ConfigMap, the leader election Lease)."""

    async def get(self, resource: Resource, name: str, namespace: str | None = None) -> Any: ...

    async def create(
        self,
        resource: Resource,
        body: Mapping[str, Any],
        namespace: str | None = None,
        **params: Any,
    ) -> Any: ...

    async def replace(
        self, resource: Resource, body: Mapping[str, Any], namespace: str | None = None
    ) -> Any: ...


class KubeApi(ObjectWriter, Patcher, Protocol):
    """The reads and writes a controller makes: :class:`~omed.kube.client.KubeClient`'s
    get, list, create, update, status update, patch and delete."""

    async def list_all(
        self,
        resource: Resource,
        namespace: str | None = None,
        *,
        page_size: int = 500,
        **params: Any,
    ) -> list[Any]: ...

    async def replace_status(
        self, resource: Resource, body: Mapping[str, Any], namespace: str | None = None
    ) -> Any: ...

    async def delete(
        self,
        resource: Resource,
        name: str,
        namespace: str | None = None,
        *,
        grace_period_seconds: int | None = None,
        uid: str | None = None,
        resource_version: str | None = None,
        propagation_policy: str | None = None,
    ) -> Any: ...
