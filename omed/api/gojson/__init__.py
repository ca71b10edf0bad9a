"""Go's ``encoding/json`` bytes of typed Kubernetes and OME structs, from the stored JSON.

Why: upstream OME names a pod template's revision by the FNV-32a hash of ``json.Marshal`` of
typed Go structs (``corev1.PodSpec`` and friends), and omed must give a template the same name.
omed holds the template as plain JSON, so this package does what Go does with it: decode into
the typed struct (unknown keys dropped, keys matched exactly and then case-insensitively, null
read as the zero value), then encode (fields in struct declaration order, ``omitempty`` and
``omitzero`` as tagged, map keys sorted, HTML characters escaped as ``\\u003c``).

The field order and flags come from ``k8s_types.json``, which ``tools/gojson-table`` generates
from the Go types by reflection (k8s.io/api v0.36); only what must match Go byte for byte is
written by hand here: string escaping, ``resource.Quantity``'s canonical form
(:mod:`.quantity`), ``intstr.IntOrString`` and ``metav1.Time``.

Coverage: every field of ``corev1.PodSpec`` and ``metav1.ObjectMeta`` in k8s.io/api v0.36, and
of upstream OME's ``ServingRuntimeSpec`` as ``tools/gojson-table/ome`` declares it (the runtime
revision hash, :mod:`omed.api.runtimehash`).
Outside it, :class:`GoJsonError` is raised where Go's ``json.Unmarshal`` would fail (a value of
the wrong JSON type, an integer out of range or given as a float, a quantity Go can't parse), and
for what this encoder doesn't model: ``managedFields``' ``fieldsV1``, and keys that only match a
field by Unicode case folding. A field newer than v0.36 is dropped, as an upstream built against
v0.36 drops it.
"""

from __future__ import annotations

import datetime as dt
import json
import math
from collections.abc import Mapping
from decimal import Decimal
from functools import cache
from importlib import resources
from typing import Any, Final

from omed.api.gojson import quantity
from omed.api.gostring import go_string

_ABSENT: Final = object()
_INTEGERS: Final = frozenset(f"{sign}int{bits}" for sign in ("", "u") for bits in (8, 16, 32, 64))


class GoJsonError(ValueError):
    """The value can't be encoded as Go would: ``path`` says where."""

    def __init__(self, path: str, why: str) -> None:
        super().__init__(f"{path or '.'}: {why}")
        self.path = path
        self.why = why


Field = tuple[str, str, bool, bool]
"""(JSON name, type, omitempty, omitzero)."""


@cache
def _table() -> tuple[dict[str, str], dict[str, tuple[Field, ...]]]:
    raw = json.loads(resources.files(__package__).joinpath("k8s_types.json").read_text("utf-8"))
    types = {
        name: tuple(
            (f["name"], f["type"], bool(f.get("omitempty")), bool(f.get("omitzero")))
            for f in fields
        )
        for name, fields in raw["types"].items()
    }
    return dict(raw["roots"]), types


def root_type(name: str) -> str:
    """The type reference of a root of the table (``PodSpec``, ``ObjectMeta``)."""
    return _table()[0][name]


def marshal(value: Any, type_ref: str) -> str:
    """What Go's ``json.Marshal`` writes for ``value`` (JSON-shaped) unmarshalled into the type."""
    return _encode(_decode(value, type_ref, ""), type_ref)


def go_float(value: float) -> str:
    """A float64 as Go's encoder writes it: shortest digits, an exponent only outside
    [1e-6, 1e21), and no leading zero in a negative exponent."""
    if not math.isfinite(value):
        raise GoJsonError("", f"unsupported value: {value}")
    exact = Decimal(repr(value))
    absolute = abs(value)
    if absolute != 0 and (absolute < 1e-6 or absolute >= 1e21):
        sign, digits, exponent = exact.normalize().as_tuple()
        assert isinstance(exponent, int)
        scientific = exponent + len(digits) - 1
        mantissa = str(digits[0]) + ("." + "".join(map(str, digits[1:])) if len(digits) > 1 else "")
        power = f"{abs(scientific):02d}" if scientific >= 0 else str(abs(scientific))
        return f"{'-' if sign else ''}{mantissa}e{'+' if scientific >= 0 else '-'}{power}"
    text = format(exact, "f")
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return text


def marshal_untyped(value: Any) -> str:
    """``value`` (decoded JSON) as Go's ``json.Marshal`` writes it once decoded into
    ``interface{}``: object keys sorted, no spaces, strings as :func:`go_string`, integral
    numbers as integers and others as :func:`go_float`.

    Why: the API server keeps a ``RawExtension`` (a ControllerRevision's ``data``) as the
    bytes it was sent, but a merge patch of the object (the garbage collector's, removing an
    owner reference) re-encodes it this way and then finds ``data`` changed, which it refuses
    as immutable. Bytes already in this form survive the round trip.
    """
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, str):
        return go_string(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() and abs(value) < 2**63 else go_float(value)
    if isinstance(value, Mapping):
        items = sorted((str(k), v) for k, v in value.items())
        return "{" + ",".join(f"{go_string(k)}:{marshal_untyped(v)}" for k, v in items) + "}"
    if isinstance(value, list | tuple):
        return "[" + ",".join(marshal_untyped(v) for v in value) + "]"
    raise GoJsonError("", f"unsupported value of type {type(value).__name__}")


# -- decode: JSON -> a Go-shaped value -------------------------------------------------------


def _int_range(type_ref: str) -> tuple[int, int]:
    bits = int(type_ref[3:] if type_ref.startswith("int") else type_ref[4:])
    if type_ref.startswith("uint"):
        return 0, (1 << bits) - 1
    return -(1 << (bits - 1)), (1 << (bits - 1)) - 1


def _decode(value: Any, ref: str, path: str) -> Any:
    null = value is None or value is _ABSENT
    if ref.startswith("ptr:"):
        return None if null else _decode(value, ref[4:], path)
    if ref.startswith("slice:"):
        if null:
            return None
        if not isinstance(value, list):
            raise GoJsonError(path, f"cannot unmarshal {go_kind(value)} into a slice")
        return [_decode(item, ref[6:], f"{path}[{i}]") for i, item in enumerate(value)]
    if ref.startswith("map:"):
        if null:
            return None
        if not isinstance(value, Mapping):
            raise GoJsonError(path, f"cannot unmarshal {go_kind(value)} into a map")
        return {str(k): _decode(v, ref[4:], f"{path}.{k}") for k, v in value.items()}
    if ref.startswith("struct:"):
        return _decode_struct(None if null else value, ref[7:], path)
    if ref == "string":
        if null:
            return ""
        if not isinstance(value, str):
            raise GoJsonError(path, f"cannot unmarshal {go_kind(value)} into a string")
        return value
    if ref == "bool":
        if null:
            return False
        if not isinstance(value, bool):
            raise GoJsonError(path, f"cannot unmarshal {go_kind(value)} into a bool")
        return value
    if ref in _INTEGERS:
        if null:
            return 0
        low, high = _int_range(ref)
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise GoJsonError(path, f"cannot unmarshal {value!r} into {ref}")
        return value
    if ref == "quantity":
        if null:
            return quantity.ZERO
        return _quantity(value, path)
    if ref == "intorstring":
        if null:
            return 0
        if isinstance(value, str):
            return value
        if isinstance(value, bool) or not isinstance(value, int) or not -(2**31) <= value < 2**31:
            raise GoJsonError(path, f"cannot unmarshal {value!r} into an IntOrString")
        return value
    if ref == "time":
        if null:
            return None
        return _time(value, path)
    if null:
        return None
    raise GoJsonError(path, f"{ref} is not encoded by omed")


def go_kind(value: Any) -> str:
    """What Go's encoding/json calls a decoded value in an UnmarshalTypeError (``cannot
    unmarshal <kind> into ...``): bool, number, string, array, or object for anything else."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def _quantity(value: Any, path: str) -> quantity.Quantity:
    if isinstance(value, str):
        text = value.strip()
    elif isinstance(value, bool):
        raise GoJsonError(path, "cannot unmarshal bool into a Quantity")
    elif isinstance(value, int):
        text = str(value)
    elif isinstance(value, float):
        text = go_float(value)
    else:
        raise GoJsonError(path, f"cannot unmarshal {go_kind(value)} into a Quantity")
    try:
        return quantity.parse(text)
    except quantity.QuantityError as err:
        raise GoJsonError(path, str(err)) from err


def _time(value: Any, path: str) -> dt.datetime:
    if not isinstance(value, str):
        raise GoJsonError(path, f"cannot unmarshal {go_kind(value)} into a Time")
    try:
        parsed = dt.datetime.fromisoformat(value)
    except ValueError as err:
        raise GoJsonError(path, f"not an RFC 3339 time: {value!r}") from err
    if parsed.tzinfo is None or "T" not in value:
        raise GoJsonError(path, f"not an RFC 3339 time: {value!r}")
    return parsed.astimezone(dt.UTC)


def _decode_struct(value: Any, name: str, path: str) -> dict[str, Any]:
    fields = _table()[1][name]
    if value is not None and not isinstance(value, Mapping):
        raise GoJsonError(path, f"cannot unmarshal {go_kind(value)} into {name}")
    found: dict[str, Any] = {}
    if value:
        exact = {f[0]: f for f in fields}
        folded: dict[str, Field] = {}
        for f in fields:
            folded.setdefault(f[0].upper(), f)
        for raw_key, item in value.items():
            key = str(raw_key)
            field = exact.get(key)
            if field is None and key.isascii():
                field = folded.get(key.upper())
            if field is None:
                continue  # Go drops a key its struct doesn't have
            if field[0] in found:
                raise GoJsonError(f"{path}.{key}", "two keys for one field")
            found[field[0]] = _decode(item, field[1], f"{path}.{key}")
    return {f[0]: found[f[0]] if f[0] in found else _decode(_ABSENT, f[1], "") for f in fields}


# -- encode: a Go-shaped value -> Go's bytes -------------------------------------------------


def _empty(value: Any, ref: str) -> bool:
    """Go's omitempty test: false, 0, "", nil pointer, empty or nil slice and map."""
    if ref.startswith(("ptr:", "slice:", "map:")) or ref == "string":
        return value is None or (not ref.startswith("ptr:") and len(value) == 0)
    if ref == "bool":
        return value is False
    if ref in _INTEGERS:
        return bool(value == 0)
    return False  # structs, and the struct-typed quantity, IntOrString and Time, are never empty


def _zero(value: Any, ref: str) -> bool:
    """Go's omitzero test: the type's IsZero (Time), else the zero value."""
    if ref == "time":
        return value is None
    if ref == "quantity":
        return value is quantity.ZERO
    if ref == "intorstring":
        return value == 0 and not isinstance(value, str)
    if ref.startswith("struct:"):
        fields = _table()[1][ref[7:]]
        return all(_zero(value[f[0]], f[1]) for f in fields)
    if ref.startswith(("ptr:", "slice:", "map:")):
        return value is None
    return not value


def _encode(value: Any, ref: str) -> str:
    if ref.startswith("ptr:"):
        return "null" if value is None else _encode(value, ref[4:])
    if ref.startswith("slice:"):
        if value is None:
            return "null"
        return "[" + ",".join(_encode(item, ref[6:]) for item in value) + "]"
    if ref.startswith("map:"):
        if value is None:
            return "null"
        items = sorted(value.items())
        return "{" + ",".join(f"{go_string(k)}:{_encode(v, ref[4:])}" for k, v in items) + "}"
    if ref.startswith("struct:"):
        parts = []
        for name, field_ref, omitempty, omitzero in _table()[1][ref[7:]]:
            item = value[name]
            if (omitempty and _empty(item, field_ref)) or (omitzero and _zero(item, field_ref)):
                continue
            parts.append(f"{go_string(name)}:{_encode(item, field_ref)}")
        return "{" + ",".join(parts) + "}"
    if ref == "string":
        return go_string(value)
    if ref == "bool":
        return "true" if value else "false"
    if ref in _INTEGERS:
        return str(value)
    if ref == "quantity":
        return f'"{value.marshal()}"'
    if ref == "intorstring":
        return go_string(value) if isinstance(value, str) else str(value)
    if ref == "time":
        if value is None:
            return "null"
        return f'"{value:%Y-%m-%dT%H:%M:%SZ}"'
    raise GoJsonError("", f"{ref} is not encoded by omed")


__all__ = ["GoJsonError", "go_float", "go_kind", "go_string", "marshal", "root_type"]
