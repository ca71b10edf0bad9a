"""A check that a value parses as a model, without making the model's instances.

Why: the admission webhook parses every InferenceService spec it admits with the model the
controllers read it with (so that what is admitted can be read), and throws the parse away.
Making the dozen model instances of a spec is about 40% of that parse (22 against 13 us hot
on the bench's spec), and filling in the defaults of the fields a spec leaves out (most of
its 72) most of the rest. :func:`shape_checker` builds, once, a pydantic-core validator from
the model's *own* core schema with each ``model`` node replaced by a ``typed-dict`` node
holding the same fields: the same types, constraints, aliases and field validators, checked
by the same code, returning plain dicts instead of instances, where a field with a default is
simply not required (its default is never made: the model doesn't validate it either).

What it leaves out, by construction: *model* validators (``@model_validator``), which need an
instance. The caller names the ones it stands in for (``dropped``); a model that gains
another one makes :func:`shape_checker` raise, so nobody loses a check silently. Each model's
extra-keys behaviour is carried onto its fields node; names and aliases must be accepted alike
in every model of the tree (omed's ``ApiModel`` does), as must strictness, and are set once
for the whole check.

Invariant: for a value ``v``, ``checker(v)`` is true exactly when ``Model.model_validate(v)``
succeeds or fails only in a dropped model validator. A false answer says nothing of why: parse
with the model for its errors. A default the model would validate (``validate_default``), or
a field validator that reads the other fields (``info.data``), would break that, so
:func:`shape_checker` raises on either.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from pydantic import BaseModel, ValidationError
from pydantic_core import CoreConfig, SchemaValidator

_WRAPPERS = frozenset({"function-after", "function-before", "function-wrap"})
_SHARED_SETTINGS = ("validate_by_alias", "validate_by_name", "strict")
"""Model settings that a fields node can't carry: every model of the tree must agree on them,
and the check applies them once, to the whole tree."""


def shape_checker(
    model: type[BaseModel], *, dropped: Iterable[object] = ()
) -> Callable[[Any], bool]:
    """A check that ``model.model_validate(value)`` would succeed, made once per model.

    ``dropped``: the model validators the caller checks itself (by other means); any other
    model validator in the tree raises :class:`ValueError` here.
    """
    found: list[Callable[..., Any]] = []
    names: set[tuple[Any, ...]] = set()
    schema = _without_models(model.__pydantic_core_schema__, found=found, names=names)
    stood_in = set(map(id, dropped))
    unexpected = [fn for fn in found if id(fn) not in stood_in]
    if unexpected:
        shown = ", ".join(getattr(fn, "__qualname__", repr(fn)) for fn in unexpected)
        raise ValueError(f"{model.__name__} has model validators nobody stands in for: {shown}")
    if len(names) != 1:
        raise ValueError(
            f"{model.__name__}'s models don't agree on names, aliases and strictness: {names}"
        )
    (settings,) = names
    given = {name: value for name, value in zip(_SHARED_SETTINGS, settings, strict=True) if value}
    config = CoreConfig(**given)  # type: ignore[typeddict-item]
    validator = SchemaValidator(schema, config)

    def check(value: Any) -> bool:
        try:
            validator.validate_python(value)
        except ValidationError:
            return False
        return True

    return check


def _without_models(
    node: Any, *, found: list[Callable[..., Any]], names: set[tuple[Any, ...]]
) -> Any:
    """``node`` (a core schema, or a part of one) with its model nodes unwrapped."""
    if isinstance(node, list):
        return [_without_models(item, found=found, names=names) for item in node]
    if not isinstance(node, dict):
        return node
    kind = node.get("type")
    if not isinstance(kind, str):  # a fields map with a field named "type"
        kind = None
    inner = node.get("schema")
    if kind == "model" and isinstance(inner, dict) and inner.get("type") == "model-fields":
        config = node.get("config") or {}
        names.add(tuple(config.get(setting) for setting in _SHARED_SETTINGS))
        fields = _as_typed_dict(inner, found=found, names=names)
        fields["extra_behavior"] = config.get("extra_fields_behavior", "ignore")
        # A typed-dict reads names against aliases from its own config, not the validator's.
        fields["config"] = {key: config[key] for key in _SHARED_SETTINGS if key in config}
        return _keep_ref(node, fields)
    if kind in _WRAPPERS and isinstance(inner, dict) and inner.get("type") == "model":
        found.append(node["function"]["function"])
        return _keep_ref(node, _without_models(inner, found=found, names=names))
    if kind == "with-info":  # a validator function that may read the fields beside it
        raise ValueError(
            f"validator {getattr(node.get('function'), '__qualname__', node)} takes "
            "ValidationInfo: the check can't tell whether it reads info.data"
        )
    return {key: _without_models(value, found=found, names=names) for key, value in node.items()}


_FIELD_KEYS = ("validation_alias", "serialization_alias", "serialization_exclude", "metadata")
"""What a ``model-field`` carries over to its ``typed-dict-field``."""


def _as_typed_dict(
    fields_node: dict[str, Any], *, found: list[Callable[..., Any]], names: set[tuple[Any, ...]]
) -> dict[str, Any]:
    """A ``model-fields`` node as a ``typed-dict``: a field with a default becomes one that
    is not required, so a missing field costs nothing."""
    fields: dict[str, Any] = {}
    for name, field in fields_node["fields"].items():
        schema = field["schema"]
        required = True
        if isinstance(schema, dict) and schema.get("type") == "default":
            if schema.get("validate_default"):
                raise ValueError(f"field {name!r} validates its default")
            schema, required = schema["schema"], False
        converted = {
            "type": "typed-dict-field",
            "schema": _without_models(schema, found=found, names=names),
            "required": required,
        }
        converted.update({key: field[key] for key in _FIELD_KEYS if key in field})
        fields[name] = converted
    node: dict[str, Any] = {"type": "typed-dict", "fields": fields}
    if "extras_schema" in fields_node:
        node["extras_schema"] = _without_models(
            fields_node["extras_schema"], found=found, names=names
        )
    return _keep_ref(fields_node, node)


def _keep_ref(node: dict[str, Any], replacement: dict[str, Any]) -> dict[str, Any]:
    """``replacement`` under ``node``'s definition name, if it had one."""
    if "ref" in node:
        return {**replacement, "ref": node["ref"]}
    return replacement
