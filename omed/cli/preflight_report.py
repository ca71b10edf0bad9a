"""The fleet check's report: text for people, JSON for scripts, and the exit code.

Why one module: the report lines are part of the tool's interface (operators grep
``result: GO (2 clusters)`` and the ``- <reason>: <detail>`` lines),
so every line is built here, from one place, and docs/preflight.md shows each.

Invariants: the text and the JSON report say the same thing (same verdicts, problems, counts,
in inventory order); the last text line is the ``result:`` line; the exit code is
:data:`EXIT_GO` exactly when every cluster is GO.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

import orjson

from omed.cli.preflight_checks import ClusterReport
from omed.cli.preflight_inventory import Inventory, block_json
from omed.statuscodec import COLUMNAR_V2, DENSE_V1

__all__ = [
    "EXIT_GO",
    "EXIT_NO_GO",
    "EXIT_USAGE",
    "exit_code",
    "json_report",
    "result_line",
    "text_report",
]

EXIT_GO: Final = 0
EXIT_NO_GO: Final = 1
EXIT_USAGE: Final = 2
"""A bad flag or a bad inventory (or, for repair, any error other than a refusal)."""

INDENT: Final = "  "


def _clusters(count: int) -> str:
    return f"{count} cluster" if count == 1 else f"{count} clusters"


def result_line(reports: Sequence[ClusterReport]) -> str:
    """``result: GO (2 clusters)`` or ``result: NO-GO (1 of 2 clusters)``."""
    failing = sum(1 for report in reports if not report.go)
    if not failing:
        return f"result: GO ({_clusters(len(reports))})"
    return f"result: NO-GO ({failing} of {_clusters(len(reports))})"


def exit_code(reports: Sequence[ClusterReport]) -> int:
    return EXIT_GO if all(report.go for report in reports) else EXIT_NO_GO


def header_line(inventory: Inventory) -> str:
    return (
        f"ome-status-preflight: {_clusters(len(inventory.clusters))}, manager image "
        f"{inventory.manager_image}, omenativeStatus {block_json(inventory.omenative_status)}"
    )


def cluster_lines(report: ClusterReport) -> list[str]:
    """``<cluster>: GO|NO-GO``, then the counts, then one ``- <reason>: <detail>`` per problem."""
    lines = [f"{report.name}: {report.verdict}"]
    tally = report.replicas
    if tally is None:
        lines.append(f"{INDENT}InferenceReplicas: not listed")
    else:
        lines += [
            f"{INDENT}InferenceReplicas: {tally.total} "
            f"({DENSE_V1} {tally.dense_v1}, {COLUMNAR_V2} {tally.columnar_v2})",
            f"{INDENT}largestColumnarV2Rows: {tally.largest_columnar_v2_rows}",
            f"{INDENT}decode failures: {len(tally.failures)}",
        ]
    lines += [f"{INDENT}- {problem.reason}: {problem.detail}" for problem in report.problems]
    return lines


def text_report(inventory: Inventory, reports: Sequence[ClusterReport]) -> str:
    lines = [header_line(inventory)]
    for report in reports:
        lines += cluster_lines(report)
    lines.append(result_line(reports))
    return "\n".join(lines) + "\n"


def _cluster_json(report: ClusterReport) -> dict[str, Any]:
    tally = report.replicas
    return {
        "name": report.name,
        "verdict": report.verdict,
        "problems": [
            {"reason": problem.reason, "detail": problem.detail} for problem in report.problems
        ],
        "inferenceReplicas": None
        if tally is None
        else {
            "total": tally.total,
            "byEncoding": {DENSE_V1: tally.dense_v1, COLUMNAR_V2: tally.columnar_v2},
            "largestColumnarV2Rows": tally.largest_columnar_v2_rows,
            "decodeFailures": [
                {
                    "namespace": failure.namespace,
                    "name": failure.name,
                    "reason": failure.reason,
                    "detail": failure.detail,
                }
                for failure in tally.failures
            ],
        },
    }


def json_report(inventory: Inventory, reports: Sequence[ClusterReport]) -> str:
    block = inventory.omenative_status
    document = {
        "result": "GO" if all(report.go for report in reports) else "NO-GO",
        "summary": result_line(reports).removeprefix("result: "),
        "managerImage": inventory.manager_image,
        "omenativeStatus": {
            "instanceStatusEncoding": block.instance_status_encoding,
            "maxDecodedInstances": block.max_decoded_instances,
        },
        "clusters": [_cluster_json(report) for report in reports],
    }
    return orjson.dumps(document, option=orjson.OPT_INDENT_2).decode() + "\n"
