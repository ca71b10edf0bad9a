"""Every reader of decoded rows leaves their nested values alone.

The decoder shares a class's nested values (conditions, lastFailure, operation) between the
rows of the class by default: a reader that edited one in place would edit every row of the
class. docs/status-encoding.md makes read-only nested values the contract; these tests hold
each reader in the manager and the CLI to it, by running it on decoded rows and comparing the
rows it was given with a deep copy taken before it saw them. A scan of the source makes sure
that a new reader can't be added without being added here.
"""

from __future__ import annotations

import copy
import datetime as dt
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import omed.controllers.inferencereplica.core.status as irep_status
from omed.cli import instance_status, instances, preflight_checks, preflight_repair, release_held
from omed.config.entries import OMENativeStatusConfig
from omed.controllers.inferencereplica.core.model import PlanSettings
from omed.controllers.inferencereplica.core.observe import observe
from omed.controllers.inferencereplica.core.plan import plan
from omed.statuscodec import COLUMNAR_V2, ClassTable, decode_status, encode_columnar

ROOT = Path(__file__).resolve().parents[3]

REVISION = "chat-engine-2f32f6fe"
NEXT = "chat-engine-7f9c4d2b"


def _row(index: int) -> dict[str, Any]:
    row: dict[str, Any] = {
        "index": index,
        "incarnation": 1,
        "phase": "Ready",
        "runningRevision": REVISION,
        "targetRevision": REVISION,
        "podCount": 1,
        "servingPodCount": 1,
        "availablePodCount": 1,
        "admitted": True,
        "conditions": [
            {
                "type": "Ready",
                "status": "True",
                "observedGeneration": 1,
                "lastTransitionTime": "2026-09-14T20:50:00Z",
                "reason": "InstanceReady",
                "message": "",
            }
        ],
        "readySince": "2026-09-14T20:50:00Z",
        "lastFailure": {
            "pod": "chat-engine-0-default-0",
            "container": "ome-container",
            "reason": "OOMKilled",
            "exitCode": 137,
            "time": "2026-09-14T20:40:00Z",
        },
    }
    if index >= 4:
        row["phase"] = "Updating"
        row["targetRevision"] = NEXT
        row["operation"] = {
            "id": "update-4",
            "type": "Update",
            "step": "SurgeCreated",
            "startedAt": "2026-09-14T21:10:00Z",
            "deadline": "2026-09-14T21:40:00Z",
            "surgeIndex": 10,
            "hintTargetNodes": ["gpu-node-1", "gpu-node-2"],
        }
    return row


ROWS = [_row(i) for i in range(6)]
"""Two classes of three rows (the last three with an operation), every nested kind."""


def _columnar_irep() -> dict[str, Any]:
    return {
        "apiVersion": "ome.io/v1beta1",
        "kind": "InferenceReplica",
        "metadata": {
            "name": "chat-engine",
            "namespace": "prod",
            "uid": "irep-uid",
            "generation": 1,
            "resourceVersion": "5",
        },
        "spec": {
            "component": "engine",
            "replicas": 6,
            "runners": [
                {
                    "name": "default",
                    "template": {"spec": {"containers": [{"name": "c", "image": "i"}]}},
                }
            ],
        },
        "status": {
            "replicas": 6,
            "instanceStatusEncoding": COLUMNAR_V2,
            "instanceStatusColumns": encode_columnar(ROWS),
        },
    }


class Decoded:
    """What the readers were given: each decode's rows, and a deep copy taken at once."""

    def __init__(self) -> None:
        self.given: list[tuple[list[dict[str, Any]], list[dict[str, Any]]]] = []

    def wrap(self, decode: Callable[..., Any]) -> Callable[..., Any]:
        def recording(*args: Any, **kwargs: Any) -> Any:
            decoded = decode(*args, **kwargs)
            # A class table's templates are what its rows share.
            rows = decoded.templates if isinstance(decoded, ClassTable) else decoded
            self.given.append((rows, copy.deepcopy(rows)))
            return decoded

        return recording

    def assert_untouched(self) -> None:
        assert self.given, "the reader decoded nothing"
        for rows, before in self.given:
            assert rows == before, "a reader edited the nested values of decoded rows"

    def assert_shared(self) -> None:
        """The rows were decoded with their nested values shared (else the test proves
        nothing)."""
        shared = [rows for rows, _ in self.given if len(rows) == len(ROWS)]
        assert shared
        for rows in shared:
            assert rows[0]["conditions"] is rows[1]["conditions"]
            assert rows[4]["operation"] is rows[5]["operation"]


READERS: dict[str, tuple[Any, str]] = {
    "omed/controllers/inferencereplica/core/status.py": (irep_status, "decode_status_table"),
    "omed/cli/preflight_repair.py": (preflight_repair, "decode_status"),
    "omed/cli/instances.py": (instances, "decode_status"),
}
"""Every module of the manager and the CLI that decodes rows, and the module object and the
decoder it calls (the controller reads class tables: each class's template is shared by the
rows, as models). The fleet check (``omed/cli/preflight_checks.py``) decodes through the
manager's ``decode_rows_from_status``, so it is covered by the first entry."""


@pytest.fixture
def decoded(monkeypatch: pytest.MonkeyPatch) -> Iterator[Decoded]:
    record = Decoded()
    for module, name in READERS.values():
        monkeypatch.setattr(module, name, record.wrap(getattr(module, name)))
    yield record


def test_every_reader_of_decoded_rows_is_checked_here() -> None:
    calls = re.compile(r"\bdecode_(?:status|columnar|status_table|class_table)\(")
    readers = {
        path.relative_to(ROOT).as_posix()
        for path in (ROOT / "omed").rglob("*.py")
        if "statuscodec" not in path.parts and calls.search(path.read_text(encoding="utf-8"))
    }
    assert readers == set(READERS)


def test_the_controller_reads_rows_without_editing_them(decoded: Decoded) -> None:
    irep = _columnar_irep()
    listed = irep_status.in_list_form(irep, max_rows=100)
    target, observed = observe(listed, [])
    decided = plan(
        target=target,
        observed=observed,
        settings=PlanSettings(),
        now=dt.datetime(2026, 9, 14, 21, 20, tzinfo=dt.UTC),
    )
    assert decided.rows
    models = irep_status.decode_rows_from_status(irep["status"], max_rows=100)
    assert [row.to_dict() for row in models] == ROWS
    # the rows of a class share its nested models, in the planner's input too
    assert models[0].conditions is models[1].conditions
    assert models[4].operation is models[5].operation
    assert observed.rows[0].conditions is observed.rows[2].conditions
    decoded.assert_untouched()


def test_the_cli_reads_rows_without_editing_them(decoded: Decoded) -> None:
    irep = _columnar_irep()
    tally = preflight_checks.ReplicaTally(max_rows=100)
    tally.add(irep)
    assert tally.largest_columnar_v2_rows == len(ROWS)
    block = OMENativeStatusConfig.model_validate(
        {"instanceStatusEncoding": "ColumnarV2", "maxDecodedInstances": 100}
    )
    with pytest.raises(preflight_repair.RepairRefused, match="is not damaged"):
        preflight_repair.plan_repair(irep, rows=ROWS, block=block)
    damaged = copy.deepcopy(irep)
    damaged["status"]["instanceStatusColumns"]["index"] = "0-4"
    repair = preflight_repair.plan_repair(damaged, rows=ROWS, block=block)
    preflight_repair._check_written(repair.body, repair)
    decoded.assert_shared()
    decoded.assert_untouched()


def test_the_kubectl_plugin_reads_rows_without_editing_them(decoded: Decoded) -> None:
    isvc = {"metadata": {"name": "chat", "namespace": "prod", "uid": "isvc-uid"}}
    irep = _columnar_irep()
    irep["metadata"].update(
        labels={"ome.io/inferenceservice": "chat"},
        annotations={"ome.io/controller-write": "true"},
        ownerReferences=[
            {
                "apiVersion": "ome.io/v1beta1",
                "kind": "InferenceService",
                "name": "chat",
                "uid": "isvc-uid",
                "controller": True,
            }
        ],
    )
    irep["spec"]["parentRef"] = {"name": "chat"}
    irep["status"]["observedGeneration"] = 1
    irep["status"]["retryBlocks"] = [
        {"targetRevision": NEXT, "state": "Held", "attemptsStarted": 3, "reason": "Error"}
    ]
    collection = instances.collect(isvc, [irep])
    assert "Updating" in instances.render_table(instances.list_rows(collection))
    assert len(instances.list_report(collection)["instances"]) == len(ROWS)
    now = 1_790_000_000
    blocks = instances.retry_blocks(collection, "engine", now=now)
    instances.retry_blocks_report(collection, blocks)
    deploy = instance_status.Deployment("OMENative", "ServiceSpec", "LiveRuntime", "Resolved")
    for index in (0, 5):
        report = instance_status.build(
            collection, component="engine", index=index, deploy=deploy, pods=[], events=[]
        )
        instance_status.table_rows(report, wide=True)
        assert report.report["instance"]["index"] == index
    assert release_held.check(collection, component="engine", revision=NEXT, now=now)
    decoded.assert_shared()
    decoded.assert_untouched()


def test_a_reader_that_edits_nested_values_is_caught() -> None:
    record = Decoded()
    reader = record.wrap(decode_status)
    rows = reader(_columnar_irep()["status"], max_rows=100)
    rows[0]["conditions"][0]["status"] = "False"  # edits rows 0 to 2 at once
    assert rows[2]["conditions"][0]["status"] == "False"
    with pytest.raises(AssertionError, match="edited the nested values"):
        record.assert_untouched()
