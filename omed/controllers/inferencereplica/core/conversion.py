"""Whether a pass must write the rows again only to convert their stored form.

Why: the form rows are stored in (DenseV1 or ColumnarV2) follows the manager's
``omenativeStatus`` block and the write's size (:mod:`.encoding`). After a restart with
another block, an InferenceReplica whose rows don't change would keep the old form for ever,
since a pass that changes nothing writes nothing. So a pass without a status write of its
own gets one of the unchanged rows when a write would store them in another form.

Invariant: the check runs once per stored version: the memory keeps the resourceVersion
whose form was found current, so a quiet fleet re-encodes nothing on every pass. A version
that holds exactly what this controller wrote under ColumnarV2 is current without the check
(under ColumnarV2 the form is a function of the rows alone, and the write chose it for these
rows); under DenseV1 the write's choice also weighed the status it replaced and the object's
size, so the check runs.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from omed.controllers.inferencereplica.core.actions import Plan, WriteStatus
from omed.controllers.inferencereplica.core.encoding import (
    ROW_CELLS,
    StatusEncodingSettings,
    needs_conversion,
)
from omed.controllers.inferencereplica.core.memory import KeyMemory
from omed.controllers.inferencereplica.core.model import ObservedState
from omed.controllers.inferencereplica.core.status import encode_rows_into_status
from omed.statuscodec import COLUMNAR_V2


@dataclass(frozen=True, slots=True, kw_only=True)
class StoredForm:
    """How the InferenceReplica's status is stored now, and how a write would store it."""

    version: str
    """The resourceVersion read."""
    status: Mapping[str, Any] | None
    """The stored status, as read (its rows in whichever form)."""
    settings: StatusEncodingSettings = dataclasses.field(default_factory=StatusEncodingSettings)
    own_write: bool = False
    """The stored status is the very JSON this controller's last write sent (under these
    settings, read back as it was sent)."""


def convert(
    decided: Plan, *, observed: ObservedState, stored: StoredForm, memory: KeyMemory
) -> tuple[Plan, KeyMemory]:
    """``decided``, plus a write of the unchanged rows when their stored form isn't the one
    a write would keep now; and the memory, which notes a version found current."""
    if decided.of_type(WriteStatus) or memory.form_current == stored.version:
        return decided, memory
    if stored.own_write and stored.settings.encoding == COLUMNAR_V2:
        # Under ColumnarV2 the form depends on the rows alone, and the write chose it for
        # these very rows: current, with nothing encoded again.
        return decided, dataclasses.replace(memory, form_current=stored.version)
    rows = tuple(sorted(observed.rows.values(), key=lambda row: row.index))
    listed = encode_rows_into_status({}, rows).get("instanceStatuses") or []
    if not needs_conversion(listed, stored=stored.status, settings=stored.settings, memo=ROW_CELLS):
        return decided, dataclasses.replace(memory, form_current=stored.version)
    write = WriteStatus(status=observed.status, rows=rows)
    return dataclasses.replace(decided, actions=(write, *decided.actions)), memory
