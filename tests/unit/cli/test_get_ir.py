"""``kubectl ome get ir``: the table and the report, from InferenceReplicas as listed."""

from __future__ import annotations

import datetime as dt
import io
from typing import Any

from omed.cli import get_ir
from omed.cli.instances import render_table
from omed.cli.kubectl_ome import run

NOW = dt.datetime(2026, 9, 14, 20, 0, 0, tzinfo=dt.UTC)


def irep(
    name: str,
    *,
    namespace: str = "prod",
    parent: str | None = None,
    status: dict[str, Any] | None = None,
    created: str = "2026-09-14T19:15:00Z",
) -> dict[str, Any]:
    spec: dict[str, Any] = {"component": "engine", "replicas": 2}
    if parent is not None:
        spec["parentRef"] = {"name": parent, "uid": "isvc-uid"}
    return {
        "metadata": {"name": name, "namespace": namespace, "creationTimestamp": created},
        "spec": spec,
        "status": status or {},
    }


def test_a_parented_and_a_standalone_replica() -> None:
    parented = irep(
        "chat-engine",
        parent="chat",
        status={"readyReplicas": 2, "servingReplicas": 1, "instanceStatusEncoding": "ColumnarV2"},
    )
    standalone = irep("pool-a", created="2026-09-14T19:59:15Z")
    table = render_table(get_ir.rows([standalone, parented], now=NOW, all_namespaces=False))
    assert table.splitlines() == [
        "NAME          PARENT   COMPONENT   REPLICAS   READY   SERVING   ENCODING     AGE",
        "chat-engine   chat     engine      2          2       1         ColumnarV2   45m",
        "pool-a        -        engine      2          -       -         DenseV1      45s",
    ]


def test_all_namespaces_leads_with_the_namespace_and_sorts_by_it() -> None:
    rows = get_ir.rows(
        [irep("b", namespace="zeta"), irep("a", namespace="alpha", parent="a")],
        now=NOW,
        all_namespaces=True,
    )
    assert [row[:3] for row in rows] == [
        ["NAMESPACE", "NAME", "PARENT"],
        ["alpha", "a", "a"],
        ["zeta", "b", "-"],
    ]


def test_odd_objects_become_dashes_not_errors() -> None:
    odd = {"metadata": {"name": "x"}, "spec": {"parentRef": "chat", "replicas": True}, "status": 1}
    (_, row) = get_ir.rows([odd], now=NOW, all_namespaces=False)
    assert row == ["x", "-", "-", "-", "-", "-", "DenseV1", "<unknown>"]
    bad = irep("y", status={"instanceStatusEncoding": "Nope"})
    assert get_ir.rows([bad], now=NOW, all_namespaces=False)[1][6] == "-"


def test_ages_as_kubectl_prints_them() -> None:
    def at(seconds: int) -> str:
        then = (NOW - dt.timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")
        return get_ir.age(then, now=NOW)

    assert [at(s) for s in (5, 119, 130, 600, 3 * 3600 + 60, 9 * 3600, 50 * 3600, 30 * 86400)] == [
        "5s",
        "119s",
        "2m10s",
        "10m",
        "3h1m",
        "9h",
        "2d2h",
        "30d",
    ]


def test_each_step_of_kubectls_duration_table_at_its_edges() -> None:
    """kubectl's HumanDuration: the unit below is shown under 10m, 8h, 8d and 8y, a unit alone
    up to 180m, 48h and 2 years; a zero remainder is left off."""
    minute, hour, day, year = 60, 3600, 86400, 365 * 86400
    cases = {
        0: "0s",
        2 * minute: "2m",
        10 * minute - 1: "9m59s",
        180 * minute - 1: "179m",
        180 * minute: "3h",
        8 * hour - minute: "7h59m",
        48 * hour - 1: "47h",
        48 * hour: "2d",
        8 * day - hour: "7d23h",
        2 * year - 1: "729d",
        2 * year + day: "2y1d",
        8 * year - day: "7y364d",
        8 * year + day: "8y",
        40 * year: "40y",
    }
    assert {s: get_ir.human_duration(s) for s in cases} == cases


def test_the_report_keeps_every_value_and_null_for_a_standalone_parent() -> None:
    doc = get_ir.report([irep("pool-a"), irep("chat-engine", parent="chat")])
    assert doc["kind"] == "InferenceReplicaListReport"
    assert [(i["name"], i["parent"]) for i in doc["items"]] == [
        ("chat-engine", "chat"),
        ("pool-a", None),
    ]


async def test_flags_are_checked_before_any_read() -> None:
    err = io.StringIO()
    code = await run(["get", "ir", "-A", "-n", "prod"], out=io.StringIO(), err=err)
    assert (code, err.getvalue()) == (1, "error: -A and -n can't be used together\n")
    err = io.StringIO()
    assert await run(["get", "pods"], out=io.StringIO(), err=err) == 1
    assert err.getvalue() == (
        'error: unknown subcommand "pods" for "kubectl ome get": pods is not a subcommand '
        "(this build has ir)\n"
    )
    err = io.StringIO()
    assert await run(["get", "ir", "-o", "wide"], out=io.StringIO(), err=err) == 1
    assert err.getvalue() == (
        'error: unknown output format "wide" for get ir (use table, name, json, yaml)\n'
    )
    err = io.StringIO()
    assert await run(["get", "ir", "x", "-A"], out=io.StringIO(), err=err) == 1
    assert err.getvalue() == (
        "error: a name can't be given with -A: name the namespace with -n instead\n"
    )


async def test_plan_checks_its_flags_before_any_read() -> None:
    err = io.StringIO()
    argv = ["instance", "plan", "chat", "--component", "encoder"]
    assert await run(argv, out=io.StringIO(), err=err) == 1
    assert err.getvalue() == (
        'error: invalid --component "encoder": must be one of engine, decoder, router\n'
    )
    err = io.StringIO()
    argv = ["instance", "plan", "chat", "--component", "engine", "-o", "wide"]
    assert await run(argv, out=io.StringIO(), err=err) == 1
    assert err.getvalue().startswith('error: unknown output format "wide" for instance plan')


async def test_help_has_examples() -> None:
    out = io.StringIO()
    assert await run(["instance", "plan", "--help"], out=out, err=io.StringIO()) == 0
    assert "kubectl ome instance plan chat --component engine -n prod" in out.getvalue()
    out = io.StringIO()
    assert await run(["get", "ir", "--help"], out=out, err=io.StringIO()) == 0
    assert "kubectl ome get ir -A" in out.getvalue()
