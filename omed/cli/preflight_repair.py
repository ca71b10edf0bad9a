"""``ome-status-preflight repair``: replace one damaged InferenceReplica's rows with rows the
operator wrote, keeping the rest of its status.

Why: OME stops managing an InferenceReplica whose stored status it can't decode (anything but
cardinality_limit means the stored status is damaged), and nothing in the manager can make
up the lost rows. The operator can: each Instance's pods carry its index, incarnation and
revision. This module checks those rows, checks the cluster runs the inventory's block, and
writes the rows in the encoding that block calls for.

Invariants:

* nothing is written without ``--apply``; a dry run and an apply print the same plan;
* only a status that fails to decode, for a reason other than cardinality_limit, is replaced
  (cardinality_limit is fixed by the bound, and a status that decodes is the manager's);
  "decodes" is the manager's own test
  (:func:`~omed.controllers.inferencereplica.core.status.decode_rows_from_status`: the codec, then
  the InstanceStatus model), so repair accepts exactly the statuses the manager refuses;
* the rows are written in the form the manager would write them (:func:`choose_encoding`
  under the cluster's block): more rows than maxDecodedInstances are written as the DenseV1
  list, which is read whatever its length, as the manager writes them;
* the write is a PUT of the status subresource carrying the resourceVersion the tool read,
  so a change made after the read is refused by the API server (409) and nothing is written;
* the written status holds the rows in exactly one form (:func:`~omed.statuscodec.with_rows`)
  and every other status field as it was read.

A refusal is :class:`RepairRefused` (``refused:``, exit 1); any other failure is
:class:`RepairError` (``error:``, exit 2), including whatever else a cluster or this machine
raises (:func:`run_repair` turns it into one).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Final

from pydantic import ValidationError

from omed.api import InstanceStatus
from omed.api.names import (
    DNS1123_LABEL_MAX,
    DNS1123_SUBDOMAIN_MAX,
    is_dns1123_label,
    is_dns1123_subdomain,
)
from omed.cli.indexranges import index_ranges
from omed.cli.preflight_checks import (
    BadAnswer,
    DecodeFailure,
    connect,
    failure_detail,
    json_object,
    read_cluster_block,
    stopped_detail,
)
from omed.cli.preflight_inventory import Inventory, YamlError, block_json, load_yaml
from omed.config import OMENativeStatusConfig
from omed.controllers.inferencereplica.core.status import (
    StatusDecodeFailed,
    decode_rows_from_status,
)
from omed.kube.client import KubeClient
from omed.kube.errors import ApiError, Conflict, NotFound
from omed.kube.resources import CONFIGMAPS, INFERENCE_REPLICAS
from omed.statuscodec import (
    COLUMNAR_V2,
    DENSE_V1,
    DecodeError,
    choose_encoding,
    decode_status,
    encoded_size,
    validate_rows,
    with_rows,
)

__all__ = [
    "APPLIED_HEADER",
    "DRY_RUN_FOOTER",
    "DRY_RUN_HEADER",
    "REPLACEMENT_KEY",
    "RepairError",
    "RepairPlan",
    "RepairRefused",
    "check_name",
    "check_namespace",
    "check_replacement",
    "load_replacement",
    "plan_repair",
    "report_lines",
    "run_repair",
]

DRY_RUN_HEADER: Final = "InferenceReplica status repair (dry run: nothing was written)"
APPLIED_HEADER: Final = "InferenceReplica status repair (applied)"
DRY_RUN_FOOTER: Final = "Re-run with --apply to write."
REPLACEMENT_KEY: Final = "instanceStatuses"

_ROW_FIELDS: Final = ("instanceStatusEncoding", "instanceStatuses", "instanceStatusColumns")

BeforeWrite = Callable[[], Awaitable[None]]


class RepairError(Exception):
    """A failure that isn't a refusal: bad input, a missing object, an API error (exit 2)."""


class RepairRefused(Exception):
    """The tool won't write, and wrote nothing (exit 1)."""


# -- the object's name -------------------------------------------------------------------------


def check_namespace(text: str) -> str:
    """``text`` when it can name a namespace (an RFC 1123 label); else :class:`ValueError`.

    An empty or malformed namespace would change the request's path (an empty one would make
    the GET of one object a list), so it is refused before any request."""
    if is_dns1123_label(text):
        return text
    raise ValueError(
        f"{_show_name(text)} is not a valid namespace: a namespace is 1 to {DNS1123_LABEL_MAX} "
        "lowercase letters, digits and '-', starting and ending with a letter or digit"
    )


def check_name(text: str) -> str:
    """``text`` when it can name an InferenceReplica (an RFC 1123 subdomain); else
    :class:`ValueError`."""
    if is_dns1123_subdomain(text):
        return text
    raise ValueError(
        f"{_show_name(text)} is not a valid InferenceReplica name: a name is 1 to "
        f"{DNS1123_SUBDOMAIN_MAX} "
        "lowercase letters, digits, '-' and '.', starting and ending with a letter or digit"
    )


def _show_name(text: str) -> str:
    shown = text if len(text) <= 80 else text[:80] + "..."
    return '""' if not text else repr(shown)


# -- the replacement file ----------------------------------------------------------------------


def load_replacement(path: Path) -> list[dict[str, Any]]:
    """The checked rows of a replacement file, or :class:`RepairError`."""
    try:
        document = load_yaml(path, what="replacement")
    except YamlError as exc:
        raise RepairError(str(exc)) from None
    return check_replacement(document, source=f"replacement {path}")


def check_replacement(document: Any, *, source: str) -> list[dict[str, Any]]:
    """A replacement document holds ``instanceStatuses`` and nothing else: a non-empty list of
    rows valid for both encodings and the InstanceStatus model, with unique indexes and pod
    counts that add up."""
    if not isinstance(document, dict):
        raise RepairError(f"{source} must be a mapping with the one key {REPLACEMENT_KEY}")
    others = [str(key) for key in document if key != REPLACEMENT_KEY]
    if others:
        raise RepairError(
            f"{source} must hold only {REPLACEMENT_KEY}; remove " + ", ".join(sorted(others))
        )
    if REPLACEMENT_KEY not in document:
        raise RepairError(f"{source} has no {REPLACEMENT_KEY}")
    rows = document[REPLACEMENT_KEY]
    if not isinstance(rows, list):
        raise RepairError(f"{source}: {REPLACEMENT_KEY} must be a list of rows")
    if not rows:
        raise RepairError(f"{source}: {REPLACEMENT_KEY} is empty; write a row for every Instance")
    try:
        checked = validate_rows(rows)
    except DecodeError as err:
        raise RepairError(f"{source}: {err.detail}") from None
    for position, row in enumerate(checked):
        where = f"{source}: row {position} (index {row['index']})"
        try:
            InstanceStatus.model_validate(row)
        except ValidationError as exc:
            first = exc.errors()[0]
            path = ".".join(str(part) for part in first["loc"])
            raise RepairError(f"{where}: {path}: {first['msg']}") from None
        pods = row.get("podCount")
        for field in ("servingPodCount", "availablePodCount"):
            count = row.get(field)
            if count is not None and pods is not None and count > pods:
                raise RepairError(f"{where}: {field} {count} is more than podCount {pods}")
    return checked


# -- the plan (pure) ---------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, kw_only=True)
class RepairPlan:
    """What a repair reads and would write."""

    namespace: str
    name: str
    resource_version: str
    block: OMENativeStatusConfig
    stored: str
    """The stored encoding as the status claims it (DenseV1 when the field is absent)."""
    failure: DecodeFailure
    """Why the manager can't decode the stored status (its reason, and the detail on one line)."""
    rows: list[dict[str, Any]]
    encoding: str
    payload_size: int
    removed: tuple[str, ...]
    kept: tuple[str, ...]
    spec_replicas: Any
    body: dict[str, Any]
    """The whole object with the new status: the PUT of the status subresource."""

    @property
    def target_field(self) -> str:
        return "instanceStatusColumns" if self.encoding == COLUMNAR_V2 else "instanceStatuses"


def plan_repair(
    obj: Mapping[str, Any], *, rows: Sequence[Mapping[str, Any]], block: OMENativeStatusConfig
) -> RepairPlan:
    """The write that replaces ``obj``'s rows, or :class:`RepairRefused`."""
    metadata = obj.get("metadata")
    metadata = metadata if isinstance(metadata, Mapping) else {}
    namespace, name = str(metadata.get("namespace", "")), str(metadata.get("name", ""))
    who = f"InferenceReplica {namespace}/{name}"
    stored = obj.get("status")
    status = stored if isinstance(stored, Mapping) else {}
    bound = block.max_decoded_instances
    try:
        stored_rows = decode_rows_from_status(stored, max_rows=bound)
    except StatusDecodeFailed as err:
        failure = DecodeFailure(
            namespace=namespace, name=name, reason=err.reason, detail=failure_detail(err)
        )
    else:
        raise RepairRefused(
            f"{who} is not damaged: its status decodes ({len(stored_rows)} rows); "
            "repair replaces only a status that can't be decoded"
        )
    if failure.reason == "cardinality_limit":
        raise RepairRefused(
            f"{who} fails with cardinality_limit ({failure.detail}): "
            "raise or restore maxDecodedInstances instead of repairing"
        )
    encoding, payload = choose_encoding(
        rows, configured=block.instance_status_encoding, max_rows=bound
    )
    new_status = with_rows(status, encoding=encoding, payload=payload)
    body = {key: value for key, value in obj.items() if key != "status"}
    body["status"] = new_status
    claimed = status.get("instanceStatusEncoding")
    spec = obj.get("spec")
    return RepairPlan(
        namespace=namespace,
        name=name,
        resource_version=str(metadata.get("resourceVersion", "")),
        block=block,
        stored=claimed if isinstance(claimed, str) else "DenseV1" if claimed is None else "?",
        failure=failure,
        rows=[dict(row) for row in rows],
        encoding=encoding,
        payload_size=encoded_size(payload),
        removed=tuple(
            field for field in _ROW_FIELDS if field in status and field not in new_status
        ),
        kept=tuple(sorted(key for key in status if key not in _ROW_FIELDS)),
        spec_replicas=spec.get("replicas") if isinstance(spec, Mapping) else None,
        body=body,
    )


def report_lines(
    plan: RepairPlan, *, cluster: str, written: Mapping[str, Any] | None = None
) -> list[str]:
    """The repair report; ``written`` is the object the API server returned after an apply."""
    rows = len(plan.rows)
    noun = "row" if rows == 1 else "rows"
    size = f"{plan.payload_size} bytes"
    bound = plan.block.max_decoded_instances
    if (
        plan.block.instance_status_encoding == COLUMNAR_V2
        and plan.encoding == DENSE_V1
        and bound is not None
        and rows > bound
    ):
        size += f": more rows than maxDecodedInstances {bound} are stored as a list"
    what = f"{rows} {noun} as {plan.encoding} in status.{plan.target_field} ({size})"
    if plan.removed:
        what += "; removed " + ", ".join(f"status.{field}" for field in plan.removed)
    kept = ", ".join(f"status.{field}" for field in plan.kept) or "no other status field"
    indexes = index_ranges(int(row["index"]) for row in plan.rows) or "none"
    lines = [
        APPLIED_HEADER if written is not None else DRY_RUN_HEADER,
        f"cluster: {cluster}",
        f"inferenceReplica: {plan.namespace}/{plan.name} (resourceVersion {plan.resource_version})",
        f"omenativeStatus: {block_json(plan.block)} (the cluster's block matches the inventory's)",
        f"stored: {plan.stored}, cannot be decoded ({plan.failure.reason}: {plan.failure.detail})",
        f"replacement: {rows} {noun} (indexes {indexes}), checked",
        f"spec.replicas: {plan.spec_replicas if plan.spec_replicas is not None else 'unset'}",
    ]
    if written is None:
        lines += [f"would write: {what}", f"would keep: {kept}", DRY_RUN_FOOTER]
        return lines
    version = _resource_version(written)
    lines += [
        f"wrote: {what}",
        f"kept: {kept}",
        f"now: resourceVersion {version}; the stored status decodes ({rows} {noun})",
    ]
    return lines


# -- the shell ---------------------------------------------------------------------------------


async def run_repair(
    *,
    inventory: Inventory,
    cluster_name: str,
    namespace: str,
    name: str,
    rows: Sequence[Mapping[str, Any]],
    apply: bool,
    before_write: BeforeWrite | None = None,
    timeout: float = 30.0,
) -> str:
    """Check, plan and (with ``apply``) write one repair; returns the report text.

    ``before_write`` runs between the read and the write (tests use it to change the object
    in between). Raises :class:`RepairRefused` or :class:`RepairError`, and nothing else: an
    unexpected failure (an unreachable API server, a local certificate file that can't be read,
    a failing credential plugin, an answer that isn't a JSON object) is a :class:`RepairError`
    that names it.
    """
    try:
        namespace, name = check_namespace(namespace), check_name(name)
    except ValueError as exc:
        raise RepairError(str(exc)) from None
    cluster = inventory.cluster(cluster_name)
    if cluster is None:
        known = ", ".join(entry.name for entry in inventory.clusters)
        raise RepairError(f"the inventory has no cluster {cluster_name} (it has {known})")
    try:
        client = await connect(cluster, timeout=timeout)
    except ValueError as exc:
        raise RepairError(str(exc)) from None
    writing = False
    async with client:
        try:
            plan = await _plan(
                client, inventory=inventory, namespace=namespace, name=name, rows=rows
            )
            if not apply:
                return "\n".join(report_lines(plan, cluster=cluster_name)) + "\n"
            if before_write is not None:
                await before_write()
            writing = True
            written = await _write(client, plan)
        except (RepairRefused, RepairError):
            raise
        except Exception as exc:  # a cluster's or this machine's failure: error:, exit 2
            detail = stopped_detail(
                exc, cluster=cluster, host=client.config.host, what="the repair"
            )
            if writing:
                detail += f"; {_WRITE_UNKNOWN}"
            raise RepairError(detail) from None
    _check_written(written, plan)
    return "\n".join(report_lines(plan, cluster=cluster_name, written=written)) + "\n"


_WRITE_UNKNOWN: Final = (
    "the write may or may not have been stored: run the dry run again to see the stored status"
)


async def _plan(
    client: KubeClient,
    *,
    inventory: Inventory,
    namespace: str,
    name: str,
    rows: Sequence[Mapping[str, Any]],
) -> RepairPlan:
    ref = inventory.manager
    where = f"configmap {ref.namespace}/{ref.config_map}"
    try:
        answer = await client.get(CONFIGMAPS, ref.config_map, ref.namespace)
        configmap = json_object(
            answer, request=f"GET {CONFIGMAPS.path(ref.namespace, ref.config_map)}"
        )
    except NotFound:
        raise RepairRefused(f"{where} not found: the cluster's block can't be checked") from None
    except (ApiError, BadAnswer) as exc:
        raise RepairError(f"cannot read {where}: {exc}") from None
    block, error = read_cluster_block(configmap)
    if block is None:
        raise RepairRefused(f"{where}: {error}")
    if block != inventory.omenative_status:
        raise RepairRefused(
            f"{where} sets omenativeStatus {block_json(block)}, the inventory wants "
            f"{block_json(inventory.omenative_status)}"
        )
    who = f"InferenceReplica {namespace}/{name}"
    try:
        answer = await client.get(INFERENCE_REPLICAS, name, namespace)
        obj = json_object(answer, request=f"GET {INFERENCE_REPLICAS.path(namespace, name)}")
    except NotFound:
        raise RepairError(f"{who} not found") from None
    except (ApiError, BadAnswer) as exc:
        raise RepairError(f"cannot read {who}: {exc}") from None
    return plan_repair(obj, rows=rows, block=block)


async def _write(client: KubeClient, plan: RepairPlan) -> Mapping[str, Any]:
    who = f"InferenceReplica {plan.namespace}/{plan.name}"
    path = INFERENCE_REPLICAS.path(plan.namespace, plan.name, "status")
    try:
        answer = await client.replace_status(INFERENCE_REPLICAS, plan.body, plan.namespace)
    except Conflict:
        raise RepairRefused(
            f"{who} changed after the tool read it at resourceVersion {plan.resource_version}; "
            "nothing was written: run the dry run again"
        ) from None
    except ApiError as exc:
        raise RepairError(f"cannot write the status of {who}: {exc}") from None
    try:
        return json_object(answer, request=f"PUT {path}")
    except BadAnswer as exc:
        raise RepairError(f"cannot confirm the write of {who}: {exc}; {_WRITE_UNKNOWN}") from None


def _check_written(written: Mapping[str, Any], plan: RepairPlan) -> None:
    """The API server may prune or default: make sure the manager can read what it stored, and
    that it reads back as the rows."""
    version = _resource_version(written)
    status = written.get("status")
    bound = plan.block.max_decoded_instances
    try:
        decode_rows_from_status(status, max_rows=bound)
    except StatusDecodeFailed as err:
        raise RepairError(
            f"the status was written (resourceVersion {version}) but reads back as "
            f"undecodable: {err.reason}: {failure_detail(err)}"
        ) from None
    try:
        rows = decode_status(status, max_rows=bound)
    except DecodeError as err:  # not after the manager's decode: the same codec, same bound
        raise RepairError(
            f"the status was written (resourceVersion {version}) but reads back as "
            f"undecodable: {err}"
        ) from None
    if rows != plan.rows:
        raise RepairError(
            f"the status was written (resourceVersion {version}) but reads back with different rows"
        )


def _resource_version(obj: Mapping[str, Any]) -> Any:
    metadata = obj.get("metadata")
    return metadata.get("resourceVersion") if isinstance(metadata, Mapping) else None
