"""Row generators and checks shared by the status codec tests."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import orjson
from hypothesis import strategies as st

from omed.statuscodec.rowschema import (
    CONDITION_STATUSES,
    INT64_MAX,
    INT64_MIN,
    OPERATION_TYPES,
    PHASES,
    flatten,
)
from omed.statuscodec.timestamps import MAX_EPOCH, MIN_EPOCH, render

ROOT = Path(__file__).resolve().parents[3]


def bench_module() -> ModuleType:
    """bench/statuscodec.py, whose fleets the size tests reuse."""
    name = "omed_bench_statuscodec"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, ROOT / "bench" / "statuscodec.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


def canonical(value: Any) -> bytes:
    """JSON with sorted keys: equal only when types match too (1 vs true vs 1.0)."""
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)


def assert_valid_rows(rows: Any) -> None:
    """What every decoder result must be: a list of rows that satisfy the row schema."""
    assert type(rows) is list
    for row in rows:
        assert type(row) is dict
        if "index" in row:
            assert type(row["index"]) is int and 0 <= row["index"] <= INT64_MAX
        flatten({k: v for k, v in row.items() if k != "index"}, where="")


# -- Hypothesis strategies -------------------------------------------------------------------

texts = st.text(max_size=8) | st.sampled_from(["", "~", "0", "1-2", "a,b", "Ready", "é"])
times = (
    st.integers(MIN_EPOCH, MAX_EPOCH).map(render)
    | st.integers(1_789_000_000, 1_789_000_100).map(render)
    | st.sampled_from(
        ["2026-09-10T07:06:35.5Z", "2026-09-10T07:06:35+00:00", "2016-12-31T23:59:60Z", "x"]
    )
    | texts
)
uints = st.integers(0, 3) | st.integers(0, INT64_MAX)
int64s = st.integers(-3, 3) | st.integers(INT64_MIN, INT64_MAX)

conditions = st.fixed_dictionaries(
    {},
    optional={
        "type": st.sampled_from(["Ready", "Admitted"]) | texts,
        "status": st.sampled_from(sorted(CONDITION_STATUSES)),
        "observedGeneration": uints,
        "lastTransitionTime": times,
        "reason": texts,
        "message": texts,
    },
)
last_failures = st.fixed_dictionaries(
    {},
    optional={
        "pod": texts,
        "container": texts,
        "reason": texts,
        "exitCode": int64s,
        "time": times,
    },
)
operations = st.fixed_dictionaries(
    {},
    optional={
        "id": texts,
        "type": st.sampled_from(sorted(OPERATION_TYPES)),
        "step": texts,
        "startedAt": times,
        "lastProgressAt": times,
        "deadline": times,
        "retryCount": uints,
        "targetRevision": texts,
        "reason": texts,
        "waiting": texts,
        "surgeIndex": uints,
        "fromNode": texts,
        "hintTargetNodes": st.lists(texts, max_size=4),
        "requestUUID": texts,
    },
)
bodies = st.fixed_dictionaries(
    {},
    optional={
        "incarnation": uints,
        "phase": st.sampled_from(sorted(PHASES)),
        "runningRevision": texts,
        "targetRevision": texts,
        "podCount": uints,
        "servingPodCount": uints,
        "availablePodCount": uints,
        "admitted": st.booleans(),
        "conditions": st.lists(conditions, max_size=3),
        "readySince": times,
        "activeOrdinal": uints,
        "lastFailure": last_failures,
        "operation": operations,
    },
)


@st.composite
def row_lists(draw: st.DrawFn, *, max_rows: int = 30) -> list[dict[str, Any]]:
    """Rows drawn from a small pool of bodies (so classes repeat, in runs and scattered),
    with indexes mostly ascending, sometimes absent, repeated or out of order."""
    pool = draw(st.lists(bodies, min_size=1, max_size=5))
    count = draw(st.integers(0, max_rows))
    picks = draw(
        st.lists(st.integers(0, len(pool) - 1), min_size=count, max_size=count)
        | st.just([0] * count)
    )
    start = draw(st.integers(0, 3) | st.integers(0, INT64_MAX - max_rows))
    odd = draw(st.dictionaries(st.integers(0, max(count - 1, 0)), uints | st.none(), max_size=3))
    rows = []
    for position, pick in enumerate(picks):
        row: dict[str, Any] = {}
        index = odd[position] if position in odd else start + position
        if index is not None:
            row["index"] = index
        row.update(pool[pick])
        rows.append(row)
    return rows


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True)
    | st.text(max_size=6),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=6), children, max_size=4)
    ),
    max_leaves=12,
)
"""Arbitrary JSON (plus NaN and big integers), for the decoders' never-raise property."""
