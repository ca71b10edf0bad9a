"""The one seam through which the controller reads and writes Instance rows.

Why: rows are stored either as the list ``status.instanceStatuses`` (DenseV1) or as columns
(``instanceStatusEncoding: ColumnarV2``, :mod:`omed.statuscodec`). The controller must not
care which: it reads rows only through :func:`decode_rows_from_status` and writes them only
through :func:`encode_rows_into_status`. Both forms are read through the codec
(:func:`omed.statuscodec.decode_status`) under the manager's bound; which form a write uses is
decided by :mod:`.encoding`, which the executor applies to the list that
:func:`encode_rows_into_status` gives.

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
from omed.statuscodec import DENSE_V1, DecodeError, DecodeReason, decode_status, with_rows
from omed.statuscodec.status import FIELD_ENCODING


class RowsUnreadable(Exception):
    """The stored rows can't be decoded; the InferenceReplica must be left alone."""


class StatusDecodeFailed(RowsUnreadable):
    """The codec refused the stored rows: ``reason`` is the event's ``(<reason>)``."""

    def __init__(
        self, reason: DecodeReason, detail: str, *, row: Mapping[str, Any] | None = None
    ) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason: DecodeReason = reason
        self.detail = detail
        self.row = row
        """The decoded row the InstanceStatus model refused (``row_shape`` only), for
        reports that name it; ``None`` when the codec refused the status."""


def decode_rows_from_status(
    status: Mapping[str, Any] | None, *, max_rows: int | None = None
) -> list[InstanceStatus]:
    """The rows stored in ``status`` (a JSON status object), sorted by index.

    Either form; ``max_rows`` bounds ColumnarV2 (maxDecodedInstances; ``None`` or 0: no bound
    is set, so no columns are decoded). Raises :class:`StatusDecodeFailed`: the codec's reason,
    or ``row_shape`` for a decoded row the InstanceStatus model refuses (the codec accepts any
    string as a time, the model doesn't).

    This is the one definition of "the stored status can be decoded": the manager reads every
    InferenceReplica through it (after :func:`in_list_form`, which decodes under the same
    bound), and ``ome-status-preflight`` calls it for its fleet check and for ``repair``, so
    the tool and the manager can't disagree on which statuses are damaged, or why.
    """
    if not status:
        return []
    try:
        raw = decode_status(status, max_rows=max_rows or None, share_nested=True)
    except DecodeError as err:
        raise StatusDecodeFailed(err.reason, err.detail) from err
    rows: list[InstanceStatus] = []
    for item in raw:
        try:
            rows.append(InstanceStatus.model_validate(item))
        except ValidationError as err:
            raise StatusDecodeFailed(
                "row_shape", f"a row is not a valid Instance row: {err}", row=item
            ) from err
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


def in_list_form(irep: Mapping[str, Any], *, max_rows: int | None) -> Mapping[str, Any]:
    """``irep`` with its rows as a list, decoded from columns under ``max_rows`` if need be.

    The planner's reader (:func:`decode_rows_from_status`, called by ``observe``) then sees
    one form. A list-stored object is returned as it is; the cached object is never changed
    (a ColumnarV2 one gives a new top-level dict and status). Raises
    :class:`StatusDecodeFailed`.
    """
    status = irep.get("status")
    if not isinstance(status, Mapping) or FIELD_ENCODING not in status:
        return irep
    try:
        rows: list[Mapping[str, Any]] = list(
            decode_status(status, max_rows=max_rows or None, share_nested=True)
        )
    except DecodeError as err:
        raise StatusDecodeFailed(err.reason, err.detail) from err
    return {**irep, "status": with_rows(status, encoding=DENSE_V1, payload=rows)}
