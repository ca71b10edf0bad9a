"""The audit ledger's document: upstream's row shape and omitempty rules, rows kept as read,
a row written twice kept once, the retention rule, the owner reference."""

from __future__ import annotations

import datetime as dt
import json

import pytest

from omed.controllers.ledger import document as ledger

NOW = dt.datetime(2026, 9, 14, 20, 0, 0, tzinfo=dt.UTC)
OWNER = ledger.Owner(name="chat", uid="isvc-uid")


def entry(uuid: str, phase: str = ledger.PHASE_COMPLETED) -> ledger.LedgerEntry:
    return ledger.LedgerEntry(
        request_uuid=uuid, component="engine", source_instance=0, phase=phase, started_at=NOW
    )


def test_a_force_delete_row_is_upstreams_shape_in_gos_order() -> None:
    row = ledger.own_entry(
        ledger.REASON_FORCE_DELETE,
        key="pod-uid",
        component="engine",
        index=0,
        node="n1",
        revision="chat-engine-1a2b3c4d",
        now=NOW,
    )
    text = ledger.render([row.to_json()])
    assert text == (
        '{"entries":[{"requestUUID":"pod-uid","component":"engine","sourceInstance":0,'
        '"phase":"Completed","reason":"ForceDelete","fromNode":"n1",'
        '"revision":"chat-engine-1a2b3c4d","startedAt":"2026-09-14T20:00:00Z",'
        '"completedAt":"2026-09-14T20:00:00Z","outcome":"force-delete-unreachable"}]}'
    )


def test_omitempty_leaves_a_surge_at_zero_out_and_strings_are_html_safe() -> None:
    row = ledger.LedgerEntry(
        request_uuid="u<>&",
        component="engine",
        source_instance=3,
        surge_instance=0,
        phase=ledger.PHASE_STARTED,
        started_at=NOW,
    ).to_json()
    assert "surgeInstance" not in row and "completedAt" not in row and "released" not in row
    assert '"u\\u003c\\u003e\\u0026"' in ledger.render([row])


def test_foreign_fields_survive_and_a_rewrite_replaces_its_own_row() -> None:
    foreign = {"requestUUID": "m1", "phase": "Started", "component": "engine", "newField": [1]}
    rows = ledger.with_entry([foreign], entry("a"))
    assert rows is not None and rows[0] is foreign
    assert ledger.with_entry(rows, entry("a")) is None  # already there as it is
    moved = ledger.with_entry(rows, entry("a", ledger.PHASE_FAILED))
    assert moved is not None and [r["phase"] for r in moved] == ["Started", "Failed"]


def test_every_started_row_and_the_last_200_terminal_rows_are_kept() -> None:
    rows = [entry("s0", ledger.PHASE_STARTED).to_json()]
    rows += [entry(f"t{i}").to_json() for i in range(250)]
    rows.append(entry("s1", ledger.PHASE_STARTED).to_json())
    kept = ledger.retained(rows)
    assert [r["requestUUID"] for r in kept if r["phase"] == "Started"] == ["s0", "s1"]
    terminal = [r["requestUUID"] for r in kept if r["phase"] != "Started"]
    assert terminal == [f"t{i}" for i in range(50, 250)]


def test_an_unreadable_document_is_refused_and_an_empty_one_is_none() -> None:
    assert ledger.read_entries({}) == [] and ledger.read_entries({"history.json": "{}"}) == []
    with pytest.raises(ledger.LedgerUnreadable):
        ledger.read_entries({"history.json": "not json"})
    with pytest.raises(ledger.LedgerUnreadable):
        ledger.read_entries({"history.json": json.dumps({"entries": "x"})})


def test_the_configmap_is_owned_by_the_service_and_a_foreign_controller_is_replaced() -> None:
    body = ledger.configmap_body(namespace="prod", owner=OWNER, rows=[])
    meta = body["metadata"]
    assert meta["name"] == "chat-ome-migration-audit"
    assert meta["labels"] == {"ome.io/managed-by": "OMENative"}
    (ref,) = meta["ownerReferences"]
    assert (ref["kind"], ref["uid"], ref["controller"]) == ("InferenceService", "isvc-uid", True)
    stale = {
        "metadata": {
            "name": "chat-ome-migration-audit",
            "resourceVersion": "7",
            "ownerReferences": [
                {"kind": "InferenceService", "name": "chat", "uid": "old", "controller": True},
                {"kind": "Thing", "name": "x", "uid": "keep"},
            ],
        },
        "data": {},
    }
    updated = ledger.updated_configmap(stale, owner=OWNER, rows=[])
    assert [r["uid"] for r in updated["metadata"]["ownerReferences"]] == ["keep", "isvc-uid"]
    assert updated["metadata"]["resourceVersion"] == "7"
