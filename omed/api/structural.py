"""From pydantic's JSON Schema to a structural OpenAPI v3 schema, and a checker for the rules.

The API server rejects a CRD whose schema isn't structural (apiextensions.k8s.io/v1): every
node must say its type, nothing may hide behind ``$ref`` or ``anyOf``, and many JSON Schema
keywords that pydantic emits (``title``, ``const``, numeric ``exclusiveMinimum``, a ``default`` of
null) are invalid there. :func:`to_structural` rewrites pydantic's output into that dialect and
fails loudly on anything it can't express, rather than emit a schema the API server would refuse;
:func:`structural_violations` checks a finished schema against the rules, so the generator and
the tests check the same thing.

The rewrite:

* ``$ref`` is replaced by its ``$defs`` entry; sibling keys (a field's description) win.
* ``anyOf`` with a ``{"type": "null"}`` branch becomes the other branch: omed never writes null
  (it dumps with ``exclude_none``), and the API server prunes nulls from non-nullable fields.
* ``additionalProperties: true`` (a model that keeps unknown keys) becomes
  ``x-kubernetes-preserve-unknown-fields: true``.
* ``const`` becomes a one-value ``enum``; numeric ``exclusiveMinimum``/``exclusiveMaximum``
  become OpenAPI v3.0's ``minimum`` with a boolean flag.
* ``title`` and ``default`` are dropped: omed applies defaults in-process, so stored objects
  hold what their writer wrote.
* Descriptions (docstrings) are folded onto one line, without reST markup.
* Object properties come out sorted by name, so the generated files diff cleanly.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

PRESERVE_UNKNOWN: Final = "x-kubernetes-preserve-unknown-fields"
INT_OR_STRING: Final = "x-kubernetes-int-or-string"
LIST_TYPE: Final = "x-kubernetes-list-type"
LIST_MAP_KEYS: Final = "x-kubernetes-list-map-keys"

_TYPES: Final = frozenset({"object", "array", "string", "integer", "number", "boolean"})
_ALLOWED_KEYS: Final = frozenset(
    {
        "type",
        "format",
        "description",
        "properties",
        "required",
        "items",
        "additionalProperties",
        "enum",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "minLength",
        "maxLength",
        "pattern",
        "minItems",
        "maxItems",
        "minProperties",
        "maxProperties",
        "multipleOf",
        PRESERVE_UNKNOWN,
        INT_OR_STRING,
        LIST_TYPE,
        LIST_MAP_KEYS,
        "x-kubernetes-map-type",
    }
)
_DROPPED_KEYS: Final = frozenset({"title", "default", "examples"})
_KEY_ORDER: Final = (
    "description",
    "type",
    "format",
    "enum",
    "pattern",
    "minimum",
    "exclusiveMinimum",
    "maximum",
    "exclusiveMaximum",
    "minLength",
    "maxLength",
    "minItems",
    "maxItems",
    "minProperties",
    "maxProperties",
    "multipleOf",
    INT_OR_STRING,
    "items",
    "properties",
    "additionalProperties",
    "required",
    PRESERVE_UNKNOWN,
    LIST_TYPE,
    LIST_MAP_KEYS,
    "x-kubernetes-map-type",
)


class SchemaError(ValueError):
    """A JSON Schema construct with no structural equivalent."""


def to_structural(schema: Mapping[str, Any]) -> dict[str, Any]:
    """Rewrite a pydantic JSON Schema (with ``$defs``) into a structural OpenAPI v3 schema."""
    defs: Mapping[str, Any] = schema.get("$defs", {})
    root = {key: value for key, value in schema.items() if key != "$defs"}
    return _convert(root, defs=defs, path="", resolving=())


def _convert(
    node: Mapping[str, Any], *, defs: Mapping[str, Any], path: str, resolving: tuple[str, ...]
) -> dict[str, Any]:
    node = dict(node)
    siblings = {key: value for key, value in node.items() if key not in {"$ref", "anyOf", "allOf"}}

    if "$ref" in node:
        target_name = _ref_name(node["$ref"], path=path)
        if target_name in resolving:
            raise SchemaError(f"{path or '<root>'}: recursive model {target_name} can't be inlined")
        if target_name not in defs:
            raise SchemaError(f"{path or '<root>'}: unknown $ref {node['$ref']}")
        base = _convert(
            defs[target_name], defs=defs, path=path, resolving=(*resolving, target_name)
        )
        return _overlay(base, siblings, defs=defs, path=path, resolving=resolving)

    if "allOf" in node:
        branches = node["allOf"]
        if len(branches) != 1:
            raise SchemaError(f"{path or '<root>'}: allOf with {len(branches)} branches")
        base = _convert(branches[0], defs=defs, path=path, resolving=resolving)
        return _overlay(base, siblings, defs=defs, path=path, resolving=resolving)

    if "anyOf" in node:
        branches = [b for b in node["anyOf"] if b != {"type": "null"}]
        if len(branches) == 1:
            base = _convert(branches[0], defs=defs, path=path, resolving=resolving)
        elif _is_int_or_string(branches):
            base = {INT_OR_STRING: True}
        else:
            raise SchemaError(f"{path or '<root>'}: anyOf with {len(branches)} non-null branches")
        return _overlay(base, siblings, defs=defs, path=path, resolving=resolving)

    return _convert_plain(node, defs=defs, path=path, resolving=resolving)


def _overlay(
    base: dict[str, Any],
    siblings: Mapping[str, Any],
    *,
    defs: Mapping[str, Any],
    path: str,
    resolving: tuple[str, ...],
) -> dict[str, Any]:
    if not siblings:
        return base
    extra = _convert_plain(siblings, defs=defs, path=path, resolving=resolving, typed=False)
    return _ordered({**base, **extra})


def _convert_plain(
    node: Mapping[str, Any],
    *,
    defs: Mapping[str, Any],
    path: str,
    resolving: tuple[str, ...],
    typed: bool = True,
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in _DROPPED_KEYS:
            continue
        if key == "properties":
            out[key] = {
                name: _convert(sub, defs=defs, path=f"{path}.{name}", resolving=resolving)
                for name, sub in sorted(value.items())
            }
        elif key == "items":
            if not isinstance(value, Mapping):
                raise SchemaError(f"{path}: tuple-typed items are not structural")
            out[key] = _convert(value, defs=defs, path=f"{path}[]", resolving=resolving)
        elif key == "additionalProperties":
            if value is True:
                out[PRESERVE_UNKNOWN] = True
            elif value is False:
                continue  # unknown fields are pruned anyway
            else:
                out[key] = _convert(value, defs=defs, path=f"{path}.*", resolving=resolving)
        elif key == "description":
            out[key] = " ".join(str(value).replace("``", "").split())
        elif key == "const":
            out["enum"] = [value]
        elif key in {"exclusiveMinimum", "exclusiveMaximum"} and not isinstance(value, bool):
            bound = "minimum" if key == "exclusiveMinimum" else "maximum"
            out[bound] = value
            out[key] = True
        elif key in {"$ref", "anyOf", "allOf", "oneOf", "not"}:
            raise SchemaError(f"{path or '<root>'}: {key} is not supported here")
        elif key not in _ALLOWED_KEYS:
            raise SchemaError(f"{path or '<root>'}: keyword {key!r} is not valid in a CRD schema")
        else:
            out[key] = value
    if out.get(INT_OR_STRING):
        out.pop("type", None)
    if typed and "type" not in out and not out.get(INT_OR_STRING) and not out.get(PRESERVE_UNKNOWN):
        raise SchemaError(f"{path or '<root>'}: node has no type")
    if out.get(PRESERVE_UNKNOWN) and "type" not in out and not out.get(INT_OR_STRING):
        out["type"] = "object"
    return _ordered(out)


def _ref_name(ref: str, *, path: str) -> str:
    prefix = "#/$defs/"
    if not ref.startswith(prefix):
        raise SchemaError(f"{path or '<root>'}: $ref {ref} is not local")
    return ref[len(prefix) :]


def _is_int_or_string(branches: list[Any]) -> bool:
    types = sorted(b.get("type", "") for b in branches if isinstance(b, Mapping))
    return len(branches) == 2 and types == ["integer", "string"]


def _ordered(node: Mapping[str, Any]) -> dict[str, Any]:
    rank = {key: i for i, key in enumerate(_KEY_ORDER)}
    return {key: node[key] for key in sorted(node, key=lambda k: (rank.get(k, len(rank)), k))}


# -- Checking --------------------------------------------------------------------------------


_CRD_KEYS: Final = _ALLOWED_KEYS | {
    "nullable",
    "default",
    "title",
    "example",
    "externalDocs",
    "anyOf",
    "allOf",
    "oneOf",
    "not",
    "uniqueItems",
    "x-kubernetes-validations",
    "x-kubernetes-embedded-resource",
}
"""Keys that an apiextensions.k8s.io/v1 schema may use; :func:`to_structural` emits fewer."""
_JUNCTORS: Final = ("anyOf", "allOf", "oneOf", "not")


def structural_violations(schema: Mapping[str, Any], *, root: bool = True) -> list[str]:
    """Every way ``schema`` breaks the apiextensions.k8s.io/v1 structural rules omed relies on.

    With ``root`` set, ``schema`` is a version's ``openAPIV3Schema``: it must be an object that
    isn't nullable, and its ``metadata`` may say nothing but ``type: object``.
    """
    problems: list[str] = []
    if root:
        if schema.get("type") != "object":
            problems.append("<root>: type must be object")
        if "nullable" in schema:
            problems.append("<root>: nullable is not allowed")
        metadata = schema.get("properties", {}).get("metadata")
        if metadata is not None and dict(metadata) != {"type": "object"}:
            problems.append("<root>.metadata: must be exactly {type: object}")
    _check(schema, path="", problems=problems)
    return problems


def _check(node: Mapping[str, Any], *, path: str, problems: list[str]) -> None:
    where = path or "<root>"
    for key in node:
        if key not in _CRD_KEYS:
            problems.append(f"{where}: keyword {key!r} is not allowed")
    if node.get("uniqueItems") is True:
        problems.append(f"{where}: uniqueItems must not be true")
    for junctor in _JUNCTORS:
        branches = node.get(junctor)
        if branches is None:
            continue
        for branch in branches if isinstance(branches, list) else [branches]:
            if isinstance(branch, Mapping) and ({"type", "nullable", "$ref"} & branch.keys()):
                problems.append(f"{where}: {junctor} branch declares a type (not structural)")
    int_or_string = node.get(INT_OR_STRING) is True
    preserve = node.get(PRESERVE_UNKNOWN) is True
    node_type = node.get("type")
    if int_or_string:
        if node_type is not None:
            problems.append(f"{where}: int-or-string node must not have a type")
        if preserve:
            problems.append(f"{where}: int-or-string node must not preserve unknown fields")
    elif node_type is None:
        if not preserve:
            problems.append(f"{where}: node has no type")
    elif node_type not in _TYPES:
        problems.append(f"{where}: unknown type {node_type!r}")
    if "properties" in node and "additionalProperties" in node:
        problems.append(f"{where}: properties and additionalProperties are exclusive")
    if ("properties" in node or "additionalProperties" in node) and node_type != "object":
        problems.append(f"{where}: properties need type object")
    if "items" in node and node_type != "array":
        problems.append(f"{where}: items need type array")
    if node_type == "array" and not isinstance(node.get("items"), Mapping):
        problems.append(f"{where}: an array needs one items schema")
    for name in node.get("required", ()):
        if name not in node.get("properties", {}):
            problems.append(f"{where}: required field {name!r} is not a property")
    if "enum" in node and not node["enum"]:
        problems.append(f"{where}: enum is empty")
    _check_list_type(node, where=where, problems=problems)
    for name, sub in node.get("properties", {}).items():
        _check(sub, path=f"{path}.{name}", problems=problems)
    if isinstance(node.get("items"), Mapping):
        _check(node["items"], path=f"{path}[]", problems=problems)
    if isinstance(node.get("additionalProperties"), Mapping):
        _check(node["additionalProperties"], path=f"{path}.*", problems=problems)


def _check_list_type(node: Mapping[str, Any], *, where: str, problems: list[str]) -> None:
    list_type = node.get(LIST_TYPE)
    keys = node.get(LIST_MAP_KEYS)
    if list_type is None:
        if keys is not None:
            problems.append(f"{where}: {LIST_MAP_KEYS} without {LIST_TYPE}: map")
        return
    if node.get("type") != "array":
        problems.append(f"{where}: {LIST_TYPE} on a non-array")
    if list_type not in {"atomic", "set", "map"}:
        problems.append(f"{where}: unknown {LIST_TYPE} {list_type!r}")
    if list_type != "map":
        if keys is not None:
            problems.append(f"{where}: {LIST_MAP_KEYS} needs {LIST_TYPE}: map")
        return
    items = node.get("items", {})
    if items.get("type") != "object":
        problems.append(f"{where}: a list-map's items must be objects")
    if not keys:
        problems.append(f"{where}: a list-map needs {LIST_MAP_KEYS}")
        return
    properties = items.get("properties", {})
    required = set(items.get("required", ()))
    for key in keys:
        prop = properties.get(key)
        if prop is None:
            problems.append(f"{where}: list-map key {key!r} is not a property of the items")
            continue
        if key not in required and "default" not in prop:
            problems.append(f"{where}: list-map key {key!r} must be required")
        if prop.get("type") not in {"string", "integer", "number", "boolean"}:
            problems.append(f"{where}: list-map key {key!r} must be a scalar")
