"""The stored-form check (:func:`conversion.convert`) trusts a version that holds exactly what
this controller wrote under ColumnarV2, and checks every other version."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from omed.api.inferencereplica import InferenceReplicaStatus, InstanceStatus
from omed.controllers.inferencereplica.core import conversion
from omed.controllers.inferencereplica.core.actions import Plan, WriteStatus
from omed.controllers.inferencereplica.core.encoding import StatusEncodingSettings, status_write
from omed.controllers.inferencereplica.core.memory import EMPTY
from omed.controllers.inferencereplica.core.model import ObservedState
from omed.controllers.inferencereplica.core.status import RowsCache, encode_rows_into_status
from omed.statuscodec import COLUMNAR_V2, DENSE_V1

COLUMNAR = StatusEncodingSettings(encoding=COLUMNAR_V2, max_decoded_instances=100)
DENSE = StatusEncodingSettings(encoding=DENSE_V1, max_decoded_instances=100)


def models(count: int) -> tuple[InstanceStatus, ...]:
    return tuple(
        InstanceStatus.model_validate(
            {"index": i, "incarnation": 1, "phase": "Ready", "podCount": 1}
            | ({} if i else {"readySince": "2026-09-14T20:00:00Z"})
        )
        for i in range(count)
    )


def written(rows: tuple[InstanceStatus, ...], settings: StatusEncodingSettings) -> dict[str, Any]:
    listed = encode_rows_into_status({}, rows)["instanceStatuses"]
    status = InferenceReplicaStatus(replicas=len(rows)).to_dict()
    return status_write(status, listed, stored=None, settings=settings).status


def irep(status: dict[str, Any], version: str) -> dict[str, Any]:
    return {"metadata": {"uid": "u-1", "resourceVersion": version}, "status": status}


def test_a_version_holding_the_json_written_is_the_controllers_own_write() -> None:
    cache = RowsCache()
    rows = models(40)
    sent = written(rows, COLUMNAR)
    cache.wrote("u-1", sent, rows, max_rows=100)
    back = irep(copy.deepcopy(sent), "7")  # the watch's new object: equal JSON
    cache.read(back, max_rows=100)
    assert cache.is_own_write(back)
    assert not cache.is_own_write(irep(copy.deepcopy(sent), "8"))  # not the object read

    changed = copy.deepcopy(sent)
    changed["replicas"] = 41  # the API server (or anyone) changed the status
    cache.wrote("u-1", sent, rows, max_rows=100)
    other = irep(changed, "9")
    cache.read(other, max_rows=100)
    assert not cache.is_own_write(other)


def test_an_own_columnar_write_is_current_without_encoding_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def refuse(*args: Any, **kwargs: Any) -> bool:
        raise AssertionError("the form was checked again")

    monkeypatch.setattr(conversion, "needs_conversion", refuse)
    rows = models(40)
    stored = conversion.StoredForm(
        version="7", status=written(rows, COLUMNAR), settings=COLUMNAR, own_write=True
    )
    observed = ObservedState(rows={row.index: row for row in rows})
    plan = Plan(actions=(), rows=rows, status=InferenceReplicaStatus())
    decided, memory = conversion.convert(plan, observed=observed, stored=stored, memory=EMPTY)
    assert decided is plan
    assert memory.form_current == "7"


@pytest.mark.parametrize(
    ("settings", "own_write"),
    [(DENSE, True), (COLUMNAR, False)],
    ids=["dense-own", "columnar-other"],
)
def test_any_other_version_is_checked_and_converted_when_a_write_would_change_it(
    settings: StatusEncodingSettings, own_write: bool
) -> None:
    """Stored as columns; under DenseV1 a write would store the list, whoever wrote the
    columns (the write's choice weighed the status it replaced): converted. Under ColumnarV2 a
    list a write would store as columns, read from anyone else's write: converted."""
    rows = models(40)
    status = written(rows, COLUMNAR if settings is DENSE else DENSE)
    stored = conversion.StoredForm(
        version="7", status=status, settings=settings, own_write=own_write
    )
    observed = ObservedState(rows={row.index: row for row in rows})
    plan = Plan(actions=(), rows=rows, status=InferenceReplicaStatus())
    decided, memory = conversion.convert(plan, observed=observed, stored=stored, memory=EMPTY)
    assert decided.of_type(WriteStatus)
    assert memory.form_current is None
