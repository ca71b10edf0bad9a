"""Revision names: ``<isvc>-<component>-<hash>``, the hash being 8 hex digits of the pod template.

A revision names one version of a component's pod template. It is written on every pod (label
``ome.io/revision``), in the Instances' rows, in retry blocks, and typed by users into
``kubectl ome instance release-held``. So the hash must be a pure function of the template's
content: equal templates give equal names in every process, on every run, whatever the key order
or the presence of null fields.

The hash is the first 8 hex characters of the SHA-256 of the template's canonical JSON: keys
sorted at every level, no whitespace, and keys whose value is null dropped (the API server reads
a null field as an absent one). Hash the template as the component defines it, before the
per-Instance labels (index, incarnation, revision) are added, or every Instance would get its own
revision.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from typing import Any, Final

import orjson

REVISION_HASH_LENGTH: Final = 8
MAX_REVISION_NAME_LENGTH: Final = 63
"""Revision names are pod label values, which Kubernetes caps at 63 characters."""

_HASH_RE: Final = re.compile(rf"[0-9a-f]{{{REVISION_HASH_LENGTH}}}")


def _without_nulls(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list | tuple):
        return [_without_nulls(item) for item in value]
    return value


def canonical_json(template: Mapping[str, Any]) -> bytes:
    """The canonical JSON bytes of ``template`` that its hash is taken over."""
    return orjson.dumps(_without_nulls(template), option=orjson.OPT_SORT_KEYS)


def template_hash(template: Mapping[str, Any]) -> str:
    """8 hex characters that identify the content of a pod template."""
    return hashlib.sha256(canonical_json(template)).hexdigest()[:REVISION_HASH_LENGTH]


def revision_name(*, isvc: str, component: str, template: Mapping[str, Any]) -> str:
    """``<isvc>-<component>-<hash>`` for ``template``.

    Raises ``ValueError`` when the name would exceed the 63 characters of a label value, which
    happens only for InferenceService names longer than the webhook admits.
    """
    name = f"{isvc}-{component}-{template_hash(template)}"
    if len(name) > MAX_REVISION_NAME_LENGTH:
        msg = (
            f"revision name {name!r} is {len(name)} characters long; "
            f"a label value allows {MAX_REVISION_NAME_LENGTH}"
        )
        raise ValueError(msg)
    return name


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
