"""OpenAPI v3 schema of ``status.instanceStatusColumns`` (the ColumnarV2 form).

Why here: the CRD generator (:mod:`omed.api.crdgen`) needs this schema and sits below the codec
(:mod:`omed.statuscodec`) in the layers, so the codec's format is declared next to the models.
docs/status-encoding.md specifies the format; :mod:`omed.statuscodec.layout` names its keys.

The schema is structural (every node typed, no ``$ref``, nothing preserved unknown): the API
server checks the JSON types and prunes unknown keys, and the codec's decoder checks the rest
(the grammars inside the strings, references, coverage). Maps and the object itself are atomic
for server-side apply, because one writer replaces the whole encoding at once.

Invariant: every object :func:`omed.statuscodec.encode_columnar` returns validates against
:data:`COLUMNAR_V2_SCHEMA` unchanged (pruning removes nothing).
"""

from __future__ import annotations

from typing import Any, Final

_SEQUENCE: Final = (
    "a value sequence: comma-separated items, each an integer, '~' (absent), "
    "'<value>*<count>' (repeated) or '<a>-<b>' (ascending run)"
)

COLUMNAR_V2_SCHEMA: dict[str, Any] = {
    "description": (
        "Per-Instance rows in the ColumnarV2 form, when instanceStatusEncoding is ColumnarV2: "
        "the distinct rows (classes) stored column by column, each row's index and class. "
        "See OME's Instance status encoding documentation."
    ),
    "type": "object",
    "properties": {
        "version": {
            "description": "Format version: 2.",
            "type": "integer",
        },
        "rowCount": {
            "description": "Number of rows (Instances).",
            "type": "integer",
            "minimum": 0,
        },
        "classCount": {
            "description": "Number of distinct rows without their index (classes).",
            "type": "integer",
            "minimum": 0,
        },
        "strings": {
            "description": "The string table: string tokens below its length refer to it.",
            "type": "array",
            "items": {"type": "string"},
            "x-kubernetes-list-type": "atomic",
        },
        "times": {
            "description": (
                "Timestamps (YYYY-MM-DDTHH:MM:SSZ) as seconds since 1970, the first absolute "
                "and each next one as a difference, in " + _SEQUENCE + "; string tokens past "
                "the string table refer to them."
            ),
            "type": "string",
        },
        "index": {
            "description": "Each row's index, in row order, as " + _SEQUENCE + ".",
            "type": "string",
        },
        "rowClass": {
            "description": "Each row's class, in row order, as " + _SEQUENCE + ".",
            "type": "string",
        },
        "overrides": {
            "description": (
                "Rows whose class differs from rowClass: class number to a range set of row "
                "positions ('17,4500-4501')."
            ),
            "type": "object",
            "additionalProperties": {"type": "string"},
            "x-kubernetes-map-type": "atomic",
        },
        "columns": {
            "description": (
                "The class table: column path (phase, conditions.0.type, operation.id, ...) to "
                "one token per class, as " + _SEQUENCE + "."
            ),
            "type": "object",
            "additionalProperties": {"type": "string"},
            "x-kubernetes-map-type": "atomic",
        },
    },
    "required": ["version", "rowCount", "classCount"],
    "x-kubernetes-map-type": "atomic",
}
"""The schema of ``status.instanceStatusColumns``; the CRD generator embeds it as is."""
