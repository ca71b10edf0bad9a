"""The fleet check of ome-status-preflight: one cluster, read only, to a GO or NO-GO verdict.

Why: before and after a switch of the Instance status encoding, an operator must know, per
cluster, that the manager runs the intended image, that the ConfigMap holds the intended
omenativeStatus block (the manager reads it only at start, and won't start on a bad one), that
the InferenceReplica CRD can store both encodings, and that every stored status decodes under
the intended bound (OME stops managing one that doesn't). Each check here reads; nothing
writes.

The checks are pure functions of what was read (:func:`image_problems`,
:func:`config_problems`, :func:`schema_problems`, :class:`ReplicaTally`), and
:func:`check_cluster` is the thin shell that reads. Invariants:

* a cluster's verdict is GO exactly when it has no :class:`Problem`;
* every problem has a reason from :data:`TOOL_REASONS` or, for a status that can't be
  decoded, the manager's own reason: statuses are decoded by the manager's function
  (:func:`~omed.controllers.inferencereplica.core.status.decode_rows_from_status`: the codec, then
  the InstanceStatus model), so the report line names the same statuses and the same reason
  as the manager's ``per-Instance status cannot be decoded (<reason>)`` event;
* nothing a cluster does (an unreachable API server, an error answer, an answer that isn't a
  JSON object, a malformed object) is raised out of :func:`check_cluster`: it becomes a
  problem of that cluster, and the other clusters are still checked.
"""

from __future__ import annotations

import dataclasses
import socket
from collections.abc import Callable, Mapping
from typing import Any, Final

import aiohttp
import orjson
from pydantic import ValidationError

from omed.api.base import json_type
from omed.cli.preflight_inventory import ClusterEntry, Inventory, block_json
from omed.config import OMENativeStatusConfig, StartupConfigError, load_startup_config
from omed.controllers.inferencereplica.core.status import (
    StatusDecodeFailed,
    decode_rows_from_status,
)
from omed.kube.client import KubeClient, Resource, load_config
from omed.kube.errors import ApiError, NotFound
from omed.kube.resources import CONFIGMAPS, DEPLOYMENTS, INFERENCE_REPLICAS
from omed.statuscodec import COLUMNAR_V2, DENSE_V1

__all__ = [
    "CHECK_FAILED",
    "CONFIG_BLOCK",
    "CRD_SCHEMA",
    "GROUP_VERSION_PATH",
    "KUBECONFIG",
    "MANAGER_IMAGE",
    "NETWORK_ERRORS",
    "OPENAPI_V3",
    "REPLICA_LIST",
    "TOOL_REASONS",
    "UNCONVERTED",
    "UNREACHABLE",
    "BadAnswer",
    "ClusterReport",
    "DecodeFailure",
    "Problem",
    "ReplicaTally",
    "SchemaProblem",
    "check_cluster",
    "config_problems",
    "connect",
    "failure_detail",
    "image_problems",
    "json_object",
    "object_key",
    "one_line",
    "read_cluster_block",
    "schema_problems",
    "server_relative_url",
    "stop_reason",
    "stopped_detail",
    "unconverted_problems",
]

# -- reasons (docs/preflight.md lists each with its details) -----------------------------------

KUBECONFIG: Final = "kubeconfig"
UNREACHABLE: Final = "unreachable"
MANAGER_IMAGE: Final = "manager_image"
CONFIG_BLOCK: Final = "config_block"
CRD_SCHEMA: Final = "crd_schema"
REPLICA_LIST: Final = "replica_list"
UNCONVERTED: Final = "unconverted"
CHECK_FAILED: Final = "check_failed"
TOOL_REASONS: Final = (
    KUBECONFIG,
    UNREACHABLE,
    MANAGER_IMAGE,
    CONFIG_BLOCK,
    CRD_SCHEMA,
    REPLICA_LIST,
    UNCONVERTED,
    CHECK_FAILED,
)
"""The tool's own reasons; a decode failure is reported under the codec's reason instead."""

OPENAPI_V3: Final = "/openapi/v3"
GROUP_VERSION_PATH: Final = "apis/ome.io/v1beta1"
STATUS_FIELDS: Final = ("instanceStatusEncoding", "instanceStatusColumns")
UNCONVERTED_NAMES_SHOWN: Final = 5

NETWORK_ERRORS: Final = (
    aiohttp.ClientError,
    TimeoutError,
    ConnectionError,
    socket.gaierror,
    socket.herror,
)
"""What a request raises when it got no answer from the API server (aiohttp wraps the failures
of DNS, TCP and the TLS handshake in its :class:`aiohttp.ClientError`)."""


def stop_reason(exc: BaseException) -> str:
    """Why a cluster's requests stopped with ``exc``.

    :data:`UNREACHABLE` when no answer came from the API server (:data:`NETWORK_ERRORS`);
    :data:`KUBECONFIG` for any other :class:`OSError`, which happened on this machine, not on
    the way to the API server: a certificate, key or token file that the context names and
    that can't be read or loaded (:class:`ssl.SSLError` included), a credential plugin's
    program that can't be run; :data:`CHECK_FAILED` for anything else.
    """
    if isinstance(exc, NETWORK_ERRORS):
        return UNREACHABLE
    if isinstance(exc, OSError):
        return KUBECONFIG
    return CHECK_FAILED


def one_line(exc: BaseException) -> str:
    """An exception's message on one line (its type's name when it has none)."""
    return " ".join(str(exc).split()) or type(exc).__name__


class BadAnswer(ValueError):
    """The API server (or a proxy in front of it) answered a request with success but with a
    body that isn't the JSON object the request returns."""


_PREVIEW_CHARS: Final = 60


def json_object(answer: Any, *, request: str) -> Mapping[str, Any]:
    """``answer`` (what :meth:`KubeClient.request` returned for ``request``, such as ``GET
    /api/v1/...``) when it is a JSON object; else :class:`BadAnswer`, naming what came."""
    if isinstance(answer, Mapping):
        return answer
    raise BadAnswer(f"the API server answered {request} with {_body(answer)}, not a JSON object")


def _body(answer: Any) -> str:
    if answer is None:
        return "an empty body"
    if isinstance(answer, bytes):
        text = " ".join(answer[: _PREVIEW_CHARS * 4].decode("utf-8", "replace").split())
        if len(text) > _PREVIEW_CHARS:
            text = text[:_PREVIEW_CHARS] + "..."
        noun = "byte" if len(answer) == 1 else "bytes"
        return f"a body that is not JSON ({len(answer)} {noun}: {_quote(text)})"
    kind = json_type(answer, other="")
    if not kind:
        return f"a {type(answer).__name__}"
    return f"a JSON {'list' if kind == 'array' else kind}"


def _quote(text: str) -> str:
    return orjson.dumps(text).decode()


@dataclasses.dataclass(frozen=True)
class Problem:
    """One ``- <reason>: <detail>`` line of a cluster's report."""

    reason: str
    detail: str


@dataclasses.dataclass(frozen=True, kw_only=True)
class DecodeFailure:
    """An InferenceReplica whose stored status can't be decoded under the inventory's bound."""

    namespace: str
    name: str
    reason: str
    detail: str

    @property
    def problem(self) -> Problem:
        return Problem(self.reason, f"{self.namespace}/{self.name}: {self.detail}")


def object_key(obj: Mapping[str, Any]) -> tuple[str, str]:
    """``(namespace, name)`` of an object as listed; empty strings for a missing field."""
    metadata = obj.get("metadata")
    if not isinstance(metadata, Mapping):
        return "", ""
    return str(metadata.get("namespace") or ""), str(metadata.get("name") or "")


@dataclasses.dataclass(kw_only=True)
class ReplicaTally:
    """Counts and decode results over every InferenceReplica, one page at a time.

    An object is counted by the encoding its status claims: ColumnarV2 when
    ``instanceStatusEncoding`` is ``ColumnarV2``, DenseV1 when it is absent; one with any other
    value is counted only in ``total`` (and fails to decode with reason ``encoding``).
    """

    max_rows: int | None
    total: int = 0
    dense_v1: int = 0
    columnar_v2: int = 0
    largest_columnar_v2_rows: int = 0
    """Most rows of a ColumnarV2 object: decoded rows, or the declared ``rowCount`` of one
    that fails with cardinality_limit (the bound must not go below it)."""
    columnar_v2_names: list[str] = dataclasses.field(default_factory=list)
    failures: list[DecodeFailure] = dataclasses.field(default_factory=list)

    def add(self, obj: Mapping[str, Any]) -> None:
        namespace, name = object_key(obj)
        status = obj.get("status")
        claimed = status.get("instanceStatusEncoding") if isinstance(status, Mapping) else None
        self.total += 1
        columnar = claimed == COLUMNAR_V2
        if columnar:
            self.columnar_v2 += 1
            if len(self.columnar_v2_names) < UNCONVERTED_NAMES_SHOWN:
                self.columnar_v2_names.append(f"{namespace}/{name}")
        elif claimed is None:
            self.dense_v1 += 1
        try:
            rows = decode_rows_from_status(status, max_rows=self.max_rows)
        except StatusDecodeFailed as err:
            self.failures.append(
                DecodeFailure(
                    namespace=namespace, name=name, reason=err.reason, detail=failure_detail(err)
                )
            )
            if columnar and err.reason == "cardinality_limit":
                self._see_columnar_rows(_declared_rows(status))
            return
        if columnar:
            self._see_columnar_rows(len(rows))

    def _see_columnar_rows(self, count: int | None) -> None:
        if count is not None:
            self.largest_columnar_v2_rows = max(self.largest_columnar_v2_rows, count)


def failure_detail(err: StatusDecodeFailed) -> str:
    """The detail of a decode failure on one line: the codec's own detail, or, for a row the
    InstanceStatus model refuses (``row_shape``), the row's index, the field and the model's
    message with the value it got."""
    cause = err.__cause__
    if not isinstance(cause, ValidationError):
        return err.detail
    errors = cause.errors(include_url=False)
    first = errors[0]
    index = err.row.get("index") if err.row is not None else None
    where = f"the row of index {index}" if isinstance(index, int) else "a row"
    field = ".".join(str(part) for part in first["loc"])
    text = f"{where} is not a valid Instance row: "
    text += f"{field}: {first['msg']}" if field else first["msg"]
    if field and "input" in first:
        shown = orjson.dumps(first["input"], default=str).decode()
        text += f" (got {shown[:80]}{'...' if len(shown) > 80 else ''})"
    if len(errors) > 1:
        text += f"; {len(errors) - 1} more in that row"
    return text


def _declared_rows(status: Any) -> int | None:
    columns = status.get("instanceStatusColumns") if isinstance(status, Mapping) else None
    count = columns.get("rowCount") if isinstance(columns, Mapping) else None
    if isinstance(count, int) and not isinstance(count, bool) and count >= 0:
        return count
    return None


@dataclasses.dataclass(frozen=True, kw_only=True)
class ClusterReport:
    """What the check found in one cluster."""

    name: str
    problems: tuple[Problem, ...]
    replicas: ReplicaTally | None
    """``None`` when the InferenceReplicas could not be listed."""

    @property
    def go(self) -> bool:
        return not self.problems

    @property
    def verdict(self) -> str:
        return "GO" if self.go else "NO-GO"


# -- pure checks -------------------------------------------------------------------------------


def image_problems(deployment: Mapping[str, Any], *, inventory: Inventory) -> list[Problem]:
    """The manager container's image must be the inventory's managerImage, exactly."""
    ref = inventory.manager
    where = f"deployment {ref.namespace}/{ref.deployment}"
    spec = _dig(deployment, "spec", "template", "spec")
    containers = spec.get("containers") if isinstance(spec, Mapping) else None
    for container in containers if isinstance(containers, list) else ():
        if isinstance(container, Mapping) and container.get("name") == ref.container:
            image = container.get("image")
            if image == inventory.manager_image:
                return []
            return [
                Problem(
                    MANAGER_IMAGE,
                    f"container {ref.container} of {where} runs {_show(image)}, "
                    f"the inventory wants {inventory.manager_image}",
                )
            ]
    return [Problem(MANAGER_IMAGE, f"{where} has no container {ref.container}")]


def read_cluster_block(
    configmap: Mapping[str, Any],
) -> tuple[OMENativeStatusConfig | None, str | None]:
    """The cluster's omenativeStatus block as the manager would load it at start, or the
    manager's own error (``Failed to initialize <name> configuration: <error>``)."""
    data = configmap.get("data")
    entries = {
        key: value
        for key, value in (data.items() if isinstance(data, Mapping) else ())
        if isinstance(key, str) and isinstance(value, str)
    }
    try:
        return load_startup_config(entries).omenative_status, None
    except StartupConfigError as exc:
        return None, str(exc)


def config_problems(configmap: Mapping[str, Any], *, inventory: Inventory) -> list[Problem]:
    """The ConfigMap's startup entries must be valid (or the manager won't start) and its
    omenativeStatus block must equal the inventory's."""
    ref = inventory.manager
    block, error = read_cluster_block(configmap)
    where = f"configmap {ref.namespace}/{ref.config_map}"
    if block is None:
        return [Problem(CONFIG_BLOCK, f"{where}: {error}")]
    if block != inventory.omenative_status:
        return [
            Problem(
                CONFIG_BLOCK,
                f"{where} sets omenativeStatus {block_json(block)}, "
                f"the inventory wants {block_json(inventory.omenative_status)}",
            )
        ]
    return []


class SchemaProblem(ValueError):
    """OpenAPI v3 discovery doesn't show a CRD that can store both encodings."""


def server_relative_url(index: Any) -> str:
    """The ``serverRelativeURL`` (with its hash query) of ome.io/v1beta1 in ``GET /openapi/v3``."""
    paths = index.get("paths") if isinstance(index, Mapping) else None
    if not isinstance(paths, Mapping):
        raise SchemaProblem(f"GET {OPENAPI_V3} has no paths map")
    entry = paths.get(GROUP_VERSION_PATH)
    if entry is None:
        raise SchemaProblem(
            f"OpenAPI v3 discovery has no {GROUP_VERSION_PATH}: "
            "the InferenceReplica CRD is not installed"
        )
    url = entry.get("serverRelativeURL") if isinstance(entry, Mapping) else None
    if not isinstance(url, str) or not url.startswith("/"):
        raise SchemaProblem(
            f"OpenAPI v3 discovery has no serverRelativeURL for {GROUP_VERSION_PATH}"
        )
    return url


def schema_problems(document: Any) -> list[Problem]:
    """The InferenceReplica schema of ome.io/v1beta1 must declare both status fields."""
    schemas = _dig(document, "components", "schemas")
    if not isinstance(schemas, Mapping):
        return [
            Problem(CRD_SCHEMA, f"the OpenAPI v3 document of {GROUP_VERSION_PATH} has no schemas")
        ]
    schema = _inference_replica_schema(schemas)
    if schema is None:
        return [
            Problem(
                CRD_SCHEMA,
                f"the OpenAPI v3 document of {GROUP_VERSION_PATH} has no InferenceReplica schema",
            )
        ]
    status = _resolve(_dig(schema, "properties", "status"), schemas)
    properties = _dig(status, "properties")
    missing = [
        name
        for name in STATUS_FIELDS
        if not isinstance(properties, Mapping) or name not in properties
    ]
    if missing:
        return [
            Problem(
                CRD_SCHEMA,
                "the InferenceReplica status schema has no "
                + " and no ".join(missing)
                + ": upgrade the ome-crd chart before ome-resources",
            )
        ]
    return []


def _inference_replica_schema(schemas: Mapping[str, Any]) -> Mapping[str, Any] | None:
    for schema in schemas.values():
        if not isinstance(schema, Mapping):
            continue
        kinds = schema.get("x-kubernetes-group-version-kind")
        for gvk in kinds if isinstance(kinds, list) else ():
            if isinstance(gvk, Mapping) and (
                gvk.get("group"),
                gvk.get("version"),
                gvk.get("kind"),
            ) == ("ome.io", "v1beta1", "InferenceReplica"):
                return schema
    found = schemas.get("io.ome.v1beta1.InferenceReplica")
    return found if isinstance(found, Mapping) else None


def _resolve(schema: Any, schemas: Mapping[str, Any]) -> Any:
    """Follow ``$ref`` (directly or as the single ``allOf`` item) into ``components.schemas``."""
    for _ in range(8):
        if not isinstance(schema, Mapping):
            return schema
        ref = schema.get("$ref")
        all_of = schema.get("allOf")
        if ref is None and isinstance(all_of, list) and len(all_of) == 1:
            ref = _dig(all_of[0], "$ref")
        if not isinstance(ref, str) or not ref.startswith("#/components/schemas/"):
            return schema
        schema = schemas.get(ref.removeprefix("#/components/schemas/"))
    return schema


def _dig(value: Any, *keys: str) -> Any:
    for key in keys:
        if not isinstance(value, Mapping):
            return None
        value = value.get(key)
    return value


def _show(value: Any) -> str:
    if isinstance(value, str):
        return value
    return "no image" if value is None else orjson.dumps(value, default=str).decode()


def unconverted_problems(tally: ReplicaTally, *, inventory: Inventory) -> list[Problem]:
    """Under DenseV1, an InferenceReplica still stored as ColumnarV2 is not converted (yet, or
    ever: its status can't be decoded or is too large for a list), and list readers miss it."""
    if inventory.omenative_status.instance_status_encoding != DENSE_V1 or not tally.columnar_v2:
        return []
    shown = ", ".join(tally.columnar_v2_names)
    more = tally.columnar_v2 - len(tally.columnar_v2_names)
    if more:
        shown += f" and {more} more"
    noun = "InferenceReplica is" if tally.columnar_v2 == 1 else "InferenceReplicas are"
    return [
        Problem(
            UNCONVERTED,
            f"{tally.columnar_v2} {noun} still stored as ColumnarV2 under DenseV1: {shown}",
        )
    ]


# -- the shell ---------------------------------------------------------------------------------


async def connect(cluster: ClusterEntry, *, timeout: float) -> KubeClient:
    """A client for the cluster's kubeconfig and context. Raises :class:`ValueError` with the
    reason when the kubeconfig can't be loaded."""
    try:
        config = await load_config(cluster.kubeconfig, context=cluster.context)
    except Exception as exc:  # kubernetes-asyncio raises several kinds for a bad file
        raise ValueError(
            f"cannot load context {cluster.context} from {cluster.kubeconfig}: {one_line(exc)}"
        ) from None
    return KubeClient(
        config, qps=50.0, burst=100, user_agent="ome-status-preflight", timeout=timeout
    )


def stopped_detail(exc: BaseException, *, cluster: ClusterEntry, host: str, what: str) -> str:
    """The detail of a stop for :func:`stop_reason`'s reason; ``what`` names the work that
    stopped for anything else (``the check``, ``the repair``)."""
    reason = stop_reason(exc)
    if reason == UNREACHABLE:
        return f"cannot reach {host}: {one_line(exc)}"
    if reason == KUBECONFIG:
        return f"cannot use context {cluster.context} from {cluster.kubeconfig}: {one_line(exc)}"
    return f"{what} stopped: {type(exc).__name__}: {one_line(exc)}"


async def check_cluster(
    cluster: ClusterEntry, *, inventory: Inventory, timeout: float = 30.0
) -> ClusterReport:
    """Read one cluster and judge it; never raises for anything the cluster does."""
    try:
        client = await connect(cluster, timeout=timeout)
    except ValueError as exc:
        return ClusterReport(
            name=cluster.name, problems=(Problem(KUBECONFIG, str(exc)),), replicas=None
        )
    async with client:
        problems: list[Problem] = []
        try:
            ref = inventory.manager
            for resource, name, kind, reason, judge in (
                (DEPLOYMENTS, ref.deployment, "deployment", MANAGER_IMAGE, image_problems),
                (CONFIGMAPS, ref.config_map, "configmap", CONFIG_BLOCK, config_problems),
            ):
                problems += await _check_object(
                    client,
                    resource,
                    inventory=inventory,
                    name=name,
                    kind=kind,
                    reason=reason,
                    judge=judge,
                )
            problems += await _check_schema(client)
            tally, listing = await _tally_replicas(client, inventory)
        except Exception as exc:  # one cluster's oddity must not stop the fleet's report
            detail = stopped_detail(exc, cluster=cluster, host=client.config.host, what="the check")
            problems.append(Problem(stop_reason(exc), detail))
            return ClusterReport(name=cluster.name, problems=tuple(problems), replicas=None)
        problems += listing
        if tally is not None:
            problems += unconverted_problems(tally, inventory=inventory)
            problems += [failure.problem for failure in tally.failures]
        return ClusterReport(name=cluster.name, problems=tuple(problems), replicas=tally)


async def _check_object(
    client: KubeClient,
    resource: Resource,
    *,
    inventory: Inventory,
    name: str,
    kind: str,
    reason: str,
    judge: Callable[..., list[Problem]],
) -> list[Problem]:
    """``judge``'s problems with the manager's ``kind`` ``name`` (in the manager's namespace),
    or the ``reason`` problem that says why it can't be read."""
    namespace = inventory.manager.namespace
    where = f"{kind} {namespace}/{name}"
    try:
        answer = await client.get(resource, name, namespace)
        found = json_object(answer, request=f"GET {resource.path(namespace, name)}")
    except NotFound:
        return [Problem(reason, f"{where} not found")]
    except (ApiError, BadAnswer) as exc:
        return [Problem(reason, f"cannot read {where}: {exc}")]
    return judge(found, inventory=inventory)


async def _check_schema(client: KubeClient) -> list[Problem]:
    try:
        index = json_object(await client.request("GET", OPENAPI_V3), request=f"GET {OPENAPI_V3}")
        url = server_relative_url(index)
    except (ApiError, BadAnswer) as exc:
        return [Problem(CRD_SCHEMA, f"cannot read OpenAPI v3 discovery (GET {OPENAPI_V3}): {exc}")]
    except SchemaProblem as exc:
        return [Problem(CRD_SCHEMA, str(exc))]
    try:
        document = json_object(await client.request("GET", url), request=f"GET {url}")
    except (ApiError, BadAnswer) as exc:
        return [Problem(CRD_SCHEMA, f"cannot read the OpenAPI v3 document GET {url}: {exc}")]
    return schema_problems(document)


async def _tally_replicas(
    client: KubeClient, inventory: Inventory
) -> tuple[ReplicaTally | None, list[Problem]]:
    """Decode every InferenceReplica, ``pageSize`` at a time, keeping only the tally."""
    tally = ReplicaTally(max_rows=inventory.omenative_status.max_decoded_instances)
    request = f"GET {INFERENCE_REPLICAS.path()}"
    token: str | None = None
    while True:
        try:
            answer = await client.list_page(
                INFERENCE_REPLICAS, None, limit=inventory.page_size, _continue=token
            )
            page = json_object(answer, request=request)
            items = _page_items(page, request=request)
        except NotFound:
            detail = "the API server doesn't serve inferencereplicas.ome.io/v1beta1"
            return None, [Problem(REPLICA_LIST, detail)]
        except (ApiError, BadAnswer) as exc:
            return None, [Problem(REPLICA_LIST, f"cannot list InferenceReplicas: {exc}")]
        for item in items:
            tally.add(item)
        token = _dig(page, "metadata", "continue") or None
        if not token:
            return tally, []


def _page_items(page: Mapping[str, Any], *, request: str) -> list[Mapping[str, Any]]:
    """A list page's ``items`` (a missing or null list is empty); :class:`BadAnswer` when it
    isn't a list of objects, so a page the tool can't read is never counted as empty."""
    items = page.get("items")
    if items is None:
        return []
    if not isinstance(items, list):
        raise BadAnswer(
            f"the API server answered {request} with items that are {_body(items)}, not a list"
        )
    for position, item in enumerate(items):
        if not isinstance(item, Mapping):
            raise BadAnswer(
                f"the API server answered {request} with items[{position}] that is "
                f"{_body(item)}, not a JSON object"
            )
    return items
