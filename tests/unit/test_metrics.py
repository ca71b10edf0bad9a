"""The manager's /metrics as a scrape sees it: process and Python runtime series, the build
information, and no ``_created`` series, whatever the environment asks for.

The scraped text comes from the manager's own handler (:class:`omed.manager.http.MetricsServer` on
:data:`omed.metrics.REGISTRY`) with every module that registers metrics imported, and is
parsed with prometheus_client's own parser, as Prometheus would read it.
"""

from __future__ import annotations

import os
import platform
import subprocess
import sys

from aiohttp.test_utils import make_mocked_request
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

import omed.manager.process  # noqa: F401  (the composition root: every metric's module)
from omed import events
from omed.kube import client
from omed.manager.http import MetricsServer
from omed.manager.webhookprocess import WebhookProcess
from omed.metrics import BUILD_INFO, REGISTRY
from omed.version import VERSION
from omed.webhooks import metrics as webhook_metrics

PROCESS_SERIES = (
    "process_cpu_seconds_total",
    "process_resident_memory_bytes",
    "process_virtual_memory_bytes",
    "process_open_fds",
    "process_max_fds",
    "process_start_time_seconds",
)


async def scrape() -> list[Sample]:
    server = MetricsServer(address="127.0.0.1:0")
    answer = await server.metrics(make_mocked_request("GET", "/metrics"))  # type: ignore[arg-type]
    assert answer.status == 200
    assert answer.body is not None
    text = bytes(answer.body).decode()  # type: ignore[arg-type]
    return [s for family in text_string_to_metric_families(text) for s in family.samples]


async def test_metrics_have_the_process_and_python_runtime_series() -> None:
    samples = await scrape()
    names = {s.name for s in samples}
    assert set(PROCESS_SERIES) <= names
    by_name = {s.name: s for s in samples}
    assert by_name["process_resident_memory_bytes"].value > 0
    assert by_name["process_open_fds"].value >= 1
    info = by_name["python_info"]
    assert info.labels["version"] == platform.python_version()
    assert {s.labels["generation"] for s in samples if s.name == "python_gc_collections_total"} == {
        "0",
        "1",
        "2",
    }


async def test_build_info_names_the_version_the_cli_prints() -> None:
    builds = [s for s in await scrape() if s.name == BUILD_INFO]
    assert len(builds) == 1
    assert builds[0].labels == {"version": VERSION, "python_version": platform.python_version()}
    assert builds[0].value == 1


async def test_no_created_series_for_counters_and_histograms() -> None:
    # A series of each kind of prometheus_client object (a labelled counter and histogram,
    # which would carry a _created sample each) beside the collectors' families.
    events.DROPPED.labels(type="Normal")
    client.REQUEST_LATENCY.labels(verb="GET", host="127.0.0.1:6443")
    samples = await scrape()
    names = {s.name for s in samples}
    assert {"omed_events_dropped_total", "rest_client_request_duration_seconds_count"} <= names
    assert "controller_runtime_webhook_panics_total" in names
    assert [name for name in names if name.endswith("_created")] == []


def test_created_series_stay_off_when_the_environment_turns_them_on() -> None:
    """prometheus_client reads PROMETHEUS_DISABLE_CREATED_SERIES at import; omed turns them
    off in code, so a pod whose environment says otherwise still exports none."""
    program = (
        "from prometheus_client import Counter, Histogram, generate_latest\n"
        "from omed.metrics import REGISTRY\n"
        "Counter('c', 'doc', registry=REGISTRY).inc()\n"
        "Histogram('h', 'doc', registry=REGISTRY).observe(1)\n"
        "page = generate_latest(REGISTRY).decode()\n"
        "assert 'c_total 1.0' in page and 'h_count 1.0' in page, page\n"
        "print(sum(line.split(' ')[0].split('{')[0].endswith('_created')\n"
        "          for line in page.splitlines() if not line.startswith('#')))\n"
    )
    env = {**os.environ, "PROMETHEUS_DISABLE_CREATED_SERIES": "False"}
    done = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, env=env, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "0"


def test_the_webhook_processs_panics_reach_the_managers_metrics_and_never_go_back() -> None:
    """The webhook server runs in a child process; the manager exports its handler failures
    from its snapshots, and a child started again continues from the last one's count."""
    process = WebhookProcess.__new__(WebhookProcess)
    process._base, process._base_reads, process._base_errors, process._base_panics = {}, 0, 0, 0
    process._last = None

    def panics() -> float:
        value = REGISTRY.get_sample_value("controller_runtime_webhook_panics_total")
        assert value is not None
        return value

    webhook_metrics.COLLECTOR.panics = 0
    for snapshot in ({"panics": 1}, {"panics": 3}):
        process._last = snapshot
        process._apply(snapshot)
    assert panics() == 3
    process._fold()  # the child ended; the next one counts from 0
    process._apply({"panics": 2})
    assert panics() == 5
