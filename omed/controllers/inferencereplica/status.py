"""The one seam through which the controller reads and writes Instance rows.

Why: rows are stored either as the list ``status.instanceStatuses`` (DenseV1) or as columns
(``instanceStatusEncoding: ColumnarV2``, :mod:`omed.statuscodec`). The controller must not
care which: it reads rows only through :func:`decode_rows_from_status` and writes them only
through :func:`encode_rows_into_status`. Today both speak the list form; the ColumnarV2
codec replaces the bodies of these two functions and nothing else.

Invariants:

* decode then encode of an unchanged row list gives back the same JSON (rows sorted by
  index, unset fields left out), so a pass that changes nothing writes nothing;
* a status whose rows can't be read raises :class:`RowsUnreadable`, never returns a partial
  list: acting on half the rows would delete or duplicate Instances.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import ValidationError

from omed.api.inferencereplica import InferenceReplicaStatus, InstanceStatus


class RowsUnreadable(Exception):
    """The stored rows can't be decoded; the InferenceReplica must be left alone."""


def decode_rows_from_status(status: Mapping[str, Any] | None) -> list[InstanceStatus]:
    """The rows stored in ``status`` (a JSON status object), sorted by index."""
    if not status:
        return []
    encoding = status.get("instanceStatusEncoding")
    if encoding:
        raise RowsUnreadable(f"instance status encoding {encoding!r} is not supported yet")
    raw = status.get("instanceStatuses") or []
    if not isinstance(raw, list):
        raise RowsUnreadable("status.instanceStatuses is not a list")
    try:
        rows = [InstanceStatus.model_validate(item) for item in raw]
    except ValidationError as err:
        raise RowsUnreadable(f"invalid row in status.instanceStatuses: {err}") from err
    indexes = [row.index for row in rows]
    if len(set(indexes)) != len(indexes):
        raise RowsUnreadable("status.instanceStatuses has two rows with the same index")
    return sorted(rows, key=lambda row: row.index)


def encode_rows_into_status(
    status: Mapping[str, Any], rows: Sequence[InstanceStatus]
) -> dict[str, Any]:
    """A copy of ``status`` (JSON) holding ``rows`` in the stored form."""
    encoded = {
        k: v
        for k, v in status.items()
        if k not in ("instanceStatuses", "instanceStatusEncoding", "instanceStatusColumns")
    }
    if rows:
        encoded["instanceStatuses"] = [
            row.to_dict() for row in sorted(rows, key=lambda row: row.index)
        ]
    return encoded


def status_summary(status: Mapping[str, Any] | None) -> InferenceReplicaStatus:
    """The status without its rows, as a model (rows are read by the decoder only)."""
    if not status:
        return InferenceReplicaStatus()
    rest = {
        k: v
        for k, v in status.items()
        if k not in ("instanceStatuses", "instanceStatusEncoding", "instanceStatusColumns")
    }
    try:
        return InferenceReplicaStatus.model_validate(rest)
    except ValidationError as err:
        raise RowsUnreadable(f"invalid status: {err}") from err


def status_body(status: InferenceReplicaStatus, rows: Sequence[InstanceStatus]) -> dict[str, Any]:
    """The JSON status to store: ``status`` (its own rows ignored) with ``rows`` encoded in."""
    return encode_rows_into_status(status.to_dict(), rows)
