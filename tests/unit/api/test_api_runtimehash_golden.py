"""omed's runtime revision names are upstream OME's: checked against Go's own bytes.

``tests/golden/runtimehash`` is a Go program that decodes the specs of ``cases.json`` into a
transcription of upstream's typed ``ServingRuntimeSpec`` and computes the bytes, hash and name
with Go's ``encoding/json``, independently of omed; ``expected.json`` is its checked-in output.
Where Go is installed the program runs again, so the checked-in file can't drift from it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from go_golden import go_output, needs_go

from omed.api.runtimehash import content_hash, go_bytes, legacy_content_hash
from omed.controllers.runtimerevision.core.model import Source
from omed.controllers.runtimerevision.core.snapshot import revision_name

GOLDEN = Path(__file__).parents[2] / "golden" / "runtimehash"
CASES: list[dict[str, Any]] = json.loads((GOLDEN / "cases.json").read_text())["cases"]
EXPECTED = {c["name"]: c for c in json.loads((GOLDEN / "expected.json").read_text())["cases"]}


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_bytes_hash_and_name_match_go(case: dict[str, Any]) -> None:
    expected = EXPECTED[case["name"]]
    assert go_bytes(case["spec"]).decode() == expected["bytes"]
    digest = content_hash(case["spec"])
    assert digest == expected["hash"]
    source = Source(case["kind"], case["namespace"], case["runtime"])
    assert revision_name(source, digest) == expected["revision"]


def test_key_order_does_not_change_the_name() -> None:
    assert EXPECTED["sglang-serving-runtime"]["hash"] == EXPECTED["sglang-keys-reordered"]["hash"]


def test_a_spec_go_cannot_decode_keeps_a_pure_name() -> None:
    spec = {"disabled": "yes"}  # Go's json.Unmarshal refuses a string for *bool
    assert content_hash(spec) == legacy_content_hash(spec)
    assert content_hash(spec) == content_hash({"disabled": "yes"})


def test_the_legacy_hash_is_the_canonical_json_one() -> None:
    # The names omed gave before upstream's hash: SHA-256 of sorted, spaceless JSON.
    assert legacy_content_hash({"b": 1, "a": [2]}) == legacy_content_hash({"a": [2], "b": 1})
    assert legacy_content_hash({}) == "44136fa3"  # sha256(b"{}")


def test_every_case_has_an_expected_value() -> None:
    assert [c["name"] for c in CASES] == list(EXPECTED)


@needs_go
def test_the_checked_in_output_is_what_the_go_program_writes() -> None:
    assert go_output(GOLDEN)["cases"] == list(EXPECTED.values())
