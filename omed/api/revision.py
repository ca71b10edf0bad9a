"""Revision names: ``<isvc>-<component>-<hash>``, the hash upstream OME's, of the pod template.

A revision names one version of a component's pod template. Its hash is written on every pod
(label ``ome.io/revision-hash``), its name in the Instances' rows, in retry blocks, on the
ControllerRevision that stores the template, and typed by users into ``kubectl ome instance
release-held``. Upstream OME and omed must give one template one name, so the hash is
upstream's, byte for byte:

* the payload is ``{"podSpec": ..., "podMeta": ..., "workerPodSpec"?, "topologyKey"?,
  "pairingProtocol"?}`` as Go's ``encoding/json`` writes it from the typed structs
  (:mod:`omed.api.gojson`); ``podMeta`` is ``null`` when the template has no labels and no
  annotations left after the exclusions below, else ``{"creationTimestamp":null,
  "labels":{...},"annotations":{...}}`` (empty maps left out);
* the hash is FNV-32a over the payload, then ``|cc=<collision count>|``, then
  ``|uid=<owner uid>|``, written as 8 lowercase hex digits.

Left out of ``podMeta`` as upstream leaves them out, because controllers write them and a
change of them is no new template: the annotations ``ome.io/migration-request-v1-*``,
``ome.io/rollout-paused``, ``ome.io/rollout-promote`` and ``ome.io/rollout-rollback``, and
the labels ``kueue.x-k8s.io/queue-name`` and ``kueue.x-k8s.io/priority-class``.

A template Go could not decode into a ``PodSpec`` (a value of the wrong JSON type) has no
upstream hash; its payload then carries the template's spec as canonical JSON (sorted keys,
nulls dropped), so the name stays a pure function of the content.

The names omed gave before it used upstream's hash (the first 8 hex digits of the SHA-256 of
the template's canonical JSON) are still computed here, by :func:`legacy_template_hash`: pods
and rows written then are recognised by them (docs/controllers.md, "Revision names").
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from typing import Any, Final

import orjson

from omed.api.constants import (
    ANNOTATION_ROLLOUT_PAUSED,
    ANNOTATION_ROLLOUT_PROMOTE,
    ANNOTATION_ROLLOUT_ROLLBACK,
)
from omed.api.gojson import GoJsonError, go_string, marshal, root_type
from omed.api.names import LABEL_VALUE_MAX

REVISION_HASH_LENGTH: Final = 8
MAX_REVISION_NAME_LENGTH: Final = LABEL_VALUE_MAX
"""Revision names are label values (and object names), which Kubernetes caps at 63."""

_HASH_RE: Final = re.compile(rf"[0-9a-f]{{{REVISION_HASH_LENGTH}}}")
_FNV32_OFFSET: Final = 0x811C9DC5
_FNV32_PRIME: Final = 0x01000193

EXCLUDED_ANNOTATION_PREFIXES: Final = ("ome.io/migration-request-v1-",)
EXCLUDED_ANNOTATIONS: Final = frozenset(
    {ANNOTATION_ROLLOUT_PAUSED, ANNOTATION_ROLLOUT_PROMOTE, ANNOTATION_ROLLOUT_ROLLBACK}
)
EXCLUDED_LABELS: Final = frozenset({"kueue.x-k8s.io/queue-name", "kueue.x-k8s.io/priority-class"})


def fnv32a(data: bytes, start: int = _FNV32_OFFSET) -> int:
    """FNV-1a, 32 bits (Go's ``hash/fnv.New32a``), continuing from ``start``."""
    value = start
    for byte in data:
        value = ((value ^ byte) * _FNV32_PRIME) & 0xFFFFFFFF
    return value


def excluded_annotation(key: str) -> bool:
    """Whether the annotation stays out of the hash (a controller's signal, not the template)."""
    return key in EXCLUDED_ANNOTATIONS or key.startswith(EXCLUDED_ANNOTATION_PREFIXES)


def excluded_label(key: str) -> bool:
    """Whether the label stays out of the hash (the admission plane's, not the template's)."""
    return key in EXCLUDED_LABELS


def _string_map(value: Any) -> dict[str, str]:
    return {str(k): v for k, v in value.items()} if isinstance(value, Mapping) else {}


def _pod_meta(metadata: Mapping[str, Any] | None) -> str:
    meta = metadata or {}
    labels = {k: v for k, v in _string_map(meta.get("labels")).items() if not excluded_label(k)}
    annotations = {
        k: v for k, v in _string_map(meta.get("annotations")).items() if not excluded_annotation(k)
    }
    if not labels and not annotations:
        return "null"
    ref = "map:string"
    parts = ['"creationTimestamp":null']
    if labels:
        parts.append(f'"labels":{marshal(labels, ref)}')
    if annotations:
        parts.append(f'"annotations":{marshal(annotations, ref)}')
    return "{" + ",".join(parts) + "}"


def canonical_json(value: Any) -> bytes:
    """Canonical JSON: keys sorted at every level, no whitespace, null-valued keys dropped."""
    return orjson.dumps(_without_nulls(value), option=orjson.OPT_SORT_KEYS)


def _without_nulls(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list | tuple):
        return [_without_nulls(item) for item in value]
    return value


def revision_payload(
    *,
    pod_spec: Mapping[str, Any] | None,
    pod_meta: Mapping[str, Any] | None,
    worker_pod_spec: Mapping[str, Any] | None = None,
    topology_key: str | None = None,
    pairing_protocol: str | None = None,
) -> bytes:
    """The ControllerRevision's ``data``: the bytes the hash is taken over.

    ``topology_key`` counts only with a worker template, as upstream ignores it for a
    single-pod component; an empty one is no key.
    """
    spec_ref = root_type("PodSpec")
    try:
        spec = marshal(pod_spec or {}, spec_ref)
        worker = None if worker_pod_spec is None else marshal(worker_pod_spec, spec_ref)
    except GoJsonError:
        spec = canonical_json(pod_spec or {}).decode()
        worker = None if worker_pod_spec is None else canonical_json(worker_pod_spec).decode()
    parts = [f'"podSpec":{spec}', f'"podMeta":{_pod_meta(pod_meta)}']
    if worker is not None:
        parts.append(f'"workerPodSpec":{worker}')
        if topology_key:
            parts.append(f'"topologyKey":{go_string(topology_key)}')
    if pairing_protocol:
        parts.append(f'"pairingProtocol":{go_string(pairing_protocol)}')
    return ("{" + ",".join(parts) + "}").encode()


def payload_hash(payload: bytes, *, collision_count: int = 0, owner_uid: str = "") -> str:
    """Upstream's revision hash of ``payload``: 8 hex digits."""
    return suffixed_hash(fnv32a(payload), collision_count=collision_count, owner_uid=owner_uid)


def suffixed_hash(payload_fnv: int, *, collision_count: int = 0, owner_uid: str = "") -> str:
    """:func:`payload_hash` from the payload's own FNV-32a state ``payload_fnv``: the hash over
    a long payload is the costly part, and a caller that keeps it pays only for the suffixes."""
    value = fnv32a(f"|cc={collision_count}|".encode(), payload_fnv)
    value = fnv32a(f"|uid={owner_uid}|".encode(), value)
    return f"{value:08x}"


def revision_prefix(*, isvc: str, component: str) -> str:
    """``<isvc>-<component>``, cut (never the hash) so that a name fits a label value."""
    room = MAX_REVISION_NAME_LENGTH - REVISION_HASH_LENGTH - 1
    return f"{isvc}-{component}"[:room].rstrip("-.")


def revision_name(*, isvc: str, component: str, digest: str) -> str:
    """``<isvc>-<component>-<hash>``."""
    return f"{revision_prefix(isvc=isvc, component=component)}-{digest}"


def legacy_template_hash(template: Mapping[str, Any]) -> str:
    """The hash omed gave a template before upstream's: SHA-256 of its canonical JSON, cut."""
    return hashlib.sha256(canonical_json(template)).hexdigest()[:REVISION_HASH_LENGTH]


def revision_hash(revision: str) -> str:
    """The hash part of a revision name (its last 8 characters).

    Raises ``ValueError`` when ``revision`` doesn't end in ``-`` and 8 lowercase hex characters.
    """
    suffix = revision[-REVISION_HASH_LENGTH:]
    separator = revision[-REVISION_HASH_LENGTH - 1 : -REVISION_HASH_LENGTH]
    if separator != "-" or not _HASH_RE.fullmatch(suffix):
        msg = f"{revision!r} is not a revision name (<isvc>-<component>-<8 hex characters>)"
        raise ValueError(msg)
    return suffix


def is_revision_hash(text: str) -> bool:
    """Whether ``text`` has the form of a revision hash (8 lowercase hex characters)."""
    return _HASH_RE.fullmatch(text) is not None
