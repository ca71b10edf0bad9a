"""Whether a pass must write the rows again only to convert their stored form.

Why: the form rows are stored in (DenseV1 or ColumnarV2) follows the manager's
``omenativeStatus`` block and the write's size (:mod:`.encoding`). After a restart with
another block, an InferenceReplica whose rows don't change would keep the old form for ever,
since a pass that changes nothing writes nothing. So a pass without a status write of its
own gets one of the unchanged rows when a write would store them in another form.

Invariant: the check runs once per stored version: the memory keeps the resourceVersion
whose form was found current, so a quiet fleet re-encodes nothing on every pass.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from omed.controllers.inferencereplica.core.actions import Plan, WriteStatus
from omed.controllers.inferencereplica.core.encoding import StatusEncodingSettings, needs_conversion
from omed.controllers.inferencereplica.core.memory import KeyMemory
from omed.controllers.inferencereplica.core.model import ObservedState
from omed.controllers.inferencereplica.core.status import encode_rows_into_status


@dataclass(frozen=True, slots=True, kw_only=True)
class StoredForm:
    """How the InferenceReplica's status is stored now, and how a write would store it."""

    version: str
    """The resourceVersion read."""
    status: Mapping[str, Any] | None
    """The stored status, as read (its rows in whichever form)."""
    settings: StatusEncodingSettings = dataclasses.field(default_factory=StatusEncodingSettings)


def convert(
    decided: Plan, *, observed: ObservedState, stored: StoredForm, memory: KeyMemory
) -> tuple[Plan, KeyMemory]:
    """``decided``, plus a write of the unchanged rows when their stored form isn't the one
    a write would keep now; and the memory, which notes a version found current."""
    if decided.of_type(WriteStatus) or memory.form_current == stored.version:
        return decided, memory
    rows = tuple(sorted(observed.rows.values(), key=lambda row: row.index))
    listed = encode_rows_into_status({}, rows).get("instanceStatuses") or []
    if not needs_conversion(listed, stored=stored.status, settings=stored.settings):
        return decided, dataclasses.replace(memory, form_current=stored.version)
    write = WriteStatus(status=observed.status, rows=rows)
    return dataclasses.replace(decided, actions=(write, *decided.actions)), memory
