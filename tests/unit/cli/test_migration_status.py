"""migration status's table and report from replicas as the API server returns them: OME's
tables byte for byte, the currency of the source, bounds and issue rows."""

from __future__ import annotations

from typing import Any

from cli.test_migration_start import isvc, replica, row
from omed.cli import migration_status
from omed.cli.instances import collect, render_table

UUID = "7c9e6679-7425-40de-944b-e07fc1f90ae7"


def record(phase: str, message: str, **extra: Any) -> dict[str, Any]:
    return {
        "requestUUID": UUID,
        "trigger": "Manual",
        "sourceInstance": 3,
        "phase": phase,
        "message": message,
        "reason": "token=secret-reason",
        "startedAt": "2026-09-28T10:12:04Z",
        "deadline": "2026-09-28T10:42:04Z",
        **extra,
    }


def table(*records: dict[str, Any], **status: Any) -> str:
    ir = replica([row(i) for i in range(4)], migrations=list(records), **status)
    report = migration_status.report(collect(isvc(), [ir]), component="engine")
    return render_table(migration_status.rows(report))


def test_the_tables_are_omes_byte_for_byte() -> None:
    assert table(
        record("SurgePending", "surge allocated; waiting for surge pods", surgeInstance=4)
    ) == (
        "SUBJECT/COMP      STATUS                        DETAIL\n"
        "7c9e6679/engine   SurgePending/Active/Current   MSG: surge allocated; w...\n"
    )
    assert table(record("Completed", "migrated to instance=4", surgeInstance=4)) == (
        "SUBJECT/COMP      STATUS                       DETAIL\n"
        "7c9e6679/engine   Completed/Terminal/Current   MSG: migrated to instan...\n"
    )
    assert table(
        record("Accepted", "waiting for migration capacity policy (no lifecycle.audit configured)")
    ) == (
        "SUBJECT/COMP      STATUS                    DETAIL\n"
        "7c9e6679/engine   Accepted/Active/Current   MSG: waiting for migrat...\n"
    )


def test_an_empty_report_and_a_stale_source() -> None:
    assert table() == "SUBJECT/COMP   STATUS          DETAIL\n-/-            Empty/Current   -\n"
    stale = table(record("Draining", "source draining"), observedGeneration=1)
    assert "Draining/Active/Stale" in stale
    assert stale.splitlines()[-1].split() == ["chat-engine", "Issue", "SourceGenerationStale"]


def test_the_report_never_carries_the_reason_and_is_bounded() -> None:
    many = [
        record("Failed", "x", requestUUID=f"{i:08d}-0000-4000-8000-000000000000")
        for i in range(900)
    ]
    ir = replica([row(0)], migrations=many)
    report = migration_status.report(collect(isvc(), [ir]), component=None)
    assert report["kind"] == "MigrationStatusReport"
    assert len(report["content"]["migrations"]) == migration_status.MAX_SHOWN
    assert report["state"] == "Partial"
    assert report["warnings"] == ["PartialData", "Truncated"]
    assert "secret-reason" not in repr(report)
    assert report["content"]["migrations"][0]["outcome"] == "Failed"
