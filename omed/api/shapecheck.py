"""A check that a value parses as a model, without making the model's instances.

Why: the admission webhook parses every InferenceService spec it admits with the model the
controllers read it with (so that what is admitted can be read), and throws the parse away.
Making the dozen model instances of a spec is about 40% of that parse (22 against 13 us hot
on the bench's spec). :func:`shape_checker` builds, once, a pydantic-core validator from the
model's *own* core schema with each ``model`` node replaced by the ``model-fields`` node it
wraps: the same fields, types, constraints, aliases and field validators, checked by the
same code, returning plain values instead of instances.

What it leaves out, by construction: *model* validators (``@model_validator``), which need an
instance. The caller names the ones it stands in for (``dropped``); a model that gains
another one makes :func:`shape_checker` raise, so nobody loses a check silently. Each model's
extra-keys behaviour is carried onto its fields node; names and aliases must be accepted alike
in every model of the tree (omed's ``ApiModel`` does), as must strictness, and are set once
for the whole check.

Invariant: for a value ``v``, ``checker(v)`` is true exactly when ``Model.model_validate(v)``
succeeds or fails only in a dropped model validator. A false answer says nothing of why: parse
with the model for its errors.
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
    if kind == "model" and isinstance(inner, dict):
        config = node.get("config") or {}
        names.add(tuple(config.get(setting) for setting in _SHARED_SETTINGS))
        fields = dict(_without_models(inner, found=found, names=names))
        fields["extra_behavior"] = config.get("extra_fields_behavior", "ignore")
        return _keep_ref(node, fields)
    if kind in _WRAPPERS and isinstance(inner, dict) and inner.get("type") == "model":
        found.append(node["function"]["function"])
        return _keep_ref(node, _without_models(inner, found=found, names=names))
    return {key: _without_models(value, found=found, names=names) for key, value in node.items()}


def _keep_ref(node: dict[str, Any], replacement: dict[str, Any]) -> dict[str, Any]:
    """``replacement`` under ``node``'s definition name, if it had one."""
    if "ref" in node:
        return {**replacement, "ref": node["ref"]}
    return replacement
