"""What ``kubectl ome instance list`` costs on the largest replicas it reads; print JSON.

    .venv/bin/python bench/kubectl_ome.py [--rows 20000] [--repeat 5]

The plugin reads ColumnarV2 InferenceReplicas of up to 20,000 rows. This bench
builds an InferenceService with an engine of ``--rows`` Instances (stored as ColumnarV2, as
the manager stores them, and as a DenseV1 list), a decoder of 64 and a router of 4, and
times, in this process and with no cluster, the work the plugin does after its reads: sorting
the replicas into components and decoding their status (:func:`omed.cli.instances.collect`),
then the table and the ``-o json`` report. The reads themselves are the API server's (one GET
and one paged LIST) and are not counted. Median of ``--repeat`` runs, CPU time.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from typing import Any

import orjson

from omed.cli.instances import collect, list_report, list_rows, render_table
from omed.statuscodec import encode_columnar

UID = "5f0c8a52-3b1e-4c8d-9f27-6a1d0e4b7c93"


def rows(count: int, component: str) -> list[dict[str, Any]]:
    revision = f"chat-{component}-2f32f6fe"
    out = []
    for index in range(count):
        row: dict[str, Any] = {
            "index": index,
            "incarnation": 1 + index % 3,
            "phase": "Ready",
            "runningRevision": revision,
            "targetRevision": revision,
            "podCount": 1,
            "servingPodCount": 1,
            "availablePodCount": 1,
            "admitted": True,
            "readySince": "2026-09-14T20:52:31Z",
        }
        if index % 97 == 0:
            row["phase"] = "Updating"
            row["targetRevision"] = f"chat-{component}-7f9c4d2b"
            row["operation"] = {"id": f"op-{index}", "type": "Update", "step": "Surge"}
        out.append(row)
    return out


def replica(component: str, count: int, *, columnar: bool) -> dict[str, Any]:
    status: dict[str, Any] = {"observedGeneration": 3, "replicas": count}
    data = rows(count, component)
    if columnar:
        status["instanceStatusEncoding"] = "ColumnarV2"
        status["instanceStatusColumns"] = encode_columnar(data)
    else:
        status["instanceStatuses"] = data
    return {
        "metadata": {
            "name": f"chat-{component}",
            "namespace": "prod",
            "generation": 3,
            "labels": {"ome.io/inferenceservice": "chat"},
            "ownerReferences": [
                {
                    "apiVersion": "ome.io/v1beta1",
                    "kind": "InferenceService",
                    "name": "chat",
                    "uid": UID,
                    "controller": True,
                }
            ],
        },
        "spec": {"component": component, "parentRef": {"name": "chat"}},
        "status": status,
    }


def measure(replicas: list[dict[str, Any]], repeat: int) -> dict[str, float]:
    isvc = {"metadata": {"name": "chat", "namespace": "prod", "uid": UID, "generation": 1}}
    collect_ms, table_ms, json_ms = [], [], []
    for _ in range(repeat):
        started = time.process_time()
        collection = collect(isvc, replicas)
        decoded = time.process_time()
        text = render_table(list_rows(collection))
        tabled = time.process_time()
        orjson.dumps(list_report(collection), option=orjson.OPT_INDENT_2)
        done = time.process_time()
        collect_ms.append((decoded - started) * 1000)
        table_ms.append((tabled - decoded) * 1000)
        json_ms.append((done - tabled) * 1000)
    assert text.count("\n") == sum(r["status"]["replicas"] for r in replicas) + 1
    return {
        "collect_and_decode_ms": round(statistics.median(collect_ms), 1),
        "table_ms": round(statistics.median(table_ms), 1),
        "json_report_ms": round(statistics.median(json_ms), 1),
        "list_table_total_ms": round(
            statistics.median(collect_ms) + statistics.median(table_ms), 1
        ),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=20000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    results = {}
    for name, columnar in (("ColumnarV2", True), ("DenseV1", False)):
        replicas = [
            replica("engine", args.rows, columnar=columnar),
            replica("decoder", 64, columnar=columnar),
            replica("router", 4, columnar=columnar),
        ]
        body = sum(len(orjson.dumps(r)) for r in replicas)
        results[name] = {"replica_bytes": body, **measure(replicas, args.repeat)}
    print(
        json.dumps(
            {
                "benchmark": "kubectl ome instance list after its reads",
                "command": " ".join(["bench/kubectl_ome.py", *sys.argv[1:]]),
                "python": platform.python_version(),
                "instances": args.rows + 68,
                "repeat": args.repeat,
                **results,
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
