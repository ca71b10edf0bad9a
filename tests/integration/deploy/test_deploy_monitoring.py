"""The chart's monitoring objects, rendered by the real helm and judged by the real API server.

With the Prometheus Operator's CRDs (ServiceMonitor, PodMonitor, PrometheusRule; the published
manifests, read as test data from the shared fixtures and removed again at the end of this
module), every monitoring object the chart renders passes ``kubectl apply --dry-run=server``:
the CRDs' schemas check each field. Beside that: nothing is rendered by default; the
ServiceMonitor and the PodMonitor find the manager's metrics port (and only it); both at once
fail the render; every alert has a summary, a description and a runbook link to its own
heading in docs/metrics.md; promtool (Prometheus's own checker) finds the rendered rules valid
and lint-clean, and refuses a broken one; the dashboard is JSON in a ConfigMap Grafana's
sidecar picks up.
tests/e2e/test_monitoring_metrics.py checks that every series the alerts and the dashboard
read is one a running manager exports.
"""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from .charts import ROOT, Render, RenderError, failure_message, find, run_kubectl

pytestmark = pytest.mark.integration

OPERATOR_CRDS = Path("/work/shared/fixtures/crds")
"""The Prometheus Operator's CRDs (release v0.93.0), kept as test data outside the project."""
CRD_FILES = (
    "monitoring.coreos.com_servicemonitors.yaml",
    "monitoring.coreos.com_podmonitors.yaml",
    "monitoring.coreos.com_prometheusrules.yaml",
)
CRD_NAMES = tuple(f"crd/{f.removeprefix('monitoring.coreos.com_').removesuffix('.yaml')}"
                  f".monitoring.coreos.com" for f in CRD_FILES)  # fmt: skip
MONITORING_KINDS = ("ServiceMonitor", "PodMonitor", "PrometheusRule")
DASHBOARD = "ome-controller-manager-dashboard"
METRICS_DOC = ROOT / "docs" / "metrics.md"

ALL_ON: dict[str, Any] = {
    "monitoring": {
        "serviceMonitor": {"enabled": True, "labels": {"release": "prometheus"}},
        "prometheusRule": {"enabled": True, "alertLabels": {"team": "ml-infra"}},
        "grafanaDashboard": {"enabled": True, "annotations": {"grafana_folder": "OME"}},
    }
}
POD_MONITOR: dict[str, Any] = {
    "monitoring": {"podMonitor": {"enabled": True, "interval": "15s", "scrapeTimeout": "5s"}}
}


@pytest.fixture(scope="module")
def operator_crds(kubectl: str, kubeconfig: str) -> Iterator[None]:
    """The three CRDs, established; deleted (and waited for) when the module ends, so no
    other test file on this control plane sees them."""
    files = [arg for name in CRD_FILES for arg in ("-f", str(OPERATOR_CRDS / name))]
    run_kubectl(kubectl, kubeconfig, "create", *files)
    try:
        run_kubectl(
            kubectl, kubeconfig, "wait", "--for=condition=Established", "--timeout=60s", *CRD_NAMES
        )
        yield
    finally:
        run_kubectl(kubectl, kubeconfig, "delete", "--wait=true", "--ignore-not-found", *files)


def monitoring_objects(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        d
        for d in docs
        if d["kind"] in MONITORING_KINDS
        or (d["kind"] == "ConfigMap" and d["metadata"]["name"] == DASHBOARD)
    ]


def dry_run(kubectl: str, kubeconfig: str, objects: list[dict[str, Any]]) -> str:
    return run_kubectl(
        kubectl,
        kubeconfig,
        "apply",
        "--dry-run=server",
        "-f",
        "-",
        stdin=yaml.safe_dump_all(objects),
    )


def refused_dry_run(kubectl: str, kubeconfig: str, obj: dict[str, Any]) -> str:
    """A server dry run that must fail; kubectl's stderr."""
    result = subprocess.run(
        [kubectl, "--kubeconfig", kubeconfig, "apply", "--dry-run=server", "-f", "-"],
        input=yaml.safe_dump(obj),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode != 0, result.stdout
    return result.stderr


def test_nothing_is_rendered_by_default(render: Render) -> None:
    assert monitoring_objects(render()) == []


async def test_every_monitoring_object_passes_the_api_servers_validation(
    render: Render, kubectl: str, kubeconfig: str, namespace: str, operator_crds: None
) -> None:
    docs = monitoring_objects(render(ALL_ON, namespace=namespace))
    assert sorted(d["kind"] for d in docs) == ["ConfigMap", "PrometheusRule", "ServiceMonitor"]
    out = dry_run(kubectl, kubeconfig, docs)
    for line in (
        "servicemonitor.monitoring.coreos.com/ome-controller-manager created (server dry run)",
        "prometheusrule.monitoring.coreos.com/ome-controller-manager created (server dry run)",
        f"configmap/{DASHBOARD} created (server dry run)",
    ):
        assert line in out
    pods = monitoring_objects(render(POD_MONITOR, namespace=namespace))
    assert [d["kind"] for d in pods] == ["PodMonitor"]
    out = dry_run(kubectl, kubeconfig, pods)
    assert "podmonitor.monitoring.coreos.com/ome-controller-manager created (server dry run)" in out


async def test_the_server_refuses_what_the_crds_refuse(
    render: Render, kubectl: str, kubeconfig: str, namespace: str, operator_crds: None
) -> None:
    """The dry runs above judge the objects: a field the CRD doesn't know is refused."""
    monitor = find(render(ALL_ON, namespace=namespace), "ServiceMonitor")
    monitor["spec"]["endpoints"][0]["intervalSeconds"] = 30
    stderr = refused_dry_run(kubectl, kubeconfig, monitor)
    assert 'unknown field "spec.endpoints[0].intervalSeconds"' in stderr


def test_the_service_monitor_scrapes_the_metrics_service_only(render: Render) -> None:
    docs = render(ALL_ON)
    monitor = find(docs, "ServiceMonitor")
    spec = monitor["spec"]
    assert monitor["metadata"]["labels"]["release"] == "prometheus"
    assert spec["namespaceSelector"] == {"matchNames": ["ome"]}
    selected = [
        d
        for d in docs
        if d["kind"] == "Service"
        and spec["selector"]["matchLabels"].items() <= d["metadata"]["labels"].items()
    ]
    [endpoint] = spec["endpoints"]
    with_port = [
        s["metadata"]["name"]
        for s in selected
        if endpoint["port"] in {p["name"] for p in s["spec"]["ports"]}
    ]
    assert with_port == ["ome-controller-manager-metrics-service"]
    assert (endpoint["path"], endpoint["scheme"]) == ("/metrics", "http")
    assert (endpoint["interval"], endpoint["scrapeTimeout"]) == ("30s", "10s")
    assert endpoint["relabelings"] == [
        {"action": "replace", "targetLabel": "job", "replacement": "ome-controller-manager"}
    ]


def test_the_pod_monitor_scrapes_the_managers_metrics_port(render: Render) -> None:
    docs = render(POD_MONITOR)
    monitor = find(docs, "PodMonitor")
    pod = find(docs, "Deployment")["spec"]["template"]
    assert monitor["spec"]["selector"]["matchLabels"].items() <= pod["metadata"]["labels"].items()
    [endpoint] = monitor["spec"]["podMetricsEndpoints"]
    ports = {p["name"]: p["containerPort"] for p in pod["spec"]["containers"][0]["ports"]}
    assert ports[endpoint["port"]] == 8080
    assert (endpoint["interval"], endpoint["scrapeTimeout"]) == ("15s", "5s")
    assert endpoint["relabelings"][0]["replacement"] == "ome-controller-manager"


def test_a_service_monitor_and_a_pod_monitor_together_fail_the_render(
    render_error: RenderError,
) -> None:
    both = {"monitoring": {"serviceMonitor": {"enabled": True}, "podMonitor": {"enabled": True}}}
    assert failure_message(render_error(both)) == (
        "monitoring.serviceMonitor.enabled and monitoring.podMonitor.enabled are both true: "
        "turn on one, or Prometheus scrapes every pod twice"
    )


def github_anchor(heading: str) -> str:
    """The anchor GitHub gives a Markdown heading."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def alerts(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        rule for group in find(docs, "PrometheusRule")["spec"]["groups"] for rule in group["rules"]
    ]


def promtool_check(
    promtool: str, spec: dict[str, Any], path: Path
) -> subprocess.CompletedProcess[str]:
    """``promtool check rules --lint=all --lint-fatal`` of a PrometheusRule's spec (the
    ``groups`` document a Prometheus rule file is)."""
    path.write_text(yaml.safe_dump(spec), encoding="utf-8")
    return subprocess.run(
        [promtool, "check", "rules", "--lint=all", "--lint-fatal", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_promtool_finds_the_rendered_rules_valid(
    render: Render, promtool: str, tmp_path: Path
) -> None:
    spec = find(render(ALL_ON, namespace="ome-system"), "PrometheusRule")["spec"]
    result = promtool_check(promtool, spec, tmp_path / "rules.yaml")
    assert result.returncode == 0, result.stdout + result.stderr
    count = sum(len(group["rules"]) for group in spec["groups"])
    assert f"SUCCESS: {count} rules found" in result.stdout


def test_promtool_refuses_a_broken_rule(render: Render, promtool: str, tmp_path: Path) -> None:
    """The check above really parses: an expression cut short is refused."""
    spec = find(render(ALL_ON, namespace="ome-system"), "PrometheusRule")["spec"]
    rule = spec["groups"][0]["rules"][0]
    rule["expr"] = rule["expr"].rstrip()[:-2]
    result = promtool_check(promtool, spec, tmp_path / "rules.yaml")
    assert result.returncode != 0
    assert rule["alert"] in result.stdout + result.stderr


def test_every_alert_says_what_happened_and_links_its_runbook(render: Render) -> None:
    rules = alerts(render(ALL_ON, namespace="ome-system"))
    anchors = {
        github_anchor(line.lstrip("#"))
        for line in METRICS_DOC.read_text(encoding="utf-8").splitlines()
        if line.startswith("#")
    }
    names = [rule["alert"] for rule in rules]
    assert len(names) == len(set(names)) >= 12
    base = "https://github.com/sgl-project/ome/blob/main/docs/metrics.md"
    for rule in rules:
        annotations = rule["annotations"]
        assert annotations["summary"] and annotations["description"], rule["alert"]
        url, _, anchor = annotations["runbook_url"].partition("#")
        assert url == base
        assert anchor == rule["alert"].lower() and anchor in anchors, rule["alert"]
        assert rule["labels"]["severity"] in {"critical", "warning"}
        assert rule["labels"]["team"] == "ml-infra"
        # Every series the alert reads is the release's manager's.
        assert 'job="ome-controller-manager",namespace="ome-system"' in rule["expr"]
        assert "SELECTOR" not in rule["expr"]


def test_the_runbook_base_and_the_job_label_are_values(render: Render) -> None:
    values = {
        "monitoring": {
            "job": "omed",
            "serviceMonitor": {"enabled": True},
            "prometheusRule": {"enabled": True, "runbookBaseURL": "https://docs.example/metrics"},
        }
    }
    docs = render(values)
    rules = alerts(docs)
    assert rules[0]["annotations"]["runbook_url"] == (
        f"https://docs.example/metrics#{rules[0]['alert'].lower()}"
    )
    assert all('job="omed",namespace="ome"' in rule["expr"] for rule in rules)
    endpoint = find(docs, "ServiceMonitor")["spec"]["endpoints"][0]
    assert endpoint["relabelings"][0]["replacement"] == "omed"


def test_the_dashboard_is_json_for_grafanas_sidecar(render: Render) -> None:
    config = find(render(ALL_ON), "ConfigMap", DASHBOARD)
    assert config["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert config["metadata"]["annotations"] == {"grafana_folder": "OME"}
    [(key, text)] = config["data"].items()
    assert key == "ome-controller-manager.json"
    dashboard = json.loads(text)
    assert dashboard["uid"] == "ome-controller-manager"
    variables = [v["name"] for v in dashboard["templating"]["list"]]
    assert variables == ["datasource", "job", "namespace", "pod"]
    queries = [t["expr"] for p in dashboard["panels"] for t in p.get("targets", ())]
    assert len(queries) >= 30
    assert all('job="$job",namespace="$namespace"' in q for q in queries)
    elsewhere = find(
        render({"monitoring": {"grafanaDashboard": {"enabled": True, "namespace": "grafana"}}}),
        "ConfigMap",
        DASHBOARD,
    )
    assert elsewhere["metadata"]["namespace"] == "grafana"


def test_a_misspelt_monitoring_key_fails_naming_it(render_error: RenderError) -> None:
    stderr = render_error({"monitoring": {"serviceMonitor": {"enable": True}}})
    assert "at '/monitoring/serviceMonitor': additional properties 'enable' not allowed" in stderr
