"""The content hash of a runtime spec: the hash in a runtime revision's name, upstream OME's.

Upstream OME names the revision of a ServingRuntime's or ClusterServingRuntime's spec
``cr-<runtime>-<hash>`` or ``r-<namespace>-<runtime>-<hash>``, where the hash is the first 8
hex digits of the SHA-256 of Go's ``json.Marshal`` of its typed ``ServingRuntimeSpec``. omed
computes the same bytes (:mod:`omed.api.gojson`, with the ``ServingRuntimeSpec`` root of the
field table): the spec is decoded as Go decodes it (keys the type doesn't have dropped, null read
as the zero value) and encoded in the type's field order, ``omitempty`` as tagged, so one spec
gets one name from omed and from upstream, however its keys are ordered or spelled.

Coverage follows the field table (``tools/gojson-table``): the runtime fields of upstream's
``ome.io/v1beta1`` types as read from its sources, with the Kubernetes types of k8s.io/api
v0.36. A key outside them is dropped, as Go drops a key its struct lacks; a runtime field added
upstream after those sources (v1.3's ``acceleratorRequirements``, for example) is therefore left
out of omed's bytes while upstream's include it, and only a runtime that sets such a field gets a
different hash from the two.

A spec Go could not decode at all (a value of the wrong JSON type for its field) has no upstream
hash, as upstream fails to read the runtime; its hash is then :func:`legacy_content_hash`, so the
name stays a pure function of the content.

:func:`legacy_content_hash` is also the hash omed gave every runtime revision before it used
upstream's (SHA-256 of the spec as canonical JSON: keys sorted, no spaces). Revisions named by
it stay valid (docs/controllers.md, *Runtime revision names omed gave before*).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any, Final

from omed.api.gojson import GoJsonError, marshal, root_type

HASH_LENGTH: Final = 8


def go_bytes(spec: Mapping[str, Any]) -> bytes:
    """Go's ``json.Marshal`` of ``spec`` decoded into upstream's ``ServingRuntimeSpec``.

    Raises :class:`~omed.api.gojson.GoJsonError` where Go's ``json.Unmarshal`` would fail.
    """
    return marshal(spec, root_type("ServingRuntimeSpec")).encode()


def content_hash(spec: Mapping[str, Any]) -> str:
    """Upstream's 8-hex content hash of a runtime spec (the legacy one where Go can't read it)."""
    try:
        encoded = go_bytes(spec)
    except GoJsonError:
        return legacy_content_hash(spec)
    return hashlib.sha256(encoded).hexdigest()[:HASH_LENGTH]


def legacy_content_hash(spec: Mapping[str, Any]) -> str:
    """The hash omed gave a runtime spec before upstream's: SHA-256 of its canonical JSON."""
    canonical = json.dumps(spec, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()[:HASH_LENGTH]


__all__ = ["HASH_LENGTH", "content_hash", "go_bytes", "legacy_content_hash"]
