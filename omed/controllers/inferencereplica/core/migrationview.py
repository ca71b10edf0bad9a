"""The parent InferenceService's migration mailbox, read off its cached object (pure)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from omed.api.constants import COMPONENTS
from omed.api.migrationrequest import parse, requests_of
from omed.controllers.inferencereplica.core.migrationactions import Mailbox


def mailbox_of(isvc: Mapping[str, Any]) -> Mailbox:
    """Every request annotation of ``isvc`` (keys sorted), and the components it declares."""
    meta = isvc.get("metadata") or {}
    spec = isvc.get("spec") or {}
    return Mailbox(
        isvc=str(meta.get("name") or ""),
        uid=str(meta.get("uid") or ""),
        requests=tuple(parse(key, value) for key, value in requests_of(meta.get("annotations"))),
        declared=frozenset(c for c in COMPONENTS if isinstance(spec.get(c), Mapping)),
    )


def request_components(isvc: Mapping[str, Any]) -> frozenset[str] | None:
    """The components whose InferenceReplica a request on ``isvc`` concerns (every one, for a
    request that can't be read: the engine's answers it); None when there is no request."""
    annotations = (isvc.get("metadata") or {}).get("annotations")
    found = requests_of(annotations)
    if not found:
        return None
    return frozenset(COMPONENTS)
