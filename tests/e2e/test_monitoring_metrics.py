"""Every series the chart's alerts and dashboard read is one the manager exports.

The PrometheusRule and the dashboard ConfigMap are rendered by the real helm from the
ome-resources chart; every alert expression, dashboard query and dashboard variable query is
parsed with a PromQL parser, and the metric name of each selector it holds is looked up on
the ``/metrics`` page of a manager run as the chart's Deployment runs it (the ``managers``
fixture: the chart installed, the chart's ServiceAccount, arguments and ConfigMap), once it
leads, parsed with prometheus_client's own parser. A histogram ``X`` is exported as
``X_bucket``, ``X_sum`` and ``X_count``; a counter family ``X`` as ``X_total``; a name a
recording rule of the chart defines counts as exported. Label matchers and ``by`` labels must
be labels of the series (or ones the scrape adds). A query that reads a series the manager
doesn't have would silently show nothing or never fire; this test fails instead.
"""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import promql_parser
import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

pytestmark = [pytest.mark.integration]

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "deploy" / "charts" / "ome-resources"
MONITORING = {
    "monitoring": {
        "serviceMonitor": {"enabled": True},
        "prometheusRule": {"enabled": True},
        "grafanaDashboard": {"enabled": True},
    }
}
SCRAPE_LABELS = frozenset({"job", "namespace", "pod", "instance", "container", "endpoint"})
"""Labels Prometheus adds to every series of a ServiceMonitor's or PodMonitor's target."""
GRAFANA = {
    "$__rate_interval": "5m",
    "$__interval": "1m",
    "$__range": "1h",
    "$job": "ome-controller-manager",
    "$namespace": "ome",
    "$pod": ".*",
}
"""Grafana's variables, as a panel's query sends them (a value of the same syntax)."""


@dataclass
class Exported:
    """What one ``/metrics`` page exports: sample names, and each one's label names."""

    labels: dict[str, set[str]] = field(default_factory=dict)

    @classmethod
    def parse(cls, text: str) -> Exported:
        exported = cls()
        for family in text_string_to_metric_families(text):
            # A family without samples (a labelled series not yet seen) still exports its
            # names; its labels are unknown until then.
            names = {
                "counter": [f"{family.name}_total"],
                "histogram": [
                    f"{family.name}_bucket",
                    f"{family.name}_sum",
                    f"{family.name}_count",
                ],
                "summary": [f"{family.name}_sum", f"{family.name}_count", family.name],
            }.get(family.type, [family.name])
            for each in names:
                exported.labels.setdefault(each, set())
            for sample in family.samples:
                exported.labels.setdefault(sample.name, set()).update(sample.labels)
        return exported


@dataclass(frozen=True)
class Selector:
    name: str
    labels: frozenset[str]


@dataclass(frozen=True)
class Grouping:
    labels: frozenset[str]
    selectors: tuple[Selector, ...]


def selectors_of(node: Any) -> Iterator[Selector]:
    found: list[Selector] = []

    def visit(n: Any) -> None:
        if isinstance(n, promql_parser.VectorSelector):
            matchers = n.matchers.matchers
            name = n.name or next((m.value for m in matchers if m.name == "__name__"), None)
            assert name, f"a selector without a metric name: {n}"
            found.append(
                Selector(name, frozenset(m.name for m in matchers if m.name != "__name__"))
            )

    promql_parser.walk(node, visit)
    yield from found


def read(expr: str) -> tuple[list[Selector], list[Grouping]]:
    """The selectors of ``expr``, and each ``by`` grouping with the selectors under it."""
    tree = promql_parser.parse(expr)
    groupings: list[Grouping] = []

    def visit(n: Any) -> None:
        by = promql_parser.AggModifierType.By
        if isinstance(n, promql_parser.AggregateExpr) and n.modifier and n.modifier.type == by:
            groupings.append(Grouping(frozenset(n.modifier.labels), tuple(selectors_of(n.expr))))

    promql_parser.walk(tree, visit)
    return list(selectors_of(tree)), groupings


def grafana_query(query: str) -> str:
    """A dashboard query as Grafana sends it: variables replaced, ``label_values(q, label)``
    (a variable's query) reduced to ``q``."""
    for variable, value in sorted(GRAFANA.items(), key=lambda kv: -len(kv[0])):
        query = query.replace(variable, value)
    match = re.fullmatch(r"label_values\((.*),\s*(\w+)\)", query.strip())
    return match.group(1) if match else query


def rendered() -> list[dict[str, Any]]:
    from omed_devcluster.binaries import ensure_binaries

    binaries = ensure_binaries()
    result = subprocess.run(
        [
            *(str(binaries.helm), "template", "ome", str(CHART), "--namespace", "ome"),
            *("--kube-version", binaries.kubernetes_version, "--values", "-"),
        ],
        input=yaml.safe_dump(MONITORING),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return [doc for doc in yaml.safe_load_all(result.stdout) if doc]


def queries() -> tuple[dict[str, str], set[str]]:
    """Where each query comes from -> the query; and the names recording rules define."""
    docs = rendered()
    found: dict[str, str] = {}
    recorded: set[str] = set()
    [rule] = [d for d in docs if d["kind"] == "PrometheusRule"]
    for group in rule["spec"]["groups"]:
        for item in group["rules"]:
            if "record" in item:
                recorded.add(item["record"])
            found[f"rule {item.get('alert') or item.get('record')}"] = item["expr"]
    [dashboard_map] = [
        d for d in docs if d["kind"] == "ConfigMap" and "dashboard" in d["metadata"]["name"]
    ]
    dashboard = json.loads(next(iter(dashboard_map["data"].values())))
    for panel in dashboard["panels"]:
        for target in panel.get("targets", ()):
            found[f"panel {panel['title']} {target['refId']}"] = grafana_query(target["expr"])
    for variable in dashboard["templating"]["list"]:
        if variable["type"] == "query":
            found[f"variable {variable['name']}"] = grafana_query(variable["query"]["query"])
    return found, recorded


async def test_every_series_the_alerts_and_the_dashboard_read_is_on_the_managers_metrics(
    managers: Any,
) -> None:
    wanted, recorded = queries()
    manager = managers.start()
    await manager.wait_ready(timeout=60)
    await managers.wait_until(manager.is_leader, timeout=30, what="the manager leads")
    await manager.wait_log("Starting workers", timeout=30)
    text = manager.metrics_text()
    assert text is not None
    exported = Exported.parse(text)

    missing: list[str] = []
    wrong_labels: list[str] = []
    read_names: set[str] = set()
    for where, expr in wanted.items():
        selectors, groupings = read(expr)
        assert selectors, f"{where} reads no series: {expr}"
        for selector in selectors:
            read_names.add(selector.name)
            if selector.name in recorded:
                continue
            if selector.name not in exported.labels:
                missing.append(f"{where}: {selector.name}")
                continue
            known = exported.labels[selector.name]
            unknown = selector.labels - known - SCRAPE_LABELS
            if known and unknown:
                wrong_labels.append(f"{where}: {selector.name} has no label {sorted(unknown)}")
        for grouping in groupings:
            under = set().union(*(exported.labels.get(s.name, set()) for s in grouping.selectors))
            unknown = grouping.labels - under - SCRAPE_LABELS
            if under and unknown:
                wrong_labels.append(f"{where}: by {sorted(unknown)}, which no series read has")
    assert missing == [], "series no manager exports:\n" + "\n".join(missing)
    assert wrong_labels == [], "\n".join(wrong_labels)
    # Not vacuous: the queries read the manager's series of every kind.
    assert len(wanted) >= 45 and len(read_names) >= 35
    for name in (
        "leader_election_master_status",
        "controller_runtime_terminal_reconcile_errors_total",
        "controller_runtime_webhook_panics_total",
        "certwatcher_read_certificate_errors_total",
        "workqueue_depth",
        "omed_events_dropped_total",
        "omed_inferencereplica_status_size_exceeded_total",
        "omed_inferencereplica_status_decode_failures_total",
        "controller_runtime_webhook_latency_seconds_bucket",
        "process_resident_memory_bytes",
        "omed_build_info",
    ):
        assert name in read_names, name


def test_the_checks_catch_a_series_no_manager_has() -> None:
    """The /metrics parser and the query reader, on a small scrape: a misspelt name and a label
    the series lacks are both seen."""
    page = (
        "# HELP workqueue_depth d\n# TYPE workqueue_depth gauge\n"
        'workqueue_depth{name="a",controller="a"} 1.0\n'
        "# HELP x_seconds d\n# TYPE x_seconds histogram\n"
        'x_seconds_bucket{le="1.0"} 1.0\nx_seconds_bucket{le="+Inf"} 1.0\n'
        "x_seconds_count 1.0\nx_seconds_sum 0.5\n"
        "# HELP y d\n# TYPE y counter\n"
    )
    exported = Exported.parse(page)
    assert set(exported.labels) >= {
        "workqueue_depth",
        "x_seconds_bucket",
        "x_seconds_count",
        "x_seconds_sum",
        "y_total",
    }
    selectors, groupings = read(
        'histogram_quantile(0.9, sum by (le, pod) (rate(x_seconds_bucket{job="j"}[5m])))'
        ' > 1 and sum by (queue) (workqueue_dept{controler="a"}) > 0'
    )
    assert [s.name for s in selectors] == ["x_seconds_bucket", "workqueue_dept"]
    assert "workqueue_dept" not in exported.labels
    assert [sorted(g.labels) for g in groupings] == [["le", "pod"], ["queue"]]
    assert grafana_query('label_values(omed_build_info{job="$job"}, namespace)') == (
        'omed_build_info{job="ome-controller-manager"}'
    )
