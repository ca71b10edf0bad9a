"""Size and speed of the Instance status encodings for a 20,000-Instance component.

Prints one JSON document: for each fleet, the bytes of the rows as a DenseV1 list (compact
JSON), as ColumnarV2 columns, and as zlib -9 of the list (for reference only: the API server
stores JSON, not zlib), and the median encode and decode milliseconds over several runs (wall
clock, and CPU time of the process), with a calibration figure to compare machines and the
load average while it ran.

``encode_ms`` and ``decode_ms`` are the code path the manager runs: ``encode_columnar`` (what
``choose_encoding`` does for a ColumnarV2 write) and ``decode_columnar`` with its defaults
(nested values shared within a class, what ``decode_status`` returns to the controller).
Also measured: ``decode_status`` of the stored status (the controller's call, which adds the
index check), the opt-out ``share_nested=False`` (fresh nested values per row), and encoding
the decoded rows again (the controller checks a decoded list that way).

The garbage collector is set up as in the manager process, which freezes what startup made
(``gc.collect(); gc.freeze()`` in :func:`omed.manager.process.run`) before it runs:
``--gc manager``, the default. ``--gc plain`` measures a process that froze nothing (the CLI,
tests). The codec itself never touches the collector.

The fleets (rows sorted by index, as the controller writes them):

* ``steady``: the steady fleet the size goals are set on, every Instance Ready on one
  revision; 95% in incarnation 1, the rest replaced once or twice at random places;
  readySince from 200 creation batches (100 Instances each, about 30 s apart) or from one of
  50 repair moments for the replaced ones. A row holds index, incarnation, phase, both
  revisions, the three pod counts, admitted, readySince and activeOrdinal: 5,068,891 bytes
  as a list and 64,394 for zlib -9 of it (the goals assume about 5.1 MB and about 65 KB).
* ``mid_rollout``: a SurgeThenDrain rollout from revision A to B over the index range; 40% on
  B (new incarnation, readySince from waves of 250), 5% Updating with an operation (id, step,
  times per wave, surge index, a few waiting on Unschedulable), the rest still on A as in
  ``steady``.
* ``worst_case``: every row differs: its own incarnation, times, revision, counts, failure
  and operation.
* ``steady_omed_rows``: ``steady`` with the one ``Ready`` condition that every row omed's
  controller writes carries (type, status, lastTransitionTime, reason, message; see
  :func:`omed.controllers.inferencereplica.core.rows.build_row`), each row passed through the
  ``InstanceStatus`` model as the controller serializes it: what omed itself stores.
* ``steady_two_conditions``: ``steady`` with two conditions per row (Ready since readySince,
  Admitted since the creation a little earlier, both with observedGeneration): the fleet of
  this bench before the fourth session, kept so its figures compare with earlier ones.

Run: ``.venv/bin/python bench/statuscodec.py [--rows N] [--runs K] [--fleet NAME ...]
[--gc manager|plain]``.
"""

from __future__ import annotations

import argparse
import gc
import os
import random
import statistics
import sys
import time
import zlib
from collections.abc import Callable
from typing import Any

import orjson

from omed.api.inferencereplica import InstanceStatus
from omed.controllers.inferencereplica.core import names
from omed.statuscodec import decode_columnar, decode_status, encode_columnar, encoded_size
from omed.statuscodec.timestamps import parse, render

T0 = 1_789_000_000  # 2026-09-10
REV_A = "chat-engine-2f32f6fe"
REV_B = "chat-engine-7f9c4d2b"
GENERATION = 14


def _two_conditions(*, ready_at: int) -> list[dict[str, Any]]:
    return [
        {
            "type": "Ready",
            "status": "True",
            "observedGeneration": GENERATION,
            "lastTransitionTime": render(ready_at),
            "reason": "InstanceReady",
            "message": "",
        },
        {
            "type": "Admitted",
            "status": "True",
            "observedGeneration": GENERATION,
            "lastTransitionTime": render(ready_at - 95),
            "reason": "Admitted",
            "message": "",
        },
    ]


def _ready_row(index: int, *, incarnation: int, revision: str, ready_at: int) -> dict[str, Any]:
    return {
        "index": index,
        "incarnation": incarnation,
        "phase": "Ready",
        "runningRevision": revision,
        "targetRevision": revision,
        "podCount": 1,
        "servingPodCount": 1,
        "availablePodCount": 1,
        "admitted": True,
        "readySince": render(ready_at),
        "activeOrdinal": 0,
    }


def steady(rows: int, *, seed: int = 1, revision: str = REV_A) -> list[dict[str, Any]]:
    rnd = random.Random(seed)
    batch_size = max(1, rows // 200)
    batch_times = []
    moment = T0
    for _ in range(rows // batch_size + 1):
        batch_times.append(moment + 95)
        moment += 30 + rnd.randint(0, 4)
    repairs = sorted(T0 + 86_400 + rnd.randint(0, 5 * 86_400) for _ in range(50))
    out = []
    for index in range(rows):
        if rnd.random() < 0.05:
            incarnation = 2 if rnd.random() < 0.9 else 3
            ready_at = rnd.choice(repairs)
        else:
            incarnation, ready_at = 1, batch_times[index // batch_size]
        out.append(_ready_row(index, incarnation=incarnation, revision=revision, ready_at=ready_at))
    return out


def mid_rollout(rows: int, *, seed: int = 2) -> list[dict[str, Any]]:
    rnd = random.Random(seed)
    out = steady(rows, seed=seed)
    updated = int(rows * 0.40)
    updating = int(rows * 0.05)
    rollout_start = T0 + 7 * 86_400
    for index in range(updated):
        wave = index // 250
        old = out[index]
        out[index] = _ready_row(
            index,
            incarnation=old["incarnation"] + 1,
            revision=REV_B,
            ready_at=rollout_start + wave * 420 + 180,
        )
    first_wave = updated // 250
    for k, index in enumerate(range(updated, updated + updating)):
        wave = first_wave + k // 250
        started = rollout_start + wave * 420
        row = out[index]
        row["phase"] = "Updating"
        row["targetRevision"] = REV_B
        step = ("Draining", "SurgeReady", "SurgeCreated", "SurgeCreated")[k // 250 % 4]
        operation: dict[str, Any] = {
            "id": f"update-{index}-{row['incarnation'] + 1}",
            "type": "Update",
            "step": step,
            "startedAt": render(started),
            "lastProgressAt": render(started + 5 + (k % 250) // 25 * 7),
            "deadline": render(started + 1800),
            "retryCount": 0,
            "targetRevision": REV_B,
            "reason": "RevisionChanged",
            "surgeIndex": rows + k,
        }
        if rnd.random() < 0.02:
            operation["waiting"] = "Unschedulable"
        row["operation"] = operation
    return out


def steady_omed_rows(rows: int) -> list[dict[str, Any]]:
    out = []
    for row in steady(rows):
        condition = {
            "type": names.CONDITION_READY,
            "status": "True",
            "lastTransitionTime": row["readySince"],
            "reason": names.INSTANCE_READY,
            "message": "every pod of the Instance is Ready",
        }
        out.append(InstanceStatus.model_validate({**row, "conditions": [condition]}).to_dict())
    return out


def steady_two_conditions(rows: int) -> list[dict[str, Any]]:
    out = []
    for row in steady(rows):
        epoch = parse(row["readySince"])
        assert epoch is not None
        head = {
            key: value for key, value in row.items() if key not in ("readySince", "activeOrdinal")
        }
        out.append(
            {
                **head,
                "conditions": _two_conditions(ready_at=epoch),
                "readySince": row["readySince"],
                "activeOrdinal": row["activeOrdinal"],
            }
        )
    return out


def worst_case(rows: int, *, seed: int = 3) -> list[dict[str, Any]]:
    rnd = random.Random(seed)
    phases = ["Pending", "Creating", "Ready", "Updating", "Restarting", "Failed"]
    out = []
    for index in range(rows):
        moment = T0 + index * 7 + rnd.randint(0, 6)
        revision = f"chat-engine-{rnd.getrandbits(32):08x}"
        row = _ready_row(index, incarnation=rnd.randint(1, 99), revision=revision, ready_at=moment)
        row["phase"] = rnd.choice(phases)
        row["targetRevision"] = f"chat-engine-{rnd.getrandbits(32):08x}"
        row["podCount"] = rnd.randint(1, 16)
        row["servingPodCount"] = rnd.randint(0, row["podCount"])
        row["lastFailure"] = {
            "pod": f"chat-engine-{index}-default-{rnd.randint(0, 9)}",
            "container": "ome-container",
            "reason": rnd.choice(["Error", "OOMKilled", "CrashLoopBackOff"]),
            "exitCode": rnd.randint(1, 255),
            "time": render(moment - rnd.randint(1, 10_000)),
        }
        row["operation"] = {
            "id": f"op-{rnd.getrandbits(64):016x}",
            "type": "Restart",
            "startedAt": render(moment + 10),
            "deadline": render(moment + 1810 + rnd.randint(0, 99)),
            "retryCount": rnd.randint(0, 5),
            "surgeIndex": rows + rnd.randint(0, 10 * rows),
        }
        out.append(row)
    return out


def _median_ms(action: Callable[[], object], *, runs: int) -> tuple[float, float]:
    """Median wall-clock and CPU milliseconds of ``action`` (CPU time shows what a busy
    machine's scheduler adds to the wall clock)."""
    wall, cpu = [], []
    for _ in range(runs):
        gc.collect()
        started, started_cpu = time.perf_counter(), time.process_time()
        result = action()
        wall.append((time.perf_counter() - started) * 1000)
        cpu.append((time.process_time() - started_cpu) * 1000)
        del result  # freeing 20,000 rows is not part of decoding them
    return round(statistics.median(wall), 1), round(statistics.median(cpu), 1)


def calibration_ms() -> float:
    """Milliseconds of a fixed pure-Python loop (10 million iterations; about 150 ms on a
    typical 2024 laptop with CPython 3.11), to compare machines."""
    samples = []
    for _ in range(3):
        started = time.perf_counter()
        for _ in range(10_000_000):
            pass
        samples.append((time.perf_counter() - started) * 1000)
    return round(min(samples), 1)


def _load_average() -> list[float]:
    """1, 5 and 15 minute load averages (as ``uptime`` prints them): on a shared machine the
    wall-clock figures are only comparable with the load they were measured under."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return []


def measure(rows: list[dict[str, Any]], *, runs: int) -> dict[str, Any]:
    dense = orjson.dumps(rows)
    columns = encode_columnar(rows)
    decoded = decode_columnar(columns, max_rows=len(rows))
    if orjson.dumps(decoded, option=orjson.OPT_SORT_KEYS) != orjson.dumps(
        rows, option=orjson.OPT_SORT_KEYS
    ):
        raise SystemExit("round trip failed")
    status = {"instanceStatusEncoding": "ColumnarV2", "instanceStatusColumns": columns}
    encode_ms, encode_cpu_ms = _median_ms(lambda: encode_columnar(rows), runs=runs)
    decode_ms, decode_cpu_ms = _median_ms(
        lambda: decode_columnar(columns, max_rows=len(rows)), runs=runs
    )
    status_ms, _ = _median_ms(lambda: decode_status(status, max_rows=len(rows)), runs=runs)
    fresh_ms, _ = _median_ms(
        lambda: decode_columnar(columns, max_rows=len(rows), share_nested=False), runs=runs
    )
    # The manager's steady state: rows it decoded (nested values shared) checked again.
    reencode_ms, _ = _median_ms(lambda: encode_columnar(decoded), runs=runs)
    return {
        "dense_v1_bytes": len(dense),
        "columnar_v2_bytes": encoded_size(columns),
        "zlib9_dense_v1_bytes": len(zlib.compress(dense, 9)),
        "ratio_dense_to_columnar": round(len(dense) / encoded_size(columns), 1),
        "class_count": columns["classCount"],
        "encode_ms": encode_ms,
        "decode_ms": decode_ms,
        "encode_plus_decode_ms": round(encode_ms + decode_ms, 1),
        "encode_cpu_ms": encode_cpu_ms,
        "decode_cpu_ms": decode_cpu_ms,
        "decode_status_ms": status_ms,
        "decode_fresh_nested_ms": fresh_ms,
        "encode_of_decoded_rows_ms": reencode_ms,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=20_000)
    parser.add_argument("--runs", type=int, default=7)
    fleets = {
        "steady": steady,
        "mid_rollout": mid_rollout,
        "worst_case": worst_case,
        "steady_omed_rows": steady_omed_rows,
        "steady_two_conditions": steady_two_conditions,
    }
    parser.add_argument("--fleet", action="append", choices=sorted(fleets), dest="only")
    parser.add_argument("--gc", choices=["manager", "plain"], default="manager")
    args = parser.parse_args(argv)
    if args.gc == "manager":
        gc.collect()
        gc.freeze()
    if args.only:
        fleets = {name: make for name, make in fleets.items() if name in args.only}
    report: dict[str, Any] = {
        "rows": args.rows,
        "runs": args.runs,
        "python": sys.version.split()[0],
        "gc": args.gc,
        "calibration_loop_ms": calibration_ms(),
        "load_average_before": _load_average(),
        "fleets": {name: measure(make(args.rows), runs=args.runs) for name, make in fleets.items()},
    }
    report["load_average_after"] = _load_average()
    report["calibration_loop_after_ms"] = calibration_ms()
    print(orjson.dumps(report, option=orjson.OPT_INDENT_2).decode())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
