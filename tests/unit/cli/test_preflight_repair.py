"""Repair's pure parts: the replacement file's checks, the plan and its refusals, the report."""

from __future__ import annotations

import copy
import io
from pathlib import Path
from typing import Any

import pytest
import yaml

from omed.cli.preflight import run
from omed.cli.preflight_repair import (
    APPLIED_HEADER,
    DRY_RUN_FOOTER,
    DRY_RUN_HEADER,
    RepairError,
    RepairRefused,
    check_replacement,
    load_replacement,
    plan_repair,
    report_lines,
)
from omed.config import OMENativeStatusConfig
from omed.statuscodec import decode_status, encode_columnar

from .test_preflight_inventory import GOOD

COLUMNAR = OMENativeStatusConfig.model_validate(
    {"instanceStatusEncoding": "ColumnarV2", "maxDecodedInstances": 8}
)
DENSE = OMENativeStatusConfig.model_validate(
    {"instanceStatusEncoding": "DenseV1", "maxDecodedInstances": 8}
)
SOURCE = "replacement rows.yaml"


def row(index: int, **fields: Any) -> dict[str, Any]:
    return {
        "index": index,
        "incarnation": 1,
        "phase": "Ready",
        "runningRevision": "example-engine-2f32f6fe",
        "podCount": 1,
        "servingPodCount": 1,
        "availablePodCount": 1,
        "admitted": True,
        **fields,
    }


ROWS = [row(index) for index in range(6)]


# -- the replacement file ----------------------------------------------------------------------


def test_the_pages_example_is_accepted(tmp_path: Path) -> None:
    path = tmp_path / "rows.yaml"
    path.write_text(
        "instanceStatuses:\n"
        "- index: 0\n"
        "  incarnation: 1\n"
        "  phase: Ready\n"
        "  runningRevision: example-engine-2f32f6fe\n"
        "  podCount: 1\n"
        "  servingPodCount: 1\n"
        "  availablePodCount: 1\n"
        "  admitted: true\n"
        "  readySince: 2026-09-14T20:50:00Z\n"
    )
    assert load_replacement(path) == [row(0, readySince="2026-09-14T20:50:00Z")]


@pytest.mark.parametrize(
    ("document", "message"),
    [
        (None, f"{SOURCE} must be a mapping with the one key instanceStatuses"),
        ([row(0)], f"{SOURCE} must be a mapping with the one key instanceStatuses"),
        ({}, f"{SOURCE} has no instanceStatuses"),
        (
            {"instanceStatuses": [row(0)], "status": {}, "apiVersion": "v1"},
            f"{SOURCE} must hold only instanceStatuses; remove apiVersion, status",
        ),
        ({"instanceStatuses": {"0": row(0)}}, f"{SOURCE}: instanceStatuses must be a list of rows"),
        (
            {"instanceStatuses": []},
            f"{SOURCE}: instanceStatuses is empty; write a row for every Instance",
        ),
        (
            {"instanceStatuses": [row(0), row(0)]},
            f"{SOURCE}: rows 0 and 1 both have index 0",
        ),
        ({"instanceStatuses": [{"phase": "Ready"}]}, f"{SOURCE}: row 0 has no index"),
        (
            {"instanceStatuses": [row(0, phase="Running")]},
            f"{SOURCE}: row 0: phase is 'Running', not one of Creating, Deleting, Failed, "
            "Migrating, Pending, Ready, Restarting, Updating",
        ),
        (
            {"instanceStatuses": [row(0, podcount=1)]},
            f"{SOURCE}: row 0: unknown key(s) 'podcount'",
        ),
        (
            {"instanceStatuses": [row(0, podCount="1")]},
            f"{SOURCE}: row 0: podCount must be an integer from 0, got '1'",
        ),
        (
            {"instanceStatuses": [row(0), row(3, readySince="yesterday")]},
            f"{SOURCE}: row 1 (index 3): readySince: Input should be a valid datetime or date, "
            "input is too short",
        ),
        (
            {"instanceStatuses": [row(0), row(1, podCount=2, servingPodCount=3)]},
            f"{SOURCE}: row 1 (index 1): servingPodCount 3 is more than podCount 2",
        ),
        (
            {"instanceStatuses": [row(4, podCount=0)]},
            f"{SOURCE}: row 0 (index 4): servingPodCount 1 is more than podCount 0",
        ),
    ],
)
def test_bad_replacements_are_errors(document: Any, message: str) -> None:
    with pytest.raises(RepairError) as caught:
        check_replacement(document, source=SOURCE)
    assert str(caught.value) == message


def test_a_malformed_file_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "rows.yaml"
    path.write_text("instanceStatuses:\n- index: 0\n  index: 1\n")
    with pytest.raises(RepairError) as caught:
        load_replacement(path)
    assert str(caught.value) == (
        f"replacement {path} is not valid YAML: line 3, column 3: found the key 'index' twice"
    )


# -- the plan ----------------------------------------------------------------------------------


def damaged_object(rows: list[dict[str, Any]] = ROWS) -> dict[str, Any]:
    columns = encode_columnar(rows)
    columns["index"] = f"0-{len(rows) - 2}"
    return {
        "apiVersion": "ome.io/v1beta1",
        "kind": "InferenceReplica",
        "metadata": {"namespace": "serving", "name": "example-engine", "resourceVersion": "4711"},
        "spec": {"component": "engine", "replicas": len(rows)},
        "status": {
            "observedGeneration": 4,
            "replicas": len(rows),
            "instanceStatusEncoding": "ColumnarV2",
            "instanceStatusColumns": columns,
        },
    }


def test_a_columnar_repair_writes_columns_and_keeps_the_rest() -> None:
    obj = damaged_object()
    plan = plan_repair(obj, rows=ROWS, block=COLUMNAR)
    assert (plan.encoding, plan.stored, plan.failure.reason) == (
        "ColumnarV2",
        "ColumnarV2",
        "coverage",
    )
    assert plan.body["metadata"] == obj["metadata"]  # the resourceVersion guards the write
    assert plan.body["spec"] == obj["spec"]
    assert plan.body["status"] == {
        "observedGeneration": 4,
        "replicas": 6,
        "instanceStatusEncoding": "ColumnarV2",
        "instanceStatusColumns": encode_columnar(ROWS),
    }
    assert decode_status(plan.body["status"], max_rows=8) == ROWS
    assert (plan.removed, plan.kept) == ((), ("observedGeneration", "replicas"))
    assert obj == damaged_object()  # the object read is not changed


def test_a_dense_repair_writes_the_list_and_removes_the_columns() -> None:
    plan = plan_repair(damaged_object(), rows=ROWS, block=DENSE)
    assert plan.encoding == "DenseV1"
    assert plan.body["status"] == {"observedGeneration": 4, "replicas": 6, "instanceStatuses": ROWS}
    assert plan.removed == ("instanceStatusEncoding", "instanceStatusColumns")


def test_the_dry_run_report() -> None:
    plan = plan_repair(damaged_object(), rows=ROWS, block=DENSE)
    size = plan.payload_size
    assert report_lines(plan, cluster="prod-east") == [
        DRY_RUN_HEADER,
        "cluster: prod-east",
        "inferenceReplica: serving/example-engine (resourceVersion 4711)",
        'omenativeStatus: {"instanceStatusEncoding":"DenseV1","maxDecodedInstances":8} '
        "(the cluster's block matches the inventory's)",
        "stored: ColumnarV2, cannot be decoded (coverage: index holds 5 values for 6 entries: "
        "some are missing)",
        "replacement: 6 rows (indexes 0-5), checked",
        "spec.replicas: 6",
        f"would write: 6 rows as DenseV1 in status.instanceStatuses ({size} bytes); removed "
        "status.instanceStatusEncoding, status.instanceStatusColumns",
        "would keep: status.observedGeneration, status.replicas",
        DRY_RUN_FOOTER,
    ]


def test_the_applied_report() -> None:
    rows = [row(0), row(1), row(2), row(5), row(7), row(8)]
    plan = plan_repair(damaged_object(rows), rows=rows, block=COLUMNAR)
    written = {"metadata": {"resourceVersion": "4720"}, "status": plan.body["status"]}
    lines = report_lines(plan, cluster="prod-east", written=written)
    assert lines[0] == APPLIED_HEADER
    assert "replacement: 6 rows (indexes 0-2, 5, 7-8), checked" in lines
    assert lines[-3:] == [
        f"wrote: 6 rows as ColumnarV2 in status.instanceStatusColumns ({plan.payload_size} bytes)",
        "kept: status.observedGeneration, status.replicas",
        "now: resourceVersion 4720; the stored status decodes (6 rows)",
    ]


def test_a_status_that_decodes_is_not_repaired() -> None:
    obj = damaged_object()
    obj["status"]["instanceStatusColumns"] = encode_columnar(ROWS)
    with pytest.raises(RepairRefused) as caught:
        plan_repair(obj, rows=ROWS, block=COLUMNAR)
    assert str(caught.value) == (
        "InferenceReplica serving/example-engine is not damaged: its status decodes (6 rows); "
        "repair replaces only a status that can't be decoded"
    )


def test_cardinality_limit_is_refused() -> None:
    big = [row(index) for index in range(9)]
    obj = damaged_object(big)
    obj["status"]["instanceStatusColumns"] = encode_columnar(big)  # intact, but over the bound
    with pytest.raises(RepairRefused) as caught:
        plan_repair(obj, rows=ROWS, block=COLUMNAR)
    assert str(caught.value) == (
        "InferenceReplica serving/example-engine fails with cardinality_limit (9 rows are "
        "stored, more than maxDecodedInstances 8): raise or restore maxDecodedInstances instead "
        "of repairing"
    )


def test_columns_under_a_block_without_a_bound_are_refused() -> None:
    unbounded = OMENativeStatusConfig.model_validate({"instanceStatusEncoding": "DenseV1"})
    with pytest.raises(RepairRefused) as caught:
        plan_repair(damaged_object(), rows=ROWS, block=unbounded)
    assert str(caught.value).startswith(
        "InferenceReplica serving/example-engine fails with cardinality_limit (no bound on "
    )


def test_more_replacement_rows_than_the_bound_is_refused() -> None:
    with pytest.raises(RepairRefused) as caught:
        plan_repair(damaged_object(), rows=[row(index) for index in range(9)], block=COLUMNAR)
    assert str(caught.value) == (
        "the replacement has 9 rows, more than maxDecodedInstances 8 (cardinality_limit): "
        "raise the bound instead"
    )


# -- through the CLI: a bad replacement exits 2 before any cluster is read --------------------


async def test_a_bad_replacement_exits_2(tmp_path: Path) -> None:
    inventory = tmp_path / "fleet.yaml"
    inventory.write_text(yaml.safe_dump(copy.deepcopy(GOOD)))
    rows = tmp_path / "rows.yaml"
    rows.write_text(yaml.safe_dump({"instanceStatuses": [row(0)], "note": "x"}))
    out, err = io.StringIO(), io.StringIO()
    argv = [
        "repair", "--inventory", str(inventory), "--cluster", "prod-east",
        "--namespace", "serving", "--name", "example-engine", "--replacement", str(rows),
    ]  # fmt: skip
    code = await run(argv, out=out, err=err)
    assert (code, out.getvalue()) == (2, "")
    assert (
        err.getvalue()
        == f"error: replacement {rows} must hold only instanceStatuses; remove note\n"
    )


async def test_an_unknown_cluster_exits_2(tmp_path: Path) -> None:
    inventory = tmp_path / "fleet.yaml"
    inventory.write_text(yaml.safe_dump(copy.deepcopy(GOOD)))
    rows = tmp_path / "rows.yaml"
    rows.write_text(yaml.safe_dump({"instanceStatuses": [row(0)]}))
    out, err = io.StringIO(), io.StringIO()
    argv = [
        "repair", "--inventory", str(inventory), "--cluster", "prod-north",
        "--namespace", "serving", "--name", "example-engine", "--replacement", str(rows),
    ]  # fmt: skip
    assert await run(argv, out=out, err=err) == 2
    assert err.getvalue() == (
        "error: the inventory has no cluster prod-north (it has prod-east, prod-west)\n"
    )
