"""omed's revision hash is upstream OME's: checked against Go's own bytes.

``tests/golden/revisionhash`` is a Go program that takes the templates of ``cases.json``,
decodes them into the typed Kubernetes structs and computes upstream's payload and hash with
Go's ``encoding/json``, independently of omed; ``expected.json`` is its checked-in output. These
tests compare omed's payload bytes and hash with it, and, where Go is installed, run the program
again and compare with a fresh output (so the checked-in file can't drift from the program).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from go_golden import GO, go_output, needs_go

from omed.api.gojson import GoJsonError, _quantity
from omed.api.revision import payload_hash, revision_payload

GOLDEN = Path(__file__).parents[2] / "golden" / "revisionhash"
CASES: dict[str, Any] = json.loads((GOLDEN / "cases.json").read_text())
EXPECTED: dict[str, Any] = json.loads((GOLDEN / "expected.json").read_text())


def _omed(case: dict[str, Any]) -> tuple[str, str]:
    payload = revision_payload(
        pod_spec=case.get("podSpec"),
        pod_meta=case.get("podMeta"),
        worker_pod_spec=case.get("workerPodSpec"),
        topology_key=case.get("topologyKey"),
        pairing_protocol=case.get("pairingProtocol"),
    )
    digest = payload_hash(
        payload, collision_count=case["collisionCount"], owner_uid=case["ownerUID"]
    )
    return payload.decode(), digest


@pytest.mark.parametrize("case", CASES["cases"], ids=[c["name"] for c in CASES["cases"]])
def test_payload_and_hash_match_go(case: dict[str, Any]) -> None:
    expected = {c["name"]: c for c in EXPECTED["cases"]}[case["name"]]
    payload, digest = _omed(case)
    assert payload == expected["payload"]
    assert digest == expected["hash"]


def test_every_case_has_an_expected_value() -> None:
    assert [c["name"] for c in CASES["cases"]] == [c["name"] for c in EXPECTED["cases"]]


@pytest.mark.parametrize("text", CASES["quantities"])
def test_quantities_match_go(text: str) -> None:
    expected = EXPECTED["quantities"][text]
    try:
        got = '"' + _quantity(json.loads(text), "").marshal() + '"'
    except GoJsonError:
        got = "error"
    assert got == expected


@needs_go
def test_the_checked_in_output_is_what_the_go_program_writes() -> None:
    assert go_output(GOLDEN) == EXPECTED


@pytest.mark.skipif(GO is None, reason="Go is not installed: the checked-in table is used")
def test_the_field_table_is_what_its_generator_writes() -> None:
    env = {**os.environ, "GOFLAGS": "-mod=mod", "GOPROXY": "off", "GOTOOLCHAIN": "local"}
    assert GO is not None
    tool = Path(__file__).parents[3] / "tools" / "gojson-table"
    run = subprocess.run(
        [GO, "run", "."], cwd=tool, capture_output=True, env=env, timeout=600, check=False
    )
    if run.returncode != 0 and b"module lookup disabled" in run.stderr:
        pytest.skip("the Go module cache lacks k8s.io/api v0.36.3")
    assert run.returncode == 0, run.stderr.decode()
    table = Path(__file__).parents[3] / "omed" / "api" / "gojson" / "k8s_types.json"
    assert json.loads(run.stdout) == json.loads(table.read_text())
