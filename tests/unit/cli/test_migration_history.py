"""migration history's tables and report from objects as the API server returns them: OME's
table byte for byte, the three sources kept apart, the bounds, and every untrusted audit
document failing closed (its issue, no row of it)."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import pytest

from cli.test_migration_start import ISVC_UID, isvc, replica, row
from omed.cli import migration_history as history
from omed.cli.instances import collect, render_table
from omed.controllers.ledger import document as ledger

UUID = "7c9e6679-7425-40de-944b-e07fc1f90ae7"
OLDER = "3f2a9c1e-0000-4000-8000-000000000001"
NOW = dt.datetime(2026, 9, 28, 11, 0, tzinfo=dt.UTC).timestamp()
AUDIT_NAME = "chat-ome-migration-audit"


def at(hour: int, minute: int, second: int = 0) -> dt.datetime:
    return dt.datetime(2026, 9, 28, hour, minute, second, tzinfo=dt.UTC)


def completed_record(**extra: Any) -> dict[str, Any]:
    return {
        "requestUUID": UUID,
        "trigger": "Manual",
        "sourceInstance": 3,
        "surgeInstance": 4,
        "phase": "Completed",
        "message": "migrated to instance=4",
        "reason": "token=secret-reason",
        "fromNode": "node-a",
        "startedAt": "2026-09-28T10:12:05Z",
        "allocatedAt": "2026-09-28T10:12:06Z",
        "deadline": "2026-09-28T10:42:05Z",
        "completedAt": "2026-09-28T10:31:40Z",
        **extra,
    }


def entry(request: str = UUID, **extra: Any) -> ledger.LedgerEntry:
    fields: dict[str, Any] = {
        "request_uuid": request,
        "component": "engine",
        "source_instance": 3,
        "surge_instance": 4,
        "phase": ledger.PHASE_COMPLETED,
        "reason": "token=secret-reason",
        "from_node": "node-a",
        "started_at": at(10, 12, 4),
        "completed_at": at(10, 31, 40),
        "outcome": "migrated",
    }
    fields.update(extra)
    return ledger.LedgerEntry(**fields)


def page_ledger() -> str:
    """The audit ledger of the product's example, as OME's ledger writes it."""
    rows: list[Any] = []
    for item in (
        entry(
            OLDER,
            phase=ledger.PHASE_STARTED,
            surge_instance=-1,
            completed_at=None,
            outcome=None,
            started_at=at(8, 50),
        ),
        entry(UUID, phase=ledger.PHASE_STARTED, surge_instance=-1, completed_at=None, outcome=None),
        entry(
            OLDER,
            phase=ledger.PHASE_FAILED,
            surge_instance=-1,
            started_at=at(8, 50),
            completed_at=at(9, 20, 4),
            outcome="deadline exceeded in phase SurgePending: surge pods never became ready",
        ),
        entry(UUID),
    ):
        rows = ledger.with_entry(rows, item) or rows
    return ledger.render(rows)


def audit_configmap(text: str, **meta: Any) -> dict[str, Any]:
    return {
        "metadata": {
            "name": AUDIT_NAME,
            "namespace": "prod",
            "labels": {"ome.io/managed-by": "OMENative"},
            "ownerReferences": [ledger.owner_reference(ledger.Owner(name="chat", uid=ISVC_UID))],
            **meta,
        },
        "data": {"history.json": text},
    }


def read(text: str | None = None, availability: str | None = None) -> history.AuditRead:
    if availability is not None:
        return history.AuditRead("prod", AUDIT_NAME, availability)
    return history.audit_read(
        audit_configmap(page_ledger() if text is None else text),
        isvc(),
        namespace="prod",
        name=AUDIT_NAME,
    )


def build(
    *records: dict[str, Any],
    audit: history.AuditRead | None = None,
    replicas: history.ReplicaRead | None = None,
    component: str | None = None,
    parent: Any = None,
    **status: Any,
) -> dict[str, Any]:
    ir = replica([row(i) for i in (0, 1, 2, 4)], migrations=list(records), **status)
    service = isvc()
    if parent is not None:
        service["status"] = {"migrationHistory": parent}
    return history.report(
        collect(service, [ir]),
        replicas=replicas or history.ReplicaRead(history.AVAILABLE, 1, 1),
        audit=read() if audit is None else audit,
        component=component,
        now=NOW,
    )


def table(report: dict[str, Any]) -> str:
    return render_table(history.rows(report))


def test_the_table_is_omes_byte_for_byte() -> None:
    report = build(completed_record())
    assert table(report) == (
        "EVID    REQUEST/COMP   PHASE/STATE   WHEN           DETAIL\n"
        "AUTH    7c9e6679/E     Completed/T   09-28T10:31Z   migrated to insta...\n"
        "AUDIT   7c9e6679/E     Completed/T   09-28T10:31Z   migrated\n"
        "AUDIT   3f2a9c1e/E     Failed/T      09-28T09:20Z   deadline exceeded...\n"
    )
    assert report["kind"] == "MigrationHistoryReport"
    summary = report["content"]["summary"]
    assert (summary["state"], summary["records"], summary["requests"]) == ("Reported", 3, 2)
    assert (summary["authoritative"], summary["audit"], summary["terminalAuthoritative"]) == (
        1,
        2,
        1,
    )
    assert report["warnings"] == []
    assert all(len(line) <= 80 for line in table(report).splitlines())


def test_the_reason_the_raw_document_and_uids_are_never_reported() -> None:
    report = build(completed_record())
    text = json.dumps(report)
    assert "secret-reason" not in text
    assert ISVC_UID not in text
    assert "history.json" not in text
    (auth,) = [r for r in report["content"]["records"] if r["evidence"] == "Authoritative"]
    assert (auth["sourceName"], auth["freshness"], auth["replacementInstance"]) == (
        "chat-engine",
        "Current",
        4,
    )


def test_a_started_row_with_no_surge_yet_and_an_active_record() -> None:
    rows: list[Any] = (
        ledger.with_entry(
            [],
            entry(phase=ledger.PHASE_STARTED, surge_instance=-1, completed_at=None, outcome=None),
        )
        or []
    )
    record = completed_record(
        phase="SurgePending", message="surge allocated; waiting for surge pods"
    )
    del record["completedAt"]
    report = build(record, audit=read(ledger.render(rows)))
    assert table(report) == (
        "EVID    REQUEST/COMP   PHASE/STATE      WHEN           DETAIL\n"
        "AUTH    7c9e6679/E     SurgePending/A   09-28T10:12Z   surge allocated; ...\n"
        "AUDIT   7c9e6679/E     Started/A        09-28T10:12Z   -\n"
    )
    (audit,) = [r for r in report["content"]["records"] if r["evidence"] == "AuditHistory"]
    assert (audit["replacementInstance"], audit["outcome"]) == (None, "InProgress")


@pytest.mark.parametrize(
    ("text", "code", "reason"),
    [
        ("x" * (history.MAX_AUDIT_BYTES + 1), "AuditPayloadTooLarge", "PayloadTooLarge"),
        ("{not json", "AuditMalformed", "MalformedPayload"),
        ('{"entries": {"requestUUID": "a"}}', "AuditMalformed", "MalformedPayload"),
        ('{"entries": ["row"]}', "AuditMalformed", "MalformedPayload"),
        (
            '{"entries": [{"requestUUID": "a", "sourceInstance": "3"}]}',
            "AuditMalformed",
            "MalformedPayload",
        ),
        ('{"entries": [{"requestUUID": 7}]}', "AuditMalformed", "MalformedPayload"),
        ('{"entries": [{"hintTargetNodes": "node-b"}]}', "AuditMalformed", "MalformedPayload"),
        ('{"entries": [{"sourceInstance": 4294967296}]}', "AuditMalformed", "MalformedPayload"),
    ],
)
def test_an_untrusted_document_gives_its_issue_and_no_audit_row(
    text: str, code: str, reason: str
) -> None:
    # A valid row first: a document that fails anywhere yields none of its rows.
    if text.startswith('{"entries": ['):
        good = json.dumps(entry().to_json())
        text = text.replace('{"entries": [', '{"entries": [' + good + ", ", 1)
    report = build(completed_record(), audit=read(text))
    assert table(report) == (
        "EVID     REQUEST/COMP   PHASE/STATE   WHEN           DETAIL\n"
        "AUTH     7c9e6679/E     Completed/T   09-28T10:31Z   migrated to insta...\n"
        f"REPORT   -/-            Partial/?     -              {code}\n"
    )
    audit = report["sources"][2]
    assert (audit["availability"], audit["unavailableReason"]) == ("Unavailable", reason)
    assert report["warnings"] == [{"code": "PartialData"}]
    assert report["content"]["summary"]["state"] == "Partial"


def test_a_ledger_that_is_not_the_services_own_is_never_read() -> None:
    foreign = audit_configmap(page_ledger())
    foreign["metadata"]["ownerReferences"][0]["uid"] = "another-service"
    two = audit_configmap(page_ledger())
    two["metadata"]["ownerReferences"].append({**two["metadata"]["ownerReferences"][0], "uid": "x"})
    for configmap in (foreign, two):
        audit = history.audit_read(configmap, isvc(), namespace="prod", name=AUDIT_NAME)
        assert (audit.availability, audit.text) == (history.INVALID, "")
        report = build(completed_record(), audit=audit)
        assert [r["evidence"] for r in report["content"]["records"]] == ["Authoritative"]
        assert report["content"]["issues"] == [{"code": "AuditIdentityInvalid"}]


def test_a_missing_ledger_is_no_issue_and_a_forbidden_one_is() -> None:
    absent = build(completed_record(), audit=read(availability=history.ABSENT))
    assert absent["content"]["issues"] == []
    assert absent["content"]["summary"]["state"] == "Reported"
    wide = history.wide_rows(absent)
    assert wide[0][:4] == ["EVIDENCE", "AVAILABILITY", "WINDOW", "SOURCE"]
    assert len(wide[0]) == 24 and all(len(line) == 24 for line in wide)
    by_source = {line[3]: line for line in wide[1:]}
    assert by_source[AUDIT_NAME][1] == "Unavailable"
    assert by_source[AUDIT_NAME][-1] == "NotFound"
    assert by_source["chat"][:3] == ["ParentSummary", "Available", "0p/0i/B/C"]
    assert by_source["chat-engine"][:6] == [
        "Authoritative",
        "Available",
        "1p/1i/B/C",
        "chat-engine",
        UUID,
        "engine",
    ]
    forbidden = build(completed_record(), audit=read(availability=history.FORBIDDEN))
    assert forbidden["content"]["issues"] == [{"code": "AuditUnavailable"}]


def test_replicas_that_cannot_be_listed_leave_the_audit_rows() -> None:
    report = build(replicas=history.ReplicaRead(history.FORBIDDEN))
    assert [r["evidence"] for r in report["content"]["records"]] == ["AuditHistory"] * 2
    assert report["content"]["issues"] == [{"code": "AuthoritativeUnavailable"}]
    assert report["sources"][0]["unavailableReason"] == "Forbidden"
    assert table(report).splitlines()[-1].split() == [
        "REPORT",
        "-/-",
        "Partial/?",
        "-",
        "AuthoritativeUnav...",  # codes are cut at 20 columns, as every DETAIL
    ]


def test_bounds_scanned_shown_hints_and_pages() -> None:
    rows = [
        entry(
            f"{i:08d}-0000-4000-8000-000000000000",
            completed_at=at(10, 31, 40) + dt.timedelta(seconds=i),
        ).to_json()
        for i in range(history.MAX_SCANNED + 50)
    ]
    report = build(audit=read(ledger.render(rows)))
    records = report["content"]["records"]
    assert len(records) == history.MAX_RECORDS
    # Newest first: the scan stops at 800 rows, then the 200 newest of them are shown.
    assert records[0]["requestID"].startswith(f"{history.MAX_SCANNED - 1:08d}")
    codes = [i["code"] for i in report["content"]["issues"]]
    assert codes == ["AuditHistoryTruncated", "OutputTruncated"]
    assert report["warnings"] == [{"code": "Truncated"}]
    assert report["sources"][2]["observedItems"] == history.MAX_SCANNED + 50
    assert report["content"]["summary"]["truncated"] is True

    hints = [f"node-{i}" for i in range(12)]
    many = ledger.render([entry(hint_target_nodes=tuple(hints)).to_json()])
    (audit,) = build(audit=read(many))["content"]["records"]
    assert len(audit["targetNodeHints"]) == history.MAX_HINTS
    assert audit["issues"] == ["NodeHintsTruncated"]

    cut = build(completed_record(), replicas=history.ReplicaRead(history.AVAILABLE, 2, 64, True))
    assert {"code": "AuthoritativeTruncated"} in cut["content"]["issues"]
    assert cut["sources"][0]["truncated"] is True


def test_force_deletes_are_left_out_and_the_component_filter_applies() -> None:
    rows = [
        ledger.own_entry(
            ledger.REASON_FORCE_DELETE,
            key="pod-uid",
            component="engine",
            index=1,
            node="node-a",
            revision=None,
            now=at(10, 40),
        ).to_json(),
        entry(component="decoder").to_json(),
    ]
    assert build(audit=read(ledger.render(rows)), component="engine")["content"]["records"] == []
    decoder = build(audit=read(ledger.render(rows)), component="decoder")
    assert [r["component"] for r in decoder["content"]["records"]] == ["decoder"]


def test_sources_that_disagree_are_flagged_on_both_rows() -> None:
    rows = [entry(source_instance=2).to_json()]
    report = build(completed_record(), audit=read(ledger.render(rows)))
    assert table(report) == (
        "EVID     REQUEST/COMP   PHASE/STATE   WHEN           DETAIL\n"
        "AUTH     7c9e6679/E     Completed/!   09-28T10:31Z   CrossSourceIdenti...\n"
        "AUDIT    7c9e6679/E     Completed/!   09-28T10:31Z   CrossSourceIdenti...\n"
        "REPORT   7c9e6679/-     Partial/?     -              CrossSourceIdenti...\n"
    )
    failed = [entry(phase=ledger.PHASE_FAILED, outcome="surge pod wedged").to_json()]
    outcome = build(completed_record(), audit=read(ledger.render(failed)))
    assert [i["code"] for i in outcome["content"]["issues"]] == ["TerminalOutcomeConflict"]
    twice = [entry().to_json(), entry(reason="other").to_json()]
    duplicate = build(audit=read(ledger.render(twice)))
    assert duplicate["content"]["issues"] == [
        {"code": "DuplicateWithinSource", "evidence": "AuditHistory", "requestID": UUID}
    ]


def test_a_row_with_bad_fields_is_shown_invalid_with_its_first_issue() -> None:
    rows = [
        {
            "requestUUID": "../etc",
            "component": "prefill",
            "sourceInstance": -2,
            "phase": "Completed",
            "startedAt": "yesterday",
            "outcome": "migrated",
        }
    ]
    (record,) = build(audit=read(json.dumps({"entries": rows})))["content"]["records"]
    assert record["state"] == "Invalid"
    assert record["issues"] == [
        "ComponentInvalid",
        "RequestIDInvalid",
        "InstanceInvalid",
        "TimestampInvalid",
    ]
    assert history.rows(build(audit=read(json.dumps({"entries": rows}))))[1] == [
        "AUDIT",
        "INVALID/?",
        "Completed/!",
        "-",
        "ComponentInvalid",
    ]


def test_parent_summaries_are_their_own_rows() -> None:
    parent = [
        {
            "id": OLDER,
            "component": "engine",
            "instance": 1,
            "replacementInstance": 5,
            "mode": "Surge",
            "phase": "Completed",
            "requestedAt": "2026-09-28T07:00:00Z",
            "startedAt": "2026-09-28T07:00:01Z",
            "completedAt": "2026-09-28T07:10:00Z",
            "outcomeReason": "migrated",
            "events": [{"at": "2026-09-28T07:05:00Z"}],
        }
    ]
    report = build(audit=read(availability=history.ABSENT), parent=parent)
    assert table(report) == (
        "EVID     REQUEST/COMP   PHASE/STATE   WHEN           DETAIL\n"
        "PARENT   3f2a9c1e/E     Completed/T   09-28T07:10Z   migrated\n"
    )
    assert report["content"]["records"][0]["eventCount"] == 1


def test_an_empty_report() -> None:
    report = build(audit=read(availability=history.ABSENT))
    assert table(report) == (
        "EVID     REQUEST/COMP   PHASE/STATE   WHEN   DETAIL\n"
        "REPORT   -/-            Empty/?       -      -\n"
    )


@pytest.mark.parametrize(
    ("count", "codes"),
    [
        (300, ["OutputTruncated"]),
        (history.MAX_SCANNED + 100, ["AuthoritativeTruncated", "OutputTruncated"]),
    ],
)
def test_status_records_are_scanned_to_800_and_shown_to_200(count: int, codes: list[str]) -> None:
    records = [
        completed_record(
            requestUUID=f"{i:08d}-0000-4000-8000-000000000000",
            completedAt=f"2026-09-28T{11 + i // 3600:02d}:{i // 60 % 60:02d}:{i % 60:02d}Z",
        )
        for i in range(count)
    ]
    report = build(*records, audit=read(availability=history.ABSENT))
    assert len(report["content"]["records"]) == history.MAX_RECORDS
    assert [i["code"] for i in report["content"]["issues"]] == codes
    assert report["warnings"] == [{"code": "Truncated"}]
