"""omed.webhooks.metrics: plain numbers on the hot path, controller-runtime's families on
scrape."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, generate_latest

from omed.webhooks.metrics import WebhookCollector


def scrape(collector: WebhookCollector) -> dict[str, float]:
    registry = CollectorRegistry()
    registry.register(collector)
    samples: dict[str, float] = {}
    for line in generate_latest(registry).decode().splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            samples[name] = float(value)
    return samples


def test_answers_are_counted_by_code_and_timed_in_buckets() -> None:
    collector = WebhookCollector()
    series = collector.series("/validate-x")
    assert collector.series("/validate-x") is series  # one series per path, for good
    series.answered(200, 0.002)
    series.answered(200, 0.03)
    series.answered(415, 7.0)
    series.in_flight += 2
    got = scrape(collector)
    path = 'webhook="/validate-x"'
    assert got[f'controller_runtime_webhook_requests_total{{code="200",{path}}}'] == 2
    assert got[f'controller_runtime_webhook_requests_total{{code="415",{path}}}'] == 1
    bucket = "controller_runtime_webhook_latency_seconds_bucket"
    assert got[f'{bucket}{{le="0.005",{path}}}'] == 1
    assert got[f'{bucket}{{le="0.025",{path}}}'] == 1
    assert got[f'{bucket}{{le="0.05",{path}}}'] == 2
    assert got[f'{bucket}{{le="5",{path}}}'] == 2
    assert got[f'{bucket}{{le="10",{path}}}'] == 3
    assert got[f'{bucket}{{le="+Inf",{path}}}'] == 3
    assert got[f"controller_runtime_webhook_latency_seconds_count{{{path}}}"] == 3
    assert abs(got[f"controller_runtime_webhook_latency_seconds_sum{{{path}}}"] - 7.032) < 1e-9
    assert got[f"controller_runtime_webhook_requests_in_flight{{{path}}}"] == 2


def test_a_bound_counts_in_its_own_bucket() -> None:
    """Prometheus' ``le``: an observation equal to a bound is in that bound's bucket."""
    collector = WebhookCollector()
    collector.series("/p").answered(200, 0.01)
    got = scrape(collector)
    assert got['controller_runtime_webhook_latency_seconds_bucket{le="0.005",webhook="/p"}'] == 0
    assert got['controller_runtime_webhook_latency_seconds_bucket{le="0.01",webhook="/p"}'] == 1
