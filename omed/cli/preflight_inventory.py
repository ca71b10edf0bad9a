"""The inventory of ome-status-preflight: what every cluster should run and how to reach it.

Why a strict model: the inventory is the operator's statement of the fleet's intended state,
and the tool's verdicts are only as good as it. It has *no defaults*, so every field must
be written out; a misspelled key (``kubeConfig``) or a stray one would
otherwise be dropped silently and the check would run against something the operator didn't
mean. So every level forbids unknown keys and requires every field, values are typed strictly
(``"500"`` is not a page size, ``true`` is not a number), and the ``omenativeStatus`` block is
validated by the manager's own rules (:mod:`omed.config`), so the tool and the manager can't
disagree on what a valid block is.

Invariant: :func:`load_inventory` returns a fully validated :class:`Inventory` (cluster names
unique, kubeconfig paths resolved against the inventory's directory) or raises
:class:`InventoryError`, whose ``messages`` each name the field at fault, for the CLI's
``error:`` lines and exit code 2.

YAML is read with :func:`load_yaml`, which keeps timestamps as strings (a row's
``readySince: 2026-09-14T20:50:00Z`` must stay the string the API stores), refuses
duplicate keys (the later one would silently win), and refuses documents nested deeper than
:data:`MAX_YAML_DEPTH` (no inventory or replacement file needs more than a few levels, and a
deeper one would exhaust Python's recursion limit in the parser or in the checks after it).
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from pathlib import Path
from typing import Annotated, Any, Final, Self

import orjson
import yaml
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError
from pydantic import model_validator as _model_validator

from omed.config import OMENativeStatusConfig
from omed.config.rules import EntryError, validate_entry
from omed.statuscodec.errors import type_name

__all__ = [
    "BLOCK_FIELDS",
    "MAX_YAML_DEPTH",
    "ClusterEntry",
    "Inventory",
    "InventoryError",
    "ManagerRef",
    "YamlError",
    "block_json",
    "load_inventory",
    "load_yaml",
    "parse_inventory",
]

BLOCK_FIELDS: Final = ("instanceStatusEncoding", "maxDecodedInstances")
"""The keys of the inventory's omenativeStatus block: both required, no other allowed."""

_STRICT = ConfigDict(strict=True, extra="forbid", frozen=True, populate_by_name=False)

NonEmpty = Annotated[str, Field(min_length=1)]


# -- YAML --------------------------------------------------------------------------------------


class YamlError(ValueError):
    """A YAML file that can't be read or parsed; ``str()`` says which and why."""


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader without timestamp resolution and with duplicate keys refused."""


_StrictLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


def _construct_mapping(loader: _StrictLoader, node: yaml.MappingNode) -> dict[Any, Any]:
    loader.flatten_mapping(node)
    mapping: dict[Any, Any] = {}
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=True)
        if not isinstance(key, Hashable):
            raise yaml.constructor.ConstructorError(
                None, None, "found an unhashable key", key_node.start_mark
            )
        if key in mapping:
            raise yaml.constructor.ConstructorError(
                None, None, f"found the key {key!r} twice", key_node.start_mark
            )
        mapping[key] = loader.construct_object(value_node, deep=True)
    return mapping


_StrictLoader.add_constructor(
    yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG,
    _construct_mapping,
)


MAX_YAML_DEPTH: Final = 32
"""The deepest nesting of mappings and lists :func:`load_yaml` accepts. A replacement row is
at most 6 levels deep (``instanceStatuses[i].operation.hintTargetNodes[k]``), an inventory 3."""


def load_yaml(path: Path, *, what: str) -> Any:
    """The one YAML document in ``path``; ``what`` names the file in errors (``inventory``).

    Raises :class:`YamlError` for a file that can't be read, isn't valid YAML, or nests
    deeper than :data:`MAX_YAML_DEPTH`."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise YamlError(f"cannot read {what} {path}: {_os_reason(exc)}") from None
    too_deep = f"{what} {path} is nested more than {MAX_YAML_DEPTH} levels deep"
    try:
        document = yaml.load(text, Loader=_StrictLoader)  # a SafeLoader subclass
    except RecursionError:  # the parser recurses once per level
        raise YamlError(too_deep) from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        problem = exc.problem or exc.context or "malformed"
        raise YamlError(f"{what} {path} is not valid YAML: {where}{problem}") from None
    except yaml.YAMLError as exc:
        reason = " ".join(str(exc).split())
        raise YamlError(f"{what} {path} is not valid YAML: {reason}") from None
    if _deeper_than(document, MAX_YAML_DEPTH):
        raise YamlError(too_deep)
    return document


def _deeper_than(document: Any, limit: int) -> bool:
    """Whether mappings and lists nest more than ``limit`` levels in ``document``.

    Iterative, so it can't recurse itself; a node shared through a YAML alias is walked again
    only when reached deeper than before, and a list that holds itself (``&a [*a]``) is found
    deeper than any limit."""
    deepest: dict[int, int] = {}
    stack: list[tuple[Any, int]] = [(document, 1)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, dict):
            children: Iterable[Any] = [*value.keys(), *value.values()]
        elif isinstance(value, list | tuple):
            children = value
        else:
            continue
        if depth > limit:
            return True
        if deepest.get(id(value), 0) >= depth:
            continue
        deepest[id(value)] = depth
        stack.extend((child, depth + 1) for child in children)
    return False


def _os_reason(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return str(exc)


# -- the model ---------------------------------------------------------------------------------


class InventoryError(ValueError):
    """A bad inventory; each of ``messages`` names one field and what is wrong with it, or,
    with ``names_file``, the file itself (it can't be read or parsed: the message names the
    path already)."""

    def __init__(self, messages: list[str], *, names_file: bool = False) -> None:
        super().__init__("; ".join(messages))
        self.messages = messages
        self.names_file = names_file


class _FieldError(ValueError):
    """Raised inside validators: a message that already names its field, shown as is."""


def _check_block(value: Any) -> OMENativeStatusConfig:
    """The inventory's omenativeStatus: exactly the two keys, valid by the manager's rules."""
    if isinstance(value, OMENativeStatusConfig):
        return value
    if not isinstance(value, dict):
        raise _FieldError(f"omenativeStatus must be a mapping, got {_json_kind(value)}")
    problems = [f"omenativeStatus.{key} is required" for key in BLOCK_FIELDS if key not in value]
    problems += [
        f"omenativeStatus.{key} is not a known field" for key in value if key not in BLOCK_FIELDS
    ]
    if problems:
        raise _FieldError("; ".join(problems))
    try:
        return validate_entry(OMENativeStatusConfig, value, key="omenativeStatus")
    except EntryError as exc:
        raise _FieldError(str(exc)) from None


class ManagerRef(BaseModel):
    """Where the manager lives in every cluster."""

    model_config = _STRICT

    namespace: NonEmpty
    deployment: NonEmpty
    container: NonEmpty
    config_map: NonEmpty = Field(alias="configMap")


class ClusterEntry(BaseModel):
    """One cluster: its name in reports and how to reach it."""

    model_config = _STRICT

    name: NonEmpty
    kubeconfig: NonEmpty
    """Path of the kubeconfig file; a relative path is relative to the inventory's directory."""
    context: NonEmpty


class Inventory(BaseModel):
    """The whole inventory, every field required."""

    model_config = _STRICT

    manager_image: NonEmpty = Field(alias="managerImage")
    omenative_status: Annotated[OMENativeStatusConfig, BeforeValidator(_check_block)] = Field(
        alias="omenativeStatus"
    )
    manager: ManagerRef
    page_size: int = Field(alias="pageSize", ge=1)
    clusters: list[ClusterEntry] = Field(min_length=1)

    @_model_validator(mode="after")
    def _unique_names(self) -> Self:
        first: dict[str, int] = {}
        for position, cluster in enumerate(self.clusters):
            seen = first.setdefault(cluster.name, position)
            if seen != position:
                raise _FieldError(
                    f"clusters[{position}].name {_quote(cluster.name)} is already the name "
                    f"of clusters[{seen}]"
                )
        return self

    def cluster(self, name: str) -> ClusterEntry | None:
        """The cluster called ``name``, or ``None``."""
        for cluster in self.clusters:
            if cluster.name == name:
                return cluster
        return None


def block_json(block: OMENativeStatusConfig) -> str:
    """A block as compact JSON with both keys, for messages: an unset bound is ``null``."""
    return orjson.dumps(
        {
            "instanceStatusEncoding": block.instance_status_encoding,
            "maxDecodedInstances": block.max_decoded_instances,
        }
    ).decode()


# -- loading -----------------------------------------------------------------------------------


def load_inventory(path: Path) -> Inventory:
    """Read and validate the inventory file; kubeconfig paths come back absolute."""
    try:
        document = load_yaml(path, what="inventory")
    except YamlError as exc:
        raise InventoryError([str(exc)], names_file=True) from None
    inventory = parse_inventory(document)
    base = path.resolve().parent
    clusters = [
        cluster.model_copy(update={"kubeconfig": str(base / cluster.kubeconfig)})
        if not Path(cluster.kubeconfig).is_absolute()
        else cluster
        for cluster in inventory.clusters
    ]
    return inventory.model_copy(update={"clusters": clusters})


def parse_inventory(document: Any) -> Inventory:
    """Validate a parsed inventory document; :class:`InventoryError` names each bad field."""
    if document is None:
        raise InventoryError(["the inventory is empty"])
    if not isinstance(document, dict):
        raise InventoryError([f"the inventory must be a mapping, got {_json_kind(document)}"])
    try:
        return Inventory.model_validate(document)
    except ValidationError as exc:
        raise InventoryError(_messages(exc)) from None


_KIND_OF_TYPE: Final = {
    "string_type": "a string",
    "int_type": "an integer",
    "list_type": "a list",
    "model_type": "a mapping",
    "dict_type": "a mapping",
    "model_attributes_type": "a mapping",
}


def _messages(exc: ValidationError) -> list[str]:
    messages: list[str] = []
    for error in exc.errors():
        text = _message(error)
        if text not in messages:
            messages.append(text)
    return messages


def _message(error: Any) -> str:
    cause = (error.get("ctx") or {}).get("error")
    if isinstance(cause, _FieldError):
        return str(cause)
    kind = error["type"]
    value = error.get("input")
    if kind == "invalid_key":  # a key that isn't a string: the key is the input, not the loc
        parent = _path(error["loc"][:-1])
        key = _json_scalar(value)
        return f"{key if parent == 'the inventory' else f'{parent}.{key}'} is not a known field"
    path = _path(error["loc"])
    if kind == "missing":
        return f"{path} is required"
    if kind == "extra_forbidden":
        return f"{path} is not a known field"
    if kind in _KIND_OF_TYPE:
        return f"{path} must be {_KIND_OF_TYPE[kind]}, got {_json_kind(value)}"
    if kind == "string_too_short":
        return f"{path} must not be empty"
    if kind == "too_short" and path == "clusters":
        return "clusters must list at least one cluster"
    if kind == "greater_than_equal":
        limit = (error.get("ctx") or {}).get("ge")
        return f"{path} must be at least {limit}, got {_json_value(value)}"
    return f"{path}: {error['msg']}"


def _path(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out or "the inventory"


def _json_kind(value: object) -> str:
    return type_name(value, mapping="a mapping")


def _json_scalar(value: object) -> str:
    """A key as YAML wrote it: ``1``, ``true``, ``null``, ``1.5``."""
    if value is None or isinstance(value, bool | int | float):
        return orjson.dumps(value).decode()
    return str(value)


def _json_value(value: object) -> str:
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return _json_kind(value)


def _quote(text: str) -> str:
    return orjson.dumps(text).decode()
