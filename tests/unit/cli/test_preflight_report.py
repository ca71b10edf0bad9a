"""The fleet report: every line, the JSON twin, the result line and the exit code."""

from __future__ import annotations

import copy
import io
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from omed.cli.preflight import run
from omed.cli.preflight_checks import ClusterReport, DecodeFailure, Problem, ReplicaTally
from omed.cli.preflight_inventory import parse_inventory
from omed.cli.preflight_report import exit_code, json_report, result_line, text_report

from .test_preflight_inventory import GOOD

INVENTORY = parse_inventory(copy.deepcopy(GOOD))


def tally(
    *, dense: int, columnar: int, largest: int, failures: tuple[DecodeFailure, ...] = ()
) -> ReplicaTally:
    return ReplicaTally(
        max_rows=20000,
        total=dense + columnar,
        dense_v1=dense,
        columnar_v2=columnar,
        largest_columnar_v2_rows=largest,
        failures=list(failures),
    )


GO_EAST = ClusterReport(
    name="prod-east", problems=(), replicas=tally(dense=120, columnar=3, largest=2048)
)
DAMAGED = DecodeFailure(
    namespace="serving",
    name="example-engine",
    reason="coverage",
    detail="index holds 11 values for 12 entries: some are missing",
)
NO_GO_WEST = ClusterReport(
    name="prod-west",
    problems=(
        Problem(
            "config_block",
            "configmap ome/inferenceservice-config sets omenativeStatus "
            '{"instanceStatusEncoding":"ColumnarV2","maxDecodedInstances":20000}, the inventory '
            'wants {"instanceStatusEncoding":"DenseV1","maxDecodedInstances":20000}',
        ),
        DAMAGED.problem,
    ),
    replicas=tally(dense=0, columnar=2, largest=12, failures=(DAMAGED,)),
)
UNREACHABLE = ClusterReport(
    name="prod-north",
    problems=(Problem("unreachable", "cannot reach https://10.0.0.1:6443: Connection refused"),),
    replicas=None,
)


def test_result_lines() -> None:
    assert result_line([GO_EAST, GO_EAST]) == "result: GO (2 clusters)"
    assert result_line([GO_EAST]) == "result: GO (1 cluster)"
    assert result_line([GO_EAST, NO_GO_WEST]) == "result: NO-GO (1 of 2 clusters)"
    assert result_line([UNREACHABLE]) == "result: NO-GO (1 of 1 cluster)"
    assert result_line([UNREACHABLE, NO_GO_WEST, GO_EAST]) == "result: NO-GO (2 of 3 clusters)"


def test_exit_codes() -> None:
    assert exit_code([GO_EAST, GO_EAST]) == 0
    assert exit_code([GO_EAST, UNREACHABLE]) == 1


def test_the_text_report() -> None:
    assert text_report(INVENTORY, [GO_EAST, NO_GO_WEST, UNREACHABLE]).splitlines() == [
        "ome-status-preflight: 2 clusters, manager image ome/ome-manager:v1.3.0, omenativeStatus "
        '{"instanceStatusEncoding":"DenseV1","maxDecodedInstances":20000}',
        "prod-east: GO",
        "  InferenceReplicas: 123 (DenseV1 120, ColumnarV2 3)",
        "  largestColumnarV2Rows: 2048",
        "  decode failures: 0",
        "prod-west: NO-GO",
        "  InferenceReplicas: 2 (DenseV1 0, ColumnarV2 2)",
        "  largestColumnarV2Rows: 12",
        "  decode failures: 1",
        "  - config_block: configmap ome/inferenceservice-config sets omenativeStatus "
        '{"instanceStatusEncoding":"ColumnarV2","maxDecodedInstances":20000}, the inventory '
        'wants {"instanceStatusEncoding":"DenseV1","maxDecodedInstances":20000}',
        "  - coverage: serving/example-engine: index holds 11 values for 12 entries: some are "
        "missing",
        "prod-north: NO-GO",
        "  InferenceReplicas: not listed",
        "  - unreachable: cannot reach https://10.0.0.1:6443: Connection refused",
        "result: NO-GO (2 of 3 clusters)",
    ]


def test_the_json_report_says_the_same() -> None:
    document = json.loads(json_report(INVENTORY, [GO_EAST, NO_GO_WEST, UNREACHABLE]))
    assert document["result"] == "NO-GO"
    assert document["summary"] == "NO-GO (2 of 3 clusters)"
    assert document["managerImage"] == "ome/ome-manager:v1.3.0"
    assert document["omenativeStatus"] == {
        "instanceStatusEncoding": "DenseV1",
        "maxDecodedInstances": 20000,
    }
    east, west, north = document["clusters"]
    assert east == {
        "name": "prod-east",
        "verdict": "GO",
        "problems": [],
        "inferenceReplicas": {
            "total": 123,
            "byEncoding": {"DenseV1": 120, "ColumnarV2": 3},
            "largestColumnarV2Rows": 2048,
            "decodeFailures": [],
        },
    }
    assert [p["reason"] for p in west["problems"]] == ["config_block", "coverage"]
    assert west["inferenceReplicas"]["decodeFailures"] == [
        {
            "namespace": "serving",
            "name": "example-engine",
            "reason": "coverage",
            "detail": "index holds 11 values for 12 entries: some are missing",
        }
    ]
    assert north == {
        "name": "prod-north",
        "verdict": "NO-GO",
        "problems": [
            {
                "reason": "unreachable",
                "detail": "cannot reach https://10.0.0.1:6443: Connection refused",
            }
        ],
        "inferenceReplicas": None,
    }


def test_an_all_go_json_report() -> None:
    document = json.loads(json_report(INVENTORY, [GO_EAST]))
    assert (document["result"], document["summary"]) == ("GO", "GO (1 cluster)")


# -- flags -------------------------------------------------------------------------------------


async def invoke(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = await run(list(argv), out=out, err=err)
    return code, out.getvalue(), err.getvalue()


@pytest.mark.parametrize(
    ("argv", "first_line"),
    [
        ((), "error: the following arguments are required: --inventory"),
        (("--inventory",), "error: argument --inventory: expected one argument"),
        (("--inventory", "f.yaml", "--apply"), "error: unrecognized arguments: --apply"),
        (("--inv", "f.yaml"), "error: the following arguments are required: --inventory"),
        (("--inventory", "f.yaml", "--timeout", "0"), "error: argument --timeout: --timeout must "
         "be a positive number, got 0"),
        (("repair", "--inventory", "f.yaml"), "error: the following arguments are required: "
         "--cluster, --namespace, --name, --replacement"),
        (("check", "--inventory", "f.yaml"), "error: unrecognized arguments: check"),
    ],
)  # fmt: skip
async def test_bad_flags_exit_2_with_the_usage(argv: tuple[str, ...], first_line: str) -> None:
    code, out, err = await invoke(*argv)
    assert (code, out) == (2, "")
    lines = err.splitlines()
    assert lines[0] == first_line
    assert lines[1].startswith("usage: ome-status-preflight")


async def test_help_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, _ = await invoke("--help")
    assert code == 0
    assert "--inventory INVENTORY" in capsys.readouterr().out
    code, _, _ = await invoke("repair", "--help")
    assert code == 0
    assert "--replacement REPLACEMENT" in capsys.readouterr().out


async def test_an_unreachable_fleet_is_no_go_not_a_crash(tmp_path: Path) -> None:
    document: dict[str, Any] = copy.deepcopy(GOOD)
    for cluster in document["clusters"]:
        cluster["kubeconfig"] = str(tmp_path / cluster["name"])  # none of these exist
    inventory = tmp_path / "fleet.yaml"
    inventory.write_text(yaml.safe_dump(document))
    code, out, err = await invoke("--inventory", str(inventory), "--json")
    assert (code, err) == (1, "")
    report = json.loads(out)
    assert report["summary"] == "NO-GO (2 of 2 clusters)"
    assert [c["problems"][0]["reason"] for c in report["clusters"]] == ["kubeconfig"] * 2
